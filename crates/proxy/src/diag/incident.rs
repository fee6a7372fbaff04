//! Incident capture (`[incidents]`): every second, the proxy compares its state
//! with what it was `hold` ago. When a condition is above its threshold over that
//! window (a WAF phase's 99th percentile, the CPU cores used, the kernel's share of
//! the CPU time), it takes a CPU profile and a snapshot of its state by itself,
//! at most once per `cooldown`, and keeps the last `keep` on disk:
//!
//! `DIR/incident-TIME-REASON/`: `reason.txt` (the condition, its value and
//! threshold), `status.json`, `metrics.txt`, `slow.json` and `profile.pb` (pprof).
//!
//! The check reads a few counters and `/proc/self/stat` once a second; the
//! request path does nothing for it.

use crate::config::IncidentSection;
use crate::exchange::Shared;
use crate::metrics::{Collector, Exposition, Timer, TimerCounts};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// The prefix of an incident's directory name.
pub const PREFIX: &str = "incident-";

/// The least CPU (cores, over the window) for the kernel's share to count: an
/// idle process's few ticks say nothing.
const KERNEL_SHARE_MIN_CORES: f64 = 0.1;

const PHASES: [Timer; 5] = [
    Timer::Phase1,
    Timer::Phase2,
    Timer::Phase3,
    Timer::Phase4,
    Timer::Phase5,
];

/// Incidents captured and failed (`/metrics`).
#[derive(Debug, Default)]
pub struct IncidentStats {
    /// Incidents captured.
    pub captured: AtomicU64,
    /// Captures that failed (the directory could not be written).
    pub failed: AtomicU64,
    /// When the last one was captured, Unix seconds (0: none).
    pub last_unix: AtomicU64,
}

impl Collector for IncidentStats {
    fn collect(&self, out: &mut Exposition) {
        out.counter(
            "palisade_incidents_captured_total",
            "Incidents captured by [incidents] (a CPU profile and a state snapshot).",
            self.captured.load(Ordering::Relaxed) as f64,
        );
        out.counter(
            "palisade_incident_capture_failures_total",
            "Incident captures that could not be written.",
            self.failed.load(Ordering::Relaxed) as f64,
        );
    }
}

/// What the check reads each second.
#[derive(Debug, Clone)]
struct Sample {
    at: Instant,
    phases: [TimerCounts; 5],
    /// The process's user and system CPU time, in clock ticks.
    cpu: (u64, u64),
}

impl Sample {
    fn now(shared: &Shared) -> Sample {
        Sample {
            at: Instant::now(),
            phases: PHASES.map(|t| shared.metrics.timer_counts(t)),
            cpu: crate::procstat::process_cpu_ticks().unwrap_or_default(),
        }
    }
}

/// Why an incident is captured.
#[derive(Debug, Clone, PartialEq)]
pub struct Reason {
    /// A short name for the directory: `phase2-p99`, `cpu`, `kernel-share`.
    pub kind: String,
    /// What was measured, against what threshold.
    pub text: String,
}

/// The first condition of `cfg` above its threshold between `old` and `new`.
fn check(cfg: &IncidentSection, old: &Sample, new: &Sample, hz: f64) -> Option<Reason> {
    let secs = new.at.duration_since(old.at).as_secs_f64();
    if secs <= 0.0 {
        return None;
    }
    if let Some(limit) = cfg.phase_p99_ms {
        for (i, (n, o)) in new.phases.iter().zip(&old.phases).enumerate() {
            let Some(p99) = n.since(o).quantile_us(0.99) else {
                continue;
            };
            let ms = p99 as f64 / 1e3;
            if ms > limit {
                let shown = if p99 == u64::MAX {
                    "over 10 s".to_owned()
                } else {
                    format!("at most {ms} ms")
                };
                return Some(Reason {
                    kind: format!("phase{}-p99", i + 1),
                    text: format!(
                        "phase {} p99 over the last {secs:.0} s: {shown} (the histogram bucket), above incidents.phase_p99_ms = {limit}",
                        i + 1
                    ),
                });
            }
        }
    }
    let user = new.cpu.0.saturating_sub(old.cpu.0) as f64 / hz;
    let system = new.cpu.1.saturating_sub(old.cpu.1) as f64 / hz;
    let cores = (user + system) / secs;
    if let Some(limit) = cfg.cpu_cores
        && cores > limit
    {
        return Some(Reason {
            kind: "cpu".into(),
            text: format!(
                "CPU over the last {secs:.0} s: {cores:.2} cores (user {user:.2} s, system {system:.2} s), above incidents.cpu_cores = {limit}"
            ),
        });
    }
    if let Some(limit) = cfg.kernel_share
        && cores >= KERNEL_SHARE_MIN_CORES
    {
        let share = system / (user + system);
        if share > limit {
            return Some(Reason {
                kind: "kernel-share".into(),
                text: format!(
                    "kernel share of CPU over the last {secs:.0} s: {share:.2} (user {user:.2} s, system {system:.2} s, {cores:.2} cores), above incidents.kernel_share = {limit}"
                ),
            });
        }
    }
    None
}

/// Runs the check every second until `stop`.
pub async fn run(shared: Arc<Shared>, cfg: IncidentSection, mut stop: watch::Receiver<bool>) {
    let hz = rustix::param::clock_ticks_per_second().max(1) as f64;
    let mut samples: std::collections::VecDeque<Sample> = Default::default();
    let mut last: Option<Instant> = None;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = crate::runtime::stopped(&mut stop) => return,
        }
        let now = Sample::now(&shared);
        samples.push_back(now.clone());
        // Keep the samples of the window, and the one just before it.
        while samples.len() > 2 && now.at.duration_since(samples[1].at) >= cfg.hold {
            samples.pop_front();
        }
        let Some(old) = samples.front() else { continue };
        if now.at.duration_since(old.at) < cfg.hold {
            continue;
        }
        if last.is_some_and(|l| l.elapsed() < cfg.cooldown) {
            continue;
        }
        let Some(reason) = check(&cfg, old, &now, hz) else {
            continue;
        };
        last = Some(Instant::now());
        tracing::warn!(
            "incident: {}; capturing a profile and a snapshot",
            reason.text
        );
        match capture(&shared, &cfg, &reason).await {
            Ok(dir) => {
                shared.incidents.captured.fetch_add(1, Ordering::Relaxed);
                shared
                    .incidents
                    .last_unix
                    .store(unix_secs(), Ordering::Relaxed);
                tracing::warn!("incident captured in {}", dir.display());
            }
            Err(e) => {
                shared.incidents.failed.fetch_add(1, Ordering::Relaxed);
                tracing::error!("incident capture failed: {e}");
            }
        }
        // The window starts again after a capture.
        samples.clear();
    }
}

fn unix_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Writes one incident's directory, then removes the oldest beyond `keep`.
async fn capture(
    shared: &Arc<Shared>,
    cfg: &IncidentSection,
    reason: &Reason,
) -> Result<PathBuf, String> {
    use crate::diag::profile::{Format, ProfileRequest};
    let stamp: String =
        crate::logs::rfc3339_micros(i64::try_from(unix_secs()).unwrap_or(i64::MAX) * 1_000_000)
            .chars()
            .take(19)
            .filter(|c| c.is_ascii_alphanumeric())
            .collect();
    let dir = cfg.dir.join(format!("{PREFIX}{stamp}-{}", reason.kind));
    let write = |name: &str, body: &[u8]| {
        std::fs::write(dir.join(name), body)
            .map_err(|e| format!("{}: {e}", dir.join(name).display()))
    };
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    // The state first, as it was when the condition held.
    write("status.json", crate::admin::status_json(shared).as_bytes())?;
    write("metrics.txt", crate::admin::metrics_text(shared).as_bytes())?;
    let slow = serde_json::json!({
        "window_seconds": crate::diag::slow::WINDOW_SECS,
        "requests": shared.slow.slowest(),
    });
    write("slow.json", slow.to_string().as_bytes())?;
    let mut text = format!("{}\n", reason.text);
    let profile = ProfileRequest {
        seconds: cfg.profile_seconds,
        format: Format::Pprof,
    };
    match crate::diag::profile::take(profile).await {
        Ok(pb) => write("profile.pb", &pb)?,
        Err(e) => text.push_str(&format!("no profile: {e}\n")),
    }
    write("reason.txt", text.as_bytes())?;
    prune(&cfg.dir, cfg.keep);
    Ok(dir)
}

/// Whether incidents can be written to `dir`, without creating anything: it is a
/// writable directory, or the nearest part of its path that exists is one.
pub fn check_dir(dir: &Path) -> Result<(), String> {
    let mut at = dir;
    loop {
        match std::fs::metadata(at) {
            Ok(m) if m.is_dir() => {
                return rustix::fs::access(at, rustix::fs::Access::WRITE_OK).map_err(|e| {
                    format!(
                        "incidents.dir {}: {} is not writable: {e}",
                        dir.display(),
                        at.display()
                    )
                });
            }
            Ok(_) => {
                return Err(format!(
                    "incidents.dir {}: {} is not a directory",
                    dir.display(),
                    at.display()
                ));
            }
            Err(_) => match at.parent() {
                Some(p) if !p.as_os_str().is_empty() => at = p,
                _ => {
                    return Err(format!(
                        "incidents.dir {}: no part of it exists",
                        dir.display()
                    ));
                }
            },
        }
    }
}

/// The incidents kept in `dir`, newest first.
pub fn kept(dir: &Path) -> Vec<PathBuf> {
    let mut all: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(PREFIX))
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    // The names start with the time: their order is the time order.
    all.sort();
    all.reverse();
    all
}

/// Removes the oldest incidents beyond `keep`.
fn prune(dir: &Path, keep: usize) {
    for old in kept(dir).into_iter().skip(keep) {
        if let Err(e) = std::fs::remove_dir_all(&old) {
            tracing::warn!("incident {}: could not remove it: {e}", old.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> IncidentSection {
        IncidentSection {
            dir: PathBuf::from("/nonexistent"),
            keep: 2,
            hold: Duration::from_secs(10),
            cooldown: Duration::from_secs(60),
            profile_seconds: 1,
            phase_p99_ms: Some(20.0),
            cpu_cores: Some(1.5),
            kernel_share: Some(0.5),
        }
    }

    fn sample(at: Instant, phase2: &[u64], cpu: (u64, u64)) -> Sample {
        let mut phases = [TimerCounts::default(); 5];
        for us in phase2 {
            let b = crate::metrics::TIMER_BOUNDS_US
                .iter()
                .position(|b| us <= b)
                .unwrap();
            phases[1].buckets[b] += 1;
            phases[1].count += 1;
        }
        Sample { at, phases, cpu }
    }

    #[test]
    fn each_condition_is_measured_over_the_window() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_secs(10);
        let quiet = sample(t0, &[], (0, 0));
        // 100 ticks a second: 10 s of one busy core, mostly user time.
        let busy = sample(t1, &[100; 200], (900, 100));
        assert_eq!(check(&cfg(), &quiet, &busy, 100.0), None);
        // Phase 2's p99 in the 25 ms bucket.
        let mut slow = busy.clone();
        let mut times = vec![100u64; 98];
        times.extend([30_000, 30_000]);
        slow.phases = sample(t1, &times, (0, 0)).phases;
        let r = check(&cfg(), &quiet, &slow, 100.0).unwrap();
        assert_eq!(r.kind, "phase2-p99");
        assert!(r.text.contains("at most 50 ms"), "{}", r.text);
        // Two cores.
        let r = check(&cfg(), &quiet, &sample(t1, &[], (1800, 200)), 100.0).unwrap();
        assert_eq!(r.kind, "cpu");
        // Mostly kernel time.
        let r = check(&cfg(), &quiet, &sample(t1, &[], (300, 700)), 100.0).unwrap();
        assert_eq!(r.kind, "kernel-share");
        assert!(r.text.contains("0.70"), "{}", r.text);
        // An idle process's few ticks say nothing.
        assert_eq!(check(&cfg(), &quiet, &sample(t1, &[], (1, 9)), 100.0), None);
    }

    #[test]
    fn the_oldest_incidents_go_first() {
        let dir = std::env::temp_dir().join(format!("palisade-incidents-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for name in [
            "incident-20261129T100000-cpu",
            "incident-20261129T110000-cpu",
            "incident-20261129T120000-cpu",
            "other",
        ] {
            std::fs::create_dir_all(dir.join(name)).unwrap();
        }
        prune(&dir, 2);
        let names: Vec<String> = kept(&dir)
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "incident-20261129T120000-cpu",
                "incident-20261129T110000-cpu"
            ]
        );
        assert!(dir.join("other").is_dir());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
