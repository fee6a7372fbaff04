//! The LMDB store on its own: persistence, concurrency, limits, import/export,
//! several handles and processes, and a crash in the middle of writes.

mod common;

use common::{hit_at, ip, value};
use engine::CollectionKind;
use engine::collections::{NamedOp, RecordKey, RecordWrite, VarOp, VarValue};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;
use store::{Store, StoreConfig, StoreError, unix_now};

fn cfg(dir: &std::path::Path) -> StoreConfig {
    StoreConfig {
        path: dir.to_path_buf(),
        map_size: 64 << 20,
        batch_interval: Duration::from_millis(5),
        sweep_interval: Duration::from_secs(3600),
        host_id: "test-host".into(),
    }
}

/// `setvar:ip.hits=+1,expirevar:ip.hits=60` as a transaction hands it over.
fn hit(at: i64) -> RecordWrite {
    hit_at(at, 60)
}

#[test]
fn counts_survive_close_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let now = unix_now();
    {
        let store = Store::open(&cfg(dir.path())).unwrap();
        for _ in 0..10 {
            store.submit(vec![(ip("192.0.2.1"), hit(now))]);
        }
        store.flush().unwrap();
        assert_eq!(
            value(&store, &ip("192.0.2.1"), "hits").as_deref(),
            Some("10")
        );
    }
    let store = Store::open(&cfg(dir.path())).unwrap();
    assert_eq!(
        value(&store, &ip("192.0.2.1"), "hits").as_deref(),
        Some("10")
    );
    store.submit(vec![(ip("192.0.2.1"), hit(now))]);
    store.flush().unwrap();
    let rec = store.get(&ip("192.0.2.1")).unwrap().unwrap();
    assert_eq!(
        rec.vars[b"hits".as_slice()].value,
        VarValue::Scalar(b"11".to_vec())
    );
    assert_eq!(rec.update_counter, 11);
    assert_eq!(rec.vars[b"hits".as_slice()].expires_at, Some(now + 60));
}

#[test]
fn concurrent_increments_with_expirevar_lose_no_count() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&cfg(dir.path())).unwrap();
    let reader = store.reader();
    let now = unix_now();
    let threads = 8;
    let per_thread = 500;
    std::thread::scope(|s| {
        for t in 0..threads {
            let store = store.clone();
            let reader = reader.clone();
            s.spawn(move || {
                for i in 0..per_thread {
                    // Read as a transaction would, then hand its write over.
                    reader.read(&ip("198.51.100.7")).unwrap();
                    store.submit(vec![
                        (ip("198.51.100.7"), hit(now)),
                        (ip(&format!("10.0.{t}.{}", i % 7)), hit(now)),
                    ]);
                }
            });
        }
    });
    store.flush().unwrap();
    let total = threads * per_thread;
    assert_eq!(
        value(&store, &ip("198.51.100.7"), "hits"),
        Some(total.to_string())
    );
    let stats = store.stats();
    assert_eq!(stats.writes_dropped_queue_full, 0);
    assert_eq!(stats.writes_committed, 2 * total as u64);
    assert_eq!(stats.write_lock_waits_on_request_path, 0);
    assert!(stats.reads >= total as u64);
    // Many transactions per commit: far fewer batches than writes.
    assert!(stats.batches < stats.writes_committed, "{stats:?}");
}

#[test]
fn full_map_is_a_clear_error_and_nothing_half_applied() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cfg(dir.path());
    c.map_size = 256 << 10;
    let store = Store::open(&c).unwrap();
    let now = unix_now();
    store.submit(vec![(ip("keep"), hit(now))]);
    store.flush().unwrap();
    // A batch too big for the map: many records with large values.
    let big = vec![b'x'; 2000];
    let writes: Vec<_> = (0..400)
        .map(|i| {
            (
                ip(&format!("k{i}")),
                RecordWrite {
                    at: now,
                    timeout: 3600,
                    ops: vec![NamedOp {
                        name: b"blob".to_vec(),
                        op: VarOp::Set(big.clone()),
                    }],
                },
            )
        })
        .collect();
    let err = store.apply(writes.clone()).unwrap_err();
    assert!(matches!(err, StoreError::MapFull { .. }), "{err}");
    assert!(err.to_string().contains("full"), "{err}");
    store.submit(writes);
    assert!(matches!(store.flush(), Err(StoreError::MapFull { .. })));
    let stats = store.stats();
    assert_eq!(stats.map_full_errors, 2);
    assert_eq!(stats.writes_failed, 800);
    // Nothing of the failed batches is there; what was there before still is, and
    // the store keeps working for small writes.
    assert!(store.get(&ip("k0")).unwrap().is_none());
    assert!(store.list("default", None, 1000).unwrap().len() == 1);
    store.submit(vec![(ip("keep"), hit(now))]);
    store.flush().unwrap();
    assert_eq!(value(&store, &ip("keep"), "hits").as_deref(), Some("2"));
}

#[test]
fn oversized_keys_round_trip_under_a_digest() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&cfg(dir.path())).unwrap();
    let long_a = RecordKey::new("default", CollectionKind::Session, vec![b'a'; 5000]).unwrap();
    let mut b = vec![b'a'; 5000];
    b[4999] = b'b';
    let long_b = RecordKey::new("default", CollectionKind::Session, b).unwrap();
    let now = unix_now();
    store.submit(vec![(long_a.clone(), hit(now)), (long_a.clone(), hit(now))]);
    store.submit(vec![(long_b.clone(), hit(now))]);
    store.flush().unwrap();
    assert_eq!(value(&store, &long_a, "hits").as_deref(), Some("2"));
    assert_eq!(value(&store, &long_b, "hits").as_deref(), Some("1"));
    let reader = store.reader();
    assert!(reader.read(&long_a).unwrap().is_some());
    let listed = store
        .list("default", Some(CollectionKind::Session), 10)
        .unwrap();
    assert_eq!(listed.len(), 2);
    assert!(listed.iter().all(|(k, _)| k.key.starts_with(b"#sha256:")));
}

#[test]
fn import_export_and_a_corrupt_line() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&cfg(dir.path())).unwrap();
    let now = unix_now();
    let input = format!(
        concat!(
            r#"{{"app":"default","collection":"IP","key":"192.0.2.9","record":{{"vars":{{"risk":{{"value":"80"}},"tokens":{{"value":{{"members":{{"t1":{now}}}}}}}}},"create_time":{now},"last_update_time":{now},"update_counter":4,"timeout":600}}}}"#,
            "\n\n",
            r#"{{"app":"shop","collection":"global","key":"g","write":{{"at":{now},"timeout":600,"ops":[{{"name":"n","op":{{"add":5}}}}]}}}}"#,
            "\n"
        ),
        now = now
    );
    assert_eq!(store.import(input.as_bytes()).unwrap(), 2);
    let rec = store.get(&ip("192.0.2.9")).unwrap().unwrap();
    assert_eq!(rec.update_counter, 4);
    assert_eq!(
        rec.vars[b"risk".as_slice()].value,
        VarValue::Scalar(b"80".to_vec())
    );
    let g = RecordKey::new("shop", CollectionKind::Global, b"g".to_vec()).unwrap();
    assert_eq!(value(&store, &g, "n").as_deref(), Some("5"));

    let mut out = Vec::new();
    assert_eq!(store.export(&mut out, None, None).unwrap(), 2);
    let text = String::from_utf8(out.clone()).unwrap();
    assert_eq!(text.lines().count(), 2);
    let mut one = Vec::new();
    assert_eq!(store.export(&mut one, Some("shop"), None).unwrap(), 1);

    // Exported lines import into another store as the same records.
    let dir2 = tempfile::tempdir().unwrap();
    let other = Store::open(&cfg(dir2.path())).unwrap();
    assert_eq!(other.import(out.as_slice()).unwrap(), 2);
    assert_eq!(other.get(&ip("192.0.2.9")).unwrap(), Some(rec));

    // A corrupt third line: an error naming it, nothing of the first two imported.
    let bad = concat!(
        r#"{"app":"default","collection":"IP","key":"a","write":{"at":1,"timeout":600,"ops":[]}}"#,
        "\n",
        r#"{"app":"default","collection":"IP","key":"b","write":{"at":1,"timeout":600,"ops":[]}}"#,
        "\n",
        r#"{"app":"default","collection":"IP","key":"c","write":{"at":1,"#,
        "\n"
    );
    let err = store.import(bad.as_bytes()).unwrap_err();
    assert!(matches!(err, StoreError::Import { line: 3, .. }), "{err}");
    assert!(err.to_string().contains("line 3"), "{err}");
    assert!(store.get(&ip("a")).unwrap().is_none());
    // An unknown collection is named too.
    let err = store
        .import(r#"{"app":"default","collection":"IPS","key":"a","write":{"at":1,"timeout":6,"ops":[]}}"#.as_bytes())
        .unwrap_err();
    assert!(
        err.to_string().contains("line 1") && err.to_string().contains("IPS"),
        "{err}"
    );
}

#[test]
fn set_del_and_record_delete() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&cfg(dir.path())).unwrap();
    let k = ip("203.0.113.5");
    store.set(&k, b"Block", b"1", Some(120), 600).unwrap();
    let rec = store.get(&k).unwrap().unwrap();
    assert_eq!(rec.timeout, 600);
    assert!(rec.vars[b"block".as_slice()].expires_at.is_some());
    // A TTL longer than the record's timeout raises the timeout to cover it.
    store.set(&k, b"long", b"1", Some(7200), 600).unwrap();
    assert_eq!(store.get(&k).unwrap().unwrap().timeout, 7200);
    store.set(&k, b"other", b"x", None, 600).unwrap();
    assert!(store.del(&k, Some(b"block")).unwrap());
    assert!(!store.del(&k, Some(b"block")).unwrap());
    assert_eq!(value(&store, &k, "other").as_deref(), Some("x"));
    assert!(store.del(&k, None).unwrap());
    assert!(store.get(&k).unwrap().is_none());
    assert!(!store.del(&k, None).unwrap());
}

#[test]
fn sweeper_removes_expired_records() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cfg(dir.path());
    c.sweep_interval = Duration::from_millis(20);
    let store = Store::open(&c).unwrap();
    // A record whose timeout passed long ago, and a live one.
    let old = unix_now() - 10_000;
    store.submit(vec![(ip("old"), hit(old)), (ip("new"), hit(unix_now()))]);
    store.flush().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while store.stats().swept == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(store.stats().swept, 1);
    let all = store.store_reader();
    use engine::collections::CollectionReader as _;
    assert!(all.read(&ip("old")).unwrap().is_none());
    assert!(all.read(&ip("new")).unwrap().is_some());
}

#[test]
fn two_handles_on_one_store() {
    let dir = tempfile::tempdir().unwrap();
    let a = Store::open(&cfg(dir.path())).unwrap();
    let b = Store::open(&cfg(dir.path())).unwrap();
    let now = unix_now();
    for _ in 0..50 {
        a.submit(vec![(ip("x"), hit(now))]);
        b.submit(vec![(ip("x"), hit(now))]);
    }
    a.flush().unwrap();
    b.flush().unwrap();
    assert_eq!(value(&a, &ip("x"), "hits").as_deref(), Some("100"));
    assert_eq!(value(&b, &ip("x"), "hits").as_deref(), Some("100"));
}

/// The child side of the process tests, not a test of its own (hence ignored): the
/// parent runs this test binary with `--ignored --exact child_process_writer` and
/// `STORE_CHILD` set.
#[test]
#[ignore = "child process of the process tests"]
fn child_process_writer() {
    let mode = std::env::var("STORE_CHILD").expect("run by the process tests only");
    let dir = std::env::var("STORE_CHILD_DIR").unwrap();
    let store = Store::open(&cfg(std::path::Path::new(&dir))).unwrap();
    let now = unix_now();
    let rounds: u64 = if mode == "endless" {
        u64::MAX
    } else {
        mode.parse().unwrap()
    };
    let mut committed = 0u64;
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    while committed < rounds {
        // A burst of writes, some for other records, then a commit we report.
        for i in 0..20 {
            store.submit(vec![(ip(&format!("noise{i}")), hit(now))]);
        }
        store.submit(vec![(ip("crash"), hit(now))]);
        store.flush().unwrap();
        committed += 1;
        writeln!(out, "committed {committed}").unwrap();
        out.flush().unwrap();
    }
}

fn child(dir: &std::path::Path, mode: &str) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--ignored",
        "--exact",
        "child_process_writer",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("STORE_CHILD", mode)
    .env("STORE_CHILD_DIR", dir)
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    cmd
}

#[test]
fn another_process_writes_while_this_one_reads_and_writes() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&cfg(dir.path())).unwrap();
    let now = unix_now();
    let mut c = child(dir.path(), "100").spawn().unwrap();
    for _ in 0..100 {
        store.submit(vec![(ip("crash"), hit(now))]);
        store.get(&ip("crash")).unwrap();
    }
    store.flush().unwrap();
    assert!(c.wait().unwrap().success());
    assert_eq!(value(&store, &ip("crash"), "hits").as_deref(), Some("200"));
}

#[test]
fn kill_9_in_the_middle_of_writes_loses_nothing_committed() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = child(dir.path(), "endless").spawn().unwrap();
    let mut lines = BufReader::new(c.stdout.take().unwrap()).lines();
    let mut last = 0u64;
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(n) = line.strip_prefix("committed ") {
            last = n.parse().unwrap();
            if last >= 200 {
                break;
            }
        }
    }
    // SIGKILL while the child keeps writing.
    c.kill().unwrap();
    c.wait().unwrap();
    for line in lines {
        if let Some(n) = line.unwrap().strip_prefix("committed ") {
            last = last.max(n.parse().unwrap());
        }
    }
    assert!(last >= 200);
    let store = Store::open(&cfg(dir.path())).unwrap();
    let got: u64 = value(&store, &ip("crash"), "hits")
        .unwrap()
        .parse()
        .unwrap();
    // Every reported commit is there; at most the one in flight on top.
    assert!(
        got == last || got == last + 1,
        "committed {last}, found {got}"
    );
    // And the store takes writes again.
    store.submit(vec![(ip("crash"), hit(unix_now()))]);
    store.flush().unwrap();
    let again: u64 = value(&store, &ip("crash"), "hits")
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(again, got + 1);
}
