//! The client's real address behind a load balancer (`[client_address]`,
//! `proxy_protocol` on a listener), with the real binary:
//!
//! - behind a real HAProxy (Debian's `haproxy`, started by the test on free loopback
//!   ports with a generated configuration; a missing one fails the test unless
//!   `PALISADE_ALLOW_SKIP=1`), once sending PROXY protocol v2 (`send-proxy-v2`) and
//!   once appending X-Forwarded-For (`option forwardfor`): the test clients connect
//!   to HAProxy from 127.0.0.5, 127.0.0.6, ... while Palisade's TCP peer is
//!   HAProxy's 127.0.0.1, and the rules (REMOTE_ADDR, PEER_ADDR, the IP
//!   collection), rate limits, `[access]`, `/top`, the access, error and audit logs
//!   and the backend's X-Forwarded-For all see the real client;
//! - every way a client outside the trusted set might set its own address: an
//!   X-Forwarded-For sent straight to Palisade, a PROXY header sent straight to
//!   Palisade, a forged entry at the left of a trusted chain, garbage entries;
//! - PROXY headers of each kind from a trusted peer (v1, v2 with TLVs, LOCAL,
//!   UNKNOWN) and the ones that close the connection (none, too long, truncated,
//!   too slow), PROXY before TLS, `limits.connections_per_ip` on the PROXY source,
//!   `@rbl` on the real client (against dnsmasq), and the configuration errors.

mod common;

use common::*;
use serde_json::Value;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

const HAPROXY: &str = "/usr/sbin/haproxy";

/// The trusted set: HAProxy and the test's own "trusted proxy" connect from
/// 127.0.0.1; clients use other addresses of 127.0.0.0/8.
const TRUSTED: &str = r#"trusted_proxies = ["127.0.0.1", "::1"]"#;

/// The rules: every request opens the IP collection under REMOTE_ADDR (as CRS
/// does) and counts; `/blocked` is refused with 451 for 127.0.0.5 only, with a
/// message naming REMOTE_ADDR and PEER_ADDR; 451s are audited.
const RULES: &str = r#"SecRuleEngine On
SecAuditEngine RelevantOnly
SecAuditLogRelevantStatus "^451$"
SecAuditLogParts ABZ
SecAuditLogFormat JSON
SecAction "id:1,phase:1,pass,nolog,initcol:ip=%{REMOTE_ADDR},setvar:ip.hits=+1"
SecRule REQUEST_URI "@beginsWith /blocked" "id:2,phase:1,deny,status:451,log,msg:'client %{REMOTE_ADDR}:%{REMOTE_PORT} peer %{PEER_ADDR}',chain"
  SecRule REMOTE_ADDR "@ipMatch 127.0.0.5" """#;

/// Palisade with two listeners in front of a recording backend: `pp` takes PROXY
/// protocol headers, `xff` reads X-Forwarded-For from the trusted proxies.
struct Bed {
    dir: TempDir,
    backend: Backend,
    _palisade: Palisade,
    pp: SocketAddr,
    xff: SocketAddr,
    admin: SocketAddr,
}

impl Bed {
    async fn start(name: &str, extra: &str) -> Bed {
        let backend = Backend::start().await;
        let dir = TempDir::new(name);
        let (pp, xff, admin) = (
            loopback(free_port()),
            loopback(free_port()),
            loopback(free_port()),
        );
        std::fs::write(dir.path("token"), "top-token\n").unwrap();
        let config = format!(
            r#"[server]
client_header_timeout = "2s"

[[listener]]
address = "{pp}"
proxy_protocol = true

[[listener]]
address = "{xff}"

[[upstream]]
name = "app"
servers = ["{backend}"]

[client_address]
{TRUSTED}
header = "X-Forwarded-For"

[[rate_limit]]
name = "per-client"
key = "client_ip"
rate = "1/min"
burst = 2
path_prefix = "/limited"

[access]
deny = ["127.0.0.9"]

[admin]
address = "{admin}"
token_file = "token"

[logs]
access_log = "access.log"
error_log = "error.log"
audit_log = "audit.log"

{rules}
{extra}
"#,
            backend = backend.addr,
            rules = rules_toml(RULES),
        );
        // The readiness probe goes to the plain listener: on the PROXY listener it
        // would count as a truncated header.
        let palisade = Palisade::start(&dir, &config, xff);
        Bed {
            dir,
            backend,
            _palisade: palisade,
            pp,
            xff,
            admin,
        }
    }

    /// The access log line of the request for `uri`, parsed.
    fn access(&self, uri: &str) -> Value {
        let needle = format!("\"uri\":\"{uri}\"");
        let line = wait_for_line(&self.dir.path("access.log"), Duration::from_secs(10), |l| {
            l.contains(&needle)
        })
        .unwrap_or_else(|| panic!("no access log line for {uri}"));
        serde_json::from_str(&line).unwrap()
    }

    /// What the backend received for `uri`.
    fn seen(&self, uri: &str) -> Seen {
        self.backend
            .requests()
            .into_iter()
            .find(|s| s.uri == uri)
            .unwrap_or_else(|| panic!("the backend did not get {uri}"))
    }

    fn backend_got(&self, uri: &str) -> bool {
        self.backend.requests().iter().any(|s| s.uri == uri)
    }

    async fn metric(&self, series: &str) -> f64 {
        metric(self.admin, series).await
    }
}

/// HAProxy in the foreground with `config`, waiting until each of `ports`
/// accepts connections; killed on drop.
struct Haproxy {
    child: Child,
}

impl Haproxy {
    fn start(dir: &TempDir, config: &str, ports: &[SocketAddr]) -> Haproxy {
        let cfg = dir.path("haproxy.cfg");
        std::fs::write(&cfg, config).unwrap();
        let log = dir.path("haproxy.log");
        let child = Command::new(HAPROXY)
            .arg("-db")
            .arg("-f")
            .arg(&cfg)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {HAPROXY}: {e}"));
        let mut h = Haproxy { child };
        let deadline = Instant::now() + Duration::from_secs(20);
        for port in ports {
            while std::net::TcpStream::connect(port).is_err() {
                if let Ok(Some(status)) = h.child.try_wait() {
                    panic!(
                        "haproxy exited ({status}): {}",
                        std::fs::read_to_string(&log).unwrap_or_default()
                    );
                }
                assert!(
                    Instant::now() < deadline,
                    "haproxy did not listen on {port}"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        h
    }

    /// HAProxy in front of the bed: `tcp` (a TCP frontend passing each connection
    /// to the PROXY listener with a version 2 header) and `http` (an HTTP frontend
    /// adding X-Forwarded-For, to the plain listener). `None` when haproxy is
    /// missing and skipping is allowed.
    fn front(bed: &Bed) -> Option<(Haproxy, SocketAddr, SocketAddr)> {
        required(
            Path::new(HAPROXY),
            "the HAProxy tests (apt-get install haproxy)",
        )?;
        let (tcp, http) = (loopback(free_port()), loopback(free_port()));
        let config = format!(
            r#"global
    maxconn 256

defaults
    timeout connect 5s
    timeout client 30s
    timeout server 30s

frontend proxied_in
    mode tcp
    bind {tcp}
    default_backend proxied_out

backend proxied_out
    mode tcp
    server palisade {pp} send-proxy-v2

frontend forwarded_in
    mode http
    bind {http}
    default_backend forwarded_out

backend forwarded_out
    mode http
    option forwardfor
    server palisade {xff}
"#,
            pp = bed.pp,
            xff = bed.xff,
        );
        let h = Haproxy::start(&bed.dir, &config, &[tcp, http]);
        Some((h, tcp, http))
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A connection to `addr` from the local address `src` (port chosen by the
/// kernel).
async fn connect_from(src: &str, addr: SocketAddr) -> std::io::Result<TcpStream> {
    let sock = TcpSocket::new_v4()?;
    sock.bind(format!("{src}:0").parse().unwrap())?;
    sock.connect(addr).await
}

/// `GET path` from `src` to `addr` with `headers` (lines ending in CRLF) on a
/// connection of its own; returns the response and the client's port.
async fn get_from(src: &str, addr: SocketAddr, path: &str, headers: &str) -> (RawResponse, u16) {
    let mut s = connect_from(src, addr).await.unwrap();
    let port = s.local_addr().unwrap().port();
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: example.com\r\n{headers}Connection: close\r\n\r\n")
            .as_bytes(),
    )
    .await
    .unwrap();
    let r = read_response(&mut s)
        .await
        .unwrap_or_else(|e| panic!("GET {path} from {src} via {addr}: {e}"));
    (r, port)
}

/// Sends `bytes` from `src` and reads until the connection closes: the bytes
/// answered, and whether it closed within the time limit.
async fn send_from(src: &str, addr: SocketAddr, bytes: &[u8]) -> (Vec<u8>, bool) {
    let mut s = connect_from(src, addr).await.unwrap();
    let _ = s.write_all(bytes).await;
    read_until_close(&mut s, Duration::from_secs(10)).await
}

/// The status line's code in a raw response, 0 when there is none.
fn status_of(raw: &[u8]) -> u16 {
    let text = String::from_utf8_lossy(raw);
    text.strip_prefix("HTTP/1.1 ")
        .and_then(|t| t.get(..3))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// A version 2 PROXY header for a TCP/IPv4 connection from `src` to `dst`.
fn proxy_v2(src: SocketAddr, dst: SocketAddr, tlvs: &[u8]) -> Vec<u8> {
    let (SocketAddr::V4(s), SocketAddr::V4(d)) = (src, dst) else {
        panic!("IPv4 only here");
    };
    let mut out = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    out.extend_from_slice(&[0x21, 0x11]);
    out.extend_from_slice(&u16::try_from(12 + tlvs.len()).unwrap().to_be_bytes());
    out.extend_from_slice(&s.ip().octets());
    out.extend_from_slice(&d.ip().octets());
    out.extend_from_slice(&s.port().to_be_bytes());
    out.extend_from_slice(&d.port().to_be_bytes());
    out.extend_from_slice(tlvs);
    out
}

fn request(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n")
}

fn ip_of(v: &Value) -> String {
    let s = v.as_str().unwrap_or_default();
    s.rsplit_once(':').map_or(s, |(ip, _)| ip).to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn haproxy_proxy_v2_gives_palisade_the_real_client() {
    let bed = Bed::start("ca-haproxy-pp", "").await;
    let Some((_h, tcp, _)) = Haproxy::front(&bed) else {
        return;
    };
    // The rule on REMOTE_ADDR refuses 127.0.0.5 and only it.
    let (r, port5) = get_from("127.0.0.5", tcp, "/blocked?c=5", "").await;
    assert_eq!(r.status, 451, "{}", r.text());
    let (r, _) = get_from("127.0.0.6", tcp, "/blocked?c=6", "").await;
    assert_eq!(r.status, 200, "{}", r.text());
    // A client cannot add to that with a forwarding header of its own: the
    // connection's client (127.0.0.5, not trusted) is the client.
    let (r, port) = get_from(
        "127.0.0.5",
        tcp,
        "/seen?c=5",
        "X-Forwarded-For: 127.0.0.6\r\n",
    )
    .await;
    assert_eq!(r.status, 200);

    // The access log: the client with its own port (from the PROXY header), and
    // HAProxy as the TCP peer.
    let a = bed.access("/blocked?c=5");
    assert_eq!(a["client"], format!("127.0.0.5:{port5}"), "{a}");
    assert_eq!(ip_of(&a["peer"]), "127.0.0.1", "{a}");
    let a = bed.access("/seen?c=5");
    assert_eq!(a["client"], format!("127.0.0.5:{port}"), "{a}");
    // The backend's X-Forwarded-For: the client alone (its own list dropped).
    assert_eq!(bed.seen("/seen?c=5").all("x-forwarded-for"), ["127.0.0.5"]);
    assert_eq!(
        bed.seen("/blocked?c=6").all("x-forwarded-for"),
        ["127.0.0.6"]
    );
    assert!(!bed.backend_got("/blocked?c=5"));

    // The error log's client and the rule's message; the audit record's
    // client_ip and peer_ip.
    let line = wait_for_line(&bed.dir.path("error.log"), Duration::from_secs(10), |l| {
        l.contains("[id \"2\"]")
    })
    .expect("the match line");
    assert!(line.contains("[client 127.0.0.5]"), "{line}");
    assert!(
        line.contains(&format!("client 127.0.0.5:{port5} peer 127.0.0.1")),
        "{line}"
    );
    let audit = wait_for_line(&bed.dir.path("audit.log"), Duration::from_secs(10), |l| {
        l.contains("/blocked?c=5")
    })
    .expect("the audit record");
    let audit: Value = serde_json::from_str(&audit).unwrap();
    assert_eq!(audit["transaction"]["client_ip"], "127.0.0.5", "{audit}");
    assert_eq!(audit["transaction"]["client_port"], port5, "{audit}");
    assert_eq!(audit["transaction"]["peer_ip"], "127.0.0.1", "{audit}");

    // The IP collection is keyed by the real client.
    let rec = wait_update_counter(&bed.dir, "IP", "127.0.0.5", 2);
    assert_eq!(var(&rec, "hits").as_deref(), Some("2"), "{rec}");
    assert!(record(&bed.dir, "IP", "127.0.0.6").is_some());
    assert!(record(&bed.dir, "IP", "127.0.0.1").is_none());

    // /top counts the clients, not HAProxy.
    let r = send_raw(
        bed.admin,
        b"GET /top HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer top-token\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    let top: Value = serde_json::from_slice(&r.body).unwrap();
    let clients: Vec<&str> = top["clients"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["client"].as_str())
        .collect();
    assert!(clients.contains(&"127.0.0.5"), "{top}");
    assert!(clients.contains(&"127.0.0.6"), "{top}");
    assert!(!clients.contains(&"127.0.0.1"), "{top}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn haproxy_forwardfor_gives_palisade_the_real_client() {
    let bed = Bed::start("ca-haproxy-xff", "").await;
    let Some((_h, _, http)) = Haproxy::front(&bed) else {
        return;
    };
    let (r, _) = get_from("127.0.0.5", http, "/blocked?c=5", "").await;
    assert_eq!(r.status, 451, "{}", r.text());
    let (r, _) = get_from("127.0.0.6", http, "/blocked?c=6", "").await;
    assert_eq!(r.status, 200, "{}", r.text());
    // A forged list in front of HAProxy's entry: the rightmost untrusted entry,
    // the one HAProxy wrote, is the client, even when the forged entries name a
    // trusted proxy or another client.
    for (n, forged) in [
        "X-Forwarded-For: 127.0.0.6\r\n",
        "X-Forwarded-For: 127.0.0.1\r\n",
        "X-Forwarded-For: 127.0.0.6, 127.0.0.1\r\nX-Forwarded-For: ::1\r\n",
        "X-Forwarded-For: garbage\r\n",
    ]
    .iter()
    .enumerate()
    {
        let (r, _) = get_from("127.0.0.5", http, &format!("/blocked?forged={n}"), forged).await;
        assert_eq!(r.status, 451, "{forged:?}: {}", r.text());
        let a = bed.access(&format!("/blocked?forged={n}"));
        assert_eq!(a["client"], "127.0.0.5:0", "{forged:?}: {a}");
        assert_eq!(ip_of(&a["peer"]), "127.0.0.1", "{a}");
    }
    // The chain HAProxy sent goes upstream (it is a trusted proxy), HAProxy last.
    let (r, _) = get_from(
        "127.0.0.6",
        http,
        "/seen?c=6",
        "X-Forwarded-For: 203.0.113.66\r\n",
    )
    .await;
    assert_eq!(r.status, 200);
    let xff = bed.seen("/seen?c=6").all("x-forwarded-for").join(", ");
    assert_eq!(xff, "203.0.113.66, 127.0.0.6, 127.0.0.1");
    let a = bed.access("/seen?c=6");
    assert_eq!(a["client"], "127.0.0.6:0", "{a}");

    let line = wait_for_line(&bed.dir.path("error.log"), Duration::from_secs(10), |l| {
        l.contains("[id \"2\"]")
    })
    .expect("the match line");
    assert!(line.contains("[client 127.0.0.5]"), "{line}");
    assert!(line.contains("client 127.0.0.5:0 peer 127.0.0.1"), "{line}");
    let rec = wait_update_counter(&bed.dir, "IP", "127.0.0.5", 5);
    assert_eq!(var(&rec, "hits").as_deref(), Some("5"), "{rec}");
    assert!(record(&bed.dir, "IP", "127.0.0.1").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_client_rate_limit_behind_haproxy() {
    let bed = Bed::start("ca-haproxy-rate", "").await;
    let Some((_h, tcp, http)) = Haproxy::front(&bed) else {
        return;
    };
    // Through each of HAProxy's modes, one client uses up its limit (1/min, burst
    // 2) while another is still served.
    for (front, busy, other) in [
        (tcp, "127.0.0.5", "127.0.0.6"),
        (http, "127.0.0.7", "127.0.0.8"),
    ] {
        let mut served = 0;
        for i in 0..10 {
            let (r, _) = get_from(busy, front, &format!("/limited/{busy}/{i}"), "").await;
            if r.status == 429 {
                break;
            }
            assert_eq!(r.status, 200, "{}", r.text());
            served += 1;
        }
        assert_eq!(served, 3, "{busy} via {front}: 1 + a burst of 2");
        let (r, _) = get_from(other, front, &format!("/limited/{other}"), "").await;
        assert_eq!(r.status, 200, "{other} is another client: {}", r.text());
        let (r, _) = get_from(busy, front, &format!("/limited/{busy}/again"), "").await;
        assert_eq!(r.status, 429, "{busy} is still limited");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_lists_apply_to_the_real_client() {
    let bed = Bed::start("ca-haproxy-access", "").await;
    let Some((_h, tcp, http)) = Haproxy::front(&bed) else {
        return;
    };
    let denied = bed.metric("palisade_connections_denied_total").await;
    // Through PROXY protocol: the connection is closed once its header names the
    // denied client, before any request is read.
    let (answer, closed) = send_from("127.0.0.9", tcp, request("/denied/pp").as_bytes()).await;
    assert!(
        closed && answer.is_empty(),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    assert_eq!(
        bed.metric("palisade_connections_denied_total").await,
        denied + 1.0
    );
    // Through X-Forwarded-For: the request is refused (403), HAProxy's connection
    // serves on.
    let (r, _) = get_from("127.0.0.9", http, "/denied/xff", "").await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(bed.metric("palisade_requests_denied_total").await, 1.0);
    assert!(!bed.backend_got("/denied/pp") && !bed.backend_got("/denied/xff"));
    // Straight to Palisade: closed as before.
    let (answer, closed) =
        send_from("127.0.0.9", bed.xff, request("/denied/direct").as_bytes()).await;
    assert!(closed && answer.is_empty());
    // Other clients pass both ways; the trusted proxy's own address is not judged
    // by the lists.
    assert_eq!(get_from("127.0.0.6", tcp, "/ok/pp", "").await.0.status, 200);
    assert_eq!(
        get_from("127.0.0.6", http, "/ok/xff", "").await.0.status,
        200
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn untrusted_peer_cannot_set_its_address_with_a_forwarding_header() {
    let bed = Bed::start("ca-spoof-xff", "").await;
    for (n, spoof) in [
        "X-Forwarded-For: 127.0.0.6\r\n",
        "X-Forwarded-For: 127.0.0.1\r\n",
        "X-Forwarded-For: 127.0.0.6\r\nX-Forwarded-For: 127.0.0.1\r\n",
        "X-Forwarded-For: 127.0.0.6, ::1\r\n",
        "X-Real-IP: 127.0.0.6\r\nForwarded: for=127.0.0.6\r\n",
    ]
    .iter()
    .enumerate()
    {
        // 127.0.0.5 is refused by the rule whatever it claims.
        let (r, port) = get_from("127.0.0.5", bed.xff, &format!("/blocked?spoof={n}"), spoof).await;
        assert_eq!(r.status, 451, "{spoof:?}: {}", r.text());
        let a = bed.access(&format!("/blocked?spoof={n}"));
        assert_eq!(a["client"], format!("127.0.0.5:{port}"), "{a}");
        assert_eq!(a["peer"], a["client"], "{a}");
        // And 127.0.0.6 cannot make itself 127.0.0.5: it passes, and the backend
        // gets its address alone in X-Forwarded-For.
        let uri = format!("/blocked?as5={n}");
        let (r, _) = get_from(
            "127.0.0.6",
            bed.xff,
            &uri,
            &spoof.replace("127.0.0.6", "127.0.0.5"),
        )
        .await;
        assert_eq!(r.status, 200, "{spoof:?}: {}", r.text());
        assert_eq!(bed.seen(&uri).all("x-forwarded-for"), ["127.0.0.6"]);
    }
    assert!(record(&bed.dir, "IP", "127.0.0.1").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn untrusted_peer_cannot_send_a_proxy_header() {
    let bed = Bed::start("ca-spoof-pp", "").await;
    let untrusted = bed
        .metric("palisade_proxy_protocol_refused_total{reason=\"untrusted\"}")
        .await;
    // A valid header naming 127.0.0.6, from 127.0.0.5: closed before anything is
    // read, nothing answered or forwarded.
    let mut bytes = proxy_v2("127.0.0.6:1234".parse().unwrap(), bed.pp, &[]);
    bytes.extend_from_slice(request("/spoof/v2").as_bytes());
    let (answer, closed) = send_from("127.0.0.5", bed.pp, &bytes).await;
    assert!(
        closed && answer.is_empty(),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    let v1 = format!(
        "PROXY TCP4 127.0.0.6 127.0.0.1 1234 80\r\n{}",
        request("/spoof/v1")
    );
    let (answer, closed) = send_from("127.0.0.5", bed.pp, v1.as_bytes()).await;
    assert!(closed && answer.is_empty());
    assert_eq!(
        bed.metric("palisade_proxy_protocol_refused_total{reason=\"untrusted\"}")
            .await,
        untrusted + 2.0
    );
    // On a listener without proxy_protocol the header is no header: the request
    // is unreadable (400), nothing is forwarded.
    let (answer, closed) = send_from("127.0.0.5", bed.xff, v1.as_bytes()).await;
    assert!(closed);
    assert_eq!(
        status_of(&answer),
        400,
        "{}",
        String::from_utf8_lossy(&answer)
    );
    assert!(!bed.backend_got("/spoof/v1") && !bed.backend_got("/spoof/v2"));
    assert!(record(&bed.dir, "IP", "127.0.0.6").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trusted_chain_with_forged_and_garbage_entries() {
    let bed = Bed::start("ca-chain", "").await;
    // The test client is 127.0.0.1, a trusted proxy: its X-Forwarded-For is read
    // right to left past trusted entries.
    for (n, (xff, client, status)) in [
        // The forged leftmost entry is never reached.
        ("127.0.0.6, 127.0.0.5", "127.0.0.5:0", 451),
        ("127.0.0.5, 127.0.0.6", "127.0.0.6:0", 200),
        // Trusted hops are stepped over.
        ("127.0.0.6, 127.0.0.5, 127.0.0.1, ::1", "127.0.0.5:0", 451),
        // Every entry trusted: the leftmost.
        ("::1, 127.0.0.1", "[::1]:0", 200),
        // Garbage stops the walk at the last good address.
        ("127.0.0.5, garbage", "127.0.0.1:", 200),
        ("127.0.0.5, garbage, 127.0.0.1", "127.0.0.1:0", 200),
        ("127.0.0.5,, 127.0.0.1", "127.0.0.1:0", 200),
        ("unknown", "127.0.0.1:", 200),
        ("<script>, 127.0.0.5", "127.0.0.5:0", 451),
        // Ports and brackets.
        ("[::ffff:127.0.0.5]:8080", "127.0.0.5:8080", 451),
        ("127.0.0.5:4711, [::1]:80", "127.0.0.5:4711", 451),
    ]
    .iter()
    .enumerate()
    {
        let uri = format!("/blocked?chain={n}");
        let (r, _) = get_from(
            "127.0.0.1",
            bed.xff,
            &uri,
            &format!("X-Forwarded-For: {xff}\r\n"),
        )
        .await;
        assert_eq!(r.status, *status, "{xff:?}: {}", r.text());
        let a = bed.access(&uri);
        let got = a["client"].as_str().unwrap();
        assert!(got.starts_with(client), "{xff:?}: {got} (want {client})");
        assert_eq!(ip_of(&a["peer"]), "127.0.0.1", "{a}");
    }
    // Several lines are one list, in order.
    let (r, _) = get_from(
        "127.0.0.1",
        bed.xff,
        "/blocked?lines",
        "X-Forwarded-For: 127.0.0.6\r\nX-Forwarded-For: 127.0.0.5\r\n",
    )
    .await;
    assert_eq!(r.status, 451);
    // The chain goes upstream as received, with the trusted sender appended.
    let (r, _) = get_from(
        "127.0.0.1",
        bed.xff,
        "/chain/upstream",
        "X-Forwarded-For: 127.0.0.6, 127.0.0.7\r\n",
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        bed.seen("/chain/upstream")
            .all("x-forwarded-for")
            .join(", "),
        "127.0.0.6, 127.0.0.7, 127.0.0.1"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_protocol_headers_from_a_trusted_peer() {
    let bed = Bed::start("ca-pp-kinds", "").await;
    let exchange = |bytes: Vec<u8>| {
        let pp = bed.pp;
        async move { send_from("127.0.0.1", pp, &bytes).await }
    };
    // Version 1, TCP4 and TCP6.
    let (answer, _) = exchange(
        format!(
            "PROXY TCP4 127.0.0.5 127.0.0.1 4711 80\r\n{}",
            request("/blocked?v1")
        )
        .into(),
    )
    .await;
    assert_eq!(
        status_of(&answer),
        451,
        "{}",
        String::from_utf8_lossy(&answer)
    );
    assert_eq!(bed.access("/blocked?v1")["client"], "127.0.0.5:4711");
    let (answer, _) = exchange(
        format!(
            "PROXY TCP6 2001:db8::7 ::1 4711 80\r\n{}",
            request("/v1/tcp6")
        )
        .into(),
    )
    .await;
    assert_eq!(status_of(&answer), 200);
    assert_eq!(bed.access("/v1/tcp6")["client"], "[2001:db8::7]:4711");
    // Version 2 with TLVs (ALPN, authority, NOOP).
    let tlvs = [
        &[0x01, 0, 8][..],
        b"http/1.1",
        &[0x02, 0, 11],
        b"example.com",
        &[0x04, 0, 2, 0, 0],
    ]
    .concat();
    let mut bytes = proxy_v2("127.0.0.5:5555".parse().unwrap(), bed.pp, &tlvs);
    bytes.extend_from_slice(request("/blocked?v2").as_bytes());
    let (answer, _) = exchange(bytes).await;
    assert_eq!(status_of(&answer), 451);
    assert_eq!(bed.access("/blocked?v2")["client"], "127.0.0.5:5555");
    // LOCAL (a health check) and UNKNOWN: the peer is the client.
    let mut local = b"\r\n\r\n\0\r\nQUIT\n\x20\x00\x00\x00".to_vec();
    local.extend_from_slice(request("/v2/local").as_bytes());
    let (answer, _) = exchange(local).await;
    assert_eq!(status_of(&answer), 200);
    let a = bed.access("/v2/local");
    assert_eq!(ip_of(&a["client"]), "127.0.0.1", "{a}");
    assert_eq!(a["client"], a["peer"]);
    let (answer, _) = exchange(format!("PROXY UNKNOWN\r\n{}", request("/v1/unknown")).into()).await;
    assert_eq!(status_of(&answer), 200);
    assert_eq!(ip_of(&bed.access("/v1/unknown")["client"]), "127.0.0.1");
    // Keep-alive: the header's client holds for every request of the connection.
    let mut s = connect_from("127.0.0.1", bed.pp).await.unwrap();
    s.write_all(b"PROXY TCP4 127.0.0.5 127.0.0.1 4712 80\r\n")
        .await
        .unwrap();
    for i in 0..3 {
        s.write_all(format!("GET /ka/{i} HTTP/1.1\r\nHost: a\r\n\r\n").as_bytes())
            .await
            .unwrap();
        assert_eq!(read_response(&mut s).await.unwrap().status, 200);
        assert_eq!(bed.access(&format!("/ka/{i}"))["client"], "127.0.0.5:4712");
    }
    drop(s);

    // Headers that close the connection, each counted by its reason.
    let reason = |r: &str| format!("palisade_proxy_protocol_refused_total{{reason=\"{r}\"}}");
    let before = [
        bed.metric(&reason("invalid")).await,
        bed.metric(&reason("too_long")).await,
        bed.metric(&reason("truncated")).await,
        bed.metric(&reason("timeout")).await,
    ];
    for bad in [
        request("/none").into_bytes(),
        b"PROXY TCP4 127.0.0.5 127.0.0.1 99999 80\r\nGET / HTTP/1.1\r\n\r\n".to_vec(),
        b"\r\n\r\n\0\r\nQUIT\n\x31\x11\x00\x0c".to_vec(),
    ] {
        let (answer, closed) = exchange(bad).await;
        assert!(
            closed && answer.is_empty(),
            "{}",
            String::from_utf8_lossy(&answer)
        );
    }
    let long = format!("PROXY TCP4 {}\r\n", "1".repeat(120));
    let (answer, closed) = exchange(long.into_bytes()).await;
    assert!(closed && answer.is_empty());
    let mut huge = b"\r\n\r\n\0\r\nQUIT\n\x21\x11\x20\x00".to_vec();
    huge.extend_from_slice(&[0; 64]);
    let (answer, closed) = exchange(huge).await;
    assert!(closed && answer.is_empty());
    // Truncated: the connection ends inside the header.
    let mut s = connect_from("127.0.0.1", bed.pp).await.unwrap();
    s.write_all(b"PROXY TCP4 127.0.0.5").await.unwrap();
    s.shutdown().await.unwrap();
    let (answer, closed) = read_until_close(&mut s, Duration::from_secs(10)).await;
    assert!(closed && answer.is_empty());
    // Too slow: half a header, then nothing for longer than client_header_timeout
    // (2 s here).
    let started = Instant::now();
    let mut s = connect_from("127.0.0.1", bed.pp).await.unwrap();
    s.write_all(b"\r\n\r\n\0\r\nQUIT").await.unwrap();
    let (answer, closed) = read_until_close(&mut s, Duration::from_secs(15)).await;
    assert!(closed && answer.is_empty(), "a slow header was not closed");
    assert!(started.elapsed() >= Duration::from_millis(1500));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = [
            bed.metric(&reason("invalid")).await,
            bed.metric(&reason("too_long")).await,
            bed.metric(&reason("truncated")).await,
            bed.metric(&reason("timeout")).await,
        ];
        let want = [
            before[0] + 3.0,
            before[1] + 2.0,
            before[2] + 1.0,
            before[3] + 1.0,
        ];
        if now == want {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "refusals {now:?}, expected {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!bed.backend_got("/none"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_protocol_comes_before_tls() {
    let dir = TempDir::new("ca-pp-tls");
    let backend = Backend::start().await;
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    std::fs::write(dir.path("cert.pem"), made.cert.pem()).unwrap();
    std::fs::write(dir.path("key.pem"), made.signing_key.serialize_pem()).unwrap();
    let (tls, plain) = (loopback(free_port()), loopback(free_port()));
    let config = format!(
        r#"[[listener]]
address = "{tls}"
proxy_protocol = true
tls = {{ cert = "cert.pem", key = "key.pem" }}

[[listener]]
address = "{plain}"

[[upstream]]
name = "app"
servers = ["{backend}"]

[client_address]
{TRUSTED}

{rules}
"#,
        backend = backend.addr,
        rules = rules_toml(RULES),
    );
    let _p = Palisade::start(&dir, &config, plain);
    let cert = made.cert.der().clone();
    for (client, want) in [("127.0.0.5:1111", 451), ("127.0.0.6:2222", 200)] {
        for alpn in [&b"http/1.1"[..], b"h2"] {
            let mut tcp = connect_from("127.0.0.1", tls).await.unwrap();
            tcp.write_all(&proxy_v2(client.parse().unwrap(), tls, &[]))
                .await
                .unwrap();
            let mut s = tls_client(&cert, &[alpn])
                .connect(
                    rustls::pki_types::ServerName::try_from("localhost").unwrap(),
                    tcp,
                )
                .await
                .expect("TLS after the PROXY header");
            if alpn == b"h2" {
                assert_eq!(s.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
                let (mut send, conn) = hyper::client::conn::http2::handshake(
                    hyper_util::rt::TokioExecutor::new(),
                    hyper_util::rt::TokioIo::new(s),
                )
                .await
                .unwrap();
                tokio::spawn(conn);
                let req = hyper::Request::get("https://localhost/blocked?tls=h2")
                    .body(http_body_util::Empty::<bytes::Bytes>::new())
                    .unwrap();
                let resp = send.send_request(req).await.unwrap();
                assert_eq!(resp.status().as_u16(), want, "{client} over h2");
            } else {
                s.write_all(request("/blocked?tls=h1").as_bytes())
                    .await
                    .unwrap();
                let mut answer = Vec::new();
                let _ =
                    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut answer)).await;
                assert_eq!(
                    status_of(&answer),
                    want,
                    "{client} over HTTP/1.1: {}",
                    String::from_utf8_lossy(&answer)
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_per_ip_counts_the_proxy_source() {
    let bed = Bed::start("ca-per-ip", "[limits]\nconnections_per_ip = 2\n").await;
    // Two idle connections from 127.0.0.5 through the PROXY listener (the trusted
    // peer, 127.0.0.1, holds them all: it is not counted itself).
    let mut held = Vec::new();
    for port in [40001u16, 40002] {
        let mut s = connect_from("127.0.0.1", bed.pp).await.unwrap();
        s.write_all(&proxy_v2(
            SocketAddr::from(([127, 0, 0, 5], port)),
            bed.pp,
            &[],
        ))
        .await
        .unwrap();
        held.push(s);
    }
    let refused = bed
        .metric("palisade_connections_refused_per_ip_total")
        .await;
    // Give the two a moment to be counted, then a third from 127.0.0.5 is closed.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut bytes = proxy_v2("127.0.0.5:40003".parse().unwrap(), bed.pp, &[]);
        bytes.extend_from_slice(request("/third").as_bytes());
        let (answer, closed) = send_from("127.0.0.1", bed.pp, &bytes).await;
        if closed && answer.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "a third connection was served");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        bed.metric("palisade_connections_refused_per_ip_total")
            .await
            > refused
    );
    // Another client through the same trusted peer is served.
    let mut bytes = proxy_v2("127.0.0.6:40004".parse().unwrap(), bed.pp, &[]);
    bytes.extend_from_slice(request("/other").as_bytes());
    let (answer, _) = send_from("127.0.0.1", bed.pp, &bytes).await;
    assert_eq!(
        status_of(&answer),
        200,
        "{}",
        String::from_utf8_lossy(&answer)
    );
    // Many connections from the trusted peer itself (no PROXY source of their
    // own: a LOCAL header) are not limited.
    let mut locals = Vec::new();
    for _ in 0..4 {
        let mut s = connect_from("127.0.0.1", bed.pp).await.unwrap();
        s.write_all(b"\r\n\r\n\0\r\nQUIT\n\x20\x00\x00\x00")
            .await
            .unwrap();
        locals.push(s);
    }
    for (i, s) in locals.iter_mut().enumerate() {
        s.write_all(request(&format!("/trusted/{i}")).as_bytes())
            .await
            .unwrap();
        assert_eq!(read_response(s).await.unwrap().status, 200);
    }
    drop(held);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbl_asks_about_the_real_client() {
    let dir = TempDir::new("ca-rbl");
    let backend = Backend::start().await;
    let log = dir.path("dnsmasq.log");
    let (mut dns, dns_addr) = start_dnsmasq(&[
        "--log-queries".into(),
        "--address=/5.0.0.127.bl.test/127.0.0.2".into(),
        "--local=/bl.test/".into(),
        format!("--log-facility={}", log.display()),
    ]);
    let listen = loopback(free_port());
    let config = basic_config(
        listen,
        backend.addr,
        &format!(
            "[client_address]\n{TRUSTED}\nheader = \"X-Forwarded-For\"\n\n[dns]\nresolvers = [\"{dns_addr}\"]\n\n{}",
            rules_toml(
                r#"SecRuleEngine On
SecRule REMOTE_ADDR "@rbl bl.test" "id:1,phase:1,deny,status:403,log,msg:'client listed'""#
            )
        ),
    );
    let _p = Palisade::start(&dir, &config, listen);
    // The trusted peer (127.0.0.1, not listed) names 127.0.0.5 (listed) and
    // 127.0.0.6 (not).
    let r = get(listen, "/", "X-Forwarded-For: 127.0.0.5\r\n").await;
    assert_eq!(r.status, 403, "{}", r.text());
    let r = get(listen, "/", "X-Forwarded-For: 127.0.0.6\r\n").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = get(listen, "/", "").await;
    assert_eq!(r.status, 200, "{}", r.text());
    for name in ["5.0.0.127.bl.test", "6.0.0.127.bl.test"] {
        let asked = wait_for_line(&log, Duration::from_secs(10), |l| {
            l.contains(&format!("query[A] {name} "))
        });
        assert!(asked.is_some(), "{name} was not looked up");
    }
    // An untrusted client's header is not looked up.
    let (r, _) = get_from("127.0.0.7", listen, "/", "X-Forwarded-For: 127.0.0.5\r\n").await;
    assert_eq!(r.status, 200, "{}", r.text());
    let asked = wait_for_line(&log, Duration::from_secs(10), |l| {
        l.contains("query[A] 7.0.0.127.bl.test ")
    });
    assert!(
        asked.is_some(),
        "the untrusted peer itself was not looked up"
    );
    let _ = dns.kill();
    let _ = dns.wait();
}

#[test]
fn configuration_errors_name_the_key() {
    let check = |extra: &str, listener_extra: &str, want: &str| {
        let dir = TempDir::new("ca-check");
        let cfg = dir.path("palisade.toml");
        std::fs::write(
            &cfg,
            format!(
                "[[listener]]\naddress = \"127.0.0.1:1\"\n{listener_extra}\n[[upstream]]\nname = \"a\"\nservers = [\"127.0.0.1:2\"]\n{extra}\n"
            ),
        )
        .unwrap();
        let out = palisade_check("--config", &cfg);
        let text = output_text(&out);
        assert!(!out.status.success(), "{extra} {listener_extra}: {text}");
        assert!(text.contains(want), "{extra} {listener_extra}: {text}");
        assert!(!text.contains("panicked"), "{text}");
    };
    check(
        "",
        "proxy_protocol = true",
        "proxy_protocol = true needs client_address.trusted_proxies",
    );
    check(
        "[client_address]\ntrusted_proxies = []",
        "proxy_protocol = true",
        "proxy_protocol = true needs client_address.trusted_proxies",
    );
    check(
        "[client_address]\ntrusted_proxies = [\"10.0.0.0/8\", \"10.0.0.1/99\"]",
        "",
        "client_address.trusted_proxies[1] \"10.0.0.1/99\"",
    );
    check(
        "[client_address]\ntrusted_proxies = [\"proxy.example\"]",
        "",
        "client_address.trusted_proxies[0]",
    );
    check(
        "[client_address]\nheader = \"X-Forwarded-For\"",
        "",
        "client_address.trusted_proxies is empty",
    );
    check(
        "[client_address]\ntrusted_proxies = [\"::1\"]\nheader = \"X Forwarded For\"",
        "",
        "client_address.header",
    );
    check(
        "[client_address]\ntrusted_proxies = [\"::1\"]\nheaders = \"X-Forwarded-For\"",
        "",
        "headers",
    );
    check("", "proxy_protocol = 1", "proxy_protocol");

    // A good one is reported by `check`.
    let dir = TempDir::new("ca-check-ok");
    let cfg = dir.path("palisade.toml");
    std::fs::write(
        &cfg,
        format!(
            "[[listener]]\naddress = \"127.0.0.1:1\"\nproxy_protocol = true\n[[upstream]]\nname = \"a\"\nservers = [\"127.0.0.1:2\"]\n[client_address]\n{TRUSTED}\nheader = \"Forwarded\"\n"
        ),
    )
    .unwrap();
    let out = palisade_check("--config", &cfg);
    let text = output_text(&out);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("client address from 2 trusted proxy entries: header Forwarded; PROXY protocol on 1 listener(s)"),
        "{text}"
    );
}
