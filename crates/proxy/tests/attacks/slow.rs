//! Slow clients: heads and bodies dripped a byte at a time, a reader that never
//! takes its response, and the case: 500 drippers against a proxy that
//! allows 300 connections, while normal clients must still be served.

use crate::harness::{DEADLINE, Setup, Target, fd_limit, read_until_close, report};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Memory bound for the 500-dripper case, in MiB.
pub const BOUND_DRIP_MIB: u64 = 128;

fn setup(name: &'static str) -> Setup {
    let mut s = Setup::new(name);
    s.big = true;
    s.server = "client_header_timeout = \"2s\"\nclient_body_timeout = \"30s\"\nclient_body_min_rate = 1000\nclient_body_min_rate_grace = \"1s\"\nsend_timeout = \"2s\"\nkeepalive_timeout = \"2s\"\n".into();
    s
}

/// Drips `prefix`, then the bytes of `drip` one at a time every `every`, until the
/// proxy answers or closes, or `limit` passes. Returns what the proxy sent and
/// whether the connection ended.
async fn drip(
    addr: std::net::SocketAddr,
    prefix: &[u8],
    drip: &[u8],
    every: Duration,
    limit: Duration,
) -> (Vec<u8>, bool) {
    let Ok(mut s) = TcpStream::connect(addr).await else {
        return (Vec::new(), true);
    };
    if s.write_all(prefix).await.is_err() {
        return (Vec::new(), true);
    }
    let start = Instant::now();
    let mut got = Vec::new();
    for b in drip.iter().cycle() {
        if start.elapsed() > limit {
            return (got, false);
        }
        if s.write_all(&[*b]).await.is_err() {
            break;
        }
        let (more, closed) = read_until_close(&mut s, every).await;
        got.extend_from_slice(&more);
        if closed {
            return (got, true);
        }
    }
    let (more, closed) = read_until_close(&mut s, Duration::from_secs(5)).await;
    got.extend_from_slice(&more);
    (got, closed)
}

/// 50 slowloris heads and 50 dripped bodies at once: each is answered 408 and
/// closed; nothing reaches the backend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_heads_and_bodies() {
    let t = Target::start(setup("slow-drip")).await;
    let mut failures = Vec::new();

    let cases: [(&str, &[u8], &[u8]); 2] = [
        (
            "slowloris: 50 heads dripped a byte every 100 ms (header timeout 2 s)",
            b"GET /slowloris HTTP/1.1\r\nHost: a\r\n",
            b"X-Attackmarker: attackmarker\r\n",
        ),
        (
            "body drip: 50 bodies dripped a byte every 100 ms (minimum rate 1,000 B/s)",
            b"POST /body-drip HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\n",
            b"q=attackmarker&",
        ),
    ];
    for (name, prefix, body) in cases {
        let tasks: Vec<_> = (0..50)
            .map(|_| {
                let addr = t.http;
                tokio::spawn(async move {
                    drip(addr, prefix, body, Duration::from_millis(100), DEADLINE).await
                })
            })
            .collect();
        let mut not_408 = Vec::new();
        for task in tasks {
            let (got, closed) = task.await.unwrap();
            if !got.starts_with(b"HTTP/1.1 408") || !closed {
                not_408.push(format!(
                    "{:?} (connection {})",
                    String::from_utf8_lossy(&got[..got.len().min(40)]),
                    if closed { "closed" } else { "open" }
                ));
            }
        }
        if !not_408.is_empty() {
            failures.push(format!(
                "{name}: {} of 50 were not answered 408 and closed: {}",
                not_408.len(),
                not_408[0]
            ));
        }
        if let Err(why) = t.check(name).await {
            failures.push(why);
        }
    }

    // A client that asks for a large response and never reads it: the proxy must
    // not buffer the response, and gives up after send_timeout.
    let name = "slow reader of a 64 MiB response (send timeout 2 s)";
    let mut s = TcpStream::connect(t.http).await.unwrap();
    s.write_all(b"GET /big?n=67108864 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(6)).await;
    let mut total = 0u64;
    let mut buf = vec![0u8; 1 << 16];
    let ended = tokio::time::timeout(DEADLINE, async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(k) => total += k as u64,
            }
        }
    })
    .await;
    if ended.is_err() {
        failures.push(format!(
            "{name}: the connection was still open after {DEADLINE:?} of reading"
        ));
    } else if total >= 64 << 20 {
        failures.push(format!(
            "{name}: the whole response arrived after a long stall ({total} bytes): send_timeout did not fire"
        ));
    }
    eprintln!("[slow-drip] {name}: {total} bytes reached the client before the close");
    if let Err(why) = t.check(name).await {
        failures.push(why);
    }
    report("slow clients", &failures);
}

/// The case: with `limits.connections = 300`, 500 clients drip request
/// bodies and reconnect whenever they are cut off, for 15 s; meanwhile normal
/// clients must be served. Without the minimum body rate the drippers would hold
/// every connection slot for good and lock everyone else out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_hundred_drippers_do_not_lock_out_normal_clients() {
    let mut setup = setup("slow-500");
    setup.limits = "connections = 300\n".into();
    setup.bound_mib = BOUND_DRIP_MIB;
    let t = Target::start(setup).await;
    if let Some(limit) = fd_limit() {
        assert!(
            limit >= 2048,
            "the open-file limit ({limit}) is too low for 500 drippers"
        );
    }
    let stop = Arc::new(AtomicBool::new(false));
    let cut_off = Arc::new(AtomicU64::new(0));
    let drippers: Vec<_> = (0..500)
        .map(|i| {
            let stop = stop.clone();
            let cut_off = cut_off.clone();
            let addr = t.http;
            tokio::spawn(async move {
                // Spread the first connections over half a second.
                tokio::time::sleep(Duration::from_millis(i)).await;
                while !stop.load(Ordering::Relaxed) {
                    let Ok(mut s) = TcpStream::connect(addr).await else {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    };
                    if s.write_all(
                        b"POST /dripper HTTP/1.1\r\nHost: a\r\nContent-Length: 100000\r\n\r\n",
                    )
                    .await
                    .is_err()
                    {
                        continue;
                    }
                    // One byte every 500 ms until cut off.
                    for b in b"attackmarker".iter().cycle() {
                        if stop.load(Ordering::Relaxed) {
                            return;
                        }
                        if s.write_all(&[*b]).await.is_err() {
                            break;
                        }
                        let (_, closed) =
                            read_until_close(&mut s, Duration::from_millis(500)).await;
                        if closed {
                            break;
                        }
                    }
                    cut_off.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();

    // Let the drippers fill every slot, then serve normal clients among them.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut failures = Vec::new();
    let started = Instant::now();
    let mut served = 0;
    let mut tried = 0;
    // Each normal client waits its turn among the reconnecting drippers (a few
    // seconds on a loaded machine); what must never happen is one not being served.
    for i in 0..10 {
        tried += 1;
        let req = format!("GET /normal/{i} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
        match tokio::time::timeout(DEADLINE, crate::common::send_raw(t.http, req.as_bytes())).await {
            Ok(Ok(r)) if r.status == 200 => served += 1,
            Ok(Ok(r)) => failures.push(format!("normal client {i}: answered {}", r.status)),
            Ok(Err(e)) => failures.push(format!("normal client {i}: {e}")),
            Err(_) => failures.push(format!(
                "normal client {i}: not served within {DEADLINE:?} while 500 drippers were connected"
            )),
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let mem = t.memory();
    stop.store(true, Ordering::Relaxed);
    for d in drippers {
        d.abort();
    }
    eprintln!(
        "[slow-500] {tried} normal clients: {served} served in {:.1} s while 500 drippers were cut off {} times; palisade {mem:?}",
        started.elapsed().as_secs_f64(),
        cut_off.load(Ordering::Relaxed)
    );
    if cut_off.load(Ordering::Relaxed) == 0 {
        failures.push("no dripper was ever cut off".into());
    }
    let name = "500 drippers against connections = 300";
    if let Err(why) = t.check(name).await {
        failures.push(why);
    }
    for r in t.records() {
        if r.path == "/dripper" {
            failures.push(format!("{name}: a dripped body reached the backend"));
            break;
        }
    }
    report(name, &failures);
}
