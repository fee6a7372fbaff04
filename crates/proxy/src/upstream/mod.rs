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
//!
//! Where things live: [`destination`] (the seam the exchange chooses a peer
//! through), `routes.rs` (which pool serves a request: the reverse proxy's
//! destination), `registry.rs` (the pools by name: build, reload, start, retire),
//! `pool.rs` (servers, balancing order, failover and retries, idle keep-alive
//! connections), `tls.rs` (the pools' TLS client configuration), `body.rs` (the
//! request sent and the response read back), `conn.rs` (one HTTP/1.1 connection),
//! `balance.rs`, `health.rs`, `resolve.rs`, `events.rs`, `metrics.rs`.

mod balance;
mod body;
mod conn;
pub mod destination;
mod events;
mod health;
mod metrics;
mod pool;
mod registry;
mod resolve;
mod routes;
mod tls;

pub use body::{UpstreamBody, UpstreamBodyError, UpstreamRequest, UpstreamResponse};
pub use conn::Upgraded;
pub use destination::{Destination, LocalAnswer, Peer, Refusal, RequestHeadView};
pub use metrics::UpstreamServerState;
pub(crate) use pool::AddressCheck;
pub(crate) use pool::Env;
pub use pool::{Pool, UpstreamError, UpstreamTiming};
pub use registry::{UpstreamSetupError, Upstreams};
pub(crate) use resolve::Resolver;
pub(crate) use routes::{HostMatch, strip_port};
