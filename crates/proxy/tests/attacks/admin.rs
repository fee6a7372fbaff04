//! The admin listener: a head dripped slowly, more connections than
//! `admin.connections`, and an oversized request. The admin API must cut each
//! off, answer again afterwards, and never disturb the proxy listener.

use crate::harness::{DEADLINE, Setup, Target, exchange, read_until_close, report};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// The admin API answers `GET /status` with 200.
async fn admin_ok(t: &Target) -> Result<(), String> {
    let got = tokio::time::timeout(
        DEADLINE,
        exchange(
            t.admin.unwrap(),
            b"GET /status HTTP/1.1\r\nHost: a\r\n\r\n",
            Duration::from_secs(15),
        ),
    )
    .await
    .map_err(|_| format!("the admin API did not answer within {DEADLINE:?}"))?;
    if got.finals() != [200] {
        return Err(format!("the admin API answered {}", got.describe()));
    }
    Ok(())
}

/// The admin API and the proxy both answer after an attack.
async fn after(t: &Target, name: &str, failures: &mut Vec<String>) {
    if let Err(why) = admin_ok(t).await {
        failures.push(format!("{name}: {why}"));
    }
    if let Err(why) = t.check(name).await {
        failures.push(why);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_listener_attacks() {
    let mut setup = Setup::new("admin");
    setup.admin = Some("timeout = \"1s\"\nconnections = 4\n".into());
    let t = Target::start(setup).await;
    let admin = t.admin.unwrap();
    let mut failures = Vec::new();

    // A head dripped a byte every 100 ms: cut off by admin.timeout.
    let name = "admin: head dripped a byte every 100 ms (timeout 1 s)";
    let mut s = TcpStream::connect(admin).await.unwrap();
    let start = Instant::now();
    let mut closed = false;
    for b in b"GET /status HTTP/1.1\r\nX-Attackmarker: "
        .iter()
        .chain(b"a".repeat(10_000).iter())
    {
        if s.write_all(&[*b]).await.is_err() {
            closed = true;
            break;
        }
        let (_, c) = read_until_close(&mut s, Duration::from_millis(100)).await;
        if c {
            closed = true;
            break;
        }
        if start.elapsed() > DEADLINE {
            break;
        }
    }
    if !closed {
        failures.push(format!("{name}: still open after {DEADLINE:?}"));
    }
    after(&t, name, &mut failures).await;

    // 64 connections that send nothing, against 4 slots: the proxy listener is
    // served all along; once the flood goes away, the admin API answers again.
    let name = "admin: 64 silent connections against 4 slots";
    let mut flood = Vec::new();
    for _ in 0..64 {
        flood.push(TcpStream::connect(admin).await.unwrap());
    }
    if let Err(why) = t.check(&format!("{name} (during)")).await {
        failures.push(why);
    }
    // The first four are cut off by the timeout.
    for s in flood.iter_mut().take(4) {
        let (_, c) = read_until_close(s, DEADLINE).await;
        if !c {
            failures.push(format!("{name}: a silent admin connection stayed open"));
            break;
        }
    }
    drop(flood);
    after(&t, name, &mut failures).await;

    // A 1 MiB head, and a large body on a GET.
    let name = "admin: a 1 MiB request head";
    let mut big = b"GET /metrics HTTP/1.1\r\nHost: a\r\n".to_vec();
    for _ in 0..16 * 1024 {
        big.extend_from_slice(
            b"X-Attackmarker: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n",
        );
    }
    big.extend_from_slice(b"\r\n");
    let got = exchange(admin, &big, Duration::from_secs(15)).await;
    if !got.closed || got.finals().contains(&200) {
        failures.push(format!(
            "{name}: expected a refusal and a close; observed {}",
            got.describe()
        ));
    }
    after(&t, name, &mut failures).await;

    let name = "admin: GET with a 4 MiB body";
    let mut req = b"GET /status HTTP/1.1\r\nHost: a\r\nContent-Length: 4194304\r\n\r\n".to_vec();
    req.extend(std::iter::repeat_n(b'a', 4 << 20));
    let got = exchange(admin, &req, Duration::from_secs(15)).await;
    if !got.closed {
        failures.push(format!(
            "{name}: the connection stayed open; observed {}",
            got.describe()
        ));
    }
    after(&t, name, &mut failures).await;

    report("admin listener", &failures);
}
