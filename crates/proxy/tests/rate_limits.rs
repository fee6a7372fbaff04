//! `[[rate_limit]]`: keys from the client address, a header, a cookie, the path, or a
//! TX variable that the rules set in phase 1; 429 with `Retry-After` when over, and
//! a counter per limit; bad limits refused at start with their name.

mod common;

use common::*;

const LIMITS: &str = r#"
[[rate_limit]]
name = "per-ip"
key = "client_ip"
rate = "1/min"
burst = 2
path_prefix = "/ip/"

[[rate_limit]]
name = "per-api-key"
key = "header:X-Api-Key"
rate = "1/min"
path_prefix = "/key/"

[[rate_limit]]
name = "per-session-and-path"
key = ["cookie:session", "path"]
rate = "1/min"
path_prefix = "/cookie/"

[[rate_limit]]
name = "per-user"
key = "tx:rate_user"
rate = "1/min"
status = 503
path_prefix = "/user/"
"#;

const RULES: &str = r#"SecRuleEngine On
SecRule REQUEST_HEADERS:X-User "@rx ^([a-z0-9]+)$" "id:1,phase:1,pass,nolog,capture,setvar:tx.rate_user=%{TX.1}""#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_by_every_kind_of_key() {
    let backend = Backend::start().await;
    let dir = TempDir::new("rate-limits");
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    let config = basic_config(
        listen,
        backend.addr,
        &format!(
            "{LIMITS}\n{}\n[admin]\naddress = \"{admin}\"\n",
            rules_toml(RULES)
        ),
    );
    let _p = Palisade::start(&dir, &config, listen);

    // Client address: 1 + burst 2, then 429 with Retry-After.
    for _ in 0..3 {
        assert_eq!(get(listen, "/ip/a", "").await.status, 200);
    }
    let r = get(listen, "/ip/b?x=1", "").await;
    assert_eq!(r.status, 429);
    let retry: u64 = r
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    // Outside the limit's path: not limited.
    assert_eq!(get(listen, "/other", "").await.status, 200);

    // A header: per value; without the header the limit does not apply.
    assert_eq!(get(listen, "/key/", "X-Api-Key: k1\r\n").await.status, 200);
    assert_eq!(get(listen, "/key/", "X-Api-Key: k1\r\n").await.status, 429);
    assert_eq!(get(listen, "/key/", "X-Api-Key: k2\r\n").await.status, 200);
    assert_eq!(get(listen, "/key/", "").await.status, 200);
    assert_eq!(get(listen, "/key/", "").await.status, 200);

    // A cookie and the path, joined.
    let s1 = "Cookie: theme=dark; session=s1\r\n";
    assert_eq!(get(listen, "/cookie/a", s1).await.status, 200);
    assert_eq!(get(listen, "/cookie/a", s1).await.status, 429);
    assert_eq!(get(listen, "/cookie/b", s1).await.status, 200);
    assert_eq!(
        get(listen, "/cookie/a", "Cookie: session=s2\r\n")
            .await
            .status,
        200
    );

    // A TX variable the rules set in phase 1, with its own status.
    assert_eq!(get(listen, "/user/", "X-User: alice\r\n").await.status, 200);
    let r = get(listen, "/user/", "X-User: alice\r\n").await;
    assert_eq!(r.status, 503);
    assert!(r.header("retry-after").is_some());
    assert_eq!(get(listen, "/user/", "X-User: bob\r\n").await.status, 200);

    // The backend saw only what passed; the counters say who refused what.
    assert_eq!(backend.requests().len(), 13);
    let m = get(admin, "/metrics", "").await.text();
    for (limit, n) in [
        ("per-ip", 1),
        ("per-api-key", 1),
        ("per-session-and-path", 1),
        ("per-user", 1),
    ] {
        assert!(
            m.contains(&format!(
                "palisade_rate_limited_total{{limit=\"{limit}\"}} {n}\n"
            )),
            "{limit}: {m}"
        );
    }
    assert!(m.contains("action=\"rate_limited\""), "{m}");
}

#[test]
fn bad_limits_are_refused_naming_them() {
    for (limit, want) in [
        (
            "name = \"a\"\nkey = \"client_ip\"\nrate = \"10/day\"",
            "rate_limit \"a\"",
        ),
        (
            "name = \"b\"\nkey = \"ip\"\nrate = \"10/s\"",
            "unknown key part",
        ),
        (
            "name = \"c\"\nkey = \"client_ip\"\nrate = \"10/s\"\nstatus = 200",
            "4xx or 5xx",
        ),
    ] {
        assert_check_refuses(&format!("[[rate_limit]]\n{limit}\n"), want);
    }
}
