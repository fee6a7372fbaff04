//! The listeners in force, kept by the main thread: their sockets, the accept
//! loops the worker threads run on them, and how a reload adds, changes and
//! removes listeners.
//!
//! A listener is known by its configured address. Its sockets (one per worker,
//! `SO_REUSEPORT`) stay open as long as the address stays in the configuration:
//! a reload never closes and rebinds a port, so no connection is refused. A reload
//! whose listener options changed (`http2`, `proxy_protocol`, `tls`) stops that
//! listener's accept loops and starts new ones on the same sockets with the new
//! options: connections queued meanwhile wait in the kernel's accept queue, and
//! the connections already open keep the options they were accepted with. A
//! listener removed from the file stops accepting, its sockets are closed, and
//! its open connections drain as on shutdown (each ends after its response in
//! flight). A listener added is bound during the reload's preparation, before
//! anything is put in force, so an address that cannot be bound fails the reload
//! and changes nothing.

use crate::config::{Config, ListenerConfig};
use crate::exchange::Shared;
use crate::server::WorkerListener;
use crate::tls::sni::ListenerCerts;
use anyhow::Context as _;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::{mpsc, watch};
use tokio_rustls::TlsAcceptor;

/// The listeners in force and the worker runtimes their accept loops run on.
#[derive(Debug)]
pub struct Listeners {
    workers: Vec<tokio::runtime::Handle>,
    shared: Arc<Shared>,
    /// Held by every accept loop and connection (see
    /// [`crate::runtime::WorkerContext::alive`]); dropped by [`Listeners::stop`].
    alive: Option<mpsc::Sender<()>>,
    running: Vec<Running>,
}

/// One listener in force.
#[derive(Debug)]
struct Running {
    config: ListenerConfig,
    address: SocketAddr,
    /// The listener's sockets, kept here while the accept loops use duplicates.
    sockets: Vec<std::net::TcpListener>,
    certs: Option<Arc<ListenerCerts>>,
    /// Set: the accept loops of this generation stop (options changed).
    accepting: watch::Sender<bool>,
    /// Set: the listener is gone (removed, or shutdown): its accept loops stop
    /// and its connections drain.
    drain: watch::Sender<bool>,
}

/// What [`Listeners::plan`] tells a reload's preparation about the listeners in
/// force (it runs off the main thread).
#[derive(Debug, Clone)]
pub struct Plan {
    running: Vec<(ListenerConfig, Option<Arc<ListenerCerts>>)>,
    workers: usize,
}

impl Plan {
    /// No listener yet (the start), for `workers` worker threads.
    pub fn empty(workers: usize) -> Plan {
        Plan {
            running: Vec::new(),
            workers,
        }
    }
}

/// A configuration's listeners, bound and with their TLS settings and
/// certificates loaded, not yet in force ([`Listeners::apply`]).
#[derive(Debug)]
pub struct Prepared {
    items: Vec<Item>,
}

struct Item {
    config: ListenerConfig,
    /// The listener in force at the same address, if any (by its index in the plan).
    kept: Option<usize>,
    /// The sockets of a new listener, and the address they are bound to.
    bound: Option<(SocketAddr, Vec<std::net::TcpListener>)>,
    /// The certificates the listener serves (new or the kept listener's), and those
    /// a kept listener is to take.
    certs: Option<Arc<ListenerCerts>>,
    new_certs: Option<crate::tls::sni::Prepared>,
    /// The acceptor of the new options; `None` for a plain listener.
    tls: Option<TlsAcceptor>,
    /// New accept loops are needed (a new listener, or its options changed).
    restart: bool,
}

/// What [`Listeners::apply`] did, for the log.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Applied {
    /// Listeners bound and served.
    pub added: Vec<SocketAddr>,
    /// Listeners whose options changed (same sockets, new accept loops).
    pub changed: Vec<SocketAddr>,
    /// Listeners that stopped accepting and drain.
    pub removed: Vec<SocketAddr>,
    /// Certificates put in force on listeners that stay.
    pub certificates: usize,
}

impl std::fmt::Debug for Item {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Item")
            .field("address", &self.config.address)
            .field("kept", &self.kept)
            .field("restart", &self.restart)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

impl Prepared {
    /// Binds (or takes from `inherited`, after a binary upgrade) the sockets of
    /// `cfg`'s listeners that `plan` does not have, and loads every TLS listener's
    /// certificates and settings. Nothing is put in force. Blocking (files).
    pub fn new(
        plan: &Plan,
        cfg: &Config,
        acme: Option<&Arc<crate::tls::acme::Acme>>,
        inherited: &mut crate::upgrade::Inherited,
    ) -> anyhow::Result<Prepared> {
        use crate::tls::sni::Resolver;
        let mut items = Vec::new();
        for l in &cfg.listeners {
            let kept = plan
                .running
                .iter()
                .position(|(c, _)| c.address == l.address);
            let restart =
                kept.is_none_or(|i| format!("{:?}", plan.running[i].0) != format!("{l:?}"));
            let bound = match kept {
                Some(_) => None,
                None => {
                    let adopted = inherited.take(l.address);
                    if adopted.is_empty() {
                        let b = crate::server::bind_sockets(l.address, plan.workers)?;
                        Some(b)
                    } else {
                        Some((l.address, adopted))
                    }
                }
            };
            let (certs, new_certs, tls) = match &l.tls {
                None => (None, None, None),
                Some(t) => {
                    let running = kept.and_then(|i| plan.running[i].1.clone());
                    let (certs, new_certs) = match running {
                        Some(c) => {
                            let p = ListenerCerts::prepare(t, acme.is_some())
                                .with_context(|| format!("listener {}", l.address))?;
                            (c, Some(p))
                        }
                        None => (
                            ListenerCerts::load(l.address, t, acme.cloned(), plan.workers)
                                .with_context(|| format!("listener {}", l.address))?,
                            None,
                        ),
                    };
                    let acme_alpn = t.acme
                        && acme.is_some_and(|a| {
                            a.challenge() == crate::config::AcmeChallenge::TlsAlpn01
                        });
                    let sc = crate::tls::server_config(
                        t,
                        l.http2,
                        Arc::new(Resolver(certs.clone())),
                        acme_alpn,
                    )
                    .with_context(|| format!("listener {}: TLS", l.address))?;
                    (
                        Some(certs),
                        new_certs,
                        Some(TlsAcceptor::from(Arc::new(sc))),
                    )
                }
            };
            items.push(Item {
                config: l.clone(),
                kept,
                bound,
                certs,
                new_certs,
                tls,
                restart,
            });
        }
        Ok(Prepared { items })
    }
}

impl Listeners {
    /// No listener yet: accept loops will run on the `workers` runtimes, for
    /// `shared`, holding `alive`.
    pub fn new(
        workers: Vec<tokio::runtime::Handle>,
        shared: Arc<Shared>,
        alive: mpsc::Sender<()>,
    ) -> Listeners {
        Listeners {
            workers,
            shared,
            alive: Some(alive),
            running: Vec::new(),
        }
    }

    /// What a reload's preparation needs to know of the listeners in force.
    pub fn plan(&self) -> Plan {
        Plan {
            running: self
                .running
                .iter()
                .map(|r| (r.config.clone(), r.certs.clone()))
                .collect(),
            workers: self.workers.len(),
        }
    }

    /// The number of listeners in force.
    pub fn len(&self) -> usize {
        self.running.len()
    }

    /// True without any listener.
    pub fn is_empty(&self) -> bool {
        self.running.is_empty()
    }

    /// The addresses actually bound, in the configuration's order.
    pub fn addresses(&self) -> Vec<SocketAddr> {
        self.running.iter().map(|r| r.address).collect()
    }

    /// Every listening socket, each listener's in turn (to hand them to a new
    /// binary: [`crate::upgrade`]).
    pub fn sockets(&self) -> impl Iterator<Item = &std::net::TcpListener> {
        self.running.iter().flat_map(|r| r.sockets.iter())
    }

    /// The certificates of the TLS listeners in force.
    fn tls_listeners(&self) -> Vec<Arc<ListenerCerts>> {
        self.running
            .iter()
            .filter_map(|r| r.certs.clone())
            .collect()
    }

    /// Puts prepared listeners in force: new ones start accepting, changed ones
    /// accept with their new options on the same sockets, removed ones stop
    /// accepting and drain; kept TLS listeners take their new certificates.
    pub fn apply(&mut self, prepared: Prepared) -> Applied {
        let mut applied = Applied::default();
        let mut old: Vec<Option<Running>> = std::mem::take(&mut self.running)
            .into_iter()
            .map(Some)
            .collect();
        for item in prepared.items {
            let Item {
                config,
                kept,
                bound,
                certs,
                new_certs,
                tls,
                restart,
            } = item;
            if let (Some(c), Some(p)) = (&certs, new_certs) {
                applied.certificates += p.certificates().count();
                c.apply(p);
            }
            let mut running = match (kept.and_then(|i| old.get_mut(i)?.take()), bound) {
                (Some(mut r), _) => {
                    if restart {
                        let _ = r.accepting.send(true);
                        r.accepting = watch::channel(false).0;
                        applied.changed.push(r.address);
                    }
                    r.config = config;
                    r.certs = certs;
                    r
                }
                (None, Some((address, sockets))) => {
                    let address = sockets
                        .first()
                        .and_then(|s| s.local_addr().ok())
                        .unwrap_or(address);
                    applied.added.push(address);
                    Running {
                        config,
                        address,
                        sockets,
                        certs,
                        accepting: watch::channel(false).0,
                        drain: watch::channel(false).0,
                    }
                }
                // A prepared item always has either; nothing to serve otherwise.
                (None, None) => continue,
            };
            if restart {
                self.spawn(&mut running, tls);
            }
            self.running.push(running);
        }
        for r in old.into_iter().flatten() {
            applied.removed.push(r.address);
            let _ = r.drain.send(true);
            // The sockets close here; the accept loops drop their duplicates as
            // they stop.
        }
        self.shared.replace_tls_listeners(self.tls_listeners());
        applied
    }

    /// Starts accept loops on `r`'s sockets: each worker accepts from at least one
    /// of them (duplicates of the sockets kept in `r`).
    fn spawn(&self, r: &mut Running, tls: Option<TlsAcceptor>) {
        let Some(alive) = &self.alive else { return };
        let n = r.sockets.len().max(self.workers.len());
        for k in 0..n {
            let Some(socket) = r.sockets.get(k % r.sockets.len().max(1)) else {
                return;
            };
            let socket = match socket.try_clone() {
                Ok(s) => s,
                Err(e) => {
                    tracing::error!("listener {}: {e}", r.address);
                    continue;
                }
            };
            let worker = k % self.workers.len();
            let l = WorkerListener::new(socket, tls.clone(), r.config.proxy_protocol, r.address)
                .forward(r.config.mode == crate::config::ListenerMode::Forward);
            self.workers[worker].spawn(crate::server::accept_loop(
                l,
                worker,
                self.shared.clone(),
                r.accepting.subscribe(),
                r.drain.subscribe(),
                alive.clone(),
            ));
        }
    }

    /// Shutdown: every listener stops accepting and its connections drain. The
    /// sockets stay open until `self` is dropped (connections arriving meanwhile
    /// wait in the accept queue, for a new process that shares the sockets).
    pub fn stop(&mut self) {
        for r in &self.running {
            let _ = r.drain.send(true);
        }
        self.alive = None;
    }
}
