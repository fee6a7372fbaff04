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
//!
//! A log whose writes fail (a full disk, a file system gone read-only) loses lines,
//! but never silently: each failed write counts in [`LogStats`] (`/metrics`:
//! `palisade_log_write_errors_total{log}`), every line it held counts as dropped,
//! the operator log says so when the failure starts and when writing works again,
//! and `/status` shows the log as failing. Meanwhile the writer holds new lines (up
//! to [`HOLD_BYTES`] per log) and tries again after a back-off that doubles from
//! [`RETRY_FIRST`] to [`RETRY_MAX`]; no reopen is needed.

use flume::{Receiver, RecvTimeoutError, Sender, TrySendError};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
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
    /// Every log, in label order.
    pub const ALL: [LogKind; LOGS] = [
        LogKind::Error,
        LogKind::Access,
        LogKind::Audit,
        LogKind::Debug,
    ];

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

/// What happened to each log's lines: dropped (the writer fell behind, or a write
/// failed), write errors, and whether the log is failing now.
#[derive(Debug, Default)]
pub struct LogStats {
    dropped: [AtomicU64; LOGS],
    write_errors: [AtomicU64; LOGS],
    failing: [AtomicBool; LOGS],
    last_error: std::sync::Mutex<[Option<String>; LOGS]>,
}

impl LogStats {
    /// Lines of this log dropped so far: the writer fell behind, or a write failed.
    pub fn dropped(&self, kind: LogKind) -> u64 {
        self.dropped[kind as usize].load(Ordering::Relaxed)
    }

    /// Writes to this log that failed so far.
    pub fn write_errors(&self, kind: LogKind) -> u64 {
        self.write_errors[kind as usize].load(Ordering::Relaxed)
    }

    /// Whether this log's writes are failing now (the last one failed).
    pub fn failing(&self, kind: LogKind) -> bool {
        self.failing[kind as usize].load(Ordering::Relaxed)
    }

    /// The last write error of this log, if it had one.
    pub fn last_error(&self, kind: LogKind) -> Option<String> {
        self.last_error.lock().unwrap_or_else(|e| e.into_inner())[kind as usize].clone()
    }

    fn drop_lines(&self, kind: LogKind, n: u64) {
        self.dropped[kind as usize].fetch_add(n, Ordering::Relaxed);
    }

    /// Appends `palisade_log_lines_dropped_total{log}` and
    /// `palisade_log_write_errors_total{log}` to a metrics text.
    pub fn render(&self, out: &mut String) {
        use std::fmt::Write as _;
        out.push_str("# HELP palisade_log_lines_dropped_total Log lines lost: the writer fell behind, or a write failed.\n# TYPE palisade_log_lines_dropped_total counter\n");
        for kind in LogKind::ALL {
            let _ = writeln!(
                out,
                "palisade_log_lines_dropped_total{{log=\"{}\"}} {}",
                kind.label(),
                self.dropped(kind)
            );
        }
        out.push_str("# HELP palisade_log_write_errors_total Writes to a log that failed (each one's lines are counted as dropped).\n# TYPE palisade_log_write_errors_total counter\n");
        for kind in LogKind::ALL {
            let _ = writeln!(
                out,
                "palisade_log_write_errors_total{{log=\"{}\"}} {}",
                kind.label(),
                self.write_errors(kind)
            );
        }
    }

    /// Each log's state for `/status`: `ok` or `failing`, with its counts and last
    /// error.
    pub fn status(&self, enabled: impl Fn(LogKind) -> bool) -> serde_json::Value {
        let mut doc = serde_json::Map::new();
        for kind in LogKind::ALL {
            if !enabled(kind) {
                continue;
            }
            doc.insert(
                kind.label().to_owned(),
                serde_json::json!({
                    "state": if self.failing(kind) { "failing" } else { "ok" },
                    "lines_dropped": self.dropped(kind),
                    "write_errors": self.write_errors(kind),
                    "last_error": self.last_error(kind),
                }),
            );
        }
        serde_json::Value::Object(doc)
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
    /// Which logs have a destination (a reload may change it).
    enabled: Arc<[AtomicBool; LOGS]>,
    stats: Arc<LogStats>,
    reopen: Arc<AtomicBool>,
    error_ack: bool,
    /// The error log goes to a file (`logs.error_log`), not standard error.
    error_file: Arc<AtomicBool>,
    /// Where the logs go now, and a reload's files for the writer to take.
    targets: Arc<std::sync::Mutex<Retarget>>,
    /// The destinations off the box (started with the process; a reload keeps
    /// them).
    ship: Vec<Arc<dyn crate::logship::LineSink>>,
}

/// The destinations in force, and those a reload opened for the writer to put in
/// force (`None` per log: keep its file).
#[derive(Debug, Default)]
struct Retarget {
    current: LogTargets,
    pending: Option<[Option<Option<Sink>>; LOGS]>,
}

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sink").field("path", &self.path).finish()
    }
}

/// A reload's log files, opened but not yet in force ([`LogSender::prepare`]).
#[derive(Debug)]
pub struct PreparedLogs {
    targets: LogTargets,
    sinks: [Option<Option<Sink>>; LOGS],
    changed: usize,
}

impl PreparedLogs {
    /// How many logs change destination.
    pub fn changed(&self) -> usize {
        self.changed
    }
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
        if !self.enabled[kind as usize].load(Ordering::Relaxed) {
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
                self.stats.drop_lines(kind, 1);
            }
        }
    }

    /// True when this log has a destination.
    pub fn enabled(&self, kind: LogKind) -> bool {
        self.enabled[kind as usize].load(Ordering::Relaxed)
    }

    /// True when the error log is a file (`logs.error_log`); false when it goes to
    /// standard error, where the operator log already is.
    pub fn error_to_file(&self) -> bool {
        self.error_file.load(Ordering::Relaxed)
    }

    /// Opens the files of `targets` whose path differs from the one in force (for
    /// a reload), without changing anything yet: a file that cannot be opened is an
    /// error naming it. The files whose path is the same are kept as they are.
    pub fn prepare(&self, targets: &LogTargets) -> io::Result<PreparedLogs> {
        let current = self
            .targets
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .current
            .clone();
        let mut changed = 0;
        let mut one = |now: &Option<PathBuf>, new: &Option<PathBuf>, error: bool| {
            if now == new {
                return Ok(None);
            }
            changed += 1;
            Ok::<_, io::Error>(Some(match new {
                Some(p) => Some(Sink::file(p)?),
                None if error => Some(Sink::new(Out::Stderr, None)),
                None => None,
            }))
        };
        let sinks = [
            one(&current.error, &targets.error, true)?,
            one(&current.access, &targets.access, false)?,
            one(&current.audit, &targets.audit, false)?,
            one(&current.debug, &targets.debug, false)?,
        ];
        Ok(PreparedLogs {
            targets: targets.clone(),
            sinks,
            changed,
        })
    }

    /// Puts a reload's log files in force: the writer writes what it holds for the
    /// files it leaves, then writes to the new ones.
    pub fn apply(&self, prepared: PreparedLogs) {
        let t = &prepared.targets;
        let shipped = |k| self.ship.iter().any(|s| s.wants(k));
        let on = [
            true,
            t.access.is_some() || shipped(LogKind::Access),
            t.audit.is_some() || t.audit_files || shipped(LogKind::Audit),
            t.debug.is_some() || shipped(LogKind::Debug),
        ];
        let mut r = self.targets.lock().unwrap_or_else(|e| e.into_inner());
        r.current = prepared.targets.clone();
        if prepared.changed > 0 {
            r.pending = Some(prepared.sinks);
        }
        drop(r);
        for (flag, on) in self.enabled.iter().zip(on) {
            flag.store(on, Ordering::Relaxed);
        }
        self.error_file
            .store(prepared.targets.error.is_some(), Ordering::Relaxed);
        // Wakes the writer up at once.
        self.request_reopen();
    }

    /// Queues an event of the proxy itself (not of one request) for the error log,
    /// as `TIME [LEVEL] palisade: TEXT`, when the error log is a file; on standard
    /// error the operator log already has it. Never blocks.
    pub fn event(&self, level: &str, text: &str) {
        if self.error_to_file() {
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

    /// Asks the writer to close and reopen the log files (after log rotation): it
    /// does before it writes the next line, and within half a second when no line
    /// comes; the operator log then says `reopened N log file(s)`.
    pub fn request_reopen(&self) {
        self.reopen.store(true, Ordering::Relaxed);
    }

    /// What happened to each log's lines, for metrics and `/status`.
    pub fn stats(&self) -> &Arc<LogStats> {
        &self.stats
    }

    /// The destinations off the box (their metrics).
    pub fn line_sinks(&self) -> &[Arc<dyn crate::logship::LineSink>] {
        &self.ship
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

impl LogTargets {
    /// Checks that every log file can be opened for appending, as
    /// [`LogWriter::start`] will, without creating any: a file that exists is
    /// opened for appending (and closed); for one that does not, its directory must
    /// exist and be writable. For `palisade check`.
    pub fn check(&self) -> io::Result<()> {
        let logs = [
            ("error", &self.error),
            ("access", &self.access),
            ("audit", &self.audit),
            ("debug", &self.debug),
        ];
        for (name, path) in logs {
            let Some(p) = path else { continue };
            let named =
                |e: io::Error| io::Error::new(e.kind(), format!("{name} log {}: {e}", p.display()));
            if p.exists() {
                OpenOptions::new().append(true).open(p).map_err(named)?;
                continue;
            }
            let dir = match p.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            if !dir.is_dir() {
                return Err(named(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("directory {} does not exist", dir.display()),
                )));
            }
            use rustix::fs::{Access, access};
            access(dir, Access::WRITE_OK | Access::EXEC_OK).map_err(|e| {
                named(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!("cannot create it in {}: {e}", dir.display()),
                ))
            })?;
        }
        Ok(())
    }
}

/// The writer thread; joining it flushes everything queued.
#[derive(Debug)]
pub struct LogWriter {
    handle: Option<JoinHandle<()>>,
}

impl LogWriter {
    /// Opens the files (appending, creating them if needed) and starts the writer,
    /// which also offers each line to the destinations off the box of `ship`.
    pub fn start(
        targets: &LogTargets,
        capacity: usize,
        ship: Vec<Arc<dyn crate::logship::LineSink>>,
    ) -> io::Result<(LogSender, LogWriter)> {
        let error = match &targets.error {
            Some(p) => Sink::file(p)?,
            None => Sink::new(Out::Stderr, None),
        };
        let access = targets.access.as_deref().map(Sink::file).transpose()?;
        let audit = targets.audit.as_deref().map(Sink::file).transpose()?;
        let debug = targets.debug.as_deref().map(Sink::file).transpose()?;
        // A log a destination off the box takes is on even without a file.
        let shipped = |k| ship.iter().any(|s| s.wants(k));
        let enabled = [
            true,
            access.is_some() || shipped(LogKind::Access),
            audit.is_some() || targets.audit_files || shipped(LogKind::Audit),
            debug.is_some() || shipped(LogKind::Debug),
        ];
        let (tx, rx) = flume::bounded(capacity);
        let mut sinks = [Some(error), access, audit, debug];
        let reopen = Arc::new(AtomicBool::new(false));
        let flag = reopen.clone();
        let stats = Arc::new(LogStats::default());
        let retarget = Arc::new(std::sync::Mutex::new(Retarget {
            current: targets.clone(),
            pending: None,
        }));
        let writer = Writer {
            stats: stats.clone(),
            record_files: RecordFiles::default(),
            retarget: retarget.clone(),
            ship: ship.clone(),
        };
        let handle = std::thread::Builder::new()
            .name("palisade-log".into())
            .spawn(move || writer.run(rx, &mut sinks, &flag))?;
        Ok((
            LogSender {
                tx,
                enabled: Arc::new(enabled.map(AtomicBool::new)),
                stats,
                reopen,
                error_ack: false,
                error_file: Arc::new(AtomicBool::new(targets.error.is_some())),
                targets: retarget,
                ship,
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

fn open(p: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(p)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", p.display())))
}

/// Lines buffered per log before they are written, when writes succeed.
const BUFFER_BYTES: usize = 64 * 1024;

/// Lines held per log while its writes fail, for the next attempt; past it, new
/// lines are dropped (and counted).
pub const HOLD_BYTES: usize = 1 << 20;

/// The first wait before a failed log is written to again.
pub const RETRY_FIRST: Duration = Duration::from_secs(1);

/// The longest wait between two attempts at a failed log.
pub const RETRY_MAX: Duration = Duration::from_secs(30);

/// Where a log's bytes go.
enum Out {
    Stderr,
    File(File),
    /// A writer of the tests' own (one that fails on demand).
    #[cfg(test)]
    Test(Box<dyn Write + Send>),
}

impl Out {
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Out::Stderr => io::stderr().lock().write_all(bytes),
            Out::File(f) => f.write_all(bytes),
            #[cfg(test)]
            Out::Test(w) => w.write_all(bytes),
        }
    }
}

/// A log's destination, its buffered lines, and its failure state.
struct Sink {
    out: Out,
    path: Option<PathBuf>,
    /// Complete lines not yet written (each write takes whole lines only, so a
    /// reader tailing the log never sees half a line).
    buf: Vec<u8>,
    /// How many lines `buf` holds.
    lines: u64,
    /// While writes fail: when to try again.
    retry_at: Option<Instant>,
    /// The wait before the next attempt after a failed one.
    backoff: Duration,
    /// Lines lost since the failure began.
    lost: u64,
}

impl Sink {
    fn new(out: Out, path: Option<PathBuf>) -> Sink {
        Sink {
            out,
            path,
            buf: Vec::new(),
            lines: 0,
            retry_at: None,
            backoff: RETRY_FIRST,
            lost: 0,
        }
    }

    fn file(p: &Path) -> io::Result<Sink> {
        Ok(Sink::new(Out::File(open(p)?), Some(p.to_owned())))
    }

    fn name(&self, kind: LogKind) -> String {
        match &self.path {
            Some(p) => format!("{} log {}", kind.label(), p.display()),
            None => format!("{} log (standard error)", kind.label()),
        }
    }

    /// Adds a line; writes the buffer once it is full. A line that cannot be held
    /// (the log is failing and holds [`HOLD_BYTES`]) is dropped and counted.
    fn push(&mut self, kind: LogKind, line: &str, stats: &LogStats) {
        if self.retry_at.is_some() && self.buf.len() >= HOLD_BYTES {
            self.lost += 1;
            stats.drop_lines(kind, 1);
            return;
        }
        self.buf.extend_from_slice(line.as_bytes());
        self.buf.push(b'\n');
        self.lines += 1;
        if self.buf.len() >= BUFFER_BYTES {
            self.flush(kind, stats);
        }
    }

    /// Writes the buffered lines, unless the log is failing and its next attempt
    /// is not due. A failed write drops (and counts) the lines it held.
    fn flush(&mut self, kind: LogKind, stats: &LogStats) {
        if self.buf.is_empty() || self.retry_at.is_some_and(|t| Instant::now() < t) {
            return;
        }
        match self.out.write_all(&self.buf) {
            Ok(()) => {
                if self.retry_at.take().is_some() {
                    stats.failing[kind as usize].store(false, Ordering::Relaxed);
                    tracing::warn!(
                        "{}: writing works again; {} line(s) were lost meanwhile (counted in palisade_log_lines_dropped_total)",
                        self.name(kind),
                        self.lost
                    );
                    self.lost = 0;
                    self.backoff = RETRY_FIRST;
                }
            }
            Err(e) => {
                stats.write_errors[kind as usize].fetch_add(1, Ordering::Relaxed);
                stats.drop_lines(kind, self.lines);
                self.lost += self.lines;
                *stats
                    .last_error
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get_mut(kind as usize)
                    .expect("a log") = Some(e.to_string());
                if self.retry_at.is_none() {
                    stats.failing[kind as usize].store(true, Ordering::Relaxed);
                    tracing::error!(
                        "cannot write {}: {e}; its lines are dropped and counted until a write works again (next attempt in {:?})",
                        self.name(kind),
                        self.backoff
                    );
                } else {
                    self.backoff = (self.backoff * 2).min(RETRY_MAX);
                }
                self.retry_at = Some(Instant::now() + self.backoff);
            }
        }
        self.buf.clear();
        self.lines = 0;
    }

    /// Writes what is buffered now, then reopens the file (after rotation); a log
    /// that was failing is tried again at once. True when a file was reopened.
    fn reopen(&mut self, kind: LogKind, stats: &LogStats) -> bool {
        self.retry_at = self.retry_at.map(|_| Instant::now());
        self.flush(kind, stats);
        if let Some(p) = &self.path {
            match open(p) {
                Ok(f) => {
                    self.out = Out::File(f);
                    return true;
                }
                Err(e) => tracing::error!("cannot reopen log: {e}"),
            }
        }
        false
    }
}

/// Failures to create `Concurrent` audit record files, reported once per streak.
#[derive(Default)]
struct RecordFiles {
    failing: bool,
}

/// The writer thread's state.
struct Writer {
    stats: Arc<LogStats>,
    record_files: RecordFiles,
    /// Where a reload leaves the files it opened.
    retarget: Arc<std::sync::Mutex<Retarget>>,
    /// The destinations off the box, offered each line written.
    ship: Vec<Arc<dyn crate::logship::LineSink>>,
}

impl Writer {
    fn run(mut self, rx: Receiver<Msg>, sinks: &mut [Option<Sink>; LOGS], reopen: &AtomicBool) {
        loop {
            let next = rx.recv_timeout(Duration::from_millis(500));
            let pending = self
                .retarget
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .pending
                .take();
            if let Some(new) = pending {
                let mut files = 0;
                for ((kind, sink), new) in LogKind::ALL.into_iter().zip(sinks.iter_mut()).zip(new) {
                    let Some(new) = new else { continue };
                    if let Some(s) = sink {
                        s.retry_at = None;
                        s.flush(kind, &self.stats);
                    }
                    files += 1;
                    *sink = new;
                }
                tracing::info!("{files} log(s) changed destination");
            }
            if reopen.swap(false, Ordering::Relaxed) {
                let mut files = 0;
                for (kind, sink) in LogKind::ALL.into_iter().zip(sinks.iter_mut()) {
                    if let Some(s) = sink {
                        files += usize::from(s.reopen(kind, &self.stats));
                    }
                }
                tracing::info!("reopened {files} log file(s)");
            }
            match next {
                Ok(msg) => {
                    self.write_one(sinks, msg);
                    // Drain what is queued, then write once the channel is empty.
                    while let Ok(msg) = rx.try_recv() {
                        self.write_one(sinks, msg);
                    }
                }
                // Nothing new: a failing log's held lines are tried again when due.
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            self.flush_all(sinks);
        }
        for s in sinks.iter_mut().flatten() {
            s.retry_at = None;
        }
        self.flush_all(sinks);
    }

    fn flush_all(&self, sinks: &mut [Option<Sink>; LOGS]) {
        for (kind, sink) in LogKind::ALL.into_iter().zip(sinks.iter_mut()) {
            if let Some(s) = sink {
                s.flush(kind, &self.stats);
            }
        }
    }

    /// Writes one line; when it carries an acknowledgement, writes its log first
    /// (so the line and all before it are in the file) and then acknowledges.
    fn write_one(&mut self, sinks: &mut [Option<Sink>; LOGS], msg: Msg) {
        let i = msg.kind as usize;
        if let Some((path, content)) = &msg.file {
            // The index line is not written for a record that is not there.
            match write_record_file(path, content) {
                Ok(()) => {
                    if std::mem::take(&mut self.record_files.failing) {
                        tracing::warn!("audit record files can be written again");
                    }
                }
                Err(e) => {
                    self.stats.write_errors[i].fetch_add(1, Ordering::Relaxed);
                    self.stats.drop_lines(msg.kind, 1);
                    *self
                        .stats
                        .last_error
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get_mut(i)
                        .expect("a log") = Some(format!("{}: {e}", path.display()));
                    if !std::mem::replace(&mut self.record_files.failing, true) {
                        tracing::error!(
                            "cannot write audit record {}: {e}; such records are dropped and counted until one can be written",
                            path.display()
                        );
                    }
                    return;
                }
            }
        }
        if let Some(s) = &mut sinks[i] {
            s.push(msg.kind, &msg.line, &self.stats);
            if msg.ack.is_some() {
                s.flush(msg.kind, &self.stats);
            }
        }
        for ship in &self.ship {
            // A `Concurrent` audit record is shipped whole, not its index line.
            match &msg.file {
                Some((_, record)) => ship.offer(msg.kind, &one_line(record)),
                None => ship.offer(msg.kind, &msg.line),
            }
        }
        if let Some(ack) = msg.ack {
            let _ = ack.send(());
        }
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
        let (tx, writer) = LogWriter::start(&targets, 64, Vec::new()).unwrap();
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
        let (tx, writer) = LogWriter::start(&targets, 1, Vec::new()).unwrap();
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
        let (tx, writer) = LogWriter::start(&targets, 4, Vec::new()).unwrap();
        tx.send(LogKind::Error, "match line".into());
        tx.send(LogKind::Access, "{\"a\":1}".into());
        tx.send(LogKind::Audit, "not written: audit is off".into());
        // Fill far past the capacity; some lines may be dropped, all are accounted.
        for i in 0..10_000 {
            tx.send(LogKind::Access, format!("{i}"));
        }
        let stats = tx.stats().clone();
        drop(tx);
        writer.finish();
        let access = std::fs::read_to_string(dir.join("access.log")).unwrap();
        let written = access.lines().count() as u64;
        assert_eq!(written + stats.dropped(LogKind::Access), 10_001);
        assert_eq!(
            std::fs::read_to_string(dir.join("error.log")).unwrap(),
            "match line\n"
        );
        assert_eq!(stats.dropped(LogKind::Audit), 0);
        assert_eq!(stats.write_errors(LogKind::Access), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A writer that fails while `fail` is set, and keeps what it was given.
    struct Flaky {
        fail: Arc<AtomicBool>,
        got: Arc<std::sync::Mutex<Vec<u8>>>,
    }

    impl Write for Flaky {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            if self.fail.load(Ordering::Relaxed) {
                return Err(io::Error::new(io::ErrorKind::StorageFull, "no space left"));
            }
            self.got.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn failed_writes_are_counted_held_retried_and_recovered() {
        let fail = Arc::new(AtomicBool::new(true));
        let got = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut sink = Sink::new(
            Out::Test(Box::new(Flaky {
                fail: fail.clone(),
                got: got.clone(),
            })),
            None,
        );
        let stats = LogStats::default();
        let kind = LogKind::Access;
        for i in 0..3 {
            sink.push(kind, &format!("lost {i}"), &stats);
        }
        sink.flush(kind, &stats);
        assert_eq!(stats.write_errors(kind), 1);
        assert_eq!(stats.dropped(kind), 3, "every line of the failed write");
        assert!(stats.failing(kind));
        assert!(stats.last_error(kind).unwrap().contains("no space left"));
        // Until the retry is due, lines are held, not written or dropped.
        sink.push(kind, "held", &stats);
        sink.flush(kind, &stats);
        assert_eq!(stats.write_errors(kind), 1);
        assert_eq!(sink.lines, 1);
        // A due retry that fails drops what was held and waits longer.
        sink.retry_at = Some(Instant::now());
        sink.flush(kind, &stats);
        assert_eq!((stats.write_errors(kind), stats.dropped(kind)), (2, 4));
        assert_eq!(sink.backoff, RETRY_FIRST * 2);
        // Held lines beyond HOLD_BYTES are dropped at once.
        let long = "x".repeat(HOLD_BYTES);
        sink.push(kind, &long, &stats);
        sink.push(kind, "over the hold", &stats);
        assert_eq!(stats.dropped(kind), 5);
        // The disk has room again: the next due attempt writes what was held, and
        // the log is no longer failing.
        fail.store(false, Ordering::Relaxed);
        sink.retry_at = Some(Instant::now());
        sink.flush(kind, &stats);
        assert!(!stats.failing(kind));
        assert_eq!(sink.backoff, RETRY_FIRST);
        assert_eq!(got.lock().unwrap().len(), long.len() + 1, "the held line");
        assert_eq!(stats.dropped(kind), 5);
        // A line after recovery is written at the next flush.
        sink.push(kind, "after", &stats);
        sink.flush(kind, &stats);
        assert!(got.lock().unwrap().ends_with(b"after\n"));
        assert_eq!(stats.write_errors(kind), 2);
    }

    #[test]
    fn a_full_disk_loses_no_line_uncounted() {
        if !Path::new("/dev/full").exists() {
            return;
        }
        let targets = LogTargets {
            error: Some(PathBuf::from("/dev/full")),
            access: Some(PathBuf::from("/dev/full")),
            audit: None,
            audit_files: false,
            debug: None,
        };
        let (tx, writer) = LogWriter::start(&targets, 100_000, Vec::new()).unwrap();
        for i in 0..1000 {
            tx.send(LogKind::Access, format!("{i}"));
            tx.send(LogKind::Error, format!("{i}"));
        }
        let stats = tx.stats().clone();
        drop(tx);
        writer.finish();
        assert_eq!(stats.dropped(LogKind::Access), 1000);
        assert_eq!(stats.dropped(LogKind::Error), 1000);
        assert!(stats.write_errors(LogKind::Access) >= 1);
        assert!(stats.failing(LogKind::Access));
    }
}
