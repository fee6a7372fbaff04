//! End to end: nothing that a limit or a parse error left uninspected reaches the
//! backend. The real `palisade` binary runs on 127.0.0.1 in front of a recording
//! backend, whose record proves what got through.

mod common;

use common::*;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A stand-in for the Core Rule Set: a tautology in any argument or XML text is an
/// SQL injection.
const SQLI_RULE: &str = r#"
[[rules]]
inline = """
SecRequestBodyAccess On
SecRule ARGS|XML:/* "@rx (?i)' or '" "id:1,phase:2,deny,status:403,log,msg:'SQL injection'"
"""
"#;

const ATTACK: &str = "id=1%27%20OR%20%271%27%3D%271";

fn logs(dir: &TempDir) -> String {
    format!(
        "[logs]\nerror_log = \"{}\"\naccess_log = \"{}\"\n",
        dir.path("error.log").display(),
        dir.path("access.log").display()
    )
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn plugins() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plugins")
}

fn crs() -> Option<PathBuf> {
    let crs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/crs");
    required(&crs.join("rules"), "CRS v4 (../shared/crs)").map(|()| crs)
}

/// The example configurations' base rules (examples/palisade-recommended.conf),
/// then CRS v4 from ../shared/crs (required; with PALISADE_ALLOW_SKIP=1 and no CRS,
/// the stand-in SQL injection rule).
fn base_and_crs() -> String {
    let base = format!(
        "[[rules]]\nfile = \"{}\"\n",
        examples().join("palisade-recommended.conf").display()
    );
    match crs() {
        Some(crs) => format!(
            "{base}[[rules]]\nfile = \"{crs}/crs-setup.conf.example\"\n[[rules]]\nfile = \"{crs}/rules/*.conf\"\n",
            crs = crs.display()
        ),
        None => {
            format!("{base}{SQLI_RULE}")
        }
    }
}

/// examples/crs-debian.toml, the quick start's configuration, as scripts/quickstart
/// runs it (addresses, log paths and the base rules file adjusted), when Debian's
/// modsecurity-crs is installed.
fn quickstart_config(dir: &TempDir, listen: SocketAddr, backend: SocketAddr) -> Option<String> {
    if !Path::new("/usr/share/modsecurity-crs/owasp-crs.load").exists() {
        eprintln!("Debian's modsecurity-crs is not installed: CRS v4 replaces it");
        return None;
    }
    let text = std::fs::read_to_string(examples().join("crs-debian.toml")).unwrap();
    let base = examples().join("palisade-recommended.conf");
    let replaced = text
        .replace("127.0.0.1:8080", &listen.to_string())
        .replace("127.0.0.1:8081", &backend.to_string())
        .replace("127.0.0.1:9901", &loopback(free_port()).to_string())
        .replace(
            "/tmp/palisade-error.log",
            &dir.path("error.log").display().to_string(),
        )
        .replace(
            "/tmp/palisade-access.log",
            &dir.path("access.log").display().to_string(),
        )
        .replace(
            "file = \"palisade-recommended.conf\"",
            &format!("file = \"{}\"", base.display()),
        )
        .replace(
            "file = \"../plugins/",
            &format!("file = \"{}/", plugins().display()),
        );
    Some(replaced)
}

fn request(method: &str, target: &str, ctype: &str, body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "{method} {target} HTTP/1.1\r\nHost: localhost\r\nUser-Agent: Mozilla/5.0\r\nAccept: text/html\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

async fn status(listen: std::net::SocketAddr, req: &[u8]) -> u16 {
    send_raw(listen, req).await.unwrap().status
}

fn many_args(n: usize) -> String {
    (0..n).map(|i| format!("a{i}=1&")).collect()
}

fn error_line(dir: &TempDir, needle: &str) -> String {
    wait_for_line(&dir.path("error.log"), Duration::from_secs(5), |l| {
        l.contains(needle)
    })
    .unwrap_or_else(|| panic!("no error log line with {needle:?}"))
}

/// Finding 2: with the default SecArgumentsLimit (1000) and no rule that counts
/// arguments, the attack as argument 1,001 used to reach the backend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argument_1001_never_reaches_the_backend_unseen() {
    let backend = Backend::start().await;
    let dir = TempDir::new("args1001");
    let listen = loopback(free_port());
    let extra = format!("{}{SQLI_RULE}", logs(&dir));
    let _p = Palisade::start(&dir, &basic_config(listen, backend.addr, &extra), listen);

    let query = format!("/?{}{ATTACK}", many_args(1000));
    assert_eq!(
        status(listen, &request("GET", &query, "text/plain", b"")).await,
        400
    );
    let line = error_line(&dir, "Palisade limit check");
    assert!(line.contains("SecArgumentsLimit (1000)"), "{line}");
    assert!(
        line.contains("Access denied with code 400 (phase 1)"),
        "{line}"
    );

    let form = format!("{}{ATTACK}", many_args(1000));
    let r = request(
        "POST",
        "/",
        "application/x-www-form-urlencoded",
        form.as_bytes(),
    );
    assert_eq!(status(listen, &r).await, 400);

    let mut mp = Vec::new();
    for i in 0..1000 {
        mp.extend_from_slice(
            format!("--B\r\nContent-Disposition: form-data; name=\"a{i}\"\r\n\r\n1\r\n").as_bytes(),
        );
    }
    mp.extend_from_slice(
        b"--B\r\nContent-Disposition: form-data; name=\"id\"\r\n\r\n1' OR '1'='1\r\n--B--\r\n",
    );
    let r = request("POST", "/", "multipart/form-data; boundary=B", &mp);
    assert_eq!(status(listen, &r).await, 400);

    assert!(
        backend.requests().is_empty(),
        "reached the backend: {:?}",
        backend
            .requests()
            .iter()
            .map(|s| &s.uri)
            .collect::<Vec<_>>()
    );
    // At the limit, nothing is dropped and a benign request passes.
    let query = format!("/?{}", many_args(1000));
    assert_eq!(
        status(listen, &request("GET", &query, "text/plain", b"")).await,
        200
    );
    assert_eq!(backend.requests().len(), 1);
}

/// Finding 2 for JSON bodies: the 1,001st member of a parsed JSON body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_argument_1001_never_reaches_the_backend_unseen() {
    let backend = Backend::start().await;
    let dir = TempDir::new("json1001");
    let listen = loopback(free_port());
    let extra = format!(
        "{}{SQLI_RULE}\n[[rules]]\ninline = \"\"\"\nSecRule REQUEST_HEADERS:Content-Type \"@rx ^application/json\" \"id:2,phase:1,pass,nolog,ctl:requestBodyProcessor=JSON\"\n\"\"\"\n",
        logs(&dir)
    );
    let _p = Palisade::start(&dir, &basic_config(listen, backend.addr, &extra), listen);
    let mut json = String::from("{");
    for i in 0..1000 {
        json.push_str(&format!("\"a{i}\":1,"));
    }
    json.push_str("\"id\":\"1' OR '1'='1\"}");
    let r = request("POST", "/", "application/json", json.as_bytes());
    assert_eq!(status(listen, &r).await, 400);
    assert!(backend.requests().is_empty());
    let line = error_line(&dir, "Palisade limit check");
    assert!(line.contains("SecArgumentsLimit (1000)"), "{line}");
}

/// Finding 3: the quick start's configuration (its base rules with the Core Rule
/// Set and the detection plugin) parses JSON and refuses a body that could not be
/// parsed whole, so neither the attack nor a prefix that breaks the parse gets
/// through. With the plugin, the raw text of an unparsable body is inspected too, so
/// an attack in it is answered 403; a benign body that does not parse gets 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quickstart_config_stops_json_attacks_and_unparsable_json() {
    let backend = Backend::start().await;
    let dir = TempDir::new("example-json");
    let listen = loopback(free_port());
    let quickstart = quickstart_config(&dir, listen, backend.addr);
    let with_plugin = quickstart.is_some();
    let config = quickstart.unwrap_or_else(|| {
        let extra = format!("{}{}", logs(&dir), base_and_crs());
        basic_config(listen, backend.addr, &extra)
    });
    let _p = Palisade::start(&dir, &config, listen);
    let attack = br#"{"id":"1' OR '1'='1"}"#;
    let benign = br#"{"name":"alice","tags":["a","b"]}"#;
    let with_prefix = |prefix: &[u8], body: &[u8]| {
        let mut b = prefix.to_vec();
        b.extend_from_slice(body);
        b
    };
    let post = |body: &[u8]| request("POST", "/products", "application/json", body);
    let unparsable_attack = if with_plugin { 403 } else { 400 };

    assert_eq!(status(listen, &post(attack)).await, 403);
    // A byte-order mark, invalid UTF-8, nesting deeper than the limit (512).
    for prefix in [&b"\xEF\xBB\xBF"[..], b"\xff"] {
        assert_eq!(
            status(listen, &post(&with_prefix(prefix, attack))).await,
            unparsable_attack
        );
        assert_eq!(
            status(listen, &post(&with_prefix(prefix, benign))).await,
            400
        );
    }
    let deep = |inner: &str| format!("{}{inner}{}", "[".repeat(600), "]".repeat(600));
    assert_eq!(
        status(listen, &post(deep("\"1' OR '1'='1\"").as_bytes())).await,
        unparsable_attack
    );
    assert_eq!(
        status(listen, &post(deep("\"alice\"").as_bytes())).await,
        400
    );
    // 10003 logs the condition; the built-in check refuses after the rules.
    error_line(&dir, "[id \"10003\"]");
    let line = error_line(&dir, "Palisade limit check");
    assert!(
        line.contains("Access denied with code 400 (phase 2)"),
        "{line}"
    );
    assert!(
        backend.requests().is_empty(),
        "reached the backend: {:?}",
        backend.requests()
    );
    // A benign JSON body passes, whole.
    assert_eq!(status(listen, &post(benign)).await, 200);
    let seen = backend.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].body, benign);
}

/// Finding 4: an injection declared as an XML internal entity is inspected as the
/// application's parser expands it; an expansion bomb is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn xml_entities_are_inspected_expanded() {
    let backend = Backend::start().await;
    let dir = TempDir::new("xml-entity");
    let listen = loopback(free_port());
    let extra = format!("{}{}", logs(&dir), base_and_crs());
    let _p = Palisade::start(&dir, &basic_config(listen, backend.addr, &extra), listen);
    let post = |body: &[u8]| request("POST", "/api", "application/xml", body);

    let doc = br#"<!DOCTYPE r [<!ENTITY q "1' OR '1'='1">]><r>&q;</r>"#;
    assert_eq!(status(listen, &post(doc)).await, 403);
    let mut dtd = String::from("<!ENTITY l0 \"lol\">");
    for n in 1..10 {
        dtd.push_str(&format!(
            "<!ENTITY l{n} \"{}\">",
            format!("&l{};", n - 1).repeat(10)
        ));
    }
    let bomb = format!("<!DOCTYPE r [{dtd}]><r>&l9;</r>");
    assert_eq!(status(listen, &post(bomb.as_bytes())).await, 400);
    // palisade-recommended.conf's 10003 logs the parse error; the built-in check
    // after the rules refuses the request.
    error_line(&dir, "[id \"10003\"]");
    let line = error_line(&dir, "Access denied with code 400");
    assert!(line.contains("entity expansion over"), "{line}");
    assert!(backend.requests().is_empty(), "{:?}", backend.requests());
    let benign = br#"<!DOCTYPE r [<!ENTITY who "alice">]><r><name>&who;</name></r>"#;
    assert_eq!(status(listen, &post(benign)).await, 200);
    assert_eq!(backend.requests()[0].body, benign);
}

/// Finding 7: a urlencoded body over SecRequestBodyNoFilesLimit is refused with 413
/// (it used to be accepted under a larger SecRequestBodyLimit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_files_limit_refuses_large_bodies_without_files() {
    let backend = Backend::start().await;
    let dir = TempDir::new("nofiles");
    let listen = loopback(free_port());
    let extra = format!(
        "{}{SQLI_RULE}\n[[rules]]\ninline = \"SecRequestBodyNoFilesLimit 131072\"\n",
        logs(&dir)
    );
    let _p = Palisade::start(&dir, &basic_config(listen, backend.addr, &extra), listen);
    let big = format!("x={}&{ATTACK}", "a".repeat(200_000));
    let form = |body: &[u8]| request("POST", "/", "application/x-www-form-urlencoded", body);
    assert_eq!(status(listen, &form(big.as_bytes())).await, 413);
    let line = error_line(&dir, "Palisade limit check");
    assert!(
        line.contains("SecRequestBodyNoFilesLimit (131072 bytes)"),
        "{line}"
    );
    assert!(backend.requests().is_empty());
    // Under the limit: forwarded whole.
    let ok = format!("x={}", "a".repeat(100_000));
    assert_eq!(status(listen, &form(ok.as_bytes())).await, 200);
    assert_eq!(backend.requests()[0].body, ok.as_bytes());
    // A multipart upload counts its fields, not its file.
    let mut mp = b"--B\r\nContent-Disposition: form-data; name=\"f\"; filename=\"a.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n".to_vec();
    mp.extend(std::iter::repeat_n(b'z', 300_000));
    mp.extend_from_slice(b"\r\n--B--\r\n");
    let r = request("POST", "/upload", "multipart/form-data; boundary=B", &mp);
    assert_eq!(status(listen, &r).await, 200);
    assert_eq!(backend.requests().len(), 2);
}
