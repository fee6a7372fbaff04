//! What became of configuration reloads, and how the admin API asks for one.
//!
//! A reload (SIGHUP, or `POST /reload` on the admin listener) runs on the main
//! thread's event loop, one at a time; each ends in an [`Outcome`]: in force, or
//! failed with the error that kept the configuration in force. [`ReloadState`]
//! keeps the last one and the counts for `/status` and `/metrics`
//! (`palisade_config_last_reload_success`,
//! `palisade_config_last_reload_timestamp_seconds`, ...); [`ReloadHandle`] is how
//! the admin API queues a reload and waits for its outcome.

use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, oneshot};

/// What asked for a reload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// SIGHUP (`systemctl reload`, `kill -HUP`).
    Signal,
    /// `POST /reload` on the admin listener.
    Admin,
}

impl Trigger {
    /// The name shown in `/status` and the logs.
    pub fn name(self) -> &'static str {
        match self {
            Trigger::Signal => "SIGHUP",
            Trigger::Admin => "admin API",
        }
    }
}

/// How one reload ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// What asked for it.
    pub trigger: Trigger,
    /// When it ended, as Unix seconds.
    pub at: f64,
    /// How long reading and compiling took.
    pub duration: Duration,
    /// `None`: the new configuration is in force. `Some`: why it failed (the
    /// configuration in force stayed).
    pub error: Option<String>,
    /// With a reload in force: rules loaded and the SHA-256 of the rule set.
    pub rules: Option<(usize, String)>,
    /// Sections that changed in the file but take effect only on restart.
    pub restart_needed: Vec<&'static str>,
}

impl Outcome {
    /// A reload in force with `rules` rules of hash `sha256`.
    pub fn ok(
        trigger: Trigger,
        duration: Duration,
        rules: usize,
        sha256: String,
        restart_needed: Vec<&'static str>,
    ) -> Outcome {
        Outcome {
            trigger,
            at: unix_now(),
            duration,
            error: None,
            rules: Some((rules, sha256)),
            restart_needed,
        }
    }

    /// A reload that failed for `error`.
    pub fn failed(trigger: Trigger, duration: Duration, error: String) -> Outcome {
        Outcome {
            trigger,
            at: unix_now(),
            duration,
            error: Some(error),
            rules: None,
            restart_needed: Vec::new(),
        }
    }

    /// True when the new configuration is in force.
    pub fn is_ok(&self) -> bool {
        self.error.is_none()
    }

    /// The outcome as JSON, for `/status` and the reply of `POST /reload`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut doc = serde_json::json!({
            "ok": self.is_ok(),
            "trigger": self.trigger.name(),
            "timestamp_seconds": self.at,
            "time": crate::logs::rfc3339_micros((self.at * 1e6) as i64),
            "duration_seconds": self.duration.as_secs_f64(),
            "error": self.error,
        });
        if let Some((count, sha)) = &self.rules {
            doc["rules"] = serde_json::json!({ "count": count, "sha256": sha });
        }
        if self.is_ok() {
            doc["restart_needed"] = serde_json::json!(self.restart_needed);
        } else {
            doc["kept"] = "the configuration in force stays".into();
        }
        doc
    }
}

/// Seconds since the Unix epoch, now.
fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

#[derive(Debug)]
struct Inner {
    /// When the configuration in force was loaded (start, or the last reload in
    /// force), as Unix seconds.
    loaded_at: f64,
    last: Option<Outcome>,
    succeeded: u64,
    failed: u64,
}

/// The last reload's outcome and the counts, shared by the main loop (which
/// records) and the admin API (which shows them).
#[derive(Debug)]
pub struct ReloadState(Mutex<Inner>);

impl Default for ReloadState {
    fn default() -> Self {
        ReloadState::new()
    }
}

impl ReloadState {
    /// No reload yet; the configuration in force was loaded now.
    pub fn new() -> ReloadState {
        ReloadState(Mutex::new(Inner {
            loaded_at: unix_now(),
            last: None,
            succeeded: 0,
            failed: 0,
        }))
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records how a reload ended.
    pub fn record(&self, outcome: &Outcome) {
        let mut i = self.inner();
        if outcome.is_ok() {
            i.succeeded += 1;
            i.loaded_at = outcome.at;
        } else {
            i.failed += 1;
        }
        i.last = Some(outcome.clone());
    }

    /// The last reload's outcome, if there was one.
    pub fn last(&self) -> Option<Outcome> {
        self.inner().last.clone()
    }

    /// The `reload` object of `/status`: `last_reload` (`null` before the first),
    /// `config_loaded_timestamp_seconds`, `reloads_succeeded`, `reloads_failed`.
    pub fn status(&self) -> serde_json::Value {
        let i = self.inner();
        serde_json::json!({
            "last": i.last.as_ref().map(Outcome::to_json),
            "config_loaded_timestamp_seconds": i.loaded_at,
            "succeeded": i.succeeded,
            "failed": i.failed,
        })
    }

    /// Appends the reload series to a metrics text:
    /// `palisade_config_last_reload_success` (1 before the first reload, as the
    /// start loaded the configuration), `palisade_config_last_reload_timestamp_seconds`
    /// (0 before the first reload), `palisade_config_last_reload_success_timestamp_seconds`
    /// (when the configuration in force was loaded) and
    /// `palisade_config_reloads_total{result="success|failure"}`.
    pub fn render(&self, out: &mut String) {
        use std::fmt::Write as _;
        let i = self.inner();
        let (ok, at) = match &i.last {
            Some(o) => (u8::from(o.is_ok()), o.at),
            None => (1, 0.0),
        };
        let _ = write!(
            out,
            "# HELP palisade_config_last_reload_success Whether the last reload put its configuration in force (1) or failed and kept the one in force (0); 1 before any reload.\n\
             # TYPE palisade_config_last_reload_success gauge\n\
             palisade_config_last_reload_success {ok}\n\
             # HELP palisade_config_last_reload_timestamp_seconds When the last reload ended, in Unix seconds; 0 before any reload.\n\
             # TYPE palisade_config_last_reload_timestamp_seconds gauge\n\
             palisade_config_last_reload_timestamp_seconds {at}\n\
             # HELP palisade_config_last_reload_success_timestamp_seconds When the configuration in force was loaded (start or reload), in Unix seconds.\n\
             # TYPE palisade_config_last_reload_success_timestamp_seconds gauge\n\
             palisade_config_last_reload_success_timestamp_seconds {}\n\
             # HELP palisade_config_reloads_total Reloads (SIGHUP or POST /reload), by result.\n\
             # TYPE palisade_config_reloads_total counter\n\
             palisade_config_reloads_total{{result=\"success\"}} {}\n\
             palisade_config_reloads_total{{result=\"failure\"}} {}\n",
            i.loaded_at, i.succeeded, i.failed
        );
    }
}

/// A reload asked for through the admin API: the main loop runs it and sends the
/// outcome back.
#[derive(Debug)]
pub struct ReloadRequest {
    /// Where the outcome goes.
    pub reply: oneshot::Sender<Outcome>,
}

/// Why a reload could not be asked for.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The main loop is gone (shutdown began).
    #[error("the proxy is shutting down; no reload")]
    ShuttingDown,
    /// Reloads already wait to run.
    #[error("{0} reloads already wait to run; try again once they are done")]
    Busy(usize),
}

/// How the admin API asks the main loop for a reload. Cheap to clone.
#[derive(Debug, Clone)]
pub struct ReloadHandle(mpsc::Sender<ReloadRequest>);

/// Reloads that may wait for the main loop at once; more are refused as busy.
pub const QUEUE: usize = 4;

impl ReloadHandle {
    /// A handle and the receiving end the main loop reads.
    pub fn channel() -> (ReloadHandle, mpsc::Receiver<ReloadRequest>) {
        let (tx, rx) = mpsc::channel(QUEUE);
        (ReloadHandle(tx), rx)
    }

    /// Queues a reload and waits for its outcome.
    pub async fn reload(&self) -> Result<Outcome, ReloadError> {
        let (tx, rx) = oneshot::channel();
        self.0
            .try_send(ReloadRequest { reply: tx })
            .map_err(|e| match e {
                mpsc::error::TrySendError::Full(_) => ReloadError::Busy(QUEUE),
                mpsc::error::TrySendError::Closed(_) => ReloadError::ShuttingDown,
            })?;
        rx.await.map_err(|_| ReloadError::ShuttingDown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(text: &str, name: &str) -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap()
    }

    #[test]
    fn metrics_follow_the_last_reload() {
        let s = ReloadState::new();
        let mut m = String::new();
        s.render(&mut m);
        assert_eq!(series(&m, "palisade_config_last_reload_success"), 1.0);
        assert_eq!(
            series(&m, "palisade_config_last_reload_timestamp_seconds"),
            0.0
        );
        assert!(s.status()["last"].is_null());

        let bad = Outcome::failed(Trigger::Admin, Duration::ZERO, "x.conf:1: no".into());
        s.record(&bad);
        let mut m = String::new();
        s.render(&mut m);
        assert_eq!(series(&m, "palisade_config_last_reload_success"), 0.0);
        assert!(series(&m, "palisade_config_last_reload_timestamp_seconds") > 1e9);
        assert_eq!(
            series(&m, "palisade_config_reloads_total{result=\"failure\"}"),
            1.0
        );
        let st = s.status();
        assert_eq!(st["last"]["error"], "x.conf:1: no");
        assert_eq!(st["last"]["ok"], false);
        assert_eq!(st["last"]["trigger"], "admin API");

        let good = Outcome::ok(Trigger::Signal, Duration::ZERO, 3, "ab".into(), vec![]);
        s.record(&good);
        let mut m = String::new();
        s.render(&mut m);
        assert_eq!(series(&m, "palisade_config_last_reload_success"), 1.0);
        assert_eq!(
            series(&m, "palisade_config_reloads_total{result=\"success\"}"),
            1.0
        );
        assert_eq!(
            series(&m, "palisade_config_last_reload_success_timestamp_seconds"),
            good.at
        );
        assert_eq!(s.status()["last"]["rules"]["count"], 3);
    }

    #[tokio::test]
    async fn requests_reach_the_main_loop_and_get_their_outcome() {
        let (h, mut rx) = ReloadHandle::channel();
        tokio::spawn(async move {
            while let Some(r) = rx.recv().await {
                let _ = r
                    .reply
                    .send(Outcome::failed(Trigger::Admin, Duration::ZERO, "e".into()));
            }
        });
        let o = h.reload().await.unwrap();
        assert_eq!(o.error.as_deref(), Some("e"));
        let (h, rx) = ReloadHandle::channel();
        drop(rx);
        assert!(matches!(h.reload().await, Err(ReloadError::ShuttingDown)));
    }
}
