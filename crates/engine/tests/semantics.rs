//! SecLang semantics with small inline rule sets: chains, captures, macros, skipAfter,
//! default actions, DetectionOnly, ctl, collections.

use engine::{Intervention, InterventionKind, MemoryStore, RulesetBuilder, Transaction, TxContext};
use std::sync::Arc;

fn ruleset(text: &str) -> Arc<engine::Ruleset> {
    let mut b = RulesetBuilder::new(Arc::new(seclang::MemorySource::new()));
    b.add_text(text, "test.conf")
        .unwrap_or_else(|e| panic!("{e}"));
    Arc::new(b.build().unwrap_or_else(|e| panic!("{e}")))
}

fn get(rs: &Arc<engine::Ruleset>, uri: &str) -> (Option<Intervention>, Transaction) {
    get_with(rs, uri, TxContext::default())
}

fn get_with(
    rs: &Arc<engine::Ruleset>,
    uri: &str,
    ctx: TxContext,
) -> (Option<Intervention>, Transaction) {
    let mut tx = Transaction::new(rs.clone(), ctx);
    tx.set_request_line(b"GET", uri.as_bytes(), b"HTTP/1.1");
    tx.add_request_header(b"Host", b"example.com");
    tx.add_request_header(b"User-Agent", b"test");
    let mut i = tx.process_request_headers();
    if i.is_none() {
        i = tx.process_request_body();
    }
    tx.process_logging();
    (i, tx)
}

#[test]
fn deny_with_status_and_message() {
    let rs = ruleset(
        r#"SecRule ARGS:q "@contains evil" "id:10,phase:1,deny,status:406,msg:'bad %{MATCHED_VAR_NAME}'""#,
    );
    let (i, mut tx) = get(&rs, "/?q=very+evil");
    let i = i.expect("denied");
    assert_eq!(i.status, 406);
    assert_eq!(i.kind, InterventionKind::Deny);
    assert_eq!(i.message.as_deref(), Some("bad ARGS:q"));
    let lines = tx
        .events()
        .filter_map(engine::Event::into_log_line)
        .collect::<Vec<_>>();
    assert_eq!(lines.len(), 1);
    assert!(
        lines[0].contains("Access denied with code 406 (phase 1)"),
        "{}",
        lines[0]
    );
    assert!(lines[0].contains(r#"[id "10"]"#));
    let (i, _) = get(&rs, "/?q=fine");
    assert!(i.is_none());
}

#[test]
fn chain_needs_every_link() {
    let rs = ruleset(
        r#"SecRule REQUEST_METHOD "@streq GET" "id:1,phase:1,deny,chain"
           SecRule ARGS:a "@eq 5" "chain"
           SecRule ARGS:b "@eq 6""#,
    );
    assert!(get(&rs, "/?a=5&b=6").0.is_some());
    assert!(get(&rs, "/?a=5&b=7").0.is_none());
    assert!(get(&rs, "/?a=4&b=6").0.is_none());
}

#[test]
fn capture_and_macros_in_setvar() {
    let rs = ruleset(
        r#"SecRule ARGS:v "@rx ^(\w+)-(\d+)$" "id:1,phase:1,pass,capture,setvar:tx.word=%{TX.1},setvar:tx.n=%{tx.2}"
           SecRule TX:n "@gt 10" "id:2,phase:1,deny,status:403,chain"
           SecRule TX:word "@streq abc""#,
    );
    let (i, tx) = get(&rs, "/?v=abc-42");
    assert_eq!(tx.tx_var("word"), Some(&b"abc"[..]));
    assert_eq!(tx.tx_var("N"), Some(&b"42"[..]));
    assert!(i.is_some());
    assert!(get(&rs, "/?v=abc-5").0.is_none());
}

#[test]
fn anomaly_scoring_adds_up() {
    let rs = ruleset(
        r#"SecAction "id:1,phase:1,pass,nolog,setvar:tx.score=0,setvar:tx.crit=5"
           SecRule ARGS "@contains x" "id:2,phase:1,pass,setvar:tx.score=+%{tx.crit}"
           SecRule ARGS "@contains y" "id:3,phase:1,pass,setvar:'tx.score=+%{tx.crit}'"
           SecRule TX:score "@ge 10" "id:4,phase:1,deny""#,
    );
    assert!(get(&rs, "/?a=x&b=y").0.is_some());
    assert!(get(&rs, "/?a=x").0.is_none());
}

#[test]
fn skip_after_marker() {
    let rs = ruleset(
        r#"SecRule ARGS:skip "@eq 1" "id:1,phase:1,pass,nolog,skipAfter:END"
           SecRule ARGS "@unconditionalMatch" "id:2,phase:1,deny"
           SecMarker END
           SecRule ARGS:late "@eq 1" "id:3,phase:1,deny,status:418""#,
    );
    assert_eq!(get(&rs, "/?skip=0").0.map(|i| i.rule_id), Some(Some(2)));
    assert!(get(&rs, "/?skip=1").0.is_none());
    assert_eq!(get(&rs, "/?skip=1&late=1").0.map(|i| i.status), Some(418));
}

#[test]
fn block_follows_default_action() {
    let rs = ruleset(
        r#"SecDefaultAction "phase:1,log,deny,status:429"
           SecRule ARGS "@contains bad" "id:1,phase:1,block""#,
    );
    assert_eq!(get(&rs, "/?a=bad").0.map(|i| i.status), Some(429));
    let rs = ruleset(
        r#"SecDefaultAction "phase:1,log,pass"
           SecRule ARGS "@contains bad" "id:1,phase:1,block""#,
    );
    let (i, tx) = get(&rs, "/?a=bad");
    assert!(i.is_none());
    assert_eq!(tx.matched_rule_ids(), vec![1]);
}

#[test]
fn default_transformations_apply_unless_none() {
    let rs = ruleset(
        r#"SecDefaultAction "phase:1,log,pass,t:lowercase"
           SecRule ARGS "@streq abc" "id:1,phase:1,deny"
           SecRule ARGS "@streq DEF" "id:2,phase:1,t:none,deny""#,
    );
    assert!(get(&rs, "/?a=ABC").0.is_some());
    assert!(get(&rs, "/?a=DEF").0.is_some());
    assert!(get(&rs, "/?a=def").0.is_none());
}

#[test]
fn detection_only_logs_but_never_disrupts() {
    let rs = ruleset(
        r#"SecRuleEngine DetectionOnly
           SecRule ARGS "@contains bad" "id:1,phase:1,deny""#,
    );
    let (i, mut tx) = get(&rs, "/?a=bad");
    assert!(i.is_none());
    assert_eq!(tx.matched_rule_ids(), vec![1]);
    assert!(
        tx.events()
            .filter_map(engine::Event::into_log_line)
            .collect::<Vec<_>>()[0]
            .starts_with("ModSecurity: Warning.")
    );
}

#[test]
fn ctl_rule_engine_and_removals() {
    let rs = ruleset(
        r#"SecRule ARGS:mode "@streq detect" "id:1,phase:1,pass,nolog,ctl:ruleEngine=DetectionOnly"
           SecRule ARGS:rm "@eq 1" "id:2,phase:1,pass,nolog,ctl:ruleRemoveById=10-11"
           SecRule ARGS:rmt "@eq 1" "id:3,phase:1,pass,nolog,ctl:ruleRemoveTargetById=12;ARGS:secret"
           SecRule ARGS "@contains bad" "id:10,phase:1,deny"
           SecRule ARGS "@contains worse" "id:12,phase:1,deny""#,
    );
    assert!(get(&rs, "/?a=bad").0.is_some());
    assert!(get(&rs, "/?a=bad&mode=detect").0.is_none());
    assert!(get(&rs, "/?a=bad&rm=1").0.is_none());
    assert!(get(&rs, "/?secret=worse").0.is_some());
    assert!(get(&rs, "/?secret=worse&rmt=1").0.is_none());
    assert!(get(&rs, "/?other=worse&rmt=1").0.is_some());
}

#[test]
fn ctl_removals_by_tag() {
    // Tag patterns are regular expressions over the rule set's tags; a rule whose
    // tags come later in the file, and a chain's later links, are covered too.
    let rs = ruleset(
        r#"SecRule ARGS:rm "@streq sqli" "id:1,phase:1,pass,nolog,ctl:ruleRemoveByTag=^attack-sql"
           SecRule ARGS:rm "@streq any" "id:2,phase:1,pass,nolog,ctl:ruleRemoveByTag=attack-(xss|sqli)"
           SecRule ARGS:rmt "@eq 1" "id:3,phase:1,pass,nolog,ctl:ruleRemoveTargetByTag=platform-.*;ARGS:secret"
           SecRule ARGS "@contains union" "id:10,phase:1,deny,tag:'OWASP_CRS',tag:'attack-sqli'"
           SecRule ARGS "@contains script" "id:11,phase:1,deny,tag:'attack-xss'"
           SecRule ARGS "@contains worse" "id:12,phase:1,deny,tag:'platform-unix',chain"
           SecRule ARGS "@contains worse" "t:none""#,
    );
    assert!(get(&rs, "/?a=union").0.is_some());
    assert!(get(&rs, "/?a=union&rm=sqli").0.is_none());
    assert!(get(&rs, "/?a=script&rm=sqli").0.is_some());
    assert!(get(&rs, "/?a=script&rm=any").0.is_none());
    assert!(get(&rs, "/?a=union&rm=other").0.is_some());
    assert!(get(&rs, "/?secret=worse").0.is_some());
    assert!(get(&rs, "/?secret=worse&rmt=1").0.is_none());
    assert!(get(&rs, "/?other=worse&rmt=1").0.is_some());
}

#[test]
fn exclusions_and_counting() {
    let rs = ruleset(
        r#"SecRule ARGS|!ARGS:ok "@contains x" "id:1,phase:1,deny"
           SecRule &ARGS:/^id_/ "@ge 2" "id:2,phase:1,deny,status:409""#,
    );
    assert!(get(&rs, "/?ok=x").0.is_none());
    assert!(get(&rs, "/?no=x").0.is_some());
    assert_eq!(get(&rs, "/?ID_a=1&id_b=2").0.map(|i| i.status), Some(409));
    assert!(get(&rs, "/?id_a=1").0.is_none());
}

#[test]
fn allow_stops_request_rules() {
    let rs = ruleset(
        r#"SecRule REQUEST_FILENAME "@beginsWith /health" "id:1,phase:1,allow,nolog"
           SecRule ARGS "@unconditionalMatch" "id:2,phase:1,deny""#,
    );
    assert!(get(&rs, "/health?x=1").0.is_none());
    assert!(get(&rs, "/other?x=1").0.is_some());
}

#[test]
fn redirect_expands_macros() {
    let rs = ruleset(
        r#"SecRule ARGS:go "@rx ." "id:1,phase:1,redirect:'https://example.com/blocked?id=%{UNIQUE_ID}'""#,
    );
    let ctx = TxContext {
        unique_id: "abc".into(),
        ..Default::default()
    };
    let (i, _) = get_with(&rs, "/?go=1", ctx);
    let i = i.expect("redirect");
    assert_eq!(i.status, 302);
    assert_eq!(
        i.kind,
        InterventionKind::Redirect("https://example.com/blocked?id=abc".into())
    );
}

#[test]
fn peer_variables_name_the_tcp_peer() {
    // Palisade's PEER_ADDR and PEER_PORT: the TCP peer when the server took the
    // client's address from a trusted proxy, REMOTE_ADDR/REMOTE_PORT otherwise.
    let rs = ruleset(
        r#"SecRule PEER_ADDR "@ipMatch 10.0.0.0/8" "id:1,phase:1,pass,nolog,setvar:tx.peer=%{PEER_ADDR}:%{PEER_PORT}"
           SecRule REMOTE_ADDR "@streq 192.0.2.7" "id:2,phase:1,pass,nolog,setvar:tx.client=%{REMOTE_ADDR}:%{REMOTE_PORT}""#,
    );
    let proxied = TxContext {
        client_ip: "192.0.2.7".parse().unwrap(),
        client_port: 4711,
        peer: Some("10.0.0.1:40000".parse().unwrap()),
        ..Default::default()
    };
    let (_, tx) = get_with(&rs, "/", proxied);
    assert_eq!(tx.tx_var("peer"), Some(&b"10.0.0.1:40000"[..]));
    assert_eq!(tx.tx_var("client"), Some(&b"192.0.2.7:4711"[..]));
    // The JSON audit record names both.
    let rec: serde_json::Value = serde_json::from_str(&engine::log::audit_record(&tx)).unwrap();
    let t = &rec["transaction"];
    assert_eq!(t["client_ip"], "192.0.2.7");
    assert_eq!(t["client_port"], 4711);
    assert_eq!(t["peer_ip"], "10.0.0.1");
    assert_eq!(t["peer_port"], 40000);
    let direct = TxContext {
        client_ip: "10.0.0.5".parse().unwrap(),
        client_port: 5555,
        ..Default::default()
    };
    let (_, tx) = get_with(&rs, "/", direct);
    assert_eq!(tx.tx_var("peer"), Some(&b"10.0.0.5:5555"[..]));
    assert_eq!(tx.tx_var("client"), None);
    let rec: serde_json::Value = serde_json::from_str(&engine::log::audit_record(&tx)).unwrap();
    assert!(rec["transaction"].get("peer_ip").is_none(), "{rec}");
}

#[test]
fn persistent_collections_count_across_transactions() {
    let rs = ruleset(
        r#"SecAction "id:1,phase:1,pass,nolog,initcol:ip=%{REMOTE_ADDR},setvar:ip.hits=+1,expirevar:ip.hits=60"
           SecRule IP:hits "@gt 2" "id:2,phase:1,deny,status:429""#,
    );
    let store = Arc::new(MemoryStore::new());
    let at = |secs: i64| TxContext {
        store: Some(store.clone()),
        now_unix_micros: secs * 1_000_000,
        ..Default::default()
    };
    let run = |secs: i64| {
        let (i, mut tx) = get_with(&rs, "/", at(secs));
        store.apply_writes(
            tx.events()
                .filter_map(engine::Event::into_collection_write)
                .collect::<Vec<_>>(),
        );
        assert!(
            tx.events()
                .filter_map(engine::Event::into_collection_write)
                .collect::<Vec<_>>()
                .is_empty(),
            "taken once"
        );
        i.map(|i| i.status)
    };
    assert_eq!(run(1000), None);
    assert_eq!(run(1000), None);
    assert_eq!(run(1000), Some(429));
    // After the expiry the counter starts again.
    assert_eq!(run(1061), None);
}

#[test]
fn setvar_delete_and_set_one() {
    let rs = ruleset(
        r#"SecAction "id:1,phase:1,pass,nolog,setvar:tx.a=5,setvar:tx.b"
           SecAction "id:2,phase:1,pass,nolog,setvar:!tx.a""#,
    );
    let (_, tx) = get(&rs, "/");
    assert_eq!(tx.tx_var("a"), None);
    assert_eq!(tx.tx_var("b"), Some(&b"1"[..]));
}

#[test]
fn load_errors_name_file_line_and_id() {
    let mut b = RulesetBuilder::new(Arc::new(seclang::MemorySource::new()));
    let e = b
        .add_text(
            "SecRuleEngine On\n\nSecRule ARGS \"@rx (a)\\1\" \"id:77,phase:1,deny\"",
            "bad.conf",
        )
        .err()
        .expect("backreference refused");
    let text = e.to_string();
    assert!(text.starts_with("bad.conf:3:"), "{text}");
    assert!(text.contains("[id 77]"), "{text}");
    let mut b = RulesetBuilder::new(Arc::new(seclang::MemorySource::new()));
    let e = b
        .add_text(r#"SecAction "id:5,phase:1,exec:/bin/sh""#, "x.conf")
        .err()
        .expect("exec refused");
    assert!(e.to_string().contains("exec"), "{e}");
    let mut b = RulesetBuilder::new(Arc::new(seclang::MemorySource::new()));
    let e = b
        .add_text(r#"SecRule ARGS "@bogus x" "id:6,phase:1""#, "x.conf")
        .err()
        .expect("unknown operator");
    assert!(e.to_string().contains("[id 6]"), "{e}");
    let mut b = RulesetBuilder::new(Arc::new(seclang::MemorySource::new()));
    let e = b
        .add_text(r#"SecRule NOPE "@rx x" "id:7,phase:1""#, "x.conf")
        .err()
        .expect("unknown variable");
    assert!(e.to_string().contains("NOPE"), "{e}");
    let mut b = RulesetBuilder::new(Arc::new(seclang::MemorySource::new()));
    let e = b
        .add_text(
            "SecAction \"id:8,phase:1,pass\"\nSecAction \"id:8,phase:1,pass\"",
            "x.conf",
        )
        .err()
        .expect("duplicate");
    assert!(e.to_string().contains("duplicate"), "{e}");
}

#[test]
fn multi_match_inspects_every_intermediate_form() {
    // Rule 1 inspects every form, rule 2 only the last; both have the same pipeline
    // and pattern. `%41BC` becomes `ABC` after urlDecode and `abc` after lowercase.
    let rs = ruleset(
        r#"SecRule ARGS "@rx ^ABC$" "id:1,phase:2,pass,t:none,t:urlDecode,t:lowercase,multiMatch"
SecRule ARGS "@rx ^ABC$" "id:2,phase:2,pass,t:none,t:urlDecode,t:lowercase"
SecRule ARGS "@rx ^abc$" "id:3,phase:2,pass,t:none,t:urlDecode,t:lowercase""#,
    );
    let ids = |uri: &str| {
        let (_, tx) = get(&rs, uri);
        tx.matched_rule_ids()
    };
    // Only the intermediate form matches.
    assert_eq!(ids("/?q=%2541BC"), vec![1, 3]);
    // The raw value matches.
    assert_eq!(ids("/?q=ABC"), vec![1, 3]);
    // The pattern is case-sensitive: no form of `abc` matches rule 1's.
    assert_eq!(ids("/?q=abc"), vec![3]);
    assert_eq!(ids("/?q=abd"), Vec::<i64>::new());
    // A value that no form matches next to one that does.
    assert_eq!(ids("/?x=1&q=%2541BC"), vec![1, 3]);
    // Names are not values.
    assert_eq!(ids("/?%2541BC=1"), Vec::<i64>::new());
}

#[test]
fn multi_match_groups_that_share_forms_answer_each_form() {
    // Two `multiMatch` groups whose pipelines reach the same forms (the prefilter
    // answers a form once, by cache cell, for every group that inspects it) and a
    // plain rule on the decoded form. The query string is decoded once into ARGS, so
    // `q=%252541BC` gives `%2541BC`, which `t:urlDecode` makes `%41BC`, then `%41bc`;
    // `q=%2541BC` gives `%41BC`, then `ABC`, then `abc`.
    let rs = ruleset(
        r#"SecRule ARGS "@rx ^ABC$" "id:1,phase:2,pass,t:none,t:urlDecode,multiMatch"
SecRule ARGS "@rx ^abc$" "id:2,phase:2,pass,t:none,t:urlDecode,t:lowercase,multiMatch"
SecRule ARGS "@rx ^ABC$" "id:3,phase:2,pass,t:none,t:urlDecode"
SecRule ARGS "@rx ^%41BC$" "id:4,phase:2,pass,t:none,t:urlDecode,t:lowercase,multiMatch""#,
    );
    let ids = |uri: &str| {
        let (_, tx) = get(&rs, uri);
        tx.matched_rule_ids()
    };
    assert_eq!(ids("/?q=%252541BC"), vec![4]);
    assert_eq!(ids("/?q=%2541BC"), vec![1, 2, 3, 4]);
    assert_eq!(ids("/?q=ABC"), vec![1, 2, 3]);
    assert_eq!(ids("/?q=abc"), vec![2]);
    assert_eq!(ids("/?a=abc&q=%252541BC"), vec![2, 4]);
    assert_eq!(ids("/?q=xyz"), Vec::<i64>::new());
}

#[test]
fn multi_match_forms_of_long_values_are_each_inspected() {
    // Values over 1 KiB, whose long forms the prefilter answers through the set of all
    // patterns per cache cell: the intermediate form alone matches rule 1, the last
    // form rule 2, the raw value rule 4; rule 3 (not `multiMatch`) sees the last form.
    let rs = ruleset(
        r#"SecRule ARGS "@rx xABCx" "id:1,phase:2,pass,t:none,t:urlDecode,t:lowercase,multiMatch"
SecRule ARGS "@rx xabcx" "id:2,phase:2,pass,t:none,t:urlDecode,t:lowercase,multiMatch"
SecRule ARGS "@rx xABCx" "id:3,phase:2,pass,t:none,t:urlDecode,t:lowercase"
SecRule ARGS "@rx x%41BCx" "id:4,phase:2,pass,t:none,t:urlDecode,t:lowercase,multiMatch""#,
    );
    let pad = "y".repeat(1500);
    let ids = |v: &str| {
        let (_, tx) = get(&rs, &format!("/?q={pad}{v}{pad}"));
        tx.matched_rule_ids()
    };
    assert_eq!(ids("x%2541BCx"), vec![1, 2, 4]);
    assert_eq!(ids("xABCx"), vec![1, 2]);
    assert_eq!(ids("xabcx"), vec![2]);
    assert_eq!(ids("x%252541BCx"), vec![4]);
    assert_eq!(ids("xyzx"), Vec::<i64>::new());
}

#[test]
fn lookups_without_a_resolver_or_database_warn_at_load() {
    let mut b = RulesetBuilder::new(Arc::new(seclang::MemorySource::new()));
    b.add_text(
        "SecRule REMOTE_ADDR \"@rbl sbl.example.org\" \"id:1,phase:1,pass\"\n\
         SecRule REMOTE_ADDR \"@geoLookup\" \"id:2,phase:1,pass\"\n",
        "lookups.conf",
    )
    .expect("rules load");
    let rs = b.build().expect("rules build");
    let w = rs.warnings().join("\n");
    assert!(
        w.contains("lookups.conf:1") && w.contains("@rbl never matches"),
        "{w}"
    );
    assert!(
        w.contains("lookups.conf:2") && w.contains("@geoLookup never matches"),
        "{w}"
    );
}

/// Runs a GET through phases 1 to 5 with an HTML response carrying `body`; returns
/// the ids of the rules that matched.
fn with_response(rs: &Arc<engine::Ruleset>, query: &str, body: &str) -> Vec<i64> {
    let mut tx = Transaction::new(rs.clone(), TxContext::default());
    tx.set_request_line(b"GET", format!("/?{query}").as_bytes(), b"HTTP/1.1");
    tx.add_request_header(b"Host", b"example.com");
    assert!(tx.process_request_headers().is_none());
    assert!(tx.process_request_body().is_none());
    tx.set_response_status(200, b"HTTP/1.1");
    tx.add_response_header(b"Content-Type", b"text/html");
    assert!(tx.process_response_headers().is_none());
    assert!(tx.response_body_wanted());
    tx.append_response_body(body.as_bytes());
    tx.process_response_body();
    tx.process_logging();
    tx.matched_rule_ids()
}

#[test]
fn response_body_rules_see_what_the_prefilter_lets_through() {
    // RESPONSE_BODY rules of phase 4 (and one of phase 5) under the prefilter: `@rx`
    // and `@pm` with and without transformations, a request rule with the same pattern
    // (the response rules' groups and shared automaton are apart from the request
    // ones'), short bodies and bodies over 1 KiB (which run the shared lazy DFA).
    let rs = ruleset(
        r#"SecResponseBodyAccess On
SecResponseBodyMimeType text/html
SecRule ARGS "@rx sql syntax" "id:1,phase:2,pass,t:none"
SecRule RESPONSE_BODY "@rx sql syntax" "id:2,phase:4,pass,t:none"
SecRule RESPONSE_BODY "@rx (?i)ora-[0-9]{5}" "id:3,phase:4,pass,t:none"
SecRule RESPONSE_BODY "@rx warning: mysql_" "id:4,phase:4,pass,t:none,t:lowercase"
SecRule RESPONSE_BODY "@pm fatal_error parse_error" "id:5,phase:4,pass,t:none"
SecRule RESPONSE_BODY "@pm <?php" "id:6,phase:4,pass,t:none,t:lowercase"
SecRule RESPONSE_BODY "@rx sql syntax" "id:7,phase:4,pass,t:none,chain"
    SecRule RESPONSE_BODY "@rx near line" "t:none"
SecRule RESPONSE_BODY "@rx ora-[0-9]{5}" "id:8,phase:5,pass,t:none,t:lowercase""#,
    );
    let pad = "<p>ordinary page text</p>".repeat(60);
    for long in [false, true] {
        let p = if long { pad.as_str() } else { "" };
        let ids = |query: &str, body: &str| with_response(&rs, query, &format!("{p}{body}{p}"));
        assert_eq!(
            ids("q=1", "<h1>welcome</h1>"),
            Vec::<i64>::new(),
            "long {long}"
        );
        assert_eq!(ids("q=sql syntax", "fine"), vec![1], "long {long}");
        assert_eq!(
            ids("q=1", "You have an sql syntax error"),
            vec![2],
            "long {long}"
        );
        assert_eq!(
            ids("q=1", "sql syntax near line 3: ORA-00933"),
            vec![2, 3, 7, 8],
            "long {long}"
        );
        assert_eq!(ids("q=1", "WARNING: MySQL_connect"), vec![4], "long {long}");
        assert_eq!(ids("q=1", "PHP parse_error in x"), vec![5], "long {long}");
        assert_eq!(ids("q=1", "<?PHP echo 1"), vec![6], "long {long}");
        assert_eq!(ids("q=1", "<?PHP parse_error"), vec![5, 6], "long {long}");
    }
}

#[test]
fn pm_rules_on_long_values_see_every_phrase_wherever_the_set_walk_stops() {
    // A long argument (over 1 KiB) is walked by the set of every `@rx` pattern and, in
    // the same pass, by the `@pm` lists' automaton; the set's walk stops once all its
    // patterns are found, and the phrase lists must still see the rest of the value.
    let rs = ruleset(
        r#"SecRule ARGS "@rx attack" "id:1,phase:2,pass,t:none"
SecRule ARGS "@rx (?i)select" "id:2,phase:2,pass,t:none,t:urlDecode"
SecRule ARGS "@pm tailphrase headphrase" "id:3,phase:2,pass,t:none"
SecRule ARGS "@pm midphrase" "id:4,phase:2,pass,t:none,t:urlDecode"
SecRule ARGS "@pm other" "id:5,phase:2,pass,t:none,t:lowercase""#,
    );
    let pad = "ordinary-text.".repeat(120);
    let cases: &[(String, Vec<i64>)] = &[
        (format!("{pad}{pad}"), vec![]),
        (format!("attack{pad}SELECT{pad}tailphrase"), vec![1, 2, 3]),
        (format!("attackselect{pad}{pad}TAILPHRASE"), vec![1, 2, 3]),
        (format!("headphrase{pad}attack{pad}"), vec![1, 3]),
        (format!("{pad}mid%70hrase{pad}attack"), vec![1, 4]),
        (format!("{pad}OTHER{pad}midphrase"), vec![4, 5]),
    ];
    for (value, want) in cases {
        let (_, tx) = get(&rs, &format!("/?q={value}"));
        assert_eq!(&tx.matched_rule_ids(), want, "{}...", &value[..40]);
    }
}

#[test]
fn lowercase_rules_match_what_they_would_match_without_the_prefilter() {
    // Rules whose last transformation is `t:lowercase` are answered by the prefilter
    // on the bytes before it; their matches must be those of the rule itself, on
    // short values and on long ones (which the set of every pattern walks).
    let rs = ruleset(
        r#"SecRule ARGS "@rx union select" "id:1,phase:2,pass,t:none,t:lowercase"
SecRule ARGS "@rx unIon" "id:2,phase:2,pass,t:none,t:lowercase"
SecRule ARGS "@rx (?i)drop\s+table" "id:3,phase:2,pass,t:none,t:urlDecode,t:lowercase"
SecRule ARGS "@rx [a-z]x[^a-z]" "id:4,phase:2,pass,t:none,t:lowercase"
SecRule ARGS "@rx union select" "id:5,phase:2,pass,t:none"
SecRule ARGS "@rx unionselect" "id:6,phase:2,pass,t:none,t:lowercase,t:removeWhitespace"
SecRule ARGS "@rx j" "id:7,phase:2,pass,t:none,t:lowercase,t:urlDecode""#,
    );
    let pad = "Ordinary-Text.".repeat(100);
    for long in [false, true] {
        let p = if long { pad.as_str() } else { "" };
        let ids = |value: &str| {
            let (_, tx) = get(&rs, &format!("/?q={p}{value}{p}"));
            tx.matched_rule_ids()
        };
        assert_eq!(ids("UNION%20SELECT"), vec![1, 6], "long {long}");
        assert_eq!(ids("union%20select"), vec![1, 5, 6], "long {long}");
        // `%4A` lowercased is `%4a`, decoded `J`: rule 7 does not match it.
        assert_eq!(ids("%254A"), Vec::<i64>::new(), "long {long}");
        assert_eq!(ids("%256A"), vec![7], "long {long}");
        assert_eq!(ids("UnIoN"), Vec::<i64>::new(), "long {long}");
        assert_eq!(ids("DROP%2520TABLE"), vec![3], "long {long}");
        assert_eq!(ids("AX1"), vec![4], "long {long}");
        assert_eq!(ids("aXa"), Vec::<i64>::new(), "long {long}");
    }
}

#[test]
fn whitespace_removing_rules_match_what_they_would_match_without_the_prefilter() {
    // Rules whose chain ends with `t:removeWhitespace` (then perhaps `t:lowercase`,
    // which commutes with it) are answered by the prefilter on the bytes before it;
    // their matches must be those of the rule itself, on short values and on long
    // ones (which the set of every pattern walks).
    let rs = ruleset(
        r#"SecRule ARGS "@rx unionselect" "id:1,phase:2,pass,t:none,t:removeWhitespace"
SecRule ARGS "@rx ^drop;$" "id:2,phase:2,pass,t:none,t:urlDecode,t:removeWhitespace"
SecRule ARGS "@rx a[^b]c" "id:3,phase:2,pass,t:none,t:removeWhitespace,t:lowercase"
SecRule ARGS "@rx x y" "id:4,phase:2,pass,t:none,t:removeWhitespace"
SecRule ARGS "@rx \bor\b" "id:5,phase:2,pass,t:none,t:removeWhitespace"
SecRule ARGS "@rx union select" "id:6,phase:2,pass,t:none""#,
    );
    let pad = "Ordinary-Text.".repeat(100);
    for long in [false, true] {
        // Rule 2 is anchored: a long value is the padding alone, checked apart.
        let p = if long { pad.as_str() } else { "" };
        let ids = |value: &str| {
            let (_, tx) = get(&rs, &format!("/?q={p}{value}{p}"));
            tx.matched_rule_ids()
        };
        assert_eq!(ids("union%20select"), vec![1, 6], "long {long}");
        assert_eq!(ids("un%09ion%0a%0bsel%c2%a0ect"), vec![1], "long {long}");
        assert_eq!(ids("union_select"), Vec::<i64>::new(), "long {long}");
        assert_eq!(ids("A%20%20dC"), vec![3], "long {long}");
        assert_eq!(ids("A%20b%20C"), Vec::<i64>::new(), "long {long}");
        assert_eq!(ids("x%20y"), Vec::<i64>::new(), "long {long}");
        // `o r` is `or` once the space is gone, between `.` and `-`.
        assert_eq!(ids(".o%20r-"), vec![5], "long {long}");
        assert_eq!(ids("xo%20r-"), Vec::<i64>::new(), "long {long}");
    }
    let ids = |value: &str| {
        let (_, tx) = get(&rs, &format!("/?q={value}"));
        tx.matched_rule_ids()
    };
    assert_eq!(ids("%2520drop%253B%2520"), vec![2]);
    assert_eq!(ids("%2520drop%253Bx"), Vec::<i64>::new());
}

#[test]
fn a_long_value_the_prefilter_found_no_match_in_is_not_searched_again_and_matches_stay() {
    // A rule runs on each of its values once its group says some value may match
    // (here the short `a`). For a long value, the walk of the set of every pattern
    // already answered exactly; the rule's own regex does not search it again. The
    // chained rule tells whether the long value `b` matched.
    let rs = ruleset(
        r#"SecRule ARGS "@rx select" "id:10,phase:2,pass,t:none"
SecRule ARGS "@rx evil[0-9]" "id:1,phase:2,pass,t:none,chain"
    SecRule MATCHED_VARS_NAMES "@rx ^ARGS:b$" "t:none"
SecRule ARGS "@rx union" "id:11,phase:2,pass,t:none,t:lowercase"
SecRule ARGS "@rx evil[0-9]" "id:2,phase:2,pass,t:none,t:lowercase,chain"
    SecRule MATCHED_VARS_NAMES "@rx ^ARGS:b$" "t:none"
SecRule ARGS "@rx evil[0-9]" "id:3,phase:2,pass,t:none,t:urlDecode,chain"
    SecRule MATCHED_VARS_NAMES "@rx ^ARGS:b$" "t:none""#,
    );
    let pad = "Ordinary-Text.".repeat(100);
    let ids = |b: &str| {
        let (_, tx) = get(&rs, &format!("/?a=evil1&b={pad}{b}{pad}"));
        tx.matched_rule_ids()
    };
    assert_eq!(ids("nothing"), Vec::<i64>::new());
    assert_eq!(ids("evil2"), vec![1, 2, 3]);
    assert_eq!(ids("EVIL2"), vec![2]);
    assert_eq!(ids("evil%2532"), vec![3]);
    assert_eq!(ids("union%20select"), vec![10, 11]);
}

/// A POST of `body` as `application/x-www-form-urlencoded`.
fn post(rs: &Arc<engine::Ruleset>, body: &[u8]) -> Transaction {
    let mut tx = Transaction::new(rs.clone(), TxContext::default());
    tx.set_request_line(b"POST", b"/form", b"HTTP/1.1");
    tx.add_request_header(b"Host", b"example.com");
    tx.add_request_header(b"Content-Type", b"application/x-www-form-urlencoded");
    tx.add_request_header(b"Content-Length", body.len().to_string().as_bytes());
    if tx.process_request_headers().is_none() {
        if tx.request_body_wanted() {
            let _ = tx.append_request_body(body);
        }
        let _ = tx.process_request_body();
    }
    tx
}

#[test]
fn patterns_of_the_few_rules_that_read_the_body_answer_as_the_set_of_every_pattern() {
    // Rules 1 to 3 are the only ones of their group (no transformation) that read
    // REQUEST_BODY: a long body is answered for their patterns alone (a search for
    // each one's factors, then the regex of the one whose factors occur), or, when
    // the factors of two occur, by the set of every pattern. Rules 4 and 5 read ARGS
    // in the same group; rule 6 reads the body after `t:urlDecode` (a group of its
    // own), with a pattern whose factors are only a few bytes.
    let rs = ruleset(
        r#"SecRequestBodyAccess On
SecRule REQUEST_BODY "@rx %uff[0-9a-f]{2}" "id:1,phase:2,pass,t:none"
SecRule REQUEST_BODY|REQUEST_URI "@rx java\.lang\.(?:runtime|process)" "id:2,phase:2,pass,t:none"
SecRule REQUEST_BODY "@rx (?:clone|forclosure)transformer" "id:3,phase:2,pass,t:none"
SecRule ARGS "@rx select.{0,9}from" "id:4,phase:2,pass,t:none"
SecRule ARGS "@rx uff" "id:5,phase:2,pass,t:none"
SecRule REQUEST_BODY "@rx <scr[a-z]pt" "id:6,phase:2,pass,t:none,t:urlDecode""#,
    );
    let pad = "q=".to_string() + &"Ordinary-Text.".repeat(100);
    let ids = |middle: &str, end: &str| {
        let body = format!("{pad}{middle}{pad}{end}");
        post(&rs, body.as_bytes()).matched_rule_ids()
    };
    assert_eq!(ids("", ""), Vec::<i64>::new());
    // A factor without a match, and a match.
    assert_eq!(ids("%uffzz", ""), vec![5]);
    assert_eq!(ids("%uff3c", ""), vec![1, 5]);
    assert_eq!(ids("java.lang.", "java.lang.process"), vec![2]);
    // The factors are searched without case, the pattern has it.
    assert_eq!(ids("JAVA.LANG.RUNTIME", ""), Vec::<i64>::new());
    // The factors of two patterns: the set of every pattern answers.
    assert_eq!(ids("%uff3c", "forclosuretransformer"), vec![1, 3, 5]);
    assert_eq!(ids("%uff", "clonetransforme"), vec![5]);
    assert_eq!(
        ids("java.lang.runtime%uff", "clonetransformer"),
        vec![2, 3, 5]
    );
    // The ARGS rules of the group still see the argument.
    assert_eq!(ids("select+x+from", "%uff00"), vec![1, 4, 5]);
    assert_eq!(ids("%3Cscript", ""), vec![6]);
    assert_eq!(ids("%3Cscr_pt", "<script"), vec![6]);
    assert_eq!(ids("%3Cscr_pt", "<scr_pt"), Vec::<i64>::new());
}

/// REMOTE_USER: the user the server authenticated when it sets one, else (as
/// libmodsecurity) the user name of an `Authorization: Basic` header.
#[test]
fn remote_user_from_the_server_or_the_basic_header() {
    let rs = ruleset(
        "SecRuleEngine On\nSecRule REMOTE_USER \"@streq alice\" \"id:1,phase:1,deny,status:403\"\n",
    );
    let run = |auth: Option<&[u8]>, server_user: Option<&[u8]>| {
        let mut tx = Transaction::new(rs.clone(), TxContext::default());
        tx.set_request_line(b"GET", b"/", b"HTTP/1.1");
        tx.add_request_header(b"Host", b"example.com");
        if let Some(a) = auth {
            tx.add_request_header(b"Authorization", a);
        }
        if let Some(u) = server_user {
            tx.set_remote_user(u);
        }
        tx.process_request_headers().map(|i| i.status)
    };
    // "alice:secret" and "bob:secret".
    assert_eq!(run(Some(b"Basic YWxpY2U6c2VjcmV0"), None), Some(403));
    assert_eq!(run(Some(b"Basic Ym9iOnNlY3JldA=="), None), None);
    assert_eq!(run(Some(b"Bearer YWxpY2U6c2VjcmV0"), None), None);
    assert_eq!(
        run(Some(b"Basic YWxpY2U="), None),
        None,
        "no colon: no user"
    );
    assert_eq!(run(None, None), None);
    // The server's user wins over the header.
    assert_eq!(
        run(Some(b"Basic Ym9iOnNlY3JldA=="), Some(b"alice")),
        Some(403)
    );
    assert_eq!(run(Some(b"Basic YWxpY2U6c2VjcmV0"), Some(b"bob")), None);
}
