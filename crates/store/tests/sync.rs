//! Fleet sync against a real redis-server (Debian's `redis-server`, which CI
//! installs): each test starts its own on a free loopback port in a temporary
//! directory, without persistence, and kills it by PID. A missing redis-server is a
//! failure, not a skip.
//!
//! Convergence is awaited with a generous deadline (no timing assertion); the time
//! it took is printed.

mod common;

use common::{hit_at, ip, value};
use engine::collections::{NamedOp, RecordWrite, VarOp};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use store::sync::{Sync, SyncConfig};
use store::{Store, StoreConfig, unix_now};

struct Redis {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Redis {
    fn start() -> Redis {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        Self::start_on(port)
    }

    fn start_on(port: u16) -> Redis {
        let dir = tempfile::tempdir().unwrap();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run redis-server ({e}): these tests need Debian's redis-server \
                     package (apt-get install redis-server; .ci/run installs it)"
                )
            });
        let r = Redis {
            child,
            port,
            _dir: dir,
        };
        let client = redis::Client::open(r.url()).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(mut c) = client.get_connection_with_timeout(Duration::from_millis(200))
                && redis::cmd("PING").query::<String>(&mut c).is_ok()
            {
                return r;
            }
            assert!(
                Instant::now() < deadline,
                "redis-server did not answer on port {port}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    fn con(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .unwrap()
            .get_connection_with_timeout(Duration::from_secs(2))
            .unwrap()
    }

    /// Kills the server by its PID and waits for it.
    fn kill(mut self) -> u16 {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        self.port
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Host {
    store: Store,
    sync: Option<Sync>,
    _dir: tempfile::TempDir,
}

fn sync_cfg(url: &str) -> SyncConfig {
    let mut c = SyncConfig::new(url);
    c.block = Duration::from_millis(100);
    c.retry = Duration::from_millis(100);
    c
}

fn store_cfg(dir: &std::path::Path, host: &str) -> StoreConfig {
    StoreConfig {
        path: dir.to_path_buf(),
        map_size: 64 << 20,
        batch_interval: Duration::from_millis(5),
        sweep_interval: Duration::from_secs(3600),
        host_id: host.into(),
    }
}

fn host(name: &str, cfg: SyncConfig) -> Host {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&store_cfg(dir.path(), name)).unwrap();
    let sync = Sync::start(&store, cfg).unwrap();
    Host {
        store,
        sync: Some(sync),
        _dir: dir,
    }
}

fn hit() -> RecordWrite {
    hit_at(unix_now(), 600)
}

/// Waits (up to 30 s) until `f` holds; returns how long it took.
fn wait_for(what: &str, mut f: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let took = start.elapsed();
    println!("{what}: {took:?}");
    took
}

#[test]
fn increments_on_two_hosts_add_up_and_a_set_crosses_over() {
    let redis = Redis::start();
    let a = host("a", sync_cfg(&redis.url()));
    let b = host("b", sync_cfg(&redis.url()));
    let k = ip("192.0.2.10");
    for i in 0..150 {
        if i % 3 == 0 {
            b.store.submit(vec![(k.clone(), hit())]);
        } else {
            a.store.submit(vec![(k.clone(), hit())]);
        }
    }
    a.store.flush().unwrap();
    b.store.flush().unwrap();
    wait_for("150 increments seen on both hosts", || {
        value(&a.store, &k, "hits").as_deref() == Some("150")
            && value(&b.store, &k, "hits").as_deref() == Some("150")
    });
    let ra = a.store.get(&k).unwrap().unwrap();
    let rb = b.store.get(&k).unwrap().unwrap();
    assert_eq!(ra, rb);
    assert_eq!(ra.update_counter, 150);

    // A value set on one host shows on the other.
    a.store
        .set(&ip("198.51.100.1"), b"block", b"1", Some(600), 3600)
        .unwrap();
    wait_for("a set on host a seen on host b", || {
        value(&b.store, &ip("198.51.100.1"), "block").as_deref() == Some("1")
    });
    // A set after increments absorbs them on both hosts; later increments count.
    b.store.set(&k, b"hits", b"1000", None, 3600).unwrap();
    a.store.submit(vec![(k.clone(), hit())]);
    a.store.flush().unwrap();
    wait_for("set then increment converged", || {
        let va = value(&a.store, &k, "hits");
        va == value(&b.store, &k, "hits") && va.as_deref() == Some("1001")
    });
    wait_for("a's outbox drained", || {
        a.sync.as_ref().unwrap().stats().unpublished == 0
    });
    let sa = a.sync.as_ref().unwrap().stats();
    assert!(sa.published > 0 && sa.applied > 0, "{sa:?}");
    assert_eq!(sa.bad_entries, 0);
}

#[test]
fn redis_down_then_back_loses_no_write() {
    let redis = Redis::start();
    let url = redis.url();
    let a = host("a", sync_cfg(&url));
    let mut b = host("b", sync_cfg(&url));
    let k = ip("203.0.113.20");
    for _ in 0..10 {
        a.store.submit(vec![(k.clone(), hit())]);
        b.store.submit(vec![(k.clone(), hit())]);
    }
    wait_for("20 increments before the outage", || {
        value(&a.store, &k, "hits").as_deref() == Some("20")
            && value(&b.store, &k, "hits").as_deref() == Some("20")
    });
    let port = redis.kill();

    // Both hosts keep serving and counting on local state.
    for _ in 0..25 {
        a.store.submit(vec![(k.clone(), hit())]);
    }
    for _ in 0..15 {
        b.store.submit(vec![(k.clone(), hit())]);
    }
    b.store
        .set(&ip("other"), b"note", b"while down", None, 3600)
        .unwrap();
    a.store.flush().unwrap();
    b.store.flush().unwrap();
    assert_eq!(value(&a.store, &k, "hits").as_deref(), Some("45"));
    assert_eq!(value(&b.store, &k, "hits").as_deref(), Some("35"));
    wait_for("errors counted and changes kept unpublished", || {
        let (sa, sb) = (
            a.sync.as_ref().unwrap().stats(),
            b.sync.as_ref().unwrap().stats(),
        );
        sa.errors > 0 && sa.unpublished > 0 && sb.unpublished > 0 && sa.connected == 0
    });

    // Host b restarts while Redis is down: its unpublished changes are in LMDB.
    b.sync.take().unwrap().stop();
    let dir = b._dir;
    drop(b.store);
    let store = Store::open(&store_cfg(dir.path(), "b")).unwrap();
    let sync = Sync::start(&store, sync_cfg(&url)).unwrap();
    assert!(sync.stats().unpublished > 0);
    let b = Host {
        store,
        sync: Some(sync),
        _dir: dir,
    };

    let _redis = Redis::start_on(port);
    wait_for("both hosts converge after Redis is back", || {
        value(&a.store, &k, "hits").as_deref() == Some("60")
            && value(&b.store, &k, "hits").as_deref() == Some("60")
            && value(&a.store, &ip("other"), "note").as_deref() == Some("while down")
    });
    assert_eq!(a.store.get(&k).unwrap(), b.store.get(&k).unwrap());
    let (sa, sb) = (
        a.sync.as_ref().unwrap().stats(),
        b.sync.as_ref().unwrap().stats(),
    );
    wait_for("outboxes drained", || {
        a.sync.as_ref().unwrap().stats().unpublished == 0
            && b.sync.as_ref().unwrap().stats().unpublished == 0
    });
    println!("a: {sa:?}\nb: {sb:?}");
}

#[test]
fn entries_applied_twice_change_nothing_and_outside_entries_apply() {
    let redis = Redis::start();
    let a = host("a", sync_cfg(&redis.url()));
    let b = host("b", sync_cfg(&redis.url()));
    let k = ip("192.0.2.77");
    for _ in 0..7 {
        a.store.submit(vec![(k.clone(), hit())]);
    }
    a.store.flush().unwrap();
    wait_for("7 increments on b", || {
        value(&b.store, &k, "hits").as_deref() == Some("7")
    });

    // Append every entry of the stream again (as a retrying publisher would).
    let mut con = redis.con();
    let all: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
        .arg(SyncConfig::DEFAULT_STREAM)
        .arg("-")
        .arg("+")
        .query(&mut con)
        .unwrap();
    assert!(!all.ids.is_empty());
    for e in &all.ids {
        let mut cmd = redis::cmd("XADD");
        cmd.arg(SyncConfig::DEFAULT_STREAM).arg("*");
        for (f, v) in &e.map {
            let redis::Value::BulkString(v) = v else {
                panic!("field {f} is not a string")
            };
            cmd.arg(f).arg(v.as_slice());
        }
        cmd.query::<String>(&mut con).unwrap();
    }

    // An outside service's entry, exactly as docs/store-sync.md shows it, sent
    // twice with the same seq (a retry): applied once.
    let now = unix_now();
    let line = format!(
        r#"{{"app":"default","collection":"IP","key":"192.0.2.77","write":{{"at":{now},"timeout":3600,"ops":[{{"name":"risk","op":{{"set":"80"}}}},{{"name":"hits","op":{{"add":100}}}}]}}}}"#
    );
    for _ in 0..2 {
        redis::cmd("XADD")
            .arg(SyncConfig::DEFAULT_STREAM)
            .arg("MAXLEN")
            .arg("~")
            .arg(1_000_000)
            .arg("*")
            .arg("v")
            .arg("1")
            .arg("host")
            .arg("risk-scorer")
            .arg("kind")
            .arg("ops")
            .arg("seq")
            .arg("41")
            .arg("data")
            .arg(&line)
            .query::<String>(&mut con)
            .unwrap();
    }
    // An entry that does not parse is skipped and counted.
    redis::cmd("XADD")
        .arg(SyncConfig::DEFAULT_STREAM)
        .arg("*")
        .arg("v")
        .arg("1")
        .arg("host")
        .arg("x")
        .arg("kind")
        .arg("ops")
        .arg("data")
        .arg("{not json")
        .query::<String>(&mut con)
        .unwrap();
    // The same outside write built by the library's helper, with the next seq.
    let w = RecordWrite {
        at: now,
        timeout: 3600,
        ops: vec![NamedOp {
            name: b"hits".to_vec(),
            op: VarOp::Add(1000),
        }],
    };
    let mut cmd = redis::cmd("XADD");
    cmd.arg(SyncConfig::DEFAULT_STREAM).arg("*");
    for (f, v) in store::sync::entry::ops_fields("risk-scorer", Some(42), &[(k.clone(), w)]) {
        cmd.arg(f).arg(v);
    }
    cmd.query::<String>(&mut con).unwrap();

    wait_for("the outside entries applied on both hosts", || {
        [&a, &b].iter().all(|h| {
            value(&h.store, &k, "hits").as_deref() == Some("1107")
                && value(&h.store, &k, "risk").as_deref() == Some("80")
        })
    });
    // Let both hosts read everything, then check nothing moved.
    wait_for("bad entry counted", || {
        a.sync.as_ref().unwrap().stats().bad_entries == 1
            && b.sync.as_ref().unwrap().stats().bad_entries == 1
    });
    std::thread::sleep(Duration::from_millis(300));
    for h in [&a, &b] {
        assert_eq!(value(&h.store, &k, "hits").as_deref(), Some("1107"));
        assert!(h.store.stats().remote_duplicates >= 1);
    }
    assert_eq!(a.store.get(&k).unwrap(), b.store.get(&k).unwrap());
}

#[test]
fn a_new_host_bootstraps_and_a_restarted_host_catches_up() {
    let redis = Redis::start();
    let mut cfg = sync_cfg(&redis.url());
    cfg.snapshot_interval = Duration::from_millis(200);
    let a = host("a", cfg.clone());
    let mut b = host("b", cfg.clone());
    for i in 0..40 {
        a.store.submit(vec![(ip(&format!("10.1.0.{i}")), hit())]);
    }
    b.store.submit(vec![(ip("10.1.0.1"), hit())]);
    wait_for("a and b in step", || {
        value(&b.store, &ip("10.1.0.39"), "hits").as_deref() == Some("1")
            && value(&a.store, &ip("10.1.0.1"), "hits").as_deref() == Some("2")
    });
    // An outside entry with a seq, applied before the new host joins.
    let outside = |seq: u64| {
        let w = RecordWrite {
            at: unix_now(),
            timeout: 3600,
            ops: vec![NamedOp {
                name: b"score".to_vec(),
                op: VarOp::Add(10),
            }],
        };
        let mut cmd = redis::cmd("XADD");
        cmd.arg(SyncConfig::DEFAULT_STREAM).arg("*");
        for (f, v) in store::sync::entry::ops_fields("scorer", Some(seq), &[(ip("10.1.0.2"), w)]) {
            cmd.arg(f).arg(v);
        }
        cmd.query::<String>(&mut redis.con()).unwrap();
    };
    outside(5);
    wait_for("the outside entry applied", || {
        value(&a.store, &ip("10.1.0.2"), "score").as_deref() == Some("10")
    });
    let written = a.sync.as_ref().unwrap().stats().snapshots_written;
    wait_for("a snapshot written", || {
        a.sync.as_ref().unwrap().stats().snapshots_written > written
            && b.sync.as_ref().unwrap().stats().snapshots_written > 0
    });

    // b stops; a keeps writing; b comes back and catches up from its position.
    b.sync.take().unwrap().stop();
    let bdir = b._dir;
    drop(b.store);
    for _ in 0..5 {
        a.store.submit(vec![(ip("10.1.0.1"), hit())]);
    }
    let bstore = Store::open(&store_cfg(bdir.path(), "b")).unwrap();
    let bsync = Sync::start(&bstore, cfg.clone()).unwrap();
    wait_for("b caught up", || {
        value(&bstore, &ip("10.1.0.1"), "hits").as_deref() == Some("7")
    });
    assert_eq!(bsync.stats().snapshots_loaded, 0);

    // A new host c starts from the snapshot, then tails.
    let c = host("c", cfg.clone());
    wait_for("c has the fleet's records", || {
        value(&c.store, &ip("10.1.0.1"), "hits").as_deref() == Some("7")
            && value(&c.store, &ip("10.1.0.39"), "hits").as_deref() == Some("1")
    });
    assert_eq!(c.sync.as_ref().unwrap().stats().snapshots_loaded, 1);
    // The outside service retries its entry (same seq): no host counts it twice,
    // the new one included (the snapshot carried the mark).
    outside(5);
    c.store.submit(vec![(ip("10.1.0.1"), hit())]);
    a.store.submit(vec![(ip("10.1.0.1"), hit())]);
    wait_for("all three converge", || {
        [&a.store, &bstore, &c.store]
            .iter()
            .all(|s| value(s, &ip("10.1.0.1"), "hits").as_deref() == Some("9"))
    });
    for s in [&a.store, &bstore, &c.store] {
        assert_eq!(value(s, &ip("10.1.0.2"), "score").as_deref(), Some("10"));
    }
    let all_a = a.store.list("default", None, 1000).unwrap();
    let all_c = c.store.list("default", None, 1000).unwrap();
    assert_eq!(all_a, all_c);
}
