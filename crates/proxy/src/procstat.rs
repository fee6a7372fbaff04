//! The standard `process_*` metrics, read from `/proc` when `/metrics` is
//! scraped, and `palisade_build_info`.

use crate::metrics::{Collector, Exposition};

/// The process's CPU time, memory, descriptors and start time (Linux `/proc`;
/// a figure that cannot be read is left out).
#[derive(Debug, Default)]
pub struct ProcessCollector;

/// Each thread's CPU time, split into user and system (kernel) time: per worker
/// thread as `palisade_worker_cpu_seconds_total{worker,mode}`, and per kind of
/// thread (workers, the inspection pool, the log writer, the store writer, the
/// sync, the runtime's other threads) as
/// `palisade_thread_cpu_seconds_total{thread,mode}`. A thread that ended is no
/// longer counted; the process's own totals are `process_cpu_seconds_total` and
/// `palisade_process_cpu_seconds_total{mode}`.
#[derive(Debug, Default)]
pub struct ThreadCpuCollector;

/// The calling thread's resource usage so far (`getrusage(RUSAGE_THREAD)`): CPU
/// time split into user and kernel time, and page faults. Read around a phase of
/// the requests sampled for rule costs, to split each WAF phase's CPU by mode.
///
/// How fine it is depends on the kernel's accounting. With tick accounting
/// (`CONFIG_TICK_CPU_ACCOUNTING`, Debian's default) a thread's CPU time moves at
/// scheduler ticks and context switches, and the kernel divides it between user
/// and kernel time by where its ticks landed: one short phase mostly reads zero
/// or a whole tick, and the sums over many phases are right, as a sampling
/// profile's are. With `CONFIG_VIRT_CPU_ACCOUNTING_GEN` active every phase is
/// exact. Page faults are counted exactly either way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ThreadUsage {
    /// User time.
    pub user: std::time::Duration,
    /// Kernel time on the thread's behalf.
    pub system: std::time::Duration,
    /// Minor and major page faults.
    pub faults: u64,
}

impl ThreadUsage {
    /// The sum of two usages (of the slices of one evaluation).
    pub fn plus(&self, other: &ThreadUsage) -> ThreadUsage {
        ThreadUsage {
            user: self.user + other.user,
            system: self.system + other.system,
            faults: self.faults + other.faults,
        }
    }

    /// The calling thread's usage now; `None` where the system cannot tell it.
    #[inline(never)] // bench/instrumentation.py reads its cost by name
    pub fn now() -> Option<ThreadUsage> {
        let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: `ru` points to writable memory the size of a `rusage`, which
        // getrusage fills (or leaves untouched on an error, when we read nothing
        // from it; zeroed, it is a valid `rusage` either way: plain integers).
        #[allow(unsafe_code)]
        let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, ru.as_mut_ptr()) };
        if rc != 0 {
            return None;
        }
        // SAFETY: zero-initialised plain integers, then filled by the kernel.
        #[allow(unsafe_code)]
        let ru = unsafe { ru.assume_init() };
        let d = |t: libc::timeval| {
            std::time::Duration::new(
                u64::try_from(t.tv_sec).unwrap_or(0),
                u32::try_from(t.tv_usec).unwrap_or(0).saturating_mul(1000),
            )
        };
        Some(ThreadUsage {
            user: d(ru.ru_utime),
            system: d(ru.ru_stime),
            faults: u64::try_from(ru.ru_minflt)
                .unwrap_or(0)
                .saturating_add(u64::try_from(ru.ru_majflt).unwrap_or(0)),
        })
    }

    /// What was used since `earlier` (on the same thread).
    pub fn since(&self, earlier: &ThreadUsage) -> ThreadUsage {
        ThreadUsage {
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
            faults: self.faults.saturating_sub(earlier.faults),
        }
    }
}

/// One thread's name (`comm`) and its user and system CPU time in clock ticks,
/// from its `/proc/self/task/TID/stat` line.
fn thread_times(stat: &str) -> Option<(&str, u64, u64)> {
    let name = &stat[stat.find('(')? + 1..stat.rfind(')')?];
    let f = stat_fields(stat)?;
    // Fields 14 (utime) and 15 (stime).
    let user = f.get(14 - 3)?.parse().ok()?;
    let system = f.get(15 - 3)?.parse().ok()?;
    Some((name, user, system))
}

/// The kind of thread a thread name says, for `palisade_thread_cpu_seconds_total`:
/// names that differ only by a trailing number are one kind.
fn thread_kind(name: &str) -> &str {
    let kind = name.trim_end_matches(|c: char| c.is_ascii_digit());
    let kind = kind.strip_suffix('-').unwrap_or(kind);
    if kind == "palisade-w" {
        "palisade-worker"
    } else {
        kind
    }
}

impl Collector for ThreadCpuCollector {
    fn collect(&self, out: &mut Exposition) {
        let hz = rustix::param::clock_ticks_per_second().max(1) as f64;
        let mut workers: Vec<(usize, u64, u64)> = Vec::new();
        let mut kinds: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
        let (user, system) = process_cpu_ticks().unwrap_or_default();
        for entry in std::fs::read_dir("/proc/self/task").into_iter().flatten() {
            let Ok(entry) = entry else { continue };
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            let Some((name, u, s)) = thread_times(&stat) else {
                continue;
            };
            if let Some(w) = name
                .strip_prefix("palisade-w")
                .and_then(|n| n.parse::<usize>().ok())
            {
                workers.push((w, u, s));
            }
            let k = kinds.entry(thread_kind(name).to_owned()).or_default();
            k.0 += u;
            k.1 += s;
        }
        workers.sort_unstable();
        out.family(
            "palisade_process_cpu_seconds_total",
            "counter",
            "The process's CPU time by mode: user, or system (in the kernel on its behalf).",
        );
        for (mode, ticks) in [("user", user), ("system", system)] {
            out.sample(
                "palisade_process_cpu_seconds_total",
                &[("mode", mode)],
                ticks as f64 / hz,
            );
        }
        out.family(
            "palisade_worker_cpu_seconds_total",
            "counter",
            "Each worker thread's CPU time by mode: user, or system (in the kernel on its behalf).",
        );
        for (w, u, s) in &workers {
            let w = w.to_string();
            for (mode, ticks) in [("user", u), ("system", s)] {
                out.sample(
                    "palisade_worker_cpu_seconds_total",
                    &[("worker", &w), ("mode", mode)],
                    *ticks as f64 / hz,
                );
            }
        }
        out.family(
            "palisade_thread_cpu_seconds_total",
            "counter",
            "CPU time of the threads running now, by kind of thread and mode (user or system).",
        );
        for (kind, (u, s)) in &kinds {
            for (mode, ticks) in [("user", u), ("system", s)] {
                out.sample(
                    "palisade_thread_cpu_seconds_total",
                    &[("thread", kind), ("mode", mode)],
                    *ticks as f64 / hz,
                );
            }
        }
    }
}

/// `palisade_build_info{version,revision,profile} 1`.
#[derive(Debug, Default)]
pub struct BuildInfo;

impl Collector for BuildInfo {
    fn collect(&self, out: &mut Exposition) {
        out.family(
            "palisade_build_info",
            "gauge",
            "The build: version, git revision and cargo profile (always 1).",
        );
        out.sample(
            "palisade_build_info",
            &[
                ("version", env!("CARGO_PKG_VERSION")),
                ("revision", crate::admin::GIT_REVISION),
                ("profile", crate::admin::BUILD_PROFILE),
            ],
            1.0,
        );
    }
}

/// The fields of `/proc/self/stat` after the command name, from the state
/// (field 3) on: `fields[0]` is field 3.
fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    // The command name is in parentheses and may hold spaces and parentheses.
    let rest = &stat[stat.rfind(')')? + 1..];
    Some(rest.split_ascii_whitespace().collect())
}

/// The process's user and system CPU time so far, in clock ticks (fields 14 and
/// 15 of `/proc/self/stat`; ended threads included).
pub fn process_cpu_ticks() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let f = stat_fields(&stat)?;
    Some((f.get(14 - 3)?.parse().ok()?, f.get(15 - 3)?.parse().ok()?))
}

/// Seconds since the epoch at boot (`btime` of `/proc/stat`).
fn boot_time(proc_stat: &str) -> Option<u64> {
    proc_stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// The soft limit of `Max open files` in `/proc/self/limits`.
fn max_fds(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_ascii_whitespace()
        .next()?
        .parse()
        .ok()
}

impl Collector for ProcessCollector {
    fn collect(&self, out: &mut Exposition) {
        let cpu = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
        out.counter(
            "process_cpu_seconds_total",
            "Total user and system CPU time spent in seconds.",
            cpu.tv_sec as f64 + cpu.tv_nsec as f64 / 1e9,
        );
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        if let Some(f) = stat_fields(&stat) {
            // Fields 23 (vsize, bytes), 24 (rss, pages) and 22 (starttime, ticks).
            let field = |n: usize| f.get(n - 3).and_then(|v| v.parse::<u64>().ok());
            if let Some(v) = field(23) {
                out.gauge(
                    "process_virtual_memory_bytes",
                    "Virtual memory size in bytes.",
                    v as f64,
                );
            }
            if let Some(pages) = field(24) {
                out.gauge(
                    "process_resident_memory_bytes",
                    "Resident memory size in bytes.",
                    (pages * rustix::param::page_size() as u64) as f64,
                );
            }
            let boot = std::fs::read_to_string("/proc/stat")
                .ok()
                .and_then(|s| boot_time(&s));
            if let (Some(ticks), Some(boot)) = (field(22), boot) {
                let hz = rustix::param::clock_ticks_per_second().max(1);
                out.gauge(
                    "process_start_time_seconds",
                    "Start time of the process since unix epoch in seconds.",
                    boot as f64 + ticks as f64 / hz as f64,
                );
            }
        }
        if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
            out.gauge(
                "process_open_fds",
                "Number of open file descriptors.",
                dir.count().saturating_sub(1) as f64,
            );
        }
        if let Some(max) = std::fs::read_to_string("/proc/self/limits")
            .ok()
            .and_then(|l| max_fds(&l))
        {
            out.gauge(
                "process_max_fds",
                "Maximum number of open file descriptors.",
                max as f64,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_usage_counts_this_threads_work_and_faults() {
        let before = ThreadUsage::now().expect("getrusage(RUSAGE_THREAD) on Linux");
        // Spin until the thread's CPU clock has moved 20 ms, then touch fresh
        // pages (each first touch of an anonymous page is a fault).
        let t0 = crate::inspect::thread_cpu_time();
        let mut x = 0u64;
        while crate::inspect::thread_cpu_time() - t0 < std::time::Duration::from_millis(20) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let mut pages = vec![0u8; 64 << 20];
        for p in pages.iter_mut().step_by(4096) {
            *p = 1;
        }
        std::hint::black_box(&pages);
        let used = ThreadUsage::now().unwrap().since(&before);
        assert!(
            used.user + used.system >= std::time::Duration::from_millis(15),
            "{used:?}"
        );
        assert!(used.faults >= 100, "{used:?}");
        assert_eq!(
            before.since(&ThreadUsage::now().unwrap()),
            ThreadUsage::default()
        );
    }

    #[test]
    fn proc_files_parse() {
        let f = stat_fields("42 (a (b) c) S 1 2 3 4 5").unwrap();
        assert_eq!(f[0], "S");
        assert_eq!(
            boot_time("cpu 1 2\nbtime 1700000000\n"),
            Some(1_700_000_000)
        );
        let limits = "Limit                     Soft Limit           Hard Limit           Units\nMax open files            1024                 524288               files\n";
        assert_eq!(max_fds(limits), Some(1024));
    }

    #[test]
    fn thread_lines_parse() {
        let line = "77 (palisade-w1) S 1 2 3 4 5 6 7 8 9 10 250 40 0 0 20";
        assert_eq!(thread_times(line), Some(("palisade-w1", 250, 40)));
        assert_eq!(thread_times("77 (x) S 1"), None);
        assert_eq!(thread_kind("palisade-w12"), "palisade-worker");
        assert_eq!(thread_kind("palisade-inspect-3"), "palisade-inspect");
        assert_eq!(thread_kind("tokio-runtime-w"), "tokio-runtime-w");
        assert_eq!(thread_kind("store-writer"), "store-writer");
    }

    #[test]
    fn this_process_has_its_figures() {
        let mut out = Exposition::default();
        ProcessCollector.collect(&mut out);
        BuildInfo.collect(&mut out);
        ThreadCpuCollector.collect(&mut out);
        let text = out.into_text();
        for name in [
            "process_cpu_seconds_total ",
            "process_resident_memory_bytes ",
            "process_virtual_memory_bytes ",
            "process_open_fds ",
            "process_max_fds ",
            "process_start_time_seconds ",
            "palisade_build_info{version=\"",
            "palisade_process_cpu_seconds_total{mode=\"user\"} ",
            "palisade_process_cpu_seconds_total{mode=\"system\"} ",
            "palisade_thread_cpu_seconds_total{thread=\"",
        ] {
            assert!(text.contains(name), "{name} missing from {text}");
        }
    }
}
