//! What every request shares: the policy snapshot in force ([`PolicySnapshot`]:
//! rules, pools and routes, limits, access lists, replaced as a whole by a
//! reload), the services that outlive reloads (logs, metrics, the store, the
//! resolver, telemetry), and what a request knows of its connection.

use crate::client_address::{ClientAddress, SourceTrust};
use crate::config::{LimitsConfig, ServerConfig};
use crate::inspect::Inspector;
use crate::logs::LogSender;
use crate::metrics::Metrics;
use crate::slots::PerIp;
use crate::upstream::{Destination, Peer, RequestHeadView, Upstreams};
use crate::waf::Waf;
use engine::CollectionReader;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
use store::Store;

/// The part of the configuration a reload replaces as one snapshot, read by each
/// request (and each new connection) once: `[limits]`, the `[[rate_limit]]`s and
/// `[[shape]]`s (with their per-key state, handed on across reloads to the limits
/// and classes that keep their identity), and `[client_address]`.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Request limits (`[limits]`).
    pub limits: LimitsConfig,
    /// The `[[rate_limit]]`s, with their per-key state.
    pub rate_limits: Vec<Arc<crate::ratelimit::RateLimiter>>,
    /// The `[[shape]]` classes, tried in order, with their per-key buckets.
    pub shapes: Vec<Arc<crate::shaping::Shaper>>,
    /// The trusted proxies and the forwarding header (`[client_address]`).
    pub client_address: ClientAddress,
}

impl Policy {
    /// The policy of `limits` alone: no rate limit, no shaping, no trusted proxy.
    pub fn new(limits: LimitsConfig) -> Policy {
        Policy {
            limits,
            rate_limits: Vec::new(),
            shapes: Vec::new(),
            client_address: ClientAddress::default(),
        }
    }

    /// Builds the policy of a configuration; the rate limits and shapes of
    /// `running` (the policy in force, on a reload) hand their state on to those of
    /// the same identity. The error names the section at fault.
    pub fn build(cfg: &crate::config::Config, running: Option<&Policy>) -> anyhow::Result<Policy> {
        let (limits, shapes) =
            running.map_or((&[][..], &[][..]), |p| (&p.rate_limits[..], &p.shapes[..]));
        Ok(Policy {
            limits: cfg.limits.clone(),
            rate_limits: cfg
                .rate_limits
                .iter()
                .map(|r| crate::ratelimit::RateLimiter::new_keeping(r, limits).map(Arc::new))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| anyhow::anyhow!("[[rate_limit]]: {e}"))?,
            shapes: cfg
                .shapes
                .iter()
                .map(|s| crate::shaping::Shaper::new_keeping(s, shapes).map(Arc::new))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| anyhow::anyhow!("[[shape]]: {e}"))?,
            client_address: ClientAddress::new(&cfg.client_address)
                .map_err(|e| anyhow::anyhow!("[client_address]: {e}"))?,
        })
    }
}

/// Everything a reload replaces, as one snapshot swapped as a whole: the rules
/// (with their sites and shadow), the routes and pools, the [`Policy`] (limits,
/// rate limits, shapes, client address) and the `[access]` lists. A request or a
/// connection that reads it sees all of one configuration, never half of one
/// and half of the next. What outlives reloads (the store, the DNS resolver, the
/// logs, metrics and telemetry, the connection slots) stays in [`Shared`].
#[derive(Debug, Clone)]
pub struct PolicySnapshot {
    /// The rules in force, with their `[[site]]`s.
    pub waf: Arc<Waf>,
    /// The pools and the routes between them: the destination in force.
    pub upstreams: Arc<Upstreams>,
    /// The limits, rate limits, shapes and client address in force.
    pub policy: Arc<Policy>,
    /// The `[access]` lists in force (`None`: every address may connect).
    pub access: Option<Arc<crate::access::AccessList>>,
}

/// The rate limits' and the bandwidth classes' metrics.
impl crate::metrics::Collector for Policy {
    fn collect(&self, out: &mut crate::metrics::Exposition) {
        crate::ratelimit::write_metrics(out, &self.rate_limits);
        crate::shaping::write_metrics(out, &self.shapes);
    }
}

/// Everything requests share: the policy snapshot in force (rules, pools,
/// limits, access lists), and the services that outlive reloads (logs, metrics,
/// the store, the resolver, telemetry).
#[derive(Debug)]
pub struct Shared {
    /// The rules, pools and routes, limits and access lists in force; a reload
    /// swaps in a new snapshot, all of it at once.
    in_force: crate::runtime::PerWorker<Arc<PolicySnapshot>>,
    /// The log channel.
    pub logs: LogSender,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Timeouts.
    pub server: ServerConfig,
    /// When the process started.
    pub started: Instant,
    /// Where rule evaluation runs.
    pub inspector: Inspector,
    /// Open connections per client address (`limits.connections_per_ip`).
    pub per_ip: Arc<PerIp>,
    /// The connection slots (`limits.connections`), reclaimed under pressure.
    pub slots: Arc<crate::slots::ConnectionSlots>,
    /// Connections accepted by each worker thread.
    pub workers: crate::runtime::Workers,
    /// The store of persistent collections. It lives here, beside the rules and
    /// not inside them, so a rule reload keeps it open with its data. `None` only
    /// where no store was opened (fuzz targets): collections then last one
    /// transaction.
    store: Option<Store>,
    /// The store's reader, made once and shared by every transaction.
    reader: Option<Arc<dyn CollectionReader>>,
    /// The fleet sync of the store, with `[sync]`.
    sync: Option<store::sync::Sync>,
    /// Per-client and per-route accounting (`GET /top` on the admin listener).
    pub accounting: crate::accounting::Accounting,
    /// The OTLP exporter, with `[otlp]`.
    otlp: Option<Arc<crate::otlp::Exporter>>,
    /// Incidents captured by `[incidents]` (`/metrics`).
    pub incidents: crate::diag::incident::IncidentStats,
    /// The slowest recent requests (`GET /debug/slow`, `palisade diag`).
    pub slow: crate::diag::slow::SlowRequests,
    /// The sampled per-rule time (`GET /top`, the dashboard, `/metrics`).
    pub rule_costs: crate::rulecost::RuleCosts,
    /// How the last configuration reload ended (`/status`, `/metrics`).
    pub reloads: crate::reload::ReloadState,
    /// The request summaries' broadcast ([`crate::summary`]).
    pub summaries: crate::summary::Summaries,
    /// The shadow rule set's runner, counters and disagreements
    /// ([`crate::shadow`]); the shadow itself is in the rules snapshot.
    pub shadow: crate::shadow::Shadow,
    /// Whether any `[access]` lists are in force: a request from a trusted proxy
    /// asks them about its client only then.
    has_access: std::sync::atomic::AtomicBool,
    /// The DNS resolver of `@rbl` rules, with its cache; like the store it
    /// outlives rule reloads.
    dns: Option<Arc<crate::dns::Dns>>,
    /// The certificates of the TLS listeners (status, metrics, reloads); a
    /// reload that adds or removes TLS listeners replaces the list.
    tls_listeners: std::sync::Mutex<Vec<Arc<crate::tls::sni::ListenerCerts>>>,
    /// The ACME manager, with `[acme]`: its HTTP-01 challenges are answered on
    /// the plain listeners.
    acme: Option<Arc<crate::tls::acme::Acme>>,
    id_seed: u64,
    /// Transaction counters, one per worker thread: worker `w` of `W` numbers its
    /// transactions `w`, `w + W`, `w + 2W`, ..., so numbers never repeat across
    /// workers and no worker writes another's counter.
    id_counters: Box<[IdCounter]>,
}

/// One worker's transaction counter, on a cache line of its own.
#[derive(Debug, Default)]
#[repr(align(128))]
struct IdCounter(AtomicU64);

impl Shared {
    /// Bundles the shared state.
    pub fn new(
        waf: Arc<Waf>,
        upstreams: Upstreams,
        logs: LogSender,
        metrics: Arc<Metrics>,
        limits: LimitsConfig,
        server: ServerConfig,
        inspector: Inspector,
    ) -> Self {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        Shared {
            per_ip: PerIp::new(limits.connections_per_ip),
            slots: crate::slots::ConnectionSlots::new(
                limits.connections,
                server.client_header_timeout_under_pressure,
            ),
            workers: crate::runtime::Workers::new(1),
            inspector,
            in_force: crate::runtime::PerWorker::new(
                Arc::new(PolicySnapshot {
                    waf,
                    upstreams: Arc::new(upstreams),
                    policy: Arc::new(Policy::new(limits)),
                    access: None,
                }),
                1,
            ),
            logs,
            metrics,
            server,
            started: Instant::now(),
            store: None,
            reader: None,
            sync: None,
            has_access: std::sync::atomic::AtomicBool::new(false),
            accounting: crate::accounting::Accounting::new([]),
            rule_costs: crate::rulecost::RuleCosts::default(),
            slow: crate::diag::slow::SlowRequests::default(),
            incidents: crate::diag::incident::IncidentStats::default(),
            otlp: None,
            reloads: crate::reload::ReloadState::new(),
            summaries: crate::summary::Summaries::default(),
            shadow: crate::shadow::Shadow::default(),
            dns: None,
            tls_listeners: std::sync::Mutex::new(Vec::new()),
            acme: None,
            id_seed: h.finish(),
            id_counters: vec![IdCounter::default()].into_boxed_slice(),
        }
    }

    /// Counts connections for `n` worker threads.
    pub fn with_workers(mut self, n: usize) -> Self {
        self.workers = crate::runtime::Workers::new(n);
        self.accounting = self.accounting.with_workers(n);
        self.in_force = self.in_force.resized(n);
        self.id_counters = (0..n.max(1)).map(|_| IdCounter::default()).collect();
        self
    }

    /// Gives requests the store of persistent collections.
    pub fn with_store(mut self, store: Store) -> Self {
        self.reader = Some(store.reader());
        self.store = Some(store);
        self
    }

    /// Keeps the store's fleet sync running (and reports its counters).
    pub fn with_sync(mut self, sync: Option<store::sync::Sync>) -> Self {
        self.sync = sync;
        self
    }

    /// Accounts requests per route for these route (upstream pool) names.
    pub fn with_routes<'a>(mut self, routes: impl IntoIterator<Item = &'a str>) -> Self {
        self.accounting = crate::accounting::Accounting::new(routes);
        self
    }

    /// The [`Policy`] in force changed by `f` (while the shared state is built).
    fn with_policy(self, f: impl FnOnce(&mut Policy)) -> Self {
        let mut snapshot = (*self.in_force.get()).clone();
        let mut policy = (*snapshot.policy).clone();
        f(&mut policy);
        snapshot.policy = Arc::new(policy);
        self.in_force.set(Arc::new(snapshot));
        self
    }

    /// Gives requests the `[[rate_limit]]`s.
    pub fn with_rate_limits(self, limits: Vec<crate::ratelimit::RateLimiter>) -> Self {
        self.with_policy(|p| p.rate_limits = limits.into_iter().map(Arc::new).collect())
    }

    /// Gives responses the `[[shape]]` classes, tried in order.
    pub fn with_shapes(self, shapes: Vec<crate::shaping::Shaper>) -> Self {
        self.with_policy(|p| p.shapes = shapes.into_iter().map(Arc::new).collect())
    }

    /// Gives new connections the `[access]` lists (`None`: every address may
    /// connect).
    pub fn with_access(self, access: Option<Arc<crate::access::AccessList>>) -> Self {
        let mut snapshot = (*self.in_force.get()).clone();
        snapshot.access = access;
        self.put_in_force(snapshot);
        self
    }

    /// The snapshot in force now: rules, pools and routes, limits, access lists.
    pub fn in_force(&self) -> Arc<PolicySnapshot> {
        self.in_force.get()
    }

    /// Puts a reload's snapshot in force for new connections and requests, all of
    /// it at once (with `limits.connections_per_ip` for new connections), and
    /// returns the one it replaces; requests already started keep theirs.
    pub fn put_in_force(&self, snapshot: PolicySnapshot) -> Arc<PolicySnapshot> {
        let old = self.in_force.get();
        self.per_ip
            .set_limit(snapshot.policy.limits.connections_per_ip);
        self.has_access
            .store(snapshot.access.is_some(), Ordering::Relaxed);
        self.in_force.set(Arc::new(snapshot));
        old
    }

    /// The limits, rate limits, shapes and client address in force now. A request
    /// reads it once and keeps it to its end.
    pub fn policy(&self) -> Arc<Policy> {
        self.in_force.with(|s| s.policy.clone())
    }

    /// Whether `[access]` lists are in force (reading it takes no lock).
    pub fn has_access_lists(&self) -> bool {
        self.has_access.load(Ordering::Relaxed)
    }

    /// Whether the `[access]` lists let a client at `ip` connect.
    pub fn access_allows(&self, ip: std::net::IpAddr) -> bool {
        self.in_force
            .with(|s| s.access.as_ref().is_none_or(|a| a.allows(ip)))
    }

    /// Gives `@rbl` rules their resolver.
    pub fn with_dns(mut self, dns: Option<Arc<crate::dns::Dns>>) -> Self {
        self.dns = dns;
        self
    }

    /// Takes the client's address from trusted proxies as `client_address` says.
    pub fn with_client_address(self, client_address: ClientAddress) -> Self {
        self.with_policy(|p| p.client_address = client_address)
    }

    /// Keeps the TLS listeners' certificates and the ACME manager for the
    /// challenges, reloads, `/status` and `/metrics`.
    pub fn with_tls(
        mut self,
        listeners: Vec<Arc<crate::tls::sni::ListenerCerts>>,
        acme: Option<Arc<crate::tls::acme::Acme>>,
    ) -> Self {
        self.tls_listeners = std::sync::Mutex::new(listeners);
        self.acme = acme;
        self
    }

    /// The certificates of the TLS listeners in force.
    pub fn tls_listeners(&self) -> Vec<Arc<crate::tls::sni::ListenerCerts>> {
        self.tls_listeners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Replaces the list of TLS listeners (a reload added or removed some).
    pub fn replace_tls_listeners(&self, listeners: Vec<Arc<crate::tls::sni::ListenerCerts>>) {
        *self.tls_listeners.lock().unwrap_or_else(|e| e.into_inner()) = listeners;
    }

    /// The ACME manager, with `[acme]`.
    pub fn acme(&self) -> Option<&Arc<crate::tls::acme::Acme>> {
        self.acme.as_ref()
    }

    /// The OTLP exporter, with `[otlp]`.
    pub fn otlp(&self) -> Option<&Arc<crate::otlp::Exporter>> {
        self.otlp.as_ref()
    }

    /// Whether requests get a trace context (`[otlp] traces`).
    pub fn tracing(&self) -> bool {
        self.otlp.as_ref().is_some_and(|o| o.traces())
    }

    /// Exports spans and log records through `otlp`.
    pub fn with_otlp(mut self, otlp: Option<Arc<crate::otlp::Exporter>>) -> Self {
        self.otlp = otlp;
        self
    }

    /// The `@rbl` resolver, if lookups are on.
    pub fn dns(&self) -> Option<&Arc<crate::dns::Dns>> {
        self.dns.as_ref()
    }

    /// The fleet sync, if one runs.
    pub fn sync(&self) -> Option<&store::sync::Sync> {
        self.sync.as_ref()
    }

    /// The store of persistent collections, if one is open.
    pub fn store(&self) -> Option<&Store> {
        self.store.as_ref()
    }

    /// What a new transaction reads persistent collections through.
    pub fn collection_reader(&self) -> Option<Arc<dyn CollectionReader>> {
        self.reader.clone()
    }

    /// Hands a transaction's collection writes to the store's writer (never
    /// waits: a full queue is counted by the store).
    pub fn submit_writes(&self, writes: Vec<(engine::RecordKey, engine::RecordWrite)>) {
        if writes.is_empty() {
            return;
        }
        if let Some(s) = &self.store {
            s.submit(writes);
        }
    }

    /// The pools and routes in force now.
    pub fn upstreams(&self) -> Arc<Upstreams> {
        self.in_force.with(|s| s.upstreams.clone())
    }

    /// Where the request whose head is `head` goes, as the destination in force
    /// chooses it through the [`Destination`] trait: the routes and pools of
    /// [`Upstreams`], or on a forward-proxy listener (`forward`) the host the
    /// request names ([`crate::forward::ForwardDestination`]); without taking a
    /// reference to all the pools.
    pub fn choose_destination(
        &self,
        head: &RequestHeadView<'_>,
        forward: bool,
    ) -> Result<Peer, crate::upstream::Refusal> {
        self.in_force.with(|s| {
            let destination: &dyn Destination = if forward {
                &**s.upstreams.forward()
            } else {
                &*s.upstreams
            };
            destination.choose(head)
        })
    }

    /// TLS inspection of the forward proxy's tunnels, as configured now.
    pub fn forward_inspector(&self) -> Option<Arc<crate::forward::inspect::Inspector>> {
        self.in_force.with(|s| s.upstreams.inspector().cloned())
    }

    /// The rules in force now.
    pub fn waf(&self) -> Arc<Waf> {
        self.in_force.with(|s| s.waf.clone())
    }

    /// A new transaction id: 20 hex digits from the start time and a per-process
    /// random counter, unique across requests and restarts.
    pub(super) fn unique_id(&self, now_us: i64) -> String {
        let workers = self.id_counters.len();
        let w = crate::runtime::current_worker() % workers;
        let k = self.id_counters[w].0.fetch_add(1, Ordering::Relaxed);
        let n = k.wrapping_mul(workers as u64).wrapping_add(w as u64);
        let tail = self
            .id_seed
            .wrapping_add(n.wrapping_mul(0x9E37_79B9_7F4A_7C15))
            & 0xFFF_FFFF;
        format!("{:013x}{tail:07x}", now_us & 0x1F_FFFF_FFFF_FFFF)
    }
}

/// The connection a request arrived on, and the client it is for.
///
/// Three addresses: the TCP `peer`; the connection's `source`, which a PROXY
/// protocol header from a trusted peer replaces; and the request's `client`, which
/// a trusted source's forwarding header replaces (see [`crate::client_address`]).
/// Without `[client_address]` the three are the same.
#[derive(Debug, Clone, Copy)]
pub struct ConnInfo {
    /// The client, as every client-keyed feature sees it (REMOTE_ADDR, rate limits,
    /// shaping, `[access]`, `/top`, `@rbl`, the logs). Per request.
    pub client: SocketAddr,
    /// The TCP peer (PEER_ADDR; `peer` in the access log).
    pub peer: SocketAddr,
    /// The connection's client: the PROXY protocol header's source, or the peer.
    pub source: SocketAddr,
    /// The local address.
    pub local: SocketAddr,
    /// True on TLS listeners.
    pub tls: bool,
    /// True on forward-proxy listeners (`mode = "forward"`): the request names
    /// its destination ([`crate::forward::ForwardDestination`]).
    pub forward: bool,
    /// What the source may say about the client, and whether the X-Forwarded-For
    /// received is kept.
    pub trust: SourceTrust,
    /// The source's address as text, made once per connection: X-Forwarded-For is
    /// built from it on every request.
    pub source_text: IpText,
}

impl ConnInfo {
    /// A connection from `peer` with no PROXY protocol header: the peer is the
    /// source and, until a request says otherwise, the client.
    pub fn direct(peer: SocketAddr, local: SocketAddr, tls: bool, trust: SourceTrust) -> ConnInfo {
        ConnInfo::proxied(peer, peer, local, tls, trust)
    }

    /// A connection from `peer` whose source (a PROXY protocol header's, or the
    /// peer) is `source`, of trust `trust`.
    pub fn proxied(
        peer: SocketAddr,
        source: SocketAddr,
        local: SocketAddr,
        tls: bool,
        trust: SourceTrust,
    ) -> ConnInfo {
        let source = SocketAddr::new(source.ip().to_canonical(), source.port());
        ConnInfo {
            client: source,
            peer,
            source,
            local,
            tls,
            forward: false,
            trust,
            source_text: IpText::new(source.ip()),
        }
    }

    /// This connection for one request with these header lines: its client found
    /// as `[client_address]` says (see [`ClientAddress::client_of`]).
    pub fn for_request<'h>(
        mut self,
        client_address: &ClientAddress,
        headers: impl Iterator<Item = (&'h [u8], &'h [u8])>,
    ) -> ConnInfo {
        if self.trust == SourceTrust::Trusted {
            self.client = client_address.client_of(self.source, self.trust, headers);
        }
        self
    }

    /// Whether the X-Forwarded-For the source sent goes upstream (with the source
    /// appended), or only the source: kept from a trusted proxy, and as before when
    /// no proxy is trusted; dropped from anyone else, whose list is its own
    /// invention.
    pub fn keeps_forwarded_for(&self) -> bool {
        self.trust != SourceTrust::Untrusted
    }

    /// The TCP peer, when the client is not the peer (the transaction's PEER_ADDR,
    /// the audit record's `peer_ip`).
    pub fn peer_if_other(&self) -> Option<SocketAddr> {
        (self.client != self.peer).then_some(self.peer)
    }
}

/// An IP address as text (IPv4-mapped IPv6 addresses shown as IPv4), held inline so
/// that [`ConnInfo`] stays `Copy`.
#[derive(Clone, Copy)]
pub struct IpText {
    buf: [u8; 64],
    len: u8,
}

impl IpText {
    /// Formats `ip` in its canonical form.
    pub fn new(ip: std::net::IpAddr) -> IpText {
        use std::io::Write;
        let mut buf = [0u8; 64];
        let mut w: &mut [u8] = &mut buf;
        // The longest IPv6 text is 45 bytes, so the buffer cannot fill up.
        let _ = write!(w, "{}", ip.to_canonical());
        let len = 64 - w.len();
        IpText {
            buf,
            len: len as u8,
        }
    }

    /// The text.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..usize::from(self.len)]
    }
}

impl std::fmt::Debug for IpText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&String::from_utf8_lossy(self.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transaction_ids_stay_unique_across_workers() {
        let cfg = crate::config::Config::parse(
            "[[listener]]\naddress = \"127.0.0.1:0\"\n\n[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:9\"]\n",
            std::path::Path::new("/test/palisade.toml"),
        )
        .unwrap();
        let waf = Waf::load(&cfg.rules, &cfg.path, &cfg.server, None).unwrap();
        let (logs, writer) = crate::logs::LogWriter::start(
            &crate::logs::LogTargets::default(),
            cfg.logs.channel_capacity,
            Vec::new(),
        )
        .unwrap();
        let metrics = Arc::new(Metrics::new());
        let upstreams = Upstreams::new(&cfg, &metrics, None).unwrap();
        let inspector = Inspector::new(1, cfg.server.inspect_inline_bytes).unwrap();
        let shared = Shared::new(
            Arc::new(waf),
            upstreams,
            logs,
            metrics,
            cfg.limits.clone(),
            cfg.server.clone(),
            inspector,
        )
        .with_workers(3);
        // Every id made in the same microsecond, spread over three workers.
        let mut ids = std::collections::HashSet::new();
        for i in 0..3000 {
            let id = crate::runtime::as_worker(i % 3, || shared.unique_id(1_700_000_000_000_000));
            assert_eq!(id.len(), 20, "{id}");
            assert!(ids.insert(id.clone()), "{id} made twice");
        }
        drop(shared);
        writer.finish();
    }
}

#[cfg(test)]
mod metrics_tests {
    use crate::config::{RateLimitKey, RateLimitSection, ShapeSection};

    const NASTY: &str = "a\"b\\c\nd";
    const ESCAPED: &str = "a\\\"b\\\\c\\nd";

    #[test]
    fn limit_and_class_labels_are_escaped() {
        let mut limit = crate::ratelimit::RateLimiter::new(&RateLimitSection {
            name: "t".into(),
            key: RateLimitKey::One("client_ip".into()),
            rate: "10/s".into(),
            burst: 1,
            status: 429,
            path_prefix: None,
            sites: None,
            max_keys: 10,
        })
        .unwrap();
        limit.name = NASTY.into();
        let mut out = crate::metrics::Exposition::default();
        crate::ratelimit::write_metrics(&mut out, &[std::sync::Arc::new(limit)]);
        let out = out.into_text();
        assert!(out.contains(&format!("{{limit=\"{ESCAPED}\"}}")), "{out}");
        let mut class = crate::shaping::Shaper::new(&ShapeSection {
            name: "t".into(),
            key: RateLimitKey::One("client_ip".into()),
            rate: "1MB/s".into(),
            burst: "1KiB".into(),
            when: None,
            equals: None,
            path_prefix: None,
            max_keys: 10,
        })
        .unwrap();
        class.name = NASTY.into();
        let mut out = crate::metrics::Exposition::default();
        crate::shaping::write_metrics(&mut out, &[std::sync::Arc::new(class)]);
        let out = out.into_text();
        assert!(out.contains(&format!("{{class=\"{ESCAPED}\"}}")), "{out}");
        // No sample line is broken by a raw line feed.
        assert!(
            out.lines()
                .all(|l| l.starts_with('#') || l.starts_with("palisade_"))
        );
    }
}
