//! Bodies that a parser could read differently from the application: multipart
//! parts that repeat or fold the headers deciding how they are read, a `filename*`
//! naming another file than `filename`, bodies without a Content-Type or under a
//! multipart type other than form-data, request bodies under a Content-Encoding,
//! and transfer codings other than chunked.
//!
//! Three targets:
//! - **CRS v4**: the shipped base rules (`examples/palisade-recommended.conf`), then
//!   `crs-setup.conf.example` and the rules of ../shared/crs, at paranoia level 1;
//! - **CRS 3.3.4**: the rules of `examples/crs-debian.toml` (the quick start's
//!   configuration), read from that file, over Debian's `modsecurity-crs`;
//! - **bare**: only the engine's own built-in check and one SQL injection rule on
//!   ARGS (as CRS inspects), to show that the engine refuses an ambiguous body by
//!   itself, whatever the rules.
//!
//! The payload is an SQL injection in what the application would read as an
//! argument; it must never reach the backend (each target's needles). A CRS target
//! whose rules are missing fails, unless `PALISADE_ALLOW_SKIP=1` says to skip it.

use crate::common::required;
use crate::harness::{DEADLINE, Setup, Target, exchange, report};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The SQL injection the application would read; lower case, as needles compare.
const SQLI: &str = "1' UNION SELECT password FROM users-- ";
const SQLI_NEEDLE: &str = "union select password";
/// The same injection in UTF-7, which only a charset-aware application decodes.
const UTF7: &str = "1+ACc- OR +ACc-1+ACc-=+ACc-1";
const UTF7_NEEDLE: &str = "+acc- or +acc-1";

const WAIT: Duration = Duration::from_secs(15);

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// The rules of an example configuration as SecLang: each `[[rules]]` entry's
/// file as an `Include` (relative paths from examples/), its inline text as is.
fn example_rules(name: &str) -> String {
    let path = examples().join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    let doc: toml::Table = toml::from_str(&text).unwrap();
    let mut out = String::new();
    for entry in doc["rules"].as_array().expect("[[rules]]") {
        if let Some(file) = entry.get("file").and_then(|f| f.as_str()) {
            let file = examples().join(file);
            out.push_str(&format!("Include {}\n", file.display()));
        }
        if let Some(inline) = entry.get("inline").and_then(|f| f.as_str()) {
            out.push_str(inline);
            out.push('\n');
        }
    }
    out
}

fn setup(name: &'static str, rules: String) -> Setup {
    let mut s = Setup::new(name);
    s.rules = rules;
    s.server = "client_header_timeout = \"2s\"\nclient_body_timeout = \"2s\"\nkeepalive_timeout = \"1s\"\n".into();
    s.needles = vec![SQLI_NEEDLE.into(), UTF7_NEEDLE.into()];
    s
}

fn crs4_setup() -> Option<Setup> {
    let crs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/crs");
    required(&crs.join("rules"), "the CRS v4 body cases")?;
    let rules = format!(
        "Include {}\nInclude {crs}/crs-setup.conf.example\nInclude {crs}/rules/*.conf\n",
        examples().join("palisade-recommended.conf").display(),
        crs = crs.display()
    );
    Some(setup("bodies-crs4", rules))
}

fn crs3_setup() -> Option<Setup> {
    required(
        Path::new("/usr/share/modsecurity-crs/rules"),
        "the CRS 3.3.4 body cases (Debian's modsecurity-crs)",
    )?;
    Some(setup("bodies-crs3", example_rules("crs-debian.toml")))
}

fn bare_setup() -> Setup {
    let rules = r#"
SecRuleEngine On
SecRequestBodyAccess On
SecRule ARGS|ARGS_NAMES "@detectSQLi" "id:1,phase:2,deny,status:403,log,t:none"
SecRule FILES|MULTIPART_FILENAME "@rx \.php$" "id:2,phase:2,deny,status:403,log,t:none,t:lowercase"
"#;
    setup("bodies-bare", rules.into())
}

/// One hostile request and the statuses that may answer it.
struct Case {
    name: &'static str,
    request: Vec<u8>,
    allowed: &'static [u16],
}

fn post(path: &str, content_type: Option<&str>, extra: &str, body: &[u8]) -> Vec<u8> {
    let ct = content_type.map_or(String::new(), |c| format!("Content-Type: {c}\r\n"));
    let mut r = format!(
        "POST {path} HTTP/1.1\r\nHost: app.example\r\nUser-Agent: Mozilla/5.0\r\nAccept: */*\r\n{ct}{extra}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

fn multipart(path: &str, body: &str) -> Vec<u8> {
    post(
        path,
        Some("multipart/form-data; boundary=B"),
        "",
        body.as_bytes(),
    )
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// The cases every target must stop: parsing ambiguities and bodies that would be
/// left uninspected.
fn cases() -> Vec<Case> {
    let refused: &'static [u16] = &[400, 403];
    vec![
        Case {
            name: "multipart: two Content-Disposition lines, file then field",
            request: multipart(
                "/mp-dup-cd",
                &format!(
                    "--B\r\nContent-Disposition: form-data; name=\"x\"; filename=\"a.txt\"\r\nContent-Disposition: form-data; name=\"id\"\r\n\r\n{SQLI}\r\n--B--\r\n"
                ),
            ),
            allowed: refused,
        },
        Case {
            name: "multipart: two Content-Disposition lines, differing in case",
            request: multipart(
                "/mp-dup-cd-case",
                &format!(
                    "--B\r\ncontent-disposition: form-data; name=\"x\"; filename=\"a.txt\"\r\nCONTENT-DISPOSITION: form-data; name=\"id\"\r\n\r\n{SQLI}\r\n--B--\r\n"
                ),
            ),
            allowed: refused,
        },
        Case {
            name: "multipart: two Content-Type lines, the second in UTF-7",
            request: multipart(
                "/mp-dup-ct",
                &format!(
                    "--B\r\nContent-Disposition: form-data; name=\"id\"\r\nContent-Type: text/plain\r\nContent-Type: text/plain; charset=utf-7\r\n\r\n{UTF7}\r\n--B--\r\n"
                ),
            ),
            allowed: refused,
        },
        Case {
            name: "multipart: two Content-Transfer-Encoding lines",
            request: multipart(
                "/mp-dup-cte",
                &format!(
                    "--B\r\nContent-Disposition: form-data; name=\"id\"\r\nContent-Transfer-Encoding: 8bit\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n{UTF7}\r\n--B--\r\n"
                ),
            ),
            allowed: refused,
        },
        Case {
            name: "multipart: Content-Disposition folded into a file, a field unfolded",
            request: multipart(
                "/mp-fold",
                &format!(
                    "--B\r\nContent-Disposition: form-data; name=\"id\"\r\n ; filename=\"a.txt\"\r\n\r\n{SQLI}\r\n--B--\r\n"
                ),
            ),
            allowed: refused,
        },
        Case {
            name: "multipart: filename* names a PHP file, filename a text file",
            request: multipart(
                "/mp-filename-star",
                "--B\r\nContent-Disposition: form-data; name=\"up\"; filename=\"a.txt\"; filename*=UTF-8''shell.php\r\n\r\n<?php echo 1; ?>\r\n--B--\r\n",
            ),
            allowed: refused,
        },
        Case {
            name: "multipart: a part without Content-Disposition",
            request: multipart(
                "/mp-no-cd",
                &format!("--B\r\nContent-Type: text/plain\r\n\r\n{SQLI}\r\n--B--\r\n"),
            ),
            allowed: refused,
        },
        Case {
            name: "multipart: name given twice",
            request: multipart(
                "/mp-two-names",
                &format!(
                    "--B\r\nContent-Disposition: form-data; name=\"x\"; filename=\"a.txt\"; name=\"id\"\r\n\r\n{SQLI}\r\n--B--\r\n"
                ),
            ),
            allowed: refused,
        },
        Case {
            name: "Content-Encoding: gzip request body",
            request: post(
                "/gzip-body",
                Some("application/x-www-form-urlencoded"),
                "Content-Encoding: gzip\r\n",
                &gzip(format!("id={SQLI}").as_bytes()),
            ),
            // Decoded for the rules (limits.request_content_encoding = "decode").
            allowed: &[403],
        },
        Case {
            name: "Content-Encoding: compress request body",
            request: post(
                "/compress-body",
                Some("application/x-www-form-urlencoded"),
                "Content-Encoding: compress\r\n",
                format!("id={SQLI}").as_bytes(),
            ),
            allowed: &[415],
        },
        Case {
            name: "Transfer-Encoding: gzip, chunked",
            request: {
                let mut r = b"POST /te-gzip HTTP/1.1\r\nHost: app.example\r\nContent-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: gzip, chunked\r\n\r\n".to_vec();
                let data = gzip(format!("id={SQLI}").as_bytes());
                r.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
                r.extend_from_slice(&data);
                r.extend_from_slice(b"\r\n0\r\n\r\n");
                r
            },
            allowed: &[501],
        },
    ]
}

/// Bodies without a Content-Type, or under multipart/related: stopped by the
/// shipped configurations (the bare target has no rule that gives them a body
/// processor, by design: the choice belongs to the configuration).
fn untyped_cases() -> Vec<Case> {
    let blocked: &'static [u16] = &[403];
    let json = format!("{{\"id\":\"{SQLI}\"}}");
    vec![
        Case {
            name: "no Content-Type: JSON body",
            request: post("/no-ct-json", None, "", json.as_bytes()),
            allowed: blocked,
        },
        Case {
            name: "no Content-Type: URL-encoded body",
            request: post("/no-ct-form", None, "", format!("id={SQLI}").as_bytes()),
            allowed: blocked,
        },
        Case {
            name: "no Content-Type: XML body",
            request: post(
                "/no-ct-xml",
                None,
                "",
                format!("<r><id>{SQLI}</id></r>").as_bytes(),
            ),
            allowed: blocked,
        },
        Case {
            name: "empty Content-Type: JSON body",
            request: post("/empty-ct-json", Some(""), "", json.as_bytes()),
            allowed: blocked,
        },
        Case {
            name: "multipart/related (SOAP with attachments)",
            request: post(
                "/soap",
                Some("multipart/related; type=\"application/xop+xml\"; boundary=B"),
                "",
                format!(
                    "--B\r\nContent-Type: application/xop+xml\r\n\r\n<e><id>{SQLI}</id></e>\r\n--B--\r\n"
                )
                .as_bytes(),
            ),
            allowed: blocked,
        },
    ]
}

async fn run(t: &Target, cases: Vec<Case>) -> Vec<String> {
    let mut failures = Vec::new();
    for c in cases {
        let got = tokio::time::timeout(DEADLINE * 2, exchange(t.http, &c.request, WAIT)).await;
        let Ok(got) = got else {
            failures.push(format!("{}: no outcome within {:?}", c.name, DEADLINE * 2));
            continue;
        };
        eprintln!("[{}] {}: observed {}", t.name(), c.name, got.describe());
        let finals = got.finals();
        if finals.len() != 1 || !c.allowed.contains(&finals[0]) {
            failures.push(format!(
                "{}: expected one answer in {:?}; observed {}",
                c.name,
                c.allowed,
                got.describe()
            ));
        }
        if let Err(why) = t.check(c.name).await {
            failures.push(why);
        }
    }
    failures
}

/// Benign requests of the same shapes pass each CRS target whole.
async fn benign(t: &Target) -> Vec<String> {
    let upload = multipart(
        "/benign-upload",
        "--B\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nHoliday photos\r\n--B\r\nContent-Disposition: form-data; name=\"photo\"; filename=\"beach.jpg\"\r\nContent-Type: image/jpeg\r\n\r\nJPEGDATA\r\n--B--\r\n",
    );
    let mut failures = Vec::new();
    let got = exchange(t.http, &upload, WAIT).await;
    if got.finals() != [200] {
        failures.push(format!("benign upload: {}", got.describe()));
    } else if t.records_for("/benign-upload").len() != 1 {
        failures.push("benign upload: not received by the backend".into());
    }
    failures
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_bare_engine() {
    let t = Target::start(bare_setup()).await;
    let failures = run(&t, cases()).await;
    report("bodies (engine alone)", &failures);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_crs_v4() {
    let Some(s) = crs4_setup() else { return };
    let t = Target::start(s).await;
    let mut all = cases();
    all.extend(untyped_cases());
    let mut failures = run(&t, all).await;
    failures.extend(benign(&t).await);
    report("bodies (CRS v4)", &failures);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_crs_3_3_4() {
    let Some(s) = crs3_setup() else { return };
    let t = Target::start(s).await;
    let mut all = cases();
    all.extend(untyped_cases());
    let mut failures = run(&t, all).await;
    failures.extend(benign(&t).await);
    report("bodies (CRS 3.3.4)", &failures);
}
