//! Upstream events (a server taken out or brought back, failed health checks,
//! failed lookups and stale answers, changed addresses, failovers and retries).
//!
//! Each event goes to the operator log (tracing, on standard error) and, when
//! `logs.error_log` names a file, to that error log too, where an operator looks
//! for them beside the request errors: one line
//! `TIME [LEVEL] palisade: upstream POOL: WHAT`. When the error log is standard
//! error the operator log line is the only one, so nothing is written twice.

use crate::logs::LogSender;
use std::fmt::Arguments;

/// Where a pool reports its events.
#[derive(Clone, Debug, Default)]
pub(super) struct Events {
    /// The log channel, when the error log is a file.
    error_log: Option<LogSender>,
}

impl Events {
    /// Events for the error log of `log` (only when it is a file).
    pub fn new(log: Option<LogSender>) -> Events {
        Events {
            error_log: log.filter(LogSender::error_to_file),
        }
    }

    /// Something failed: a server taken out, a lookup failed.
    pub fn error(&self, what: Arguments<'_>) {
        tracing::error!("{what}");
        self.write("error", what);
    }

    /// Something to know: a failover, a retry, a server back in.
    pub fn warn(&self, what: Arguments<'_>) {
        tracing::warn!("{what}");
        self.write("warn", what);
    }

    fn write(&self, level: &str, what: Arguments<'_>) {
        if let Some(log) = &self.error_log {
            log.event(level, &what.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logs::{LogTargets, LogWriter};

    #[test]
    fn events_reach_an_error_log_file_only() {
        let dir = std::env::temp_dir().join(format!("palisade-events-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("error.log");
        let targets = LogTargets {
            error: Some(path.clone()),
            ..LogTargets::default()
        };
        let (tx, writer) = LogWriter::start(&targets, 16, Vec::new()).unwrap();
        let events = Events::new(Some(tx));
        events.error(format_args!(
            "upstream app: server 127.0.0.1:1 is out\nforged"
        ));
        events.warn(format_args!("upstream app: retrying"));
        drop(events);
        writer.finish();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines[0]
                .ends_with("[error] palisade: upstream app: server 127.0.0.1:1 is out\\nforged"),
            "{text}"
        );
        assert!(lines[1].ends_with("[warn] palisade: upstream app: retrying"));
        std::fs::remove_dir_all(&dir).unwrap();

        // Error log on standard error: nothing is queued (tracing has the line).
        let (tx, writer) = LogWriter::start(&LogTargets::default(), 16, Vec::new()).unwrap();
        assert!(Events::new(Some(tx)).error_log.is_none());
        writer.finish();
    }
}
