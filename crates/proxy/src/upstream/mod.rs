//! Upstream pools: routing, balancing, pooled HTTP/1.1 connections, failover,
//! retries, health, name resolution, timeouts, timing.
//!
//! Each server keeps a stack of idle HTTP/1.1 connections (at most `keepalive`),
//! spoken by the proxy itself ([`conn`]). A connection goes back to its stack
//! only once its response body has been read to the end of its framing and the
//! server did not ask to close it. Server names are resolved asynchronously and kept for
//! their TTL ([`resolve`]); when the addresses change, pooled connections to the
//! old ones are not reused. The servers are tried in the order of [`balance`]: a
//! server that refuses the connection is skipped for the next one, then the
//! backups. A request that is safe to repeat (GET, HEAD, OPTIONS, TRACE, PUT,
//! DELETE) whose server failed before the response head (reset, closed, timed out)
//! is sent again to the next server, at most `retries` times and within the pool's
//! retry budget; other requests are sent once (a reused connection that turns out
//! to be closed is retried on a fresh one). Failures feed the passive health of
//! [`health`], which also runs the active checks. Events worth an operator's
//! attention go to the error log ([`events`]).
//!
//! A SIGHUP reload builds new pools from the configuration read again
//! ([`Upstreams::reload`]): a server that stays (same pool, same address, same TLS
//! settings) is carried over with its health, its resolved addresses and its idle
//! connections; the others are new. Once the new pools are in force the old ones
//! are retired ([`Upstreams::retire`]): their health checks stop, and the servers
//! that were dropped lose their idle connections and take no more.

mod balance;
mod conn;
pub mod destination;
mod events;
mod health;
mod metrics;
mod resolve;

use crate::config::{Balance, Config, HashKey, HealthCheckConfig, UpstreamConfig};
use crate::dns::Dns;
use crate::http::HeaderLines;
use crate::http::wire::Decoded;
use crate::logs::LogSender;
use crate::metrics::Metrics;
use bytes::Bytes;
use conn::{BodyEnd, Conn, ExchangeError, ResponseHead, Stream};
use http::{Method, Uri};
use http_body::{Body, Frame, SizeHint};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio::time::Sleep;

pub use conn::Upgraded;
pub use destination::{Destination, Peer, Refusal, RequestHeadView};
pub use metrics::UpstreamServerState;

/// Milliseconds on a clock shared by every pool (never 0).
fn now_ms() -> u64 {
    static BASE: OnceLock<Instant> = OnceLock::new();
    let base = *BASE.get_or_init(Instant::now);
    u64::try_from(base.elapsed().as_millis())
        .unwrap_or(u64::MAX)
        .saturating_add(1)
}

/// A request ready to go upstream (hop-by-hop headers already removed).
#[derive(Debug, Clone)]
pub struct UpstreamRequest {
    /// Method.
    pub method: Method,
    /// Origin-form target (path and query).
    pub uri: Uri,
    /// Headers to send, Host included.
    pub headers: HeaderLines,
    /// The whole body.
    pub body: Bytes,
    /// The client's address, what `hash_key = "client_ip"` hashes; `None` (health
    /// checks): the last X-Forwarded-For entry.
    pub client: Option<std::net::IpAddr>,
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

/// A response head from the upstream, and its body still to be read.
#[derive(Debug)]
pub struct UpstreamResponse {
    /// Status, version and headers.
    pub parts: http::response::Parts,
    /// The body; reading it to the end returns the connection to the pool.
    pub body: UpstreamBody,
    /// The server that answered.
    pub server: Arc<str>,
    /// After a `101 Switching Protocols`: the connection, now the upgraded
    /// protocol's.
    pub upgraded: Option<Upgraded>,
}

#[derive(Debug)]
struct IdleConn {
    conn: Box<Conn>,
    since: Instant,
    /// The generation of the server's addresses it was opened on.
    generation: u64,
}

struct Server {
    /// `HOST:PORT`, as connected to and as logged (an `https://` prefix removed).
    addr: Arc<str>,
    /// How to speak TLS to it; `None`: plain TCP.
    tls: Option<TlsTarget>,
    /// What its TLS settings are (see [`tls_identity`]); a reload carries the
    /// server over only when they stay the same.
    tls_id: Option<Arc<str>>,
    /// Set when a reload dropped it: its connections are not kept any more.
    retired: AtomicBool,
    /// Idle connections per worker thread ([`crate::runtime::current_worker`]): a
    /// connection's socket is registered with the I/O driver of the worker that
    /// opened it, so each worker reuses its own, and workers never take the same
    /// lock.
    idle: Box<[IdleSlot]>,
    /// Its addresses (looked up when a name).
    addresses: resolve::Addresses,
    health: health::Health,
    /// Requests sent to it whose response is not over yet (`least_conn`).
    in_flight: AtomicUsize,
    /// Its seed in rendezvous hashing.
    seed: u64,
}

/// One worker's idle connections to one server, on a cache line of its own.
#[derive(Default)]
#[repr(align(128))]
struct IdleSlot(Mutex<Vec<IdleConn>>);

/// Idle stacks per server: worker threads beyond this share them (index modulo).
const IDLE_SLOTS: usize = 64;

/// The idle stacks of a new server.
fn idle_slots() -> Box<[IdleSlot]> {
    (0..IDLE_SLOTS).map(|_| IdleSlot::default()).collect()
}

impl Server {
    /// The calling worker's idle connections to this server.
    fn idle(&self) -> &Mutex<Vec<IdleConn>> {
        &self.idle[crate::runtime::current_worker() % self.idle.len()].0
    }

    /// Drops every idle connection, on every worker.
    fn drop_idle(&self) {
        for slot in self.idle.iter() {
            slot.0.lock().unwrap_or_else(|e| e.into_inner()).clear();
        }
    }

    /// A server without TLS.
    fn plain(addr: &str) -> Server {
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
struct InFlight(Arc<Server>);

impl InFlight {
    fn new(server: &Arc<Server>) -> InFlight {
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
struct RetryBudget {
    per_request: i64,
    balance: AtomicI64,
}

impl RetryBudget {
    const ONE: i64 = 1000;
    const CAP: i64 = 10 * Self::ONE;

    fn new(ratio: f64) -> RetryBudget {
        RetryBudget {
            // Checked to lie in 0..=1 by the configuration.
            per_request: (ratio.clamp(0.0, 1.0) * Self::ONE as f64).round() as i64,
            balance: AtomicI64::new(Self::CAP),
        }
    }

    fn deposit(&self) {
        if self.per_request > 0 && self.balance.load(Ordering::Relaxed) < Self::CAP {
            let _ = self
                .balance
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
                    Some((b + self.per_request).min(Self::CAP))
                });
        }
    }

    fn withdraw(&self) -> bool {
        self.balance
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
                (b >= Self::ONE).then_some(b - Self::ONE)
            })
            .is_ok()
    }
}

/// How each attempt treats a request (decided once by [`Pool::send`]).
#[derive(Clone, Copy)]
struct Handling {
    /// Send the server's address as Host (the request has none).
    add_host: bool,
    /// It asks for an upgrade: a new connection, never pooled afterwards.
    upgrade: bool,
    /// It is safe to send again after a connection failed under it.
    idempotent: bool,
}

/// Why one attempt on one server failed.
struct Failure {
    error: UpstreamError,
    /// The request was not sent (another server may take it, whatever the method).
    unsent: bool,
    /// Whether the failure counts against the server's health (a reused
    /// connection closed by the server is not its fault).
    server_fault: bool,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("addr", &self.addr)
            .field("tls", &self.tls.as_ref().map(|t| &t.name))
            .finish()
    }
}

/// TLS towards one server: the client configuration of its pool and the name the
/// certificate must carry.
struct TlsTarget {
    connector: tokio_rustls::TlsConnector,
    name: ServerName<'static>,
}

/// Why the pools could not be built from a checked configuration.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamSetupError {
    /// The trust roots or the TLS settings of a pool cannot be used.
    #[error("upstream {pool:?}: {message}")]
    Tls {
        /// Pool name.
        pool: String,
        /// What is wrong, naming the key or file.
        message: String,
    },
}

/// A named pool of upstream servers.
#[derive(Debug)]
pub struct Pool {
    /// The pool's name.
    pub name: Arc<str>,
    servers: Vec<Arc<Server>>,
    backups: Vec<Arc<Server>>,
    next: AtomicUsize,
    balance: Balance,
    hash_key: Option<HashKey>,
    max_fails: u32,
    fail_timeout: Duration,
    retries: u32,
    budget: RetryBudget,
    resolver: resolve::Resolver,
    resolve_min_ttl: Duration,
    keepalive: usize,
    connect_timeout: Duration,
    read_timeout: Duration,
    idle_timeout: Duration,
    /// The active health checks, if any.
    check: Option<HealthCheckConfig>,
    metrics: Arc<Metrics>,
    events: Events,
}

/// How a route (or a site, [`crate::sites`]) matches the request's host: any host,
/// one name (case-insensitive), or every subdomain of a name (`*.example.com`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HostMatch {
    Any,
    Exact(Vec<u8>),
    Suffix(Vec<u8>),
}

impl HostMatch {
    /// Reads a host as written in the configuration: `*` (or none) for any host,
    /// `*.example.com` for the subdomains of `example.com`, else an exact name.
    pub(crate) fn parse(host: Option<&str>) -> HostMatch {
        match host {
            None | Some("*") => HostMatch::Any,
            Some(h) => match h.strip_prefix('*') {
                Some(suffix) => HostMatch::Suffix(suffix.to_ascii_lowercase().into_bytes()),
                None => HostMatch::Exact(h.to_ascii_lowercase().into_bytes()),
            },
        }
    }

    /// Whether a request for `host` (the Host header's value without its port;
    /// `None` when the request has none) matches.
    pub(crate) fn matches(&self, host: Option<&[u8]>) -> bool {
        match (self, host) {
            (HostMatch::Any, _) => true,
            (HostMatch::Exact(h), Some(got)) => got.eq_ignore_ascii_case(h),
            (HostMatch::Suffix(s), Some(got)) => {
                got.len() > s.len() && got[got.len() - s.len()..].eq_ignore_ascii_case(s)
            }
            _ => false,
        }
    }
}

struct Route {
    host: HostMatch,
    path_prefix: Option<Vec<u8>>,
    pool: usize,
}

/// Every pool, and the routes that choose between them.
pub struct Upstreams {
    pools: Vec<Arc<Pool>>,
    routes: Vec<Route>,
    /// What the pools share, kept for a reload.
    env: Env,
    /// The background tasks of [`Upstreams::start`] (health checks, first
    /// lookups), stopped by [`Upstreams::retire`] or when dropped.
    tasks: Mutex<Vec<tokio::task::AbortHandle>>,
}

/// What every pool is given: metrics, the resolver, the error log.
#[derive(Clone)]
struct Env {
    metrics: Arc<Metrics>,
    resolver: resolve::Resolver,
    events: Events,
}

use events::Events;

impl std::fmt::Debug for resolve::Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            resolve::Resolver::Dns(_) => "dns",
            resolve::Resolver::System { .. } => "system",
        })
    }
}

impl std::fmt::Debug for Upstreams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstreams")
            .field("pools", &self.pools)
            .field("routes", &self.routes.len())
            .finish()
    }
}

impl Drop for Upstreams {
    fn drop(&mut self) {
        self.stop_tasks();
    }
}

impl Upstreams {
    /// Builds the pools and routes of a checked configuration (reading the trust
    /// roots of pools that speak TLS) and starts them ([`Upstreams::start`]).
    /// Server names are looked up with `dns` (the resolver of `[dns]`), or the
    /// system resolver when it is off. Events go to the operator log only.
    pub fn new(
        cfg: &Config,
        metrics: &Arc<Metrics>,
        dns: Option<Arc<Dns>>,
    ) -> Result<Self, UpstreamSetupError> {
        let u = Self::build(cfg, metrics, dns, None)?;
        u.start();
        Ok(u)
    }

    /// Builds the pools and routes of a checked configuration like
    /// [`Upstreams::new`], without starting anything; upstream events also go to
    /// the error log of `log` when it is a file.
    pub fn build(
        cfg: &Config,
        metrics: &Arc<Metrics>,
        dns: Option<Arc<Dns>>,
        log: Option<LogSender>,
    ) -> Result<Self, UpstreamSetupError> {
        let env = Env {
            metrics: metrics.clone(),
            resolver: match dns {
                Some(d) => resolve::Resolver::Dns(d),
                None => resolve::Resolver::System {
                    timeout: cfg.dns.timeout,
                },
            },
            events: Events::new(log),
        };
        Self::assemble(cfg, env, None)
    }

    /// The pools and routes of `cfg`, read again on a reload, with the metrics,
    /// resolver and error log of these. A server that stays in a pool of the same
    /// name, at the same address and with the same TLS settings is carried over
    /// (health, addresses, idle connections, requests in flight); nothing is
    /// started or stopped (see [`Upstreams::start`] and [`Upstreams::retire`]).
    pub fn reload(&self, cfg: &Config) -> Result<Upstreams, UpstreamSetupError> {
        Self::assemble(cfg, self.env.clone(), Some(self))
    }

    fn assemble(
        cfg: &Config,
        env: Env,
        previous: Option<&Upstreams>,
    ) -> Result<Self, UpstreamSetupError> {
        let mut system_roots = None;
        let pools: Vec<Arc<Pool>> = cfg
            .upstreams
            .iter()
            .map(|u| {
                let before = previous.and_then(|p| p.pools.iter().find(|p| *p.name == u.name));
                Pool::new(u, &env, &mut system_roots, before.map(|p| &**p)).map(Arc::new)
            })
            .collect::<Result<_, _>>()?;
        let mut routes: Vec<Route> = cfg
            .routes
            .iter()
            .map(|r| Route {
                host: HostMatch::parse(r.host.as_deref()),
                path_prefix: r.path_prefix.as_ref().map(|p| p.as_bytes().to_vec()),
                pool: cfg
                    .upstreams
                    .iter()
                    .position(|u| u.name == r.upstream)
                    .unwrap_or(0),
            })
            .collect();
        if routes.is_empty() {
            routes.push(Route {
                host: HostMatch::Any,
                path_prefix: None,
                pool: 0,
            });
        }
        Ok(Upstreams {
            pools,
            routes,
            env,
            tasks: Mutex::new(Vec::new()),
        })
    }

    /// Starts the pools on the current runtime (nothing outside one): the server
    /// names are looked up at once and the active health checks begin. A server
    /// carried over into a pool that has no health checks any more is in service
    /// again as far as checks go.
    pub fn start(&self) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
        for pool in &self.pools {
            match &pool.check {
                Some(check) => tasks.push(health::spawn_checks(&rt, pool, check.clone())),
                None => {
                    for s in pool.servers.iter().chain(&pool.backups) {
                        s.health.forget_checks();
                    }
                }
            }
            let pool = pool.clone();
            let first_lookups = rt.spawn(async move {
                for s in pool.servers.iter().chain(&pool.backups) {
                    if !s.addresses.is_fresh() {
                        let _ = pool.resolve(s).await;
                    }
                }
            });
            tasks.push(first_lookups.abort_handle());
        }
    }

    /// Takes these pools out of service once `successor` is in force: their
    /// background tasks stop, and their servers that `successor` did not carry over
    /// drop their idle connections and keep none of the connections still in use.
    /// Requests in flight on them finish.
    pub fn retire(&self, successor: &Upstreams) {
        self.stop_tasks();
        let kept = |s: &Arc<Server>| {
            successor
                .pools
                .iter()
                .flat_map(|p| p.servers.iter().chain(&p.backups))
                .any(|n| Arc::ptr_eq(n, s))
        };
        for s in self
            .pools
            .iter()
            .flat_map(|p| p.servers.iter().chain(&p.backups))
        {
            if !kept(s) {
                s.retired.store(true, Ordering::Relaxed);
                s.drop_idle();
            }
        }
    }

    /// Background tasks still running (health checks, first lookups).
    pub fn running_tasks(&self) -> usize {
        self.tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|t| !t.is_finished())
            .count()
    }

    fn stop_tasks(&self) {
        for t in self
            .tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            t.abort();
        }
    }

    /// The pool for a request: the first route whose host and path prefix match.
    /// `host` is the Host header value (a port is ignored).
    pub fn route(&self, host: Option<&[u8]>, path: &[u8]) -> Option<&Arc<Pool>> {
        let host = host.map(strip_port);
        self.routes
            .iter()
            .find(|r| {
                r.host.matches(host) && r.path_prefix.as_ref().is_none_or(|p| path.starts_with(p))
            })
            .map(|r| &self.pools[r.pool])
    }

    /// Every server of every pool: its pool, its address as written, whether it
    /// is in service, and its requests in flight (for `/metrics`).
    pub fn server_states(&self) -> Vec<UpstreamServerState> {
        self.pools
            .iter()
            .flat_map(|p| {
                p.servers
                    .iter()
                    .chain(&p.backups)
                    .map(|s| UpstreamServerState {
                        pool: p.name.clone(),
                        server: s.addr.clone(),
                        up: s.health.is_up(),
                        in_flight: s.in_flight.load(Ordering::Relaxed),
                    })
            })
            .collect()
    }

    /// Drops idle connections that have outlived their pool's idle timeout.
    pub fn reap_idle(&self) {
        for p in &self.pools {
            for s in p.servers.iter().chain(&p.backups) {
                let generation = s.addresses.generation();
                for slot in s.idle.iter() {
                    let mut idle = slot.0.lock().unwrap_or_else(|e| e.into_inner());
                    idle.retain(|c| {
                        c.since.elapsed() < p.idle_timeout && c.generation == generation
                    });
                }
            }
        }
    }
}

/// The reverse proxy's destination: the first route whose host and path prefix
/// match the request ([`Upstreams::route`], on the path of the target sent
/// upstream) chooses the pool; 404 when none does.
impl Destination for Upstreams {
    fn choose(&self, head: &RequestHeadView<'_>) -> Result<Peer, Refusal> {
        let path = head
            .uri
            .path_and_query()
            .map_or(&b"/"[..], |p| p.as_str().as_bytes());
        match self.route(head.host, path) {
            Some(pool) => Ok(Peer::Pool(pool.clone())),
            None => Err(Refusal {
                status: 404,
                reason: "no route matches this host and path".into(),
            }),
        }
    }
}

/// A Host header's value without its port (`[::1]:80` gives `[::1]`).
pub(crate) fn strip_port(h: &[u8]) -> &[u8] {
    if h.first() == Some(&b'[') {
        return match memchr::memchr(b']', h) {
            Some(e) => &h[..=e],
            None => h,
        };
    }
    match memchr::memrchr(b':', h) {
        Some(c) if h[c + 1..].iter().all(u8::is_ascii_digit) => &h[..c],
        _ => h,
    }
}

/// The rustls client configuration of a pool that speaks TLS, and what identifies
/// its settings (see [`tls_identity`]). `system_roots` caches the system's trust
/// roots across pools (read once, when first needed).
fn tls_client_config(
    cfg: &UpstreamConfig,
    system_roots: &mut Option<Arc<rustls::RootCertStore>>,
) -> Result<(Arc<rustls::ClientConfig>, Arc<str>), String> {
    let mut ca_digest = None;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS protocol versions: {e}"))?;
    let mut client = if !cfg.tls_verify {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
            .with_no_client_auth()
    } else {
        let roots = match &cfg.tls_ca_file {
            Some(path) => {
                let mut store = rustls::RootCertStore::empty();
                let pem = std::fs::read(path)
                    .map_err(|e| format!("tls_ca_file {}: {e}", path.display()))?;
                ca_digest = Some(<sha2::Sha256 as sha2::Digest>::digest(&pem));
                let certs = CertificateDer::pem_slice_iter(&pem)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| format!("tls_ca_file {}: {e}", path.display()))?;
                if certs.is_empty() {
                    return Err(format!(
                        "tls_ca_file {}: no certificate found",
                        path.display()
                    ));
                }
                for c in certs {
                    store
                        .add(c)
                        .map_err(|e| format!("tls_ca_file {}: {e}", path.display()))?;
                }
                Arc::new(store)
            }
            None => match system_roots {
                Some(r) => r.clone(),
                None => {
                    let found = rustls_native_certs::load_native_certs();
                    let mut store = rustls::RootCertStore::empty();
                    let (added, _) = store.add_parsable_certificates(found.certs);
                    if added == 0 {
                        let why = found
                            .errors
                            .first()
                            .map_or_else(|| "none installed".to_owned(), ToString::to_string);
                        return Err(format!(
                            "no system trust roots could be read ({why}); set tls_ca_file"
                        ));
                    }
                    let store = Arc::new(store);
                    *system_roots = Some(store.clone());
                    store
                }
            },
        };
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    // The pool speaks HTTP/1.1 to its servers.
    client.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok((Arc::new(client), tls_identity(cfg, ca_digest.as_deref())))
}

/// What decides how a pool's servers are spoken to over TLS: `tls_verify`,
/// `tls_sni`, and the trust roots (`ca_digest`: the SHA-256 of `tls_ca_file`'s
/// content; none: the system's). A reload keeps a server's connections only when
/// this stays the same, so a changed CA file is never trusted through old
/// connections.
fn tls_identity(cfg: &UpstreamConfig, ca_digest: Option<&[u8]>) -> Arc<str> {
    use std::fmt::Write as _;
    let mut id = format!("verify={} sni={:?} ca=", cfg.tls_verify, cfg.tls_sni);
    match ca_digest {
        Some(d) => {
            for b in d {
                let _ = write!(id, "{b:02x}");
            }
        }
        None => id.push_str("system"),
    }
    Arc::from(id)
}

/// The name a server's certificate must carry: `tls_sni` when set, else the host
/// of `HOST:PORT` (a name, or an IP address).
fn server_name(addr: &str, sni: Option<&str>) -> Result<ServerName<'static>, String> {
    let host = sni.unwrap_or_else(|| {
        let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
        host.strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host)
    });
    ServerName::try_from(host.to_owned())
        .map_err(|_| format!("{host:?} is not a host name or IP address (set tls_sni)"))
}

/// The certificate check of `tls_verify = false`: any certificate is accepted,
/// though the handshake signatures are still checked against it.
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

impl Pool {
    /// The pool of `cfg`, carrying over the servers of `previous` (the pool of
    /// the same name before a reload) that stay as they were.
    fn new(
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
    async fn attempt(
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
    fn protocol_error(&self, server: &Server, e: &ExchangeError) -> UpstreamError {
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

    fn response(
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
    fn take_idle(&self, server: &Server) -> Option<(Box<Conn>, u64)> {
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

    fn put_idle(&self, server: &Server, conn: Box<Conn>, generation: u64) {
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

    /// The addresses of `server` now (looked up, or the last good answer).
    async fn resolve(&self, server: &Server) -> Result<resolve::Resolved, String> {
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
    async fn connect_tcp(&self, server: &Server) -> Result<(TcpStream, u64), String> {
        let resolved = self.resolve(server).await?;
        let mut last = String::from("no address");
        for a in resolved.addrs.iter() {
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

    async fn connect(&self, server: &Server) -> Result<(Box<Conn>, u64), String> {
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
fn connect_error(addr: &SocketAddr, e: &std::io::Error, count: usize) -> String {
    if count > 1 {
        format!("{addr}: {e}")
    } else {
        e.to_string()
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Why reading an upstream body failed.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamBodyError {
    /// No data arrived within the read timeout.
    #[error("upstream body read timed out")]
    Timeout,
    /// Reading from the connection failed (reset, TLS error).
    #[error("upstream body: {0}")]
    Io(#[from] std::io::Error),
    /// The server closed the connection before the end of the body.
    #[error("upstream closed the connection before the end of the body")]
    Short,
    /// The chunked framing is broken.
    #[error("upstream body: {0}")]
    Framing(#[from] crate::http::wire::BodyError),
}

/// A response body from the upstream. Reading it to the end returns its connection
/// to the pool (when the server let it stay open); dropping it early closes the
/// connection.
pub struct UpstreamBody {
    /// The connection the body is read from (`None` once over).
    conn: Option<Box<Conn>>,
    end: BodyEnd,
    /// A piece decoded ahead, to learn whether the body ended with the last one.
    pending: Option<Bytes>,
    /// Where the connection goes back once the body is over, when it may.
    home: Option<(Arc<Server>, Arc<Pool>, u64)>,
    /// Counts the request in flight on its server until the body is over.
    in_flight: Option<InFlight>,
    read_timeout: Duration,
    sleep: Option<Pin<Box<Sleep>>>,
    done: bool,
}

impl std::fmt::Debug for UpstreamBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamBody")
            .field("done", &self.done)
            .finish()
    }
}

type BodyPoll = Poll<Option<Result<Frame<Bytes>, UpstreamBodyError>>>;

impl UpstreamBody {
    fn finish(&mut self) {
        self.done = true;
        self.in_flight = None;
        if let (Some(conn), Some((server, pool, generation))) = (self.conn.take(), self.home.take())
        {
            pool.put_idle(&server, conn, generation);
        }
    }

    /// Ends the body on an error: the connection is dropped.
    fn fail(&mut self, e: UpstreamBodyError) -> BodyPoll {
        self.done = true;
        self.conn = None;
        self.home = None;
        self.in_flight = None;
        Poll::Ready(Some(Err(e)))
    }

    /// A decoded piece going out: decodes ahead so that the end of the body is
    /// known with its last piece (the connection then goes back at once).
    fn deliver(&mut self, data: Bytes) -> BodyPoll {
        self.sleep = None;
        if let (BodyEnd::Framed(dec), Some(conn)) = (&mut self.end, self.conn.as_mut()) {
            match dec.decode(conn.buf()) {
                Ok(Decoded::Done) => self.finish(),
                Ok(Decoded::Data(more)) => self.pending = Some(more),
                // An error is met again (and reported) on the next poll.
                Ok(Decoded::NeedMore) | Err(_) => {}
            }
        }
        Poll::Ready(Some(Ok(Frame::data(data))))
    }
}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = UpstreamBodyError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> BodyPoll {
        let this = &mut *self;
        if let Some(p) = this.pending.take() {
            return this.deliver(p);
        }
        loop {
            if this.done {
                return Poll::Ready(None);
            }
            let Some(conn) = this.conn.as_mut() else {
                this.done = true;
                return Poll::Ready(None);
            };
            match &mut this.end {
                BodyEnd::Empty => {
                    this.finish();
                    return Poll::Ready(None);
                }
                BodyEnd::Framed(dec) => match dec.decode(conn.buf()) {
                    Ok(Decoded::Data(d)) => return this.deliver(d),
                    Ok(Decoded::Done) => {
                        this.finish();
                        return Poll::Ready(None);
                    }
                    Ok(Decoded::NeedMore) => {}
                    Err(e) => return this.fail(e.into()),
                },
                BodyEnd::Close => {
                    if !conn.buf().is_empty() {
                        let d = conn.buf().split().freeze();
                        return this.deliver(d);
                    }
                }
            }
            match conn.poll_fill(cx) {
                Poll::Ready(Ok(0)) => {
                    if matches!(this.end, BodyEnd::Close) {
                        this.home = None;
                        this.finish();
                        return Poll::Ready(None);
                    }
                    return this.fail(UpstreamBodyError::Short);
                }
                Poll::Ready(Ok(_)) => {}
                Poll::Ready(Err(e)) => return this.fail(e.into()),
                Poll::Pending => {
                    let timeout = this.read_timeout;
                    let sleep = this
                        .sleep
                        .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
                    ready!(sleep.as_mut().poll(cx));
                    return this.fail(UpstreamBodyError::Timeout);
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done && self.pending.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        let pending = self.pending.as_ref().map_or(0, |p| p.len() as u64);
        match &self.end {
            BodyEnd::Framed(dec) if !self.done => match dec.remaining() {
                Some(n) => SizeHint::with_exact(n + pending),
                None => {
                    let mut h = SizeHint::new();
                    h.set_lower(pending);
                    h
                }
            },
            BodyEnd::Close if !self.done => {
                let mut h = SizeHint::new();
                h.set_lower(pending);
                h
            }
            _ => SizeHint::with_exact(pending),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn upstreams(extra: &str) -> Upstreams {
        let text = format!(
            "[[listener]]\naddress = \"127.0.0.1:1\"\n[[upstream]]\nname = \"a\"\nservers = [\"127.0.0.1:2\"]\n[[upstream]]\nname = \"b\"\nservers = [\"127.0.0.1:3\"]\n[[upstream]]\nname = \"c\"\nservers = [\"127.0.0.1:4\"]\n{extra}"
        );
        let cfg = Config::parse(&text, std::path::Path::new("/x.toml")).unwrap();
        Upstreams::new(&cfg, &Arc::new(Metrics::new()), None).unwrap()
    }

    fn config(text: &str) -> Config {
        let text = format!("[[listener]]\naddress = \"127.0.0.1:1\"\n{text}");
        Config::parse(&text, std::path::Path::new("/x.toml")).unwrap()
    }

    fn find<'a>(u: &'a Upstreams, pool: &str, addr: &str) -> &'a Arc<Server> {
        let p = u.pools.iter().find(|p| &*p.name == pool).unwrap();
        p.servers
            .iter()
            .chain(&p.backups)
            .find(|s| &*s.addr == addr)
            .unwrap()
    }

    /// A reload carries over the servers that stay in a pool of the same name,
    /// with their state; the others are new, and retiring the old pools drops the
    /// idle connections of the servers left behind only.
    #[test]
    fn a_reload_carries_over_the_servers_that_stay() {
        let before = Upstreams::new(
            &config(
                "[[upstream]]\nname = \"a\"\nservers = [\"127.0.0.1:2\", \"127.0.0.1:3\"]\n[[upstream]]\nname = \"b\"\nservers = [\"127.0.0.1:4\"]\n",
            ),
            &Arc::new(Metrics::new()),
            None,
        )
        .unwrap();
        let kept = find(&before, "a", "127.0.0.1:3").clone();
        kept.health.failed(1, Duration::from_secs(60));
        kept.in_flight.store(2, Ordering::Relaxed);
        let after = before
            .reload(&config(
                "[[upstream]]\nname = \"a\"\nservers = [\"127.0.0.1:5\"]\nbackup = [\"127.0.0.1:3\"]\nbalance = \"least_conn\"\n[[upstream]]\nname = \"c\"\nservers = [\"127.0.0.1:4\"]\n",
            ))
            .unwrap();
        // Moved to the backups of the same pool: the same server, still out.
        assert!(Arc::ptr_eq(find(&after, "a", "127.0.0.1:3"), &kept));
        assert!(!kept.health.is_up());
        assert_eq!(kept.in_flight.load(Ordering::Relaxed), 2);
        assert_eq!(after.pools[0].balance, Balance::LeastConn);
        // Same address in a pool of another name: a new server.
        assert!(!Arc::ptr_eq(
            find(&after, "c", "127.0.0.1:4"),
            find(&before, "b", "127.0.0.1:4")
        ));
        before.retire(&after);
        assert!(!kept.retired.load(Ordering::Relaxed));
        assert!(
            find(&before, "a", "127.0.0.1:2")
                .retired
                .load(Ordering::Relaxed)
        );
        assert!(
            find(&before, "b", "127.0.0.1:4")
                .retired
                .load(Ordering::Relaxed)
        );
    }

    #[test]
    fn a_server_whose_tls_settings_change_is_a_new_one() {
        let plain = Upstreams::new(
            &config("[[upstream]]\nname = \"a\"\nservers = [\"127.0.0.1:2\"]\n"),
            &Arc::new(Metrics::new()),
            None,
        )
        .unwrap();
        let tls = "[[upstream]]\nname = \"a\"\nservers = [\"127.0.0.1:2\"]\ntls = true\ntls_verify = false\n";
        let secure = plain.reload(&config(tls)).unwrap();
        assert!(!Arc::ptr_eq(
            find(&plain, "a", "127.0.0.1:2"),
            find(&secure, "a", "127.0.0.1:2")
        ));
        // The same TLS settings again: carried over.
        let again = secure.reload(&config(tls)).unwrap();
        assert!(Arc::ptr_eq(
            find(&secure, "a", "127.0.0.1:2"),
            find(&again, "a", "127.0.0.1:2")
        ));
        let sni = format!("{tls}tls_sni = \"app.example\"\n");
        let named = again.reload(&config(&sni)).unwrap();
        assert!(!Arc::ptr_eq(
            find(&again, "a", "127.0.0.1:2"),
            find(&named, "a", "127.0.0.1:2")
        ));
    }

    /// The health checks of pools stop when they are retired, and a server carried
    /// into a pool without checks is no longer held out by them.
    #[tokio::test]
    async fn retired_pools_stop_their_health_checks() {
        let checked = config(
            "[[upstream]]\nname = \"a\"\nservers = [\"127.0.0.1:2\"]\n[upstream.health_check]\ntype = \"tcp\"\ninterval = \"1h\"\nfall = 1\n",
        );
        let before = Upstreams::new(&checked, &Arc::new(Metrics::new()), None).unwrap();
        assert!(before.running_tasks() >= 1);
        let server = find(&before, "a", "127.0.0.1:2").clone();
        // Nothing listens there: the first check takes it out.
        let deadline = Instant::now() + Duration::from_secs(10);
        while server.health.is_up() {
            assert!(Instant::now() < deadline, "the check never ran");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let after = before
            .reload(&config(
                "[[upstream]]\nname = \"a\"\nservers = [\"127.0.0.1:2\"]\n",
            ))
            .unwrap();
        before.retire(&after);
        assert_eq!(before.running_tasks(), 0);
        after.start();
        assert!(server.health.is_up());
    }

    #[test]
    fn routes_by_host_and_prefix() {
        let u = upstreams(
            "[[route]]\nhost = \"api.example.com\"\nupstream = \"b\"\n[[route]]\nhost = \"*.example.com\"\npath_prefix = \"/static/\"\nupstream = \"c\"\n[[route]]\nupstream = \"a\"\n",
        );
        let name = |h: Option<&[u8]>, p: &[u8]| u.route(h, p).map(|p| p.name.clone());
        assert_eq!(name(Some(b"API.example.com:8080"), b"/x"), Some("b".into()));
        assert_eq!(
            name(Some(b"www.example.com"), b"/static/a.css"),
            Some("c".into())
        );
        assert_eq!(name(Some(b"www.example.com"), b"/"), Some("a".into()));
        assert_eq!(name(Some(b"example.com"), b"/static/x"), Some("a".into()));
        assert_eq!(name(None, b"/"), Some("a".into()));
    }

    #[test]
    fn no_match_without_catch_all() {
        let u = upstreams("[[route]]\nhost = \"only.example\"\nupstream = \"b\"\n");
        assert!(u.route(Some(b"other"), b"/").is_none());
        let u = upstreams("");
        assert_eq!(&*u.route(Some(b"other"), b"/").unwrap().name, "a");
    }

    #[test]
    fn ports_are_stripped() {
        assert_eq!(strip_port(b"a.b:80"), b"a.b");
        assert_eq!(strip_port(b"[::1]:80"), b"[::1]");
        assert_eq!(strip_port(b"a.b"), b"a.b");
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
