//! The shadow rule set (`[shadow]`, docs/shadow.md): a second rule set (CRS at a
//! higher paranoia level, a newer CRS, candidate exclusions) that runs
//! detection-only beside the blocking one on a sample of the requests, and is
//! compared with it request by request.
//!
//! The request's path never waits for the shadow. When a request is sampled, its
//! head is copied before the primary rules run; once phases 1 and 2 of the primary
//! rules have decided (blocked in phase 1, blocked in phase 2, or passed), the head,
//! the buffered body (none when phase 1 blocked, or when the body was under a
//! content coding: the shadow then sees the head only, and that is counted), the
//! client and the primary's request-phase verdict are handed to one dedicated
//! thread of low priority through a bounded queue that is never waited for (full:
//! the request is skipped and counted). That thread runs the shadow's phases 1 and
//! 2 as if its engine mode were `On`, records the intervention it would make and
//! never enforces it, and compares the two request-phase verdicts: both passed,
//! both blocked, only the shadow blocked, only the primary blocked. Response
//! phases are not compared: the shadow has no response to see.
//!
//! The shadow's CPU time is its own budget (`cpu_budget`, a fraction of one core),
//! kept as a token bucket of CPU time measured per evaluation on the shadow
//! thread's own clock; while the bucket is empty sampled requests are skipped (and
//! counted) before anything is copied.
//!
//! [`ShadowSet`] is the configuration's shadow, part of the rules snapshot
//! ([`crate::waf::Waf::shadow`]), so that a reload swaps it with the rules;
//! [`Shadow`] is the process's runner, counters and disagreements, which outlive
//! reloads.

use crate::config::ShadowSection;
use crate::metrics::{Collector, Exposition};
use crate::waf::{BodyFeed, Waf};
use bytes::Bytes;
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The niceness of the shadow thread, as the inspection pool's.
const SHADOW_NICE: i32 = 10;

/// How many rules the per-rule disagreement table keeps at most.
const MAX_RULES: usize = 10_000;

/// How many rules the snapshot lists, most disagreements first.
const TOP_RULES: usize = 20;

/// The seconds of CPU time at the budget's rate the bucket holds when full.
const BURST_SECONDS: f64 = 1.0;

/// The request body bytes the queue may hold at once, all jobs together: a
/// sampled request whose body would go over it is skipped (`skipped_queue`).
pub const MAX_QUEUED_BODY_BYTES: usize = 64 << 20;

/// The configuration's shadow rule set, in the rules snapshot.
#[derive(Debug)]
pub struct ShadowSet {
    waf: Waf,
    sample: f64,
    /// `sample` scaled to the random numbers' range (`u64::MAX`: every request).
    threshold: u64,
    cpu_budget: f64,
    cpu_share: f64,
    queue: usize,
    ring: usize,
    /// What the shadow's rules are, for the summary.
    source: &'static str,
    paranoia_level: Option<u8>,
    /// The body bytes the shadow's rules read (its request body limit), and one
    /// more so that they see it was reached: the rest is not queued.
    body_limit: usize,
}

impl ShadowSet {
    /// The shadow of `section` over the rules `waf` (built by
    /// [`Waf::with_shadow`](crate::waf::Waf::with_shadow)).
    pub fn new(waf: Waf, section: &ShadowSection) -> ShadowSet {
        let threshold = if section.sample >= 1.0 {
            u64::MAX
        } else {
            // Exact enough: the fraction of u64 values below it.
            (section.sample * u64::MAX as f64) as u64
        };
        let body_limit = waf
            .sites()
            .get(0)
            .policy()
            .map_or(usize::MAX, |p| p.request_body_limit())
            .saturating_add(1);
        ShadowSet {
            body_limit,
            waf,
            sample: section.sample,
            threshold,
            cpu_budget: section.cpu_budget,
            cpu_share: section.cpu_share,
            queue: section.queue,
            ring: section.disagreements,
            source: if !section.rules.is_empty() {
                "rules of its own"
            } else if section.reach().is_some() {
                "the [[rules]], compiled again to reach its paranoia level"
            } else {
                "the [[rules]], shared"
            },
            paranoia_level: section.paranoia_level,
        }
    }

    /// The shadow's rules (one site, whose policy is the shadow's).
    pub fn waf(&self) -> &Waf {
        &self.waf
    }

    /// The fraction of requests sampled.
    pub fn sample(&self) -> f64 {
        self.sample
    }

    /// The CPU budget, as a fraction of one core.
    pub fn cpu_budget(&self) -> f64 {
        self.cpu_budget
    }

    /// Load warnings of the shadow's rules.
    pub fn warnings(&self) -> &[String] {
        self.waf.site_warnings()
    }

    /// One line for `palisade check` and the start.
    pub fn summary(&self) -> String {
        format!(
            "shadow: {} ({} rule(s){}), sample {}, CPU budget {} of a core and {} of the proxy's own CPU time, queue {}",
            self.source,
            self.waf.rule_count()
                + self
                    .waf
                    .sites()
                    .get(0)
                    .policy()
                    .map_or(0, |p| p.rule_count()),
            self.paranoia_level
                .map(|l| format!(", paranoia level {l}"))
                .unwrap_or_default(),
            self.sample,
            self.cpu_budget,
            self.cpu_share,
            self.queue
        )
    }

    /// The shadow for `/status`: its rules and settings.
    pub fn status(&self) -> serde_json::Value {
        serde_json::json!({
            "summary": self.summary(),
            "sha256": self.waf.hash(),
            "sample": self.sample,
            "cpu_budget": self.cpu_budget,
            "cpu_share": self.cpu_share,
            "queue": self.queue,
            "paranoia_level": self.paranoia_level,
        })
    }

    /// Whether this request is in the sample.
    fn sampled(&self) -> bool {
        self.threshold == u64::MAX || (self.threshold > 0 && next_random() < self.threshold)
    }
}

thread_local! {
    static RNG: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// A xorshift64* number from a per-thread state, seeded on first use.
fn next_random() -> u64 {
    RNG.with(|c| {
        let mut x = c.get();
        if x == 0 {
            use std::hash::{BuildHasher, Hasher};
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u64(crate::logs::now_unix_micros() as u64);
            x = h.finish() | 1;
        }
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        c.set(x);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    })
}

/// How a sampled request ended, for `palisade_shadow_requests_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Neither rule set blocked.
    AgreePass,
    /// Both blocked.
    AgreeBlock,
    /// Only the shadow would have blocked.
    ShadowOnly,
    /// Only the primary blocked.
    PrimaryOnly,
    /// Skipped: the shadow's CPU budget was spent.
    SkippedBudget,
    /// Skipped: the shadow's queue was full.
    SkippedQueue,
}

impl Outcome {
    const ALL: [Outcome; 6] = [
        Outcome::AgreePass,
        Outcome::AgreeBlock,
        Outcome::ShadowOnly,
        Outcome::PrimaryOnly,
        Outcome::SkippedBudget,
        Outcome::SkippedQueue,
    ];

    /// The label value.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::AgreePass => "agree_pass",
            Outcome::AgreeBlock => "agree_block",
            Outcome::ShadowOnly => "shadow_only",
            Outcome::PrimaryOnly => "primary_only",
            Outcome::SkippedBudget => "skipped_budget",
            Outcome::SkippedQueue => "skipped_queue",
        }
    }

    /// The outcome of two request-phase verdicts.
    pub fn of(primary_blocked: bool, shadow_blocked: bool) -> Outcome {
        match (primary_blocked, shadow_blocked) {
            (false, false) => Outcome::AgreePass,
            (true, true) => Outcome::AgreeBlock,
            (false, true) => Outcome::ShadowOnly,
            (true, false) => Outcome::PrimaryOnly,
        }
    }
}

/// What one rule set decided in phases 1 and 2.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Side {
    /// Whether it blocked (or, for the shadow, would have).
    pub blocked: bool,
    /// The status of its intervention.
    pub status: Option<u16>,
    /// The ids of the rules that matched, in order, each once.
    pub rules: Vec<i64>,
    /// The inbound anomaly score.
    pub score: i64,
}

impl Side {
    /// The ids of `matches`, each once, in order of first match.
    pub fn rule_ids(matches: impl Iterator<Item = Option<i64>>) -> Vec<i64> {
        let mut out: Vec<i64> = Vec::new();
        for id in matches.flatten() {
            if !out.contains(&id) {
                out.push(id);
            }
        }
        out
    }

    fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "blocked": self.blocked,
            "status": self.status,
            "rules": self.rules,
            "score": self.score,
        })
    }
}

/// A header line's name and value, copied.
type HeaderLine = (Box<[u8]>, Box<[u8]>);

/// A sampled request's head, copied before the primary rules ran.
#[derive(Debug)]
pub struct SampledHead {
    set: Arc<ShadowSet>,
    method: Bytes,
    uri: Bytes,
    protocol: Bytes,
    headers: Vec<HeaderLine>,
    client: SocketAddr,
    peer: Option<SocketAddr>,
    local: SocketAddr,
    site: Arc<str>,
    start_us: i64,
}

/// The primary's side of a sampled request once its phases 1 and 2 decided.
#[derive(Debug)]
pub struct Primary {
    /// The transaction id.
    pub id: String,
    /// Its request-phase verdict and matches.
    pub side: Side,
    /// The request body as buffered; `None` when the shadow must see the head
    /// only (the body was not read, or is under a content coding).
    pub body: Option<Vec<Bytes>>,
}

/// A sampled request on its way to the shadow thread.
struct Job {
    head: SampledHead,
    primary: Primary,
    /// Its body bytes, counted in [`Inner::pending_bytes`].
    bytes: usize,
}

/// Cuts a body's buffers to their first `limit` bytes (the last kept one sliced,
/// not copied); returns the bytes kept.
fn cut_body(body: &mut Vec<Bytes>, limit: usize) -> usize {
    let mut total = 0usize;
    let mut keep = body.len();
    for (i, chunk) in body.iter_mut().enumerate() {
        let room = limit - total;
        if chunk.len() >= room {
            chunk.truncate(room);
            total += room;
            keep = i + 1;
            break;
        }
        total += chunk.len();
    }
    body.truncate(keep);
    total
}

/// One disagreement, as the dashboard and the API show it.
#[derive(Debug, Clone)]
struct Disagreement {
    seq: u64,
    id: String,
    start_us: i64,
    method: String,
    target: String,
    site: Arc<str>,
    client: SocketAddr,
    outcome: Outcome,
    head_only: bool,
    primary: Side,
    shadow: Side,
}

/// The state the shadow thread and the request path share.
#[derive(Debug, Default)]
struct Inner {
    outcomes: [AtomicU64; 6],
    /// Requests shadowed without their body.
    head_only: AtomicU64,
    /// Shadow transactions that failed inside the engine.
    errors: AtomicU64,
    /// The shadow thread's CPU time, in microseconds.
    cpu_us: AtomicU64,
    /// Jobs queued and not yet evaluated.
    pending: AtomicUsize,
    /// The body bytes of the jobs queued and not yet evaluated.
    pending_bytes: AtomicUsize,
    /// Until when (microseconds since `epoch`) the budget is spent: sampled
    /// requests before it are skipped without being copied.
    resume_at_us: AtomicU64,
    epoch: OnceLock<Instant>,
    /// The last disagreements, newest last, and the number of the next.
    ring: Mutex<(VecDeque<Disagreement>, u64)>,
    /// Per rule: disagreements in which it matched on the blocking side only
    /// (`[shadow_only, primary_only]`).
    rules: Mutex<HashMap<i64, [u64; 2]>>,
}

impl Inner {
    fn count(&self, o: Outcome) {
        self.outcomes[o as usize].fetch_add(1, Ordering::Relaxed);
    }

    fn epoch(&self) -> Instant {
        *self.epoch.get_or_init(Instant::now)
    }

    fn since_epoch_us(&self, t: Instant) -> u64 {
        u64::try_from(t.saturating_duration_since(self.epoch()).as_micros()).unwrap_or(u64::MAX)
    }
}

/// The process's shadow runner: its thread (started with the first sampled
/// request), counters and disagreements. It outlives reloads.
#[derive(Debug, Default)]
pub struct Shadow {
    inner: Arc<Inner>,
    sender: OnceLock<Option<mpsc::Sender<Job>>>,
}

impl Shadow {
    /// Samples a request of the rules `waf`: `None` when there is no shadow, the
    /// request is not in the sample, or the budget is spent (counted). Otherwise
    /// its head is copied for the shadow.
    #[allow(clippy::too_many_arguments)]
    pub fn sample<'h>(
        &self,
        waf: &Waf,
        method: &Bytes,
        uri: &Bytes,
        protocol: &Bytes,
        headers: impl Iterator<Item = (&'h [u8], &'h [u8])>,
        conn: &crate::exchange::ConnInfo,
        site: &Arc<str>,
        start_us: i64,
    ) -> Option<SampledHead> {
        let set = waf.shadow()?;
        if !set.sampled() {
            return None;
        }
        let inner = &self.inner;
        let resume = inner.resume_at_us.load(Ordering::Relaxed);
        if resume > 0 && inner.since_epoch_us(Instant::now()) < resume {
            inner.count(Outcome::SkippedBudget);
            return None;
        }
        Some(SampledHead {
            set: set.clone(),
            method: method.clone(),
            uri: uri.clone(),
            protocol: protocol.clone(),
            headers: headers.map(|(n, v)| (n.into(), v.into())).collect(),
            client: conn.client,
            peer: conn.peer_if_other(),
            local: conn.local,
            site: site.clone(),
            start_us,
        })
    }

    /// Hands a sampled request and the primary's verdict to the shadow thread;
    /// never waits (a full queue: counted as skipped).
    pub fn submit(&self, head: SampledHead, mut primary: Primary) {
        let inner = &self.inner;
        let bytes = primary
            .body
            .as_mut()
            .map_or(0, |b| cut_body(b, head.set.body_limit));
        let bound = head.set.queue;
        let queued = inner.pending.fetch_add(1, Ordering::AcqRel);
        let queued_bytes = inner.pending_bytes.fetch_add(bytes, Ordering::AcqRel);
        let room = queued < bound && queued_bytes.saturating_add(bytes) <= MAX_QUEUED_BODY_BYTES;
        let sent = room
            && self.sender().is_some_and(|s| {
                s.send(Job {
                    head,
                    primary,
                    bytes,
                })
                .is_ok()
            });
        if !sent {
            inner.pending.fetch_sub(1, Ordering::AcqRel);
            inner.pending_bytes.fetch_sub(bytes, Ordering::AcqRel);
            inner.count(Outcome::SkippedQueue);
        }
    }

    /// The channel to the shadow thread, started on first use (`None` when the
    /// thread could not be started: every sampled request is then skipped).
    fn sender(&self) -> Option<&mpsc::Sender<Job>> {
        self.sender
            .get_or_init(|| {
                let (tx, rx) = mpsc::channel::<Job>();
                let inner = self.inner.clone();
                match std::thread::Builder::new()
                    .name("palisade-shadow".into())
                    .spawn(move || run(&inner, &rx))
                {
                    Ok(_) => Some(tx),
                    Err(e) => {
                        tracing::error!(
                            "starting the shadow thread: {e}; shadow requests are skipped"
                        );
                        None
                    }
                }
            })
            .as_ref()
    }

    /// The count of one outcome.
    pub fn outcome_count(&self, o: Outcome) -> u64 {
        self.inner.outcomes[o as usize].load(Ordering::Relaxed)
    }

    /// The shadow's section of the dashboard snapshot and `/dashboard/api/snapshot`:
    /// its settings (`set`, the shadow in force), counters, the rules that
    /// disagree most and the last disagreements, newest first.
    pub fn snapshot(&self, set: Option<&Arc<ShadowSet>>) -> serde_json::Value {
        let inner = &self.inner;
        let outcomes: serde_json::Map<String, serde_json::Value> = Outcome::ALL
            .iter()
            .map(|o| (o.label().to_owned(), self.outcome_count(*o).into()))
            .collect();
        let mut rules: Vec<(i64, [u64; 2])> = inner
            .rules
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(k, v)| (*k, *v))
            .collect();
        rules.sort_by(|a, b| {
            (b.1[0] + b.1[1])
                .cmp(&(a.1[0] + a.1[1]))
                .then(a.0.cmp(&b.0))
        });
        rules.truncate(TOP_RULES);
        let recent: Vec<serde_json::Value> = inner
            .ring
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .0
            .iter()
            .rev()
            .map(|d| {
                serde_json::json!({
                    "seq": d.seq,
                    "id": d.id,
                    "time": crate::logs::rfc3339_micros(d.start_us),
                    "method": d.method,
                    "target": d.target,
                    "site": d.site.as_ref(),
                    "client": d.client.ip().to_string(),
                    "outcome": d.outcome.label(),
                    "head_only": d.head_only,
                    "primary": d.primary.json(),
                    "shadow": d.shadow.json(),
                })
            })
            .collect();
        serde_json::json!({
            "enabled": set.is_some(),
            "sample": set.map(|s| s.sample),
            "cpu_budget": set.map(|s| s.cpu_budget),
            "cpu_share": set.map(|s| s.cpu_share),
            "outcomes": outcomes,
            "head_only": inner.head_only.load(Ordering::Relaxed),
            "errors": inner.errors.load(Ordering::Relaxed),
            "cpu_seconds": inner.cpu_us.load(Ordering::Relaxed) as f64 / 1e6,
            "queued": inner.pending.load(Ordering::Relaxed),
            "rules": rules
                .iter()
                .map(|(id, [s, p])| serde_json::json!({"rule": id, "shadow_only": s, "primary_only": p}))
                .collect::<Vec<_>>(),
            "disagreements": recent,
        })
    }
}

impl Collector for Shadow {
    fn collect(&self, out: &mut Exposition) {
        let inner = &self.inner;
        let name = "palisade_shadow_requests_total";
        out.family(
            name,
            "counter",
            "Requests sampled for the shadow rule set, by how its request-phase verdict compared with the blocking rules' (or why it was skipped).",
        );
        for o in Outcome::ALL {
            out.sample(
                name,
                &[("outcome", o.label())],
                self.outcome_count(o) as f64,
            );
        }
        out.counter(
            "palisade_shadow_cpu_seconds_total",
            "CPU time the shadow rule set used (its own thread's clock).",
            inner.cpu_us.load(Ordering::Relaxed) as f64 / 1e6,
        );
        out.counter(
            "palisade_shadow_head_only_total",
            "Sampled requests the shadow saw without their body (blocked in phase 1, or under a content coding).",
            inner.head_only.load(Ordering::Relaxed) as f64,
        );
        out.counter(
            "palisade_shadow_errors_total",
            "Shadow transactions that failed inside the engine (not compared).",
            inner.errors.load(Ordering::Relaxed) as f64,
        );
        out.gauge(
            "palisade_shadow_queue_depth",
            "Sampled requests waiting for the shadow thread.",
            inner.pending.load(Ordering::Relaxed) as f64,
        );
    }
}

/// A token bucket of CPU time, in seconds.
#[derive(Debug)]
struct Bucket {
    tokens: f64,
}

impl Bucket {
    /// Adds `amount`, up to `cap`.
    fn earn(&mut self, amount: f64, cap: f64) {
        self.tokens = (self.tokens + amount).min(cap);
    }

    /// Whether an evaluation may start.
    fn open(&self) -> bool {
        self.tokens > 0.0
    }

    /// Takes an evaluation's CPU time; returns how far the bucket is overdrawn.
    fn spend(&mut self, cpu: Duration) {
        self.tokens -= cpu.as_secs_f64();
    }
}

/// The CPU time this process has used so far, every thread together.
fn process_cpu_time() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

/// The shadow's two CPU budgets: `cpu_budget`, a fraction of one core (a bucket
/// filled with wall time), and `cpu_share`, a fraction of the CPU time the rest of
/// the process uses (a bucket filled with that time). Each holds at most a
/// second's worth; an evaluation starts while both hold some.
#[derive(Debug)]
struct Budgets {
    core: Bucket,
    share: Bucket,
    /// When the buckets were last filled.
    at: Instant,
    /// The process's and the shadow thread's CPU time then.
    process: Duration,
    own: Duration,
    /// The rest of the process's CPU use over the last interval, in cores.
    load: f64,
}

impl Budgets {
    fn new(now: Instant, set: &ShadowSet) -> Budgets {
        Budgets {
            core: Bucket {
                tokens: set.cpu_budget * BURST_SECONDS,
            },
            share: Bucket {
                tokens: set.cpu_share * BURST_SECONDS,
            },
            at: now,
            process: process_cpu_time(),
            own: crate::inspect::thread_cpu_time(),
            load: 0.0,
        }
    }

    /// Fills the buckets for the time since the last call: `dt` of wall time,
    /// and `others` of CPU time used by the rest of the process.
    fn fill(&mut self, set: &ShadowSet, dt: f64, others: f64) -> bool {
        self.core
            .earn(dt * set.cpu_budget, set.cpu_budget * BURST_SECONDS);
        self.share
            .earn(others * set.cpu_share, set.cpu_share * BURST_SECONDS);
        if dt > 0.0 {
            self.load = others / dt;
        }
        self.core.open() && self.share.open()
    }

    /// Fills the buckets from the clocks now; whether an evaluation may start.
    fn refill(&mut self, now: Instant, set: &ShadowSet) -> bool {
        let (process, own) = (process_cpu_time(), crate::inspect::thread_cpu_time());
        let others = process.saturating_sub(self.process).as_secs_f64()
            - own.saturating_sub(self.own).as_secs_f64();
        let dt = now.saturating_duration_since(self.at).as_secs_f64();
        (self.at, self.process, self.own) = (now, process, own);
        self.fill(set, dt, others.max(0.0))
    }

    /// Takes an evaluation's CPU time from both; when that leaves one empty, about
    /// how long until both hold some again ([`Budgets::wait`]).
    fn spend(&mut self, cpu: Duration, set: &ShadowSet) -> Option<Duration> {
        self.core.spend(cpu);
        self.share.spend(cpu);
        self.wait(set)
    }

    /// When a bucket is empty, about how long until both hold some again (the
    /// share's at the load last measured; at most a minute, after which the
    /// shadow thread looks again).
    fn wait(&self, set: &ShadowSet) -> Option<Duration> {
        let core = (-self.core.tokens).max(0.0) / set.cpu_budget;
        let share = (-self.share.tokens).max(0.0) / (set.cpu_share * self.load.max(0.01));
        let wait = core.max(share);
        (!self.core.open() || !self.share.open())
            .then(|| Duration::from_secs_f64(wait.min(60.0) + 1e-6))
    }
}

/// The shadow thread: takes jobs until the runner is dropped.
fn run(inner: &Inner, rx: &mpsc::Receiver<Job>) {
    // Linux keeps a niceness per thread: this lowers only this one.
    if let Err(e) = rustix::process::setpriority_process(None, SHADOW_NICE) {
        tracing::debug!("lowering the shadow thread's priority: {e}");
    }
    let mut budgets: Option<Budgets> = None;
    while let Ok(job) = rx.recv() {
        let set = job.head.set.clone();
        let now = Instant::now();
        let b = budgets.get_or_insert_with(|| Budgets::new(now, &set));
        let allowed = b.refill(now, &set);
        let (shadow, spent) = if allowed {
            // The engine's own panics are caught by its wrapper; this catches the
            // rest, so that the thread outlives a bad request.
            crate::inspect::measured(crate::inspect::Measure::Cpu, || {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| evaluate(&job)))
                    .ok()
                    .flatten()
            })
        } else {
            (None, crate::inspect::Spent::default())
        };
        inner.pending.fetch_sub(1, Ordering::AcqRel);
        inner.pending_bytes.fetch_sub(job.bytes, Ordering::AcqRel);
        if !allowed {
            inner.count(Outcome::SkippedBudget);
            // Requests sampled until the buckets hold some again are skipped on
            // their path, before anything is copied.
            if let Some(wait) = b.wait(&set) {
                let at = inner.since_epoch_us(now + wait);
                inner.resume_at_us.store(at.max(1), Ordering::Relaxed);
            }
            continue;
        }
        inner.cpu_us.fetch_add(
            u64::try_from(spent.cpu.unwrap_or_default().as_micros()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        if let Some(wait) = b.spend(spent.cpu.unwrap_or_default(), &set) {
            let at = inner.since_epoch_us(Instant::now() + wait);
            inner.resume_at_us.store(at.max(1), Ordering::Relaxed);
        }
        match shadow {
            Some(side) => record(inner, job, side),
            None => {
                inner.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Runs the shadow's phases 1 and 2 over a sampled request; `None` when the
/// engine failed.
fn evaluate(job: &Job) -> Option<Side> {
    let h = &job.head;
    let waf = h.set.waf();
    let mut tx = waf.transaction(
        h.client,
        h.peer,
        h.local,
        job.primary.id.clone(),
        h.start_us,
        None,
        None,
    );
    tx.request_line(&h.method, &h.uri, &h.protocol);
    for (n, v) in &h.headers {
        tx.request_header(n, v);
    }
    let mut verdict = tx.request_headers_done();
    if verdict.is_none() {
        let mut refused = false;
        if let Some(body) = &job.primary.body {
            for chunk in body {
                if !tx.wants_request_body() {
                    break;
                }
                match tx.request_body(chunk) {
                    BodyFeed::Ok => {}
                    BodyFeed::LimitPartial => break,
                    BodyFeed::LimitReject => {
                        refused = true;
                        break;
                    }
                }
            }
        }
        verdict = if refused {
            Some(crate::waf::Verdict {
                status: 413,
                kind: crate::waf::VerdictKind::Deny,
                rule_id: None,
            })
        } else {
            tx.request_body_done()
        };
    }
    if tx.failure().is_some() {
        return None;
    }
    let mut ids = Vec::new();
    while let Some(e) = tx.poll_event() {
        if let engine::Event::RuleMatched(m) = e {
            ids.push(m.rule_id);
        }
    }
    Some(Side {
        blocked: verdict.is_some(),
        status: verdict.map(|v| v.status),
        rules: Side::rule_ids(ids.into_iter()),
        score: tx.anomaly_scores().0,
    })
}

/// Counts a compared request, and keeps it when the two disagree.
fn record(inner: &Inner, job: Job, shadow: Side) {
    let Job { head, primary, .. } = job;
    let head_only = primary.body.is_none();
    if head_only {
        inner.head_only.fetch_add(1, Ordering::Relaxed);
    }
    let outcome = Outcome::of(primary.side.blocked, shadow.blocked);
    inner.count(outcome);
    let (blocker, other, slot) = match outcome {
        Outcome::ShadowOnly => (&shadow, &primary.side, 0),
        Outcome::PrimaryOnly => (&primary.side, &shadow, 1),
        _ => return,
    };
    {
        let mut rules = inner.rules.lock().unwrap_or_else(|e| e.into_inner());
        for id in blocker.rules.iter().filter(|id| !other.rules.contains(id)) {
            if let Some(c) = rules.get_mut(id) {
                c[slot] += 1;
            } else if rules.len() < MAX_RULES {
                let mut c = [0; 2];
                c[slot] = 1;
                rules.insert(*id, c);
            }
        }
    }
    let mut ring = inner.ring.lock().unwrap_or_else(|e| e.into_inner());
    let seq = ring.1;
    ring.1 += 1;
    ring.0.push_back(Disagreement {
        seq,
        id: primary.id,
        start_us: head.start_us,
        method: String::from_utf8_lossy(&head.method).into_owned(),
        target: String::from_utf8_lossy(&head.uri).into_owned(),
        site: head.site,
        client: head.client,
        outcome,
        head_only,
        primary: primary.side,
        shadow,
    });
    while ring.0.len() > head.set.ring {
        ring.0.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn section(text: &str) -> ShadowSection {
        toml::from_str(text).unwrap()
    }

    fn set(primary: &str, shadow: &str) -> Arc<ShadowSet> {
        let rules = |t: &str| {
            vec![crate::config::RuleSource {
                file: None,
                inline: Some(t.to_owned()),
            }]
        };
        let mut s = section("sample = 1.0\nqueue = 4\ndisagreements = 2");
        s.rules = rules(shadow);
        let waf = Waf::load(
            &rules(primary),
            Path::new("/p.toml"),
            &Default::default(),
            None,
        )
        .unwrap()
        .with_shadow(Some(&s), &[], Path::new("/p.toml"), &Default::default())
        .unwrap();
        waf.shadow().unwrap().clone()
    }

    fn head(set: &Arc<ShadowSet>, uri: &'static str) -> SampledHead {
        SampledHead {
            set: set.clone(),
            method: Bytes::from_static(b"GET"),
            uri: Bytes::from_static(uri.as_bytes()),
            protocol: Bytes::from_static(b"HTTP/1.1"),
            headers: vec![(b"Host".as_slice().into(), b"x".as_slice().into())],
            client: "10.0.0.1:1000".parse().unwrap(),
            peer: None,
            local: "127.0.0.1:80".parse().unwrap(),
            site: "default".into(),
            start_us: 1_700_000_000_000_000,
        }
    }

    const RULES: &str = "SecRuleEngine DetectionOnly\nSecRule ARGS \"@contains evil\" \"id:10,phase:1,deny,status:403,log\"";
    const SHADOW: &str = "SecRule ARGS \"@contains evil\" \"id:10,phase:1,deny,status:403,log\"\nSecRule ARGS \"@contains odd\" \"id:20,phase:2,deny,status:403,log\"";

    #[test]
    fn outcomes_of_two_verdicts() {
        assert_eq!(Outcome::of(false, false), Outcome::AgreePass);
        assert_eq!(Outcome::of(true, true), Outcome::AgreeBlock);
        assert_eq!(Outcome::of(false, true), Outcome::ShadowOnly);
        assert_eq!(Outcome::of(true, false), Outcome::PrimaryOnly);
        assert_eq!(
            Side::rule_ids([Some(3), None, Some(1), Some(3)].into_iter()),
            vec![3, 1]
        );
    }

    /// The shadow runs as if its engine were On (its own rules say
    /// DetectionOnly here), in phase 2 too, and reports the rules that matched.
    #[test]
    fn the_shadow_reports_what_it_would_do() {
        let s = set(RULES, &format!("SecRuleEngine DetectionOnly\n{SHADOW}"));
        let job = |uri| Job {
            head: head(&s, uri),
            primary: Primary {
                id: "x".into(),
                side: Side::default(),
                body: Some(Vec::new()),
            },
            bytes: 0,
        };
        let odd = evaluate(&job("/?q=odd")).unwrap();
        assert!(odd.blocked);
        assert_eq!(odd.status, Some(403));
        assert_eq!(odd.rules, vec![20]);
        let plain = evaluate(&job("/?q=fine")).unwrap();
        assert_eq!(plain, Side::default());
    }

    #[test]
    fn disagreements_are_counted_kept_and_bounded() {
        let s = set(RULES, SHADOW);
        let inner = Inner::default();
        let mut ids = 0;
        let mut go = |uri, primary_blocked: bool, primary_rules: Vec<i64>| {
            ids += 1;
            let job = Job {
                head: head(&s, uri),
                primary: Primary {
                    id: format!("id{ids}"),
                    side: Side {
                        blocked: primary_blocked,
                        status: primary_blocked.then_some(403),
                        rules: primary_rules,
                        score: 0,
                    },
                    body: None,
                },
                bytes: 0,
            };
            let side = evaluate(&job).unwrap();
            record(&inner, job, side);
        };
        go("/?a=evil", true, vec![10]);
        go("/?a=fine", false, vec![]);
        go("/?a=odd", false, vec![]);
        go("/?a=odd&b=1", false, vec![]);
        go("/?a=fine", true, vec![99]);
        let n = |o: Outcome| inner.outcomes[o as usize].load(Ordering::Relaxed);
        assert_eq!(n(Outcome::AgreeBlock), 1);
        assert_eq!(n(Outcome::AgreePass), 1);
        assert_eq!(n(Outcome::ShadowOnly), 2);
        assert_eq!(n(Outcome::PrimaryOnly), 1);
        assert_eq!(inner.head_only.load(Ordering::Relaxed), 5);
        let ring = inner.ring.lock().unwrap();
        // Three disagreements, two kept: the newest.
        assert_eq!(ring.0.len(), 2);
        assert_eq!(ring.0[0].target, "/?a=odd&b=1");
        assert_eq!(ring.0[1].outcome, Outcome::PrimaryOnly);
        assert_eq!(ring.0[1].primary.rules, vec![99]);
        assert_eq!(ring.1, 3);
        let rules = inner.rules.lock().unwrap();
        assert_eq!(rules[&20], [2, 0]);
        assert_eq!(rules[&99], [0, 1]);
        assert!(!rules.contains_key(&10));
    }

    #[test]
    fn bodies_are_cut_to_the_shadows_limit() {
        let chunks = || {
            vec![
                Bytes::from_static(b"abcd"),
                Bytes::from_static(b"efgh"),
                Bytes::from_static(b"ijkl"),
            ]
        };
        let mut b = chunks();
        assert_eq!(cut_body(&mut b, 6), 6);
        assert_eq!(
            b,
            vec![Bytes::from_static(b"abcd"), Bytes::from_static(b"ef")]
        );
        let mut b = chunks();
        assert_eq!(cut_body(&mut b, 8), 8);
        assert_eq!(b.len(), 2);
        let mut b = chunks();
        assert_eq!(cut_body(&mut b, usize::MAX), 12);
        assert_eq!(b.len(), 3);
        let mut b = chunks();
        assert_eq!(cut_body(&mut b, 0), 0);
        assert!(b.iter().all(Bytes::is_empty));
    }

    #[test]
    fn the_budgets_allow_their_rates() {
        let mut sec = section("sample = 1.0\ncpu_budget = 0.1\ncpu_share = 0.5");
        sec.rules = Vec::new();
        let waf = Waf::load(&[], Path::new("/p.toml"), &Default::default(), None)
            .unwrap()
            .with_shadow(Some(&sec), &[], Path::new("/p.toml"), &Default::default())
            .unwrap();
        let set = waf.shadow().unwrap().clone();
        let mut b = Budgets::new(Instant::now(), &set);
        b.load = 0.0;
        // Full: 100 ms of one core, 500 ms of share.
        assert!(b.fill(&set, 0.0, 0.0));
        assert_eq!(b.spend(Duration::from_millis(60), &set), None);
        assert!(b.fill(&set, 0.0, 0.0));
        // The core budget overdrawn by 20 ms: 200 ms at 0.1 to refill.
        let wait = b.spend(Duration::from_millis(60), &set).unwrap();
        assert!((wait.as_secs_f64() - 0.2).abs() < 0.001, "{wait:?}");
        assert!(!b.fill(&set, 0.1, 1.0));
        assert!(b.fill(&set, 0.11, 1.0));
        // Never more than a second's worth, however long idle.
        b.fill(&set, 3600.0, 3600.0);
        assert!((b.core.tokens - 0.1).abs() < 1e-9);
        assert!((b.share.tokens - 0.5).abs() < 1e-9);
        // The share: the rest of the process used 0.2 s of CPU in 1 s (a load of
        // 0.2 cores); 0.6 s spent from 0.5 leaves 0.1 s to earn at 0.5 x 0.2.
        assert!(b.fill(&set, 1.0, 0.2));
        b.core.tokens = 10.0;
        let wait = b.spend(Duration::from_millis(600), &set).unwrap();
        assert!((wait.as_secs_f64() - 1.0).abs() < 0.001, "{wait:?}");
        assert!(!b.fill(&set, 0.5, 0.1));
        assert!(b.fill(&set, 0.6, 0.12));
        assert!(b.core.open());
    }

    #[test]
    fn sampling_follows_the_fraction() {
        let s = |f: f64| {
            let mut sec = section(&format!("sample = {f}"));
            sec.rules = Vec::new();
            let waf = Waf::load(&[], Path::new("/p.toml"), &Default::default(), None)
                .unwrap()
                .with_shadow(Some(&sec), &[], Path::new("/p.toml"), &Default::default())
                .unwrap();
            waf.shadow().unwrap().clone()
        };
        let (none, all, tenth) = (s(0.0), s(1.0), s(0.1));
        assert!((0..1000).all(|_| !none.sampled()));
        assert!((0..1000).all(|_| all.sampled()));
        let hits = (0..100_000).filter(|_| tenth.sampled()).count();
        assert!((9_000..11_000).contains(&hits), "{hits}");
    }

    #[test]
    fn the_queue_bound_skips_and_counts() {
        let s = set(RULES, SHADOW);
        let shadow = Shadow::default();
        // No thread yet: jobs over the bound (4) are refused before any is sent.
        shadow.inner.pending.store(4, Ordering::Relaxed);
        shadow.submit(
            head(&s, "/"),
            Primary {
                id: "a".into(),
                side: Side::default(),
                body: None,
            },
        );
        assert_eq!(shadow.outcome_count(Outcome::SkippedQueue), 1);
        assert_eq!(shadow.inner.pending.load(Ordering::Relaxed), 4);
        let mut out = Exposition::default();
        shadow.collect(&mut out);
        let text = out.into_text();
        assert!(
            text.contains("palisade_shadow_requests_total{outcome=\"skipped_queue\"} 1"),
            "{text}"
        );
        let doc = shadow.snapshot(Some(&s));
        assert_eq!(doc["outcomes"]["skipped_queue"], 1);
        assert_eq!(doc["enabled"], true);
    }
}
