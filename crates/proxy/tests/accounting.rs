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
