//! HTTP/1 front-end behaviour around the keep-alive wait, through the real binary.

mod common;

use common::*;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_keepalive_connections_close_when_shutdown_begins() {
    let backend = Backend::start().await;
    let dir = TempDir::new("idle-stop");
    let listen = loopback(free_port());
    let extra = "[server]\ngrace_period = \"10s\"\n";
    let mut p = Palisade::start(&dir, &basic_config(listen, backend.addr, extra), listen);
    // Two connections, each idle after a few requests.
    let mut clients = Vec::new();
    for _ in 0..2 {
        let mut c = TcpStream::connect(listen).await.unwrap();
        for _ in 0..3 {
            c.write_all(b"GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
                .await
                .unwrap();
            let r = read_response(&mut c).await.unwrap();
            assert_eq!(r.status, 200);
        }
        clients.push(c);
    }
    let stop_at = Instant::now();
    p.terminate();
    for mut c in clients {
        let mut rest = Vec::new();
        let n = tokio::time::timeout(Duration::from_secs(5), c.read_to_end(&mut rest))
            .await
            .expect("idle connection closed at shutdown")
            .unwrap_or(0);
        assert_eq!(n, 0, "nothing more was sent: {rest:?}");
    }
    let status = tokio::task::spawn_blocking(move || p.wait_exit(Duration::from_secs(10)))
        .await
        .unwrap();
    assert!(status.success());
    // Far below the 10 s grace period: idle connections did not hold it.
    assert!(
        stop_at.elapsed() < Duration::from_secs(9),
        "idle connections held the grace period"
    );
}

/// Reads until the peer closes (or 5 s pass); returns what arrived.
async fn read_until_close(c: &mut TcpStream) -> Vec<u8> {
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), c.read_to_end(&mut rest))
        .await
        .expect("connection closed");
    rest
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keepalive_and_header_timeouts() {
    let backend = Backend::start().await;
    let dir = TempDir::new("front-timeouts");
    let listen = loopback(free_port());
    let extra = "[server]\nclient_header_timeout = \"400ms\"\nkeepalive_timeout = \"1s\"\n";
    let _p = Palisade::start(&dir, &basic_config(listen, backend.addr, extra), listen);

    // Requests spaced closer than the keep-alive timeout keep the connection open
    // for longer than one timeout in total: each wait has its own deadline.
    let mut c = TcpStream::connect(listen).await.unwrap();
    for _ in 0..5 {
        c.write_all(b"GET /k HTTP/1.1\r\nHost: a\r\n\r\n")
            .await
            .unwrap();
        assert_eq!(read_response(&mut c).await.unwrap().status, 200);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // Then idle past the keep-alive timeout: closed without a word.
    assert_eq!(read_until_close(&mut c).await, b"");

    // A head that starts arriving during the keep-alive wait gets the (shorter)
    // header timeout from its first byte: 408.
    let extra = "[server]\nclient_header_timeout = \"300ms\"\nkeepalive_timeout = \"10s\"\n";
    let dir = TempDir::new("front-timeouts-2");
    let listen = loopback(free_port());
    let _p = Palisade::start(&dir, &basic_config(listen, backend.addr, extra), listen);
    let mut c = TcpStream::connect(listen).await.unwrap();
    c.write_all(b"GET /k HTTP/1.1\r\nHost: a\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(read_response(&mut c).await.unwrap().status, 200);
    tokio::time::sleep(Duration::from_millis(100)).await;
    c.write_all(b"GET /k HTTP/1.1\r\nHost: a\r\n")
        .await
        .unwrap();
    // (The keep-alive timeout is 10 s, so a 408 within read_until_close's 5 s can
    // only come from the header timeout.)
    let rest = read_until_close(&mut c).await;
    assert!(rest.starts_with(b"HTTP/1.1 408 "), "{rest:?}");

    // A new connection that sends nothing is closed after the header timeout.
    let mut c = TcpStream::connect(listen).await.unwrap();
    let t = Instant::now();
    assert_eq!(read_until_close(&mut c).await, b"");
    // Not before the header timeout.
    assert!(t.elapsed() >= Duration::from_millis(250));
}
