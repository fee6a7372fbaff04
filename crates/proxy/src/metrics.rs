//! Counters and histograms, exported in the Prometheus text format.
//!
//! Request-path updates are relaxed atomic adds on fixed arrays: no lock, no
//! allocation. The per-request counters and histograms are kept per worker thread
//! (each worker's on cache lines of its own, summed when rendered), so workers never
//! write to the same memory. Only rule hits, which happen on matching requests, go
//! through a mutex-protected map, one per worker too.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// What the proxy did with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Forwarded to the upstream and answered.
    Pass,
    /// Refused by a rule (deny, block with a status).
    Deny,
    /// Connection closed by a rule.
    Drop,
    /// Redirected by a rule.
    Redirect,
    /// Answered 400/413/431 by the proxy because the request could not be used.
    BadRequest,
    /// The upstream failed (502/504).
    UpstreamError,
    /// Refused by a `[[rate_limit]]` (429 by default).
    RateLimited,
}

impl Action {
    /// Every action, in label order.
    pub const ALL: [Action; 7] = [
        Action::Pass,
        Action::Deny,
        Action::Drop,
        Action::Redirect,
        Action::BadRequest,
        Action::UpstreamError,
        Action::RateLimited,
    ];

    /// The label used in logs and metrics.
    pub fn label(self) -> &'static str {
        match self {
            Action::Pass => "pass",
            Action::Deny => "deny",
            Action::Drop => "drop",
            Action::Redirect => "redirect",
            Action::BadRequest => "bad_request",
            Action::UpstreamError => "upstream_error",
            Action::RateLimited => "rate_limited",
        }
    }
}

/// Which duration a histogram records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timer {
    /// WAF phase 1, request headers.
    Phase1 = 0,
    /// WAF phase 2, request body.
    Phase2,
    /// WAF phase 3, response headers.
    Phase3,
    /// WAF phase 4, response body.
    Phase4,
    /// WAF phase 5, logging.
    Phase5,
    /// Opening a new upstream connection.
    UpstreamConnect,
    /// From sending the request upstream to its response head.
    UpstreamFirstByte,
    /// From the response head to the end of the response body.
    UpstreamTransfer,
    /// Whole request, from arrival to the end of the response.
    Total,
}

const TIMERS: [(&str, &str); 9] = [
    ("palisade_waf_phase_seconds", "phase=\"1\""),
    ("palisade_waf_phase_seconds", "phase=\"2\""),
    ("palisade_waf_phase_seconds", "phase=\"3\""),
    ("palisade_waf_phase_seconds", "phase=\"4\""),
    ("palisade_waf_phase_seconds", "phase=\"5\""),
    ("palisade_upstream_seconds", "stage=\"connect\""),
    ("palisade_upstream_seconds", "stage=\"first_byte\""),
    ("palisade_upstream_seconds", "stage=\"transfer\""),
    ("palisade_request_seconds", ""),
];

/// Bucket upper bounds in microseconds.
const BUCKETS_US: [u64; 20] = [
    5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000,
    500_000, 1_000_000, 2_500_000, 5_000_000, 10_000_000,
];

/// The histograms' bucket upper bounds, in microseconds.
pub const TIMER_BOUNDS_US: [u64; 20] = BUCKETS_US;

/// A histogram's counts at one moment ([`Metrics::timer_counts`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimerCounts {
    /// Observations per bucket (not cumulative).
    pub buckets: [u64; BUCKETS_US.len()],
    /// All observations, those over the last bound included.
    pub count: u64,
}

impl TimerCounts {
    /// The observations made between `earlier` and these.
    pub fn since(&self, earlier: &TimerCounts) -> TimerCounts {
        let mut d = *self;
        for (b, e) in d.buckets.iter_mut().zip(&earlier.buckets) {
            *b = b.saturating_sub(*e);
        }
        d.count = d.count.saturating_sub(earlier.count);
        d
    }

    /// The upper bound of the bucket holding the `q` quantile (0 to 1), in
    /// microseconds; `u64::MAX` when it is over the last bound, `None` without
    /// observations.
    pub fn quantile_us(&self, q: f64) -> Option<u64> {
        if self.count == 0 {
            return None;
        }
        let rank = (q * self.count as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (b, n) in BUCKETS_US.iter().zip(&self.buckets) {
            seen += n;
            if seen >= rank {
                return Some(*b);
            }
        }
        Some(u64::MAX)
    }
}

#[derive(Debug, Default)]
struct Histogram {
    buckets: [AtomicU64; BUCKETS_US.len()],
    count: AtomicU64,
    sum_us: AtomicU64,
}

impl Histogram {
    fn observe(&self, us: u64) {
        if let Some(i) = BUCKETS_US.iter().position(|&b| us <= b) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
    }
}

/// One counter per status code 0-599 (0: no answer, a dropped connection).
const STATUS_SLOTS: usize = 600;

/// What one worker thread counts for every request; only that worker writes here.
#[derive(Debug)]
#[repr(align(128))]
struct WorkerMetrics {
    requests: Box<[AtomicU64]>,
    timers: [Histogram; 9],
    rule_hits: Mutex<HashMap<i64, u64>>,
}

impl WorkerMetrics {
    fn new() -> WorkerMetrics {
        WorkerMetrics {
            requests: (0..STATUS_SLOTS * Action::ALL.len())
                .map(|_| AtomicU64::new(0))
                .collect(),
            timers: Default::default(),
            rule_hits: Mutex::new(HashMap::new()),
        }
    }
}

/// The status classes of `palisade_site_requests_total{class}`: no answer (a
/// dropped connection), 1xx to 5xx.
const STATUS_CLASSES: [&str; 6] = ["0", "1xx", "2xx", "3xx", "4xx", "5xx"];

/// What one worker counts for one site.
#[derive(Debug)]
#[repr(align(128))]
struct SiteWorker {
    requests: [AtomicU64; Action::ALL.len() * STATUS_CLASSES.len()],
    total: Histogram,
    waf: Histogram,
}

impl Default for SiteWorker {
    fn default() -> Self {
        SiteWorker {
            requests: std::array::from_fn(|_| AtomicU64::new(0)),
            total: Histogram::default(),
            waf: Histogram::default(),
        }
    }
}

/// The per-request counters of one site (`[[site]]`, or `default`): requests by
/// action and status class, and histograms of the whole request time and of the
/// WAF time, per worker thread like the others. Counters are kept by site name for
/// the life of the process, so that a reload that keeps a site keeps counting on
/// them.
#[derive(Debug)]
pub struct SiteCounters {
    workers: Box<[SiteWorker]>,
}

/// All of the proxy's metrics.
#[derive(Debug)]
pub struct Metrics {
    /// Per worker thread ([`crate::runtime::current_worker`]).
    workers: Box<[WorkerMetrics]>,
    /// The counters of every site name configured since the start, in the order
    /// first used; bounded by the names in the configuration (plus `default`).
    sites: Mutex<Vec<(std::sync::Arc<str>, std::sync::Arc<SiteCounters>)>>,
    /// Client connections accepted.
    pub connections_total: AtomicU64,
    /// Client connections open now.
    pub connections_open: AtomicU64,
    /// Requests whose head could not be read (answered 400/431 or dropped).
    pub malformed_requests: AtomicU64,
    /// New upstream connections opened.
    pub upstream_connects: AtomicU64,
    /// Upstream connection attempts that failed.
    pub upstream_connect_errors: AtomicU64,
    /// Upstream server names looked up.
    pub upstream_dns_queries: AtomicU64,
    /// Upstream server name lookups that failed.
    pub upstream_dns_failures: AtomicU64,
    /// Failed lookups answered with the last good answer (stale).
    pub upstream_dns_stale: AtomicU64,
    /// Lookups whose addresses differ from the previous answer.
    pub upstream_dns_changes: AtomicU64,
    /// Requests that failed on an upstream server (no connection, no response
    /// head): the passive health checks count these.
    pub upstream_server_failures: AtomicU64,
    /// Times a server was taken out (passive or active checks).
    pub upstream_servers_out: AtomicU64,
    /// Times the active checks brought a server back.
    pub upstream_servers_back: AtomicU64,
    /// Active health checks run.
    pub upstream_health_checks: AtomicU64,
    /// Active health checks that failed.
    pub upstream_health_check_failures: AtomicU64,
    /// Idempotent requests sent again to another server.
    pub upstream_retries: AtomicU64,
    /// Retries not made because the pool's retry budget was spent.
    pub upstream_retries_over_budget: AtomicU64,
    /// Transactions that failed inside the rule engine.
    pub engine_errors: AtomicU64,
    /// Connections closed at once because their address had
    /// `limits.connections_per_ip` open.
    pub connections_refused_per_ip: AtomicU64,
    /// Connections closed at once because the `[access]` lists refuse their address.
    pub connections_denied: AtomicU64,
    /// Requests refused because rule evaluation went over its CPU budget.
    pub budget_blocked: AtomicU64,
    /// Requests let through uninspected after going over the CPU budget.
    pub budget_passed: AtomicU64,
    /// Persistent collections a transaction could not read (store failures, and
    /// collections or keys that cannot be named).
    pub collection_errors: AtomicU64,
    /// Collection writes dropped because their transaction could not read the
    /// store.
    pub collection_writes_discarded: AtomicU64,
    /// Compressed response bodies whose decoding for phase 4 stopped early, by
    /// reason: decoded size limit, ratio limit, corrupt data.
    pub decode_stopped: [AtomicU64; 3],
    /// Connections closed on a listener with `proxy_protocol` before their PROXY
    /// header was accepted, by reason ([`PROXY_PROTOCOL_REFUSALS`]).
    pub proxy_protocol_refused: [AtomicU64; 5],
    /// `CONNECT` tunnels of the forward-proxy listeners, by how they ended
    /// ([`FORWARD_TUNNEL_OUTCOMES`]).
    pub forward_tunnels: [AtomicU64; 8],
    /// Forward-proxy requests answered `407`, by why
    /// ([`FORWARD_AUTH_FAILURES`]).
    pub forward_auth_failures: [AtomicU64; 4],
    /// Per authenticated forward-proxy user: requests, bytes in, bytes out,
    /// requests blocked; at most [`MAX_FORWARD_USERS`] users.
    forward_users: Mutex<std::collections::BTreeMap<Arc<str>, [u64; 4]>>,
    /// Requests refused (403) because the `[access]` lists refuse the client a
    /// trusted proxy named.
    pub requests_denied: AtomicU64,
    /// Per WAF phase, over the transactions sampled for rule costs: how many
    /// phases ran, their user and kernel CPU time (µs) and their page faults
    /// ([`Metrics::phase_usage`]).
    phase_usage: [[AtomicU64; 4]; 5],
}

/// The reasons of `palisade_proxy_protocol_refused_total{reason}`: the peer is not
/// a trusted proxy; the header is malformed or missing; it is over its size bound;
/// the connection ended inside it; it did not arrive within
/// `server.client_header_timeout`.
pub const PROXY_PROTOCOL_REFUSALS: [&str; 5] =
    ["untrusted", "invalid", "too_long", "truncated", "timeout"];

/// The outcomes of `palisade_forward_tunnels_total{outcome}`: the tunnel was
/// spliced and ended; it was closed because the ClientHello's SNI is refused by
/// the lists; or names another host than the `CONNECT` (domain fronting); the
/// destination could not be reached; the client went away before the tunnel
/// began; the tunnel was decrypted (TLS inspection) and ended; the client's
/// handshake with the minted certificate failed; and, per request inside an
/// inspected tunnel, the origin's certificate could not be verified.
pub const FORWARD_TUNNEL_OUTCOMES: [&str; 8] = [
    "spliced",
    "sni_refused",
    "fronting",
    "connect_failed",
    "client_gone",
    "inspected",
    "inspect_failed",
    "upstream_cert_failed",
];

/// Why a forward-proxy request was answered `407`
/// (`palisade_forward_auth_failures_total{reason}`): no `Proxy-Authorization`;
/// one that is not usable `Basic` credentials; an unknown user; a wrong password.
pub const FORWARD_AUTH_FAILURES: [&str; 4] =
    ["missing", "malformed", "unknown_user", "wrong_password"];

/// The most users `palisade_forward_user_*` counts; the users are those of
/// `forward.htpasswd` (authenticated), so this bounds a very large file only.
pub const MAX_FORWARD_USERS: usize = 10_000;

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Zeroed metrics, for one worker thread.
    pub fn new() -> Self {
        Self::for_workers(1)
    }

    /// Zeroed metrics, for `n` worker threads.
    pub fn for_workers(n: usize) -> Self {
        Self {
            workers: (0..n.max(1)).map(|_| WorkerMetrics::new()).collect(),
            sites: Mutex::new(Vec::new()),
            connections_total: AtomicU64::new(0),
            connections_open: AtomicU64::new(0),
            malformed_requests: AtomicU64::new(0),
            upstream_connects: AtomicU64::new(0),
            upstream_connect_errors: AtomicU64::new(0),
            upstream_dns_queries: AtomicU64::new(0),
            upstream_dns_failures: AtomicU64::new(0),
            upstream_dns_stale: AtomicU64::new(0),
            upstream_dns_changes: AtomicU64::new(0),
            upstream_server_failures: AtomicU64::new(0),
            upstream_servers_out: AtomicU64::new(0),
            upstream_servers_back: AtomicU64::new(0),
            upstream_health_checks: AtomicU64::new(0),
            upstream_health_check_failures: AtomicU64::new(0),
            upstream_retries: AtomicU64::new(0),
            upstream_retries_over_budget: AtomicU64::new(0),
            engine_errors: AtomicU64::new(0),
            connections_refused_per_ip: AtomicU64::new(0),
            connections_denied: AtomicU64::new(0),
            budget_blocked: AtomicU64::new(0),
            budget_passed: AtomicU64::new(0),
            collection_errors: AtomicU64::new(0),
            collection_writes_discarded: AtomicU64::new(0),
            decode_stopped: Default::default(),
            proxy_protocol_refused: Default::default(),
            forward_tunnels: Default::default(),
            forward_auth_failures: Default::default(),
            forward_users: Mutex::new(std::collections::BTreeMap::new()),
            requests_denied: AtomicU64::new(0),
            phase_usage: Default::default(),
        }
    }

    /// Counts a connection refused on a `proxy_protocol` listener; `reason` is one
    /// of [`PROXY_PROTOCOL_REFUSALS`].
    pub fn proxy_protocol_refused(&self, reason: &str) {
        if let Some(i) = PROXY_PROTOCOL_REFUSALS.iter().position(|r| *r == reason) {
            self.proxy_protocol_refused[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts a forward-proxy tunnel; `outcome` is one of
    /// [`FORWARD_TUNNEL_OUTCOMES`].
    pub fn forward_tunnel(&self, outcome: &str) {
        if let Some(i) = FORWARD_TUNNEL_OUTCOMES.iter().position(|r| *r == outcome) {
            self.forward_tunnels[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts a forward-proxy request answered `407`; `reason` is one of
    /// [`FORWARD_AUTH_FAILURES`].
    pub fn forward_auth_failure(&self, reason: &str) {
        if let Some(i) = FORWARD_AUTH_FAILURES.iter().position(|r| *r == reason) {
            self.forward_auth_failures[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts a request of an authenticated forward-proxy user (a user of
    /// `forward.htpasswd`): its bytes and whether it was blocked. Users past
    /// [`MAX_FORWARD_USERS`] are not counted.
    pub fn forward_user(&self, user: &Arc<str>, bytes_in: u64, bytes_out: u64, blocked: bool) {
        let mut users = self
            .forward_users
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if users.len() >= MAX_FORWARD_USERS && !users.contains_key(user) {
            return;
        }
        let c = users.entry(user.clone()).or_default();
        c[0] += 1;
        c[1] += bytes_in;
        c[2] += bytes_out;
        c[3] += u64::from(blocked);
    }

    /// The counters of the worker thread running this.
    fn worker(&self) -> &WorkerMetrics {
        &self.workers[crate::runtime::current_worker() % self.workers.len()]
    }

    /// Counts a finished request.
    pub fn request(&self, status: u16, action: Action) {
        let slot = usize::from(status).min(STATUS_SLOTS - 1);
        let a = Action::ALL.iter().position(|&x| x == action).unwrap_or(0);
        self.worker().requests[a * STATUS_SLOTS + slot].fetch_add(1, Ordering::Relaxed);
    }

    /// Records a duration in microseconds.
    pub fn observe(&self, timer: Timer, us: u64) {
        self.worker().timers[timer as usize].observe(us);
    }

    /// The phases' CPU by mode and page faults, over the sampled transactions.
    fn render_phase_usage(&self, out: &mut String) {
        let get = |phase: usize, i: usize| self.phase_usage[phase][i].load(Ordering::Relaxed);
        out.push_str(
            "# HELP palisade_waf_phase_sampled_total WAF phases run by the transactions sampled for rule costs (server.rule_cost_sample).\n\
             # TYPE palisade_waf_phase_sampled_total counter\n",
        );
        for p in 0..5 {
            let _ = writeln!(
                out,
                "palisade_waf_phase_sampled_total{{phase=\"{}\"}} {}",
                p + 1,
                get(p, 0)
            );
        }
        out.push_str(
            "# HELP palisade_waf_phase_sampled_cpu_seconds_total CPU time of the sampled WAF phases, in user and kernel (system) mode.\n\
             # TYPE palisade_waf_phase_sampled_cpu_seconds_total counter\n",
        );
        for p in 0..5 {
            for (i, mode) in [(1, "user"), (2, "system")] {
                let _ = writeln!(
                    out,
                    "palisade_waf_phase_sampled_cpu_seconds_total{{phase=\"{}\",mode=\"{mode}\"}} {}",
                    p + 1,
                    get(p, i) as f64 / 1e6
                );
            }
        }
        out.push_str(
            "# HELP palisade_waf_phase_sampled_page_faults_total Page faults of the sampled WAF phases.\n\
             # TYPE palisade_waf_phase_sampled_page_faults_total counter\n",
        );
        for p in 0..5 {
            let _ = writeln!(
                out,
                "palisade_waf_phase_sampled_page_faults_total{{phase=\"{}\"}} {}",
                p + 1,
                get(p, 3)
            );
        }
    }

    /// Adds what one sampled transaction's phase (1 to 5) used, split by mode.
    pub fn phase_usage(&self, phase: usize, u: &crate::procstat::ThreadUsage) {
        let Some(slot) = phase.checked_sub(1).and_then(|i| self.phase_usage.get(i)) else {
            return;
        };
        let us = |d: std::time::Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        for (counter, v) in slot.iter().zip([1, us(u.user), us(u.system), u.faults]) {
            counter.fetch_add(v, Ordering::Relaxed);
        }
    }

    /// A histogram's counts so far, summed over the workers: per bucket (not
    /// cumulative; bounds in [`TIMER_BOUNDS_US`]) and over the last bound.
    pub fn timer_counts(&self, timer: Timer) -> TimerCounts {
        let mut out = TimerCounts::default();
        for w in self.workers.iter() {
            let h = &w.timers[timer as usize];
            for (o, b) in out.buckets.iter_mut().zip(&h.buckets) {
                *o += b.load(Ordering::Relaxed);
            }
            out.count += h.count.load(Ordering::Relaxed);
        }
        out
    }

    /// Counts a request whose rule evaluation went over its CPU budget.
    pub fn budget_exceeded(&self, blocked: bool) {
        let c = if blocked {
            &self.budget_blocked
        } else {
            &self.budget_passed
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// The counters of the site named `name`, made on first use (the name then
    /// stays for the life of the process).
    pub fn site_counters(&self, name: &std::sync::Arc<str>) -> std::sync::Arc<SiteCounters> {
        let mut sites = self.sites.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, c)) = sites.iter().find(|(n, _)| n == name) {
            return c.clone();
        }
        let c = std::sync::Arc::new(SiteCounters {
            workers: (0..self.workers.len())
                .map(|_| SiteWorker::default())
                .collect(),
        });
        sites.push((name.clone(), c.clone()));
        c
    }

    /// Counts a finished request of a site: its status and action, its whole time
    /// and its WAF time (the phases' sum), in microseconds.
    pub fn site_request(
        &self,
        site: &SiteCounters,
        status: u16,
        action: Action,
        total_us: u64,
        waf_us: u64,
    ) {
        let w = &site.workers[crate::runtime::current_worker() % site.workers.len()];
        let class = if status == 0 {
            0
        } else {
            usize::from((status / 100).clamp(1, 5))
        };
        let a = Action::ALL.iter().position(|&x| x == action).unwrap_or(0);
        w.requests[a * STATUS_CLASSES.len() + class].fetch_add(1, Ordering::Relaxed);
        w.total.observe(total_us);
        w.waf.observe(waf_us);
    }

    /// The site metrics in the Prometheus text format.
    fn render_sites(&self, out: &mut String) {
        let sites = self.sites.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if sites.is_empty() {
            return;
        }
        let mut sites = sites;
        sites.sort_by(|a, b| a.0.cmp(&b.0));
        out.push_str(
            "# HELP palisade_site_requests_total Requests answered, by site, action and status class.\n",
        );
        out.push_str("# TYPE palisade_site_requests_total counter\n");
        for (name, c) in &sites {
            let name = escape_label(name);
            for (a, action) in Action::ALL.iter().enumerate() {
                for (k, class) in STATUS_CLASSES.iter().enumerate() {
                    let n: u64 = c
                        .workers
                        .iter()
                        .map(|w| w.requests[a * STATUS_CLASSES.len() + k].load(Ordering::Relaxed))
                        .sum();
                    if n > 0 {
                        let _ = writeln!(
                            out,
                            "palisade_site_requests_total{{site=\"{name}\",action=\"{}\",class=\"{class}\"}} {n}",
                            action.label()
                        );
                    }
                }
            }
        }
        for (metric, help, pick) in [
            (
                "palisade_site_request_seconds",
                "Whole request time by site, from arrival to the end of the response.",
                (|w: &SiteWorker| &w.total) as fn(&SiteWorker) -> &Histogram,
            ),
            (
                "palisade_site_waf_seconds",
                "Time in the WAF phases by site, all phases of a request together.",
                |w: &SiteWorker| &w.waf,
            ),
        ] {
            let _ = writeln!(out, "# HELP {metric} {help}");
            let _ = writeln!(out, "# TYPE {metric} histogram");
            for (name, c) in &sites {
                let name = escape_label(name);
                let sum = |f: &dyn Fn(&Histogram) -> &AtomicU64| -> u64 {
                    c.workers
                        .iter()
                        .map(|w| f(pick(w)).load(Ordering::Relaxed))
                        .sum()
                };
                let mut cumulative = 0;
                for (b, bound) in BUCKETS_US.iter().enumerate() {
                    cumulative += sum(&|h| &h.buckets[b]);
                    let _ = writeln!(
                        out,
                        "{metric}_bucket{{site=\"{name}\",le=\"{}\"}} {cumulative}",
                        *bound as f64 / 1e6
                    );
                }
                let count = sum(&|h| &h.count);
                let _ = writeln!(
                    out,
                    "{metric}_bucket{{site=\"{name}\",le=\"+Inf\"}} {count}"
                );
                let _ = writeln!(
                    out,
                    "{metric}_sum{{site=\"{name}\"}} {}",
                    sum(&|h| &h.sum_us) as f64 / 1e6
                );
                let _ = writeln!(out, "{metric}_count{{site=\"{name}\"}} {count}");
            }
        }
    }

    /// Counts rule matches.
    pub fn rule_hits(&self, ids: &[i64]) {
        if ids.is_empty() {
            return;
        }
        let mut m = self
            .worker()
            .rule_hits
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for id in ids {
            *m.entry(*id).or_insert(0) += 1;
        }
    }

    /// The Prometheus text exposition. `extra` adds gauges computed by the caller
    /// (name, help, value).
    pub fn render(&self, extra: &[(&str, &str, f64)]) -> String {
        let mut out = String::with_capacity(8192);
        out.push_str("# HELP palisade_requests_total Requests answered, by status and action.\n");
        out.push_str("# TYPE palisade_requests_total counter\n");
        for (a, action) in Action::ALL.iter().enumerate() {
            for slot in 0..STATUS_SLOTS {
                let n: u64 = self
                    .workers
                    .iter()
                    .map(|w| w.requests[a * STATUS_SLOTS + slot].load(Ordering::Relaxed))
                    .sum();
                if n > 0 {
                    let _ = writeln!(
                        out,
                        "palisade_requests_total{{status=\"{}\",action=\"{}\"}} {n}",
                        slot,
                        action.label()
                    );
                }
            }
        }
        out.push_str("# HELP palisade_rule_hits_total Rule matches, by rule id.\n");
        out.push_str("# TYPE palisade_rule_hits_total counter\n");
        {
            let mut m: HashMap<i64, u64> = HashMap::new();
            for w in self.workers.iter() {
                let hits = w.rule_hits.lock().unwrap_or_else(|e| e.into_inner());
                for (id, n) in hits.iter() {
                    *m.entry(*id).or_insert(0) += n;
                }
            }
            let mut ids: Vec<_> = m.iter().collect();
            ids.sort();
            for (id, n) in ids {
                let _ = writeln!(out, "palisade_rule_hits_total{{id=\"{id}\"}} {n}");
            }
        }
        self.render_sites(&mut out);
        let mut last_name = "";
        for (i, (name, label)) in TIMERS.iter().enumerate() {
            if *name != last_name {
                let help = match *name {
                    "palisade_waf_phase_seconds" => "Time spent in each WAF phase.",
                    "palisade_upstream_seconds" => {
                        "Upstream connect, time to first byte, and transfer times."
                    }
                    _ => "Whole request time, from arrival to the end of the response.",
                };
                let _ = writeln!(out, "# HELP {name} {help}");
                let _ = writeln!(out, "# TYPE {name} histogram");
                last_name = name;
            }
            let sum = |f: &dyn Fn(&Histogram) -> &AtomicU64| -> u64 {
                self.workers
                    .iter()
                    .map(|w| f(&w.timers[i]).load(Ordering::Relaxed))
                    .sum()
            };
            let sep = if label.is_empty() { "" } else { "," };
            let mut cumulative = 0;
            for (b, bound) in BUCKETS_US.iter().enumerate() {
                cumulative += sum(&|h| &h.buckets[b]);
                let _ = writeln!(
                    out,
                    "{name}_bucket{{{label}{sep}le=\"{}\"}} {cumulative}",
                    *bound as f64 / 1e6
                );
            }
            let count = sum(&|h| &h.count);
            let _ = writeln!(out, "{name}_bucket{{{label}{sep}le=\"+Inf\"}} {count}");
            let braces = |l: &str| {
                if l.is_empty() {
                    String::new()
                } else {
                    format!("{{{l}}}")
                }
            };
            let _ = writeln!(
                out,
                "{name}_sum{} {}",
                braces(label),
                sum(&|h| &h.sum_us) as f64 / 1e6
            );
            let _ = writeln!(out, "{name}_count{} {count}", braces(label));
        }
        self.render_phase_usage(&mut out);
        let counters = [
            (
                "palisade_connections_total",
                "Client connections accepted.",
                &self.connections_total,
            ),
            (
                "palisade_malformed_requests_total",
                "Requests whose head could not be read.",
                &self.malformed_requests,
            ),
            (
                "palisade_upstream_connects_total",
                "Upstream connections opened.",
                &self.upstream_connects,
            ),
            (
                "palisade_upstream_connect_errors_total",
                "Upstream connection attempts that failed.",
                &self.upstream_connect_errors,
            ),
            (
                "palisade_upstream_dns_queries_total",
                "Upstream server names looked up.",
                &self.upstream_dns_queries,
            ),
            (
                "palisade_upstream_dns_failures_total",
                "Upstream server name lookups that failed.",
                &self.upstream_dns_failures,
            ),
            (
                "palisade_upstream_dns_stale_total",
                "Failed upstream name lookups answered with the last good answer.",
                &self.upstream_dns_stale,
            ),
            (
                "palisade_upstream_dns_changes_total",
                "Upstream name lookups whose addresses differ from the previous answer.",
                &self.upstream_dns_changes,
            ),
            (
                "palisade_upstream_server_failures_total",
                "Requests that failed on an upstream server before its response head.",
                &self.upstream_server_failures,
            ),
            (
                "palisade_upstream_servers_out_total",
                "Times an upstream server was taken out (failures or health checks).",
                &self.upstream_servers_out,
            ),
            (
                "palisade_upstream_servers_back_total",
                "Times the health checks brought an upstream server back.",
                &self.upstream_servers_back,
            ),
            (
                "palisade_upstream_health_checks_total",
                "Active upstream health checks run.",
                &self.upstream_health_checks,
            ),
            (
                "palisade_upstream_health_check_failures_total",
                "Active upstream health checks that failed.",
                &self.upstream_health_check_failures,
            ),
            (
                "palisade_upstream_retries_total",
                "Idempotent requests sent again to another upstream server.",
                &self.upstream_retries,
            ),
            (
                "palisade_upstream_retries_over_budget_total",
                "Retries not made because the pool's retry budget was spent.",
                &self.upstream_retries_over_budget,
            ),
            (
                "palisade_engine_errors_total",
                "Transactions that failed inside the rule engine.",
                &self.engine_errors,
            ),
            (
                "palisade_connections_refused_per_ip_total",
                "Connections closed at once: their address had limits.connections_per_ip open.",
                &self.connections_refused_per_ip,
            ),
            (
                "palisade_connections_denied_total",
                "Connections closed at once: the [access] lists refuse their address.",
                &self.connections_denied,
            ),
            (
                "palisade_requests_denied_total",
                "Requests refused (403): the [access] lists refuse the client a trusted proxy named.",
                &self.requests_denied,
            ),
            (
                "palisade_collection_errors_total",
                "Persistent collections a transaction could not read; server.engine_failure applied.",
                &self.collection_errors,
            ),
            (
                "palisade_collection_writes_discarded_total",
                "Collection writes dropped because their transaction could not read the store.",
                &self.collection_writes_discarded,
            ),
        ];
        for (name, help, v) in counters {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            let _ = writeln!(out, "{name} {}", v.load(Ordering::Relaxed));
        }
        let _ = writeln!(
            out,
            "# HELP palisade_waf_budget_exceeded_total Requests whose rule evaluation went over its CPU budget, by what happened then.\n# TYPE palisade_waf_budget_exceeded_total counter\npalisade_waf_budget_exceeded_total{{action=\"block\"}} {}\npalisade_waf_budget_exceeded_total{{action=\"pass\"}} {}",
            self.budget_blocked.load(Ordering::Relaxed),
            self.budget_passed.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP palisade_response_decode_stopped_total Compressed response bodies whose decoding for phase 4 stopped early, by reason.\n# TYPE palisade_response_decode_stopped_total counter\npalisade_response_decode_stopped_total{{reason=\"size\"}} {}\npalisade_response_decode_stopped_total{{reason=\"ratio\"}} {}\npalisade_response_decode_stopped_total{{reason=\"corrupt\"}} {}",
            self.decode_stopped[0].load(Ordering::Relaxed),
            self.decode_stopped[1].load(Ordering::Relaxed),
            self.decode_stopped[2].load(Ordering::Relaxed)
        );
        out.push_str("# HELP palisade_proxy_protocol_refused_total Connections closed on a proxy_protocol listener before their PROXY header was accepted, by reason.\n# TYPE palisade_proxy_protocol_refused_total counter\n");
        for (reason, n) in PROXY_PROTOCOL_REFUSALS
            .iter()
            .zip(&self.proxy_protocol_refused)
        {
            let _ = writeln!(
                out,
                "palisade_proxy_protocol_refused_total{{reason=\"{reason}\"}} {}",
                n.load(Ordering::Relaxed)
            );
        }
        out.push_str("# HELP palisade_forward_tunnels_total CONNECT tunnels of the forward-proxy listeners, by outcome.\n# TYPE palisade_forward_tunnels_total counter\n");
        for (outcome, n) in FORWARD_TUNNEL_OUTCOMES.iter().zip(&self.forward_tunnels) {
            let _ = writeln!(
                out,
                "palisade_forward_tunnels_total{{outcome=\"{outcome}\"}} {}",
                n.load(Ordering::Relaxed)
            );
        }
        out.push_str("# HELP palisade_forward_auth_failures_total Forward-proxy requests answered 407, by reason.\n# TYPE palisade_forward_auth_failures_total counter\n");
        for (reason, n) in FORWARD_AUTH_FAILURES
            .iter()
            .zip(&self.forward_auth_failures)
        {
            let _ = writeln!(
                out,
                "palisade_forward_auth_failures_total{{reason=\"{reason}\"}} {}",
                n.load(Ordering::Relaxed)
            );
        }
        {
            let users = self
                .forward_users
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let series = [
                (
                    "palisade_forward_user_requests_total",
                    "Forward-proxy requests by authenticated user.",
                ),
                (
                    "palisade_forward_user_received_bytes_total",
                    "Forward-proxy request bytes received by authenticated user.",
                ),
                (
                    "palisade_forward_user_sent_bytes_total",
                    "Forward-proxy response bytes sent by authenticated user.",
                ),
                (
                    "palisade_forward_user_blocked_total",
                    "Forward-proxy requests refused by authenticated user.",
                ),
            ];
            for (i, (name, help)) in series.iter().enumerate() {
                if users.is_empty() {
                    break;
                }
                let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
                for (user, c) in users.iter() {
                    let _ = writeln!(out, "{name}{{user=\"{}\"}} {}", escape_label(user), c[i]);
                }
            }
        }
        let _ = writeln!(
            out,
            "# HELP palisade_connections_open Client connections open now.\n# TYPE palisade_connections_open gauge\npalisade_connections_open {}",
            self.connections_open.load(Ordering::Relaxed)
        );
        for (name, help, v) in extra {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
        }
        out
    }
}

/// Writes metrics without labels: counters (names ending in `_total`) and gauges.
pub fn write_plain(out: &mut String, rows: &[(&str, &str, f64)]) {
    for (name, help, v) in rows {
        let kind = if name.ends_with("_total") {
            "counter"
        } else {
            "gauge"
        };
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}"
        );
    }
}

/// A subsystem's metrics: it writes them into the exposition when `/metrics` is
/// scraped. The admin listener asks every registered collector in turn, so a
/// subsystem adds its metrics without this module knowing its types.
pub trait Collector: Send + Sync {
    /// Writes the collector's metric families.
    fn collect(&self, out: &mut Exposition);
}

/// The Prometheus text exposition being written: families with their `HELP` and
/// `TYPE` lines, and samples whose label values are escaped.
#[derive(Debug, Default)]
pub struct Exposition {
    text: String,
}

impl Exposition {
    /// Continues an exposition already begun.
    pub fn from_text(text: String) -> Self {
        Exposition { text }
    }

    /// The text so far (for writers not yet ported to this type).
    pub fn text_mut(&mut self) -> &mut String {
        &mut self.text
    }

    /// The finished text.
    pub fn into_text(self) -> String {
        self.text
    }

    /// Starts a family: its `HELP` (escaped) and `TYPE` lines.
    pub fn family(&mut self, name: &str, kind: &str, help: &str) {
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = writeln!(self.text, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    /// One sample of the current family, with its labels' values escaped.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.text.push_str(name);
        if !labels.is_empty() {
            self.text.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.text.push(',');
                }
                let _ = write!(self.text, "{k}=\"{}\"", escape_label(v));
            }
            self.text.push('}');
        }
        let _ = writeln!(self.text, " {value}");
    }

    /// A counter without labels.
    pub fn counter(&mut self, name: &str, help: &str, value: f64) {
        self.family(name, "counter", help);
        self.sample(name, &[], value);
    }

    /// A gauge without labels.
    pub fn gauge(&mut self, name: &str, help: &str, value: f64) {
        self.family(name, "gauge", help);
        self.sample(name, &[], value);
    }
}

/// A label value as the text format wants it: backslash, double quote and line
/// feed escaped.
pub fn escape_label(v: &str) -> std::borrow::Cow<'_, str> {
    if !v.contains(['\\', '"', '\n']) {
        return std::borrow::Cow::Borrowed(v);
    }
    let mut out = String::with_capacity(v.len() + 8);
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn forward_users_are_labelled_and_bounded() {
        let m = Metrics::new();
        let alice: Arc<str> = Arc::from("alice");
        m.forward_user(&alice, 10, 20, false);
        m.forward_user(&alice, 1, 2, true);
        m.forward_user(&Arc::from("a\"b\\c"), 0, 0, false);
        m.forward_auth_failure("missing");
        let text = m.render(&[]);
        assert!(
            text.contains("palisade_forward_user_requests_total{user=\"alice\"} 2\n"),
            "{text}"
        );
        assert!(text.contains("palisade_forward_user_received_bytes_total{user=\"alice\"} 11\n"));
        assert!(text.contains("palisade_forward_user_sent_bytes_total{user=\"alice\"} 22\n"));
        assert!(text.contains("palisade_forward_user_blocked_total{user=\"alice\"} 1\n"));
        assert!(text.contains("{user=\"a\\\"b\\\\c\"} 1\n"), "{text}");
        assert!(text.contains("palisade_forward_auth_failures_total{reason=\"missing\"} 1\n"));
        for i in 0..MAX_FORWARD_USERS + 5 {
            m.forward_user(&Arc::from(format!("u{i}").as_str()), 0, 0, false);
        }
        let n = m
            .forward_users
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len();
        assert_eq!(n, MAX_FORWARD_USERS);
    }

    const NASTY: &str = "a\"b\\c\nd";
    const ESCAPED: &str = "a\\\"b\\\\c\\nd";

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape_label("plain"), "plain");
        assert_eq!(escape_label(NASTY), ESCAPED);
        let mut out = Exposition::default();
        out.family("x_total", "counter", "Help with \\ and\na newline.");
        out.sample("x_total", &[("k", NASTY)], 1.0);
        assert_eq!(
            out.into_text(),
            format!(
                "# HELP x_total Help with \\\\ and\\na newline.\n# TYPE x_total counter\nx_total{{k=\"{ESCAPED}\"}} 1\n"
            )
        );
    }

    use super::*;

    #[test]
    fn workers_count_apart_and_render_summed() {
        let m = Metrics::for_workers(2);
        for w in 0..2 {
            crate::runtime::as_worker(w, || {
                m.request(200, Action::Pass);
                m.observe(Timer::Total, 40 + w as u64 * 1000);
                m.rule_hits(&[942100]);
            });
        }
        // Each worker wrote only its own counters.
        for w in m.workers.iter() {
            assert_eq!(
                w.requests
                    .iter()
                    .map(|c| c.load(Ordering::Relaxed))
                    .sum::<u64>(),
                1
            );
        }
        let out = m.render(&[]);
        assert!(
            out.contains("palisade_requests_total{status=\"200\",action=\"pass\"} 2\n"),
            "{out}"
        );
        assert!(out.contains("palisade_request_seconds_count 2\n"), "{out}");
        assert!(
            out.contains("palisade_request_seconds_bucket{le=\"0.00005\"} 1\n"),
            "{out}"
        );
        assert!(
            out.contains("palisade_request_seconds_bucket{le=\"0.0025\"} 2\n"),
            "{out}"
        );
        assert!(
            out.contains("palisade_rule_hits_total{id=\"942100\"} 2\n"),
            "{out}"
        );
    }

    #[test]
    fn quantiles_from_bucket_counts() {
        let m = Metrics::new();
        let before = m.timer_counts(Timer::Phase2);
        assert_eq!(before.quantile_us(0.99), None);
        for us in (1..=98).map(|_| 40).chain([3_000, 20_000_000]) {
            m.observe(Timer::Phase2, us);
        }
        let d = m.timer_counts(Timer::Phase2).since(&before);
        assert_eq!(d.count, 100);
        assert_eq!(d.quantile_us(0.5), Some(50));
        assert_eq!(d.quantile_us(0.99), Some(5_000));
        assert_eq!(d.quantile_us(1.0), Some(u64::MAX));
    }

    #[test]
    fn renders_counts_and_histograms() {
        let m = Metrics::new();
        m.request(200, Action::Pass);
        m.request(200, Action::Pass);
        m.request(403, Action::Deny);
        m.request(0, Action::Drop);
        m.rule_hits(&[942100, 949110, 942100]);
        m.observe(Timer::Phase1, 7);
        m.observe(Timer::Phase1, 3_000_000);
        let text = m.render(&[("palisade_rules_loaded", "Rules.", 5.0)]);
        assert!(text.contains("palisade_requests_total{status=\"200\",action=\"pass\"} 2\n"));
        assert!(text.contains("palisade_requests_total{status=\"403\",action=\"deny\"} 1\n"));
        assert!(text.contains("palisade_requests_total{status=\"0\",action=\"drop\"} 1\n"));
        assert!(text.contains("palisade_rule_hits_total{id=\"942100\"} 2\n"));
        assert!(
            text.contains("palisade_waf_phase_seconds_bucket{phase=\"1\",le=\"0.000005\"} 0\n")
        );
        assert!(text.contains("palisade_waf_phase_seconds_bucket{phase=\"1\",le=\"0.00001\"} 1\n"));
        assert!(text.contains("palisade_waf_phase_seconds_bucket{phase=\"1\",le=\"+Inf\"} 2\n"));
        assert!(text.contains("palisade_waf_phase_seconds_count{phase=\"1\"} 2\n"));
        assert!(text.contains("palisade_request_seconds_count 0\n"));
        assert!(text.contains("palisade_rules_loaded 5\n"));
    }
}
