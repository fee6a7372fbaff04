//! A pool of upstream servers: its servers (primary and backup) with their
//! addresses, health and requests in flight, the balancing order of each request,
//! failover and retries within the retry budget, and each server's idle
//! keep-alive connections, kept per worker thread.

use super::body::{UpstreamBody, UpstreamRequest, UpstreamResponse};
use super::conn::{BodyEnd, Conn, ExchangeError, ResponseHead, Stream};
use super::events::Events;
use super::registry::UpstreamSetupError;
use super::tls::{TlsTarget, server_name, tls_client_config};
use super::{balance, health, resolve};
use crate::config::{Balance, HashKey, HealthCheckConfig, UpstreamConfig};
use crate::metrics::Metrics;
use http::Method;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

/// Milliseconds on a clock shared by every pool (never 0).
pub(super) fn now_ms() -> u64 {
    static BASE: OnceLock<Instant> = OnceLock::new();
    let base = *BASE.get_or_init(Instant::now);
    u64::try_from(base.elapsed().as_millis())
        .unwrap_or(u64::MAX)
        .saturating_add(1)
}

/// Why the upstream could not answer.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// No server accepted a connection.
    #[error("cannot connect to upstream {pool}: {reason}")]
    Connect {
        /// Pool name.
        pool: String,
        /// The last failure.
        reason: String,
    },
    /// No server accepted a connection in time.
    #[error("timed out connecting to upstream {pool}")]
    ConnectTimeout {
        /// Pool name.
        pool: String,
    },
    /// The response head did not arrive within the read timeout.
    #[error("upstream {server} sent no response within {timeout:?}")]
    ResponseTimeout {
        /// Server address.
        server: String,
        /// The timeout.
        timeout: Duration,
    },
    /// The exchange failed after the connection was made.
    #[error("upstream {server}: {reason}")]
    Protocol {
        /// Server address.
        server: String,
        /// What went wrong.
        reason: String,
    },
}

impl UpstreamError {
    /// 504 for timeouts, 502 otherwise.
    pub fn status(&self) -> u16 {
        match self {
            UpstreamError::ConnectTimeout { .. } | UpstreamError::ResponseTimeout { .. } => 504,
            _ => 502,
        }
    }
}

/// Times measured while talking to the upstream, in microseconds.
#[derive(Debug, Default, Clone, Copy)]
pub struct UpstreamTiming {
    /// Time spent opening a new connection (TCP and HTTP handshake); 0 when a pooled
    /// connection was reused. Failed attempts count too.
    pub connect_us: u64,
    /// From handing the request to the connection to the response head.
    pub first_byte_us: u64,
    /// True when a pooled connection carried the request.
    pub reused: bool,
}

#[derive(Debug)]
pub(super) struct IdleConn {
    pub(super) conn: Box<Conn>,
    pub(super) since: Instant,
    /// The generation of the server's addresses it was opened on.
    pub(super) generation: u64,
}

pub(super) struct Server {
    /// `HOST:PORT`, as connected to and as logged (an `https://` prefix removed).
    pub(super) addr: Arc<str>,
    /// How to speak TLS to it; `None`: plain TCP.
    pub(super) tls: Option<TlsTarget>,
    /// What its TLS settings are (see [`super::tls::tls_identity`]); a reload carries the
    /// server over only when they stay the same.
    pub(super) tls_id: Option<Arc<str>>,
    /// Set when a reload dropped it: its connections are not kept any more.
    pub(super) retired: AtomicBool,
    /// Idle connections per worker thread ([`crate::runtime::current_worker`]): a
    /// connection's socket is registered with the I/O driver of the worker that
    /// opened it, so each worker reuses its own, and workers never take the same
    /// lock.
    pub(super) idle: Box<[IdleSlot]>,
    /// Its addresses (looked up when a name).
    pub(super) addresses: resolve::Addresses,
    pub(super) health: health::Health,
    /// Requests sent to it whose response is not over yet (`least_conn`).
    pub(super) in_flight: AtomicUsize,
    /// Its seed in rendezvous hashing.
    pub(super) seed: u64,
}

/// One worker's idle connections to one server, on a cache line of its own.
#[derive(Default)]
#[repr(align(128))]
pub(super) struct IdleSlot(pub(super) Mutex<Vec<IdleConn>>);

/// Idle stacks per server: worker threads beyond this share them (index modulo).
pub(super) const IDLE_SLOTS: usize = 64;

/// The idle stacks of a new server.
pub(super) fn idle_slots() -> Box<[IdleSlot]> {
    (0..IDLE_SLOTS).map(|_| IdleSlot::default()).collect()
}

impl Server {
    /// The calling worker's idle connections to this server.
    pub(super) fn idle(&self) -> &Mutex<Vec<IdleConn>> {
        &self.idle[crate::runtime::current_worker() % self.idle.len()].0
    }

    /// Drops every idle connection, on every worker.
    pub(super) fn drop_idle(&self) {
        for slot in self.idle.iter() {
            slot.0.lock().unwrap_or_else(|e| e.into_inner()).clear();
        }
    }

    /// A server without TLS.
    pub(super) fn plain(addr: &str) -> Server {
        Server {
            addr: Arc::from(addr),
            tls: None,
            tls_id: None,
            retired: AtomicBool::new(false),
            idle: idle_slots(),
            addresses: resolve::Addresses::new(addr),
            health: health::Health::default(),
            in_flight: AtomicUsize::new(0),
            seed: balance::server_seed(addr),
        }
    }
}

/// Counts a request in flight on a server until dropped.
pub(super) struct InFlight(Arc<Server>);

impl InFlight {
    pub(super) fn new(server: &Arc<Server>) -> InFlight {
        server.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(server.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Retries a pool may still make, in thousandths: each request adds
/// `retry_budget` of a retry, each retry takes one; it holds at most
/// [`RetryBudget::CAP`] and starts full.
#[derive(Debug)]
pub(super) struct RetryBudget {
    pub(super) per_request: i64,
    pub(super) balance: AtomicI64,
}

impl RetryBudget {
    const ONE: i64 = 1000;
    const CAP: i64 = 10 * Self::ONE;

    pub(super) fn new(ratio: f64) -> RetryBudget {
        RetryBudget {
            // Checked to lie in 0..=1 by the configuration.
            per_request: (ratio.clamp(0.0, 1.0) * Self::ONE as f64).round() as i64,
            balance: AtomicI64::new(Self::CAP),
        }
    }

    pub(super) fn deposit(&self) {
        if self.per_request > 0 && self.balance.load(Ordering::Relaxed) < Self::CAP {
            let _ = self
                .balance
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
                    Some((b + self.per_request).min(Self::CAP))
                });
        }
    }

    pub(super) fn withdraw(&self) -> bool {
        self.balance
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
                (b >= Self::ONE).then_some(b - Self::ONE)
            })
            .is_ok()
    }
}

/// How each attempt treats a request (decided once by [`Pool::send`]).
#[derive(Clone, Copy)]
pub(super) struct Handling {
    /// Send the server's address as Host (the request has none).
    pub(super) add_host: bool,
    /// It asks for an upgrade: a new connection, never pooled afterwards.
    pub(super) upgrade: bool,
    /// It is safe to send again after a connection failed under it.
    pub(super) idempotent: bool,
}

/// Why one attempt on one server failed.
pub(super) struct Failure {
    pub(super) error: UpstreamError,
    /// The request was not sent (another server may take it, whatever the method).
    pub(super) unsent: bool,
    /// Whether the failure counts against the server's health (a reused
    /// connection closed by the server is not its fault).
    pub(super) server_fault: bool,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("addr", &self.addr)
            .field("tls", &self.tls.as_ref().map(|t| &t.name))
            .finish()
    }
}

/// A named pool of upstream servers.
#[derive(Debug)]
pub struct Pool {
    /// The pool's name.
    pub name: Arc<str>,
    pub(super) servers: Vec<Arc<Server>>,
    pub(super) backups: Vec<Arc<Server>>,
    pub(super) next: AtomicUsize,
    pub(super) balance: Balance,
    pub(super) hash_key: Option<HashKey>,
    pub(super) max_fails: u32,
    pub(super) fail_timeout: Duration,
    pub(super) retries: u32,
    pub(super) budget: RetryBudget,
    pub(super) resolver: resolve::Resolver,
    pub(super) resolve_min_ttl: Duration,
    pub(super) keepalive: usize,
    pub(super) connect_timeout: Duration,
    pub(super) read_timeout: Duration,
    pub(super) idle_timeout: Duration,
    /// The active health checks, if any.
    pub(super) check: Option<HealthCheckConfig>,
    pub(super) metrics: Arc<Metrics>,
    pub(super) events: Events,
    /// Which resolved addresses may be connected to (the forward proxy's deny
    /// lists); every address when `None`.
    address_check: Option<AddressCheck>,
}

/// Whether a pool may connect to an address; the reason when it may not.
pub(crate) type AddressCheckFn = dyn Fn(&SocketAddr) -> Result<(), String> + Send + Sync;

/// A pool's [`AddressCheckFn`], shareable.
#[derive(Clone)]
pub(crate) struct AddressCheck(pub(crate) Arc<AddressCheckFn>);

impl std::fmt::Debug for AddressCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AddressCheck")
    }
}

/// What every pool is given: metrics, the resolver, the error log.
#[derive(Clone)]
pub(crate) struct Env {
    pub(super) metrics: Arc<Metrics>,
    pub(crate) resolver: resolve::Resolver,
    pub(super) events: Events,
}

impl Pool {
    /// The pool of `cfg`, carrying over the servers of `previous` (the pool of
    /// the same name before a reload) that stay as they were.
    pub(crate) fn new(
        cfg: &UpstreamConfig,
        env: &Env,
        system_roots: &mut Option<Arc<rustls::RootCertStore>>,
        previous: Option<&Pool>,
    ) -> Result<Self, UpstreamSetupError> {
        let fail = |message: String| UpstreamSetupError::Tls {
            pool: cfg.name.clone(),
            message,
        };
        let client = if cfg.uses_tls() {
            Some(tls_client_config(cfg, system_roots).map_err(fail)?)
        } else {
            None
        };
        // Servers of `previous` already carried over (a server listed twice is
        // carried over once, the second entry made anew, as at start).
        let mut taken: Vec<Arc<Server>> = Vec::new();
        let mut server = |a: &String| -> Result<Arc<Server>, UpstreamSetupError> {
            let (addr, https) = match a.strip_prefix("https://") {
                Some(rest) => (rest, true),
                None => (a.as_str(), false),
            };
            let (tls, tls_id) = match &client {
                Some((c, id)) if cfg.tls || https => (
                    Some(TlsTarget {
                        connector: tokio_rustls::TlsConnector::from(c.clone()),
                        name: server_name(addr, cfg.tls_sni.as_deref())
                            .map_err(|m| fail(format!("server {a:?}: {m}")))?,
                    }),
                    Some(id.clone()),
                ),
                _ => (None, None),
            };
            let same = previous.and_then(|p| {
                p.servers.iter().chain(&p.backups).find(|s| {
                    *s.addr == *addr
                        && s.tls_id == tls_id
                        && !taken.iter().any(|t| Arc::ptr_eq(t, s))
                })
            });
            if let Some(s) = same {
                taken.push(s.clone());
                return Ok(s.clone());
            }
            Ok(Arc::new(Server {
                tls,
                tls_id,
                ..Server::plain(addr)
            }))
        };
        Ok(Pool {
            name: Arc::from(cfg.name.as_str()),
            servers: cfg
                .servers
                .iter()
                .map(&mut server)
                .collect::<Result<_, _>>()?,
            backups: cfg
                .backup
                .iter()
                .map(&mut server)
                .collect::<Result<_, _>>()?,
            next: AtomicUsize::new(0),
            balance: cfg.balance,
            hash_key: cfg.hash_key(),
            max_fails: cfg.max_fails,
            fail_timeout: cfg.fail_timeout,
            retries: cfg.retries,
            budget: RetryBudget::new(cfg.retry_budget),
            resolver: env.resolver.clone(),
            resolve_min_ttl: cfg.resolve_min_ttl,
            keepalive: cfg.keepalive,
            connect_timeout: cfg.connect_timeout,
            read_timeout: cfg.read_timeout,
            idle_timeout: cfg.idle_timeout,
            check: cfg.health_check.clone(),
            metrics: env.metrics.clone(),
            events: env.events.clone(),
            address_check: None,
        })
    }

    /// Sends a request and waits for the response head, choosing the servers in
    /// the pool's balancing order, failing over on connection errors, and sending
    /// a request that is safe to repeat to the next server when one fails before
    /// the response head (within `retries` and the retry budget). The request is
    /// only read, so sending it again needs no copy.
    pub async fn send(
        self: &Arc<Self>,
        req: UpstreamRequest,
        timing: &mut UpstreamTiming,
    ) -> Result<UpstreamResponse, UpstreamError> {
        let rotation = self.next.fetch_add(1, Ordering::Relaxed);
        // The client's address as text only for a pool that hashes it.
        let client = match (&self.hash_key, req.client) {
            (Some(HashKey::ClientIp), Some(ip)) => Some(crate::exchange::IpText::new(ip)),
            _ => None,
        };
        let key = self
            .hash_key
            .as_ref()
            .and_then(|k| balance::key_of(k, &req.headers, client.as_ref()));
        let order = balance::order(self.balance, &self.servers, &self.backups, rotation, key);
        self.budget.deposit();
        let idempotent = matches!(
            req.method,
            Method::GET
                | Method::HEAD
                | Method::OPTIONS
                | Method::TRACE
                | Method::PUT
                | Method::DELETE
        );
        let how = Handling {
            // A request without Host (HTTP/1.0) gets the server's address, as RFC
            // 9110 §7.2 asks of a proxy.
            add_host: !req.headers.contains(b"host"),
            // A connection that may be upgraded is new, and never goes back to the
            // pool.
            upgrade: req.headers.contains(b"upgrade"),
            idempotent,
        };
        let mut retries_left = self.retries;
        let mut last_err: Option<UpstreamError> = None;
        for (i, server) in order.iter().enumerate() {
            let last = i + 1 == order.len();
            let failure = match self.attempt(server, &req, timing, how).await {
                Ok(resp) => {
                    server.health.succeeded();
                    return Ok(resp);
                }
                Err(f) => f,
            };
            if failure.server_fault {
                self.metrics
                    .upstream_server_failures
                    .fetch_add(1, Ordering::Relaxed);
                if server.health.failed(self.max_fails, self.fail_timeout) {
                    self.metrics
                        .upstream_servers_out
                        .fetch_add(1, Ordering::Relaxed);
                    self.events.error(format_args!(
                        "upstream {}: server {} is out for {:?} after {} failure(s): {}",
                        self.name, server.addr, self.fail_timeout, self.max_fails, failure.error
                    ));
                }
            }
            if failure.unsent {
                // Not sent: the next server takes it, whatever the method.
                if !last {
                    self.events.warn(format_args!(
                        "upstream {}: {}; trying the next server",
                        self.name, failure.error
                    ));
                }
            } else {
                if !idempotent || how.upgrade || retries_left == 0 || last {
                    return Err(failure.error);
                }
                if !self.budget.withdraw() {
                    self.metrics
                        .upstream_retries_over_budget
                        .fetch_add(1, Ordering::Relaxed);
                    self.events.warn(format_args!(
                        "upstream {}: not retrying after {}: the retry budget is spent",
                        self.name, failure.error
                    ));
                    return Err(failure.error);
                }
                retries_left -= 1;
                self.metrics
                    .upstream_retries
                    .fetch_add(1, Ordering::Relaxed);
                self.events.warn(format_args!(
                    "upstream {}: {}; sending the request to the next server",
                    self.name, failure.error
                ));
            }
            last_err = Some(failure.error);
        }
        Err(last_err.unwrap_or_else(|| UpstreamError::Connect {
            pool: self.name.to_string(),
            reason: "no server".into(),
        }))
    }

    /// Sends `req` to one server: on a pooled connection when there is one (a
    /// pooled connection found closed is replaced by a new one), else on a new one.
    pub(super) async fn attempt(
        self: &Arc<Self>,
        server: &Arc<Server>,
        req: &UpstreamRequest,
        timing: &mut UpstreamTiming,
        how: Handling,
    ) -> Result<UpstreamResponse, Failure> {
        let in_flight = InFlight::new(server);
        let host = how.add_host.then_some(&*server.addr);
        // A pooled connection first, if it was opened on the addresses in force
        // (looked up again once their TTL is over; no lock while they are fresh).
        let pooled = if how.upgrade {
            None
        } else {
            if !server.addresses.is_fresh() {
                let _ = tokio::time::timeout(self.connect_timeout, self.resolve(server)).await;
            }
            self.take_idle(server)
        };
        if let Some((mut conn, generation)) = pooled {
            let t0 = Instant::now();
            let sent = tokio::time::timeout(self.read_timeout, conn.exchange(req, host)).await;
            timing.first_byte_us = micros(t0.elapsed());
            timing.reused = true;
            match sent {
                // The request went out on a live connection and no answer came: the
                // same 504 as on a new connection (the connection is dropped).
                Err(_) => {
                    return Err(Failure {
                        error: UpstreamError::ResponseTimeout {
                            server: server.addr.to_string(),
                            timeout: self.read_timeout,
                        },
                        unsent: false,
                        server_fault: true,
                    });
                }
                Ok(Ok(head)) => {
                    return Ok(self.response(head, conn, server, in_flight, generation));
                }
                // The connection was stale: a new one takes the request when it is
                // known unsent (the write failed), or is safe to repeat.
                Ok(Err(e)) if e.stale() => {
                    if !how.idempotent && !matches!(e, ExchangeError::Write(_)) {
                        return Err(Failure {
                            error: self.protocol_error(server, &e),
                            unsent: false,
                            server_fault: false,
                        });
                    }
                }
                Ok(Err(e)) => {
                    return Err(Failure {
                        error: self.protocol_error(server, &e),
                        unsent: false,
                        server_fault: true,
                    });
                }
            }
        }
        let t0 = Instant::now();
        let opened = tokio::time::timeout(self.connect_timeout, self.connect(server)).await;
        timing.connect_us += micros(t0.elapsed());
        let (mut conn, generation) = match opened {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                self.metrics
                    .upstream_connect_errors
                    .fetch_add(1, Ordering::Relaxed);
                return Err(Failure {
                    error: UpstreamError::Connect {
                        pool: self.name.to_string(),
                        reason: format!("{}: {e}", server.addr),
                    },
                    unsent: true,
                    server_fault: true,
                });
            }
            Err(_) => {
                self.metrics
                    .upstream_connect_errors
                    .fetch_add(1, Ordering::Relaxed);
                return Err(Failure {
                    error: UpstreamError::ConnectTimeout {
                        pool: self.name.to_string(),
                    },
                    unsent: true,
                    server_fault: true,
                });
            }
        };
        self.metrics
            .upstream_connects
            .fetch_add(1, Ordering::Relaxed);
        let t0 = Instant::now();
        let sent = tokio::time::timeout(self.read_timeout, conn.exchange(req, host)).await;
        timing.first_byte_us = micros(t0.elapsed());
        let error = match sent {
            Ok(Ok(head)) => return Ok(self.response(head, conn, server, in_flight, generation)),
            Ok(Err(e)) => self.protocol_error(server, &e),
            Err(_) => UpstreamError::ResponseTimeout {
                server: server.addr.to_string(),
                timeout: self.read_timeout,
            },
        };
        Err(Failure {
            error,
            unsent: false,
            server_fault: true,
        })
    }

    /// A failed exchange as the error the client's answer and the logs give; a
    /// response that cannot be read is also logged with what is wrong with it.
    pub(super) fn protocol_error(&self, server: &Server, e: &ExchangeError) -> UpstreamError {
        if matches!(e, ExchangeError::Malformed(_)) {
            self.events.warn(format_args!(
                "upstream {}: server {} sent a {e}",
                self.name, server.addr
            ));
        }
        UpstreamError::Protocol {
            server: server.addr.to_string(),
            reason: e.to_string(),
        }
    }

    pub(super) fn response(
        self: &Arc<Self>,
        head: ResponseHead,
        conn: Box<Conn>,
        server: &Arc<Server>,
        in_flight: InFlight,
        generation: u64,
    ) -> UpstreamResponse {
        let ResponseHead {
            status,
            minor,
            headers,
            body,
            keepalive,
        } = head;
        let mut parts = http::Response::new(()).into_parts().0;
        parts.status = status;
        parts.version = if minor == 0 {
            http::Version::HTTP_10
        } else {
            http::Version::HTTP_11
        };
        parts.headers = headers;
        // After a 101 the connection belongs to the upgraded protocol.
        let (conn, upgraded) = if status == http::StatusCode::SWITCHING_PROTOCOLS {
            (None, Some((*conn).upgraded()))
        } else {
            (Some(conn), None)
        };
        let mut ub = UpstreamBody {
            conn,
            end: body,
            pending: None,
            home: keepalive.then(|| (server.clone(), self.clone(), generation)),
            in_flight: Some(in_flight),
            read_timeout: self.read_timeout,
            sleep: None,
            done: false,
        };
        if matches!(ub.end, BodyEnd::Empty) {
            ub.finish();
        }
        UpstreamResponse {
            parts,
            body: ub,
            server: server.addr.clone(),
            upgraded,
        }
    }

    /// A pooled connection to `server` that is still open, and the generation of
    /// the addresses it was opened on.
    pub(super) fn take_idle(&self, server: &Server) -> Option<(Box<Conn>, u64)> {
        let generation = server.addresses.generation();
        loop {
            let mut candidate = {
                let mut idle = server.idle().lock().unwrap_or_else(|e| e.into_inner());
                idle.pop()
            }?;
            if candidate.since.elapsed() >= self.idle_timeout
                || candidate.generation != generation
                || !candidate.conn.usable()
            {
                continue;
            }
            return Some((candidate.conn, generation));
        }
    }

    pub(super) fn put_idle(&self, server: &Server, conn: Box<Conn>, generation: u64) {
        if !conn.clean() || self.keepalive == 0 || server.retired.load(Ordering::Relaxed) {
            return;
        }
        if generation != server.addresses.generation() {
            // Opened on addresses that have changed since.
            return;
        }
        let mut idle = server.idle().lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < self.keepalive {
            idle.push(IdleConn {
                conn,
                since: Instant::now(),
                generation,
            });
        }
    }

    /// Restricts the addresses the pool connects to: one that `check` refuses
    /// is skipped, as if it did not answer.
    pub(crate) fn set_address_check(&mut self, check: AddressCheck) {
        self.address_check = Some(check);
    }

    /// The addresses of `server` now (looked up, or the last good answer).
    pub(super) async fn resolve(&self, server: &Server) -> Result<resolve::Resolved, String> {
        server
            .addresses
            .get(
                &self.resolver,
                self.resolve_min_ttl,
                &self.name,
                &self.metrics,
                &self.events,
            )
            .await
    }

    /// A TCP connection to one of `server`'s addresses (tried in turn), and the
    /// generation of those addresses.
    pub(super) async fn connect_tcp(&self, server: &Server) -> Result<(TcpStream, u64), String> {
        let resolved = self.resolve(server).await?;
        let mut last = String::from("no address");
        for a in resolved.addrs.iter() {
            if let Some(check) = &self.address_check
                && let Err(why) = (check.0)(a)
            {
                last = format!("address {a} refused: {why}");
                continue;
            }
            match TcpStream::connect(a).await {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    return Ok((s, resolved.generation));
                }
                Err(e) => last = connect_error(a, &e, resolved.addrs.len()),
            }
        }
        Err(last)
    }

    pub(super) async fn connect(&self, server: &Server) -> Result<(Box<Conn>, u64), String> {
        let (stream, generation) = self.connect_tcp(server).await?;
        let io = match &server.tls {
            None => Stream::Plain(stream),
            Some(t) => {
                let tls = t
                    .connector
                    .connect(t.name.clone(), stream)
                    .await
                    .map_err(|e| format!("TLS handshake failed: {e}"))?;
                Stream::Tls(Box::new(tls))
            }
        };
        Ok((Box::new(Conn::new(io)), generation))
    }
}

/// A connection error, naming the address when a name had several.
pub(super) fn connect_error(addr: &SocketAddr, e: &std::io::Error, count: usize) -> String {
    if count > 1 {
        format!("{addr}: {e}")
    } else {
        e.to_string()
    }
}

pub(super) fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::HeaderLines;
    use crate::upstream::registry::tests::upstreams;
    use bytes::Bytes;
    use http::Uri;

    #[test]
    fn the_retry_budget_starts_full_and_refills_per_request() {
        let b = RetryBudget::new(0.25);
        for _ in 0..10 {
            assert!(b.withdraw());
        }
        assert!(!b.withdraw());
        for _ in 0..3 {
            b.deposit();
        }
        assert!(!b.withdraw(), "3 requests pay 0.75 of a retry");
        b.deposit();
        assert!(b.withdraw());
        // Never more than 10 in store.
        for _ in 0..1000 {
            b.deposit();
        }
        assert_eq!(b.balance.load(Ordering::Relaxed), RetryBudget::CAP);
        let none = RetryBudget::new(0.0);
        for _ in 0..1000 {
            none.deposit();
        }
        assert_eq!(none.balance.load(Ordering::Relaxed), RetryBudget::CAP);
    }

    #[tokio::test]
    async fn refused_connections_fail_over_and_map_to_502() {
        // Nothing listens on port 1 of loopback.
        let u = upstreams("");
        let pool = u.route(None, b"/").unwrap().clone();
        let mut timing = UpstreamTiming::default();
        let err = pool
            .send(
                UpstreamRequest {
                    method: Method::GET,
                    uri: Uri::from_static("/"),
                    headers: HeaderLines::default(),
                    body: Bytes::new(),
                    client: None,
                },
                &mut timing,
            )
            .await
            .unwrap_err();
        assert_eq!(err.status(), 502);
        assert!(err.to_string().contains("127.0.0.1:2"), "{err}");
    }
}
