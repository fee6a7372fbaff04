//! The forward proxy with a real browser: Debian's `chromium`, headless, set to
//! use the proxy (`--proxy-server`, loopback not bypassed), loads a page from a
//! local backend through it, and a page of a blocked category shows the block
//! page. Without chromium the test fails unless PALISADE_ALLOW_SKIP=1.

mod common;

use common::*;
use std::process::Command;
use std::time::Duration;

const CHROMIUM: &str = "/usr/bin/chromium";

/// The DOM chromium shows for `url` through the proxy at `proxy`.
fn browse(proxy: std::net::SocketAddr, url: &str) -> String {
    let dir = TempDir::new("forward-chromium");
    let out = Command::new("timeout")
        .args(["-k", "10", "120", CHROMIUM])
        .args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
        ])
        .arg(format!("--proxy-server=http://{proxy}"))
        // Chromium sends loopback addresses direct unless told otherwise.
        .arg("--proxy-bypass-list=<-loopback>")
        .arg(format!("--user-data-dir={}", dir.0.display()))
        .args(["--dump-dom", url])
        .output()
        .expect("run chromium");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromium_loads_pages_through_the_proxy_and_shows_the_block_page() {
    if !std::path::Path::new(CHROMIUM).exists() {
        if std::env::var("PALISADE_ALLOW_SKIP").as_deref() == Ok("1") {
            eprintln!("SKIPPED: the forward browser test needs {CHROMIUM}");
            return;
        }
        panic!(
            "the forward browser test needs Debian's chromium (apt-get install chromium), or PALISADE_ALLOW_SKIP=1"
        );
    }
    let backend = Backend::start().await;
    let port = backend.addr.port();
    let dir = TempDir::new("forward-browser");
    std::fs::create_dir_all(dir.path("categories")).unwrap();
    std::fs::write(
        dir.path("categories/games.txt"),
        "# the backend's /games/ pages\n127.0.0.1/games/\n",
    )
    .unwrap();
    let listen = loopback(free_port());
    let cfg = format!(
        "[[listener]]\naddress = \"{listen}\"\nmode = \"forward\"\n\n[forward]\ncategories = \"categories\"\nblock_categories = [\"games\"]\n\n[logs]\naccess_log = \"{}\"\n",
        dir.path("access.log").display()
    );
    let _p = Palisade::start(&dir, &cfg, listen);

    // A page through the proxy: the backend's answer is what the browser shows.
    let page = tokio::task::spawn_blocking(move || {
        browse(listen, &format!("http://127.0.0.1:{port}/welcome"))
    })
    .await
    .unwrap();
    assert!(page.contains("hello from backend"), "{page}");
    assert!(
        backend.requests().iter().any(|r| r.uri == "/welcome"),
        "the backend never saw the page's request"
    );
    // The proxy carried it (the access log names it), not a direct connection.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let log = std::fs::read_to_string(dir.path("access.log")).unwrap_or_default();
        if log.contains("/welcome") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no access-log line for /welcome: {log}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A blocked category: the browser shows the block page, and the backend
    // never sees the request.
    let page = tokio::task::spawn_blocking(move || {
        browse(listen, &format!("http://127.0.0.1:{port}/games/arcade"))
    })
    .await
    .unwrap();
    assert!(page.contains("Access refused"), "the block page: {page}");
    assert!(
        page.contains("games"),
        "the block page names the category: {page}"
    );
    assert!(!page.contains("hello from backend"), "{page}");
    assert!(
        !backend
            .requests()
            .iter()
            .any(|r| r.uri.starts_with("/games/")),
        "a blocked page reached the backend"
    );
}
