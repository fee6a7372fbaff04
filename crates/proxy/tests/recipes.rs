//! docs/recipes.md, run as written: each recipe's SecLang and commands are read from
//! the page itself, with CRS v4 (../shared/crs) and examples/palisade-recommended.conf
//! loaded, in front of a recording backend. Also checks that the CRS example of
//! docs/config.md loads as pasted.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The code blocks of a Markdown page that follow the heading `heading`, up to the
/// next heading.
fn blocks(page: &str, heading: &str) -> Vec<String> {
    let text = std::fs::read_to_string(repo().join(page)).unwrap();
    let start = text
        .find(&format!("## {heading}\n"))
        .unwrap_or_else(|| panic!("{page}: no section {heading:?}"));
    let section = &text[start + heading.len() + 4..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    let mut out = Vec::new();
    let mut rest = section;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        let body_start = after.find('\n').map_or(after.len(), |n| n + 1);
        let end = after[body_start..].find("```").expect("closed code block");
        out.push(after[body_start..body_start + end].to_string());
        rest = &after[body_start + end + 3..];
    }
    out
}

/// The recommended base settings, then `before` (a recipe's rules), then CRS v4.
fn rules(before: &str) -> Option<String> {
    let crs = repo().join("../shared/crs");
    required(&crs.join("rules"), "the recipes (CRS v4 at ../shared/crs)")?;
    let file = |p: &Path| format!("[[rules]]\nfile = \"{}\"\n", p.display());
    let mut out = file(&repo().join("examples/palisade-recommended.conf"));
    out += &file(&crs.join("crs-setup.conf.example"));
    if !before.is_empty() {
        out += &format!("[[rules]]\ninline = '''\n{before}'''\n");
    }
    out += &file(&crs.join("rules/*.conf"));
    Some(out)
}

fn start(
    name: &str,
    before: &str,
    backend: &Backend,
) -> Option<(TempDir, Palisade, std::net::SocketAddr)> {
    start_with(name, before, "", backend)
}

/// [`start`] with `toml` (a recipe's configuration) added to the configuration file.
fn start_with(
    name: &str,
    before: &str,
    toml: &str,
    backend: &Backend,
) -> Option<(TempDir, Palisade, std::net::SocketAddr)> {
    let rules = rules(before)?;
    let dir = TempDir::new(name);
    let listen = loopback(free_port());
    let extra = format!(
        "[logs]\nerror_log = \"{}\"\n\n{rules}\n{toml}",
        dir.path("error.log").display()
    );
    let p = Palisade::start(&dir, &basic_config(listen, backend.addr, &extra), listen);
    Some((dir, p, listen))
}

/// A shell line of the page (`palisade ctx -c FILE ARGS...`) as the arguments after
/// `ctx -c FILE`.
fn ctx_args(line: &str) -> Vec<String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(&words[..2], ["palisade", "ctx"], "{line}");
    assert_eq!(words[2], "-c", "{line}");
    words[4..].iter().map(|w| w.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn block_an_address_from_outside_while_crs_runs() {
    let backend = Backend::start().await;
    let Some((dir, _p, listen)) = start("recipe-block", "", &backend) else {
        return;
    };
    let page = blocks(
        "docs/recipes.md",
        "Block an address from outside, while CRS runs",
    );
    let (block, unblock) = (page[0].trim(), page[1].trim());
    let page_get = "/products?id=42";
    assert_eq!(get(listen, page_get, "").await.status, 200);

    // The page blocks 203.0.113.9; the test's client is 127.0.0.1.
    let set: Vec<String> = ctx_args(block)
        .into_iter()
        .map(|a| a.replace("203.0.113.9", "127.0.0.1"))
        .collect();
    let set: Vec<&str> = set.iter().map(String::as_str).collect();
    let out = ctx(&dir, &set);
    assert!(out.status.success(), "{}", output_text(&out));
    assert_eq!(get(listen, page_get, "").await.status, 403);
    let line = wait_for_line(&dir.path("error.log"), Duration::from_secs(10), |l| {
        l.contains("[id \"10011\"]")
    })
    .expect("the block's log line");
    assert!(
        line.contains("Client address blocked by the operator"),
        "{line}"
    );
    assert!(line.contains("Access denied with code 403"), "{line}");

    let del: Vec<String> = ctx_args(unblock)
        .into_iter()
        .map(|a| a.replace("203.0.113.9", "127.0.0.1"))
        .collect();
    let del: Vec<&str> = del.iter().map(String::as_str).collect();
    let out = ctx(&dir, &del);
    assert!(out.status.success(), "{}", output_text(&out));
    assert_eq!(get(listen, page_get, "").await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exclude_one_crs_rule_for_one_path() {
    let backend = Backend::start().await;
    let page = blocks("docs/recipes.md", "Exclude one CRS rule for one path");
    let Some((dir, _p, listen)) = start("recipe-exclude", &page[0], &backend) else {
        return;
    };
    // A Host that is an IP address: 920350 logs it (a warning, the request passes).
    let by_ip = "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: lb-check/1.0\r\nAccept: */*\r\nConnection: close\r\n\r\n";
    for path in ["/health", "/status"] {
        let raw = by_ip.replace("{path}", path);
        assert_eq!(send_raw(listen, raw.as_bytes()).await.unwrap().status, 200);
    }
    let line = wait_for_line(&dir.path("error.log"), Duration::from_secs(10), |l| {
        l.contains("[id \"920350\"]")
    })
    .expect("920350 logged for /status");
    assert!(line.contains("[uri \"/status\"]"), "{line}");
    let log = std::fs::read_to_string(dir.path("error.log")).unwrap();
    assert!(
        !log.lines()
            .any(|l| l.contains("[id \"920350\"]") && l.contains("[uri \"/health\"]")),
        "920350 was not removed for /health:\n{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_one_site_in_detection_only() {
    let backend = Backend::start().await;
    let page = blocks("docs/recipes.md", "Run one site in DetectionOnly");
    let Some((dir, _p, listen)) = start_with("recipe-detectiononly", "", &page[0], &backend) else {
        return;
    };
    let attack = "GET /search?q=1%27%20OR%20%271%27%3D%271 HTTP/1.1\r\nHost: {host}\r\nUser-Agent: Mozilla/5.0\r\nAccept: */*\r\nConnection: close\r\n\r\n";
    let on = |host: &str| attack.replace("{host}", host);
    assert_eq!(
        send_raw(listen, on("legacy.example.com").as_bytes())
            .await
            .unwrap()
            .status,
        200
    );
    assert_eq!(
        send_raw(listen, on("shop.example.com").as_bytes())
            .await
            .unwrap()
            .status,
        403
    );
    let warned = wait_for_line(&dir.path("error.log"), Duration::from_secs(10), |l| {
        l.contains("legacy.example.com") && l.contains("ModSecurity: Warning.")
    })
    .expect("the DetectionOnly site's attack is logged as a warning");
    assert!(warned.contains("[site \"legacy\"]"), "{warned}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raise_the_upload_limit_on_one_route() {
    let backend = Backend::start().await;
    let page = blocks("docs/recipes.md", "Raise the upload limit on one route");
    let Some((_dir, _p, listen)) = start_with("recipe-upload", "", &page[0], &backend) else {
        return;
    };
    const BROWSER: &str = "User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0\r\nAccept: text/html,*/*;q=0.8\r\nAccept-Language: en-GB,en;q=0.5\r\n";
    // 14 MiB: over the global 13 MiB (limits.request_body_bytes and CRS's
    // SecRequestBodyLimit in palisade-recommended.conf), under the route's 100 MiB.
    let n = 14 << 20;
    let up =
        |host: &'static str, path: &'static str| multipart_upload(listen, host, path, n, BROWSER);
    assert_eq!(up("files.example.com", "/upload/q3.txt").await, 200);
    assert_eq!(up("files.example.com", "/profile").await, 413);
    assert_eq!(up("www.example.com", "/upload/q3.txt").await, 413);
    assert_eq!(up("files.example.com", "/Upload/q3.txt").await, 413);
    // Under the global limit, every route takes it.
    assert_eq!(
        multipart_upload(listen, "files.example.com", "/profile", 1 << 20, BROWSER).await,
        200
    );
}

#[test]
fn docs_crs_example_loads() {
    // docs/config.md's CRS example, as pasted, with its relative path taken from the
    // repository root (it names examples/palisade-recommended.conf).
    let example = blocks("docs/config.md", "`[[rules]]`")
        .into_iter()
        .find(|b| b.contains("/usr/share/modsecurity-crs/rules/*.conf"))
        .expect("docs/config.md has the CRS example");
    if required(
        Path::new("/usr/share/modsecurity-crs/rules"),
        "docs/config.md's CRS example (Debian's modsecurity-crs)",
    )
    .is_none()
    {
        return;
    }
    let dir = TempDir::new("docs-crs-example");
    let example = example.replace(
        "\"examples/palisade-recommended.conf\"",
        &format!(
            "\"{}\"",
            repo().join("examples/palisade-recommended.conf").display()
        ),
    );
    let cfg = dir.path("palisade.toml");
    std::fs::write(
        &cfg,
        format!(
            "[[listener]]\naddress = \"127.0.0.1:{}\"\n\n[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:9\"]\n\n{example}",
            free_port()
        ),
    )
    .unwrap();
    let out = palisade_check("--config", &cfg);
    assert!(out.status.success(), "{}", output_text(&out));
}

#[test]
fn migration_example_checks() {
    // docs/migrating-from-nginx-modsecurity.md's Palisade configuration, with its
    // certificate, log and recommended-settings paths pointed at the test's own files.
    let text =
        std::fs::read_to_string(repo().join("docs/migrating-from-nginx-modsecurity.md")).unwrap();
    let start = text.find("```toml\n").expect("the example's TOML block") + 8;
    let example = &text[start..start + text[start..].find("```").unwrap()];
    if required(
        Path::new("/usr/bin/openssl"),
        "the migration example (openssl)",
    )
    .is_none()
        || required(
            Path::new("/usr/share/modsecurity-crs/rules"),
            "the migration example (Debian's modsecurity-crs)",
        )
        .is_none()
    {
        return;
    }
    let dir = TempDir::new("migration-example");
    let (cert, key) = (dir.path("shop.pem"), dir.path("shop.key"));
    let made = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args([
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=shop.example.com",
            "-keyout",
        ])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", output_text(&made));
    let config = example
        .replace("0.0.0.0:443", &format!("127.0.0.1:{}", free_port()))
        .replace("/etc/ssl/shop.pem", &cert.display().to_string())
        .replace("/etc/ssl/shop.key", &key.display().to_string())
        .replace("/var/log/palisade", &dir.0.display().to_string())
        .replace(
            "/usr/share/palisade/palisade-recommended.conf",
            &repo()
                .join("examples/palisade-recommended.conf")
                .display()
                .to_string(),
        );
    let cfg = dir.path("palisade.toml");
    std::fs::write(&cfg, config).unwrap();
    let out = palisade_check("--config", &cfg);
    assert!(out.status.success(), "{}", output_text(&out));
}
