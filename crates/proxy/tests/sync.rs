//! Fleet sync through Redis with the real binary: two palisade hosts, A and B,
//! each with its own store, sharing one redis-server (Debian's `redis-server`,
//! which CI installs; a missing one is a failure). Each test starts its own Redis
//! on a free loopback port in a temporary directory and kills it by PID.
//!
//! Convergence is awaited with a generous bound (never a timing assertion); the
//! time it took is printed (`-- --nocapture`).

mod common;

use common::*;
use serde_json::Value;
use std::io::{Read as _, Write as _};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Redis {
    child: Child,
    port: u16,
    _dir: TempDir,
}

impl Redis {
    fn start_on(port: u16) -> Redis {
        let dir = TempDir::new("redis");
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir.0)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run redis-server ({e}): apt-get install redis-server (.ci/run does)")
            });
        let r = Redis {
            child,
            port,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !r.ping() {
            assert!(
                Instant::now() < deadline,
                "redis-server did not answer on {port}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        r
    }

    fn ping(&self) -> bool {
        let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        let mut buf = [0u8; 7];
        s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const RULES: &str = r#"SecRuleEngine On
SecAction "id:1,phase:1,nolog,pass,initcol:ip=%{REMOTE_ADDR},setvar:ip.hits=+1"
SecRule IP:HITS "@gt 6" "id:2,phase:1,deny,status:429,log,msg:'too many requests'"
SecRule IP:BLOCKED "@eq 1" "id:3,phase:1,deny,status:403,log,msg:'blocked from outside'""#;

struct Host {
    dir: TempDir,
    listen: SocketAddr,
    config: String,
    proxy: Option<Palisade>,
}

impl Host {
    fn start(name: &str, redis: &Redis, backend: SocketAddr) -> Host {
        let dir = TempDir::new(&format!("sync-{name}"));
        let listen = loopback(free_port());
        let config = basic_config(
            listen,
            backend,
            &format!(
                "{}\n[store]\nhost_id = \"{name}\"\n[sync]\nredis = \"{}\"\n",
                rules_toml(RULES),
                redis.url()
            ),
        );
        let proxy = Some(Palisade::start(&dir, &config, listen));
        Host {
            dir,
            listen,
            config,
            proxy,
        }
    }

    fn restart(&mut self) {
        self.proxy = None;
        self.proxy = Some(Palisade::start(&self.dir, &self.config, self.listen));
    }

    fn hits(&self) -> u64 {
        record(&self.dir, "IP", "127.0.0.1")
            .and_then(|r| var(&r, "hits"))
            .map_or(0, |h| h.parse().unwrap())
    }

    /// Waits until the host's store counts `n` hits; returns how long it took.
    fn wait_hits(&self, n: u64) -> Duration {
        let t0 = Instant::now();
        loop {
            let h = self.hits();
            if h == n {
                return t0.elapsed();
            }
            assert!(h < n, "counted {h} hits, more than the {n} made");
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "stuck at {h} hits of {n}; stderr: {}",
                self.proxy
                    .as_ref()
                    .map(|p| p.stderr_text())
                    .unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    async fn status(&self) -> u16 {
        let r = send_raw(
            self.listen,
            b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
        )
        .await
        .unwrap();
        r.status
    }
}

/// One client's requests spread over A and B are all counted on both; the request
/// that crosses the threshold on A blocks the client on B as soon as it arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counter_spread_over_two_hosts_blocks_on_both() {
    let redis = Redis::start_on(free_port());
    let backend = Backend::start().await;
    let a = Host::start("a", &redis, backend.addr);
    let b = Host::start("b", &redis, backend.addr);
    for i in 0..6 {
        let h = if i % 2 == 0 { &a } else { &b };
        assert_eq!(h.status().await, 200, "request {i}");
    }
    let ta = a.wait_hits(6);
    let tb = b.wait_hits(6);
    eprintln!("6 hits on both: A after {ta:?}, B after {tb:?} more");
    // The 7th, on A, crosses the threshold there...
    assert_eq!(a.status().await, 429);
    let t0 = Instant::now();
    b.wait_hits(7);
    eprintln!("A's 7th hit reached B in {:?}", t0.elapsed());
    // ...and B blocks the client from then on.
    assert_eq!(b.status().await, 429);
    a.wait_hits(8);
    assert_eq!(backend.requests().len(), 6);
}

/// `palisade ctx set` on A's store (A runs and publishes what any process commits
/// to its store) blocks the client on B.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctx_set_on_one_host_blocks_on_the_other() {
    let redis = Redis::start_on(free_port());
    let backend = Backend::start().await;
    let a = Host::start("a", &redis, backend.addr);
    let b = Host::start("b", &redis, backend.addr);
    assert_eq!(b.status().await, 200);
    let t0 = Instant::now();
    let out = ctx(
        &a.dir,
        &["set", "IP", "127.0.0.1", "blocked", "1", "--ttl", "600"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    loop {
        if b.status().await == 403 {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "B never blocked: {}",
            b.proxy.as_ref().unwrap().stderr_text()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    eprintln!("ctx set on A to B blocking: {:?}", t0.elapsed());
    let r: Value = record(&b.dir, "IP", "127.0.0.1").unwrap();
    assert_eq!(var(&r, "blocked").as_deref(), Some("1"));
}

/// Redis stopped while both hosts keep counting, then started again (empty, on the
/// same port): the hosts publish what they kept and converge on every count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_then_back_converges_without_loss() {
    let port = free_port();
    let redis = Redis::start_on(port);
    let backend = Backend::start().await;
    let a = Host::start("a", &redis, backend.addr);
    let b = Host::start("b", &redis, backend.addr);
    assert_eq!(a.status().await, 200);
    assert_eq!(b.status().await, 200);
    a.wait_hits(2);
    b.wait_hits(2);
    drop(redis);
    // Served on local state while Redis is down.
    for _ in 0..2 {
        assert_eq!(a.status().await, 200);
        assert_eq!(b.status().await, 200);
    }
    // Each has at least its own 2 new writes committed locally.
    let deadline = Instant::now() + Duration::from_secs(30);
    while a.hits() < 4 || b.hits() < 4 {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(10));
    }
    let _redis = Redis::start_on(port);
    let t0 = Instant::now();
    a.wait_hits(6);
    b.wait_hits(6);
    eprintln!("converged {:?} after Redis came back", t0.elapsed());
}

/// `kill -9` of A while requests keep writing, then a restart: A's store opens
/// cleanly with every write it had committed, and B ends up with the same count
/// (what A committed but had not published was kept in its store's outbox).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_then_restart_loses_no_committed_write() {
    let redis = Redis::start_on(free_port());
    let backend = Backend::start().await;
    let mut a = Host::start("a", &redis, backend.addr);
    let b = Host::start("b", &redis, backend.addr);
    let listen = a.listen;
    let writer = tokio::spawn(async move {
        let mut sent = 0u64;
        while sent < 100_000 {
            let r = send_raw(
                listen,
                b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
            )
            .await;
            if r.is_err() {
                break;
            }
            sent += 1;
        }
        sent
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let committed = loop {
        let h = a.hits();
        if h >= 30 {
            break h;
        }
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(5));
    };
    a.proxy.as_mut().unwrap().child.kill().unwrap();
    let _ = a.proxy.as_mut().unwrap().child.wait();
    let sent = writer.await.unwrap();
    a.restart();
    let kept = a.hits();
    assert!(
        kept >= committed && kept <= sent,
        "{committed} <= {kept} <= {sent}"
    );
    let t0 = Instant::now();
    b.wait_hits(kept);
    eprintln!(
        "B reached A's {kept} hits {:?} after A's restart",
        t0.elapsed()
    );
    // A goes on counting where it was.
    let s = a.status().await;
    assert!(s == 200 || s == 429);
    a.wait_hits(kept + 1);
}
