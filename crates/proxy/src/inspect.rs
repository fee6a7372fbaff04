//! Where rule evaluation runs, so that one large request cannot stall the others.
//!
//! The tokio worker threads carry every connection. A phase whose input is small
//! (a usual request head, a form) is evaluated inline on the worker: that is
//! cheaper than any hand-off. A phase over a large input (a big body, a long head,
//! a large response prefix) is handed to a small pool of threads of lower
//! scheduling priority (`nice` 10), and the request's task waits for the result
//! without holding its worker. The pool has a fixed number of threads, so large
//! inspections queue up rather than take every core, and the kernel gives the
//! workers precedence while there is other work, so ordinary clients keep their
//! latency while worst-case requests are inspected. Each evaluation's CPU time
//! (the thread's own clock, not wall time) is returned to the caller for the
//! transaction's budget and metrics.

mod fair;

use fair::FairSlots;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

/// The niceness of the inspection threads: a worker thread (nice 0) gets about 9
/// times their share of a core when both want it.
const POOL_NICE: i32 = 10;

/// The CPU time this thread has used so far.
#[inline(never)] // bench/instrumentation.py reads its cost by name
pub fn thread_cpu_time() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

/// What an evaluation took.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spent {
    /// Wall-clock time from its start to its end (waiting for the pool excluded).
    pub wall: Duration,
    /// CPU time of the thread that ran it (`None` when it was not asked for).
    pub cpu: Option<Duration>,
    /// Its CPU time split into user and kernel time, with its page faults (only
    /// with [`Measure::Split`]).
    pub split: Option<crate::procstat::ThreadUsage>,
}

impl Spent {
    /// What two evaluations (the slices of one phase) took together.
    pub fn plus(&self, other: &Spent) -> Spent {
        Spent {
            wall: self.wall + other.wall,
            cpu: match (self.cpu, other.cpu) {
                (Some(a), Some(b)) => Some(a + b),
                (a, b) => a.or(b),
            },
            split: match (&self.split, &other.split) {
                (Some(a), Some(b)) => Some(a.plus(b)),
                (a, b) => a.or(*b),
            },
        }
    }
}

/// What [`measured`] reads besides the wall clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    /// The wall clock only.
    Wall,
    /// The thread's CPU clock too (a system call, about 0.5 us here, where the
    /// wall clock is read without one in 0.02 us).
    Cpu,
    /// The CPU clock and the thread's resource usage (`getrusage`): CPU time
    /// split into user and kernel time, and page faults; for the requests sampled
    /// for rule costs.
    Split,
}

/// Runs `f`, returning its result and what it took, as `how` asks.
pub fn measured<T>(how: Measure, f: impl FnOnce() -> T) -> (T, Spent) {
    let wall = std::time::Instant::now();
    // The CPU clock is exact; the resource usage gives the split (see
    // `ThreadUsage` on how fine it is).
    let usage_start = (how == Measure::Split)
        .then(crate::procstat::ThreadUsage::now)
        .flatten();
    let cpu_start = (how != Measure::Wall).then(thread_cpu_time);
    let out = f();
    let cpu = cpu_start.map(|c| thread_cpu_time().saturating_sub(c));
    let split = usage_start.and_then(|u0| Some(crate::procstat::ThreadUsage::now()?.since(&u0)));
    let spent = Spent {
        cpu,
        wall: wall.elapsed(),
        split,
    };
    (out, spent)
}

/// An evaluation on the pool panicked (the engine wrapper catches the engine's
/// own panics, so this is a fault of the wrapper itself).
#[derive(Debug, thiserror::Error)]
#[error("inspection job panicked")]
pub struct JobPanicked;

/// Decides where each evaluation runs and owns the inspection pool.
#[derive(Debug)]
pub struct Inspector {
    pool: rayon::ThreadPool,
    /// One slot per pool thread: evaluations beyond them wait here without
    /// holding a thread, each client in turn ([`fair`]).
    slots: Arc<FairSlots>,
    inline_bytes: usize,
}

/// The pool could not be started.
#[derive(Debug, thiserror::Error)]
#[error("starting the inspection pool: {0}")]
pub struct PoolError(#[from] rayon::ThreadPoolBuildError);

impl Inspector {
    /// A pool of `threads` threads (0: half the CPUs, at least one); inputs of at
    /// most `inline_bytes` are evaluated inline.
    pub fn new(threads: usize, inline_bytes: usize) -> Result<Inspector, PoolError> {
        let threads = if threads == 0 {
            std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1))
        } else {
            threads
        };
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("palisade-inspect-{i}"))
            .start_handler(|_| {
                // Linux keeps a niceness per thread: this lowers only the pool's
                // threads. Failing to lower it costs fairness, not correctness.
                if let Err(e) = rustix::process::setpriority_process(None, POOL_NICE) {
                    tracing::debug!("lowering the inspection threads' priority: {e}");
                }
            })
            .build()?;
        Ok(Inspector {
            pool,
            slots: FairSlots::new(threads),
            inline_bytes,
        })
    }

    /// Has every pool thread give back the memory it freed ([`crate::memory::collect`]),
    /// after the evaluations queued before; does not wait.
    pub fn release_memory(&self) {
        self.pool.spawn_broadcast(|_| crate::memory::collect());
    }

    /// Whether evaluations wait for the pool now (a long one on it is then
    /// walked in slices).
    pub fn contended(&self) -> bool {
        self.slots.contended()
    }

    /// Whether another client's evaluations wait for the pool now: at the end
    /// of a slice, `client`'s walk then gives its thread back so that they take
    /// their turns.
    pub fn contended_for(&self, client: std::net::IpAddr) -> bool {
        self.slots.contended_for(client)
    }

    /// Whether an evaluation over `size` bytes of input runs inline.
    pub fn inline(&self, size: usize) -> bool {
        size <= self.inline_bytes
    }

    /// Runs `f` over `size` bytes of input for `client`: inline when small, on
    /// the pool otherwise, where the clients that wait take turns. Returns its
    /// result and what it took (CPU time only when `cpu`).
    pub async fn run<T, F>(
        &self,
        size: usize,
        client: IpAddr,
        how: Measure,
        f: F,
    ) -> Result<(T, Spent), JobPanicked>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        if self.inline(size) {
            return Ok(measured(how, f));
        }
        let permit = self.slots.acquire(client).await;
        let (tx, rx) = oneshot::channel();
        self.pool.spawn(move || {
            let _permit = permit;
            // A panic must not reach rayon, which would abort the process.
            let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| measured(how, f)));
            let _ = tx.send(out.map_err(|_| JobPanicked));
        });
        rx.await.unwrap_or(Err(JobPanicked))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCAL: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    #[test]
    fn cpu_clock_counts_work_not_sleep() {
        let ((), slept) = measured(Measure::Cpu, || {
            std::thread::sleep(Duration::from_millis(50))
        });
        assert!(slept.wall >= Duration::from_millis(50));
        assert!(slept.cpu.unwrap() < slept.wall, "{slept:?}");
        // Work until the thread's own clock has advanced 20 ms: the measure must
        // see at least that much.
        let (_, spun) = measured(Measure::Cpu, || {
            let t0 = thread_cpu_time();
            let mut x = 0u64;
            while thread_cpu_time() - t0 < Duration::from_millis(20) {
                x = std::hint::black_box(x.wrapping_add(1));
            }
            x
        });
        assert!(spun.cpu.unwrap() >= Duration::from_millis(20), "{spun:?}");
        assert!(spun.wall >= spun.cpu.unwrap(), "{spun:?}");
        // Not asked for: no CPU time, the wall time still.
        let ((), unasked) = measured(Measure::Wall, || {
            std::thread::sleep(Duration::from_millis(5))
        });
        assert_eq!(unasked.cpu, None);
        assert!(unasked.wall >= Duration::from_millis(5));
    }

    /// While the pool evaluates a large input, the worker thread (here the only
    /// one) keeps serving other tasks: were the job inline, the worker would be
    /// blocked inside it and the other task could not finish first.
    #[tokio::test(flavor = "current_thread")]
    async fn a_pool_job_leaves_the_worker_free() {
        let ins = Inspector::new(1, 0).unwrap();
        let (release, gate) = std::sync::mpsc::channel::<()>();
        let job = ins.run(1, LOCAL, Measure::Cpu, move || {
            gate.recv_timeout(Duration::from_secs(10)).is_ok()
        });
        tokio::pin!(job);
        let other = async {
            tokio::task::yield_now().await;
            7
        };
        tokio::select! {
            _ = &mut job => panic!("the job finished before the other task"),
            v = other => assert_eq!(v, 7),
        }
        release.send(()).unwrap();
        let (released, _) = job.await.unwrap();
        assert!(released, "the job ran without waiting for its gate");
    }

    #[tokio::test]
    async fn large_inputs_run_on_the_pool_threads() {
        let ins = Inspector::new(1, 100).unwrap();
        let here = std::thread::current().id();
        let (small, _) = ins
            .run(100, LOCAL, Measure::Cpu, move || {
                std::thread::current().id()
            })
            .await
            .unwrap();
        assert_eq!(small, here);
        let (name, _) = ins
            .run(101, LOCAL, Measure::Cpu, || {
                std::thread::current().name().map(str::to_owned)
            })
            .await
            .unwrap();
        assert_eq!(name.as_deref(), Some("palisade-inspect-0"));
        let failed = ins.run(101, LOCAL, Measure::Cpu, || panic!("boom")).await;
        assert!(failed.is_err());
        // The pool survives a panicking job.
        let (v, _) = ins.run(101, LOCAL, Measure::Cpu, || 7).await.unwrap();
        assert_eq!(v, 7);
    }
}
