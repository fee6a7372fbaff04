//! `@rbl` with the real binary and a real name server: each test starts Debian's
//! dnsmasq (package dnsmasq-base, which CI installs; a missing one is a failure)
//! on a free loopback port, with a few block-list names, and kills it by PID.
//!
//! The test client is 127.0.0.1, so `1.0.0.127.bl.test` lists it; `clean.test`
//! and `uribl.test` answer NXDOMAIN for anything not listed.

mod common;

use common::*;
use std::net::SocketAddr;
use std::process::Child;
use std::time::{Duration, Instant};

struct Dnsmasq {
    child: Child,
    addr: SocketAddr,
    log: std::path::PathBuf,
}

impl Dnsmasq {
    fn start(dir: &TempDir) -> Dnsmasq {
        let log = dir.path("dnsmasq.log");
        let (child, addr) = start_dnsmasq(&[
            "--log-queries".into(),
            // Listed: the test client, and one domain.
            "--address=/1.0.0.127.bl.test/127.0.0.2".into(),
            "--address=/evil.example.uribl.test/127.0.0.2".into(),
            "--address=/evil2.example.uribl.test/127.0.0.2".into(),
            // Authoritative for these zones: anything else in them is NXDOMAIN.
            "--local=/bl.test/".into(),
            "--local=/clean.test/".into(),
            "--local=/uribl.test/".into(),
            format!("--log-facility={}", log.display()),
        ]);
        Dnsmasq { child, addr, log }
    }

    /// How many times dnsmasq was asked for the A record of `name`.
    fn queries(&self, name: &str) -> usize {
        let needle = format!("query[A] {name} ");
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(&needle))
            .count()
    }
}

impl Drop for Dnsmasq {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const RULES: &str = r#"SecRuleEngine On
SecRule REQUEST_URI "@beginsWith /listed" "id:1,phase:1,deny,status:403,log,msg:'client listed',chain"
  SecRule REMOTE_ADDR "@rbl bl.test" ""
SecRule REQUEST_URI "@beginsWith /clean" "id:2,phase:1,deny,status:403,log,msg:'client listed',chain"
  SecRule REMOTE_ADDR "@rbl clean.test" ""
SecRule ARGS:site "@rbl uribl.test" "id:3,phase:1,deny,status:403,log,msg:'site listed'"
SecRule ARGS:page "@rbl uribl.test" "id:4,phase:2,deny,status:403,log,msg:'page listed'""#;

fn config(
    dir: &TempDir,
    listen: SocketAddr,
    backend: SocketAddr,
    admin: SocketAddr,
    dns: &str,
) -> String {
    basic_config(
        listen,
        backend,
        &format!(
            "{}\n[logs]\nerror_log = \"{}\"\n[admin]\naddress = \"{admin}\"\n[dns]\n{dns}\n",
            rules_toml(RULES),
            dir.path("error.log").display()
        ),
    )
}

async fn get(addr: SocketAddr, path: &str) -> u16 {
    let req = format!("GET {path} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    send_raw(addr, req.as_bytes()).await.unwrap().status
}

/// A listed client is refused, an unlisted one passes; a domain taken from the
/// request is looked up too; a repeated name is answered from the cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listed_clients_and_domains_are_refused_and_answers_cached() {
    let dir = TempDir::new("rbl");
    let dns = Dnsmasq::start(&dir);
    let backend = Backend::start().await;
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    let cfg = config(
        &dir,
        listen,
        backend.addr,
        admin,
        &format!("resolvers = [\"{}\"]\ntimeout = \"2s\"", dns.addr),
    );
    let p = Palisade::start(&dir, &cfg, listen);
    assert_eq!(get(listen, "/listed").await, 403);
    assert_eq!(get(listen, "/clean").await, 200);
    assert_eq!(get(listen, "/?site=evil.example").await, 403);
    assert_eq!(get(listen, "/?site=good.example").await, 200);
    // A phase-2 rule on a value from the request: phase 2 waits for its lookup too
    // (phase 1 holds another such rule; each phase that holds one may wait).
    assert_eq!(get(listen, "/?page=evil2.example").await, 403);
    // Again: the answers come from the cache, dnsmasq is not asked again.
    assert_eq!(get(listen, "/listed").await, 403);
    assert_eq!(get(listen, "/?site=evil.example").await, 403);
    assert_eq!(get(listen, "/clean").await, 200);
    let seen: Vec<String> = backend.requests().iter().map(|r| r.uri.clone()).collect();
    assert_eq!(seen, vec!["/clean", "/?site=good.example", "/clean"]);
    for name in [
        "1.0.0.127.bl.test",
        "1.0.0.127.clean.test",
        "evil.example.uribl.test",
        "good.example.uribl.test",
        "evil2.example.uribl.test",
    ] {
        assert_eq!(dns.queries(name), 1, "{name}: {}", p.stderr_text());
    }
    assert!(metric(admin, "palisade_rbl_cache_hits_total").await >= 2.0);
    assert_eq!(metric(admin, "palisade_rbl_queries_total").await, 5.0);
    assert_eq!(metric(admin, "palisade_rbl_listed_total").await, 3.0);
    assert_eq!(metric(admin, "palisade_rbl_failures_total").await, 0.0);
    // The listed client's match is in the error log.
    assert!(
        wait_for_line(&dir.path("error.log"), Duration::from_secs(5), |l| l
            .contains("client listed")
            && l.contains("[id \"1\"]"))
        .is_some()
    );
}

/// A name server that does not answer (a closed port): the lookup fails within
/// `dns.timeout`, the request is answered as if not listed, and the failure is
/// logged and counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_resolver_fails_the_lookup_and_the_request_passes() {
    let dir = TempDir::new("rbl-dead");
    let backend = Backend::start().await;
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    let dead = loopback(free_port());
    let cfg = config(
        &dir,
        listen,
        backend.addr,
        admin,
        &format!("resolvers = [\"{dead}\"]\ntimeout = \"300ms\""),
    );
    let _p = Palisade::start(&dir, &cfg, listen);
    let t0 = Instant::now();
    assert_eq!(get(listen, "/listed").await, 200);
    assert_eq!(get(listen, "/?site=evil.example").await, 200);
    eprintln!("two requests with a dead resolver took {:?}", t0.elapsed());
    assert!(metric(admin, "palisade_rbl_failures_total").await >= 1.0);
    assert!(
        wait_for_line(&dir.path("error.log"), Duration::from_secs(5), |l| l
            .contains("@rbl lookup of 1.0.0.127.bl.test failed"))
        .is_some()
    );
    assert_eq!(backend.requests().len(), 2);
}

/// With lookups off, `palisade check` warns about each `@rbl` rule.
#[test]
fn check_warns_when_lookups_are_off() {
    let dir = TempDir::new("rbl-check");
    let cfg = dir.path("palisade.toml");
    std::fs::write(
        &cfg,
        config(
            &dir,
            loopback(1),
            loopback(2),
            loopback(3),
            "enabled = false",
        ),
    )
    .unwrap();
    let out = palisade_check("--config", &cfg);
    let text = text(&out.stdout);
    assert!(out.status.success(), "{text}{}", self::text(&out.stderr));
    assert_eq!(text.matches("@rbl never matches").count(), 4, "{text}");
}
