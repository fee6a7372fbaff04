//! The registry of pools: every `[[upstream]]` by name with the routes between
//! them ([`Upstreams`]), built from the configuration, rebuilt on a reload
//! (carrying over the servers that stay), started, and retired.

use super::pool::{Env, Pool, Server};
use super::routes::Route;
use super::{UpstreamServerState, events::Events, health, resolve, routes};
use crate::config::Config;
use crate::dns::Dns;
use crate::logs::LogSender;
use crate::metrics::Metrics;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

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
    /// The forward proxy's lists (`[forward]`) cannot be loaded.
    #[error(transparent)]
    Forward(#[from] crate::forward::ForwardSetupError),
    /// The forward proxy's TLS inspection (`[forward] inspect*`) cannot be set up.
    #[error("{0}")]
    Inspect(String),
}

/// Every pool, and the routes that choose between them.
pub struct Upstreams {
    pub(super) pools: Vec<Arc<Pool>>,
    pub(super) routes: Vec<Route>,
    /// The forward-proxy listeners' destination (`[forward]`, its lists and
    /// per-destination pools).
    pub(super) forward: Arc<crate::forward::ForwardDestination>,
    /// TLS inspection of the forward proxy's tunnels, when a CA is configured.
    pub(super) inspect: Option<Arc<crate::forward::inspect::Inspector>>,
    /// What the pools share, kept for a reload.
    pub(super) env: Env,
    /// The background tasks of [`Upstreams::start`] (health checks, first
    /// lookups), stopped by [`Upstreams::retire`] or when dropped.
    pub(super) tasks: Mutex<Vec<tokio::task::AbortHandle>>,
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
        let routes = routes::routes(cfg);
        let forward = Arc::new(crate::forward::ForwardDestination::new(
            cfg.forward.as_ref(),
            env.clone(),
        )?);
        let inspect = crate::forward::inspect::Inspector::new(cfg.forward.as_ref(), env.clone())
            .map_err(UpstreamSetupError::Inspect)?
            .map(Arc::new);
        Ok(Upstreams {
            pools,
            routes,
            forward,
            inspect,
            env,
            tasks: Mutex::new(Vec::new()),
        })
    }

    /// The destination of the forward-proxy listeners.
    pub fn forward(&self) -> &Arc<crate::forward::ForwardDestination> {
        &self.forward
    }

    /// TLS inspection of the forward proxy's tunnels; `None` without a CA.
    pub fn inspector(&self) -> Option<&Arc<crate::forward::inspect::Inspector>> {
        self.inspect.as_ref()
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

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::config::Balance;
    use std::time::{Duration, Instant};

    /// Pools "a", "b" and "c", one server each, with the routes of `extra`.
    pub(in crate::upstream) fn upstreams(extra: &str) -> Upstreams {
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
}
