//! The dashboard (`/dashboard` on the admin listener), in a real browser: the
//! binary runs CRS v4 (../shared/crs) with examples/palisade-recommended.conf in
//! front of a recording backend; Debian's `chromium`, headless, is driven over the
//! DevTools protocol (a small WebSocket client below): it logs in through the login
//! form, and the test reads what the page shows after known requests (a benign one,
//! XSS attacks with distinctive payloads, one sent while the page is open; a shadow
//! rule set without CRS's XSS rules makes the attacks its disagreements). The
//! screenshot is kept in target/test-artifacts/dashboard.png. Without chromium the
//! test fails unless PALISADE_ALLOW_SKIP=1. The HTTP-level rules (401 without
//! credentials, CSP and nosniff, cross-site POSTs refused, cookie attributes, CSRF
//! on logout) are checked with a raw client first.

mod common;

use common::*;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const TOKEN: &str = "dash-test-token-5f2c";
const CHROMIUM: &str = "/usr/bin/chromium";
/// The first attack: a script that, if it ever ran, would set `window.__dashXss`.
const XSS: &str =
    "<script>window.__dashXss=1</script><img src=x onerror=\"window.__dashXss=2\">dash-xss-probe";
/// The attack sent while the page is open.
const LIVE: &str = "<script>window.__dashXss=3</script>dash-live-probe";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn pct(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// An admin request with `headers` (each ending in CRLF) and a body.
async fn admin(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &str,
    body: &str,
) -> RawResponse {
    send_raw(
        addr,
        format!(
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
    .await
    .unwrap()
}

fn set_cookies(r: &RawResponse) -> Vec<String> {
    r.headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("set-cookie"))
        .map(|(_, v)| v.clone())
        .collect()
}

/// The value of cookie `name` set by `r`.
fn cookie_value(r: &RawResponse, name: &str) -> Option<String> {
    set_cookies(r).iter().find_map(|c| {
        c.split(';')
            .next()?
            .strip_prefix(&format!("{name}="))
            .map(str::to_owned)
    })
}

/// The hidden CSRF field of a page.
fn csrf_field(html: &str) -> String {
    let at = html.find("name=\"csrf\" value=\"").expect("csrf field") + 19;
    html[at..at + html[at..].find('"').unwrap()].to_owned()
}

// --- A minimal WebSocket client (RFC 6455), enough for the DevTools protocol.

struct Ws {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Ws {
    async fn connect(addr: SocketAddr, path: &str) -> Ws {
        let mut s = TcpStream::connect(addr).await.unwrap();
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        );
        s.write_all(req.as_bytes()).await.unwrap();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        let end = loop {
            let n = s.read(&mut chunk).await.unwrap();
            assert!(n > 0, "DevTools closed during the handshake");
            buf.extend_from_slice(&chunk[..n]);
            if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break p + 4;
            }
        };
        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
        assert!(head.starts_with("HTTP/1.1 101"), "handshake: {head}");
        Ws {
            s,
            buf: buf[end..].to_vec(),
        }
    }

    async fn send(&mut self, text: &str) {
        let data = text.as_bytes();
        let mut frame = vec![0x81u8];
        match data.len() {
            n if n < 126 => frame.push(0x80 | n as u8),
            n if n <= 0xffff => {
                frame.push(0x80 | 126);
                frame.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                frame.push(0x80 | 127);
                frame.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        let mask = [0x37u8, 0xfa, 0x21, 0x3d];
        frame.extend_from_slice(&mask);
        frame.extend(data.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        self.s.write_all(&frame).await.unwrap();
    }

    async fn fill(&mut self, n: usize) {
        let mut chunk = vec![0u8; 65536];
        while self.buf.len() < n {
            let got = self.s.read(&mut chunk).await.unwrap();
            assert!(got > 0, "DevTools closed the connection");
            self.buf.extend_from_slice(&chunk[..got]);
        }
    }

    /// The next text message (fragments joined; control frames skipped).
    async fn recv(&mut self) -> String {
        let mut message = Vec::new();
        loop {
            self.fill(2).await;
            let fin = self.buf[0] & 0x80 != 0;
            let opcode = self.buf[0] & 0x0f;
            let mut len = (self.buf[1] & 0x7f) as usize;
            let mut at = 2;
            if len == 126 {
                self.fill(4).await;
                len = u16::from_be_bytes([self.buf[2], self.buf[3]]) as usize;
                at = 4;
            } else if len == 127 {
                self.fill(10).await;
                len = u64::from_be_bytes(self.buf[2..10].try_into().unwrap()) as usize;
                at = 10;
            }
            self.fill(at + len).await;
            let payload: Vec<u8> = self.buf.drain(..at + len).skip(at).collect();
            match opcode {
                0x0 | 0x1 => {
                    message.extend_from_slice(&payload);
                    if fin {
                        return String::from_utf8(message).unwrap();
                    }
                }
                0x8 => panic!("DevTools closed the WebSocket"),
                _ => {}
            }
        }
    }
}

/// A DevTools session on one page.
struct Cdp {
    ws: Ws,
    next: u64,
}

impl Cdp {
    async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        self.ws
            .send(&json!({"id": id, "method": method, "params": params}).to_string())
            .await;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let msg = tokio::time::timeout(Duration::from_secs(60), self.ws.recv())
                .await
                .unwrap_or_else(|_| panic!("no answer to {method}"));
            let v: Value = serde_json::from_str(&msg).unwrap();
            if v["id"] == id {
                assert!(v.get("error").is_none(), "{method}: {v}");
                return v["result"].clone();
            }
            assert!(Instant::now() < deadline, "no answer to {method}");
        }
    }

    /// The value of a JavaScript expression in the page.
    async fn eval(&mut self, expr: &str) -> Value {
        let r = self
            .call(
                "Runtime.evaluate",
                json!({"expression": expr, "returnByValue": true}),
            )
            .await;
        r["result"]["value"].clone()
    }

    /// Polls `expr` until it is `true`, up to a generous bound.
    async fn wait_true(&mut self, expr: &str, what: &str) {
        self.wait_true_within(expr, what, Duration::from_secs(60))
            .await;
    }

    /// [`Cdp::wait_true`] with a bound of its own (for work that loads CRS).
    async fn wait_true_within(&mut self, expr: &str, what: &str, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            if self.eval(expr).await == Value::Bool(true) {
                return;
            }
            if Instant::now() > deadline {
                let text = self
                    .eval("document.body ? document.body.innerText : ''")
                    .await;
                panic!("{what}: never true ({expr}); page text:\n{text}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Headless chromium in a process group of its own, ended on drop.
struct Browser {
    child: Child,
    _dir: TempDir,
    port: u16,
}

impl Browser {
    fn start() -> Browser {
        use std::os::unix::process::CommandExt as _;
        let dir = TempDir::new("chromium");
        let child = Command::new(CHROMIUM)
            .args([
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--disable-background-networking",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                "--window-size=1280,1800",
            ])
            .arg(format!("--user-data-dir={}", dir.0.display()))
            .arg("about:blank")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("start chromium");
        let file = dir.path("DevToolsActivePort");
        let deadline = Instant::now() + Duration::from_secs(60);
        let port = loop {
            if let Some(p) = std::fs::read_to_string(&file)
                .ok()
                .and_then(|t| t.lines().next()?.trim().parse::<u16>().ok())
            {
                break p;
            }
            assert!(
                Instant::now() < deadline,
                "chromium wrote no DevToolsActivePort"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        Browser {
            child,
            _dir: dir,
            port,
        }
    }

    /// A DevTools session on the browser's page.
    async fn page(&self) -> Cdp {
        let addr = loopback(self.port);
        let deadline = Instant::now() + Duration::from_secs(60);
        let ws_path = loop {
            let r = send_raw(
                addr,
                format!("GET /json/list HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")
                    .as_bytes(),
            )
            .await;
            if let Ok(r) = r {
                let list: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
                let url = list.as_array().and_then(|l| {
                    l.iter()
                        .find(|t| t["type"] == "page")
                        .and_then(|t| t["webSocketDebuggerUrl"].as_str().map(str::to_owned))
                });
                if let Some(u) = url {
                    let path = u.split_once("//").unwrap().1;
                    break path[path.find('/').unwrap()..].to_owned();
                }
            }
            assert!(Instant::now() < deadline, "chromium lists no page");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        Cdp {
            ws: Ws::connect(addr, &ws_path).await,
            next: 0,
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let pgid = self.child.id();
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{pgid}")])
            .status();
        let _ = self.child.wait();
    }
}

/// Where test artifacts go: target/test-artifacts (beside the test binary's
/// profile directory).
fn artifacts() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let target = exe
        .ancestors()
        .nth(3)
        .map(Path::to_path_buf)
        .unwrap_or_else(std::env::temp_dir);
    let dir = target.join("test-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_in_chromium() {
    let crs = repo().join("../shared/crs");
    if required(
        &crs.join("rules"),
        "the dashboard test (CRS v4 at ../shared/crs)",
    )
    .is_none()
    {
        return;
    }
    if required(
        Path::new(CHROMIUM),
        "the dashboard test (Debian's chromium)",
    )
    .is_none()
    {
        return;
    }
    let backend = Backend::start().await;
    let dir = TempDir::new("dashboard");
    std::fs::write(dir.path("token"), TOKEN).unwrap();
    let listen = loopback(free_port());
    let admin_addr = loopback(free_port());
    let file = |p: &Path| format!("[[rules]]\nfile = \"{}\"\n", p.display());
    // Every request's rules are timed, for the rule cost panel. A shadow rule set
    // without CRS's XSS rules: the XSS attacks are its disagreements (blocked by the
    // primary only), shown in the shadow panel. A JSON audit log with the parts
    // `palisade tune` replays, for the Tuning panel.
    let audit = format!(
        "[[rules]]\ninline = '''\nSecAuditEngine RelevantOnly\nSecAuditLogRelevantStatus \"^(?:5|4(?!04))\"\nSecAuditLogParts ABCFHZ\nSecAuditLogFormat JSON\nSecAuditLog {}\n'''\n",
        dir.path("audit.log").display()
    );
    let extra = format!(
        "[server]\nrule_cost_sample = 1.0\n[admin]\naddress = \"{admin_addr}\"\ntoken_file = \"{}\"\n\n{}{audit}{}{}\n[shadow]\nsample = 1.0\ncpu_budget = 4.0\ncpu_share = 4.0\noverlay = [{{ inline = 'SecRuleRemoveByTag attack-xss' }}]\n",
        dir.path("token").display(),
        file(&repo().join("examples/palisade-recommended.conf")),
        file(&crs.join("crs-setup.conf.example")),
        file(&crs.join("rules/*.conf")),
    );
    let _p = Palisade::start(&dir, &basic_config(listen, backend.addr, &extra), listen);

    // --- HTTP: credentials, headers, CSRF.
    let r = admin(admin_addr, "GET", "/dashboard", "", "").await;
    assert_eq!(r.status, 401, "{}", r.text());
    assert!(r.text().contains("action=\"/dashboard/login\""));
    let csp = r.header("content-security-policy").expect("CSP");
    assert!(
        csp.contains("default-src 'none'") && csp.contains("script-src 'self'"),
        "{csp}"
    );
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
    let login_cookie = cookie_value(&r, "palisade_login").expect("login cookie");
    let login_csrf = csrf_field(&r.text());
    assert_eq!(login_cookie, login_csrf);
    for path in ["/dashboard/events", "/dashboard/api/snapshot"] {
        let r = admin(admin_addr, "GET", path, "", "").await;
        assert_eq!(r.status, 401, "{path}: {}", r.text());
    }
    let r = admin(
        admin_addr,
        "GET",
        "/dashboard/api/snapshot",
        &format!("Authorization: Bearer {TOKEN}\r\n"),
        "",
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let form = format!("csrf={login_csrf}&token={TOKEN}");
    let cookie = format!("Cookie: palisade_login={login_cookie}\r\n");
    let ctype = "Content-Type: application/x-www-form-urlencoded\r\n";
    // Cross-site logins are refused, whatever they carry.
    for bad in [
        "Origin: http://evil.example\r\n".to_owned(),
        format!("Origin: http://{admin_addr}\r\nSec-Fetch-Site: cross-site\r\n"),
        String::new(),
    ] {
        let r = admin(
            admin_addr,
            "POST",
            "/dashboard/login",
            &format!("{cookie}{ctype}{bad}"),
            &form,
        )
        .await;
        assert_eq!(r.status, 403, "{bad:?}: {}", r.text());
        assert!(cookie_value(&r, "palisade_session").is_none());
    }
    let same = format!("Origin: http://{admin_addr}\r\nSec-Fetch-Site: same-origin\r\n");
    // A same-origin login without the login page's CSRF cookie is refused.
    let r = admin(
        admin_addr,
        "POST",
        "/dashboard/login",
        &format!("{ctype}{same}"),
        &form,
    )
    .await;
    assert_eq!(r.status, 403);
    let r = admin(
        admin_addr,
        "POST",
        "/dashboard/login",
        &format!("{cookie}{ctype}{same}"),
        &format!("csrf={login_csrf}&token=wrong"),
    )
    .await;
    assert_eq!(r.status, 401);
    let r = admin(
        admin_addr,
        "POST",
        "/dashboard/login",
        &format!("{cookie}{ctype}{same}"),
        &form,
    )
    .await;
    assert_eq!(r.status, 303, "{}", r.text());
    let session_line = set_cookies(&r)
        .into_iter()
        .find(|c| c.starts_with("palisade_session="))
        .expect("session cookie");
    assert!(session_line.contains("HttpOnly") && session_line.contains("SameSite=Strict"));
    assert!(
        !session_line.contains("Secure"),
        "the admin listener has no TLS"
    );
    let session = cookie_value(&r, "palisade_session").unwrap();
    let with_session = format!("Cookie: palisade_session={session}\r\n");
    let page = admin(admin_addr, "GET", "/dashboard", &with_session, "").await;
    assert_eq!(page.status, 200);
    assert!(!page.text().contains("<script>"), "no inline script");
    let session_csrf = csrf_field(&page.text());
    // Logout: cross-site, or without the session's CSRF token, is refused.
    let r = admin(
        admin_addr,
        "POST",
        "/dashboard/logout",
        &format!("{with_session}{ctype}Origin: http://evil.example\r\n"),
        &format!("csrf={session_csrf}"),
    )
    .await;
    assert_eq!(r.status, 403);
    let r = admin(
        admin_addr,
        "POST",
        "/dashboard/logout",
        &format!("{with_session}{ctype}{same}"),
        "csrf=nope",
    )
    .await;
    assert_eq!(r.status, 403);
    let r = admin(
        admin_addr,
        "POST",
        "/dashboard/logout",
        &format!("{with_session}{ctype}{same}"),
        &format!("csrf={session_csrf}"),
    )
    .await;
    assert_eq!(r.status, 303);
    let r = admin(
        admin_addr,
        "GET",
        "/dashboard/api/snapshot",
        &with_session,
        "",
    )
    .await;
    assert_eq!(r.status, 401, "the session ended");

    // --- Known traffic: benign, then an XSS attack CRS blocks.
    let r = get(listen, "/hello?name=alice", "").await;
    assert_eq!(r.status, 200);
    let r = get(listen, &format!("/search?q={}", pct(XSS)), "").await;
    assert_eq!(r.status, 403, "CRS blocks the XSS probe");

    // --- The browser: log in through the form, then read the page.
    let browser = Browser::start();
    let mut cdp = browser.page().await;
    cdp.call("Page.enable", json!({})).await;
    cdp.call("Runtime.enable", json!({})).await;
    cdp.call(
        "Page.navigate",
        json!({"url": format!("http://{admin_addr}/dashboard")}),
    )
    .await;
    cdp.wait_true(
        "document.readyState === 'complete' && !!document.getElementById('token')",
        "the login page",
    )
    .await;
    cdp.eval(&format!(
        "document.getElementById('token').value = {}; document.getElementById('login').submit(); true",
        json!(TOKEN)
    ))
    .await;
    cdp.wait_true(
        "document.title === 'Palisade dashboard' && document.getElementById('conn').textContent === 'live'",
        "the dashboard, live",
    )
    .await;
    cdp.wait_true(
        "document.getElementById('explorer').textContent.includes('dash-xss-probe')",
        "the blocked request in the explorer",
    )
    .await;
    cdp.wait_true(
        "Number(document.getElementById('c-requests').textContent) >= 2 && Number(document.getElementById('c-blocked').textContent) >= 1",
        "the counters",
    )
    .await;
    cdp.wait_true(
        "document.getElementById('readiness').textContent.includes('No site runs in DetectionOnly')",
        "the readiness panel (the site blocks)",
    )
    .await;
    // CRS's request rules were timed: the cost panel lists its costliest rules
    // with their ids and shares.
    cdp.wait_true(
        "document.querySelectorAll('#rule-cost tbody tr').length > 0 && /^[0-9]+$/.test(document.querySelector('#rule-cost tbody td').textContent) && document.getElementById('rule-cost').textContent.includes('%')",
        "the rule cost panel",
    )
    .await;

    cdp.wait_true(
        "document.getElementById('shadow-disagreements').textContent.includes('dash-xss-probe')",
        "the XSS attack among the shadow's disagreements",
    )
    .await;
    let shadow = cdp
        .eval("document.getElementById('shadow-panel').textContent")
        .await;
    let shadow = shadow.as_str().unwrap();
    // The request target as sent (percent-encoded), as text.
    assert!(
        shadow.contains("primary_only")
            && shadow.contains("GET /search?q=%3Cscript%3Ewindow.__dashXss%3D1")
            && shadow.contains("rules 941100"),
        "the disagreement, its target and the primary's rules: {shadow}"
    );
    let shadow_rules = cdp
        .eval("document.getElementById('shadow-rules').textContent")
        .await;
    assert!(
        shadow_rules.as_str().unwrap().contains("941"),
        "the XSS rules behind it: {shadow_rules}"
    );

    // --- Live: an attack sent while the page is open shows up.
    let r = get(listen, &format!("/live?q={}", pct(LIVE)), "").await;
    assert_eq!(r.status, 403);
    cdp.wait_true(
        "document.getElementById('explorer').textContent.includes('dash-live-probe')",
        "the request sent while the page was open",
    )
    .await;

    let explorer = cdp
        .eval("document.getElementById('explorer').textContent")
        .await;
    let explorer = explorer.as_str().unwrap();
    assert!(explorer.contains("blocked (deny)"), "{explorer}");
    assert!(
        explorer.contains("941"),
        "an XSS rule (941xxx) is shown: {explorer}"
    );
    assert!(
        explorer.contains("949110"),
        "the anomaly rule is shown: {explorer}"
    );
    // The payload is shown as text, verbatim.
    assert!(
        explorer.contains("<script>window.__dashXss=1</script>"),
        "the payload as text: {explorer}"
    );
    let top_rules = cdp
        .eval("document.getElementById('top-rules').textContent")
        .await;
    assert!(top_rules.as_str().unwrap().contains("941"), "{top_rules}");
    let top_paths = cdp
        .eval("document.getElementById('top-paths').textContent")
        .await;
    assert!(
        top_paths.as_str().unwrap().contains("/search"),
        "{top_paths}"
    );
    let upstreams = cdp
        .eval("document.getElementById('upstreams').textContent")
        .await;
    assert!(
        upstreams
            .as_str()
            .unwrap()
            .contains(&backend.addr.to_string()),
        "{upstreams}"
    );
    // Nothing the attacker sent ran or became an element.
    assert_eq!(cdp.eval("typeof window.__dashXss").await, "undefined");
    assert_eq!(
        cdp.eval("document.querySelectorAll('script').length").await,
        1,
        "only app.js"
    );
    assert_eq!(cdp.eval("document.querySelectorAll('img').length").await, 0);
    assert_eq!(
        cdp.eval("Array.from(document.querySelectorAll('*')).some(e => e.hasAttribute('onerror'))")
            .await,
        false
    );

    // --- The Tuning panel: the analysis of the audit log, run from the page. The
    // refused requests are attacks: the detectors find them, nothing is proposed.
    cdp.eval("document.getElementById('tune-run').click(); true")
        .await;
    cdp.wait_true_within(
        "document.getElementById('tune-result').textContent.includes('record(s) in')",
        "the tuning analysis",
        Duration::from_secs(300),
    )
    .await;
    let tuning = cdp
        .eval("document.getElementById('tuning').textContent")
        .await;
    let tuning = tuning.as_str().unwrap();
    assert!(tuning.contains("0 proven"), "{tuning}");
    assert!(tuning.contains("No proposal"), "{tuning}");
    assert!(tuning.contains("the detectors find an attack"), "{tuning}");
    assert!(tuning.contains("Recorded requests blocked"), "{tuning}");
    assert_eq!(cdp.eval("typeof window.__dashXss").await, "undefined");

    // --- The screenshot, kept (with the newest request's matches open).
    cdp.eval("document.querySelector('#explorer details').open = true; true")
        .await;
    cdp.call(
        "Emulation.setDeviceMetricsOverride",
        json!({"width": 1280, "height": 1800, "deviceScaleFactor": 1, "mobile": false}),
    )
    .await;
    let shot = cdp
        .call("Page.captureScreenshot", json!({"format": "png"}))
        .await;
    use base64::Engine as _;
    let png = base64::engine::general_purpose::STANDARD
        .decode(shot["data"].as_str().unwrap())
        .unwrap();
    assert!(png.starts_with(b"\x89PNG"));
    let out = artifacts().join("dashboard.png");
    std::fs::write(&out, &png).unwrap();
    eprintln!("screenshot: {}", out.display());

    // --- Logout from the page: the session ends, the login page is back.
    cdp.eval("document.getElementById('logout').submit(); true")
        .await;
    cdp.wait_true(
        "document.readyState === 'complete' && !!document.getElementById('token')",
        "the login page after logout",
    )
    .await;
}

/// A site in DetectionOnly shows in the snapshot's `readiness` with its counts,
/// its top cause and its verdict (no browser needed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_of_a_detection_only_site() {
    let backend = Backend::start().await;
    let dir = TempDir::new("dashboard-readiness");
    std::fs::write(dir.path("token"), TOKEN).unwrap();
    let listen = loopback(free_port());
    let admin_addr = loopback(free_port());
    let extra = format!(
        "[admin]\naddress = \"{admin_addr}\"\ntoken_file = \"{}\"\nreadiness_min_requests = 3\n\n[[rules]]\ninline = '''\nSecRuleEngine DetectionOnly\nSecRule ARGS:q \"@contains attack\" \"id:10,phase:1,deny,status:403,log\"\n'''\n",
        dir.path("token").display()
    );
    let _p = Palisade::start(&dir, &basic_config(listen, backend.addr, &extra), listen);
    for _ in 0..3 {
        assert_eq!(get(listen, "/ok", "").await.status, 200);
    }
    let r = get(listen, "/s?q=attack", "").await;
    assert_eq!(r.status, 200, "DetectionOnly lets it through");
    // The aggregator reads the summaries on its own task: ask until it has all four.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = admin(
            admin_addr,
            "GET",
            "/dashboard/api/snapshot",
            &format!("Authorization: Bearer {TOKEN}\r\n"),
            "",
        )
        .await;
        assert_eq!(r.status, 200);
        let doc: Value = serde_json::from_slice(&r.body).unwrap();
        let site = &doc["readiness"][0];
        if site["requests"] == 4 {
            assert_eq!(doc["readiness"].as_array().map(Vec::len), Some(1));
            assert_eq!(site["site"], "default");
            assert_eq!(site["would_block"], 1);
            assert_eq!(site["verdict"], "not ready");
            assert_eq!(site["top_rules"][0]["key"], "10");
            assert_eq!(site["top_paths"][0]["key"], "/s");
            assert!(
                site["reason"]
                    .as_str()
                    .is_some_and(|r| r.contains("rule 10")),
                "{site}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "not counted: {doc}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
