//! The addresses of the names tunnels go to, kept for their TTL.
//!
//! A `CONNECT` names its destination; asking the resolver for every tunnel would
//! cost each one a lookup: with the system resolver, a `getaddrinfo` call on a
//! blocking thread that reads `/etc/hosts` and asks the kernel for the
//! interfaces' addresses. [`NameCache`] keeps each answer for its TTL (the
//! system resolver gives none: one second, as the pools' `resolve_min_ttl`
//! does by default), at most `dns.max_ttl`, for a bounded number of names.
//! Failures are not kept: the next tunnel asks again.

use crate::upstream::Resolver;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The shortest time an answer is kept.
const MIN_TTL: Duration = Duration::from_secs(1);

/// One kept answer.
#[derive(Clone)]
struct Answer {
    ips: Arc<[IpAddr]>,
    until: Instant,
}

/// The resolver, with the answers it gave kept for their TTL; see the module
/// documentation.
#[derive(Clone)]
pub struct NameCache {
    resolver: Resolver,
    answers: moka::sync::Cache<Box<str>, Answer>,
}

impl std::fmt::Debug for NameCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NameCache")
            .field("names", &self.answers.entry_count())
            .finish()
    }
}

impl NameCache {
    /// A cache of at most `capacity` names over `resolver`.
    pub(crate) fn new(resolver: Resolver, capacity: u64) -> NameCache {
        NameCache {
            resolver,
            answers: moka::sync::Cache::new(capacity),
        }
    }

    /// The addresses of `name` for `port`, in the order the resolver gave them:
    /// a kept answer while it lasts, else a new lookup.
    ///
    /// # Errors
    ///
    /// What the resolver said when the lookup failed.
    pub async fn addresses(&self, name: &str, port: u16) -> Result<Vec<SocketAddr>, String> {
        let now = Instant::now();
        let ips = match self.answers.get(name) {
            Some(a) if now < a.until => a.ips,
            _ => {
                let (ips, ttl) = self.resolver.lookup(name, port).await?;
                let ttl = ttl.clamp(MIN_TTL, self.resolver.max_ttl().max(MIN_TTL));
                let ips: Arc<[IpAddr]> = ips.into();
                self.answers.insert(
                    name.into(),
                    Answer {
                        ips: Arc::clone(&ips),
                        until: now + ttl,
                    },
                );
                ips
            }
        };
        Ok(ips.iter().map(|ip| SocketAddr::new(*ip, port)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn answers_are_kept_and_failures_are_not() {
        let cache = NameCache::new(
            Resolver::System {
                timeout: Duration::from_secs(5),
            },
            16,
        );
        let a = cache.addresses("localhost", 8080).await.unwrap();
        assert!(!a.is_empty());
        assert!(a.iter().all(|s| s.port() == 8080 && s.ip().is_loopback()));
        assert_eq!(
            cache.answers.get("localhost").map(|x| x.ips.len()),
            Some(a.len())
        );
        // The kept answer serves another port too.
        let b = cache.addresses("localhost", 443).await.unwrap();
        assert_eq!(b.len(), a.len());
        assert!(b.iter().all(|s| s.port() == 443));
        // A name that does not resolve is not kept.
        assert!(cache.addresses("no-such-name.invalid", 1).await.is_err());
        assert!(cache.answers.get("no-such-name.invalid").is_none());
    }
}
