//! Upstreams and SIGHUP, through the real binary: a reload moves traffic to the
//! servers the file names now, a broken file keeps the pools in force, a server
//! that stays keeps its pooled connection, the health checks of the old pools
//! stop; and upstream events reach the error log file.

mod common;

use common::*;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Requests on new connections until one reaches `backend` (the reload is in
/// force), within 10 s.
async fn wait_until_served_by(listen: SocketAddr, backend: &Backend) {
    let before = backend.requests().len();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = get(listen, "/", "").await;
        assert_eq!(r.status, 200, "{}", r.text());
        if backend.requests().len() > before {
            return;
        }
        assert!(Instant::now() < deadline, "the reload never took effect");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn write_config(dir: &TempDir, text: &str) {
    // Written aside and renamed, so a reload never reads half a file.
    let tmp = dir.path("palisade.toml.new");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, dir.path("palisade.toml")).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_sends_traffic_to_the_new_upstream_and_a_broken_file_keeps_it() {
    let a = Backend::start().await;
    let b = Backend::start().await;
    let dir = TempDir::new("upstream-reload");
    let listen = loopback(free_port());
    // Two workers: each has its own copy of the pools to swap.
    let extra = "[server]\nworker_threads = 2\n[logs]\nerror_log = \"error.log\"\n";
    let p = Palisade::start(&dir, &basic_config(listen, a.addr, extra), listen);
    assert_eq!(get(listen, "/", "").await.status, 200);
    assert_eq!(a.requests().len(), 1);

    write_config(&dir, &basic_config(listen, b.addr, extra));
    p.sighup();
    wait_until_served_by(listen, &b).await;
    let on_a = a.requests().len();
    for _ in 0..8 {
        assert_eq!(get(listen, "/", "").await.status, 200);
    }
    assert_eq!(
        a.requests().len(),
        on_a,
        "a request went to the old upstream"
    );

    // A bad value of an upstream key: the file is refused, B stays.
    let broken = basic_config(listen, a.addr, extra).replace(
        "connect_timeout = \"2s\"\n",
        "connect_timeout = \"2s\"\nbalance = \"fastest\"\n",
    );
    write_config(&dir, &broken);
    p.sighup();
    let line = wait_for_line(&dir.path("error.log"), Duration::from_secs(10), |l| {
        l.contains("reload failed")
    })
    .expect("no reload error in the error log");
    let file = dir.path("palisade.toml");
    assert!(
        line.contains(&file.display().to_string()) && line.contains("balance"),
        "the error names neither the file nor the key: {line}"
    );
    let on_b = b.requests().len();
    for _ in 0..4 {
        assert_eq!(get(listen, "/", "").await.status, 200);
    }
    assert_eq!(a.requests().len(), on_a, "the broken file was applied");
    assert_eq!(b.requests().len(), on_b + 4);

    // A file that parses but names a pool no route can use is refused too.
    let invalid = format!(
        "{}[[route]]\nupstream = \"nowhere\"\n",
        basic_config(listen, a.addr, extra)
    );
    write_config(&dir, &invalid);
    p.sighup();
    wait_for_line(&dir.path("error.log"), Duration::from_secs(10), |l| {
        l.contains("reload failed") && l.contains("nowhere")
    })
    .expect("no error for the route naming no upstream");
    assert_eq!(get(listen, "/", "").await.status, 200);
    assert_eq!(a.requests().len(), on_a);
    assert!(!p.stderr_text().contains("panicked"), "{}", p.stderr_text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_stays_keeps_its_connection_and_old_health_checks_stop() {
    let a = Backend::start().await;
    let dir = TempDir::new("upstream-reload-keep");
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    let head = format!(
        "[server]\nworker_threads = 1\n[admin]\naddress = \"{admin}\"\n[[listener]]\naddress = \"{listen}\"\n"
    );
    let checked = format!(
        "{head}[[upstream]]\nname = \"app\"\nservers = [\"{}\"]\n[upstream.health_check]\ntype = \"tcp\"\ninterval = \"100ms\"\n",
        a.addr
    );
    let p = Palisade::start(&dir, &checked, listen);
    let checks = "palisade_upstream_health_checks_total";
    let deadline = Instant::now() + Duration::from_secs(10);
    while metric(admin, checks).await < 2.0 {
        assert!(Instant::now() < deadline, "no health checks ran");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(get(listen, "/", "").await.status, 200);
    let connects = "palisade_upstream_connects_total";
    assert_eq!(metric(admin, connects).await, 1.0);

    // Same server, other settings, no health checks.
    let unchecked = format!(
        "{head}[[upstream]]\nname = \"app\"\nservers = [\"{}\"]\nread_timeout = \"7s\"\n",
        a.addr
    );
    write_config(&dir, &unchecked);
    p.sighup();
    wait_for_line(&p.stderr, Duration::from_secs(10), |l| {
        l.contains("reloaded") && l.contains("1 upstream pool(s)")
    })
    .expect("the reload was not logged");
    // Any check under way when the reload came has finished by now.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = metric(admin, checks).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        metric(admin, checks).await,
        after,
        "the old pool's health checks still run"
    );
    // The pooled connection to the server carried over serves the next request.
    assert_eq!(get(listen, "/", "").await.status, 200);
    assert_eq!(
        metric(admin, connects).await,
        1.0,
        "a new connection was opened"
    );
    assert_eq!(a.requests().len(), 2);
    // A section a reload does not apply is reported as needing a restart.
    let other_dns = format!("{unchecked}[dns]\nmin_ttl = \"2s\"\n");
    write_config(&dir, &other_dns);
    p.sighup();
    wait_for_line(&p.stderr, Duration::from_secs(10), |l| {
        l.contains("[dns] changed") && l.contains("take effect on restart")
    })
    .expect("no restart notice for [dns]");
}

#[tokio::test]
async fn upstream_events_reach_the_error_log_file() {
    let a = Backend::start().await;
    let dead = loopback(free_port());
    let dir = TempDir::new("upstream-events");
    let listen = loopback(free_port());
    let cfg = format!(
        "[server]\nworker_threads = 1\n[logs]\nerror_log = \"error.log\"\n[[listener]]\naddress = \"{listen}\"\n[[upstream]]\nname = \"app\"\nservers = [\"{dead}\", \"{}\"]\nmax_fails = 1\nfail_timeout = \"30s\"\n",
        a.addr
    );
    let p = Palisade::start(&dir, &cfg, listen);
    // The first request tries the dead server first (round robin starts there).
    for _ in 0..2 {
        assert_eq!(get(listen, "/", "").await.status, 200);
    }
    let log = dir.path("error.log");
    let out = wait_for_line(&log, Duration::from_secs(10), |l| {
        l.contains("[error] palisade: upstream app: server") && l.contains("is out for 30s")
    })
    .expect("the server taken out is not in the error log");
    assert!(out.contains(&dead.to_string()), "{out}");
    wait_for_line(&log, Duration::from_secs(10), |l| {
        l.contains("[warn] palisade: upstream app:") && l.contains("trying the next server")
    })
    .expect("the failover is not in the error log");
    // The operator log on standard error has them too.
    assert!(p.stderr_text().contains("is out for 30s"));
}
