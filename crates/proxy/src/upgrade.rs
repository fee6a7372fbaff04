//! Binary upgrades without refusing a connection (SIGUSR2), and listening sockets
//! inherited at start (from such an upgrade, or from systemd's socket activation).
//!
//! On SIGUSR2 the running process starts the executable at its own path as it is
//! on disk now (the new binary, after a package upgrade replaced the file) with
//! the same arguments, and hands it every listening socket (each listener's
//! per-worker sockets and the admin listener's) as inherited descriptors, named
//! in [`LISTEN_FDS_ENV`] (`PALISADE_LISTEN_FDS=3,4,5`), and the write end of a
//! pipe named in [`READY_FD_ENV`]. The new process adopts each inherited socket
//! whose address is a configured listener's instead of binding it, loads its
//! rules, starts serving, and then writes `ready` to the pipe. Only then does the
//! old process stop accepting and drain its connections, as on SIGTERM (without
//! telling systemd it stops: it first sends `MAINPID=` of the new process). Both
//! accept from the same sockets meanwhile, so no connection is refused or reset.
//! When the new process exits, or is not ready within [`READY_TIMEOUT`], the old
//! one keeps serving and logs why.
//!
//! With systemd's socket activation (`LISTEN_PID` is this process, `LISTEN_FDS`
//! the number of sockets from descriptor 3 on) the sockets are adopted the same
//! way.

use std::io::{Read as _, Write as _};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// The environment variable naming the listening sockets a process inherits
/// from the process it upgrades: descriptor numbers, comma-separated.
pub const LISTEN_FDS_ENV: &str = "PALISADE_LISTEN_FDS";

/// The environment variable naming the pipe a new process writes `ready` to once
/// it serves.
pub const READY_FD_ENV: &str = "PALISADE_UPGRADE_READY_FD";

/// How long the old process waits for the new one to serve before it gives up,
/// stops it, and keeps serving.
pub const READY_TIMEOUT: Duration = Duration::from_secs(300);

/// The sockets and the readiness pipe inherited at start.
#[derive(Debug, Default)]
pub struct Inherited {
    sockets: Vec<(SocketAddr, std::net::TcpListener)>,
    ready: Option<OwnedFd>,
}

/// Parses a descriptor list (`3,4,5`); numbers below 3 (standard input, output
/// and error) are refused, and each descriptor is kept once.
fn parse_fds(text: &str) -> Result<Vec<i32>, String> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let fd: i32 = part
            .parse()
            .map_err(|_| format!("{part:?} is not a file descriptor number"))?;
        if fd < 3 {
            return Err(format!("descriptor {fd} is not an inherited socket"));
        }
        if !out.contains(&fd) {
            out.push(fd);
        }
    }
    Ok(out)
}

/// Takes ownership of the inherited descriptor `fd`.
///
/// Called only by [`Inherited::from_env`], on numbers it parsed from the
/// environment (each once, none below 3), before this process opens any file.
fn own(fd: i32) -> Option<OwnedFd> {
    // The descriptor must be open: `fcntl(F_GETFD)` on a closed one fails, and it
    // opens nothing.
    #[allow(unsafe_code)]
    // SAFETY: `borrow_raw` needs `fd` open for the borrow's life: it is used for
    // this one `fcntl` call, which only reads the descriptor's flags and is
    // harmless (EBADF) on a closed number.
    let open = rustix::io::fcntl_getfd(unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }).is_ok();
    if !open {
        return None;
    }
    #[allow(unsafe_code)]
    // SAFETY: `from_raw_fd` needs `fd` open and owned by nothing else. It is open
    // (checked above). Nothing else owns it: the parent process (or systemd) left
    // it open across exec for this process to take, `from_env` runs at the very
    // start of `palisade run`, before this process opens any descriptor that could
    // have taken the number, each number is taken once (`parse_fds` drops
    // repeats), and standard input, output and error (0-2) are never taken.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl Inherited {
    /// Nothing inherited.
    pub fn none() -> Inherited {
        Inherited::default()
    }

    /// Takes the descriptors named by [`LISTEN_FDS_ENV`], systemd's `LISTEN_FDS`
    /// (when `LISTEN_PID` is this process) and [`READY_FD_ENV`]. Must run before
    /// the process opens any file. A descriptor that is not an open listening TCP
    /// socket is closed and logged (as a warning, once logging is set up: the
    /// messages are returned).
    pub fn from_env() -> (Inherited, Vec<String>) {
        let mut notes = Vec::new();
        let mut fds = Vec::new();
        if let Ok(v) = std::env::var(LISTEN_FDS_ENV) {
            match parse_fds(&v) {
                Ok(list) => fds.extend(list),
                Err(e) => notes.push(format!("{LISTEN_FDS_ENV}={v:?} ignored: {e}")),
            }
        }
        let for_us = std::env::var("LISTEN_PID")
            .ok()
            .and_then(|p| p.parse::<u32>().ok())
            == Some(std::process::id());
        if for_us
            && let Some(n) = std::env::var("LISTEN_FDS")
                .ok()
                .and_then(|n| n.parse::<i32>().ok())
        {
            for fd in 3..3 + n.clamp(0, 1024) {
                if !fds.contains(&fd) {
                    fds.push(fd);
                }
            }
        }
        let ready_fd = std::env::var(READY_FD_ENV).ok().map(|v| parse_fds(&v));
        let mut out = Inherited::default();
        match ready_fd {
            Some(Ok(list)) => {
                if let Some(&fd) = list.first().filter(|fd| !fds.contains(fd)) {
                    out.ready = own(fd);
                }
            }
            Some(Err(e)) => notes.push(format!("{READY_FD_ENV} ignored: {e}")),
            None => {}
        }
        for fd in fds {
            let Some(owned) = own(fd) else {
                notes.push(format!("inherited descriptor {fd} is not open"));
                continue;
            };
            let socket = socket2::Socket::from(owned);
            let address = socket
                .local_addr()
                .ok()
                .and_then(|a| a.as_socket())
                .filter(|_| socket.r#type().ok() == Some(socket2::Type::STREAM));
            match address {
                Some(a) if socket.set_nonblocking(true).is_ok() => {
                    out.sockets.push((a, socket.into()));
                }
                _ => notes.push(format!(
                    "inherited descriptor {fd} is not a listening TCP socket; closed"
                )),
            }
        }
        (out, notes)
    }

    /// True when this process was started by a binary upgrade.
    pub fn is_upgrade(&self) -> bool {
        self.ready.is_some()
    }

    /// The number of sockets not yet adopted.
    pub fn len(&self) -> usize {
        self.sockets.len()
    }

    /// True when every inherited socket was adopted (or none was inherited).
    pub fn is_empty(&self) -> bool {
        self.sockets.is_empty()
    }

    /// Takes the inherited sockets bound to `address` (none for a port 0, which
    /// matches no inherited socket).
    pub fn take(&mut self, address: SocketAddr) -> Vec<std::net::TcpListener> {
        let (mine, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.sockets)
            .into_iter()
            .partition(|(a, _)| *a == address && address.port() != 0);
        self.sockets = rest;
        mine.into_iter().map(|(_, s)| s).collect()
    }

    /// The addresses of the sockets no listener adopted (they are closed when
    /// `self` is dropped).
    pub fn leftover(&self) -> Vec<SocketAddr> {
        self.sockets.iter().map(|(a, _)| *a).collect()
    }

    /// Tells the process that started this one that it serves: writes `ready`
    /// to the pipe and closes it. A no-op when this process was not started by an
    /// upgrade.
    pub fn ready(&mut self) {
        if let Some(fd) = self.ready.take() {
            let mut f = std::fs::File::from(fd);
            if let Err(e) = f.write_all(b"ready\n") {
                tracing::warn!("telling the old process that this one serves: {e}");
            }
        }
    }
}

/// A new process started by [`spawn`], not yet known to serve.
#[derive(Debug)]
pub struct Started {
    child: std::process::Child,
    ready: OwnedFd,
}

/// The executable to start: this process's own path, as on disk now. When the
/// file was replaced since this process started (a package upgrade),
/// `/proc/self/exe` names it `PATH (deleted)`: the new file at `PATH` is meant.
fn executable() -> std::io::Result<std::path::PathBuf> {
    let exe = std::env::current_exe()?;
    let text = exe.to_string_lossy();
    Ok(match text.strip_suffix(" (deleted)") {
        Some(p) => std::path::PathBuf::from(p),
        None => exe,
    })
}

/// Starts the executable at this process's path with the same arguments, handing
/// it `sockets` (duplicates without close-on-exec, closed here once it started)
/// and a pipe to say it is ready.
pub fn spawn<'a>(
    sockets: impl Iterator<Item = std::os::fd::BorrowedFd<'a>>,
) -> std::io::Result<Started> {
    let exe = executable()?;
    let dups = sockets
        .map(|s| rustix::io::dup(s).map_err(std::io::Error::from))
        .collect::<Result<Vec<OwnedFd>, _>>()?;
    let list = dups
        .iter()
        .map(|d| d.as_raw_fd().to_string())
        .collect::<Vec<_>>()
        .join(",");
    let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    // `dup` leaves close-on-exec off: the new process inherits this end.
    let write_inherited = rustix::io::dup(&write)?;
    drop(write);
    let child = std::process::Command::new(&exe)
        .args(std::env::args_os().skip(1))
        .env(LISTEN_FDS_ENV, &list)
        .env(READY_FD_ENV, write_inherited.as_raw_fd().to_string())
        .env_remove("LISTEN_PID")
        .env_remove("LISTEN_FDS")
        .env_remove("LISTEN_FDNAMES")
        // The watchdog is the new process's once it is the main process.
        .env_remove(crate::notify::WATCHDOG_PID)
        .spawn()
        .map_err(|e| std::io::Error::new(e.kind(), format!("starting {}: {e}", exe.display())))?;
    drop(dups);
    drop(write_inherited);
    Ok(Started { child, ready: read })
}

impl Started {
    /// The new process's id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits (blocking) until the new process says it serves: `Ok` then; `Err`
    /// with why when it exited first (its exit status) or closed the pipe without
    /// a word. Run off the event loop.
    pub fn wait_ready(self) -> Result<u32, String> {
        let Started { mut child, ready } = self;
        let pid = child.id();
        let mut said = String::new();
        let _ = std::fs::File::from(ready)
            .take(64)
            .read_to_string(&mut said);
        if said.starts_with("ready") {
            // The new process is on its own now; it is reparented when this one exits.
            return Ok(pid);
        }
        let status = child
            .wait()
            .map_or_else(|e| e.to_string(), |s| s.to_string());
        Err(format!(
            "the new process {pid} exited before it served ({status})"
        ))
    }
}

/// Stops the new process `pid` that did not become ready in time (the thread in
/// [`Started::wait_ready`] then reaps it).
pub fn kill(pid: u32) {
    if let Some(p) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptor_lists_are_checked() {
        assert_eq!(parse_fds("3, 4,4,,7").unwrap(), [3, 4, 7]);
        assert!(parse_fds("2").is_err());
        assert!(parse_fds("x").is_err());
        assert!(parse_fds("").unwrap().is_empty());
    }
}
