//! Server health. Passive: `max_fails` failures (no connection, no response head)
//! within `fail_timeout` take a server out for `fail_timeout`. Active: a background
//! task checks every server of a pool each `interval` (an HTTP GET expecting a
//! status, or a TCP connection); `fall` failed checks in a row take it out, `rise`
//! passed ones bring it back. A server that is out is tried only after every server
//! that is in, so a pool whose servers are all out still tries them.

use super::pool::Server;
use super::pool::now_ms;
use super::{Pool, UpstreamRequest};
use crate::config::{HealthCheckConfig, HealthCheckKind};
use bytes::Bytes;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// The health of one server.
#[derive(Debug)]
pub(super) struct Health {
    /// Failures counted, and when the first of them happened (ms).
    fails: Mutex<(u32, u64)>,
    /// Out until then (ms); 0: in.
    down_until: AtomicU64,
    /// What the active checks say (true until they say otherwise).
    checked_up: AtomicBool,
    /// Passed and failed checks in a row.
    passes: AtomicU32,
    failures: AtomicU32,
}

impl Default for Health {
    fn default() -> Self {
        Health {
            fails: Mutex::new((0, 0)),
            down_until: AtomicU64::new(0),
            checked_up: AtomicBool::new(true),
            passes: AtomicU32::new(0),
            failures: AtomicU32::new(0),
        }
    }
}

impl Health {
    /// Whether the server takes requests now.
    pub fn is_up(&self) -> bool {
        self.checked_up.load(Ordering::Relaxed)
            && self.down_until.load(Ordering::Relaxed) <= now_ms()
    }

    /// A request failed on the server. True when this failure took it out.
    pub fn failed(&self, max_fails: u32, fail_timeout: Duration) -> bool {
        if max_fails == 0 {
            return false;
        }
        let now = now_ms();
        let window = u64::try_from(fail_timeout.as_millis()).unwrap_or(u64::MAX);
        let mut f = self.fails.lock().unwrap_or_else(|e| e.into_inner());
        if f.0 == 0 || now.saturating_sub(f.1) >= window {
            *f = (0, now);
        }
        f.0 += 1;
        if f.0 >= max_fails {
            *f = (0, 0);
            self.down_until
                .store(now.saturating_add(window), Ordering::Relaxed);
            return true;
        }
        false
    }

    /// A request got its response head from the server: earlier failures are
    /// forgotten.
    pub fn succeeded(&self) {
        let mut f = self.fails.lock().unwrap_or_else(|e| e.into_inner());
        f.0 = 0;
    }

    /// Forgets what active checks said (the pool has none any more): the server is
    /// in unless its passive state says otherwise.
    pub fn forget_checks(&self) {
        self.checked_up.store(true, Ordering::Relaxed);
        self.passes.store(0, Ordering::Relaxed);
        self.failures.store(0, Ordering::Relaxed);
    }

    /// Whether active checks have it out.
    fn checked_out(&self) -> bool {
        !self.checked_up.load(Ordering::Relaxed)
    }

    /// Records one active check. `Some(up)` when the server changed state.
    fn checked(&self, passed: bool, rise: u32, fall: u32) -> Option<bool> {
        let up = self.checked_up.load(Ordering::Relaxed);
        if passed {
            self.failures.store(0, Ordering::Relaxed);
            let n = self.passes.fetch_add(1, Ordering::Relaxed) + 1;
            if !up && n >= rise {
                self.checked_up.store(true, Ordering::Relaxed);
                // Back in: the passive state starts afresh too.
                self.down_until.store(0, Ordering::Relaxed);
                return Some(true);
            }
        } else {
            self.passes.store(0, Ordering::Relaxed);
            let n = self.failures.fetch_add(1, Ordering::Relaxed) + 1;
            if up && n >= fall {
                self.checked_up.store(false, Ordering::Relaxed);
                return Some(false);
            }
        }
        None
    }
}

/// Starts the active checks of `pool` on `rt`; they stop when the returned task is
/// aborted (a reload retires the pools) or when the pool is dropped.
pub(super) fn spawn_checks(
    rt: &tokio::runtime::Handle,
    pool: &Arc<Pool>,
    check: HealthCheckConfig,
) -> tokio::task::AbortHandle {
    let weak: Weak<Pool> = Arc::downgrade(pool);
    rt.spawn(async move {
        let mut tick = tokio::time::interval(check.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let check = Arc::new(check);
        loop {
            tick.tick().await;
            let Some(pool) = weak.upgrade() else {
                return;
            };
            let mut set = tokio::task::JoinSet::new();
            for server in pool.servers.iter().chain(&pool.backups) {
                let (pool, server, check) = (pool.clone(), server.clone(), check.clone());
                set.spawn(async move {
                    let result =
                        tokio::time::timeout(check.timeout, probe(&pool, &server, &check)).await;
                    let outcome = match result {
                        Ok(r) => r,
                        Err(_) => Err(format!("no answer within {:?}", check.timeout)),
                    };
                    pool.record_check(&server, outcome, check.rise, check.fall);
                });
            }
            while set.join_next().await.is_some() {}
        }
    })
    .abort_handle()
}

impl Pool {
    fn record_check(&self, server: &Server, outcome: Result<(), String>, rise: u32, fall: u32) {
        let m = &self.metrics;
        m.upstream_health_checks.fetch_add(1, Ordering::Relaxed);
        if outcome.is_err() {
            m.upstream_health_check_failures
                .fetch_add(1, Ordering::Relaxed);
        }
        let was_out = server.health.checked_out();
        match (server.health.checked(outcome.is_ok(), rise, fall), &outcome) {
            (Some(false), Err(e)) => {
                m.upstream_servers_out.fetch_add(1, Ordering::Relaxed);
                self.events.error(format_args!(
                    "upstream {}: server {} is out after {fall} failed health check(s): {e}",
                    self.name, server.addr
                ));
            }
            (Some(true), _) => {
                m.upstream_servers_back.fetch_add(1, Ordering::Relaxed);
                self.events.warn(format_args!(
                    "upstream {}: server {} is back after {rise} passed health check(s)",
                    self.name, server.addr
                ));
            }
            // A server in service failing a check is worth a line; one that is out
            // fails every check until it comes back, and only the operator log's
            // debug level tells each of them.
            (None, Err(e)) if !was_out => self.events.warn(format_args!(
                "upstream {}: health check of {} failed: {e}",
                self.name, server.addr
            )),
            (None, Err(e)) => tracing::debug!(
                "upstream {}: health check of {} failed: {e}",
                self.name,
                server.addr
            ),
            _ => {}
        }
    }
}

/// One check of one server.
async fn probe(pool: &Pool, server: &Server, check: &HealthCheckConfig) -> Result<(), String> {
    match check.kind {
        HealthCheckKind::Tcp => pool.connect_tcp(server).await.map(|_| ()),
        HealthCheckKind::Http => {
            let (mut conn, _) = pool.connect(server).await?;
            let host = check.host.as_deref().unwrap_or(&server.addr);
            if !crate::http::valid_value(host.as_bytes()) {
                return Err(format!("health check host {host:?} cannot be sent"));
            }
            let mut headers = crate::http::HeaderLines::with_capacity(3);
            headers.push(
                Bytes::from_static(b"host"),
                Bytes::copy_from_slice(host.as_bytes()),
            );
            headers.push(
                Bytes::from_static(b"user-agent"),
                Bytes::from_static(b"palisade-health-check"),
            );
            headers.push(
                Bytes::from_static(b"connection"),
                Bytes::from_static(b"close"),
            );
            let req = UpstreamRequest {
                method: http::Method::GET,
                uri: http::Uri::try_from(check.path.as_str()).map_err(|e| e.to_string())?,
                headers,
                body: Bytes::new(),
                client: None,
            };
            let head = conn.exchange(&req, None).await.map_err(|e| e.to_string())?;
            let status = head.status.as_u16();
            let ok = if check.expect_status.is_empty() {
                (200..400).contains(&status)
            } else {
                check.expect_status.contains(&status)
            };
            if ok {
                Ok(())
            } else {
                Err(format!("{} answered {status}", check.path))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passive_failures_within_the_window() {
        let h = Health::default();
        assert!(h.is_up());
        assert!(!h.failed(2, Duration::from_secs(10)));
        assert!(h.is_up());
        // A success in between forgets the first failure.
        h.succeeded();
        assert!(!h.failed(2, Duration::from_secs(10)));
        assert!(h.failed(2, Duration::from_secs(10)));
        assert!(!h.is_up());
        // max_fails = 0: never out.
        let h = Health::default();
        for _ in 0..10 {
            assert!(!h.failed(0, Duration::from_secs(10)));
        }
        assert!(h.is_up());
    }

    #[test]
    fn out_for_fail_timeout_only() {
        let h = Health::default();
        assert!(h.failed(1, Duration::from_millis(30)));
        assert!(!h.is_up());
        std::thread::sleep(Duration::from_millis(60));
        assert!(h.is_up());
    }

    #[test]
    fn rise_and_fall() {
        let h = Health::default();
        assert_eq!(h.checked(false, 2, 3), None);
        assert_eq!(h.checked(false, 2, 3), None);
        // A pass resets the run of failures.
        assert_eq!(h.checked(true, 2, 3), None);
        assert_eq!(h.checked(false, 2, 3), None);
        assert_eq!(h.checked(false, 2, 3), None);
        assert_eq!(h.checked(false, 2, 3), Some(false));
        assert!(!h.is_up());
        assert_eq!(h.checked(true, 2, 3), None);
        assert!(!h.is_up());
        assert_eq!(h.checked(true, 2, 3), Some(true));
        assert!(h.is_up());
    }
}
