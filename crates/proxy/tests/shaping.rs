//! `[[shape]]`: response bodies paced per key at a class's rate, the class chosen
//! per request (a header, a TX variable that a rule sets from a cookie); other
//! clients are not slowed; the responses of one key share its rate; HTTP/1 and
//! HTTP/2; counters per class; bad classes refused at start with their name.
//!
//! The time assertions are lower bounds that pacing implies (a body cannot arrive
//! faster than its rate allows), never upper bounds: a loaded machine only makes
//! them easier to meet.

mod common;

use bytes::Bytes;
use common::*;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::time::{Duration, Instant};

const MIB: usize = 1024 * 1024;

/// 256 KiB/s after a 16 KiB burst: 1 MiB takes at least (1 MiB - 16 KiB) / rate,
/// 3.94 s; asserted: at least 3 s.
const TRIAL: &str = r#"
[[shape]]
name = "trial"
when = "header:x-plan"
equals = "trial"
key = "client_ip"
rate = "256KiB/s"
burst = "16KiB"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shaped_client_gets_its_rate_and_others_are_not_slowed() {
    let backend = Backend::start().await;
    let dir = TempDir::new("shaping-h1");
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    let config = basic_config(
        listen,
        backend.addr,
        &format!("{TRIAL}\n[admin]\naddress = \"{admin}\"\n"),
    );
    let _p = Palisade::start(&dir, &config, listen);

    let path = format!("/big?n={MIB}");
    let t0 = Instant::now();
    let shaped = tokio::spawn({
        let path = path.clone();
        async move {
            let r = get(listen, &path, "X-Plan: trial\r\n").await;
            (r, t0.elapsed())
        }
    });
    // The same client, another class (none): not slowed by the shaped download.
    let plain = get(listen, &path, "X-Plan: paid\r\n").await;
    assert_eq!(plain.status, 200);
    assert_eq!(plain.body.len(), MIB);
    assert!(
        !shaped.is_finished(),
        "the unshaped response finished after the shaped one ({:?})",
        t0.elapsed()
    );
    let (r, elapsed) = shaped.await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), MIB);
    assert!(
        elapsed >= Duration::from_secs(3),
        "1 MiB at 256 KiB/s came in {elapsed:?}"
    );
    let elapsed = t0.elapsed().as_secs_f64();

    let class = "{class=\"trial\"}";
    assert_eq!(
        metric(admin, &format!("palisade_shaped_responses_total{class}")).await,
        1.0
    );
    assert_eq!(
        metric(admin, &format!("palisade_shaped_bytes_total{class}")).await,
        MIB as f64
    );
    // Summed over the pieces held back: some, and no more than the time it took.
    let delayed = metric(
        admin,
        &format!("palisade_shaping_delay_seconds_total{class}"),
    )
    .await;
    assert!(
        delayed > 0.0 && delayed <= elapsed,
        "{delayed} of {elapsed}"
    );
    assert_eq!(
        metric(admin, &format!("palisade_shaping_keys{class}")).await,
        1.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_responses_of_one_key_share_its_rate() {
    let backend = Backend::start().await;
    let dir = TempDir::new("shaping-shared");
    let listen = loopback(free_port());
    // The class is chosen by a TX variable a rule sets from a cookie; the key is
    // another cookie.
    let rules = rules_toml(
        "SecRuleEngine On\nSecRule REQUEST_COOKIES:plan \"@streq trial\" \"id:1,phase:1,pass,nolog,setvar:tx.plan=trial\"",
    );
    let config = basic_config(
        listen,
        backend.addr,
        &format!(
            "[[shape]]\nname = \"trial\"\nwhen = \"tx:plan\"\nequals = \"trial\"\nkey = \"cookie:sid\"\nrate = \"256KiB/s\"\nburst = \"16KiB\"\n\n{rules}\n"
        ),
    );
    let _p = Palisade::start(&dir, &config, listen);

    // Two downloads of 512 KiB at once by one key: 1 MiB through its one bucket,
    // at least 3 s for the later (each alone at the full rate would take 2 s).
    let path = format!("/big?n={}", MIB / 2);
    let t0 = Instant::now();
    let downloads: Vec<_> = (0..2)
        .map(|_| {
            let path = path.clone();
            tokio::spawn(async move {
                let r = get(listen, &path, "Cookie: plan=trial; sid=s1\r\n").await;
                (r, t0.elapsed())
            })
        })
        .collect();
    let mut last = Duration::ZERO;
    for d in downloads {
        let (r, elapsed) = d.await.unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.body.len(), MIB / 2);
        last = last.max(elapsed);
    }
    assert!(
        last >= Duration::from_secs(3),
        "two 512 KiB downloads of one key at 256 KiB/s took {last:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_responses_are_shaped() {
    let backend = Backend::start().await;
    let dir = TempDir::new("shaping-h2");
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    std::fs::write(dir.path("cert.pem"), made.cert.pem()).unwrap();
    std::fs::write(dir.path("key.pem"), made.signing_key.serialize_pem()).unwrap();
    let cert = made.cert.der().clone();
    let listen = loopback(free_port());
    let config = format!(
        "[[listener]]\naddress = \"{listen}\"\ntls = {{ cert = \"cert.pem\", key = \"key.pem\" }}\n\n[[upstream]]\nname = \"app\"\nservers = [\"{}\"]\n\n{TRIAL}\n",
        backend.addr
    );
    let _p = Palisade::start(&dir, &config, listen);

    let tls = tls_connect(listen, &cert, &[b"h2"]).await.unwrap();
    let (sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
            .await
            .unwrap();
    tokio::spawn(conn);
    // Two streams on one connection: the shaped one and one of another class.
    let fetch = |plan: &'static str| {
        let mut sender = sender.clone();
        let t0 = Instant::now();
        tokio::spawn(async move {
            let req = hyper::Request::get(format!("https://localhost/big?n={MIB}"))
                .header("x-plan", plan)
                .body(Empty::<Bytes>::new())
                .unwrap();
            let resp = sender.send_request(req).await.unwrap();
            assert_eq!(resp.status(), 200);
            let body = resp.into_body().collect().await.unwrap().to_bytes();
            (body.len(), t0.elapsed())
        })
    };
    let shaped = fetch("trial");
    let plain = fetch("paid");
    let (n, _) = plain.await.unwrap();
    assert_eq!(n, MIB);
    assert!(
        !shaped.is_finished(),
        "the unshaped stream finished after the shaped one"
    );
    let (n, elapsed) = shaped.await.unwrap();
    assert_eq!(n, MIB);
    assert!(
        elapsed >= Duration::from_secs(3),
        "1 MiB at 256 KiB/s over HTTP/2 came in {elapsed:?}"
    );
}

#[test]
fn bad_classes_are_refused_naming_them() {
    for (class, want) in [
        (
            "name = \"a\"\nkey = \"client_ip\"\nrate = \"10/day\"",
            "shape \"a\"",
        ),
        (
            "name = \"b\"\nkey = \"client_ip\"\nrate = \"1MB/s\"\nburst = \"lots\"",
            "burst",
        ),
        (
            "name = \"c\"\nkey = \"ip\"\nrate = \"1MB/s\"",
            "unknown key part",
        ),
        (
            "name = \"d\"\nkey = \"client_ip\"\nrate = \"1MB/s\"\nequals = \"x\"",
            "equals needs when",
        ),
    ] {
        assert_check_refuses(&format!("[[shape]]\n{class}\n"), want);
    }
}
