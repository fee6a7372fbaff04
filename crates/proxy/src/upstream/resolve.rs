//! The addresses of an upstream server: an IP literal as written, or a name
//! resolved asynchronously and kept for its TTL. When a lookup fails, the last good
//! answer stays in use (stale) and the name is asked again after `dns.failure_ttl`;
//! every lookup failure, stale use and change of address is logged and counted.

use super::events::Events;
use crate::dns::Dns;
use crate::metrics::Metrics;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Where names are looked up.
#[derive(Clone)]
pub(crate) enum Resolver {
    /// hickory on the name servers of `[dns]`.
    Dns(Arc<Dns>),
    /// The system resolver (`getaddrinfo`), when `[dns]` lookups are off. It gives
    /// no TTL: answers are kept for the pool's `resolve_min_ttl`.
    System {
        /// How long one lookup may take.
        timeout: Duration,
    },
}

impl Resolver {
    /// The addresses of `host` (`port` only for the system resolver's call) and
    /// how long the answer holds (zero from the system resolver, which gives no TTL).
    pub(crate) async fn lookup(
        &self,
        host: &str,
        port: u16,
    ) -> Result<(Vec<IpAddr>, Duration), String> {
        match self {
            Resolver::Dns(d) => d.lookup_host(host).await,
            Resolver::System { timeout } => {
                let found = tokio::time::timeout(*timeout, tokio::net::lookup_host((host, port)))
                    .await
                    .map_err(|_| format!("no answer within {timeout:?}"))?
                    .map_err(|e| e.to_string())?;
                let mut ips: Vec<IpAddr> = Vec::new();
                for a in found {
                    if !ips.contains(&a.ip()) {
                        ips.push(a.ip());
                    }
                }
                if ips.is_empty() {
                    return Err("no address".into());
                }
                Ok((ips, Duration::ZERO))
            }
        }
    }

    /// How long a name is asked again after a failed lookup.
    fn retry_after(&self) -> Duration {
        match self {
            Resolver::Dns(d) => d.failure_ttl().max(Duration::from_millis(100)),
            Resolver::System { .. } => Duration::from_secs(1),
        }
    }

    /// The longest time an answer is kept (`dns.max_ttl`; an hour for the
    /// system resolver).
    pub(crate) fn max_ttl(&self) -> Duration {
        match self {
            Resolver::Dns(d) => d.max_ttl(),
            Resolver::System { .. } => Duration::from_secs(3600),
        }
    }
}

/// An answer in use.
#[derive(Debug, Clone)]
struct Answer {
    addrs: Arc<[SocketAddr]>,
    /// When to ask again.
    refresh_at: Instant,
}

/// The addresses of one server entry.
pub(super) struct Addresses {
    host: Box<str>,
    port: u16,
    /// An IP literal: never looked up.
    fixed: Option<Arc<[SocketAddr]>>,
    current: Mutex<Option<Answer>>,
    /// When the answer in use is due to be asked again, in ms of
    /// [`super::pool::now_ms`] (0: none yet): read without the lock on the request path.
    refresh_ms: AtomicU64,
    /// One lookup at a time per name; the others wait for its answer.
    lookup: tokio::sync::Mutex<()>,
    /// Bumped when the addresses change: pooled connections of an older
    /// generation are not reused.
    generation: AtomicU64,
}

/// What a lookup gave when it was needed.
pub(super) struct Resolved {
    /// The addresses to connect to, in order.
    pub addrs: Arc<[SocketAddr]>,
    /// Their generation (see [`Addresses::generation`]).
    pub generation: u64,
}

impl Addresses {
    /// The addresses of `HOST:PORT` (a literal address in brackets for IPv6).
    pub fn new(addr: &str) -> Addresses {
        let (host, port) = addr.rsplit_once(':').unwrap_or((addr, "0"));
        let port: u16 = port.parse().unwrap_or(0);
        let bare = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        let fixed = bare
            .parse::<IpAddr>()
            .ok()
            .map(|ip| Arc::from([SocketAddr::new(ip, port)]));
        Addresses {
            host: bare.into(),
            port,
            fixed,
            current: Mutex::new(None),
            refresh_ms: AtomicU64::new(0),
            lookup: tokio::sync::Mutex::new(()),
            generation: AtomicU64::new(0),
        }
    }

    /// The generation of the addresses in use now.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Whether the addresses in use may be used without asking again (always for
    /// an IP literal). Takes no lock.
    pub fn is_fresh(&self) -> bool {
        self.fixed.is_some() || self.refresh_ms.load(Ordering::Acquire) > super::pool::now_ms()
    }

    /// Puts `answer` in use (the lock on `current` held).
    fn keep(&self, cur: &mut Option<Answer>, answer: Answer) {
        let left = answer.refresh_at.saturating_duration_since(Instant::now());
        let ms = super::pool::now_ms()
            .saturating_add(u64::try_from(left.as_millis()).unwrap_or(u64::MAX));
        *cur = Some(answer);
        self.refresh_ms.store(ms, Ordering::Release);
    }

    fn fresh(&self) -> Option<Answer> {
        let cur = self.current.lock().unwrap_or_else(|e| e.into_inner());
        cur.as_ref()
            .filter(|a| a.refresh_at > Instant::now())
            .cloned()
    }

    /// The addresses to connect to: the answer in force, else a new lookup (one
    /// at a time), else the last good answer when the lookup fails.
    pub async fn get(
        &self,
        resolver: &Resolver,
        min_ttl: Duration,
        label: &str,
        metrics: &Metrics,
        events: &Events,
    ) -> Result<Resolved, String> {
        if let Some(f) = &self.fixed {
            return Ok(Resolved {
                addrs: f.clone(),
                generation: 0,
            });
        }
        if let Some(a) = self.fresh() {
            return Ok(Resolved {
                addrs: a.addrs,
                generation: self.generation(),
            });
        }
        let _one = self.lookup.lock().await;
        if let Some(a) = self.fresh() {
            return Ok(Resolved {
                addrs: a.addrs,
                generation: self.generation(),
            });
        }
        metrics.upstream_dns_queries.fetch_add(1, Ordering::Relaxed);
        let result = resolver.lookup(&self.host, self.port).await;
        let mut cur = self.current.lock().unwrap_or_else(|e| e.into_inner());
        match result {
            Ok((ips, ttl)) => {
                let addrs: Arc<[SocketAddr]> = ips
                    .iter()
                    .map(|ip| SocketAddr::new(*ip, self.port))
                    .collect();
                let keep = ttl.clamp(min_ttl, resolver.max_ttl().max(min_ttl));
                let changed = cur.as_ref().is_some_and(|old| old.addrs != addrs);
                if changed {
                    metrics.upstream_dns_changes.fetch_add(1, Ordering::Relaxed);
                    events.warn(format_args!(
                        "upstream {label}: {} now resolves to {} (was {})",
                        self.host,
                        list(&addrs),
                        cur.as_ref().map(|o| list(&o.addrs)).unwrap_or_default()
                    ));
                    self.generation.fetch_add(1, Ordering::AcqRel);
                } else if cur.is_none() {
                    tracing::debug!(
                        "upstream {label}: {} resolves to {} for {keep:?}",
                        self.host,
                        list(&addrs)
                    );
                }
                self.keep(
                    &mut cur,
                    Answer {
                        addrs: addrs.clone(),
                        refresh_at: Instant::now() + keep,
                    },
                );
                Ok(Resolved {
                    addrs,
                    generation: self.generation(),
                })
            }
            Err(e) => {
                metrics
                    .upstream_dns_failures
                    .fetch_add(1, Ordering::Relaxed);
                match cur.as_ref().map(|last| last.addrs.clone()) {
                    Some(last) => {
                        metrics.upstream_dns_stale.fetch_add(1, Ordering::Relaxed);
                        let again = resolver.retry_after();
                        events.error(format_args!(
                            "upstream {label}: resolving {} failed ({e}); using the last good answer {} (stale), asking again in {again:?}",
                            self.host,
                            list(&last)
                        ));
                        self.keep(
                            &mut cur,
                            Answer {
                                addrs: last.clone(),
                                refresh_at: Instant::now() + again,
                            },
                        );
                        Ok(Resolved {
                            addrs: last,
                            generation: self.generation(),
                        })
                    }
                    None => {
                        events.error(format_args!(
                            "upstream {label}: resolving {} failed ({e}), and there is no earlier answer",
                            self.host
                        ));
                        Err(format!("resolving {}: {e}", self.host))
                    }
                }
            }
        }
    }
}

fn list(addrs: &[SocketAddr]) -> String {
    addrs
        .iter()
        .map(|a| a.ip().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Resolver::Dns(_) => "dns",
            Resolver::System { .. } => "system",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_are_not_looked_up() {
        let a = Addresses::new("127.0.0.1:80");
        assert_eq!(&*a.fixed.unwrap(), &["127.0.0.1:80".parse().unwrap()]);
        let a = Addresses::new("[::1]:8080");
        assert_eq!(
            &**a.fixed.as_ref().unwrap(),
            &["[::1]:8080".parse().unwrap()]
        );
        assert!(a.is_fresh());
        let a = Addresses::new("app.internal:80");
        assert!(a.fixed.is_none());
        assert!(!a.is_fresh(), "never looked up");
        assert_eq!(&*a.host, "app.internal");
        assert_eq!(a.port, 80);
    }

    /// A name that stops resolving keeps its last good answer; one that never
    /// resolved fails.
    #[tokio::test]
    async fn stale_answer_on_failure() {
        let metrics = Metrics::new();
        let resolver = Resolver::System {
            timeout: Duration::from_secs(5),
        };
        let a = Addresses::new("name.invalid:80");
        assert!(
            a.get(
                &resolver,
                Duration::from_secs(1),
                "t",
                &metrics,
                &Events::default()
            )
            .await
            .is_err()
        );
        // As if an earlier lookup had answered, now expired.
        *a.current.lock().unwrap() = Some(Answer {
            addrs: Arc::from(["10.0.0.7:80".parse::<SocketAddr>().unwrap()]),
            refresh_at: Instant::now(),
        });
        let got = a
            .get(
                &resolver,
                Duration::from_secs(1),
                "t",
                &metrics,
                &Events::default(),
            )
            .await
            .unwrap();
        assert_eq!(&*got.addrs, &["10.0.0.7:80".parse().unwrap()]);
        // The stale answer is in use until the retry delay: fresh, no lookup.
        assert!(a.is_fresh());
        assert_eq!(metrics.upstream_dns_stale.load(Ordering::Relaxed), 1);
        assert_eq!(metrics.upstream_dns_failures.load(Ordering::Relaxed), 2);
        // Not asked again before the retry delay: no new failure.
        a.get(
            &resolver,
            Duration::from_secs(1),
            "t",
            &metrics,
            &Events::default(),
        )
        .await
        .unwrap();
        assert_eq!(metrics.upstream_dns_failures.load(Ordering::Relaxed), 2);
    }
}
