//! Shared pieces of the engine benchmarks: the rule sets (CRS v4 and Debian's CRS
//! 3.3.4), the fixed request corpus of `bench/corpus/`, the varying corpus of
//! `bench/gen_varying.py`, and a driver that runs one transaction through the phases
//! the way the proxy does.

#![allow(dead_code)]

use engine::{CpuMeter, Intervention, Ruleset, RulesetBuilder, Transaction, TxContext};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// CPU time this thread has run, in nanoseconds (Linux `/proc/thread-self/schedstat`),
/// or `None` where that file is missing. Unlike wall time, it leaves out the time the
/// thread waited for the CPU, so it holds on a busy, shared machine.
pub fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// The calling thread's CPU clock (`CLOCK_THREAD_CPUTIME_ID`), as a server would
/// give it to transactions.
#[derive(Debug)]
pub struct ThreadCpuMeter;

impl CpuMeter for ThreadCpuMeter {
    fn now_micros(&self) -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime only writes one `timespec` through the pointer, which
        // points to a live, properly aligned local; the clock id is a constant the
        // kernel knows. On failure `ts` keeps its zeros.
        #[allow(unsafe_code)]
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        if rc != 0 {
            return 0;
        }
        ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1_000
    }
}

/// A monotonic wall clock as the meter: cheaper to read than the CPU clock, but it
/// counts the time the thread waits for a CPU.
#[derive(Debug)]
pub struct WallMeter(pub Instant);

impl CpuMeter for WallMeter {
    fn now_micros(&self) -> u64 {
        self.0.elapsed().as_micros() as u64
    }
}

/// Runs `f` repeatedly for at least `min` of wall time and at least `min_iters` times;
/// returns (CPU µs per call, wall µs per call, calls). CPU time falls back to wall time
/// where the kernel does not report it.
pub fn cpu_per_call(
    mut f: impl FnMut(),
    min: std::time::Duration,
    min_iters: u64,
) -> (f64, f64, u64) {
    f(); // warm caches and lazily built state
    let c0 = thread_cpu_ns();
    let t0 = Instant::now();
    let mut n = 0u64;
    while n < min_iters || t0.elapsed() < min {
        f();
        n += 1;
    }
    let wall = t0.elapsed().as_secs_f64() * 1e6 / n as f64;
    let cpu = match (c0, thread_cpu_ns()) {
        (Some(a), Some(b)) => (b - a) as f64 / 1e3 / n as f64,
        _ => wall,
    };
    (cpu, wall, n)
}

/// xorshift64*: the benchmarks' generated inputs, the same on every run for a seed.
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// `n` random bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| (self.next() >> 32) as u8).collect()
    }

    /// `n` printable ASCII characters (space to `~`).
    pub fn text(&mut self, n: usize) -> Vec<u8> {
        (0..n)
            .map(|_| b' ' + ((self.next() >> 32) % 95) as u8)
            .collect()
    }
}

/// The repository root (two levels above this crate).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The shared folder beside the checkout (CRS v4 lives in `crs/`).
pub fn shared() -> PathBuf {
    repo().join("../shared")
}

/// The engine settings of every rule-running benchmark configuration.
pub fn base_conf() -> PathBuf {
    repo().join("bench/rules/base.conf")
}

/// Where Debian's CRS 3.3.4 is loaded from.
pub const CRS3_LOAD: &str = "/usr/share/modsecurity-crs/owasp-crs.load";

/// Builds a rule set from `base` text followed by rule files, timing the load.
fn build(base: &str, files: &[PathBuf]) -> Result<(Arc<Ruleset>, f64), String> {
    build_reaching(base, files, &[])
}

/// As [`build`], with the shared prefilter covering paranoia `levels` too
/// ([`RulesetBuilder::reach_paranoia_levels`]).
fn build_reaching(
    base: &str,
    files: &[PathBuf],
    levels: &[(u8, u8)],
) -> Result<(Arc<Ruleset>, f64), String> {
    let start = Instant::now();
    let mut b = RulesetBuilder::new(Arc::new(seclang::FsSource));
    b.reach_paranoia_levels(levels);
    b.add_text(base, "base.conf")
        .map_err(|e| format!("base settings: {e}"))?;
    for f in files {
        b.add_file(f).map_err(|e| format!("{}: {e}", f.display()))?;
    }
    let rs = b.build().map_err(|e| format!("build: {e}"))?;
    Ok((Arc::new(rs), start.elapsed().as_secs_f64()))
}

/// Reads the shared engine settings (bench/rules/base.conf).
pub fn base_text() -> String {
    std::fs::read_to_string(base_conf()).expect("bench/rules/base.conf is part of the repository")
}

/// CRS v4 (crs-setup.conf.example + rules/*.conf, PL1) behind `base`; returns the
/// rule set and its load time in seconds.
pub fn crs_v4_with(base: &str) -> Result<(Arc<Ruleset>, f64), String> {
    let crs = shared().join("crs");
    build(
        base,
        &[crs.join("crs-setup.conf.example"), crs.join("rules/*.conf")],
    )
}

/// [`crs_v4_with`], the shared prefilter covering paranoia `levels` too.
pub fn crs_v4_reaching(base: &str, levels: &[(u8, u8)]) -> Result<(Arc<Ruleset>, f64), String> {
    let crs = shared().join("crs");
    build_reaching(
        base,
        &[crs.join("crs-setup.conf.example"), crs.join("rules/*.conf")],
        levels,
    )
}

/// Debian's CRS 3.3.4 (through owasp-crs.load) behind `base`. Errors when the
/// package is missing or the rules do not load.
pub fn crs_v3_with(base: &str) -> Result<(Arc<Ruleset>, f64), String> {
    if !Path::new(CRS3_LOAD).exists() {
        return Err(format!(
            "{CRS3_LOAD} is missing (apt-get install modsecurity-crs)"
        ));
    }
    build(base, &[PathBuf::from(CRS3_LOAD)])
}

/// A request of the corpus, split into its parts.
#[derive(Debug, Clone)]
pub struct RawRequest {
    /// The corpus file name without `.http`.
    pub name: String,
    /// Request method.
    pub method: Vec<u8>,
    /// Request target as sent.
    pub target: Vec<u8>,
    /// Protocol (HTTP/1.1).
    pub protocol: Vec<u8>,
    /// Header lines in order.
    pub headers: Vec<(Vec<u8>, Vec<u8>)>,
    /// Body bytes.
    pub body: Vec<u8>,
}

impl RawRequest {
    /// Parses a raw HTTP/1.1 request (CRLF line ends, body after the blank line).
    pub fn parse(name: &str, raw: &[u8]) -> Result<RawRequest, String> {
        let end = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .ok_or_else(|| format!("{name}: no end of head"))?;
        let head = &raw[..end];
        let body = raw[end + 4..].to_vec();
        let mut lines = head
            .split(|&b| b == b'\n')
            .map(|l| l.strip_suffix(b"\r").unwrap_or(l));
        let line = lines.next().ok_or_else(|| format!("{name}: empty"))?;
        let mut parts = line.splitn(3, |&b| b == b' ');
        let method = parts.next().unwrap_or_default().to_vec();
        let target = parts.next().unwrap_or_default().to_vec();
        let protocol = parts.next().unwrap_or_default().to_vec();
        let mut headers = Vec::new();
        for l in lines {
            let colon = l
                .iter()
                .position(|&b| b == b':')
                .ok_or_else(|| format!("{name}: header line without a colon"))?;
            let value = l[colon + 1..].trim_ascii_start();
            headers.push((l[..colon].to_vec(), value.to_vec()));
        }
        Ok(RawRequest {
            name: name.to_string(),
            method,
            target,
            protocol,
            headers,
            body,
        })
    }
}

/// The corpus in a fixed order: benign requests first, then attacks.
pub const CORPUS: &[&str] = &[
    "get",
    "form",
    "json",
    "attack-sqli",
    "attack-xss",
    "attack-traversal",
    "attack-log4shell",
];

/// Loads one corpus request from bench/corpus/NAME.http.
pub fn corpus(name: &str) -> RawRequest {
    let path = repo().join("bench/corpus").join(format!("{name}.http"));
    let raw = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    RawRequest::parse(name, &raw).unwrap_or_else(|e| panic!("{e}"))
}

/// The kinds of the varying corpus as the benchmarks group them: `get` stands for the
/// generator's `get-page`, `get-asset` and `get-api`.
pub const VARYING_KINDS: &[&str] = &["get", "form", "multipart", "json"];

/// Where the varying corpus is written: `PALISADE_VARYING_DIR`, or
/// `target/bench-corpus/varying` in the repository.
pub fn varying_dir() -> PathBuf {
    std::env::var_os("PALISADE_VARYING_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target/bench-corpus/varying"))
}

/// The varying corpus (bench/gen_varying.py, fixed seed): every request with its kind
/// (`get`, `form`, `multipart` or `json`), in the generator's order. Runs the generator
/// first, which leaves an up-to-date directory as it is; panics with the reason when
/// python3 or the generator fails (a benchmark of nothing is worthless).
pub fn varying() -> Vec<(&'static str, RawRequest)> {
    let dir = varying_dir();
    let out = std::process::Command::new("python3")
        .arg(repo().join("bench/gen_varying.py"))
        .arg("--out")
        .arg(&dir)
        .output()
        .unwrap_or_else(|e| panic!("python3 bench/gen_varying.py: {e}"));
    if !out.status.success() {
        panic!(
            "bench/gen_varying.py failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let manifest = dir.join("manifest.tsv");
    let text = std::fs::read_to_string(&manifest)
        .unwrap_or_else(|e| panic!("{}: {e}", manifest.display()));
    let mut all = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let mut cols = line.split('\t');
        let (Some(file), Some(kind)) = (cols.next(), cols.next()) else {
            panic!("{}: malformed line {line:?}", manifest.display());
        };
        let kind = match kind {
            "get-page" | "get-asset" | "get-api" => "get",
            "form" => "form",
            "multipart" => "multipart",
            "json" => "json",
            other => panic!("{}: unknown kind {other:?}", manifest.display()),
        };
        let path = dir.join(file);
        let raw = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        all.push((
            kind,
            RawRequest::parse(file, &raw).unwrap_or_else(|e| panic!("{e}")),
        ));
    }
    all
}

/// The first `n` requests of each kind of the varying corpus (all of a kind when it
/// has fewer), keyed by kind: distinct requests for per-kind averages.
pub fn varying_sample(
    all: &[(&'static str, RawRequest)],
    n: usize,
) -> std::collections::HashMap<&'static str, Vec<RawRequest>> {
    let mut out: std::collections::HashMap<&'static str, Vec<RawRequest>> =
        std::collections::HashMap::new();
    for (kind, req) in all {
        let v = out.entry(kind).or_default();
        if v.len() < n {
            v.push(req.clone());
        }
    }
    out
}

/// A small HTML response for phases 3 and 4.
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Header lines.
    pub headers: Vec<(&'static [u8], Vec<u8>)>,
    /// Body bytes.
    pub body: Vec<u8>,
}

/// A 1 KiB HTML page, as a typical small response.
pub fn small_response() -> Response {
    let mut body = b"<!doctype html><html><head><title>Books</title></head><body><ul>".to_vec();
    let mut i = 0;
    while body.len() < 1000 {
        body.extend_from_slice(format!("<li>Book number {i}, paperback</li>").as_bytes());
        i += 1;
    }
    body.extend_from_slice(b"</ul></body></html>");
    Response {
        status: 200,
        headers: vec![
            (b"Content-Type", b"text/html; charset=utf-8".to_vec()),
            (b"Content-Length", body.len().to_string().into_bytes()),
            (b"Cache-Control", b"no-cache".to_vec()),
        ],
        body,
    }
}

/// Runs one transaction: phases 1 and 2, then 3 and 4 when `response` is given and
/// the request passed, then 5. Returns the intervention, if any.
pub fn run(
    rs: &Arc<Ruleset>,
    req: &RawRequest,
    response: Option<&Response>,
) -> Option<Intervention> {
    run_tx(rs, req, response).0
}

/// As [`run`], and also returns the transaction for inspection.
pub fn run_tx(
    rs: &Arc<Ruleset>,
    req: &RawRequest,
    response: Option<&Response>,
) -> (Option<Intervention>, Transaction) {
    run_metered(rs, req, response, None)
}

/// As [`run_tx`], with a CPU meter given to the transaction (its budget is the rule
/// set's, none unless configured).
pub fn run_metered(
    rs: &Arc<Ruleset>,
    req: &RawRequest,
    response: Option<&Response>,
    meter: Option<&Arc<dyn CpuMeter>>,
) -> (Option<Intervention>, Transaction) {
    let mut tx = Transaction::new(rs.clone(), TxContext::default());
    if let Some(m) = meter {
        tx.set_cpu_meter(m.clone());
    }
    drive(tx, req, response)
}

/// Runs one transaction of a site ([`engine::Policy`]), as [`run`].
pub fn run_site(
    site: &Arc<engine::Policy>,
    req: &RawRequest,
    response: Option<&Response>,
) -> Option<Intervention> {
    drive(
        Transaction::with_policy(site.clone(), TxContext::default()),
        req,
        response,
    )
    .0
}

/// Feeds `req` (and `response`) to `tx` and runs its phases, as [`run`].
pub fn drive(
    mut tx: Transaction,
    req: &RawRequest,
    response: Option<&Response>,
) -> (Option<Intervention>, Transaction) {
    tx.set_request_line(&req.method, &req.target, &req.protocol);
    for (k, v) in &req.headers {
        tx.add_request_header(k, v);
    }
    let mut out = tx.process_request_headers();
    if out.is_none() {
        if !req.body.is_empty() && tx.request_body_wanted() {
            tx.append_request_body(&req.body);
        }
        out = tx.process_request_body();
    }
    if out.is_none()
        && let Some(resp) = response
    {
        tx.set_response_status(resp.status, b"HTTP/1.1");
        for (k, v) in &resp.headers {
            tx.add_response_header(k, v);
        }
        out = tx.process_response_headers();
        if out.is_none() {
            if tx.response_body_wanted() {
                tx.append_response_body(&resp.body);
            }
            out = tx.process_response_body();
        }
    }
    tx.process_logging();
    (out, tx)
}
