//! DNS for the proxy: an asynchronous resolver (hickory) on the name servers of
//! `[dns]` (or `/etc/resolv.conf`), asked in turn so that a dead one is passed
//! over. It serves two users:
//! - `@rbl` rules: a bounded cache that keeps answers for their TTL (negative
//!   answers and failures too), and the engine's synchronous hook over both;
//! - upstream server names ([`Dns::lookup_host`]): the addresses and their TTL,
//!   which the upstream pools keep (and keep using when a later lookup fails).
//!
//! Rule evaluation is synchronous and must never hold a worker thread while a
//! name server answers. So:
//! - the names the `@rbl` rules on REMOTE_ADDR will ask for are known when the
//!   request starts: the exchange resolves them, concurrently and without
//!   blocking, before phase 1 ([`TxResolver::prefetch`]), and the rules find the
//!   answers there;
//! - a phase 1, 2 or 4 that holds an `@rbl` rule on another value runs where it
//!   would without it until its walk reaches such a rule; it then pauses before
//!   the rule and goes on from it on the inspection pool, where the hook may wait
//!   for a lookup (at most `dns.timeout`);
//! - on a worker thread (phases 3 and 5, which always run inline) a name not in the
//!   cache is looked up in the background for later requests, and the rule does
//!   not match.

use crate::config::DnsSection;
use engine::{RblAnswer, RblResolver};
use hickory_resolver::TokioResolver;
use hickory_resolver::config::{
    ConnectionConfig, LookupIpStrategy, NameServerConfig, ProtocolConfig, ResolveHosts,
    ResolverConfig,
};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::net::{DnsError, NetError};
use hickory_resolver::proto::rr::RData;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The resolver could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum DnsSetupError {
    /// `dns.resolvers` is empty and the system's configuration could not be read.
    #[error("reading /etc/resolv.conf (set dns.resolvers to name the servers): {0}")]
    SystemConfig(String),
    /// The system's configuration names no server.
    #[error("/etc/resolv.conf names no name server (set dns.resolvers)")]
    NoServers,
    /// hickory refused the configuration.
    #[error("starting the DNS resolver: {0}")]
    Build(String),
}

/// The name servers `section` asks: `None` when lookups are switched off.
pub fn resolver_config(section: &DnsSection) -> Result<Option<ResolverConfig>, DnsSetupError> {
    if !section.enabled {
        return Ok(None);
    }
    if section.resolvers.is_empty() {
        let (config, _) = hickory_resolver::system_conf::read_system_conf()
            .map_err(|e| DnsSetupError::SystemConfig(e.to_string()))?;
        if config.name_servers().is_empty() {
            return Err(DnsSetupError::NoServers);
        }
        return Ok(Some(config));
    }
    let servers = section
        .resolvers
        .iter()
        .map(|addr| {
            let conn = |protocol| {
                let mut c = ConnectionConfig::new(protocol);
                c.port = addr.port();
                c
            };
            NameServerConfig::new(
                addr.ip(),
                true,
                vec![conn(ProtocolConfig::Udp), conn(ProtocolConfig::Tcp)],
            )
        })
        .collect();
    Ok(Some(ResolverConfig::from_name_servers(servers)))
}

/// Counters of the lookups, for `/metrics`.
#[derive(Debug, Default)]
pub struct DnsStats {
    /// Names the `@rbl` rules asked for.
    pub lookups: AtomicU64,
    /// Answers found in the cache.
    pub cache_hits: AtomicU64,
    /// Queries sent to the name servers.
    pub queries: AtomicU64,
    /// Queries answered with an address (listed).
    pub listed: AtomicU64,
    /// Queries that failed (server failure, refused, unreachable), timeouts included.
    pub failures: AtomicU64,
    /// Queries with no answer within `dns.timeout`.
    pub timeouts: AtomicU64,
    /// Names asked on a worker thread and not in the cache: looked up in the
    /// background, the rule did not match.
    pub deferred: AtomicU64,
    /// Transactions that reached `dns.max_lookups_per_transaction`.
    pub over_limit: AtomicU64,
}

/// A cached answer and how long it is kept.
#[derive(Debug, Clone)]
struct Cached {
    answer: RblAnswer,
    ttl: Duration,
}

/// Keeps each cache entry for its own TTL.
struct PerEntryTtl;

impl moka::Expiry<String, Cached> for PerEntryTtl {
    fn expire_after_create(
        &self,
        _key: &String,
        value: &Cached,
        _created_at: std::time::Instant,
    ) -> Option<Duration> {
        Some(value.ttl)
    }
}

/// The resolver, its cache and counters; one per process (a rule reload keeps it).
pub struct Dns {
    resolver: TokioResolver,
    /// For upstream names: the hosts file first, then the name servers, with the
    /// system's search domains; A and AAAA records.
    hosts_resolver: TokioResolver,
    cache: moka::sync::Cache<String, Cached>,
    runtime: tokio::runtime::Handle,
    timeout: Duration,
    min_ttl: Duration,
    max_ttl: Duration,
    failure_ttl: Duration,
    /// `dns.max_lookups_per_transaction`.
    pub max_lookups: usize,
    /// Counters.
    pub stats: DnsStats,
}

impl std::fmt::Debug for Dns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dns")
            .field("timeout", &self.timeout)
            .field("cached", &self.cache.entry_count())
            .finish()
    }
}

impl Dns {
    /// Starts a resolver on `config`'s servers with `section`'s settings. Call it
    /// inside the runtime that will carry the lookups.
    pub fn start(section: &DnsSection, config: ResolverConfig) -> Result<Dns, DnsSetupError> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|e| DnsSetupError::Build(e.to_string()))?;
        let mut hosts_builder =
            TokioResolver::builder_with_config(config.clone(), TokioRuntimeProvider::default());
        let opts = hosts_builder.options_mut();
        opts.timeout = section.timeout;
        opts.attempts = 1;
        // The pools keep the answers (and the last good one when a lookup fails).
        opts.cache_size = 0;
        opts.use_hosts_file = ResolveHosts::Always;
        opts.ip_strategy = LookupIpStrategy::Ipv4AndIpv6;
        let hosts_resolver = hosts_builder
            .build()
            .map_err(|e| DnsSetupError::Build(e.to_string()))?;
        let mut builder =
            TokioResolver::builder_with_config(config, TokioRuntimeProvider::default());
        let opts = builder.options_mut();
        opts.timeout = section.timeout;
        opts.attempts = 1;
        // This module's cache is the one: hickory's would hide hits from the counters.
        opts.cache_size = 0;
        opts.use_hosts_file = ResolveHosts::Never;
        opts.ndots = 0;
        let resolver = builder
            .build()
            .map_err(|e| DnsSetupError::Build(e.to_string()))?;
        Ok(Dns {
            resolver,
            hosts_resolver,
            cache: moka::sync::Cache::builder()
                .max_capacity(section.cache_entries)
                .expire_after(PerEntryTtl)
                .build(),
            runtime,
            timeout: section.timeout,
            min_ttl: section.min_ttl,
            max_ttl: section.max_ttl,
            failure_ttl: section.failure_ttl,
            max_lookups: section.max_lookups_per_transaction,
            stats: DnsStats::default(),
        })
    }

    /// The addresses of an upstream server's `host` (the hosts file, then the
    /// name servers in turn, within `dns.timeout`) and how long they may be kept
    /// (the smallest TTL of the records). Not cached here: the pools keep answers.
    pub async fn lookup_host(&self, host: &str) -> Result<(Vec<IpAddr>, Duration), String> {
        let found = tokio::time::timeout(self.timeout, self.hosts_resolver.lookup_ip(host))
            .await
            .map_err(|_| format!("no answer within {:?}", self.timeout))?
            .map_err(|e| e.to_string())?;
        let mut ttl = u32::MAX;
        let mut addrs = Vec::new();
        for r in found.as_lookup().answers() {
            let ip = match &r.data {
                RData::A(a) => IpAddr::V4(a.0),
                RData::AAAA(a) => IpAddr::V6(a.0),
                _ => continue,
            };
            ttl = ttl.min(r.ttl);
            if !addrs.contains(&ip) {
                addrs.push(ip);
            }
        }
        if addrs.is_empty() {
            return Err("no address in the answer".into());
        }
        Ok((addrs, Duration::from_secs(u64::from(ttl))))
    }

    /// Longest time an answer is kept (`dns.max_ttl`).
    pub fn max_ttl(&self) -> Duration {
        self.max_ttl
    }

    /// How long a failed lookup is remembered (`dns.failure_ttl`).
    pub fn failure_ttl(&self) -> Duration {
        self.failure_ttl
    }

    /// Answers in the cache now.
    pub fn cached_entries(&self) -> u64 {
        self.cache.entry_count()
    }

    /// The cached answer for `name`, if any (counted as a hit).
    fn cached(&self, name: &str) -> Option<RblAnswer> {
        let hit = self.cache.get(name).map(|c| c.answer);
        if hit.is_some() {
            self.stats.cache_hits.fetch_add(1, Ordering::Relaxed);
        }
        hit
    }

    /// The answer for `name`: from the cache, else from the name servers within
    /// `dns.timeout` (and then cached).
    pub async fn resolve(&self, name: &str) -> RblAnswer {
        if let Some(a) = self.cached(name) {
            return a;
        }
        self.stats.queries.fetch_add(1, Ordering::Relaxed);
        // A trailing dot: the name is complete, no search domain is tried.
        let fqdn = format!("{name}.");
        let result = tokio::time::timeout(self.timeout, self.resolver.ipv4_lookup(fqdn)).await;
        let clamp = |ttl: Duration| ttl.clamp(self.min_ttl, self.max_ttl);
        let (answer, ttl) = match result {
            Err(_) | Ok(Err(NetError::Timeout)) => {
                self.stats.timeouts.fetch_add(1, Ordering::Relaxed);
                self.stats.failures.fetch_add(1, Ordering::Relaxed);
                (
                    RblAnswer::Failed(format!("no answer within {:?}", self.timeout)),
                    self.failure_ttl,
                )
            }
            Ok(Ok(lookup)) => {
                let mut first = None;
                let mut ttl = u32::MAX;
                for r in lookup.answers() {
                    if let RData::A(a) = &r.data {
                        first.get_or_insert(a.0);
                        ttl = ttl.min(r.ttl);
                    }
                }
                match first {
                    Some(addr) => {
                        self.stats.listed.fetch_add(1, Ordering::Relaxed);
                        (
                            RblAnswer::Listed(addr),
                            clamp(Duration::from_secs(u64::from(ttl))),
                        )
                    }
                    None => (RblAnswer::NotListed, self.min_ttl),
                }
            }
            Ok(Err(NetError::Dns(DnsError::NoRecordsFound(none)))) => {
                let ttl = none
                    .negative_ttl
                    .map_or(self.min_ttl, |t| clamp(Duration::from_secs(u64::from(t))));
                (RblAnswer::NotListed, ttl)
            }
            Ok(Err(e)) => {
                self.stats.failures.fetch_add(1, Ordering::Relaxed);
                (RblAnswer::Failed(e.to_string()), self.failure_ttl)
            }
        };
        if !ttl.is_zero() {
            self.cache.insert(
                name.to_owned(),
                Cached {
                    answer: answer.clone(),
                    ttl,
                },
            );
        }
        answer
    }

    /// The hook for one transaction, which will resolve `names` (those the rules
    /// on the client's address ask for) when [`TxResolver::prefetch`] is called.
    pub fn for_transaction(self: &Arc<Self>, names: Vec<String>) -> Arc<TxResolver> {
        Arc::new(TxResolver {
            dns: self.clone(),
            names,
            prefetched: OnceLock::new(),
        })
    }
}

/// The engine's `@rbl` hook for one transaction: the answers resolved before
/// phase 1, then the shared cache, then (off the worker threads) a bounded wait.
#[derive(Debug)]
pub struct TxResolver {
    dns: Arc<Dns>,
    /// What to resolve before phase 1.
    names: Vec<String>,
    prefetched: OnceLock<HashMap<String, RblAnswer>>,
}

impl TxResolver {
    /// Resolves the names given at creation concurrently (each within
    /// `dns.timeout`) and keeps the answers for this transaction's rules.
    pub async fn prefetch(&self) {
        if self.names.is_empty() || self.prefetched.get().is_some() {
            return;
        }
        let mut set = tokio::task::JoinSet::new();
        for name in self.names.iter().cloned() {
            let dns = self.dns.clone();
            set.spawn(async move {
                let a = dns.resolve(&name).await;
                (name, a)
            });
        }
        let mut answers = HashMap::new();
        while let Some(done) = set.join_next().await {
            if let Ok((name, a)) = done {
                answers.insert(name, a);
            }
        }
        let _ = self.prefetched.set(answers);
    }

    /// The shared resolver.
    pub fn dns(&self) -> &Arc<Dns> {
        &self.dns
    }
}

impl RblResolver for TxResolver {
    fn lookup(&self, name: &str) -> RblAnswer {
        let dns = &self.dns;
        dns.stats.lookups.fetch_add(1, Ordering::Relaxed);
        if let Some(a) = self.prefetched.get().and_then(|p| p.get(name)) {
            return a.clone();
        }
        if let Some(a) = dns.cached(name) {
            return a;
        }
        let owned = name.to_owned();
        let shared = dns.clone();
        if tokio::runtime::Handle::try_current().is_ok() {
            // A worker thread of the runtime: it must not wait for the network.
            dns.stats.deferred.fetch_add(1, Ordering::Relaxed);
            dns.runtime.spawn(async move {
                shared.resolve(&owned).await;
            });
            return RblAnswer::Failed(
                "not in the cache: looked up in the background for later requests \
                 (a worker thread never waits for DNS)"
                    .into(),
            );
        }
        // An inspection-pool thread: wait, at most the lookup's own timeout.
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        dns.runtime.spawn(async move {
            let _ = tx.send(shared.resolve(&owned).await);
        });
        rx.recv_timeout(dns.timeout + Duration::from_millis(100))
            .unwrap_or_else(|_| RblAnswer::Failed(format!("no answer within {:?}", dns.timeout)))
    }
}

/// The `@rbl` lookups' counters (`palisade_rbl_*`).
impl crate::metrics::Collector for Dns {
    fn collect(&self, out: &mut crate::metrics::Exposition) {
        let s = &self.stats;
        let cached = self.cached_entries();
        let n = |c: &AtomicU64| c.load(Ordering::Relaxed) as f64;
        let all: [(&str, &str, f64); 9] = [
            (
                "palisade_rbl_lookups_total",
                "Block-list names the @rbl rules asked for.",
                n(&s.lookups),
            ),
            (
                "palisade_rbl_cache_hits_total",
                "Block-list answers found in the cache.",
                n(&s.cache_hits),
            ),
            (
                "palisade_rbl_queries_total",
                "DNS queries sent to the name servers.",
                n(&s.queries),
            ),
            (
                "palisade_rbl_listed_total",
                "DNS queries answered with an address (the name is listed).",
                n(&s.listed),
            ),
            (
                "palisade_rbl_failures_total",
                "DNS queries that failed (timeouts included): the rule did not match.",
                n(&s.failures),
            ),
            (
                "palisade_rbl_timeouts_total",
                "DNS queries with no answer within dns.timeout.",
                n(&s.timeouts),
            ),
            (
                "palisade_rbl_deferred_total",
                "Names asked on a worker thread and not cached: looked up in the background, the rule did not match.",
                n(&s.deferred),
            ),
            (
                "palisade_rbl_over_limit_total",
                "Requests that reached dns.max_lookups_per_transaction.",
                n(&s.over_limit),
            ),
            (
                "palisade_rbl_cache_entries",
                "Answers in the cache.",
                cached as f64,
            ),
        ];
        crate::metrics::write_plain(out.text_mut(), &all);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configured_resolvers_keep_their_ports() {
        let section = DnsSection {
            resolvers: vec!["127.0.0.1:5353".parse().unwrap()],
            ..DnsSection::default()
        };
        let config = resolver_config(&section).unwrap().expect("lookups on");
        let servers = config.name_servers();
        assert_eq!(servers.len(), 1);
        assert_eq!(servers[0].ip, std::net::IpAddr::from([127, 0, 0, 1]));
        assert!(servers[0].connections.iter().all(|c| c.port == 5353));
        let off = DnsSection {
            enabled: false,
            ..section
        };
        assert!(resolver_config(&off).unwrap().is_none());
    }

    /// On a worker thread an uncached name is never waited for: the hook answers
    /// at once and the lookup goes on in the background (here against a closed
    /// port, so it fails and the failure is cached).
    #[tokio::test]
    async fn a_worker_thread_never_waits() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let section = DnsSection {
            resolvers: vec![closed],
            timeout: Duration::from_millis(200),
            ..DnsSection::default()
        };
        let config = resolver_config(&section).unwrap().unwrap();
        let dns = Arc::new(Dns::start(&section, config).unwrap());
        let hook = dns.for_transaction(Vec::new());
        let a = hook.lookup("1.0.0.127.bl.test");
        assert!(
            matches!(&a, RblAnswer::Failed(r) if r.contains("background")),
            "{a:?}"
        );
        assert_eq!(dns.stats.deferred.load(Ordering::Relaxed), 1);
        // The background lookup ends (failed) and its answer is cached.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while dns.cached_entries() == 0 {
            dns.cache.run_pending_tasks();
            assert!(std::time::Instant::now() < deadline, "never cached");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(dns.stats.failures.load(Ordering::Relaxed), 1);
        assert!(matches!(
            hook.lookup("1.0.0.127.bl.test"),
            RblAnswer::Failed(_)
        ));
        assert_eq!(dns.stats.cache_hits.load(Ordering::Relaxed), 1);
    }
}
