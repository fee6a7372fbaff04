//! Logs shipped off the box: each `[[syslog]]` receiver gets the access, audit and
//! error lines it asks for as RFC 5424 messages over UDP, TCP or TLS (RFC 5425;
//! TCP and TLS frame each message by its length, RFC 6587 octet counting).
//!
//! Never on the request path: the log writer thread offers each line it writes
//! to every receiver's bounded queue and goes on; a full queue drops the line and
//! counts it. One thread per receiver sends what its queue holds. When a TCP or
//! TLS receiver is away, the thread reconnects with a growing back-off (0.5 s to
//! 5 s) while the queue holds what comes (up to `queue` lines, then the newest
//! are dropped and counted); what was queued is sent when the receiver returns.
//! UDP has no connection and no acknowledgement: a datagram the system refuses is
//! counted as an error.

use crate::config::{SyslogSection, SyslogTransport};
use crate::logs::LogKind;
use crate::metrics::{Collector, Exposition};
use crate::shipqueue::{Backoff, ShipQueue};
use std::io::Write as _;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The longest message sent, in bytes (longer lines are cut at a character
/// boundary; audit records can be large).
pub const MAX_MESSAGE: usize = 64 * 1024;

/// The longest UDP datagram's message (a datagram over the path MTU is
/// fragmented; receivers commonly take at least 8 KiB).
pub const MAX_UDP_MESSAGE: usize = 8 * 1024;

/// The most lines one write to a TCP or TLS receiver carries.
const BATCH: usize = 128;

/// How long the sender waits for a batch to fill before it sends what it has: a
/// line reaches the receiver at most this late, and a busy proxy makes one write
/// per batch instead of one per line.
const LINGER: Duration = Duration::from_millis(50);

/// How long a connection attempt or a write may take.
const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a receiver could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ShipError {
    /// The TLS settings could not be used.
    #[error("[[syslog]] {address}: {reason}")]
    Tls {
        /// The receiver.
        address: SocketAddr,
        /// What went wrong.
        reason: String,
    },
    /// The sending thread could not start.
    #[error("[[syslog]] {address}: starting its thread: {source}")]
    Thread {
        /// The receiver.
        address: SocketAddr,
        /// The error.
        source: std::io::Error,
    },
}

/// Where the log writer hands each line it writes, besides the log's file: a
/// destination off the box (the `[[syslog]]` receivers, the OTLP exporter). It
/// must never wait; its metrics are its [`Collector`].
pub trait LineSink: Collector + std::fmt::Debug {
    /// Whether it takes lines of `kind` (a log it takes is produced even without
    /// a file of its own).
    fn wants(&self, kind: LogKind) -> bool;
    /// Offers one line; never waits (a full queue drops it and counts it).
    fn offer(&self, kind: LogKind, line: &str);
}

/// One receiver's counters.
#[derive(Debug, Default)]
pub struct ShipStats {
    /// Messages sent.
    pub sent: AtomicU64,
    /// Failed connections and writes.
    pub errors: AtomicU64,
    /// Whether a TCP or TLS connection is up (UDP: always).
    pub connected: AtomicBool,
}

/// One receiver.
#[derive(Debug)]
struct Receiver {
    cfg: SyslogSection,
    kinds: [bool; 4],
    queue: Arc<ShipQueue<(LogKind, Arc<str>)>>,
    stats: Arc<ShipStats>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// Every `[[syslog]]` receiver.
#[derive(Debug, Default)]
pub struct Shippers {
    receivers: Vec<Receiver>,
}

impl Shippers {
    /// Starts one thread per receiver.
    pub fn start(sections: &[SyslogSection]) -> Result<Shippers, ShipError> {
        let host = rustix::system::uname()
            .nodename()
            .to_string_lossy()
            .into_owned();
        let mut receivers = Vec::new();
        for cfg in sections {
            let tls = match cfg.transport {
                SyslogTransport::Tls => Some(tls_config(cfg)?),
                _ => None,
            };
            let queue = Arc::new(ShipQueue::new(cfg.queue));
            let stats = Arc::new(ShipStats::default());
            let sender = Sender {
                cfg: cfg.clone(),
                host: host.clone(),
                tls,
                queue: queue.clone(),
                stats: stats.clone(),
            };
            let thread = std::thread::Builder::new()
                .name("palisade-syslog".into())
                .spawn(move || sender.run())
                .map_err(|source| ShipError::Thread {
                    address: cfg.address,
                    source,
                })?;
            receivers.push(Receiver {
                kinds: LogKind::ALL.map(|k| cfg.logs.iter().any(|l| l == k.label())),
                cfg: cfg.clone(),
                queue,
                stats,
                thread: Mutex::new(Some(thread)),
            });
        }
        Ok(Shippers { receivers })
    }

    /// Stops the threads after they sent what they could of their queues (each
    /// gets at most a few seconds).
    pub fn finish(&self) {
        for r in &self.receivers {
            r.queue.finish();
        }
        for r in &self.receivers {
            let t = r.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(t) = t {
                let _ = t.join();
            }
        }
    }
}

impl LineSink for Shippers {
    fn wants(&self, kind: LogKind) -> bool {
        self.receivers.iter().any(|r| r.kinds[kind as usize])
    }

    fn offer(&self, kind: LogKind, line: &str) {
        for r in self.receivers.iter().filter(|r| r.kinds[kind as usize]) {
            r.queue.push((kind, Arc::from(line)), BATCH);
        }
    }
}

impl Collector for Shippers {
    fn collect(&self, out: &mut Exposition) {
        if self.receivers.is_empty() {
            return;
        }
        type Value = fn(&ShipStats, &ShipQueue<(LogKind, Arc<str>)>) -> f64;
        let series: [(&str, &str, &str, Value); 5] = [
            (
                "palisade_syslog_sent_total",
                "counter",
                "Log lines sent to a [[syslog]] receiver.",
                |s, _| s.sent.load(Ordering::Relaxed) as f64,
            ),
            (
                "palisade_syslog_dropped_total",
                "counter",
                "Log lines a [[syslog]] receiver lost because its queue was full.",
                |_, q| q.dropped() as f64,
            ),
            (
                "palisade_syslog_errors_total",
                "counter",
                "Failed connections and writes to a [[syslog]] receiver.",
                |s, _| s.errors.load(Ordering::Relaxed) as f64,
            ),
            (
                "palisade_syslog_connected",
                "gauge",
                "1 while the connection to a [[syslog]] receiver is up (UDP: always).",
                |s, _| f64::from(u8::from(s.connected.load(Ordering::Relaxed))),
            ),
            (
                "palisade_syslog_queued",
                "gauge",
                "Log lines waiting to be sent to a [[syslog]] receiver.",
                |_, q| q.len() as f64,
            ),
        ];
        for (name, kind, help, value) in series {
            out.family(name, kind, help);
            for r in &self.receivers {
                let receiver = format!("{}/{}", r.cfg.transport.label(), r.cfg.address);
                out.sample(name, &[("receiver", &receiver)], value(&r.stats, &r.queue));
            }
        }
    }
}

/// Checks what [`Shippers::start`] would refuse, without starting anything: the
/// TLS settings of each `tls` receiver (for `palisade check`).
pub fn check(sections: &[SyslogSection]) -> Result<(), ShipError> {
    for cfg in sections {
        if cfg.transport == SyslogTransport::Tls {
            tls_config(cfg)?;
        }
    }
    Ok(())
}

/// The client configuration of a TLS receiver: its `tls_ca_file`, or the system's
/// roots.
fn tls_config(cfg: &SyslogSection) -> Result<Arc<rustls::ClientConfig>, ShipError> {
    crate::tls::client::client_config(cfg.tls_ca_file.as_deref())
        .map(Arc::new)
        .map_err(|e| ShipError::Tls {
            address: cfg.address,
            reason: match e {
                crate::tls::client::ClientTlsError::Rustls(_) => e.to_string(),
                _ => format!("tls_ca_file {e}"),
            },
        })
}

/// The syslog severity of a log's lines.
fn severity(kind: LogKind) -> u8 {
    match kind {
        LogKind::Error => 4,  // warning: match lines and request errors
        LogKind::Audit => 5,  // notice
        LogKind::Access => 6, // informational
        LogKind::Debug => 7,  // debug
    }
}

/// One RFC 5424 message: `<PRI>1 TIMESTAMP HOST APP PROCID MSGID - MSG`, with the
/// log's name as MSGID and the line, cut to `max` bytes, as MSG.
pub fn format_message(
    facility: u8,
    kind: LogKind,
    host: &str,
    app: &str,
    line: &str,
    unix_micros: i64,
    max: usize,
) -> String {
    let mut out = String::new();
    let fields = header_fields(host, app);
    append_message(
        &mut out,
        facility,
        kind,
        &fields,
        &crate::logs::rfc3339_micros(unix_micros),
        line,
        max,
    );
    out
}

/// The HOSTNAME, APP-NAME and PROCID fields of every message, made once per
/// receiver.
fn header_fields(host: &str, app: &str) -> String {
    format!(
        "{} {} {}",
        header_field(host),
        header_field(app),
        std::process::id()
    )
}

/// Appends one message to `out`: `fields` from [`header_fields`], `stamp` its
/// time, `line` cut so that the message is at most `max` bytes.
fn append_message(
    out: &mut String,
    facility: u8,
    kind: LogKind,
    fields: &str,
    stamp: &str,
    line: &str,
    max: usize,
) {
    let start = out.len();
    let pri = u16::from(facility) * 8 + u16::from(severity(kind));
    out.push('<');
    out.push_str(itoa::Buffer::new().format(pri));
    out.push_str(">1 ");
    for part in [stamp, " ", fields, " ", kind.label(), " - "] {
        out.push_str(part);
    }
    let head = out.len() - start;
    let mut at = line.len().min(max.saturating_sub(head));
    while !line.is_char_boundary(at) {
        at -= 1;
    }
    out.push_str(&line[..at]);
}

/// A header field: printable ASCII without spaces, at most 48 bytes, `-` when
/// empty (RFC 5424's NILVALUE).
fn header_field(s: &str) -> String {
    let f: String = s
        .chars()
        .filter(|c| c.is_ascii_graphic())
        .take(48)
        .collect();
    if f.is_empty() { "-".into() } else { f }
}

/// A connection to a TCP or TLS receiver.
enum Conn {
    Tcp(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Conn {
    fn write_all(&mut self, b: &[u8]) -> std::io::Result<()> {
        match self {
            Conn::Tcp(s) => s.write_all(b),
            Conn::Tls(s) => {
                s.write_all(b)?;
                s.flush()
            }
        }
    }
}

/// One receiver's thread.
struct Sender {
    cfg: SyslogSection,
    host: String,
    tls: Option<Arc<rustls::ClientConfig>>,
    queue: Arc<ShipQueue<(LogKind, Arc<str>)>>,
    stats: Arc<ShipStats>,
}

impl Sender {
    fn run(self) {
        let mut conn: Option<Conn> = None;
        let udp = match self.cfg.transport {
            SyslogTransport::Udp => {
                let bind: SocketAddr = if self.cfg.address.is_ipv4() {
                    "0.0.0.0:0".parse().expect("an address")
                } else {
                    "[::]:0".parse().expect("an address")
                };
                match UdpSocket::bind(bind) {
                    Ok(s) => {
                        self.stats.connected.store(true, Ordering::Relaxed);
                        Some(s)
                    }
                    Err(e) => {
                        tracing::error!("[[syslog]] {}: no UDP socket: {e}", self.cfg.address);
                        return;
                    }
                }
            }
            _ => None,
        };
        let mut backoff = Backoff::new();
        let fields = header_fields(&self.host, &self.cfg.app_name);
        let facility = self.cfg.facility_code();
        let (mut message, mut framed) = (String::new(), Vec::<u8>::new());
        loop {
            let (batch, finishing) = self.queue.front(BATCH, BATCH, Some(LINGER));
            if batch.is_empty() {
                if finishing {
                    return;
                }
                continue;
            }
            let stamp = crate::logs::rfc3339_micros(crate::logs::now_unix_micros());
            let sent = match &udp {
                // One datagram per line; a datagram is not sent again: one the
                // system refuses is lost, and counted.
                Some(sock) => {
                    for (kind, line) in &batch {
                        message.clear();
                        append_message(
                            &mut message,
                            facility,
                            *kind,
                            &fields,
                            &stamp,
                            line,
                            MAX_UDP_MESSAGE,
                        );
                        match sock.send_to(message.as_bytes(), self.cfg.address) {
                            Ok(_) => self.stats.sent.fetch_add(1, Ordering::Relaxed),
                            Err(_) => self.stats.errors.fetch_add(1, Ordering::Relaxed),
                        };
                    }
                    self.queue.remove_front(batch.len());
                    continue;
                }
                // The whole batch in one write, each message framed by its
                // length (RFC 6587 octet counting).
                None => {
                    framed.clear();
                    for (kind, line) in &batch {
                        message.clear();
                        append_message(
                            &mut message,
                            facility,
                            *kind,
                            &fields,
                            &stamp,
                            line,
                            MAX_MESSAGE,
                        );
                        framed.extend_from_slice(
                            itoa::Buffer::new().format(message.len()).as_bytes(),
                        );
                        framed.push(b' ');
                        framed.extend_from_slice(message.as_bytes());
                    }
                    self.connected(&mut conn).and_then(|c| c.write_all(&framed))
                }
            };
            match sent {
                Ok(()) => {
                    backoff.reset();
                    self.stats
                        .sent
                        .fetch_add(batch.len() as u64, Ordering::Relaxed);
                    self.queue.remove_front(batch.len());
                }
                Err(e) => {
                    self.stats.errors.fetch_add(1, Ordering::Relaxed);
                    if self.stats.connected.swap(false, Ordering::Relaxed) {
                        tracing::warn!(
                            "[[syslog]] {}: {e}; lines are queued (at most {}) until it is back",
                            self.cfg.address,
                            self.cfg.queue
                        );
                    }
                    conn = None;
                    if finishing {
                        // Shutting down: what is still queued is lost, and counted.
                        self.queue.drop_all();
                        return;
                    }
                    self.queue.pause(backoff.next_wait());
                }
            }
        }
    }

    /// The connection, made now when there is none.
    fn connected<'c>(&self, conn: &'c mut Option<Conn>) -> std::io::Result<&'c mut Conn> {
        if conn.is_none() {
            let tcp = TcpStream::connect_timeout(&self.cfg.address, IO_TIMEOUT)?;
            tcp.set_write_timeout(Some(IO_TIMEOUT))?;
            tcp.set_nodelay(true)?;
            let c = match &self.tls {
                None => Conn::Tcp(tcp),
                Some(tls) => {
                    let name = self
                        .cfg
                        .server_name
                        .clone()
                        .unwrap_or_else(|| self.cfg.address.ip().to_string());
                    let name = rustls::pki_types::ServerName::try_from(name)
                        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
                    let client = rustls::ClientConnection::new(tls.clone(), name)
                        .map_err(std::io::Error::other)?;
                    let mut s = rustls::StreamOwned::new(client, tcp);
                    // Complete the handshake now, so a bad certificate is an error here.
                    while s.conn.is_handshaking() {
                        s.conn.complete_io(&mut s.sock)?;
                    }
                    Conn::Tls(Box::new(s))
                }
            };
            if !self.stats.connected.swap(true, Ordering::Relaxed) {
                tracing::info!(
                    "[[syslog]] {} ({}): connected",
                    self.cfg.address,
                    self.cfg.transport.label()
                );
            }
            *conn = Some(c);
        }
        Ok(conn.as_mut().expect("just made"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_follow_rfc_5424() {
        let m = format_message(
            16,
            LogKind::Access,
            "web 01",
            "palisade",
            "{\"a\":1}",
            0,
            1024,
        );
        let pid = std::process::id();
        assert_eq!(
            m,
            format!("<134>1 1970-01-01T00:00:00.000000Z web01 palisade {pid} access - {{\"a\":1}}")
        );
        let m = format_message(23, LogKind::Error, "", "", "x", 0, 1024);
        assert!(
            m.starts_with("<188>1 1970-01-01T00:00:00.000000Z - - "),
            "{m}"
        );
        // Cut to the bound, at a character boundary.
        let long = "é".repeat(1000);
        let m = format_message(16, LogKind::Audit, "h", "a", &long, 0, 200);
        assert!(m.len() <= 200 && m.ends_with('é'), "{}", m.len());
    }
}
