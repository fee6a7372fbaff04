//! Per-client and per-route accounting through the admin API: `GET /top` lists the
//! heaviest clients by requests, bytes or blocks, with the routes' totals, and asks
//! for the admin token (it shows client addresses).

mod common;

use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_lists_clients_and_routes() {
    let backend = Backend::start().await;
    let dir = TempDir::new("accounting");
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    std::fs::write(dir.path("token"), "top-token\n").unwrap();
    let rules = rules_toml(r#"SecRule ARGS:q "@streq bad" "id:1,phase:1,deny,status:403""#);
    let config = basic_config(
        listen,
        backend.addr,
        &format!("{rules}\n[admin]\naddress = \"{admin}\"\ntoken_file = \"token\"\n"),
    );
    let _p = Palisade::start(&dir, &config, listen);
    let get = |path: &'static str| async move {
        send_raw(
            listen,
            format!("GET {path} HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await
        .unwrap()
        .status
    };
    for _ in 0..5 {
        assert_eq!(get("/?q=ok").await, 200);
    }
    for _ in 0..2 {
        assert_eq!(get("/?q=bad").await, 403);
    }
    let top = |q: &'static str, token: Option<&'static str>| async move {
        let auth = token
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        send_raw(
            admin,
            format!("GET /top{q} HTTP/1.1\r\nHost: admin\r\n{auth}Connection: close\r\n\r\n")
                .as_bytes(),
        )
        .await
        .unwrap()
    };
    assert_eq!(top("", None).await.status, 401);
    assert_eq!(top("", Some("wrong")).await.status, 401);
    assert_eq!(top("?by=nothing", Some("top-token")).await.status, 400);

    // The readiness probe of Palisade::start is a connection without a request: it
    // is not counted. Seven requests from 127.0.0.1, two of them blocked. A request
    // is counted when its record is finished, just after its response is sent: wait
    // for the last one.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let v = loop {
        let r = top("", Some("top-token")).await;
        assert_eq!(r.status, 200, "{}", r.text());
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        if v["total"] == 7 || std::time::Instant::now() > deadline {
            break v;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(v["by"], "requests");
    assert_eq!(v["clients"][0]["client"], "127.0.0.1", "{v}");
    assert_eq!(v["clients"][0]["count"], 7, "{v}");
    assert_eq!(v["clients"][0]["error"], 0, "{v}");
    let routes = v["routes"].as_array().unwrap();
    let app = routes
        .iter()
        .find(|r| r["route"] == "app")
        .expect("route app");
    assert_eq!(app["requests"], 5, "{v}");
    let none = routes.iter().find(|r| r["route"] == "-").expect("route -");
    assert_eq!(none["requests"], 2, "blocked before any upstream: {v}");
    assert_eq!(none["blocks"], 2, "{v}");

    let v: serde_json::Value =
        serde_json::from_slice(&top("?by=blocks&n=1", Some("top-token")).await.body).unwrap();
    assert_eq!(v["clients"][0]["count"], 2, "{v}");
    let v: serde_json::Value =
        serde_json::from_slice(&top("?by=bytes_out", Some("top-token")).await.body).unwrap();
    assert!(v["clients"][0]["count"].as_u64().unwrap() > 0, "{v}");
}

/// `/top` as the admin token's holder sees it, parsed.
async fn top_json(admin: std::net::SocketAddr, token: &str) -> serde_json::Value {
    let r = send_raw(
        admin,
        format!(
            "GET /top HTTP/1.1\r\nHost: admin\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    serde_json::from_slice(&r.body).unwrap()
}

/// Starts Palisade with three rules and `server.rule_cost_sample = sample`, sends
/// four GETs (one blocked by rule 3), and returns `/top` once the four are
/// accounted, with the sampled requests' count from `/metrics` and the sampled
/// phase-1 runs, user and kernel CPU seconds.
async fn rule_cost_after_four_requests(sample: &str) -> (serde_json::Value, f64, [f64; 3]) {
    let backend = Backend::start().await;
    let dir = TempDir::new("rule-cost");
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    std::fs::write(dir.path("token"), "cost-token\n").unwrap();
    let rules = rules_toml(
        r#"SecRule ARGS "@rx ^[a-z]+$" "id:1,phase:1,pass,nolog,t:lowercase,t:urlDecodeUni"
SecRule REQUEST_HEADERS "@contains x" "id:2,phase:1,pass,nolog,chain"
    SecRule ARGS "@contains y" ""
SecRule ARGS:q "@streq bad" "id:3,phase:2,deny,status:403""#,
    );
    let config = basic_config(
        listen,
        backend.addr,
        &format!(
            "{rules}\n[server]\nrule_cost_sample = {sample}\n[admin]\naddress = \"{admin}\"\ntoken_file = \"token\"\n"
        ),
    );
    let _p = Palisade::start(&dir, &config, listen);
    for q in ["ok", "ok", "ok", "bad"] {
        let r = send_raw(
            listen,
            format!("GET /?q={q} HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await
        .unwrap();
        assert_eq!(r.status, if q == "bad" { 403 } else { 200 });
    }
    // A request is accounted once its record is finished, just after its response:
    // wait (generously, for a busy machine) until all four are.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let v = loop {
        let v = top_json(admin, "cost-token").await;
        if v["total"] == 4 || std::time::Instant::now() > deadline {
            break v;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(v["total"], 4, "{v}");
    let sampled = metric(admin, "palisade_rule_cost_sampled_requests_total").await;
    let mut phase1 = [0.0; 3];
    for (slot, series) in phase1.iter_mut().zip([
        "palisade_waf_phase_sampled_total{phase=\"1\"}",
        "palisade_waf_phase_sampled_cpu_seconds_total{phase=\"1\",mode=\"user\"}",
        "palisade_waf_phase_sampled_cpu_seconds_total{phase=\"1\",mode=\"system\"}",
    ]) {
        *slot = metric(admin, series).await;
    }
    (v, sampled, phase1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn top_lists_what_each_rule_costs() {
    let (v, metrics, phase1) = rule_cost_after_four_requests("1.0").await;
    // Each sampled request's phase 1 is counted, with its CPU split into user and
    // kernel time. The kernel may read a thread's CPU in whole scheduler ticks, so
    // four short phases can add up to zero: the series must be there, not positive
    // (procstat's unit test checks the reading itself).
    assert_eq!(phase1[0], 4.0, "{phase1:?}");
    assert!(phase1[1] >= 0.0 && phase1[2] >= 0.0, "{phase1:?}");
    let cost = &v["rule_cost"];
    assert_eq!(cost["sample"], 1.0, "{v}");
    assert_eq!(cost["sampled_requests"], 4, "{v}");
    let rules = cost["rules"].as_array().unwrap();
    let of = |id: i64| {
        rules
            .iter()
            .find(|r| r["rule_id"] == id)
            .unwrap_or_else(|| panic!("rule {id} in {v}"))
    };
    // Every request runs rules 1 and 2 (the chain counted once, by its first
    // rule) in phase 1 and rule 3 in phase 2.
    for (id, phase) in [(1, 1), (2, 1), (3, 2)] {
        let r = of(id);
        assert_eq!(r["phase"], phase, "{r}");
        assert_eq!(r["evaluations"], 4, "{r}");
        let mean = r["mean_us"].as_f64().unwrap();
        let max = r["max_us"].as_f64().unwrap();
        assert!(mean > 0.0 && max >= mean, "{r}");
    }
    let shares: f64 = rules.iter().map(|r| r["share"].as_f64().unwrap()).sum();
    assert!(
        (shares - 1.0).abs() < 1e-6,
        "shares add up to the whole: {v}"
    );
    let totals: Vec<f64> = rules
        .iter()
        .map(|r| r["total_us"].as_f64().unwrap())
        .collect();
    assert!(totals.windows(2).all(|w| w[0] >= w[1]), "most first: {v}");
    assert_eq!(metrics, 4.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_cost_sampling_can_be_turned_off() {
    let (v, metrics, phase1) = rule_cost_after_four_requests("0").await;
    assert_eq!(phase1, [0.0; 3]);
    assert_eq!(v["rule_cost"]["sampled_requests"], 0, "{v}");
    assert_eq!(v["rule_cost"]["rules"], serde_json::json!([]), "{v}");
    assert_eq!(metrics, 0.0);
}
