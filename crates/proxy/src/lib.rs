//! Palisade's reverse proxy as a library: the `palisade` binary is a thin command
//! line over [`app`], and fuzz targets, the attack suite and other front ends drive
//! the same parts.
//!
//! Where things live:
//! - [`cli`]: the command line (clap), its exit statuses and version, and the
//!   completion scripts and manual page made from it.
//! - [`app`]: the commands (`check`, `run`, `ctx`): runtime, listeners, signals,
//!   reload, the collection store.
//! - [`config`]: the TOML configuration.
//! - [`runtime`]: worker threads: which worker runs this, values kept per worker,
//!   each worker's runtime, waiting for shutdown.
//! - [`server`]: listeners, the accept loop, TLS with ALPN.
//! - [`tls`]: the listeners' certificates: chosen by SNI, replaced when their files
//!   change, and obtained and renewed through ACME.
//! - [`client_address`]: the client's real address behind trusted proxies: PROXY
//!   protocol headers, and the `X-Forwarded-For` / `Forwarded` walk.
//! - [`slots`]: `limits.connections`, reclaiming waiting connections under
//!   pressure, and `limits.connections_per_ip`.
//! - [`front`]: the HTTP/1 and HTTP/2 front ends, one task per client connection.
//! - [`crate::http`]: HTTP below any request's policy: the HTTP/1 wire
//!   format ([`crate::http::wire`]: request heads read from raw bytes, body
//!   framing), header lines, and the hop-by-hop header policy
//!   ([`crate::http::hop`]).
//! - [`exchange`]: one request's path, protocol-neutral: the phase order
//!   ([`exchange::driver`]), the headers and target sent upstream, the reply and the record kept for logs.
//! - [`waf`]: the rule engine behind a panic-safe transaction wrapper.
//! - [`inspect`]: where rule evaluation runs: inline for small inputs, on a small
//!   pool of low-priority threads for large ones.
//! - [`upstream`]: where a request goes ([`upstream::Destination`], the seam the
//!   exchange chooses its peer through; the routes are today's one destination)
//!   and the pools of upstream connections.
//! - [`logs`], [`metrics`], [`admin`]: what operators read; [`reload`]: how the
//!   last configuration reload ended, and the admin API's way to ask for one.
//! - [`notify`]: systemd's readiness, reload and watchdog notifications.
//! - [`ctx`]: persistent collections from outside (`palisade ctx`, `/ctx`).
//! - [`access`], [`ratelimit`], [`shaping`], [`keyed`]: access lists, rate limits,
//!   bandwidth shaping, and the sharded per-key table the last two share.
//! - [`tune`]: `palisade tune`, from false positives in the audit log to proven
//!   exclusions.
//! - [`accounting`]: per-client and per-route figures (`/top`); [`dns`]: the
//!   asynchronous resolver of `@rbl`; [`memory`]: giving freed memory back.

pub mod access;
pub mod accounting;
pub mod admin;
pub mod app;
pub mod cli;
pub mod client_address;
pub mod config;
pub mod ctx;
pub mod dashboard;
pub mod diag;
pub mod dns;
pub mod exchange;
pub mod forward;
pub mod front;
pub mod http;
pub mod http_client;
pub mod inspect;
pub mod json_out;
pub mod keyed;
pub mod listeners;
pub mod logs;
pub mod logship;
pub mod memory;
pub mod metrics;
pub mod notify;
pub mod otlp;
pub mod procstat;
pub mod ratelimit;
pub mod reload;
pub mod rulecost;
pub mod runtime;
pub mod server;
pub mod shadow;
pub mod shaping;
pub mod shipqueue;
pub mod sites;
pub mod slots;
pub mod store_metrics;
pub mod summary;
pub mod tls;
pub mod tune;
pub mod upgrade;
pub mod upstream;
pub mod waf;
