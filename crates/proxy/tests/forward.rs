//! The forward-proxy listener (`mode = "forward"`, `[forward]`), through the real
//! binary: absolute-form HTTP requests reach the host they name and pass the
//! rules; the deny list holds against every spelling of a host; `CONNECT`
//! tunnels reach a TLS server, only on `connect_ports`, and are closed when the
//! ClientHello names another host than the `CONNECT` (domain fronting); with
//! TLS inspection, the requests inside a tunnel pass the rules, over HTTP/1.1
//! and HTTP/2; on a forward listener with TLS, `CONNECT` over HTTP/2.

mod common;

use bytes::Bytes;
use common::*;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const RULES: &str = r#"[[rules]]
inline = """
SecRuleEngine On
SecRule ARGS "@rx (?i)<script" "id:1,phase:2,deny,status:403,log,msg:'script tag'"
SecRule REQUEST_URI "@contains /staff-only" "id:3,phase:1,chain,deny,status:403,log,msg:'staff only'"
  SecRule REMOTE_USER "!@streq bob" "t:none"
SecRule REQUEST_METHOD "@streq CONNECT" "id:2,phase:1,chain,deny,status:403,log,msg:'CONNECT refused by a rule'"
  SecRule REQUEST_URI "@beginsWith rule-refused.test" "t:none"
"""
"#;

/// A forward proxy on a free port with the deny list `deny` and `extra` TOML
/// in `[forward]`, its error and access logs in `dir`, and an admin listener.
fn forward_proxy(dir: &TempDir, deny: &str, forward: &str) -> (Palisade, SocketAddr, SocketAddr) {
    std::fs::write(dir.path("deny.txt"), deny).unwrap();
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    let cfg = format!(
        "[[listener]]\naddress = \"{listen}\"\nmode = \"forward\"\n\n[forward]\ndeny = [\"deny.txt\"]\n{forward}\n\n[admin]\naddress = \"{admin}\"\n\n[logs]\nerror_log = \"{}\"\naccess_log = \"{}\"\n\n{RULES}",
        dir.path("error.log").display(),
        dir.path("access.log").display()
    );
    let p = Palisade::start(dir, &cfg, listen);
    (p, listen, admin)
}

fn curl(args: &[&str]) -> (String, String) {
    let out = Command::new("curl")
        .args(["-s", "-S", "-m", "20", "-w", "\n%{http_code}"])
        .args(args)
        .output()
        .expect("curl runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = stdout.rsplit_once('\n').unwrap_or(("", &stdout));
    (
        format!("{body}{}", String::from_utf8_lossy(&out.stderr)),
        code.to_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absolute_form_requests_are_forwarded_and_filtered() {
    let backend = Backend::start().await;
    let port = backend.addr.port();
    let dir = TempDir::new("forward-http");
    let (_p, listen, admin) = forward_proxy(&dir, "localhost\nblocked.test\n127.0.0.2\n", "");
    let proxy = format!("http://{listen}");

    // Through curl, as a browser configured with the proxy would send it.
    let (body, code) = curl(&["-x", &proxy, &format!("http://127.0.0.1:{port}/hello?a=1")]);
    assert_eq!(code, "200", "{body}");
    assert!(body.starts_with("hello from backend"), "{body}");
    let seen = backend.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].uri, "/hello?a=1");
    let host = format!("127.0.0.1:{port}");
    assert_eq!(seen[0].header("host"), Some(host.as_str()));
    assert_eq!(seen[0].header("proxy-connection"), None);

    // The rules see the request as for any other listener.
    let attack = format!(
        "GET http://127.0.0.1:{port}/?q=<script>alert(1)</script> HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    );
    let r = send_raw(listen, attack.as_bytes()).await.unwrap();
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(
        backend.requests().len(),
        1,
        "the attack reached the backend"
    );

    // The deny list holds against every spelling of a listed host.
    for target in [
        format!("http://localhost:{port}/"),
        format!("http://LOCALHOST:{port}/"),
        format!("http://localhost.:{port}/"),
        format!("http://www.LocalHost.:{port}/"),
        format!("http://user@localhost:{port}/"),
        format!("http://127.0.0.2:{port}/"),
        format!("http://0x7f.0.0.2:{port}/"),
        format!("http://2130706434:{port}/"),
        format!("http://0177.0.0.2:{port}/"),
        format!("http://[::ffff:127.0.0.2]:{port}/"),
        "http://blocked.test/".to_owned(),
    ] {
        // HTTP/1.1 needs a Host header: the URI's authority, as clients send it.
        let authority = target
            .trim_start_matches("http://")
            .split('/')
            .next()
            .unwrap_or_default()
            .rsplit('@')
            .next()
            .unwrap_or_default();
        let req =
            format!("GET {target} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
        let r = send_raw(listen, req.as_bytes()).await.unwrap();
        assert_eq!(r.status, 403, "{target}: {}", r.text());
        // HTTP/1.0 needs none.
        let req = format!("GET {target} HTTP/1.0\r\n\r\n");
        let r = send_raw(listen, req.as_bytes()).await.unwrap();
        assert_eq!(r.status, 403, "{target} (HTTP/1.0): {}", r.text());
    }
    // curl's own spelling of a listed name.
    let (body, code) = curl(&["-x", &proxy, &format!("http://LocalHost.:{port}/x")]);
    assert_eq!(code, "403", "{body}");
    // A URI for an allowed host with a Host header for a listed one, and the
    // reverse: refused either way.
    for (target, host) in [
        (
            format!("http://127.0.0.1:{port}/"),
            "blocked.test".to_owned(),
        ),
        (
            "http://blocked.test/".to_owned(),
            format!("127.0.0.1:{port}"),
        ),
        (
            format!("http://127.0.0.1:{port}/"),
            "127.0.0.1:1".to_owned(),
        ),
    ] {
        let req = format!("GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        let r = send_raw(listen, req.as_bytes()).await.unwrap();
        assert_eq!(r.status, 403, "{target} / {host}: {}", r.text());
    }
    assert_eq!(
        backend.requests().len(),
        1,
        "a refused request reached the backend"
    );

    // https:// must use CONNECT; a forward proxy has no origin-form requests.
    for req in [
        format!(
            "GET https://127.0.0.1:{port}/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
        ),
        format!("GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"),
    ] {
        let r = send_raw(listen, req.as_bytes()).await.unwrap();
        assert_eq!(r.status, 400, "{req}: {}", r.text());
    }

    // The PAC file that points browsers at the proxy, as they reached it.
    let r = send_raw(
        listen,
        format!("GET /proxy.pac HTTP/1.1\r\nHost: {listen}\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.header("content-type"),
        Some("application/x-ns-proxy-autoconfig")
    );
    assert!(
        r.text().contains(&format!("PROXY {listen}")),
        "{}",
        r.text()
    );

    // Keep-alive to the destination: two requests, and the metrics still answer.
    for _ in 0..2 {
        let req = format!(
            "GET http://127.0.0.1:{port}/again HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
        );
        let r = send_raw(listen, req.as_bytes()).await.unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
    }
    assert_eq!(backend.requests().len(), 3);
    assert!(metric(admin, "palisade_forward_tunnels_total{outcome=\"spliced\"}").await >= 0.0);
}

/// A TLS server on 127.0.0.1 with a self-signed certificate for `localhost`:
/// answers `tls ok PATH`.
async fn tls_server() -> (
    SocketAddr,
    String,
    rustls::pki_types::CertificateDer<'static>,
) {
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(made.signing_key.serialize_der().into());
    let addr = tls_server_with(made.cert.der().clone(), key).await;
    (addr, made.cert.pem(), made.cert.der().clone())
}

/// A TLS server on 127.0.0.1 with the certificate `cert` (key `key`): answers
/// `tls ok PATH`.
async fn tls_server_with(
    cert: rustls::pki_types::CertificateDer<'static>,
    key: rustls::pki_types::PrivateKeyDer<'static>,
) -> SocketAddr {
    let cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![cert], key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let svc = service_fn(|req: Request<Incoming>| async move {
                    Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(format!(
                        "tls ok {}",
                        req.uri().path()
                    )))))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    addr
}

/// Sends `CONNECT target` on a new connection and reads the answer's head.
async fn connect(listen: SocketAddr, target: &str) -> (TcpStream, String) {
    let mut s = TcpStream::connect(listen).await.unwrap();
    s.write_all(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match tokio::time::timeout(Duration::from_secs(10), s.read(&mut b)).await {
            Ok(Ok(1)) => head.push(b[0]),
            _ => break,
        }
    }
    (s, String::from_utf8_lossy(&head).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_tunnels_are_checked_and_spliced() {
    let (tls, cert_pem, cert) = tls_server().await;
    let port = tls.port();
    let dir = TempDir::new("forward-connect");
    std::fs::write(dir.path("ca.pem"), &cert_pem).unwrap();
    let (_p, listen, admin) = forward_proxy(
        &dir,
        "blocked.test\n",
        &format!("connect_ports = [443, {port}]"),
    );
    let proxy = format!("http://{listen}");

    // curl through the tunnel, checking the server's certificate end to end.
    let ca = dir.path("ca.pem");
    let (body, code) = curl(&[
        "-x",
        &proxy,
        "--cacert",
        ca.to_str().unwrap(),
        &format!("https://localhost:{port}/through"),
    ]);
    assert_eq!(code, "200", "{body}");
    assert!(body.starts_with("tls ok /through"), "{body}");
    let line = wait_for_line(&dir.path("access.log"), Duration::from_secs(10), |l| {
        l.contains("\"method\":\"CONNECT\"")
    })
    .expect("an access-log line for the CONNECT");
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["uri"], format!("localhost:{port}"));
    assert_eq!(v["status"], 200);
    assert!(v["bytes_in"].as_u64().unwrap() > 300, "{line}");
    assert!(v["bytes_out"].as_u64().unwrap() > 300, "{line}");
    assert_eq!(
        metric(admin, "palisade_forward_tunnels_total{outcome=\"spliced\"}").await,
        1.0
    );

    // A port not in connect_ports, a listed host in any spelling, a rule.
    for target in [
        format!("localhost:{}", port.wrapping_add(1).max(1)),
        "127.0.0.1:22".to_owned(),
        format!("blocked.test:{port}"),
        format!("BLOCKED.test.:{port}"),
        format!("www.blocked.test:{port}"),
        format!("rule-refused.test:{port}"),
    ] {
        let (_s, head) = connect(listen, &target).await;
        assert!(head.starts_with("HTTP/1.1 403"), "{target}: {head}");
    }

    // A ClientHello for another name than the CONNECT's: the tunnel is closed
    // before the destination sees a byte of it.
    let (s, head) = connect(listen, &format!("localhost:{port}")).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let fronted = tls_client(&cert, &[])
        .connect(ServerName::try_from("front.example").unwrap(), s)
        .await;
    assert!(fronted.is_err(), "a fronted tunnel was spliced");
    assert_eq!(
        metric(
            admin,
            "palisade_forward_tunnels_total{outcome=\"fronting\"}"
        )
        .await,
        1.0
    );
    let logged = wait_for_line(&dir.path("error.log"), Duration::from_secs(10), |l| {
        l.contains("domain fronting") && l.contains("front.example")
    });
    assert!(logged.is_some(), "no error-log line for the fronting");

    // The same name in another case, with a trailing dot in the CONNECT, passes.
    let (s, head) = connect(listen, &format!("LOCALHOST.:{port}")).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let mut t = tls_client(&cert, &[])
        .connect(ServerName::try_from("localhost").unwrap(), s)
        .await
        .expect("the tunnel for the CONNECT's own name");
    t.write_all(b"GET /again HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), t.read_to_end(&mut got)).await;
    assert!(
        String::from_utf8_lossy(&got).contains("tls ok /again"),
        "{}",
        String::from_utf8_lossy(&got)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_resolving_to_listed_addresses_are_refused() {
    // `localhost` is not listed, its addresses are: a name pointed at a listed
    // address (as in DNS rebinding) reaches nothing.
    let backend = Backend::start().await;
    let port = backend.addr.port();
    let dir = TempDir::new("forward-rebinding");
    let (_p, listen, _admin) = forward_proxy(
        &dir,
        "127.0.0.1\n::1\n",
        &format!("connect_ports = [{port}]"),
    );
    let proxy = format!("http://{listen}");
    let (body, code) = curl(&["-x", &proxy, &format!("http://localhost:{port}/rebound")]);
    assert_ne!(code, "200", "{body}");
    let (_s, head) = connect(listen, &format!("localhost:{port}")).await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    assert!(
        backend.requests().is_empty(),
        "a listed address was reached"
    );
    let logged = wait_for_line(&dir.path("error.log"), Duration::from_secs(10), |l| {
        l.contains("127.0.0.1") && l.contains("forward.deny")
    });
    assert!(
        logged.is_some(),
        "no error-log line names the refused address"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspected_tunnels_pass_the_rules() {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;

    // The origin: a certificate for localhost and 127.0.0.1 from its own CA.
    let (origin_ca_pem, leaf, key) = leaf_from_new_ca("Origin CA", &["localhost", "127.0.0.1"]);
    let origin = tls_server_with(leaf, key).await;
    let port = origin.port();
    // An origin whose certificate nobody trusts.
    let (untrusted, _, _) = tls_server().await;
    let uport = untrusted.port();
    // A plain server, for a tunnel that carries no TLS; and a closed port.
    let plain = Backend::start().await;
    let pport = plain.addr.port();
    let closed = free_port();

    let dir = TempDir::new("forward-inspect");
    let inspect_ca_pem = inspection_files(&dir, &origin_ca_pem);
    std::fs::write(dir.path("inspect.txt"), "*\n").unwrap();
    std::fs::write(dir.path("bypass.txt"), "127.0.0.1\n").unwrap();
    std::fs::create_dir_all(dir.path("cats")).unwrap();
    std::fs::write(dir.path("cats/games.txt"), "localhost/games/\n").unwrap();
    let (_p, listen, admin) = forward_proxy(
        &dir,
        "blocked.test\n",
        &format!(
            "connect_ports = [{port}, {uport}, {pport}, {closed}]\ninspect_ca_cert = \"inspect-ca.pem\"\ninspect_ca_key = \"inspect-ca.key\"\ninspect = [\"inspect.txt\"]\ninspect_bypass = [\"bypass.txt\"]\nupstream_ca_file = \"origin-ca.pem\"\ncategories = \"cats\"\nblock_categories = [\"games\"]"
        ),
    );
    let proxy = format!("http://{listen}");
    let inspect_ca = dir.path("inspect-ca.pem");
    let inspect_ca = inspect_ca.to_str().unwrap();
    let origin_ca_path = dir.path("origin-ca.pem");
    let origin_ca_path = origin_ca_path.to_str().unwrap();

    // The client trusts the inspection CA, and gets the origin's answer.
    let (body, code) = curl(&[
        "-x",
        &proxy,
        "--cacert",
        inspect_ca,
        &format!("https://localhost:{port}/hello"),
    ]);
    assert_eq!(code, "200", "{body}");
    assert!(body.starts_with("tls ok /hello"), "{body}");
    let line = wait_for_line(&dir.path("access.log"), Duration::from_secs(10), |l| {
        l.contains("\"uri\":\"/hello\"")
    })
    .expect("an access-log line for the decrypted request");
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["scheme"], "https", "{line}");
    assert_eq!(v["status"], 200, "{line}");
    assert!(line.contains(&format!("localhost:{port}")), "{line}");

    // An attack inside the tunnel is refused by the rules: it was decrypted.
    let (body, code) = curl(&[
        "-x",
        &proxy,
        "--cacert",
        inspect_ca,
        &format!("https://localhost:{port}/?q=%3Cscript%3Ealert(1)%3C/script%3E"),
    ]);
    assert_eq!(code, "403", "{body}");
    // A category by path, seen only once decrypted: the block page.
    let (body, code) = curl(&[
        "-x",
        &proxy,
        "--cacert",
        inspect_ca,
        &format!("https://localhost:{port}/games/chess"),
    ]);
    assert_eq!(code, "403", "{body}");
    assert!(body.contains("category games"), "{body}");
    assert!(
        metric(
            admin,
            "palisade_forward_tunnels_total{outcome=\"inspected\"}"
        )
        .await
            >= 3.0
    );
    assert_eq!(
        metric(admin, "palisade_forward_tunnels_total{outcome=\"spliced\"}").await,
        0.0
    );

    // A bypassed host is spliced: the client sees the origin's certificate.
    let (body, code) = curl(&[
        "-x",
        &proxy,
        "--cacert",
        origin_ca_path,
        &format!("https://127.0.0.1:{port}/bypassed"),
    ]);
    assert_eq!(code, "200", "{body}");
    assert!(body.starts_with("tls ok /bypassed"), "{body}");
    let (body, code) = curl(&[
        "-x",
        &proxy,
        "--cacert",
        inspect_ca,
        &format!("https://127.0.0.1:{port}/bypassed"),
    ]);
    assert_ne!(code, "200", "a bypassed tunnel was decrypted: {body}");
    assert_eq!(
        metric(admin, "palisade_forward_tunnels_total{outcome=\"spliced\"}").await,
        2.0
    );

    // A tunnel that inspection may decrypt connects only once its first bytes
    // are read: here they are not TLS, so it is connected then and spliced.
    let (mut s, head) = connect(listen, &format!("localhost:{pport}")).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    s.write_all(b"GET /plain HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut got)).await;
    let got = String::from_utf8_lossy(&got);
    assert!(got.contains("hello from backend"), "{got}");
    assert_eq!(plain.requests().len(), 1);
    // The tunnel ends, and is counted, once both sides have closed.
    drop(s);
    assert_eq!(
        metric_reaches(
            admin,
            "palisade_forward_tunnels_total{outcome=\"spliced\"}",
            3.0
        )
        .await,
        3.0
    );
    // Its destination refusing the connection: the tunnel is closed, counted.
    let (mut s, head) = connect(listen, &format!("localhost:{closed}")).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    s.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut got)).await;
    assert!(got.is_empty(), "{}", String::from_utf8_lossy(&got));
    assert_eq!(
        metric_reaches(
            admin,
            "palisade_forward_tunnels_total{outcome=\"connect_failed\"}",
            1.0
        )
        .await,
        1.0
    );

    // An origin whose certificate is not trusted: 502, counted.
    let (body, code) = curl(&[
        "-x",
        &proxy,
        "--cacert",
        inspect_ca,
        &format!("https://localhost:{uport}/"),
    ]);
    assert_eq!(code, "502", "{body}");
    assert_eq!(
        metric(
            admin,
            "palisade_forward_tunnels_total{outcome=\"upstream_cert_failed\"}"
        )
        .await,
        1.0
    );

    // A Host header inside the tunnel naming another host than the SNI: 403,
    // and the origin sees nothing of it.
    let ca_der = CertificateDer::from_pem_slice(inspect_ca_pem.as_bytes()).unwrap();
    for host in [
        "other.example".to_owned(),
        format!("localhost:{}", port.wrapping_add(1)),
    ] {
        let (s, head) = connect(listen, &format!("localhost:{port}")).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        let mut t = tls_client(&ca_der, &[b"http/1.1"])
            .connect(ServerName::try_from("localhost").unwrap(), s)
            .await
            .expect("a handshake with the minted certificate");
        assert_eq!(t.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
        t.write_all(
            format!("GET /fronted HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await
        .unwrap();
        let mut got = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(10), t.read_to_end(&mut got)).await;
        let got = String::from_utf8_lossy(&got);
        assert!(got.starts_with("HTTP/1.1 403"), "{host}: {got}");
    }
    assert!(
        wait_for_line(&dir.path("access.log"), Duration::from_secs(10), |l| {
            l.contains("/fronted") && l.contains("\"status\":403")
        })
        .is_some()
    );

    // No tunnel inside a tunnel.
    let (s, head) = connect(listen, &format!("localhost:{port}")).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let mut t = tls_client(&ca_der, &[])
        .connect(ServerName::try_from("localhost").unwrap(), s)
        .await
        .expect("a handshake with the minted certificate");
    t.write_all(
        format!("CONNECT localhost:{port} HTTP/1.1\r\nHost: localhost:{port}\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let mut got = vec![0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(10), t.read(&mut got))
        .await
        .unwrap()
        .unwrap();
    let got = String::from_utf8_lossy(&got[..n]);
    assert!(got.starts_with("HTTP/1.1 400"), "{got}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspected_tunnels_carry_the_connects_user() {
    let (origin_ca_pem, leaf, key) = leaf_from_new_ca("Origin CA", &["localhost"]);
    let origin = tls_server_with(leaf, key).await;
    let port = origin.port();
    let dir = TempDir::new("forward-inspect-user");
    inspection_files(&dir, &origin_ca_pem);
    let hash = bcrypt::hash("pw", 4).unwrap();
    std::fs::write(dir.path("users"), format!("alice:{hash}\nbob:{hash}\n")).unwrap();
    let (_p, listen, _admin) = forward_proxy(
        &dir,
        "blocked.test\n",
        &format!(
            "connect_ports = [{port}]\ninspect_ca_cert = \"inspect-ca.pem\"\ninspect_ca_key = \"inspect-ca.key\"\ninspect_all = true\nupstream_ca_file = \"origin-ca.pem\"\nhtpasswd = \"users\""
        ),
    );
    let ca = dir.path("inspect-ca.pem");
    let ca = ca.to_str().unwrap();
    let get = |user: &str, path: &str| {
        curl(&[
            "-x",
            &format!("http://{user}:pw@{listen}"),
            "--cacert",
            ca,
            &format!("https://localhost:{port}{path}"),
        ])
    };
    // The decrypted requests carry no credentials: the CONNECT's user is theirs.
    let (body, code) = get("bob", "/hello");
    assert_eq!(code, "200", "{body}");
    assert!(body.starts_with("tls ok /hello"), "{body}");
    let line = wait_for_line(&dir.path("access.log"), Duration::from_secs(10), |l| {
        l.contains("\"uri\":\"/hello\"")
    })
    .expect("an access-log line for the decrypted request");
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["user"], "bob", "{line}");
    // The rules see that user as REMOTE_USER.
    let (body, code) = get("bob", "/staff-only");
    assert_eq!(code, "200", "{body}");
    let (body, code) = get("alice", "/staff-only");
    assert_eq!(code, "403", "{body}");
    // No credentials at all: the CONNECT itself is refused.
    let (body, code) = curl(&[
        "-x",
        &format!("http://{listen}"),
        "--cacert",
        ca,
        &format!("https://localhost:{port}/hello"),
    ]);
    assert_ne!(code, "200", "{body}");
    assert!(body.contains("407"), "{body}");
}

/// `Proxy-Authorization: Basic` of `user:password`.
fn basic(user: &str, password: &str) -> String {
    use base64::Engine as _;
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {token}")
}

/// Users `alice` (group `pupils`) and `bob`, both with password `pw`; the
/// categories `games` (refused for everyone: `play.test` and the `/games/`
/// paths of `localhost`) and `social` (`/social/` of `localhost`, refused to
/// `pupils` only).
fn policy_proxy(dir: &TempDir) -> (Palisade, SocketAddr, SocketAddr) {
    let hash = bcrypt::hash("pw", 4).unwrap();
    std::fs::write(dir.path("users"), format!("alice:{hash}\nbob:{hash}\n")).unwrap();
    std::fs::write(dir.path("groups"), "pupils: alice\n").unwrap();
    std::fs::create_dir_all(dir.path("cats")).unwrap();
    std::fs::write(dir.path("cats/games.txt"), "play.test\nlocalhost/games/\n").unwrap();
    std::fs::write(dir.path("cats/social.txt"), "localhost/social/\n").unwrap();
    forward_proxy(
        dir,
        "blocked.test\n",
        "htpasswd = \"users\"\ngroups = \"groups\"\ncategories = \"cats\"\n\
         block_categories = [\"games\"]\n\n[[forward.group]]\nname = \"pupils\"\n\
         block_categories = [\"social\"]\n",
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_categories_and_the_block_page() {
    let backend = Backend::start().await;
    let port = backend.addr.port();
    let dir = TempDir::new("forward-policy");
    let (_p, listen, admin) = policy_proxy(&dir);
    let url = |path: &str| format!("http://localhost:{port}{path}");

    // No credentials: 407 with the challenge, for curl and a raw request alike.
    let (body, code) = curl(&["-x", &format!("http://{listen}"), &url("/hello")]);
    assert_eq!(code, "407", "{body}");
    let req = format!(
        "GET {} HTTP/1.1\r\nHost: localhost:{port}\r\nConnection: close\r\n\r\n",
        url("/hello")
    );
    let r = send_raw(listen, req.as_bytes()).await.unwrap();
    assert_eq!(r.status, 407, "{}", r.text());
    assert_eq!(
        r.header("proxy-authenticate"),
        Some("Basic realm=\"Palisade\", charset=\"UTF-8\"")
    );
    // A wrong password, an unknown user: 407.
    let (body, code) = curl(&[
        "-x",
        &format!("http://alice:wrong@{listen}"),
        &url("/hello"),
    ]);
    assert_eq!(code, "407", "{body}");
    let (body, code) = curl(&["-x", &format!("http://eve:pw@{listen}"), &url("/hello")]);
    assert_eq!(code, "407", "{body}");
    // Credentials are checked before the rules run: an attack without them is
    // answered 407, not refused by the rule (phase 2) first.
    let (body, code) = curl(&[
        "-x",
        &format!("http://{listen}"),
        &url("/hello?q=%3Cscript%3E"),
    ]);
    assert_eq!(code, "407", "{body}");
    assert!(
        backend.requests().is_empty(),
        "an unauthenticated request went on"
    );
    // The PAC file needs no credentials.
    let r = send_raw(
        listen,
        format!("GET /proxy.pac HTTP/1.1\r\nHost: {listen}\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.text());

    // The right password: through, without the credentials.
    let bob = format!("http://bob:pw@{listen}");
    let alice = format!("http://alice:pw@{listen}");
    let (body, code) = curl(&["-x", &bob, &url("/hello")]);
    assert_eq!(code, "200", "{body}");
    assert!(body.starts_with("hello from backend"), "{body}");
    assert_eq!(backend.requests()[0].header("proxy-authorization"), None);
    let line = wait_for_line(&dir.path("access.log"), Duration::from_secs(10), |l| {
        l.contains("/hello") && l.contains("\"status\":200")
    })
    .expect("an access-log line for bob's request");
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["user"], "bob", "{line}");

    // A category refused for everyone: the plain-text block page for curl, the
    // HTML one for a browser; the reference id is in the error log too.
    let (body, code) = curl(&["-x", &bob, &url("/games/chess")]);
    assert_eq!(code, "403", "{body}");
    assert!(body.contains("refused by category games"), "{body}");
    let reference = body
        .split("(reference ")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .expect("a reference id")
        .to_owned();
    let logged = wait_for_line(&dir.path("error.log"), Duration::from_secs(10), |l| {
        l.contains(&reference) && l.contains("games")
    });
    assert!(
        logged.is_some(),
        "the error log lacks reference {reference}"
    );
    let (body, code) = curl(&[
        "-x",
        &bob,
        "-H",
        "Accept: text/html,application/xhtml+xml,*/*;q=0.8",
        &url("/GAMES/go"),
    ]);
    assert_eq!(code, "403", "{body}");
    assert!(body.starts_with("<!DOCTYPE html>"), "{body}");
    assert!(body.contains("<strong>games</strong>"), "{body}");
    let (body, code) = curl(&["-x", &bob, "http://play.test/"]);
    assert_eq!(code, "403", "{body}");
    // The list refusals use the block page as well.
    let (body, code) = curl(&["-x", &bob, "http://www.blocked.test/"]);
    assert_eq!(code, "403", "{body}");
    assert!(body.contains("rule forward.deny"), "{body}");

    // A category refused to a group's members only.
    let (body, code) = curl(&["-x", &bob, &url("/social/feed")]);
    assert_eq!(code, "200", "{body}");
    let (body, code) = curl(&["-x", &alice, &url("/social/feed")]);
    assert_eq!(code, "403", "{body}");
    assert!(body.contains("category social"), "{body}");
    let (body, code) = curl(&["-x", &alice, &url("/hello")]);
    assert_eq!(code, "200", "{body}");
    // The rules see the authenticated user as REMOTE_USER.
    let (body, code) = curl(&["-x", &bob, &url("/staff-only")]);
    assert_eq!(code, "200", "{body}");
    let (body, code) = curl(&["-x", &alice, &url("/staff-only")]);
    assert_eq!(code, "403", "{body}");

    // CONNECT: credentials needed, and a blocked category refused.
    let connect_to = |target: &str, auth: Option<String>| {
        let auth = auth.map_or(String::new(), |a| format!("Proxy-Authorization: {a}\r\n"));
        format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n{auth}\r\n")
    };
    let r = send_raw(listen, connect_to("play.test:443", None).as_bytes())
        .await
        .unwrap();
    assert_eq!(r.status, 407, "{}", r.text());
    assert!(r.header("proxy-authenticate").is_some());
    let r = send_raw(
        listen,
        connect_to("www.play.test:443", Some(basic("bob", "pw"))).as_bytes(),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 403, "{}", r.text());
    assert!(r.text().contains("category games"), "{}", r.text());

    // Per-user counters, for the htpasswd users only (counted as each request's
    // record is finished, just after its answer).
    // alice: the social category, and the rule's refusal of /staff-only.
    assert_eq!(
        metric_reaches(
            admin,
            "palisade_forward_user_blocked_total{user=\"alice\"}",
            2.0
        )
        .await,
        2.0
    );
    assert!(metric(admin, "palisade_forward_user_requests_total{user=\"bob\"}").await >= 6.0);
    assert!(
        metric(
            admin,
            "palisade_forward_user_sent_bytes_total{user=\"bob\"}"
        )
        .await
            > 0.0
    );
    assert!(
        metric(
            admin,
            "palisade_forward_auth_failures_total{reason=\"missing\"}"
        )
        .await
            >= 2.0
    );
    assert_eq!(
        metric(
            admin,
            "palisade_forward_auth_failures_total{reason=\"wrong_password\"}"
        )
        .await,
        1.0
    );
    let m = send_raw(
        admin,
        b"GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap()
    .text();
    assert!(!m.contains("user=\"eve\""), "an unknown user has a series");
}

/// curl with `args`: the body (and curl's error text), the status and the HTTP
/// version the answer came over (`2` for HTTP/2, `1.1`).
fn curl_version(args: &[&str]) -> (String, String, String) {
    let out = Command::new("curl")
        .args([
            "-s",
            "-S",
            "-m",
            "20",
            "-w",
            "\n%{http_code} %{http_version}",
        ])
        .args(args)
        .output()
        .expect("curl runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, last) = stdout.rsplit_once('\n').unwrap_or(("", &stdout));
    let (code, version) = last.split_once(' ').unwrap_or((last, ""));
    (
        format!("{body}{}", String::from_utf8_lossy(&out.stderr)),
        code.to_owned(),
        version.to_owned(),
    )
}

/// An HTTP/2 request inside an inspected tunnel, by hyper's client: the status
/// and the body.
async fn h2_get(
    sender: &mut hyper::client::conn::http2::SendRequest<Full<Bytes>>,
    uri: &str,
    host: Option<&str>,
) -> (u16, String) {
    use http_body_util::BodyExt as _;
    let mut req = Request::get(uri);
    if let Some(h) = host {
        req = req.header("host", h);
    }
    let resp = sender
        .send_request(req.body(Full::new(Bytes::new())).unwrap())
        .await
        .expect("an answer on the stream");
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspected_tunnels_speak_http2() {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;

    let (origin_ca_pem, leaf, key) = leaf_from_new_ca("Origin CA", &["localhost"]);
    let origin = tls_server_with(leaf, key).await;
    let port = origin.port();

    let dir = TempDir::new("forward-inspect-h2");
    let inspect_ca_pem = inspection_files(&dir, &origin_ca_pem);
    std::fs::write(dir.path("inspect.txt"), "*\n").unwrap();
    let (_p, listen, admin) = forward_proxy(
        &dir,
        "blocked.test\n",
        &format!(
            "connect_ports = [{port}]\ninspect_ca_cert = \"inspect-ca.pem\"\ninspect_ca_key = \"inspect-ca.key\"\ninspect = [\"inspect.txt\"]\nupstream_ca_file = \"origin-ca.pem\""
        ),
    );
    let proxy = format!("http://{listen}");
    let inspect_ca = dir.path("inspect-ca.pem");
    let inspect_ca = inspect_ca.to_str().unwrap();

    // curl negotiates h2 with the minted certificate and gets the origin's page
    // (the origin itself speaks HTTP/1.1 only).
    let (body, code, version) = curl_version(&[
        "--http2",
        "-x",
        &proxy,
        "--cacert",
        inspect_ca,
        &format!("https://localhost:{port}/over-h2"),
    ]);
    assert_eq!(code, "200", "{body}");
    assert_eq!(version, "2", "h2 was not negotiated inside the tunnel");
    assert!(body.starts_with("tls ok /over-h2"), "{body}");
    let line = wait_for_line(&dir.path("access.log"), Duration::from_secs(10), |l| {
        l.contains("\"uri\":\"/over-h2\"")
    })
    .expect("an access-log line for the decrypted HTTP/2 request");
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["protocol"], "HTTP/2.0", "{line}");
    assert_eq!(v["scheme"], "https", "{line}");
    assert_eq!(v["status"], 200, "{line}");
    assert!(line.contains(&format!("localhost:{port}")), "{line}");

    // An attack inside the h2 tunnel: refused by the rules.
    let (body, code, version) = curl_version(&[
        "--http2",
        "-x",
        &proxy,
        "--cacert",
        inspect_ca,
        &format!("https://localhost:{port}/?q=%3Cscript%3Ealert(1)%3C/script%3E"),
    ]);
    assert_eq!(code, "403", "{body}");
    assert_eq!(version, "2", "h2 was not negotiated inside the tunnel");
    let line = wait_for_line(&dir.path("access.log"), Duration::from_secs(10), |l| {
        l.contains("%3Cscript%3E") && l.contains("\"status\":403")
    })
    .expect("an access-log line for the refused HTTP/2 request");
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["protocol"], "HTTP/2.0", "{line}");
    assert_eq!(v["rule_id"], 1, "{line}");

    // Several streams on one h2 connection inside one tunnel, each checked
    // against the tunnel's host: every stream runs in a task of its own.
    let ca_der = CertificateDer::from_pem_slice(inspect_ca_pem.as_bytes()).unwrap();
    let (s, head) = connect(listen, &format!("localhost:{port}")).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let t = tls_client(&ca_der, &[b"h2", b"http/1.1"])
        .connect(ServerName::try_from("localhost").unwrap(), s)
        .await
        .expect("a handshake with the minted certificate");
    assert_eq!(t.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (mut sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        TokioIo::new(t),
    )
    .await
    .expect("an h2 handshake inside the tunnel");
    tokio::spawn(conn);
    let good = format!("https://localhost:{port}/stream");
    for i in 0..3 {
        let (status, body) = h2_get(&mut sender, &format!("{good}{i}"), None).await;
        assert_eq!(status, 200, "{body}");
        assert!(body.starts_with(&format!("tls ok /stream{i}")), "{body}");
    }
    // Another host in :authority, or in a Host header beside the right
    // :authority: domain fronting after decryption, refused.
    let (status, body) = h2_get(&mut sender, "https://other.example/fronted1", None).await;
    assert_eq!(status, 403, "{body}");
    let (status, body) = h2_get(
        &mut sender,
        &format!("https://localhost:{}/fronted2", port.wrapping_add(1)),
        None,
    )
    .await;
    assert_eq!(status, 403, "{body}");
    let (status, body) = h2_get(
        &mut sender,
        &format!("https://localhost:{port}/fronted3"),
        Some("other.example"),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    let (status, body) = h2_get(
        &mut sender,
        "https://other.example/fronted4",
        Some(&format!("localhost:{port}")),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    for n in 1..=4 {
        assert!(
            wait_for_line(&dir.path("access.log"), Duration::from_secs(10), |l| {
                l.contains(&format!("/fronted{n}")) && l.contains("\"status\":403")
            })
            .is_some(),
            "no access-log line for /fronted{n}"
        );
    }
    assert!(
        wait_for_line(&dir.path("error.log"), Duration::from_secs(10), |l| {
            l.contains("domain fronting") && l.contains(":authority")
        })
        .is_some(),
        "no error-log line for the :authority fronting"
    );
    // The connection still serves after the refusals.
    let (status, body) = h2_get(&mut sender, &format!("{good}-after"), None).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        metric(
            admin,
            "palisade_forward_tunnels_total{outcome=\"inspected\"}"
        )
        .await
            >= 3.0
    );
}

/// A forward proxy whose listener speaks TLS (a self-signed certificate for
/// `localhost` and `127.0.0.1` in `proxy.pem`, returned as DER; ALPN `h2` and
/// `http/1.1`), with `forward` TOML in `[forward]`.
fn forward_proxy_tls(
    dir: &TempDir,
    forward: &str,
) -> (
    Palisade,
    SocketAddr,
    SocketAddr,
    rustls::pki_types::CertificateDer<'static>,
) {
    let made =
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
            .unwrap();
    std::fs::write(dir.path("proxy.pem"), made.cert.pem()).unwrap();
    std::fs::write(dir.path("proxy.key"), made.signing_key.serialize_pem()).unwrap();
    std::fs::write(dir.path("deny.txt"), "blocked.test\n").unwrap();
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    let cfg = format!(
        "[[listener]]\naddress = \"{listen}\"\nmode = \"forward\"\ntls = {{ cert = \"proxy.pem\", key = \"proxy.key\" }}\n\n[forward]\ndeny = [\"deny.txt\"]\n{forward}\n\n[admin]\naddress = \"{admin}\"\n\n[logs]\nerror_log = \"{}\"\naccess_log = \"{}\"\n\n{RULES}",
        dir.path("error.log").display(),
        dir.path("access.log").display()
    );
    let p = Palisade::start(dir, &cfg, listen);
    (p, listen, admin, made.cert.der().clone())
}

/// An HTTP/2 connection to a TLS forward proxy (asserting that `h2` was
/// negotiated).
async fn h2_proxy_connection(
    listen: SocketAddr,
    proxy_cert: &rustls::pki_types::CertificateDer<'static>,
) -> hyper::client::conn::http2::SendRequest<Full<Bytes>> {
    let tcp = TcpStream::connect(listen).await.unwrap();
    let t = tls_client(proxy_cert, &[b"h2", b"http/1.1"])
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .expect("a TLS handshake with the proxy");
    assert_eq!(
        t.get_ref().1.alpn_protocol(),
        Some(&b"h2"[..]),
        "the proxy did not negotiate h2"
    );
    let (sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        TokioIo::new(t),
    )
    .await
    .expect("an h2 handshake with the proxy");
    tokio::spawn(conn);
    sender
}

/// `CONNECT target` on a new stream of `sender`: the answer's status, and the
/// tunnel when it is 200.
async fn h2_connect(
    sender: &mut hyper::client::conn::http2::SendRequest<Full<Bytes>>,
    target: &str,
) -> (u16, Option<TokioIo<hyper::upgrade::Upgraded>>) {
    let req = Request::connect(target)
        .body(Full::new(Bytes::new()))
        .unwrap();
    let resp = sender
        .send_request(req)
        .await
        .expect("an answer to the CONNECT");
    let status = resp.status().as_u16();
    if status != 200 {
        return (status, None);
    }
    let up = hyper::upgrade::on(resp)
        .await
        .expect("the CONNECT's stream as a tunnel");
    (status, Some(TokioIo::new(up)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_over_http2() {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, IpAddr as PkiIp};

    // An origin with a certificate for localhost and 127.0.0.1 from its own CA.
    let (origin_ca_pem, leaf, key) = leaf_from_new_ca("Origin CA", &["localhost", "127.0.0.1"]);
    let origin_ca_der = CertificateDer::from_pem_slice(origin_ca_pem.as_bytes()).unwrap();
    let origin = tls_server_with(leaf, key).await;
    let port = origin.port();
    let backend = Backend::start().await;
    let bport = backend.addr.port();

    let dir = TempDir::new("forward-connect-h2");
    let inspect_ca_pem = inspection_files(&dir, &origin_ca_pem);
    std::fs::write(dir.path("inspect.txt"), "*\n").unwrap();
    std::fs::write(dir.path("bypass.txt"), "127.0.0.1\n").unwrap();
    let (_p, listen, admin, proxy_cert) = forward_proxy_tls(
        &dir,
        &format!(
            "connect_ports = [{port}]\ninspect_ca_cert = \"inspect-ca.pem\"\ninspect_ca_key = \"inspect-ca.key\"\ninspect = [\"inspect.txt\"]\ninspect_bypass = [\"bypass.txt\"]\nupstream_ca_file = \"origin-ca.pem\""
        ),
    );
    let mut sender = h2_proxy_connection(listen, &proxy_cert).await;

    // A bypassed destination: the stream is spliced to the origin, whose own
    // certificate the client checks end to end.
    let (status, tunnel) = h2_connect(&mut sender, &format!("127.0.0.1:{port}")).await;
    assert_eq!(status, 200);
    let mut t = tls_client(&origin_ca_der, &[])
        .connect(
            ServerName::IpAddress(PkiIp::from(std::net::Ipv4Addr::LOCALHOST)),
            tunnel.unwrap(),
        )
        .await
        .expect("a handshake with the origin through the h2 stream");
    t.write_all(b"GET /spliced HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), t.read_to_end(&mut got)).await;
    let got = String::from_utf8_lossy(&got);
    assert!(got.contains("tls ok /spliced"), "{got}");
    drop(t);
    let line = wait_for_line(&dir.path("access.log"), Duration::from_secs(10), |l| {
        l.contains("\"method\":\"CONNECT\"") && l.contains(&format!("127.0.0.1:{port}"))
    })
    .expect("an access-log line for the CONNECT over h2");
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["protocol"], "HTTP/2.0", "{line}");
    assert_eq!(v["status"], 200, "{line}");
    assert!(v["bytes_in"].as_u64().unwrap() > 300, "{line}");
    assert!(v["bytes_out"].as_u64().unwrap() > 300, "{line}");
    assert_eq!(
        metric(admin, "palisade_forward_tunnels_total{outcome=\"spliced\"}").await,
        1.0
    );

    // An inspected destination: the client trusts the inspection CA, speaks h2
    // again inside the stream, and the rules see the decrypted requests.
    let ca_der = CertificateDer::from_pem_slice(inspect_ca_pem.as_bytes()).unwrap();
    let (status, tunnel) = h2_connect(&mut sender, &format!("localhost:{port}")).await;
    assert_eq!(status, 200);
    let inner = tls_client(&ca_der, &[b"h2", b"http/1.1"])
        .connect(ServerName::try_from("localhost").unwrap(), tunnel.unwrap())
        .await
        .expect("a handshake with the minted certificate through the h2 stream");
    assert_eq!(inner.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (mut inner_sender, inner_conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        TokioIo::new(inner),
    )
    .await
    .expect("an h2 handshake inside the tunnel");
    tokio::spawn(inner_conn);
    let (status, body) = h2_get(
        &mut inner_sender,
        &format!("https://localhost:{port}/inspected"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(body.starts_with("tls ok /inspected"), "{body}");
    let (status, body) = h2_get(
        &mut inner_sender,
        &format!("https://localhost:{port}/?q=%3Cscript%3Ealert(1)%3C/script%3E"),
        None,
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert!(
        wait_for_line(&dir.path("access.log"), Duration::from_secs(10), |l| {
            l.contains("\"uri\":\"/inspected\"") && l.contains("\"status\":200")
        })
        .is_some()
    );

    // A ClientHello for another name than the CONNECT's: the stream is closed
    // before the origin sees a byte.
    let (status, tunnel) = h2_connect(&mut sender, &format!("localhost:{port}")).await;
    assert_eq!(status, 200);
    let fronted = tls_client(&ca_der, &[])
        .connect(
            ServerName::try_from("front.example").unwrap(),
            tunnel.unwrap(),
        )
        .await;
    assert!(fronted.is_err(), "a fronted tunnel was served");
    assert_eq!(
        metric(
            admin,
            "palisade_forward_tunnels_total{outcome=\"fronting\"}"
        )
        .await,
        1.0
    );

    // Refused CONNECTs are answered on their stream; the connection goes on.
    for target in [
        format!("localhost:{}", port.wrapping_add(1).max(1)),
        format!("blocked.test:{port}"),
        format!("rule-refused.test:{port}"),
    ] {
        let (status, _) = h2_connect(&mut sender, &target).await;
        assert_eq!(status, 403, "{target}");
    }

    // A plain-HTTP request (`:scheme` http) is the absolute-form request of
    // HTTP/1: it reaches the host it names, through the rules.
    let (status, body) = h2_get(
        &mut sender,
        &format!("http://127.0.0.1:{bport}/plain?a=1"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(body.starts_with("hello from backend"), "{body}");
    let seen = backend.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].uri, "/plain?a=1");
    let (status, body) = h2_get(
        &mut sender,
        &format!("http://127.0.0.1:{bport}/?q=%3Cscript%3Ealert(1)%3C/script%3E"),
        None,
    )
    .await;
    assert_eq!(status, 403, "{body}");
    let (status, body) = h2_get(&mut sender, "http://www.blocked.test/", None).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(backend.requests().len(), 1, "a refused request went on");

    // HTTP/1.1 to the same TLS listener (curl's HTTPS proxy): CONNECT there,
    // then h2 with the minted certificate inside the inspected tunnel.
    let proxy_pem = dir.path("proxy.pem");
    let inspect_ca = dir.path("inspect-ca.pem");
    let (body, code, version) = curl_version(&[
        "--http2",
        "-x",
        &format!("https://127.0.0.1:{}", listen.port()),
        "--proxy-cacert",
        proxy_pem.to_str().unwrap(),
        "--cacert",
        inspect_ca.to_str().unwrap(),
        &format!("https://localhost:{port}/via-https-proxy"),
    ]);
    assert_eq!(code, "200", "{body}");
    assert_eq!(version, "2", "h2 was not negotiated inside the tunnel");
    assert!(body.starts_with("tls ok /via-https-proxy"), "{body}");
    let line = wait_for_line(&dir.path("access.log"), Duration::from_secs(10), |l| {
        l.contains("\"method\":\"CONNECT\"") && l.contains("\"protocol\":\"HTTP/1.1\"")
    })
    .expect("an access-log line for the HTTP/1.1 CONNECT over TLS");
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["scheme"], "https", "{line}");
}
