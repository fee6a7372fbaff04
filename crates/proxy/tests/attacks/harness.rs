//! The target under attack and the checks made after every attack: palisade (the
//! real binary) in front of an in-process albedo that records every request it
//! receives.

pub use crate::common::read_until_close;
use crate::common::{Backend, Palisade, TempDir, free_port, loopback, send_raw};
use albedo::{Albedo, Options as AlbedoOptions, Record, read_records};
use rustls::pki_types::CertificateDer;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

/// The payload every hostile request carries somewhere; the rules of
/// [`mark_rules`] block it wherever the engine sees it.
pub const MARK: &str = "attackmarker";

/// Default memory bound (peak resident set of the palisade process), in MiB.
pub const BOUND_DEFAULT_MIB: u64 = 96;

/// A generous deadline for anything that should happen promptly.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// Engine settings with request bodies limited to `body_limit` bytes, the JSON and
/// XML body processors (as ModSecurity's recommended configuration switches them
/// on), and a rule that blocks [`MARK`] in the request line and in any header.
pub fn base_rules(body_limit: usize) -> String {
    format!(
        r#"
SecRuleEngine On
SecRequestBodyAccess On
SecRequestBodyLimit {body_limit}
SecRequestBodyNoFilesLimit {body_limit}
SecRequestBodyLimitAction Reject
SecRule REQUEST_HEADERS:Content-Type "@rx ^application/json" "id:90001,phase:1,pass,nolog,t:none,t:lowercase,ctl:requestBodyProcessor=JSON"
SecRule REQUEST_HEADERS:Content-Type "@rx ^(?:application|text)/xml" "id:90002,phase:1,pass,nolog,t:none,t:lowercase,ctl:requestBodyProcessor=XML"
SecRule REQUEST_LINE|REQUEST_HEADERS_NAMES|REQUEST_HEADERS "@contains {MARK}" "id:90010,phase:1,deny,status:403,log,t:none,t:lowercase"
"#
    )
}

/// [`base_rules`] (13 MB bodies), and rules that block [`MARK`] anywhere in the raw
/// body (through `FULL_REQUEST`, which holds the body whatever its processor) and
/// in any argument, plus SQL injection in arguments.
pub fn mark_rules() -> String {
    base_rules(13_107_200)
        + &format!(
            r#"
SecRule FULL_REQUEST "@contains {MARK}" "id:90011,phase:2,deny,status:403,log,t:none,t:lowercase"
SecRule ARGS|ARGS_NAMES|REQUEST_FILENAME "@contains {MARK}" "id:90012,phase:2,deny,status:403,log,t:none,t:urlDecodeUni,t:lowercase"
SecRule ARGS "@detectSQLi" "id:90013,phase:2,deny,status:403,log,t:none"
"#
        )
}

/// How to start a [`Target`].
#[derive(Debug, Clone)]
pub struct Setup {
    /// A name for the scratch directory and messages.
    pub name: &'static str,
    /// SecLang rules.
    pub rules: String,
    /// Lines of the `[server]` table.
    pub server: String,
    /// Lines of the `[limits]` table.
    pub limits: String,
    /// Lines of the `[admin]` table (`address` is added); `None`: no admin listener.
    pub admin: Option<String>,
    /// Also listen with TLS (HTTP/2 through ALPN), with a certificate made here.
    pub tls: bool,
    /// Route `/big` to a second backend that answers `/big?n=N` with N bytes.
    pub big: bool,
    /// The memory bound, in MiB.
    pub bound_mib: u64,
    /// What must never reach the backend, besides [`MARK`] (compared without regard
    /// to ASCII case).
    pub needles: Vec<String>,
}

impl Setup {
    /// A target with [`mark_rules`] and the default bound.
    pub fn new(name: &'static str) -> Setup {
        Setup {
            name,
            rules: mark_rules(),
            server: String::new(),
            limits: String::new(),
            admin: None,
            tls: false,
            big: false,
            bound_mib: BOUND_DEFAULT_MIB,
            needles: Vec::new(),
        }
    }
}

/// Resident memory of a process, from `/proc/PID/status`.
#[derive(Debug, Clone, Copy)]
pub struct Mem {
    /// `VmRSS` in KiB.
    pub rss_kib: u64,
    /// `VmHWM` (the peak resident set) in KiB.
    pub hwm_kib: u64,
}

/// Reads the memory figures of `pid`; `None` when the process is gone.
pub fn memory(pid: u32) -> Option<Mem> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    };
    Some(Mem {
        rss_kib: field("VmRSS:")?,
        hwm_kib: field("VmHWM:")?,
    })
}

/// True while `pid` runs (not exited, not a zombie waiting to be reaped).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("State:"))
            .is_some_and(|st| !st.trim_start().starts_with('Z'))
    })
}

/// Palisade in front of a recording albedo (and optionally a second backend for
/// large responses), with the checks every attack is followed by.
pub struct Target {
    /// The plain HTTP/1 listener.
    pub http: SocketAddr,
    /// The TLS listener (HTTP/2 and HTTP/1.1 through ALPN), if asked for.
    pub https: Option<SocketAddr>,
    /// The admin listener, if asked for.
    pub admin: Option<SocketAddr>,
    /// The certificate the TLS listener presents (self-signed for `localhost`).
    pub cert: Option<CertificateDer<'static>>,
    /// Albedo's record file.
    pub record: PathBuf,
    name: &'static str,
    bound_kib: u64,
    needles: Vec<Vec<u8>>,
    controls: AtomicUsize,
    /// Records already checked for payloads.
    checked: AtomicUsize,
    // Dropped in this order: the proxy first, then the backends, then the files.
    proxy: Palisade,
    _big: Option<Backend>,
    _stop_albedo: oneshot::Sender<()>,
    _dir: TempDir,
}

impl Target {
    /// Starts albedo and palisade as `setup` says.
    pub async fn start(setup: Setup) -> Target {
        raise_fd_limit();
        let dir = TempDir::new(setup.name);
        let record = dir.path("albedo.jsonl");
        let albedo = Albedo::bind(
            loopback(0),
            &AlbedoOptions {
                record: Some(record.clone()),
                debug: false,
            },
        )
        .await
        .expect("albedo binds");
        let albedo_addr = albedo.local_addr().unwrap();
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        tokio::spawn(albedo.serve_until(async move {
            let _ = stop_rx.await;
        }));
        let big = if setup.big {
            Some(Backend::start().await)
        } else {
            None
        };

        let http = loopback(free_port());
        let mut cfg = format!(
            "[server]\nworker_threads = 2\n{}\n\n[[listener]]\naddress = \"{http}\"\n",
            setup.server
        );
        let mut https = None;
        let mut cert = None;
        if setup.tls {
            let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])
                .expect("a self-signed certificate");
            std::fs::write(dir.path("cert.pem"), made.cert.pem()).unwrap();
            std::fs::write(dir.path("key.pem"), made.signing_key.serialize_pem()).unwrap();
            cert = Some(made.cert.der().clone());
            let addr = loopback(free_port());
            cfg.push_str(&format!(
                "\n[[listener]]\naddress = \"{addr}\"\ntls = {{ cert = \"cert.pem\", key = \"key.pem\" }}\n"
            ));
            https = Some(addr);
        }
        cfg.push_str(&format!(
            "\n[[upstream]]\nname = \"app\"\nservers = [\"{albedo_addr}\"]\nconnect_timeout = \"2s\"\nread_timeout = \"10s\"\n"
        ));
        if let Some(b) = &big {
            cfg.push_str(&format!(
                "\n[[upstream]]\nname = \"big\"\nservers = [\"{}\"]\nconnect_timeout = \"2s\"\nread_timeout = \"10s\"\n\n[[route]]\npath_prefix = \"/big\"\nupstream = \"big\"\n\n[[route]]\nupstream = \"app\"\n",
                b.addr
            ));
        }
        cfg.push_str(&format!(
            "\n[[rules]]\ninline = '''\n{}\n'''\n\n[limits]\n{}\n\n[logs]\nerror_log = \"error.log\"\nlevel = \"warn\"\n",
            setup.rules, setup.limits
        ));
        let mut admin = None;
        if let Some(lines) = &setup.admin {
            let addr = loopback(free_port());
            cfg.push_str(&format!("\n[admin]\naddress = \"{addr}\"\n{lines}\n"));
            admin = Some(addr);
        }
        let proxy = Palisade::start(&dir, &cfg, http);
        for addr in https.iter().chain(admin.iter()) {
            wait_listening(*addr).await;
        }
        let mut needles: Vec<Vec<u8>> = vec![MARK.as_bytes().to_vec()];
        needles.extend(
            setup
                .needles
                .iter()
                .map(|n| n.to_ascii_lowercase().into_bytes()),
        );
        Target {
            http,
            https,
            admin,
            cert,
            record,
            name: setup.name,
            bound_kib: setup.bound_mib * 1024,
            needles,
            controls: AtomicUsize::new(0),
            checked: AtomicUsize::new(0),
            proxy,
            _big: big,
            _stop_albedo: stop_tx,
            _dir: dir,
        }
    }

    /// The name the target was started with.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The palisade process id.
    pub fn pid(&self) -> u32 {
        self.proxy.pid()
    }

    /// The palisade process's memory now.
    pub fn memory(&self) -> Option<Mem> {
        memory(self.pid())
    }

    /// The backend's record so far.
    pub fn records(&self) -> Vec<Record> {
        read_records(&self.record).expect("albedo's record is readable")
    }

    /// Records of requests to exactly this path.
    pub fn records_for(&self, path: &str) -> Vec<Record> {
        self.records()
            .into_iter()
            .filter(|r| r.path == path)
            .collect()
    }

    /// The three checks that follow every attack: the proxy is up and serves a
    /// control request that reaches the backend; its peak memory is within the
    /// bound; and no record of the backend contains a payload. Returns what failed,
    /// naming the attack.
    pub async fn check(&self, attack: &str) -> Result<Mem, String> {
        let pid = self.pid();
        if !running(pid) {
            return Err(format!(
                "{attack}: palisade is no longer running; its stderr ends with: {}",
                tail(&self.proxy.stderr_text())
            ));
        }
        let n = self.controls.fetch_add(1, Ordering::Relaxed);
        let path = format!("/control/{n}");
        let req = format!("GET {path} HTTP/1.1\r\nHost: control.test\r\nConnection: close\r\n\r\n");
        match tokio::time::timeout(DEADLINE, send_raw(self.http, req.as_bytes())).await {
            Err(_) => {
                return Err(format!(
                    "{attack}: a control request got no answer within {DEADLINE:?}"
                ));
            }
            Ok(Err(e)) => return Err(format!("{attack}: a control request failed: {e}")),
            Ok(Ok(r)) if r.status != 200 => {
                return Err(format!(
                    "{attack}: a control request was answered {} ({})",
                    r.status,
                    r.text()
                ));
            }
            Ok(Ok(_)) => {}
        }
        if self.records_for(&path).is_empty() {
            return Err(format!(
                "{attack}: the control request {path} was answered but never reached the backend"
            ));
        }
        let mem = self
            .memory()
            .ok_or_else(|| format!("{attack}: palisade is gone"))?;
        if mem.hwm_kib > self.bound_kib {
            return Err(format!(
                "{attack}: peak resident memory {} MiB is over the bound of {} MiB (now {} MiB)",
                mem.hwm_kib / 1024,
                self.bound_kib / 1024,
                mem.rss_kib / 1024
            ));
        }
        self.clean(attack)?;
        eprintln!(
            "[{}] {attack}: ok; VmRSS {:.1} MiB, VmHWM {:.1} MiB (bound {} MiB)",
            self.name,
            mem.rss_kib as f64 / 1024.0,
            mem.hwm_kib as f64 / 1024.0,
            self.bound_kib / 1024
        );
        Ok(mem)
    }

    /// Fails when a request the backend received since the last check carries a
    /// payload (so that a failure is reported once, against the attack that
    /// caused it).
    pub fn clean(&self, attack: &str) -> Result<(), String> {
        let records = self.records();
        let from = self.checked.swap(records.len(), Ordering::Relaxed);
        for r in records.iter().skip(from) {
            let body = r.body().unwrap_or_default().to_ascii_lowercase();
            let mut parts: Vec<(String, Vec<u8>)> = vec![
                ("target".into(), r.uri.to_ascii_lowercase().into_bytes()),
                ("body".into(), body),
            ];
            for (name, value) in &r.headers {
                parts.push((
                    format!("header {name}"),
                    format!("{name}: {value}").to_ascii_lowercase().into_bytes(),
                ));
            }
            for needle in &self.needles {
                for (where_, bytes) in &parts {
                    if memchr::memmem::find(bytes, needle).is_some() {
                        return Err(format!(
                            "{attack}: the payload {:?} reached the backend in the {where_} of {} {}",
                            String::from_utf8_lossy(needle),
                            r.method,
                            shorten(&r.uri)
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

/// Runs the cases of a family and fails with every failure listed.
pub fn report(family: &str, failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{family}: {} attack(s) failed:\n  - {}",
        failures.len(),
        failures.join("\n  - ")
    );
}

fn tail(s: &str) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(10)..].join("\n")
}

/// The first 120 characters of `s`.
pub fn shorten(s: &str) -> String {
    if s.len() <= 120 {
        s.to_owned()
    } else {
        let mut end = 120;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}... ({} bytes)", &s[..end], s.len())
    }
}

async fn wait_listening(addr: SocketAddr) {
    let deadline = Instant::now() + DEADLINE;
    while TcpStream::connect(addr).await.is_err() {
        assert!(Instant::now() < deadline, "{addr} never listened");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Raises this process's open-file limit to its hard limit (the palisade child
/// inherits it): the connection-heavy cases hold a few thousand sockets.
pub fn raise_fd_limit() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut lim = getrlimit(Resource::Nofile);
    if lim.current < lim.maximum {
        lim.current = lim.maximum;
        let _ = setrlimit(Resource::Nofile, lim);
    }
}

/// The open-file limit now in force (soft), if known.
pub fn fd_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current
}

/// What came back on a connection after a raw request: the statuses of the
/// complete responses in order, and whether the proxy closed the connection.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// Status of each complete response (interim 1xx responses included).
    pub statuses: Vec<u16>,
    /// The proxy closed the connection (or reset it) before the wait ran out.
    pub closed: bool,
    /// Everything received.
    pub raw: Vec<u8>,
}

impl Exchange {
    /// The final (non-1xx) statuses.
    pub fn finals(&self) -> Vec<u16> {
        self.statuses
            .iter()
            .copied()
            .filter(|s| *s >= 200)
            .collect()
    }

    /// A short description for failure messages.
    pub fn describe(&self) -> String {
        format!(
            "statuses {:?}, connection {}, first bytes {:?}",
            self.statuses,
            if self.closed { "closed" } else { "open" },
            shorten(&String::from_utf8_lossy(
                &self.raw[..self.raw.len().min(200)]
            ))
        )
    }
}

/// Sends `request` on a new connection (write errors ignored: the proxy may close
/// before reading it all) and collects what comes back until the proxy closes the
/// connection or `wait` passes.
pub async fn exchange(addr: SocketAddr, request: &[u8], wait: Duration) -> Exchange {
    let mut s = TcpStream::connect(addr).await.expect("connect to palisade");
    exchange_on(&mut s, request, wait).await
}

/// [`exchange`] on an open connection.
pub async fn exchange_on(s: &mut TcpStream, request: &[u8], wait: Duration) -> Exchange {
    use tokio::io::AsyncWriteExt;
    let _ = s.write_all(request).await;
    let (raw, closed) = read_until_close(s, wait).await;
    Exchange {
        statuses: statuses(&raw),
        closed,
        raw,
    }
}

/// The statuses of the complete HTTP/1 responses in `raw`, in order.
pub fn statuses(mut raw: &[u8]) -> Vec<u16> {
    let mut out = Vec::new();
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut resp = httparse::Response::new(&mut headers);
        let Ok(httparse::Status::Complete(head_len)) = resp.parse(raw) else {
            return out;
        };
        let status = resp.code.unwrap_or(0);
        let value = |name: &str| {
            resp.headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case(name))
                .map(|h| String::from_utf8_lossy(h.value).into_owned())
        };
        let length = value("content-length").and_then(|v| v.trim().parse::<usize>().ok());
        let chunked = value("transfer-encoding").is_some_and(|v| v.contains("chunked"));
        let rest = &raw[head_len..];
        let body_len = if (100..200).contains(&status) {
            Some(0)
        } else if let Some(n) = length {
            (rest.len() >= n).then_some(n)
        } else if chunked {
            chunked_len(rest)
        } else {
            // Delimited by the close: complete only if the connection ended, which
            // the caller knows; count it.
            Some(rest.len())
        };
        let Some(body_len) = body_len else {
            return out;
        };
        out.push(status);
        raw = &rest[body_len..];
    }
}

/// The length of a complete chunked body at the start of `b` (framing included).
fn chunked_len(b: &[u8]) -> Option<usize> {
    let mut at = 0;
    loop {
        let lf = memchr::memchr(b'\n', &b[at..])? + at;
        let line = std::str::from_utf8(&b[at..lf]).ok()?;
        let size = usize::from_str_radix(line.trim().split(';').next()?.trim(), 16).ok()?;
        at = lf + 1;
        if size == 0 {
            // Trailers up to the blank line.
            loop {
                let lf = memchr::memchr(b'\n', &b[at..])? + at;
                let empty = b[at..lf].iter().all(|c| *c == b'\r');
                at = lf + 1;
                if empty {
                    return Some(at);
                }
            }
        }
        at += size + 2;
        if at > b.len() {
            return None;
        }
    }
}

pub use crate::common::tls_connect;
