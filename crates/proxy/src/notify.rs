//! systemd's service notifications (`sd_notify(3)`), for a unit of `Type=notify`:
//! `READY=1` once the listeners are bound and the rules loaded, `RELOADING=1` and
//! `READY=1` around a reload, `STOPPING=1` when shutdown begins, `STATUS=` lines,
//! and `WATCHDOG=1` pings (`WatchdogSec=`) sent by the main thread's event loop only
//! while every worker thread's event loop shows it is alive.
//!
//! Without `NOTIFY_SOCKET` in the environment (Palisade not started by systemd, or
//! by a unit of another type) every call is a no-op: nothing is opened, nothing is
//! sent, nothing fails, and the worker threads keep no heartbeat.
//!
//! The protocol is one datagram of `KEY=VALUE` lines to the Unix socket named by
//! `NOTIFY_SOCKET` (a path, or `@name` in the abstract namespace). It is written
//! here rather than taken from the `sd-notify` crate, whose 0.5 release cannot
//! reach an abstract socket; it needs nothing but the standard library.

use std::os::unix::net::UnixDatagram;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The environment variable naming the service manager's notification socket.
pub const NOTIFY_SOCKET: &str = "NOTIFY_SOCKET";
/// The environment variable holding the watchdog interval in microseconds.
pub const WATCHDOG_USEC: &str = "WATCHDOG_USEC";
/// The environment variable naming the process the watchdog is meant for.
pub const WATCHDOG_PID: &str = "WATCHDOG_PID";

/// How often a worker thread's event loop records that it runs, while the watchdog
/// is on.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_millis(250);

/// Why a notification could not be sent.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    /// `NOTIFY_SOCKET` is set but empty, relative, or too long for a socket address.
    #[error("NOTIFY_SOCKET={0:?} is not a socket path or an @abstract name")]
    Address(String),
    /// The socket could not be reached or the datagram not sent.
    #[error("sending to NOTIFY_SOCKET {socket}: {source}")]
    Send {
        /// The socket as named in the environment.
        socket: String,
        /// The system's reason.
        source: std::io::Error,
    },
}

/// The service manager's notification socket, if Palisade was started with one.
/// Cheap to share; every method is a no-op without `NOTIFY_SOCKET`.
#[derive(Debug, Default)]
pub struct Notifier {
    /// The socket as named in the environment; `None`: notifications are off.
    socket: Option<String>,
    /// The watchdog interval, when the service manager asked for pings.
    watchdog: Option<Duration>,
    /// A failed send was reported (once: the next ones are only counted in debug).
    warned: AtomicBool,
}

impl Notifier {
    /// Reads `NOTIFY_SOCKET`, `WATCHDOG_USEC` and `WATCHDOG_PID`. The watchdog is on
    /// when `WATCHDOG_USEC` is a positive number and `WATCHDOG_PID`, if set, is this
    /// process.
    pub fn from_env() -> Notifier {
        let var = |k: &str| std::env::var(k).ok();
        Notifier::new(
            var(NOTIFY_SOCKET).as_deref(),
            var(WATCHDOG_USEC).as_deref(),
            var(WATCHDOG_PID).as_deref(),
            std::process::id(),
        )
    }

    /// A notifier from the values of the three variables, for the process `pid`.
    pub fn new(
        socket: Option<&str>,
        watchdog_usec: Option<&str>,
        watchdog_pid: Option<&str>,
        pid: u32,
    ) -> Notifier {
        let socket = socket.filter(|s| !s.is_empty()).map(str::to_owned);
        let for_us = watchdog_pid.is_none_or(|p| p.trim().parse::<u32>().ok() == Some(pid));
        let watchdog = watchdog_usec
            .and_then(|u| u.trim().parse::<u64>().ok())
            .filter(|&u| u > 0 && for_us && socket.is_some())
            .map(Duration::from_micros);
        Notifier {
            socket,
            watchdog,
            warned: AtomicBool::new(false),
        }
    }

    /// A notifier that sends nothing.
    pub fn off() -> Notifier {
        Notifier::default()
    }

    /// True when a service manager listens (`NOTIFY_SOCKET` is set).
    pub fn is_enabled(&self) -> bool {
        self.socket.is_some()
    }

    /// The watchdog interval the service manager asked for (`WatchdogSec=`).
    pub fn watchdog(&self) -> Option<Duration> {
        self.watchdog
    }

    /// Startup is finished: the listeners are bound and the rules loaded.
    pub fn ready(&self, status: &str) {
        self.send(&format!("READY=1\nSTATUS={}\n", one_line(status)));
    }

    /// A reload begins (`MONOTONIC_USEC` as systemd 253 and later want with it).
    pub fn reloading(&self) {
        if self.socket.is_none() {
            return;
        }
        let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
        let usec = now.tv_sec as i128 * 1_000_000 + now.tv_nsec as i128 / 1_000;
        self.send(&format!(
            "RELOADING=1\nMONOTONIC_USEC={usec}\nSTATUS=reloading\n"
        ));
    }

    /// A reload ended (in force, or failed with the configuration in force kept):
    /// the service is ready again.
    pub fn reloaded(&self, status: &str) {
        self.ready(status);
    }

    /// Shutdown begins.
    pub fn stopping(&self) {
        self.send("STOPPING=1\nSTATUS=stopping: draining the requests in flight\n");
    }

    /// A binary upgrade handed the service over to process `pid` (sent by the old
    /// main process, which `NotifyAccess=main` lets speak; see [`crate::upgrade`]).
    pub fn main_pid(&self, pid: u32) {
        self.send(&format!(
            "MAINPID={pid}\nSTATUS=upgraded: process {pid} serves\n"
        ));
    }

    /// The new process of a binary upgrade is ready: it names itself the main
    /// process (heard with `NotifyAccess=all`; with `NotifyAccess=main` the old
    /// process's [`Notifier::main_pid`] does it).
    pub fn upgraded(&self, status: &str) {
        self.send(&format!(
            "MAINPID={}\nREADY=1\nSTATUS={}\n",
            std::process::id(),
            one_line(status)
        ));
    }

    /// One watchdog ping.
    pub fn ping(&self) {
        self.send("WATCHDOG=1\n");
    }

    /// Sends `message`; a failure is logged once (and then only at debug level), never
    /// returned: the proxy serves whether or not the service manager hears it.
    fn send(&self, message: &str) {
        let Some(socket) = &self.socket else { return };
        if let Err(e) = send_to(socket, message.as_bytes()) {
            if self.warned.swap(true, Ordering::Relaxed) {
                tracing::debug!("service manager notification not sent: {e}");
            } else {
                tracing::warn!("service manager notification not sent: {e}");
            }
        }
    }
}

/// Sends one datagram to the notification socket `socket` (a path, or `@name` in
/// the abstract namespace), without waiting: a full queue is an error.
pub fn send_to(socket: &str, message: &[u8]) -> Result<(), NotifyError> {
    let named = |source: std::io::Error| NotifyError::Send {
        socket: socket.to_owned(),
        source,
    };
    let addr = if let Some(name) = socket.strip_prefix('@') {
        use std::os::linux::net::SocketAddrExt as _;
        std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
            .map_err(|_| NotifyError::Address(socket.to_owned()))?
    } else if socket.starts_with('/') {
        std::os::unix::net::SocketAddr::from_pathname(socket)
            .map_err(|_| NotifyError::Address(socket.to_owned()))?
    } else {
        return Err(NotifyError::Address(socket.to_owned()));
    };
    let s = UnixDatagram::unbound().map_err(named)?;
    // Never wait: with the service manager's queue full, a notification is lost
    // (and reported) rather than stalling the event loop that sends it.
    s.set_nonblocking(true).map_err(named)?;
    s.connect_addr(&addr).map_err(named)?;
    let n = s.send(message).map_err(named)?;
    if n != message.len() {
        return Err(named(std::io::ErrorKind::WriteZero.into()));
    }
    Ok(())
}

fn one_line(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}

/// When each worker thread's event loop last ran, in milliseconds since `origin`:
/// the watchdog pings only while every one of them is recent.
#[derive(Debug)]
pub struct Heartbeats {
    origin: Instant,
    beats: Box<[AtomicU64]>,
}

impl Heartbeats {
    /// Heartbeats for `workers` worker threads, each counted as just seen.
    pub fn new(workers: usize) -> Arc<Heartbeats> {
        Arc::new(Heartbeats {
            origin: Instant::now(),
            beats: (0..workers.max(1)).map(|_| AtomicU64::new(0)).collect(),
        })
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Worker `index` runs now.
    pub fn beat(&self, index: usize) {
        if let Some(b) = self.beats.get(index) {
            b.store(self.now_ms(), Ordering::Relaxed);
        }
    }

    /// The workers whose last heartbeat is older than `max_age`, with its age.
    pub fn stale(&self, max_age: Duration) -> Vec<(usize, Duration)> {
        let now = self.now_ms();
        self.beats
            .iter()
            .enumerate()
            .filter_map(|(i, b)| {
                let age = Duration::from_millis(now.saturating_sub(b.load(Ordering::Relaxed)));
                (age > max_age).then_some((i, age))
            })
            .collect()
    }

    /// Records worker `index`'s heartbeat every [`HEARTBEAT_INTERVAL`], on the
    /// worker's own runtime, until the runtime stops.
    pub async fn run(self: Arc<Self>, index: usize) {
        let mut tick = tokio::time::interval(HEARTBEAT_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            self.beat(index);
        }
    }
}

/// How long a worker may go without a heartbeat before the watchdog holds its pings:
/// half the watchdog interval, and never less than eight heartbeats.
pub fn stale_after(watchdog: Duration) -> Duration {
    (watchdog / 2).max(HEARTBEAT_INTERVAL * 8)
}

/// Sends a watchdog ping every half `notifier.watchdog()` from the main thread's
/// event loop, while every worker's heartbeat is recent (see [`stale_after`]); a
/// stalled worker holds the pings back, logged once per stall, so the service
/// manager restarts a proxy that stopped serving. Returns at once when the watchdog
/// is off, and when `stop` is set.
pub async fn watchdog(
    notifier: Arc<Notifier>,
    heartbeats: Arc<Heartbeats>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let Some(interval) = notifier.watchdog() else {
        return;
    };
    let period = (interval / 2).max(Duration::from_millis(10));
    let limit = stale_after(interval);
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut holding = false;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = crate::runtime::stopped(&mut stop) => return,
        }
        let stale = heartbeats.stale(limit);
        if stale.is_empty() {
            if std::mem::take(&mut holding) {
                tracing::warn!("watchdog: every worker thread runs again; pings resume");
            }
            notifier.ping();
        } else if !std::mem::replace(&mut holding, true) {
            let list: Vec<String> = stale
                .iter()
                .map(|(w, age)| format!("palisade-w{w} ({age:.1?})"))
                .collect();
            tracing::error!(
                "watchdog: no heartbeat from worker thread(s) {}; pings to the service manager stop until they run again",
                list.join(", ")
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_without_a_socket() {
        let n = Notifier::new(None, Some("30000000"), None, 7);
        assert!(!n.is_enabled());
        assert_eq!(n.watchdog(), None);
        // No socket: nothing is sent and nothing fails.
        n.ready("x");
        n.reloading();
        n.ping();
        n.stopping();
        assert!(!n.warned.load(Ordering::Relaxed));
    }

    #[test]
    fn watchdog_only_for_this_process() {
        let on = Notifier::new(Some("/run/x"), Some("30000000"), Some("7"), 7);
        assert_eq!(on.watchdog(), Some(Duration::from_secs(30)));
        let any = Notifier::new(Some("/run/x"), Some("2000000"), None, 7);
        assert_eq!(any.watchdog(), Some(Duration::from_secs(2)));
        let other = Notifier::new(Some("/run/x"), Some("30000000"), Some("8"), 7);
        assert_eq!(other.watchdog(), None);
        let zero = Notifier::new(Some("/run/x"), Some("0"), None, 7);
        assert_eq!(zero.watchdog(), None);
        let junk = Notifier::new(Some("/run/x"), Some("soon"), None, 7);
        assert_eq!(junk.watchdog(), None);
    }

    #[test]
    fn sends_datagrams_to_paths_and_abstract_names() {
        let dir = std::env::temp_dir().join(format!("palisade-notify-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify.sock");
        let rx = UnixDatagram::bind(&path).unwrap();
        let n = Notifier::new(path.to_str(), None, None, 1);
        n.ready("serving\non 1 listener");
        let mut buf = [0u8; 256];
        let len = rx.recv(&mut buf).unwrap();
        assert_eq!(
            &buf[..len],
            b"READY=1\nSTATUS=serving on 1 listener\n".as_slice()
        );
        n.reloading();
        let len = rx.recv(&mut buf).unwrap();
        let text = std::str::from_utf8(&buf[..len]).unwrap();
        assert!(text.starts_with("RELOADING=1\nMONOTONIC_USEC="), "{text}");

        use std::os::linux::net::SocketAddrExt as _;
        let name = format!("palisade-notify-test-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let rx = UnixDatagram::bind_addr(&addr).unwrap();
        send_to(&format!("@{name}"), b"WATCHDOG=1\n").unwrap();
        let len = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"WATCHDOG=1\n".as_slice());

        assert!(matches!(
            send_to("relative", b"x"),
            Err(NotifyError::Address(_))
        ));
        assert!(matches!(
            send_to(dir.join("none").to_str().unwrap(), b"x"),
            Err(NotifyError::Send { .. })
        ));
        // A missing socket is reported once, and serving goes on.
        let gone = Notifier::new(dir.join("none").to_str(), None, None, 1);
        gone.ping();
        gone.ping();
        assert!(gone.warned.load(Ordering::Relaxed));
        // A service manager that does not read: its queue fills, and sending never
        // waits for it.
        let deaf_path = dir.join("deaf.sock");
        let _deaf = UnixDatagram::bind(&deaf_path).unwrap();
        let n = Notifier::new(deaf_path.to_str(), None, None, 1);
        let t = Instant::now();
        for _ in 0..1000 {
            n.ping();
        }
        assert!(n.warned.load(Ordering::Relaxed));
        assert!(t.elapsed() < Duration::from_secs(5));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Watchdog pings received on `rx` so far.
    fn pings(rx: &UnixDatagram) -> usize {
        let mut buf = [0u8; 64];
        let mut n = 0;
        while let Ok(len) = rx.recv(&mut buf) {
            assert_eq!(&buf[..len], b"WATCHDOG=1\n".as_slice());
            n += 1;
        }
        n
    }

    #[tokio::test]
    async fn the_watchdog_pings_only_while_every_worker_beats() {
        let dir = std::env::temp_dir().join(format!("palisade-watchdog-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify.sock");
        let rx = UnixDatagram::bind(&path).unwrap();
        rx.set_nonblocking(true).unwrap();
        // 200 ms: a ping every 100 ms; a worker is stale after 2 s (the floor).
        let n = Arc::new(Notifier::new(path.to_str(), Some("200000"), None, 1));
        let h = Heartbeats::new(2);
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(watchdog(n, h.clone(), stop_rx));
        for _ in 0..5 {
            h.beat(0);
            h.beat(1);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(pings(&rx) >= 3);
        // Worker 1 stops; once it is 2 s behind, no more pings.
        for _ in 0..25 {
            h.beat(0);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        pings(&rx);
        for _ in 0..5 {
            h.beat(0);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(pings(&rx), 0, "pinged while a worker stalled");
        // It runs again: the pings resume.
        h.beat(1);
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(pings(&rx) >= 1);
        stop_tx.send(true).unwrap();
        task.await.unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn stale_workers() {
        let h = Heartbeats::new(2);
        h.beat(0);
        h.beat(1);
        assert!(h.stale(Duration::from_secs(5)).is_empty());
        std::thread::sleep(Duration::from_millis(30));
        h.beat(0);
        let stale = h.stale(Duration::from_millis(20));
        assert_eq!(stale.len(), 1);
        assert_eq!(stale[0].0, 1);
        assert_eq!(
            stale_after(Duration::from_secs(30)),
            Duration::from_secs(15)
        );
        assert_eq!(stale_after(Duration::from_secs(1)), Duration::from_secs(2));
    }
}
