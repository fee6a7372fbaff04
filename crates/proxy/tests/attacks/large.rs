//! Large and numerous inputs: the quadratic SQL-injection input, heads over their
//! limits, bodies over their limits, more arguments than the engine keeps, deep
//! JSON, XML entity expansion, multipart bodies with very many parts, and 2,000
//! idle connections.
//!
//! The rules here inspect arguments (and XML content) only, as CRS does: an SQL
//! injection that reaches the backend got past the engine without being inspected,
//! for instance because a limit dropped the argument that carried it.

use crate::harness::{DEADLINE, Exchange, Setup, Target, base_rules, exchange, fd_limit, report};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

/// Memory bound for the large-input target, in MiB.
pub const BOUND_LARGE_MIB: u64 = 192;
/// Memory bound for 2,000 idle connections, in MiB.
pub const BOUND_IDLE_MIB: u64 = 128;

/// The SQL injection every hostile request carries.
const SQLI: &str = "1' OR '1'='1";
/// [`SQLI`] percent-encoded, for targets and urlencoded bodies.
const SQLI_ENC: &str = "1%27%20OR%20%271%27%3D%271";

/// [`base_rules`] with 4 MiB bodies, and SQL injection in arguments and XML
/// content.
fn args_rules() -> String {
    base_rules(4 << 20)
        + r#"SecRule ARGS|ARGS_NAMES|XML:/* "@detectSQLi" "id:90013,phase:2,deny,status:403,log,t:none""#
}

fn setup(name: &'static str) -> Setup {
    let mut s = Setup::new(name);
    s.rules = args_rules();
    s.limits = "request_body_bytes = 4194304\n".into();
    s.server = "client_header_timeout = \"10s\"\nclient_body_timeout = \"10s\"\nkeepalive_timeout = \"1s\"\n".into();
    s.bound_mib = BOUND_LARGE_MIB;
    s.needles = vec!["or '1'='1".into(), "or%20%271%27%3d%271".into()];
    s
}

fn post(path: &str, ctype: &str, body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "POST {path} HTTP/1.1\r\nHost: a\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

/// A multipart/form-data body with these (name, value) fields.
fn multipart(fields: impl Iterator<Item = (String, String)>) -> (String, Vec<u8>) {
    let boundary = "xXattackboundaryXx";
    let mut body = Vec::new();
    for (name, value) in fields {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
            )
            .as_bytes(),
        );
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

struct Case {
    name: &'static str,
    request: Vec<u8>,
    /// Allowed final statuses of the (only) answer.
    allowed: &'static [u16],
}

async fn run(t: &Target, cases: Vec<Case>) -> Vec<String> {
    let mut failures = Vec::new();
    for c in cases {
        let got: Exchange = match tokio::time::timeout(
            DEADLINE * 4,
            exchange(t.http, &c.request, Duration::from_secs(60)),
        )
        .await
        {
            Ok(g) => g,
            Err(_) => {
                failures.push(format!("{}: no outcome within {:?}", c.name, DEADLINE * 4));
                continue;
            }
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

/// The payload alone in each channel is blocked: the rules work, so a payload
/// that gets through in the cases below got past them.
fn baseline_cases() -> Vec<Case> {
    let (mp_type, mp_body) = multipart(std::iter::once(("id".into(), SQLI.into())));
    vec![
        Case {
            name: "baseline: the payload in a query argument",
            request: format!(
                "GET /q?id={SQLI_ENC} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
            )
            .into_bytes(),
            allowed: &[403],
        },
        Case {
            name: "baseline: the payload in a urlencoded body",
            request: post(
                "/u",
                "application/x-www-form-urlencoded",
                format!("id={SQLI_ENC}").as_bytes(),
            ),
            allowed: &[403],
        },
        Case {
            name: "baseline: the payload in a JSON body",
            request: post(
                "/j",
                "application/json",
                format!("{{\"id\":\"{SQLI}\"}}").as_bytes(),
            ),
            allowed: &[403],
        },
        Case {
            name: "baseline: the payload in a multipart field",
            request: post("/m", &mp_type, &mp_body),
            allowed: &[403],
        },
        Case {
            name: "baseline: the payload in XML content",
            request: post(
                "/x",
                "application/xml",
                format!("<r><id>{SQLI}</id></r>").as_bytes(),
            ),
            allowed: &[403],
        },
    ]
}

fn size_cases() -> Vec<Case> {
    let many = format!(
        "GET /many-headers HTTP/1.1\r\nHost: a\r\n{}X-Attackmarker: 1\r\n\r\n",
        (0..201)
            .map(|i| format!("X-H{i}: v\r\n"))
            .collect::<String>()
    );
    let long = format!(
        "GET /long-header HTTP/1.1\r\nHost: a\r\nX-Long: {}attackmarker\r\n\r\n",
        "a".repeat(40_000)
    );
    // 5 MiB of arguments with the payload last, over the 4 MiB body limit.
    let mut big_form = "a=b&".repeat(5 * 1024 * 1024 / 4).into_bytes();
    big_form.extend_from_slice(format!("id={SQLI_ENC}").as_bytes());
    let mut chunked = b"POST /chunked-big HTTP/1.1\r\nHost: a\r\nContent-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n".to_vec();
    for piece in big_form.chunks(64 * 1024) {
        chunked.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        chunked.extend_from_slice(piece);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    // A JSON string of 3 MiB with the payload at its end (within the limits).
    let mut big_json = b"{\"pad\":\"".to_vec();
    big_json.extend(std::iter::repeat_n(b'p', 3 << 20));
    big_json.extend_from_slice(format!("\",\"id\":\"{SQLI}\"}}").as_bytes());
    vec![
        Case {
            name: "201 header lines (limit 200), the payload in the last",
            request: many.into_bytes(),
            allowed: &[431],
        },
        Case {
            name: "a 40 KB header line (head limit 32 KiB), the payload at its end",
            request: long.into_bytes(),
            allowed: &[431],
        },
        Case {
            name: "Content-Length of 20 MiB announced (limit 4 MiB)",
            request: b"POST /announced HTTP/1.1\r\nHost: a\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 20971520\r\n\r\nid=1".to_vec(),
            allowed: &[413],
        },
        Case {
            name: "5 MiB urlencoded body (limit 4 MiB), the payload last",
            request: post("/form-big", "application/x-www-form-urlencoded", &big_form),
            allowed: &[413],
        },
        Case {
            name: "5 MiB chunked body (limit 4 MiB), the payload last",
            request: chunked,
            allowed: &[413],
        },
        Case {
            name: "3 MiB JSON string, the payload in the next field",
            request: post("/json-big", "application/json", &big_json),
            allowed: &[403],
        },
    ]
}

fn structure_cases() -> Vec<Case> {
    let mut laughs =
        String::from("<?xml version=\"1.0\"?>\n<!DOCTYPE lolz [\n<!ENTITY lol \"lol\">\n");
    for i in 1..=9 {
        let prev = if i == 1 {
            "lol".to_owned()
        } else {
            format!("lol{}", i - 1)
        };
        laughs.push_str(&format!(
            "<!ENTITY lol{i} \"{}\">\n",
            format!("&{prev};").repeat(10)
        ));
    }
    laughs.push_str(&format!("]>\n<lolz><a>&lol9;</a><b>{SQLI}</b></lolz>"));
    let (mp_type, mp_body) = multipart(
        (0..500)
            .map(|i| (format!("f{i}"), "v".to_owned()))
            .chain(std::iter::once(("id".to_owned(), SQLI.to_owned()))),
    );
    let deep = format!("{}\"{SQLI}\"{}", "[".repeat(10_000), "]".repeat(10_000));
    vec![
        Case {
            name: "XML billion laughs (10^9 expansions) with the payload in a sibling",
            request: post("/laughs", "application/xml", laughs.as_bytes()),
            allowed: &[400, 403, 413],
        },
        Case {
            name: "JSON nested 10,000 deep around the payload",
            request: post("/deep", "application/json", deep.as_bytes()),
            allowed: &[400, 403, 413],
        },
        Case {
            name: "multipart body of 501 parts, the payload last",
            request: post("/parts", &mp_type, &mp_body),
            allowed: &[400, 403],
        },
    ]
}

/// Bodies that parsers read differently: the engine must find the payload where
/// a backend's parser would.
fn parser_cases() -> Vec<Case> {
    let escaped = SQLI.replace('\'', "\\u0027");
    let b = "xXattackboundaryXx";
    let part = |name: &str, value: &str, eol: &str| {
        format!("--{b}{eol}Content-Disposition: form-data; name=\"{name}\"{eol}{eol}{value}{eol}")
    };
    let lf_only = format!(
        "{}{}--{b}--\n",
        part("a", "1", "\n"),
        part("id", SQLI, "\n")
    );
    let crlf = format!(
        "{}{}--{b}--\r\n",
        part("a", "1", "\r\n"),
        part("id", SQLI, "\r\n")
    );
    vec![
        Case {
            name: "JSON with the key repeated, the payload in the second",
            request: post(
                "/dup",
                "application/json",
                format!("{{\"id\":\"1\",\"id\":\"{SQLI}\"}}").as_bytes(),
            ),
            allowed: &[400, 403],
        },
        Case {
            name: "JSON with the payload's quotes as \\u escapes",
            request: post(
                "/escaped",
                "application/json",
                format!("{{\"id\":\"{escaped}\"}}").as_bytes(),
            ),
            allowed: &[400, 403],
        },
        Case {
            name: "Content-Type in upper case",
            request: post(
                "/upper",
                "APPLICATION/JSON",
                format!("{{\"id\":\"{SQLI}\"}}").as_bytes(),
            ),
            allowed: &[400, 403],
        },
        Case {
            name: "urlencoded with the name repeated, the payload in the second",
            request: post(
                "/dup-form",
                "application/x-www-form-urlencoded",
                format!("id=1&id={SQLI_ENC}").as_bytes(),
            ),
            allowed: &[400, 403],
        },
        Case {
            name: "urlencoded with ; between arguments",
            request: post(
                "/semicolon",
                "application/x-www-form-urlencoded",
                format!("a=1;id={SQLI_ENC}").as_bytes(),
            ),
            allowed: &[400, 403],
        },
        Case {
            name: "multipart with bare LF line ends",
            request: post(
                "/mp-lf",
                &format!("multipart/form-data; boundary={b}"),
                lf_only.as_bytes(),
            ),
            allowed: &[400, 403],
        },
        Case {
            name: "multipart with the boundary quoted",
            request: post(
                "/mp-quoted",
                &format!("multipart/form-data; boundary=\"{b}\""),
                crlf.as_bytes(),
            ),
            allowed: &[400, 403],
        },
    ]
}

/// Bodies the engine cannot parse: it says so (REQBODY_ERROR,
/// MULTIPART_STRICT_ERROR), and a body it could not read must not pass as if
/// inspected.
fn error_cases() -> Vec<Case> {
    let b = "xXattackboundaryXx";
    let crlf = format!(
        "--{b}\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n--{b}\r\nContent-Disposition: form-data; name=\"id\"\r\n\r\n{SQLI}\r\n--{b}--\r\n"
    );
    let preamble = format!("preamble\r\n--{b}x\r\n\r\n{crlf}");
    let mut bom = b"\xef\xbb\xbf".to_vec();
    bom.extend_from_slice(format!("{{\"id\":\"{SQLI}\"}}").as_bytes());
    let mut utf8 = b"{\"pad\":\"\xff\xfe\",".to_vec();
    utf8.extend_from_slice(format!("\"id\":\"{SQLI}\"}}").as_bytes());
    let deep = format!(
        "{{\"deep\":{}1{},\"id\":\"{SQLI}\"}}",
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    vec![
        Case {
            name: "multipart with two boundary parameters",
            request: post(
                "/mp-two",
                &format!("multipart/form-data; boundary=other; boundary={b}"),
                crlf.as_bytes(),
            ),
            allowed: &[400, 403],
        },
        Case {
            name: "multipart with a preamble holding a near-boundary",
            request: post(
                "/mp-preamble",
                &format!("multipart/form-data; boundary={b}"),
                preamble.as_bytes(),
            ),
            allowed: &[400, 403],
        },
        Case {
            name: "JSON body starting with a UTF-8 byte order mark",
            request: post("/bom", "application/json", &bom),
            allowed: &[400, 403],
        },
        Case {
            name: "JSON body with invalid UTF-8 before the payload",
            request: post("/utf8", "application/json", &utf8),
            allowed: &[400, 403],
        },
        Case {
            name: "JSON nested 10,000 deep, the payload in the next member",
            request: post("/deep-before", "application/json", deep.as_bytes()),
            allowed: &[400, 403, 413],
        },
    ]
}

/// What ModSecurity's recommended configuration adds so that a body the engine
/// could not parse is refused (its rules 200002 and 200003, in this suite's words).
const BODY_ERROR_RULES: &str = r#"
SecRule REQBODY_ERROR "!@eq 0" "id:90020,phase:2,t:none,log,deny,status:400,msg:'request body could not be parsed'"
SecRule MULTIPART_STRICT_ERROR "!@eq 0" "id:90021,phase:2,t:none,log,deny,status:400,msg:'multipart body failed strict validation'"
"#;

/// With the rules that check body errors, as ModSecurity recommends: every body
/// the engine could not parse is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unparsable_bodies_with_the_recommended_rules() {
    let mut s = setup("large-errors");
    s.rules = args_rules() + BODY_ERROR_RULES;
    let t = Target::start(s).await;
    let failures = run(&t, error_cases()).await;
    report("unparsable bodies (recommended rules)", &failures);
}

/// Without rules that check body errors: a body the engine could not parse must
/// not reach the backend as if it had been inspected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unparsable_bodies_without_rules_that_check_them() {
    let t = Target::start(setup("large-errors-bare")).await;
    let failures = run(&t, error_cases()).await;
    report(
        "unparsable bodies (no rule checks REQBODY_ERROR)",
        &failures,
    );
}

/// Heads and bodies over their limits, large values within them, deep structures
/// that the engine handles on main.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_inputs() {
    let t = Target::start(setup("large")).await;
    let mut failures = run(&t, baseline_cases()).await;
    failures.extend(run(&t, size_cases()).await);
    failures.extend(run(&t, structure_cases()).await);
    failures.extend(run(&t, parser_cases()).await);
    report("large inputs", &failures);
}

/// One request whose payload must not reach the backend: blocked, or refused.
async fn one(name: &'static str, request: Vec<u8>, allowed: &'static [u16]) {
    let t = Target::start(setup("large-one")).await;
    let failures = run(
        &t,
        vec![Case {
            name,
            request,
            allowed,
        }],
    )
    .await;
    report(name, &failures);
}

fn many_args_query() -> Vec<u8> {
    let args: String = (0..1000).map(|i| format!("a{i}=1&")).collect();
    format!("GET /args?{args}id={SQLI_ENC} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        .into_bytes()
}

// The cases below fail on main at ba5dbfe (issue 8, findings 1 to 4): the engine
// drops what is over its limits without a trace, and does not expand XML
// entities. They wait for branch engine-limits (limits never silent, with a
// built-in default that blocks) and engine-budget (the quadratic SQLi fix); remove
// the `ignore` when those are merged. Run them with `cargo test --test attacks --
// --ignored`.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argument_1001_in_the_query() {
    one(
        "1,000 query arguments, the payload in argument 1,001",
        many_args_query(),
        &[400, 403, 413],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argument_1001_in_a_urlencoded_body() {
    let mut body: String = (0..1000).map(|i| format!("a{i}=1&")).collect();
    body.push_str(&format!("id={SQLI_ENC}"));
    one(
        "1,000 urlencoded arguments, the payload in argument 1,001",
        post(
            "/args",
            "application/x-www-form-urlencoded",
            body.as_bytes(),
        ),
        &[400, 403, 413],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argument_1001_in_a_json_body() {
    let mut body: String = (0..1000).map(|i| format!("\"a{i}\":1,")).collect();
    body = format!("{{{body}\"id\":\"{SQLI}\"}}");
    one(
        "1,000 JSON members, the payload in member 1,001",
        post("/args", "application/json", body.as_bytes()),
        &[400, 403, 413],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argument_1001_in_a_multipart_body() {
    let (ctype, body) = multipart(
        (0..1000)
            .map(|i| (format!("a{i}"), "1".to_owned()))
            .chain(std::iter::once(("id".to_owned(), SQLI.to_owned()))),
    );
    one(
        "1,000 multipart fields, the payload in field 1,001",
        post("/args", &ctype, &body),
        &[400, 403, 413],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multipart_with_5000_parts() {
    let (ctype, body) = multipart(
        (0..5000)
            .map(|i| (format!("f{i}"), "v".to_owned()))
            .chain(std::iter::once(("id".to_owned(), SQLI.to_owned()))),
    );
    one(
        "multipart body of 5,001 parts, the payload last",
        post("/parts", &ctype, &body),
        &[400, 403, 413],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn body_over_the_no_files_limit() {
    let mut s = setup("large-nofiles");
    s.rules = args_rules().replace(
        "SecRequestBodyNoFilesLimit 4194304",
        "SecRequestBodyNoFilesLimit 131072",
    );
    let t = Target::start(s).await;
    let mut body = "a=b&".repeat(200_000 / 4);
    body.push_str(&format!("id={SQLI_ENC}"));
    let name = "200 KB urlencoded body over SecRequestBodyNoFilesLimit 131072";
    let failures = run(
        &t,
        vec![Case {
            name,
            request: post(
                "/nofiles",
                "application/x-www-form-urlencoded",
                body.as_bytes(),
            ),
            allowed: &[413],
        }],
    )
    .await;
    report(name, &failures);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn xml_internal_entity_carrying_the_payload() {
    let body = format!("<!DOCTYPE r [<!ENTITY q \"{SQLI}\">]><r>&q;</r>");
    one(
        "XML internal entity declaring the payload",
        post("/entity", "application/xml", body.as_bytes()),
        &[400, 403],
    )
    .await;
}

/// The quadratic case of issue 8: 1 MiB of `a.` repeated in one argument under
/// `@detectSQLi`, the payload in the next argument; normal clients are served
/// while it is inspected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quadratic_sqli_input_of_1_mib() {
    let t = Target::start(setup("large-quadratic")).await;
    let mut body = b"q=".to_vec();
    body.extend("a.".repeat(512 * 1024).as_bytes());
    body.extend_from_slice(format!("&id={SQLI_ENC}").as_bytes());
    let request = post("/quadratic", "application/x-www-form-urlencoded", &body);
    let addr = t.http;
    let big = tokio::spawn(async move { exchange(addr, &request, Duration::from_secs(120)).await });
    let mut failures = Vec::new();
    for i in 0..5 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        if let Err(why) = t
            .check(&format!("normal request {i} during the 1 MiB a. input"))
            .await
        {
            failures.push(why);
        }
    }
    match tokio::time::timeout(Duration::from_secs(150), big).await {
        Ok(Ok(got)) if got.finals() == [403] => {}
        Ok(Ok(got)) => failures.push(format!(
            "1 MiB of a. then the payload: expected 403; observed {}",
            got.describe()
        )),
        _ => failures.push("1 MiB of a. then the payload: no answer within 150 s".into()),
    }
    if let Err(why) = t.check("1 MiB of a. then the payload").await {
        failures.push(why);
    }
    report("quadratic SQLi input", &failures);
}

/// 2,000 connections held open and idle (half silent, half with a partial head):
/// resident memory stays bounded and other clients are served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_idle_connections() {
    let mut s = setup("idle-2000");
    s.server = "client_header_timeout = \"120s\"\n".into();
    // All from 127.0.0.1: over the default cap per address otherwise.
    s.limits.push_str("connections_per_ip = 0\n");
    s.bound_mib = BOUND_IDLE_MIB;
    let t = Target::start(s).await;
    if let Some(limit) = fd_limit() {
        assert!(
            limit >= 4200,
            "the open-file limit ({limit}) is too low for 2,000 connections"
        );
    }
    let before = t.memory().unwrap();
    let mut held = Vec::with_capacity(2000);
    let started = Instant::now();
    for i in 0..2000 {
        let mut c = TcpStream::connect(t.http)
            .await
            .expect("connection accepted by the kernel");
        if i % 2 == 1 {
            use tokio::io::AsyncWriteExt;
            c.write_all(b"GET /idle HTTP/1.1\r\nHost: a\r\nX-Attackmarker: 1\r\n")
                .await
                .unwrap();
        }
        held.push(c);
    }
    // Let the proxy accept and read them all: a control request queued behind
    // them is answered once it has.
    let name = "2,000 idle connections";
    let mut failures = Vec::new();
    if let Err(why) = t.check(name).await {
        failures.push(why);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let during = t.memory().unwrap();
    eprintln!(
        "[idle-2000] opened in {:.1} s; palisade VmRSS {:.1} MiB before, {:.1} MiB with 2,000 idle connections (VmHWM {:.1} MiB, {:.1} KiB per connection)",
        started.elapsed().as_secs_f64(),
        before.rss_kib as f64 / 1024.0,
        during.rss_kib as f64 / 1024.0,
        during.hwm_kib as f64 / 1024.0,
        (during.rss_kib.saturating_sub(before.rss_kib)) as f64 / 2000.0
    );
    if let Err(why) = t.check(&format!("{name} (after a second)")).await {
        failures.push(why);
    }
    drop(held);
    if let Err(why) = t.check(&format!("{name} (after they closed)")).await {
        failures.push(why);
    }
    report(name, &failures);
}
