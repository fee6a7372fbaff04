//! End-to-end tests: the `albedo` binary on a free port, and the library in-process, driven
//! with raw HTTP/1.1 over a TcpStream.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A parsed HTTP/1.1 response.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Reads one response whose body is framed by Content-Length.
fn read_answer(reader: &mut BufReader<&TcpStream>) -> Answer {
    let mut status_line = String::new();
    reader.read_line(&mut status_line).unwrap();
    let status: u16 = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let line = line.trim_end_matches(['\r', '\n']);
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').unwrap();
        headers.push((name.trim().to_owned(), value.trim().to_owned()));
    }
    let length: usize = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .map(|(_, v)| v.parse().unwrap())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    Answer {
        status,
        headers,
        body,
    }
}

/// Sends raw request bytes on a new connection and reads one response.
fn exchange(addr: SocketAddr, request: &[u8]) -> Answer {
    let stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    (&stream).write_all(request).unwrap();
    read_answer(&mut BufReader::new(&stream))
}

fn post(addr: SocketAddr, path: &str, content_type: &str, body: &str) -> Answer {
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: {content_type}\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    exchange(addr, request.as_bytes())
}

fn get(addr: SocketAddr, path: &str) -> Answer {
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    exchange(addr, request.as_bytes())
}

/// The albedo binary, killed when dropped.
struct Backend {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Backend {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_binary(extra: &[&str]) -> Backend {
    let mut child = Command::new(env!("CARGO_BIN_EXE_albedo"))
        .args(["--bind", "127.0.0.1:0"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut first = String::new();
    BufReader::new(stdout).read_line(&mut first).unwrap();
    let addr = first
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .parse()
        .unwrap();
    Backend { child, addr }
}

fn temp_path(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("albedo-it-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    let _ = std::fs::remove_file(&path);
    path
}

#[test]
fn any_path_answers_empty_200() {
    let backend = start_binary(&[]);
    assert_ne!(backend.addr.port(), 0);
    for path in ["/", "/index.html?a=1", "/status/200", "/anything/deep/path"] {
        let answer = get(backend.addr, path);
        assert_eq!(answer.status, 200, "{path}");
        assert!(answer.body.is_empty(), "{path}");
        assert_eq!(answer.header("content-length"), Some("0"));
    }
    for method in ["PUT", "DELETE", "OPTIONS", "PATCH", "FOO"] {
        let request = format!("{method} /x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
        assert_eq!(
            exchange(backend.addr, request.as_bytes()).status,
            200,
            "{method}"
        );
    }
    // /reflect only reflects POST.
    let answer = get(backend.addr, "/reflect");
    assert_eq!(answer.status, 200);
    assert!(answer.body.is_empty());
}

#[test]
fn reflect_answers_as_told() {
    let backend = start_binary(&[]);
    let answer = post(
        backend.addr,
        "/reflect",
        "application/json",
        r#"{"status": 403, "headers": {"X-Reflected": "yes", "Set-Cookie": "a=b"}, "body": "denied: SQL syntax error"}"#,
    );
    assert_eq!(answer.status, 403);
    assert_eq!(answer.header("x-reflected"), Some("yes"));
    assert_eq!(answer.header("set-cookie"), Some("a=b"));
    assert_eq!(answer.body, b"denied: SQL syntax error");
    // No Content-Type given: sniffed like Go's server does.
    assert_eq!(
        answer.header("content-type"),
        Some("text/plain; charset=utf-8")
    );

    let answer = post(
        backend.addr,
        "/reflect/",
        "application/json",
        r#"{"encodedBody": "PGh0bWw+PGJvZHk+aGk8L2JvZHk+PC9odG1sPg=="}"#,
    );
    assert_eq!(answer.status, 200);
    assert_eq!(answer.body, b"<html><body>hi</body></html>");
    assert_eq!(
        answer.header("content-type"),
        Some("text/html; charset=utf-8")
    );

    let answer = post(
        backend.addr,
        "/reflect",
        "application/json",
        r#"{"headers": {"Content-Type": "application/json", "Content-Length": "999", "bad name": "x"}, "body": "{\"k\": 1}"}"#,
    );
    assert_eq!(answer.header("content-type"), Some("application/json"));
    assert_eq!(answer.header("content-length"), Some("8"));
    assert_eq!(answer.header("bad name"), None);
    assert_eq!(answer.body, br#"{"k": 1}"#);
}

#[test]
fn reflect_refuses_bad_specs() {
    let backend = start_binary(&[]);
    let answer = post(backend.addr, "/reflect", "application/json", "{not json");
    assert_eq!(answer.status, 400);
    assert!(String::from_utf8_lossy(&answer.body).starts_with("Invalid JSON in request body"));

    let answer = post(
        backend.addr,
        "/reflect",
        "application/json",
        r#"{"status": 700}"#,
    );
    assert_eq!(answer.status, 400);
    assert_eq!(answer.body, b"Invalid status code: 700");

    let answer = post(
        backend.addr,
        "/reflect",
        "application/json",
        r#"{"encodedBody": "***"}"#,
    );
    assert_eq!(answer.status, 400);
    assert_eq!(answer.body, b"invalid base64 encoding of response body");
}

#[test]
fn keep_alive_connection_serves_several_requests() {
    let backend = start_binary(&[]);
    let stream = TcpStream::connect(backend.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut reader = BufReader::new(&stream);
    for i in 0..3 {
        let body = format!(r#"{{"body": "round {i}"}}"#);
        let request = format!(
            "POST /reflect HTTP/1.1\r\nHost: h\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        (&stream).write_all(request.as_bytes()).unwrap();
        let answer = read_answer(&mut reader);
        assert_eq!(answer.status, 200);
        assert_eq!(answer.body, format!("round {i}").as_bytes());
    }
}

#[test]
fn capabilities_lists_endpoints() {
    let backend = start_binary(&[]);
    let answer = get(backend.addr, "/capabilities");
    assert_eq!(answer.status, 200);
    assert_eq!(answer.header("content-type"), Some("application/json"));
    let doc: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
    let paths: Vec<&str> = doc["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["/*", "/capabilities", "/reflect"]);
    assert!(doc["endpoints"][2]["description"].is_string());

    let quiet: serde_json::Value =
        serde_json::from_slice(&get(backend.addr, "/capabilities?quiet=true").body).unwrap();
    assert!(quiet["endpoints"][2].get("description").is_none());
}

#[test]
fn record_file_gets_one_line_per_request() {
    let path = temp_path("binary.jsonl");
    let backend = start_binary(&["--record", path.to_str().unwrap()]);
    get(backend.addr, "/first?x=1");
    post(
        backend.addr,
        "/form",
        "application/x-www-form-urlencoded",
        "a=1&b=%00",
    );
    let request = b"PUT /bin HTTP/1.1\r\nHost: h\r\nX-Multi: 1\r\nX-Multi: 2\r\n\
                    Content-Length: 3\r\nConnection: close\r\n\r\n\x00\xFF\x01";
    assert_eq!(exchange(backend.addr, request).status, 200);

    let records = albedo::read_records(&path).unwrap();
    assert_eq!(records.len(), 3);
    assert_eq!(records[0].method, "GET");
    assert_eq!(records[0].path, "/first");
    assert_eq!(records[0].query.as_deref(), Some("x=1"));
    assert_eq!(
        records[0].header_values("host").collect::<Vec<_>>(),
        ["localhost"]
    );
    assert_eq!(records[1].method, "POST");
    assert_eq!(records[1].body().unwrap(), b"a=1&b=%00");
    assert_eq!(records[2].method, "PUT");
    assert_eq!(records[2].body().unwrap(), b"\x00\xFF\x01");
    assert_eq!(
        records[2].header_values("x-multi").collect::<Vec<_>>(),
        ["1", "2"]
    );
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn bad_bind_fails_cleanly() {
    let output = Command::new(env!("CARGO_BIN_EXE_albedo"))
        .args(["--bind", "not-an-address"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--bind"));
}

#[tokio::test]
async fn library_serves_until_shutdown() {
    let path = temp_path("library.jsonl");
    let options = albedo::Options {
        record: Some(path.clone()),
        debug: false,
    };
    let server = albedo::Albedo::bind("127.0.0.1:0".parse().unwrap(), &options)
        .await
        .unwrap();
    let addr = server.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server.serve_until(async {
        let _ = stopped.await;
    }));

    let answer = tokio::task::spawn_blocking(move || {
        post(addr, "/reflect", "application/json", r#"{"status": 201}"#)
    })
    .await
    .unwrap();
    assert_eq!(answer.status, 201);
    assert!(answer.body.is_empty());
    assert_eq!(albedo::read_records(&path).unwrap().len(), 1);

    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
    // `serve_until` owns the listener, so its return (awaited above) closed it. A
    // connect to `addr` is not a test of that: another test running alongside may
    // bind the freed ephemeral port at once, and then the connect succeeds.
    std::fs::remove_file(&path).unwrap();
}
