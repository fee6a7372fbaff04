//! Persistent collections as rules see them: reads through a reader, writes handed
//! back as data, built-in fields, expiry, namespacing, keys and multi-valued
//! variables.

use engine::collections::{
    CollectionError, CollectionReader, MemoryStore, RecordKey, StoredRecord, VarOp,
};
use engine::{RulesetBuilder, Transaction, TxContext};
use std::sync::Arc;

fn ruleset(text: &str) -> Arc<engine::Ruleset> {
    let mut b = RulesetBuilder::new(Arc::new(seclang::MemorySource::new()));
    b.add_text(&format!("SecRuleEngine On\n{text}"), "test.conf")
        .expect("rules load");
    Arc::new(b.build().expect("rules build"))
}

/// Runs one GET through phases 1-5 at `secs` (Unix time) from `ip` with `args` as
/// the query; returns the status of an intervention, and the transaction.
fn run(
    rs: &Arc<engine::Ruleset>,
    store: Option<Arc<dyn CollectionReader>>,
    secs: i64,
    ip: &str,
    query: &str,
) -> (Option<u16>, Transaction) {
    let ctx = TxContext {
        store,
        client_ip: ip.parse().unwrap(),
        now_unix_micros: secs * 1_000_000,
        ..Default::default()
    };
    let mut tx = Transaction::new(rs.clone(), ctx);
    let uri = format!("/?{query}");
    tx.set_request_line(b"GET", uri.as_bytes(), b"HTTP/1.1");
    tx.add_request_header(b"Host", b"example.com");
    let mut i = tx.process_request_headers();
    if i.is_none() {
        i = tx.process_request_body();
    }
    tx.process_logging();
    (i.map(|i| i.status), tx)
}

/// Runs a transaction and applies its writes to the store.
fn step(
    rs: &Arc<engine::Ruleset>,
    store: &Arc<MemoryStore>,
    secs: i64,
    ip: &str,
    query: &str,
) -> Option<u16> {
    let (status, mut tx) = run(rs, Some(store.clone()), secs, ip, query);
    store.apply_writes(
        tx.events()
            .filter_map(engine::Event::into_collection_write)
            .collect::<Vec<_>>(),
    );
    status
}

#[test]
fn expirevar_with_concurrent_increments_loses_no_count() {
    // Every transaction reads the record before any of them is written back, as
    // concurrent requests on several workers do; each must still count once.
    let rs = ruleset(
        r#"SecAction "id:1,phase:1,pass,nolog,initcol:ip=%{REMOTE_ADDR},setvar:ip.hits=+1,expirevar:ip.hits=60""#,
    );
    let store = Arc::new(MemoryStore::new());
    let writes: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let rs = rs.clone();
                let store = store.clone();
                s.spawn(move || {
                    (0..25)
                        .flat_map(|_| {
                            let (_, mut tx) = run(&rs, Some(store.clone()), 1000, "192.0.2.7", "");
                            tx.events()
                                .filter_map(engine::Event::into_collection_write)
                                .collect::<Vec<_>>()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    assert!(
        writes
            .iter()
            .all(|(_, w)| w.ops.iter().any(|o| o.op == VarOp::Add(1)))
    );
    store.apply_writes(writes);
    let key = RecordKey::parse("default", "ip", b"192.0.2.7".to_vec()).unwrap();
    let rec = store.read(&key).unwrap().unwrap();
    let hits = &rec.vars[b"hits".as_slice()];
    assert_eq!(hits.value.as_read().as_ref(), b"200");
    assert_eq!(hits.expires_at, Some(1060));
    assert_eq!(rec.update_counter, 200);
}

#[test]
fn built_in_fields() {
    let rs = ruleset(
        r#"SecCollectionTimeout 600
           SecAction "id:1,phase:1,pass,nolog,initcol:ip=%{REMOTE_ADDR},setvar:ip.n=+1"
           SecRule IP:IS_NEW "@eq 1" "id:2,phase:1,pass,nolog,setvar:tx.new=1"
           SecRule IP:KEY "@streq 192.0.2.1" "id:3,phase:1,pass,nolog,setvar:tx.key=1"
           SecRule IP:TIMEOUT "@eq 600" "id:4,phase:1,pass,nolog,setvar:tx.timeout=1"
           SecRule IP:UPDATE_COUNTER "@eq 1" "id:5,phase:1,pass,nolog,setvar:tx.counter1=1"
           SecRule IP:CREATE_TIME "@eq 1000" "id:6,phase:1,pass,nolog,setvar:tx.created=1"
           SecRule IP:LAST_UPDATE_TIME "@eq 1010" "id:7,phase:1,pass,nolog,setvar:tx.updated=1"
           SecRule IP:UPDATE_RATE "@eq 3" "id:8,phase:1,pass,nolog,setvar:tx.rate=1""#,
    );
    let store = Arc::new(MemoryStore::new());
    let (_, mut tx) = run(&rs, Some(store.clone()), 1000, "192.0.2.1", "");
    assert_eq!(tx.tx_var("new"), Some(&b"1"[..]));
    assert_eq!(tx.tx_var("key"), Some(&b"1"[..]));
    assert_eq!(tx.tx_var("timeout"), Some(&b"1"[..]));
    store.apply_writes(
        tx.events()
            .filter_map(engine::Event::into_collection_write)
            .collect::<Vec<_>>(),
    );
    let (_, mut tx) = run(&rs, Some(store.clone()), 1010, "192.0.2.1", "");
    store.apply_writes(
        tx.events()
            .filter_map(engine::Event::into_collection_write)
            .collect::<Vec<_>>(),
    );
    assert_eq!(tx.tx_var("new"), None, "the record exists now");
    assert_eq!(tx.tx_var("counter1"), Some(&b"1"[..]));
    assert_eq!(tx.tx_var("created"), Some(&b"1"[..]));
    // Two writes over 40 s: 3 per minute.
    let (_, tx) = run(&rs, Some(store.clone()), 1040, "192.0.2.1", "");
    assert_eq!(tx.tx_var("updated"), Some(&b"1"[..]));
    assert_eq!(tx.tx_var("rate"), Some(&b"1"[..]));
}

#[test]
fn collection_timeout_expires_whole_records_and_can_be_set_per_record() {
    let rs = ruleset(
        r#"SecCollectionTimeout 100
           SecAction "id:1,phase:1,pass,nolog,initcol:ip=%{REMOTE_ADDR},setvar:ip.n=+1"
           SecRule ARGS:long "@eq 1" "id:2,phase:1,pass,nolog,setvar:ip.timeout=1000"
           SecRule IP:n "@ge 2" "id:3,phase:1,deny,status:429""#,
    );
    let store = Arc::new(MemoryStore::new());
    assert_eq!(step(&rs, &store, 1000, "192.0.2.1", ""), None);
    assert_eq!(step(&rs, &store, 1099, "192.0.2.1", ""), Some(429));
    // 100 s after the last write the record is gone.
    assert_eq!(step(&rs, &store, 1199, "192.0.2.1", ""), None);
    // A record whose TIMEOUT was raised lives longer.
    assert_eq!(step(&rs, &store, 2000, "192.0.2.2", "long=1"), None);
    assert_eq!(step(&rs, &store, 2500, "192.0.2.2", ""), Some(429));
}

#[test]
fn web_app_id_namespaces_records() {
    let shop = ruleset(
        r#"SecWebAppId shop
           SecAction "id:1,phase:1,pass,nolog,initcol:ip=%{REMOTE_ADDR},setvar:ip.n=+1"
           SecRule IP:n "@ge 2" "id:3,phase:1,deny,status:429""#,
    );
    let blog = ruleset(
        r#"SecWebAppId blog
           SecAction "id:1,phase:1,pass,nolog,initcol:ip=%{REMOTE_ADDR},setvar:ip.n=+1"
           SecRule IP:n "@ge 2" "id:3,phase:1,deny,status:429""#,
    );
    let store = Arc::new(MemoryStore::new());
    assert_eq!(step(&shop, &store, 1000, "192.0.2.1", ""), None);
    assert_eq!(step(&blog, &store, 1000, "192.0.2.1", ""), None);
    assert_eq!(step(&shop, &store, 1000, "192.0.2.1", ""), Some(429));
    let key = RecordKey::parse("blog", "IP", b"192.0.2.1".to_vec()).unwrap();
    let n = store.read(&key).unwrap().unwrap().vars[b"n".as_slice()].clone();
    assert_eq!(n.value.as_read().as_ref(), b"1");
}

#[test]
fn lookups_are_by_exact_key() {
    // ModSecurity v3 can hand back the record `sample1` for the key `sample`.
    let rs = ruleset(
        r#"SecAction "id:1,phase:1,pass,nolog,initcol:resource=%{ARGS.r},setvar:resource.n=+1"
           SecRule RESOURCE:IS_NEW "@eq 1" "id:2,phase:1,pass,nolog,setvar:tx.fresh=1""#,
    );
    let store = Arc::new(MemoryStore::new());
    let (_, mut tx) = run(&rs, Some(store.clone()), 1000, "192.0.2.1", "r=sample1");
    store.apply_writes(
        tx.events()
            .filter_map(engine::Event::into_collection_write)
            .collect::<Vec<_>>(),
    );
    let (_, tx) = run(&rs, Some(store.clone()), 1001, "192.0.2.1", "r=sample");
    assert_eq!(tx.tx_var("fresh"), Some(&b"1"[..]));
    let (_, tx) = run(&rs, Some(store.clone()), 1001, "192.0.2.1", "r=sample1");
    assert_eq!(tx.tx_var("fresh"), None);
}

#[test]
fn long_keys_get_records_of_their_own() {
    let rs = ruleset(
        r#"SecAction "id:1,phase:1,pass,nolog,setsid:%{ARGS.s},setvar:session.n=+1"
           SecRule SESSION:KEY "@rx ^a{700}" "id:2,phase:1,pass,nolog,setvar:tx.whole_key=1"
           SecRule SESSION:n "@ge 2" "id:3,phase:1,deny,status:429""#,
    );
    let store = Arc::new(MemoryStore::new());
    let a = format!("s={}", "a".repeat(700));
    let b = format!("s={}b", "a".repeat(699));
    assert_eq!(step(&rs, &store, 1000, "192.0.2.1", &a), None);
    assert_eq!(step(&rs, &store, 1000, "192.0.2.1", &b), None);
    assert_eq!(step(&rs, &store, 1000, "192.0.2.1", &a), Some(429));
    // KEY shows the key the rule gave, not the digest it is stored under.
    let (_, tx) = run(&rs, Some(store.clone()), 1000, "192.0.2.1", &a);
    assert_eq!(tx.tx_var("whole_key"), Some(&b"1"[..]));
    let key = RecordKey::parse("default", "SESSION", "a".repeat(700).into_bytes()).unwrap();
    assert!(key.encode().len() <= engine::collections::MAX_KEY_BYTES);
}

#[derive(Debug)]
struct FailingReader;

impl CollectionReader for FailingReader {
    fn read(&self, key: &RecordKey) -> Result<Option<StoredRecord>, CollectionError> {
        Err(CollectionError::Read {
            key: format!(
                "{}:{}",
                key.collection.name(),
                String::from_utf8_lossy(&key.key)
            ),
            reason: "disk on fire".into(),
        })
    }
}

#[test]
fn a_failed_read_is_reported_not_hidden() {
    let rs =
        ruleset(r#"SecAction "id:1,phase:1,pass,nolog,initcol:ip=%{REMOTE_ADDR},setvar:ip.n=+1""#);
    let (_, mut tx) = run(&rs, Some(Arc::new(FailingReader)), 1000, "192.0.2.1", "");
    let errors = tx
        .events()
        .filter_map(engine::Event::into_collection_error)
        .collect::<Vec<_>>();
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0].to_string().contains("IP:192.0.2.1"),
        "{}",
        errors[0]
    );
    assert!(errors[0].to_string().contains("disk on fire"));
    assert!(
        tx.events()
            .filter_map(engine::Event::into_collection_error)
            .collect::<Vec<_>>()
            .is_empty(),
        "taken once"
    );
}

#[test]
fn multi_valued_variables() {
    // Remember every device id seen for a client; flag a client with more than two,
    // and let a known device skip a check with one hash lookup.
    let rs = ruleset(
        r#"SecAction "id:1,phase:1,pass,nolog,initcol:ip=%{REMOTE_ADDR}"
           SecRule ARGS:device "@memberOf ip.devices" "id:2,phase:1,pass,nolog,setvar:tx.known=1"
           SecRule ARGS:device "@rx ." "id:3,phase:1,pass,nolog,addmember:ip.devices=%{ARGS.device}"
           SecRule ARGS:forget "@rx ." "id:4,phase:1,pass,nolog,delmember:ip.devices=%{ARGS.forget}"
           SecRule IP:devices "@gt 2" "id:5,phase:1,deny,status:403""#,
    );
    let store = Arc::new(MemoryStore::new());
    let (_, mut tx) = run(&rs, Some(store.clone()), 1000, "192.0.2.1", "device=d1");
    assert_eq!(tx.tx_var("known"), None);
    store.apply_writes(
        tx.events()
            .filter_map(engine::Event::into_collection_write)
            .collect::<Vec<_>>(),
    );
    let (_, mut tx) = run(&rs, Some(store.clone()), 1001, "192.0.2.1", "device=d1");
    assert_eq!(tx.tx_var("known"), Some(&b"1"[..]));
    store.apply_writes(
        tx.events()
            .filter_map(engine::Event::into_collection_write)
            .collect::<Vec<_>>(),
    );
    assert_eq!(step(&rs, &store, 1002, "192.0.2.1", "device=d2"), None);
    assert_eq!(step(&rs, &store, 1003, "192.0.2.1", "device=d3"), Some(403));
    assert_eq!(step(&rs, &store, 1004, "192.0.2.1", "forget=d3"), None);
    // Another client's set is its own.
    let (_, tx) = run(&rs, Some(store.clone()), 1005, "192.0.2.2", "device=d1");
    assert_eq!(tx.tx_var("known"), None);
}

#[test]
fn deprecatevar_lowers_by_elapsed_periods() {
    let rs = ruleset(
        r#"SecAction "id:1,phase:1,pass,nolog,initcol:ip=%{REMOTE_ADDR}"
           SecRule ARGS:add "@rx ." "id:2,phase:1,pass,nolog,setvar:ip.score=+%{ARGS.add}"
           SecAction "id:3,phase:1,pass,nolog,deprecatevar:ip.score=10/60"
           SecRule IP:score "@eq 0" "id:4,phase:1,pass,nolog,setvar:tx.zero=1"
           SecRule IP:score "@eq 30" "id:5,phase:1,pass,nolog,setvar:tx.thirty=1"
           SecRule IP:score "@eq 50" "id:6,phase:1,pass,nolog,setvar:tx.fifty=1""#,
    );
    let store = Arc::new(MemoryStore::new());
    // Written at 1000: nothing elapsed, nothing deprecated.
    let (_, mut tx) = run(&rs, Some(store.clone()), 1000, "192.0.2.1", "add=50");
    assert_eq!(tx.tx_var("fifty"), Some(&b"1"[..]));
    store.apply_writes(
        tx.events()
            .filter_map(engine::Event::into_collection_write)
            .collect::<Vec<_>>(),
    );
    // 130 s later: two periods, 20 off.
    let (_, mut tx) = run(&rs, Some(store.clone()), 1130, "192.0.2.1", "");
    assert_eq!(tx.tx_var("thirty"), Some(&b"1"[..]));
    store.apply_writes(
        tx.events()
            .filter_map(engine::Event::into_collection_write)
            .collect::<Vec<_>>(),
    );
    // Never below zero.
    let (_, tx) = run(&rs, Some(store.clone()), 4000, "192.0.2.1", "");
    assert_eq!(tx.tx_var("zero"), Some(&b"1"[..]));
}

#[test]
fn member_rules_that_cannot_work_are_refused_at_load() {
    for (text, needle) in [
        (
            r#"SecAction "id:1,phase:1,pass,addmember:tx.x=1""#,
            "not TX",
        ),
        (
            r#"SecRule ARGS "@memberOf tx.x" "id:1,phase:1,pass""#,
            "not TX",
        ),
        (
            r#"SecRule ARGS "@memberOf nowhere" "id:1,phase:1,pass""#,
            "collection.name",
        ),
        (
            r#"SecAction "id:1,phase:1,pass,addmember:ip.x""#,
            "collection.name=value",
        ),
    ] {
        let mut b = RulesetBuilder::new(Arc::new(seclang::MemorySource::new()));
        let e = b.add_text(text, "bad.conf").err().expect("refused");
        assert!(e.to_string().contains(needle), "{text}: {e}");
        assert!(e.to_string().starts_with("bad.conf:1"), "{e}");
    }
}
