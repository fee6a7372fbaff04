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
    assert!(
        stop_at.elapsed() < Duration::from_secs(5),
        "idle connections did not hold the grace period"
    );
}
