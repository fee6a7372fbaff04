//! Worker threads: each has its own listening socket (`SO_REUSEPORT`), so the
//! kernel spreads connections over all of them, and every connection is served.
//! `palisade_worker_connections_total{worker="N"}` on the admin listener shows where
//! connections were accepted.

mod common;

use common::*;
use std::time::{Duration, Instant};

/// The `palisade_worker_connections_total` counters, worker 0 first.
async fn worker_connections(admin: std::net::SocketAddr) -> Vec<u64> {
    let r = send_raw(
        admin,
        b"GET /metrics HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200);
    let mut out = Vec::new();
    for line in r.text().lines() {
        if let Some(rest) = line.strip_prefix("palisade_worker_connections_total{worker=\"") {
            let (index, value) = rest.split_once("\"} ").unwrap();
            assert_eq!(index.parse::<usize>().unwrap(), out.len(), "{line}");
            out.push(value.parse().unwrap());
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_are_spread_over_every_worker() {
    const WORKERS: usize = 4;
    const CONNECTIONS: usize = 64;
    let backend = Backend::start().await;
    let dir = TempDir::new("workers");
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    let config = basic_config(
        listen,
        backend.addr,
        &format!("[server]\nworker_threads = {WORKERS}\n\n[admin]\naddress = \"{admin}\"\n"),
    );
    let p = Palisade::start(&dir, &config, listen);
    // The port accepts as soon as it is bound; the line saying so may come a moment
    // later on a busy machine.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !p.stderr_text().contains("4 worker thread(s)") && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        p.stderr_text().contains("4 worker thread(s)"),
        "{}",
        p.stderr_text()
    );
    // The readiness probe of Palisade::start is one connection (accepted and
    // counted some time after it was made).
    let before = 1;

    // Many connections at once, each from its own source port: the kernel hashes
    // each onto one of the workers' sockets.
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..CONNECTIONS {
        tasks.spawn(async move {
            send_raw(
                listen,
                format!("GET /c{i} HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n")
                    .as_bytes(),
            )
            .await
            .map(|r| r.status)
        });
    }
    let mut ok = 0;
    while let Some(r) = tasks.join_next().await {
        assert_eq!(r.unwrap().unwrap(), 200);
        ok += 1;
    }
    assert_eq!(ok, CONNECTIONS);

    // A connection is counted when it is accepted, before its request is read.
    let deadline = Instant::now() + Duration::from_secs(10);
    let counts = loop {
        let c = worker_connections(admin).await;
        if c.iter().sum::<u64>() >= before + CONNECTIONS as u64 || Instant::now() > deadline {
            break c;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(counts.len(), WORKERS, "one counter per worker: {counts:?}");
    assert_eq!(
        counts.iter().sum::<u64>(),
        before + CONNECTIONS as u64,
        "every connection counted once: {counts:?}"
    );
    // With 64 connections hashed over 4 sockets, a worker left without any has a
    // probability of about 4 * (3/4)^64, below 1e-7.
    assert!(
        counts.iter().all(|&n| n > 0),
        "every worker accepted connections: {counts:?}"
    );
    let requests = backend.requests();
    assert_eq!(
        requests.len(),
        CONNECTIONS,
        "every request reached the backend"
    );
}

#[test]
fn a_port_held_by_another_instance_is_refused() {
    // The second Palisade on the same address must fail as before, not share the
    // port through SO_REUSEPORT.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let backend = rt.block_on(Backend::start());
    let dir = TempDir::new("workers-port");
    let listen = loopback(free_port());
    let config = basic_config(listen, backend.addr, "[server]\nworker_threads = 2\n");
    let _first = Palisade::start(&dir, &config, listen);
    let dir2 = TempDir::new("workers-port-2");
    std::fs::write(dir2.path("palisade.toml"), &config).unwrap();
    let out = std::process::Command::new(palisade_bin())
        .env("PALISADE_STORE", dir2.path("store"))
        .arg("run")
        .arg("--config")
        .arg(dir2.path("palisade.toml"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = output_text(&out);
    assert!(err.contains(&format!("cannot listen on {listen}")), "{err}");
}
