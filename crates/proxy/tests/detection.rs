//! End to end: the detection plugin (plugins/palisade-detection) with the Core Rule
//! Set, v4 (../shared/crs) and Debian's 3.3.4, each in three configurations: CRS
//! alone, CRS + plugin, CRS + plugin in precision mode. The real `palisade` binary
//! runs on 127.0.0.1 in front of a recording backend.
//!
//! What it shows: attacks CRS lets through (hidden in base64, in a custom header, in
//! classes CRS barely covers) are blocked once the plugin is loaded, with the
//! input's lineage in the log line; the REST methods pass; precision mode lets prose
//! and query filters through that CRS alone blocks; and without the plugin the
//! verdicts are CRS's.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Crs {
    V4,
    V3,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    CrsOnly,
    Plugin,
    Precision,
}

/// The rule files of one configuration, in the order CRS gives plugins.
fn rules(crs: Crs, mode: Mode) -> String {
    let repo = repo();
    let plugin = repo.join("plugins/palisade-detection");
    let file = |p: &Path| format!("[[rules]]\nfile = \"{}\"\n", p.display());
    let mut out = file(&repo.join("examples/palisade-recommended.conf"));
    let (setup, rule_files, after): (Vec<PathBuf>, PathBuf, Vec<PathBuf>) = match crs {
        Crs::V4 => {
            let crs = repo.join("../shared/crs");
            assert!(
                crs.join("rules").is_dir(),
                "CRS v4 must be at ../shared/crs"
            );
            (
                vec![crs.join("crs-setup.conf.example")],
                crs.join("rules/*.conf"),
                vec![],
            )
        }
        Crs::V3 => {
            let etc = Path::new("/etc/modsecurity/crs");
            assert!(
                etc.join("crs-setup.conf").is_file(),
                "CRS 3.3.4 must be installed (apt-get install modsecurity-crs; .ci/run and \
                 scripts/quickstart do it)"
            );
            (
                vec![
                    etc.join("crs-setup.conf"),
                    etc.join("REQUEST-900-EXCLUSION-RULES-BEFORE-CRS.conf"),
                ],
                PathBuf::from("/usr/share/modsecurity-crs/rules/*.conf"),
                vec![etc.join("RESPONSE-999-EXCLUSION-RULES-AFTER-CRS.conf")],
            )
        }
    };
    for s in &setup {
        out += &file(s);
    }
    if mode == Mode::Precision {
        out += "[[rules]]\ninline = \"SecAction \\\"id:9550001,phase:1,pass,nolog,\
                setvar:'tx.palisade-detection-plugin_precision=1'\\\"\"\n";
    }
    if mode != Mode::CrsOnly {
        out += &file(&plugin.join("palisade-detection-config.conf"));
        out += &file(&plugin.join("palisade-detection-before.conf"));
    }
    out += &file(&rule_files);
    if mode != Mode::CrsOnly {
        out += &file(&plugin.join("palisade-detection-after.conf"));
    }
    for a in &after {
        out += &file(a);
    }
    out
}

fn raw(method: &str, target: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "{method} {target} HTTP/1.1\r\nHost: shop.example\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0\r\nAccept: */*\r\n"
    );
    for (k, v) in headers {
        r += &format!("{k}: {v}\r\n");
    }
    r += &format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut r = r.into_bytes();
    r.extend_from_slice(body);
    r
}

const JSON: (&str, &str) = ("Content-Type", "application/json");
const FORM: (&str, &str) = ("Content-Type", "application/x-www-form-urlencoded");
const XML: (&str, &str) = ("Content-Type", "text/xml");

/// One request and what each configuration must answer (`None`: not asserted).
struct Case {
    what: &'static str,
    request: Vec<u8>,
    crs_only: Option<u16>,
    plugin: Option<u16>,
    precision: Option<u16>,
}

fn cases() -> Vec<Case> {
    // `; cat /etc/passwd` in base64.
    let b64 = "OyBjYXQgL2V0Yy9wYXNzd2Q=";
    vec![
        Case {
            what: "command injection hidden in base64",
            request: raw("GET", &format!("/report?data={b64}"), &[], b""),
            crs_only: Some(200),
            plugin: Some(403),
            precision: Some(403),
        },
        Case {
            what: "cloud metadata URL in a custom header",
            request: raw(
                "GET",
                "/hook",
                &[("X-Callback-Url", "http://169.254.169.254/latest/meta-data/")],
                b"",
            ),
            crs_only: Some(200),
            plugin: Some(403),
            precision: Some(403),
        },
        Case {
            what: "NoSQL operator in a JSON login",
            request: raw(
                "POST",
                "/login",
                &[JSON],
                br#"{"user":"admin","password":{"$ne":null}}"#,
            ),
            crs_only: None,
            plugin: Some(403),
            precision: Some(403),
        },
        Case {
            what: "LDAP filter injection in a form",
            request: raw(
                "POST",
                "/directory",
                &[FORM],
                b"uid=*)(uid=*))(%7C(uid=*&submit=go",
            ),
            crs_only: None,
            plugin: Some(403),
            precision: Some(403),
        },
        Case {
            what: "external entity in an XML body",
            request: raw(
                "POST",
                "/soap",
                &[XML],
                b"<?xml version=\"1.0\"?><!DOCTYPE r [<!ENTITY x SYSTEM \"file:///etc/shadow\">]><r>&x;</r>",
            ),
            crs_only: None,
            plugin: Some(403),
            precision: Some(403),
        },
        Case {
            what: "SQL injection in the query (CRS's own ground)",
            request: raw("GET", "/products?id=1%27%20OR%20%271%27%3D%271", &[], b""),
            crs_only: Some(403),
            plugin: Some(403),
            precision: Some(403),
        },
        Case {
            what: "a REST update (PUT with JSON)",
            request: raw("PUT", "/api/users/7", &[JSON], br#"{"name":"Anne","age":31}"#),
            crs_only: Some(403),
            plugin: Some(200),
            precision: Some(200),
        },
        Case {
            what: "a query filter with an operator",
            request: raw(
                "POST",
                "/api/search",
                &[JSON],
                br#"{"filter":{"age":{"$gte":18}},"page":1}"#,
            ),
            crs_only: None,
            plugin: None,
            precision: Some(200),
        },
        Case {
            what: "prose with SQL words",
            request: raw(
                "GET",
                "/search?q=Sleep(8%20hours)%20or%20a%20union%20select%20committee",
                &[],
                b"",
            ),
            crs_only: None,
            plugin: None,
            precision: Some(200),
        },
        Case {
            what: "a plain page",
            request: raw("GET", "/products?id=42&sort=price", &[], b""),
            crs_only: Some(200),
            plugin: Some(200),
            precision: Some(200),
        },
    ]
}

async fn run(crs: Crs) {
    let backend = Backend::start().await;
    let cases = cases();
    for mode in [Mode::CrsOnly, Mode::Plugin, Mode::Precision] {
        let dir = TempDir::new(&format!("detection-{crs:?}-{mode:?}"));
        let listen = loopback(free_port());
        let extra = format!(
            "[logs]\nerror_log = \"{}\"\n\n{}",
            dir.path("error.log").display(),
            rules(crs, mode)
        );
        let _p = Palisade::start(&dir, &basic_config(listen, backend.addr, &extra), listen);
        for case in &cases {
            let want = match mode {
                Mode::CrsOnly => case.crs_only,
                Mode::Plugin => case.plugin,
                Mode::Precision => case.precision,
            };
            let got = send_raw(listen, &case.request).await.unwrap().status;
            if let Some(want) = want {
                assert_eq!(got, want, "CRS {crs:?}, {mode:?}: {}", case.what);
            }
        }
        if mode != Mode::CrsOnly {
            // The log line names the plugin's rule and the input's lineage.
            let line = wait_for_line(&dir.path("error.log"), Duration::from_secs(10), |l| {
                l.contains("[id \"9550130\"]")
            })
            .expect("the command injection rule's log line");
            assert!(line.contains("ARGS:data|base64"), "{line}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_with_crs_v4() {
    run(Crs::V4).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_with_crs_3_3_4() {
    run(Crs::V3).await;
}
