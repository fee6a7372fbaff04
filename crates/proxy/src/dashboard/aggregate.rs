//! The dashboard's aggregator: one task that subscribes to the request summaries
//! and keeps what the dashboard shows — counters, a per-second rate, latency
//! histograms per phase, bounded top-N tables, and a ring of recent blocked or
//! detected requests. It runs only when the dashboard is on; the request path pays
//! nothing beyond the broadcast send it already makes.

use crate::summary::{RequestSummary, Subscription};
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use tokio::sync::{Notify, watch};

/// Upper bounds of the latency histogram buckets, in microseconds (a last bucket
/// holds everything above).
pub const BUCKETS_US: [u64; 12] = [
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000,
];

/// How many recent blocked or detected requests the explorer keeps.
pub const RECENT: usize = 200;

/// How many seconds of request rate are kept.
pub const RATE_SECONDS: usize = 60;

/// The most distinct keys a top-N table tracks; past it, the smallest eighth is
/// evicted at once and a newcomer starts from the largest count evicted (as in the
/// Space-Saving algorithm, so a count may be over by at most that much). Evicting
/// an eighth at a time keeps a stream of new keys (varied paths) from scanning
/// the table for each one.
pub const TOP_KEYS: usize = 512;

/// How many rows of each top table a snapshot shows.
pub const TOP_SHOWN: usize = 10;

/// The longest path or value kept, in bytes.
const KEY_MAX: usize = 256;

/// How many minutes of readiness counts are kept per site.
pub const READINESS_MINUTES: usize = 60;

/// The most sites whose readiness is tracked (sites come from the configuration;
/// past the bound, a new site's requests are not tracked).
pub const READINESS_SITES: usize = 256;

/// The latency histograms: the five phases, then the whole request.
const HISTOGRAMS: [&str; 6] = ["phase1", "phase2", "phase3", "phase4", "phase5", "total"];

/// A bounded table of counts.
#[derive(Debug, Default)]
struct Top {
    counts: HashMap<String, (u64, u64)>,
    /// The largest count evicted so far: where a newcomer starts.
    floor: u64,
}

impl Top {
    /// Counts one more for `key` (and one more block when `blocked`).
    fn add(&mut self, key: &str, blocked: bool) {
        if let Some(c) = self.counts.get_mut(key) {
            c.0 += 1;
            c.1 += u64::from(blocked);
            return;
        }
        if self.counts.len() >= TOP_KEYS {
            let mut counts: Vec<u64> = self.counts.values().map(|c| c.0).collect();
            let (_, cut, _) = counts.select_nth_unstable(TOP_KEYS / 8);
            let cut = *cut;
            self.counts.retain(|_, c| c.0 > cut);
            self.floor = self.floor.max(cut);
        }
        let key = crate::summary::cut(key.to_owned(), KEY_MAX);
        self.counts
            .insert(key, (self.floor + 1, u64::from(blocked)));
    }

    /// The `n` largest, largest first (ties by key).
    fn top(&self, n: usize) -> Vec<serde_json::Value> {
        let mut v: Vec<_> = self.counts.iter().collect();
        v.sort_by(|a, b| b.1.0.cmp(&a.1.0).then_with(|| a.0.cmp(b.0)));
        v.into_iter()
            .take(n)
            .map(|(k, c)| serde_json::json!({ "key": k, "count": c.0, "blocked": c.1 }))
            .collect()
    }
}

/// One second of traffic.
#[derive(Debug, Clone, Copy, Default)]
struct Second {
    at: i64,
    requests: u64,
    blocked: u64,
}

/// One minute of a site's traffic, for its readiness to block.
#[derive(Debug, Clone, Copy, Default)]
struct Minute {
    /// The minute's start, Unix seconds / 60.
    at: i64,
    requests: u64,
    would_block: u64,
}

/// A site's readiness counts: requests and would-blocks per minute, and what
/// caused the would-blocks.
#[derive(Debug, Default)]
struct SiteReadiness {
    minutes: VecDeque<Minute>,
    rules: Top,
    paths: Top,
    clients: Top,
}

/// The readiness criterion's thresholds (`[admin] readiness_min_requests`,
/// `readiness_max_rate`).
#[derive(Debug, Clone, Copy)]
pub struct ReadinessCriterion {
    /// The fewest requests in the window before a verdict is given.
    pub min_requests: u64,
    /// The highest would-block rate (0 to 1) a ready site may have.
    pub max_rate: f64,
}

impl Default for ReadinessCriterion {
    fn default() -> Self {
        ReadinessCriterion {
            min_requests: 1000,
            max_rate: 0.001,
        }
    }
}

/// What the aggregator has gathered.
#[derive(Debug)]
struct State {
    requests: u64,
    blocked: u64,
    detected: u64,
    seconds: VecDeque<Second>,
    histograms: [[u64; BUCKETS_US.len() + 1]; HISTOGRAMS.len()],
    rules: Top,
    clients: Top,
    paths: Top,
    sites: Top,
    recent: VecDeque<(u64, serde_json::Value)>,
    seq: u64,
    readiness: HashMap<std::sync::Arc<str>, SiteReadiness>,
}

impl Default for State {
    fn default() -> Self {
        State {
            requests: 0,
            blocked: 0,
            detected: 0,
            seconds: VecDeque::with_capacity(RATE_SECONDS),
            histograms: [[0; BUCKETS_US.len() + 1]; HISTOGRAMS.len()],
            rules: Top::default(),
            clients: Top::default(),
            paths: Top::default(),
            sites: Top::default(),
            recent: VecDeque::with_capacity(RECENT),
            seq: 0,
            readiness: HashMap::new(),
        }
    }
}

/// The dashboard's aggregate of the summary stream, shared by the aggregator task
/// and the dashboard's requests.
#[derive(Debug, Default)]
pub struct Aggregate {
    state: Mutex<State>,
    /// Woken when a request joins the explorer.
    pub new_recent: Notify,
    criterion: ReadinessCriterion,
}

/// The bucket index of `us`.
fn bucket(us: u64) -> usize {
    BUCKETS_US
        .iter()
        .position(|b| us <= *b)
        .unwrap_or(BUCKETS_US.len())
}

/// The current Unix time in seconds.
fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// True for a match of one of CRS's evaluation or correlation rules (tag
/// `anomaly-evaluation`, ids 949xxx, 959xxx, 980xxx): they decide on the
/// scores the other rules added, so they are not a cause of their own.
fn is_evaluation(m: &engine::RuleMatch) -> bool {
    m.tags.iter().any(|t| t == "anomaly-evaluation")
        || m.rule_id.is_some_and(|id| {
            (949_000..950_000).contains(&id)
                || (959_000..960_000).contains(&id)
                || (980_000..981_000).contains(&id)
        })
}

/// Whether a request that was not blocked would have been with the rule engine
/// `On`: with anomaly scores (CRS), when an evaluation rule matched (949110
/// and 959100 match, and are logged, in DetectionOnly as well); without scores,
/// when any rule matched (an over-count for rules that only log).
pub fn would_block(s: &RequestSummary) -> bool {
    if s.blocked() || s.matches.is_empty() {
        return false;
    }
    if s.anomaly == (0, 0) {
        return true;
    }
    s.matches.iter().any(is_evaluation)
}

impl Aggregate {
    /// An aggregate whose readiness verdicts follow `criterion`.
    pub fn new(criterion: ReadinessCriterion) -> Aggregate {
        Aggregate {
            criterion,
            ..Aggregate::default()
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reads summaries until the broadcast closes or shutdown begins.
    pub async fn run(&self, mut sub: Subscription, mut shutdown: watch::Receiver<bool>) {
        loop {
            tokio::select! {
                s = sub.recv() => match s {
                    Some(s) => self.add(&s, now_secs()),
                    None => return,
                },
                () = crate::runtime::stopped(&mut shutdown) => return,
            }
        }
    }

    /// Counts one summary, finished at Unix second `now`.
    pub fn add(&self, s: &RequestSummary, now: i64) {
        let blocked = s.blocked();
        let detected = !blocked && !s.matches.is_empty();
        let mut st = self.state();
        st.requests += 1;
        st.blocked += u64::from(blocked);
        st.detected += u64::from(detected);
        match st.seconds.back_mut() {
            Some(sec) if sec.at == now => {
                sec.requests += 1;
                sec.blocked += u64::from(blocked);
            }
            _ => {
                if st.seconds.len() >= RATE_SECONDS {
                    st.seconds.pop_front();
                }
                st.seconds.push_back(Second {
                    at: now,
                    requests: 1,
                    blocked: u64::from(blocked),
                });
            }
        }
        for (i, us) in s.phase_us.iter().enumerate() {
            if let Some(us) = us {
                st.histograms[i][bucket(*us)] += 1;
            }
        }
        st.histograms[5][bucket(s.total_us)] += 1;
        let mut seen = Vec::new();
        for id in s.rule_ids() {
            if !seen.contains(&id) {
                seen.push(id);
                st.rules.add(&id.to_string(), blocked);
            }
        }
        st.clients.add(&s.client.ip().to_string(), blocked);
        let path = s.uri.split('?').next().unwrap_or_default();
        st.paths.add(path, blocked);
        st.sites.add(&s.site, blocked);
        add_readiness(&mut st, s, path, now);
        if blocked || detected {
            st.seq += 1;
            let seq = st.seq;
            if st.recent.len() >= RECENT {
                st.recent.pop_front();
            }
            st.recent.push_back((seq, explorer_entry(seq, s, blocked)));
            drop(st);
            self.new_recent.notify_waiters();
        }
    }

    /// The counters, rate, histograms and top tables.
    pub fn snapshot(&self) -> serde_json::Value {
        let st = self.state();
        let now = now_secs();
        let rate: Vec<_> = (0..RATE_SECONDS as i64)
            .rev()
            .map(|ago| {
                let at = now - ago;
                let sec = st.seconds.iter().find(|s| s.at == at).copied();
                serde_json::json!({
                    "t": at,
                    "requests": sec.map_or(0, |s| s.requests),
                    "blocked": sec.map_or(0, |s| s.blocked),
                })
            })
            .collect();
        let histograms: serde_json::Map<String, serde_json::Value> = HISTOGRAMS
            .iter()
            .zip(st.histograms.iter())
            .map(|(name, counts)| ((*name).to_owned(), serde_json::json!(counts.to_vec())))
            .collect();
        serde_json::json!({
            "requests": st.requests,
            "blocked": st.blocked,
            "detected": st.detected,
            "rate": rate,
            "buckets_us": BUCKETS_US,
            "histograms": histograms,
            "top": {
                "rules": st.rules.top(TOP_SHOWN),
                "clients": st.clients.top(TOP_SHOWN),
                "paths": st.paths.top(TOP_SHOWN),
                "sites": st.sites.top(TOP_SHOWN),
            },
            "last_seq": st.seq,
        })
    }

    /// The readiness to block of each site in `sites` (those in DetectionOnly),
    /// in that order, as of Unix second `now`: its per-minute series, top causes
    /// and verdict.
    pub fn readiness(&self, sites: &[std::sync::Arc<str>], now: i64) -> serde_json::Value {
        let st = self.state();
        let empty = SiteReadiness::default();
        let minute = now.div_euclid(60);
        let list: Vec<_> = sites
            .iter()
            .map(|name| {
                let r = st.readiness.get(name).unwrap_or(&empty);
                let series: Vec<_> = (0..READINESS_MINUTES as i64)
                    .rev()
                    .map(|ago| {
                        let at = minute - ago;
                        let m = r.minutes.iter().find(|m| m.at == at).copied();
                        serde_json::json!({
                            "t": at * 60,
                            "requests": m.map_or(0, |m| m.requests),
                            "would_block": m.map_or(0, |m| m.would_block),
                        })
                    })
                    .collect();
                let window = |m: &&Minute| m.at > minute - READINESS_MINUTES as i64;
                let requests: u64 = r.minutes.iter().filter(window).map(|m| m.requests).sum();
                let would_block: u64 = r.minutes.iter().filter(window).map(|m| m.would_block).sum();
                let rules = r.rules.top(TOP_SHOWN);
                let (verdict, reason) = verdict(&self.criterion, requests, would_block, &rules);
                serde_json::json!({
                    "site": &**name,
                    "requests": requests,
                    "would_block": would_block,
                    "rate": rate(requests, would_block),
                    "series": series,
                    "top_rules": rules,
                    "top_paths": r.paths.top(TOP_SHOWN),
                    "top_clients": r.clients.top(TOP_SHOWN),
                    "verdict": verdict,
                    "reason": reason,
                    "criterion": {
                        "min_requests": self.criterion.min_requests,
                        "max_rate": self.criterion.max_rate,
                        "window_minutes": READINESS_MINUTES,
                    },
                })
            })
            .collect();
        serde_json::Value::Array(list)
    }

    /// The explorer's entries after `after` (sequence numbers), oldest first.
    pub fn recent_after(&self, after: u64) -> Vec<(u64, serde_json::Value)> {
        self.state()
            .recent
            .iter()
            .filter(|(seq, _)| *seq > after)
            .cloned()
            .collect()
    }
}

/// Counts `s` (whose path is `path`) in its site's readiness, at Unix second
/// `now`.
fn add_readiness(st: &mut State, s: &RequestSummary, path: &str, now: i64) {
    if !st.readiness.contains_key(&s.site) && st.readiness.len() >= READINESS_SITES {
        return;
    }
    let wb = would_block(s);
    let r = st.readiness.entry(s.site.clone()).or_default();
    let minute = now.div_euclid(60);
    // Usually the last minute; a summary finished just before the minute turned
    // may come after it.
    match r.minutes.iter_mut().rev().take(2).find(|m| m.at == minute) {
        Some(m) => {
            m.requests += 1;
            m.would_block += u64::from(wb);
        }
        None => {
            if r.minutes.len() >= READINESS_MINUTES {
                r.minutes.pop_front();
            }
            r.minutes.push_back(Minute {
                at: minute,
                requests: 1,
                would_block: u64::from(wb),
            });
        }
    }
    if wb {
        let mut seen = Vec::new();
        for id in s
            .matches
            .iter()
            .filter(|m| !is_evaluation(m))
            .filter_map(|m| m.rule_id)
        {
            if !seen.contains(&id) {
                seen.push(id);
                r.rules.add(&id.to_string(), true);
            }
        }
        r.paths.add(path, true);
        r.clients.add(&s.client.ip().to_string(), true);
    }
}

/// `would_block / requests`, 0 without requests.
fn rate(requests: u64, would_block: u64) -> f64 {
    if requests == 0 {
        0.0
    } else {
        would_block as f64 / requests as f64
    }
}

/// The verdict (`not enough traffic`, `not ready`, `ready`) and its reason, for
/// `requests` and `would_block` over the window and the top rules (largest
/// first).
fn verdict(
    c: &ReadinessCriterion,
    requests: u64,
    would_block: u64,
    rules: &[serde_json::Value],
) -> (&'static str, String) {
    let pct = |r: f64| format!("{:.3}%", r * 100.0);
    if requests < c.min_requests.max(1) {
        return (
            "not enough traffic",
            format!(
                "{requests} requests in the last {READINESS_MINUTES} minutes; a verdict needs at least {}",
                c.min_requests.max(1)
            ),
        );
    }
    let r = rate(requests, would_block);
    if r <= c.max_rate {
        return (
            "ready",
            format!(
                "{would_block} of {requests} requests would have been blocked ({}), at most {} allowed",
                pct(r),
                pct(c.max_rate)
            ),
        );
    }
    let top = rules
        .first()
        .and_then(|t| Some((t["key"].as_str()?.to_owned(), t["count"].as_u64()?)));
    let cause = match top {
        Some((id, n)) => format!("; top cause: rule {id} in {n} of them"),
        None => String::new(),
    };
    (
        "not ready",
        format!(
            "{would_block} of {requests} requests would have been blocked ({}), over the {} allowed{cause}",
            pct(r),
            pct(c.max_rate)
        ),
    )
}

/// One request of the explorer, as JSON (the client renders every string as text).
fn explorer_entry(seq: u64, s: &RequestSummary, blocked: bool) -> serde_json::Value {
    let matches: Vec<_> = s
        .matches
        .iter()
        .map(|m| {
            serde_json::json!({
                "rule_id": m.rule_id,
                "phase": m.phase,
                "msg": m.msg,
                "variable": m.var_name,
                "value": m.value,
                "severity": m.severity,
                "tags": m.tags,
                "denied_with": m.denied_with,
            })
        })
        .collect();
    serde_json::json!({
        "seq": seq,
        "unique_id": s.unique_id,
        "start_us": s.start_us,
        "verdict": if blocked { "blocked" } else { "detected" },
        "action": s.action.label(),
        "status": s.status,
        "method": s.method,
        "uri": crate::summary::cut(s.uri.clone(), 2048),
        "host": s.host,
        "site": &*s.site,
        "rule_id": s.rule_id,
        "rules": s.rule_ids(),
        "anomaly_inbound": s.anomaly.0,
        "anomaly_outbound": s.anomaly.1,
        "matches": matches,
        "total_us": s.total_us,
        "lineage": {
            "unique_id": s.unique_id,
            "client": s.client.to_string(),
            "peer": s.peer.to_string(),
            "server": s.server.to_string(),
            "tls": s.tls,
            "protocol": s.protocol,
            "site": &*s.site,
            "upstream": s.upstream.as_ref().map(|u| &*u.0),
            "upstream_server": s.upstream.as_ref().and_then(|u| u.1.as_deref()),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(action: crate::metrics::Action, rules: &[i64], uri: &str) -> RequestSummary {
        RequestSummary {
            status: 403,
            action,
            matches: rules
                .iter()
                .map(|id| engine::RuleMatch {
                    rule_id: Some(*id),
                    phase: 2,
                    msg: None,
                    var_name: "ARGS:q".into(),
                    value: "<b>".into(),
                    severity: None,
                    tags: vec![],
                    denied_with: None,
                    log_line: None,
                })
                .collect(),
            anomaly: (5, 0),
            ..RequestSummary::for_test(uri)
        }
    }

    #[test]
    fn aggregates_summaries() {
        use crate::metrics::Action;
        let a = Aggregate::default();
        a.add(&summary(Action::Pass, &[], "/ok?x=1"), 100);
        a.add(&summary(Action::Deny, &[941100, 949110], "/s?q=<b>"), 100);
        a.add(&summary(Action::Pass, &[920350], "/s"), 101);
        let s = a.snapshot();
        assert_eq!(s["requests"], 3);
        assert_eq!(s["blocked"], 1);
        assert_eq!(s["detected"], 1);
        assert_eq!(s["histograms"]["phase1"][0], 3);
        assert_eq!(s["histograms"]["phase2"][3], 3);
        assert_eq!(s["histograms"]["total"][5], 3);
        assert_eq!(s["top"]["paths"][0]["key"], "/s");
        assert_eq!(s["top"]["paths"][0]["count"], 2);
        let recent = a.recent_after(0);
        assert_eq!(recent.len(), 2);
        assert_eq!(recent[0].1["verdict"], "blocked");
        assert_eq!(recent[0].1["matches"][0]["value"], "<b>");
        assert_eq!(recent[1].1["verdict"], "detected");
        assert_eq!(a.recent_after(recent[0].0).len(), 1);
        for _ in 0..(RECENT + 10) {
            a.add(&summary(Action::Deny, &[1], "/x"), 102);
        }
        assert_eq!(a.recent_after(0).len(), RECENT);
    }

    #[test]
    fn buckets() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(50), 0);
        assert_eq!(bucket(51), 1);
        assert_eq!(bucket(250_000), 11);
        assert_eq!(bucket(u64::MAX), 12);
    }

    #[test]
    fn top_is_bounded() {
        let mut t = Top::default();
        for i in 0..(TOP_KEYS * 2) {
            t.add(&format!("k{i}"), false);
        }
        for _ in 0..5 {
            t.add("hot", true);
        }
        assert!(t.counts.len() <= TOP_KEYS);
        // Every count is at least the true one (1, and 5 for "hot"), and over by at
        // most the floor.
        assert!(t.floor > 0);
        for (k, c) in &t.counts {
            let truth = if k == "hot" { 5 } else { 1 };
            assert!(c.0 >= truth && c.0 <= truth + t.floor, "{k}: {c:?}");
        }
        let top = t.top(1);
        assert_eq!(top[0]["key"], "hot");
        assert_eq!(top[0]["blocked"], 5);
        t.add(&"x".repeat(1000), false);
        assert!(t.counts.keys().all(|k| k.len() <= KEY_MAX));
    }

    /// A DetectionOnly request of site `dev`: CRS matched `rules` and, with
    /// `evaluated`, its inbound evaluation rule 949110.
    fn detected(rules: &[i64], evaluated: bool, uri: &str) -> RequestSummary {
        let mut ids = rules.to_vec();
        if evaluated {
            ids.push(949110);
        }
        let mut s = summary(crate::metrics::Action::Pass, &ids, uri);
        s.site = "dev".into();
        s.status = 200;
        s
    }

    fn ok(site: &str) -> RequestSummary {
        let mut s = summary(crate::metrics::Action::Pass, &[], "/ok");
        s.site = site.into();
        s.status = 200;
        s.anomaly = (0, 0);
        s
    }

    #[test]
    fn would_block_follows_the_evaluation_rules() {
        assert!(would_block(&detected(&[942100], true, "/")));
        // Scored below the threshold: no evaluation rule matched.
        assert!(!would_block(&detected(&[920350], false, "/")));
        assert!(!would_block(&ok("dev")));
        // Refused already: not a would-block.
        let s = summary(crate::metrics::Action::Deny, &[942100, 949110], "/");
        assert!(!would_block(&s));
        // No scores (rules outside CRS): any match counts.
        let mut s = detected(&[1], false, "/");
        s.anomaly = (0, 0);
        assert!(would_block(&s));
    }

    #[test]
    fn readiness_verdicts() {
        let c = ReadinessCriterion {
            min_requests: 100,
            max_rate: 0.01,
        };
        let sites: Vec<std::sync::Arc<str>> = vec!["dev".into()];
        let now = 6_000;

        // Below the minimum: not enough traffic.
        let a = Aggregate::new(c);
        for _ in 0..50 {
            a.add(&ok("dev"), now - 120);
        }
        a.add(&ok("other"), now);
        let r = a.readiness(&sites, now);
        assert_eq!(r.as_array().map(Vec::len), Some(1));
        assert_eq!(r[0]["site"], "dev");
        assert_eq!(r[0]["requests"], 50);
        assert_eq!(r[0]["verdict"], "not enough traffic");
        assert_eq!(
            r[0]["series"].as_array().map(Vec::len),
            Some(READINESS_MINUTES)
        );
        assert_eq!(r[0]["series"][READINESS_MINUTES - 3]["requests"], 50);
        assert_eq!(r[0]["series"][READINESS_MINUTES - 1]["requests"], 0);

        // 10 would-blocks in 200 requests (5%): not ready, naming rule 942100.
        for _ in 0..150 {
            a.add(&ok("dev"), now);
        }
        for _ in 0..8 {
            a.add(&detected(&[942100], true, "/search?q=x"), now);
        }
        for _ in 0..2 {
            a.add(&detected(&[932100, 920350], true, "/run"), now);
        }
        // Scored but not over the threshold: not counted.
        a.add(&detected(&[920350], false, "/"), now);
        let r = a.readiness(&sites, now);
        assert_eq!(r[0]["requests"], 211);
        assert_eq!(r[0]["would_block"], 10);
        assert_eq!(r[0]["verdict"], "not ready");
        assert_eq!(r[0]["top_rules"][0]["key"], "942100");
        assert_eq!(r[0]["top_rules"][0]["count"], 8);
        assert!(
            r[0]["top_rules"]
                .as_array()
                .is_some_and(|t| t.iter().all(|x| x["key"] != "949110"))
        );
        assert_eq!(r[0]["top_paths"][0]["key"], "/search");
        let reason = r[0]["reason"].as_str().unwrap_or_default();
        assert!(reason.contains("rule 942100"), "{reason}");

        // An hour later the window has moved on: 1 would-block in 1000: ready.
        let later = now + 3_600;
        for _ in 0..999 {
            a.add(&ok("dev"), later);
        }
        a.add(&detected(&[942100], true, "/"), later);
        let r = a.readiness(&sites, later);
        assert_eq!(r[0]["requests"], 1000);
        assert_eq!(r[0]["would_block"], 1);
        assert_eq!(r[0]["verdict"], "ready");

        // A site with no traffic yet is listed, without a verdict.
        let r = a.readiness(&["none".into()], later);
        assert_eq!(r[0]["requests"], 0);
        assert_eq!(r[0]["verdict"], "not enough traffic");
    }

    #[test]
    fn readiness_is_bounded() {
        let a = Aggregate::default();
        for i in 0..(READINESS_SITES + 10) {
            a.add(&ok(&format!("s{i}")), 0);
        }
        for m in 0..(READINESS_MINUTES as i64 * 2) {
            a.add(&ok("s0"), m * 60);
        }
        let st = a.state();
        assert!(st.readiness.len() <= READINESS_SITES);
        assert!(
            st.readiness
                .values()
                .all(|r| r.minutes.len() <= READINESS_MINUTES)
        );
    }
}
