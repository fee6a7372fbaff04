//! Log lines leave the request path through one bounded channel to a writer thread.
//!
//! A request never waits for a disk: [`LogSender::send`] either queues the line or,
//! when the writer has fallen behind and the channel is full, drops it and counts
//! the drop per log (exported by `/metrics`). The writer flushes whenever the
//! channel runs empty, so match lines reach the error log promptly.
//!
//! Promptly is not always enough: a tool that reads the error log as soon as it has
//! the response (go-ftw looks for its marker lines that way) needs the request's
//! lines in the file by then. With [`LogSender::with_error_ack`] on, an error-log
//! line can carry an acknowledgement ([`LogSender::send_error`]): the writer flushes
//! the file after writing it and then resolves the [`Written`] the request waits on
//! before its response goes out.

use flume::{Receiver, RecvTimeoutError, Sender, TrySendError};
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use tokio::sync::oneshot;

/// Which log a line belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogKind {
    /// Match lines and request errors.
    Error = 0,
    /// One JSON line per request.
    Access = 1,
    /// ModSecurity audit records (or, with `SecAuditLogType Concurrent`, their index
    /// lines).
    Audit = 2,
    /// The rule engine's debug log (`SecDebugLog`).
    Debug = 3,
}

/// How many logs there are.
const LOGS: usize = 4;

impl LogKind {
    /// The label used in metrics.
    pub fn label(self) -> &'static str {
        match self {
            LogKind::Error => "error",
            LogKind::Access => "access",
            LogKind::Audit => "audit",
            LogKind::Debug => "debug",
        }
    }
}

/// Lines dropped because the writer fell behind, per log.
#[derive(Debug, Default)]
pub struct DropCounters {
    counts: [AtomicU64; LOGS],
}

impl DropCounters {
    /// Lines dropped so far for this log.
    pub fn get(&self, kind: LogKind) -> u64 {
        self.counts[kind as usize].load(Ordering::Relaxed)
    }
}

/// One line for the writer, with the acknowledgement to send once it is in the file.
struct Msg {
    kind: LogKind,
    line: String,
    ack: Option<oneshot::Sender<()>>,
    /// A file to create and fill before the line is written: a `Concurrent` audit
    /// record (path, content), whose index line is `line`.
    file: Option<(PathBuf, String)>,
}

/// Resolves once an error-log line (and every line the same request queued before
/// it) has been written and flushed to the file, or at once when the line was
/// dropped or the writer is gone: awaiting it never hangs on a lost line.
#[derive(Debug)]
pub struct Written(oneshot::Receiver<()>);

impl Written {
    /// Waits for the acknowledgement.
    pub async fn wait(self) {
        let _ = self.0.await;
    }
}

/// The request side of the log channel. Cheap to clone.
#[derive(Debug, Clone)]
pub struct LogSender {
    tx: Sender<Msg>,
    enabled: [bool; LOGS],
    drops: Arc<DropCounters>,
    reopen: Arc<AtomicBool>,
    error_ack: bool,
    /// The error log goes to a file (`logs.error_log`), not standard error.
    error_file: bool,
}

impl LogSender {
    /// Queues a line (without its newline). Never blocks; counts the line as dropped
    /// when the channel is full or the writer is gone.
    pub fn send(&self, kind: LogKind, line: String) {
        self.queue(kind, line, None, None);
    }

    /// Queues a `Concurrent` audit record: the writer creates `path` (and its
    /// directories), writes `record` into it, then appends `index_line` to the audit
    /// log when there is one. Never blocks, like [`LogSender::send`].
    pub fn send_audit_file(&self, path: PathBuf, record: String, index_line: String) {
        self.queue(LogKind::Audit, index_line, None, Some((path, record)));
    }

    /// Queues an error-log line like [`LogSender::send`]. With acknowledgements on
    /// (`logs.error_log_before_response`), also returns a [`Written`] that resolves
    /// once the line is in the file; lines are written in the order they were queued,
    /// so the last line's acknowledgement covers a request's earlier ones.
    pub fn send_error(&self, line: String, ack: bool) -> Option<Written> {
        if !(ack && self.error_ack) {
            self.send(LogKind::Error, line);
            return None;
        }
        let (tx, rx) = oneshot::channel();
        self.queue(LogKind::Error, line, Some(tx), None);
        Some(Written(rx))
    }

    /// Turns error-log acknowledgements on or off (`logs.error_log_before_response`).
    pub fn with_error_ack(mut self, on: bool) -> Self {
        self.error_ack = on;
        self
    }

    fn queue(
        &self,
        kind: LogKind,
        line: String,
        ack: Option<oneshot::Sender<()>>,
        file: Option<(PathBuf, String)>,
    ) {
        if !self.enabled[kind as usize] {
            return;
        }
        match self.tx.try_send(Msg {
            kind,
            line,
            ack,
            file,
        }) {
            Ok(()) => {}
            // The message, and with it any acknowledgement sender, is dropped: its
            // waiter resolves at once.
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.drops.counts[kind as usize].fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// True when this log has a destination.
    pub fn enabled(&self, kind: LogKind) -> bool {
        self.enabled[kind as usize]
    }

    /// True when the error log is a file (`logs.error_log`); false when it goes to
    /// standard error, where the operator log already is.
    pub fn error_to_file(&self) -> bool {
        self.error_file
    }

    /// Queues an event of the proxy itself (not of one request) for the error log,
    /// as `TIME [LEVEL] palisade: TEXT`, when the error log is a file; on standard
    /// error the operator log already has it. Never blocks.
    pub fn event(&self, level: &str, text: &str) {
        if self.error_file {
            self.send(
                LogKind::Error,
                format!(
                    "{} [{level}] palisade: {}",
                    rfc3339_micros(now_unix_micros()),
                    one_line(text)
                ),
            );
        }
    }

    /// Asks the writer to close and reopen the log files (after log rotation).
    pub fn request_reopen(&self) {
        self.reopen.store(true, Ordering::Relaxed);
    }

    /// The drop counters, for metrics.
    pub fn drops(&self) -> &Arc<DropCounters> {
        &self.drops
    }
}

/// Where each log goes.
#[derive(Debug, Clone, Default)]
pub struct LogTargets {
    /// Error log file; `None` writes it to standard error.
    pub error: Option<PathBuf>,
    /// Access log file; `None` disables it.
    pub access: Option<PathBuf>,
    /// Audit log file; `None` disables it unless `audit_files` is set.
    pub audit: Option<PathBuf>,
    /// Audit records go to files of their own (`SecAuditLogType Concurrent`): the
    /// audit log is on even without an `audit` file (which then only gets index
    /// lines).
    pub audit_files: bool,
    /// Debug log file (`SecDebugLog`); `None` disables it.
    pub debug: Option<PathBuf>,
}

/// The writer thread; joining it flushes everything queued.
#[derive(Debug)]
pub struct LogWriter {
    handle: Option<JoinHandle<()>>,
}

impl LogWriter {
    /// Opens the files (appending, creating them if needed) and starts the writer.
    pub fn start(targets: &LogTargets, capacity: usize) -> io::Result<(LogSender, LogWriter)> {
        let error: Sink = match &targets.error {
            Some(p) => Sink::File(open(p)?),
            None => Sink::Stderr,
        };
        let access = targets.access.as_deref().map(open).transpose()?;
        let audit = targets.audit.as_deref().map(open).transpose()?;
        let debug = targets.debug.as_deref().map(open).transpose()?;
        let enabled = [
            true,
            access.is_some(),
            audit.is_some() || targets.audit_files,
            debug.is_some(),
        ];
        let (tx, rx) = flume::bounded(capacity);
        let mut sinks = [
            Some(error),
            access.map(Sink::File),
            audit.map(Sink::File),
            debug.map(Sink::File),
        ];
        let reopen = Arc::new(AtomicBool::new(false));
        let flag = reopen.clone();
        let paths = targets.clone();
        let handle = std::thread::Builder::new()
            .name("palisade-log".into())
            .spawn(move || writer_loop(rx, &mut sinks, &flag, &paths))?;
        Ok((
            LogSender {
                tx,
                enabled,
                drops: Arc::new(DropCounters::default()),
                reopen,
                error_ack: false,
                error_file: targets.error.is_some(),
            },
            LogWriter {
                handle: Some(handle),
            },
        ))
    }

    /// Waits for the writer to drain the channel and flush. Every `LogSender` must
    /// have been dropped first, or this waits for them.
    pub fn finish(mut self) {
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn open(p: &Path) -> io::Result<BufWriter<File>> {
    let f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(p)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", p.display())))?;
    Ok(BufWriter::with_capacity(64 * 1024, f))
}

enum Sink {
    Stderr,
    File(BufWriter<File>),
}

impl Sink {
    fn write_line(&mut self, line: &str) -> io::Result<()> {
        match self {
            Sink::Stderr => {
                let mut e = io::stderr().lock();
                e.write_all(line.as_bytes())?;
                e.write_all(b"\n")
            }
            Sink::File(f) => {
                // One write per line, newline included: the buffer then only ever goes
                // to the file at line boundaries, so a reader tailing the log (go-ftw
                // looks for its marker lines) never sees half a line.
                let mut buf = Vec::with_capacity(line.len() + 1);
                buf.extend_from_slice(line.as_bytes());
                buf.push(b'\n');
                f.write_all(&buf)
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::Stderr => Ok(()),
            Sink::File(f) => f.flush(),
        }
    }
}

fn reopen_files(sinks: &mut [Option<Sink>; LOGS], paths: &LogTargets) {
    let wanted = [&paths.error, &paths.access, &paths.audit, &paths.debug];
    for (sink, path) in sinks.iter_mut().zip(wanted) {
        if let (Some(Sink::File(f)), Some(p)) = (sink.as_mut(), path) {
            let _ = f.flush();
            match open(p) {
                Ok(new) => *f = new,
                Err(e) => tracing::error!("cannot reopen log: {e}"),
            }
        }
    }
}

fn writer_loop(
    rx: Receiver<Msg>,
    sinks: &mut [Option<Sink>; LOGS],
    reopen: &AtomicBool,
    paths: &LogTargets,
) {
    let mut failed = [false; LOGS];
    loop {
        let next = rx.recv_timeout(std::time::Duration::from_millis(500));
        if reopen.swap(false, Ordering::Relaxed) {
            reopen_files(sinks, paths);
            failed = [false; LOGS];
        }
        let msg = match next {
            Ok(x) => x,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        write_one(sinks, &mut failed, msg);
        // Drain what is queued, then flush once the channel is empty.
        while let Ok(msg) = rx.try_recv() {
            write_one(sinks, &mut failed, msg);
        }
        for (i, s) in sinks.iter_mut().enumerate() {
            if let Some(s) = s {
                flush_one(s, &mut failed[i]);
            }
        }
    }
    for s in sinks.iter_mut().flatten() {
        let _ = s.flush();
    }
}

fn flush_one(s: &mut Sink, failed: &mut bool) {
    if let Err(e) = s.flush()
        && !*failed
    {
        *failed = true;
        tracing::error!("cannot write log: {e}");
    }
}

/// Writes one line; when it carries an acknowledgement, flushes its log first (so
/// the line and all before it are in the file) and then acknowledges.
fn write_one(sinks: &mut [Option<Sink>; LOGS], failed: &mut [bool; LOGS], msg: Msg) {
    let i = msg.kind as usize;
    if let Some((path, content)) = &msg.file {
        if let Err(e) = write_record_file(path, content) {
            // Counted once per failure streak, like a failing log file; the index
            // line is not written for a record that is not there.
            if !failed[i] {
                failed[i] = true;
                tracing::error!("cannot write audit record {}: {e}", path.display());
            }
            return;
        }
    }
    if let Some(s) = &mut sinks[i] {
        if let Err(e) = s.write_line(&msg.line)
            && !failed[i]
        {
            failed[i] = true;
            tracing::error!("cannot write {} log: {e}", msg.kind.label());
        }
        if msg.ack.is_some() {
            flush_one(s, &mut failed[i]);
        }
    }
    if let Some(ack) = msg.ack {
        let _ = ack.send(());
    }
}

/// Creates a `Concurrent` audit record's file (and its directories), never
/// overwriting one that exists.
fn write_record_file(path: &Path, content: &str) -> io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut f = OpenOptions::new().create_new(true).write(true).open(path)?;
    f.write_all(content.as_bytes())?;
    f.write_all(b"\n")
}

/// Replaces line breaks so that a value can never split a log line.
pub fn one_line(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains(['\n', '\r']) {
        std::borrow::Cow::Owned(s.replace('\n', "\\n").replace('\r', "\\r"))
    } else {
        std::borrow::Cow::Borrowed(s)
    }
}

/// Formats a Unix time in microseconds as RFC 3339 UTC with microseconds.
pub fn rfc3339_micros(unix_micros: i64) -> String {
    let secs = unix_micros.div_euclid(1_000_000);
    let micros = unix_micros.rem_euclid(1_000_000);
    let t = engine::civil::UtcTime::from_unix(secs);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{micros:06}Z",
        t.year, t.month, t.day, t.hour, t.minute, t.second
    )
}

/// The current Unix time in microseconds.
pub fn now_unix_micros() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_times() {
        assert_eq!(rfc3339_micros(0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(
            rfc3339_micros(1_709_251_199_123_456),
            "2024-02-29T23:59:59.123456Z"
        );
        assert_eq!(
            rfc3339_micros(951_782_400_000_001),
            "2000-02-29T00:00:00.000001Z"
        );
    }

    #[test]
    fn one_line_escapes_breaks() {
        assert_eq!(one_line("a\nb\rc"), "a\\nb\\rc");
        assert!(matches!(one_line("abc"), std::borrow::Cow::Borrowed(_)));
    }

    #[test]
    fn acknowledged_lines_are_in_the_file_when_the_ack_arrives() {
        let dir = std::env::temp_dir().join(format!("palisade-ack-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let targets = LogTargets {
            error: Some(dir.join("error.log")),
            access: None,
            audit: None,
            audit_files: false,
            debug: None,
        };
        let (tx, writer) = LogWriter::start(&targets, 64).unwrap();
        // Off: no acknowledgement is handed out.
        assert!(tx.send_error("plain".into(), true).is_none());
        let tx = tx.with_error_ack(true);
        // Not asked for on this line.
        assert!(tx.send_error("first".into(), false).is_none());
        for round in 0..200 {
            let w = tx
                .send_error(format!("line {round}"), true)
                .expect("acknowledgement");
            w.0.blocking_recv().expect("acknowledged, not dropped");
            let text = std::fs::read_to_string(dir.join("error.log")).unwrap();
            assert!(text.starts_with("plain\nfirst\n"), "{text}");
            assert!(text.ends_with(&format!("line {round}\n")), "{text}");
        }
        drop(tx);
        writer.finish();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_dropped_line_does_not_leave_its_waiter_hanging() {
        let dir = std::env::temp_dir().join(format!("palisade-ackdrop-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let targets = LogTargets {
            error: Some(dir.join("error.log")),
            access: None,
            audit: None,
            audit_files: false,
            debug: None,
        };
        let (tx, writer) = LogWriter::start(&targets, 1).unwrap();
        let tx = tx.with_error_ack(true);
        // With room for one line, most of these are dropped; every waiter resolves.
        let waiters: Vec<Written> = (0..1000)
            .filter_map(|i| tx.send_error(format!("{i}"), true))
            .collect();
        assert_eq!(waiters.len(), 1000);
        for w in waiters {
            let _ = w.0.blocking_recv();
        }
        drop(tx);
        writer.finish();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn lines_are_written_and_drops_counted() {
        let dir = std::env::temp_dir().join(format!("palisade-logs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let targets = LogTargets {
            error: Some(dir.join("error.log")),
            access: Some(dir.join("access.log")),
            audit: None,
            audit_files: false,
            debug: None,
        };
        let (tx, writer) = LogWriter::start(&targets, 4).unwrap();
        tx.send(LogKind::Error, "match line".into());
        tx.send(LogKind::Access, "{\"a\":1}".into());
        tx.send(LogKind::Audit, "not written: audit is off".into());
        // Fill far past the capacity; some lines may be dropped, all are accounted.
        for i in 0..10_000 {
            tx.send(LogKind::Access, format!("{i}"));
        }
        let drops = tx.drops().clone();
        drop(tx);
        writer.finish();
        let access = std::fs::read_to_string(dir.join("access.log")).unwrap();
        let written = access.lines().count() as u64;
        assert_eq!(written + drops.get(LogKind::Access), 10_001);
        assert_eq!(
            std::fs::read_to_string(dir.join("error.log")).unwrap(),
            "match line\n"
        );
        assert_eq!(drops.get(LogKind::Audit), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
