//! `[access]`: client address allow and deny lists, decided when a connection is
//! accepted (a refused connection is closed before anything is read or answered),
//! counted, reloaded by SIGHUP, and checked entry by entry at load.

mod common;

use common::*;
use std::time::Duration;

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n";

fn config(
    listen: std::net::SocketAddr,
    backend: std::net::SocketAddr,
    admin: std::net::SocketAddr,
) -> String {
    basic_config(
        listen,
        backend,
        &format!(
            "[access]\nallow_files = [\"allow.txt\"]\ndeny_files = [\"deny.txt\"]\n\n[admin]\naddress = \"{admin}\"\n"
        ),
    )
}

async fn denied_count(admin: std::net::SocketAddr) -> u64 {
    let r = send_raw(
        admin,
        b"GET /metrics HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    r.text()
        .lines()
        .find_map(|l| l.strip_prefix("palisade_connections_denied_total "))
        .expect("the metric")
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deny_list_closes_connections_and_reload_lifts_it() {
    let backend = Backend::start().await;
    let dir = TempDir::new("access");
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    std::fs::write(dir.path("allow.txt"), "# nobody yet\n").unwrap();
    std::fs::write(
        dir.path("deny.txt"),
        "# the test client\n127.0.0.0/8\n::1\n",
    )
    .unwrap();
    let p = Palisade::start(&dir, &config(listen, backend.addr, admin), listen);

    // The client's connection is closed without a response; the backend sees nothing.
    for _ in 0..3 {
        assert!(
            send_raw(listen, GET).await.is_err(),
            "a refused client got an answer"
        );
    }
    assert_eq!(backend.requests().len(), 0);
    // Palisade::start's own readiness probe was refused too.
    assert!(denied_count(admin).await >= 3);

    // An allow entry wins over the deny list, after a reload.
    std::fs::write(dir.path("allow.txt"), "127.0.0.1\n").unwrap();
    p.sighup();
    assert!(
        wait_for_line(&p.stderr, Duration::from_secs(20), |l| l
            .contains("reloaded"))
        .is_some(),
        "no reload: {}",
        p.stderr_text()
    );
    let r = send_raw(listen, GET).await.expect("allowed now");
    assert_eq!(r.status, 200);
    assert_eq!(backend.requests().len(), 1);

    // A reload with a bad entry keeps the lists in force.
    std::fs::write(dir.path("allow.txt"), "127.0.0.1\n300.1.1.1\n").unwrap();
    p.sighup();
    assert!(
        wait_for_line(&p.stderr, Duration::from_secs(20), |l| l
            .contains("reload failed"))
        .is_some(),
        "{}",
        p.stderr_text()
    );
    assert!(
        p.stderr_text().contains("allow.txt:2"),
        "{}",
        p.stderr_text()
    );
    assert_eq!(
        send_raw(listen, GET).await.expect("still allowed").status,
        200
    );
}

#[test]
fn bad_entries_are_refused_at_start_naming_file_and_line() {
    let dir = TempDir::new("access-check");
    std::fs::write(dir.path("allow.txt"), "").unwrap();
    std::fs::write(dir.path("deny.txt"), "10.0.0.1\n\n# ok\n10.0.0.0/33\n").unwrap();
    let cfg = dir.path("palisade.toml");
    std::fs::write(&cfg, config(loopback(1), loopback(2), loopback(3))).unwrap();
    let out = palisade_check("--config", &cfg);
    let text = output_text(&out);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("deny.txt:4") && text.contains("10.0.0.0/33"),
        "{text}"
    );
}
