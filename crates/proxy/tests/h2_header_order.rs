//! HTTP/2 header lines reach the engine one by one in the order the client sent
//! them, not grouped by name: a rule over FULL_REQUEST that matches only the
//! interleaved order blocks it, and lets through the same lines grouped. The
//! requests share one connection and refer to HPACK dynamic-table entries, so the
//! proxy's reading of the header blocks must follow the table as the HTTP/2 layer
//! does.

mod common;
#[allow(dead_code)]
#[path = "attacks/h2wire.rs"]
mod h2wire;

use common::*;
use h2wire::*;
use std::time::Duration;

/// The block of a GET for `path` with `fields` after the pseudo-headers.
fn block(path: &str, fields: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut b = request_block_with(false, path, "localhost", &[]);
    fields(&mut b);
    b
}

#[tokio::test]
async fn header_lines_reach_the_rules_in_the_order_sent() {
    let backend = Backend::start().await;
    let dir = TempDir::new("h2-order");
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    std::fs::write(dir.path("cert.pem"), made.cert.pem()).unwrap();
    std::fs::write(dir.path("key.pem"), made.signing_key.serialize_pem()).unwrap();
    let cert = made.cert.der().clone();
    let listen = loopback(free_port());
    // Interleaved: x-a, x-b, x-a. Grouped by name it would read x-a, x-a, x-b.
    let rules = rules_toml(
        "SecRuleEngine On\nSecRule FULL_REQUEST \"@rx x-a: 1\\nx-b: 2\\nx-a: 3\\n\" \"id:3001,phase:1,deny,status:403,log\"",
    );
    let cfg = format!(
        "[[listener]]\naddress = \"{listen}\"\ntls = {{ cert = \"cert.pem\", key = \"key.pem\" }}\n\n[[upstream]]\nname = \"app\"\nservers = [\"{}\"]\n\n{rules}\n[logs]\nerror_log = \"error.log\"\n",
        backend.addr
    );
    let p = Palisade::start(&dir, &cfg, listen);
    let mut c = RawH2::connect(p.addr, &cert, &[], true).await.unwrap();

    // Stream 1: interleaved, adding `x-a: 1` then `x-b: 2` to the dynamic table
    // (indices 63 and 62 after both).
    let s1 = block("/first", |b| {
        literal_indexed(b, b"x-a", b"1");
        literal_indexed(b, b"x-b", b"2");
        literal(b, b"x-a", b"3");
    });
    // Stream 3: the same lines grouped, two of them from the dynamic table.
    let s3 = block("/grouped", |b| {
        indexed(b, 63);
        literal(b, b"x-a", b"3");
        indexed(b, 62);
    });
    // Stream 5: interleaved again, from the table.
    let s5 = block("/third", |b| {
        indexed(b, 63);
        indexed(b, 62);
        literal(b, b"x-a", b"3");
    });
    for (stream, b) in [(1, s1), (3, s3), (5, s5)] {
        c.send(&headers(stream, &b, true, true)).await.unwrap();
        let seen = c
            .wait_for(Duration::from_secs(10), |s| s.responses.contains(&stream))
            .await;
        assert!(seen.responses.contains(&stream), "{}", seen.describe());
    }

    let paths: Vec<String> = backend.requests().iter().map(|r| r.uri.clone()).collect();
    assert_eq!(
        paths,
        vec!["/grouped".to_owned()],
        "only the grouped request passes"
    );
    let got = backend.requests();
    assert_eq!(got[0].all("x-a"), vec!["1", "3"]);
    assert_eq!(got[0].all("x-b"), vec!["2"]);
    // The log writer runs beside the requests: wait for the second refusal's line.
    let _ = wait_for_line(&dir.path("error.log"), Duration::from_secs(10), |l| {
        l.contains("3001") && l.contains("/third")
    });
    let log = std::fs::read_to_string(dir.path("error.log")).unwrap_or_default();
    let blocked: Vec<&str> = log.lines().filter(|l| l.contains("3001")).collect();
    assert_eq!(blocked.len(), 2, "{log}");
    assert!(
        blocked[0].contains("/first") && blocked[1].contains("/third"),
        "{log}"
    );
}
