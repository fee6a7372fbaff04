//! Listeners: binding, TLS with ALPN, the connection limit, and graceful shutdown.

use crate::config::{ListenerConfig, TlsConfig};
use crate::exchange::{ConnInfo, Shared};
use anyhow::Context as _;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc, watch};
use tokio_rustls::TlsAcceptor;

/// Resolves once shutdown has begun (at once if it already has).
pub async fn stopped(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|v| *v).await.is_ok();
}

/// A bound listener, ready to accept.
pub struct Bound {
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    /// The address actually bound.
    pub address: SocketAddr,
}

impl std::fmt::Debug for Bound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bound")
            .field("address", &self.address)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

/// Loads a certificate chain and key and builds a rustls server configuration
/// offering `h2` (when enabled) and `http/1.1`.
pub fn tls_config(tls: &TlsConfig, http2: bool) -> anyhow::Result<rustls::ServerConfig> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&tls.cert)
        .with_context(|| format!("reading certificate {}", tls.cert.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("reading certificate {}", tls.cert.display()))?;
    if certs.is_empty() {
        anyhow::bail!("{}: no certificate found", tls.cert.display());
    }
    let key = PrivateKeyDer::from_pem_file(&tls.key)
        .with_context(|| format!("reading private key {}", tls.key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .with_context(|| {
            format!(
                "certificate {} and key {} do not fit together",
                tls.cert.display(),
                tls.key.display()
            )
        })?;
    cfg.alpn_protocols = if http2 {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    };
    Ok(cfg)
}

/// Binds a listener (and loads its TLS files).
pub async fn bind(cfg: &ListenerConfig) -> anyhow::Result<Bound> {
    let tls = match &cfg.tls {
        Some(t) => Some(TlsAcceptor::from(Arc::new(tls_config(t, cfg.http2)?))),
        None => None,
    };
    let listener = TcpListener::bind(cfg.address)
        .await
        .with_context(|| format!("cannot listen on {}", cfg.address))?;
    let address = listener.local_addr()?;
    Ok(Bound {
        listener,
        tls,
        address,
    })
}

/// Accepts connections until shutdown begins. Each connection task holds a clone of
/// `alive`, so the caller knows when all of them have ended.
pub async fn accept_loop(
    bound: Bound,
    shared: Arc<Shared>,
    limit: Arc<Semaphore>,
    mut shutdown: watch::Receiver<bool>,
    alive: mpsc::Sender<()>,
) {
    let Bound {
        listener,
        tls,
        address,
    } = bound;
    loop {
        let permit = tokio::select! {
            p = limit.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => return,
            },
            () = crate::server::stopped(&mut shutdown) => return,
        };
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    // Usually out of file descriptors: back off instead of spinning.
                    tracing::warn!("accept on {address}: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = crate::server::stopped(&mut shutdown) => return,
        };
        if !shared.access_allows(peer.ip()) {
            // Refused by the [access] lists: closed at once, before any read.
            shared
                .metrics
                .connections_denied
                .fetch_add(1, Ordering::Relaxed);
            tracing::debug!("{}: refused by the access lists", peer.ip());
            drop(stream);
            continue;
        }
        let Some(per_ip) = shared.per_ip.enter(peer.ip()) else {
            // Over limits.connections_per_ip: closed at once, before any read.
            shared
                .metrics
                .connections_refused_per_ip
                .fetch_add(1, Ordering::Relaxed);
            tracing::debug!("{}: over limits.connections_per_ip", peer.ip());
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let local = stream.local_addr().unwrap_or(address);
        let conn = ConnInfo {
            peer,
            local,
            tls: tls.is_some(),
            peer_text: crate::exchange::IpText::new(peer.ip()),
        };
        let shared = shared.clone();
        let tls = tls.clone();
        let shutdown = shutdown.clone();
        let alive = alive.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let _per_ip = per_ip;
            let _alive = alive;
            shared
                .metrics
                .connections_total
                .fetch_add(1, Ordering::Relaxed);
            shared
                .metrics
                .connections_open
                .fetch_add(1, Ordering::Relaxed);
            serve_conn(&shared, conn, stream, tls, shutdown).await;
            shared
                .metrics
                .connections_open
                .fetch_sub(1, Ordering::Relaxed);
        });
    }
}

/// Open client connections per IP address, for `limits.connections_per_ip`.
#[derive(Debug)]
pub struct PerIp {
    limit: usize,
    open: Mutex<HashMap<IpAddr, usize>>,
}

impl PerIp {
    /// Counts connections against `limit` per address; 0 means no limit.
    pub fn new(limit: usize) -> Arc<PerIp> {
        Arc::new(PerIp {
            limit,
            open: Mutex::new(HashMap::new()),
        })
    }

    /// Counts a new connection from `ip`; `None` when `ip` already has `limit`
    /// open. The connection is counted until the guard is dropped.
    pub fn enter(self: &Arc<Self>, ip: IpAddr) -> Option<PerIpGuard> {
        if self.limit == 0 {
            return Some(PerIpGuard { owner: None, ip });
        }
        // IPv4 clients on a dual-stack socket arrive as IPv4-mapped IPv6.
        let ip = ip.to_canonical();
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let n = open.entry(ip).or_insert(0);
        if *n >= self.limit {
            return None;
        }
        *n += 1;
        Some(PerIpGuard {
            owner: Some(self.clone()),
            ip,
        })
    }

    /// Addresses with at least one connection open.
    pub fn addresses(&self) -> usize {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// One connection counted by [`PerIp`]; dropping it uncounts the connection.
#[derive(Debug)]
pub struct PerIpGuard {
    owner: Option<Arc<PerIp>>,
    ip: IpAddr,
}

impl Drop for PerIpGuard {
    fn drop(&mut self) {
        let Some(owner) = &self.owner else {
            return;
        };
        let mut open = owner.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = open.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                // Forget addresses without connections: memory stays bounded by the
                // connections open, not by every client ever seen.
                open.remove(&self.ip);
            }
        }
    }
}

async fn serve_conn(
    shared: &Arc<Shared>,
    conn: ConnInfo,
    stream: TcpStream,
    tls: Option<TlsAcceptor>,
    shutdown: watch::Receiver<bool>,
) {
    let Some(acceptor) = tls else {
        crate::front::h1::serve(shared.clone(), conn, stream, shutdown).await;
        return;
    };
    let hs =
        tokio::time::timeout(shared.server.client_header_timeout, acceptor.accept(stream)).await;
    let tls_stream = match hs {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            tracing::debug!("TLS handshake with {}: {e}", conn.peer);
            return;
        }
        Err(_) => {
            tracing::debug!("TLS handshake with {} timed out", conn.peer);
            return;
        }
    };
    let h2 = tls_stream.get_ref().1.alpn_protocol() == Some(b"h2");
    if h2 {
        crate::front::h2::serve(shared.clone(), conn, tls_stream, shutdown).await;
    } else {
        crate::front::h1::serve(shared.clone(), conn, tls_stream, shutdown).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_ip_limit_counts_open_connections() {
        let p = PerIp::new(2);
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let mapped: IpAddr = "::ffff:192.0.2.1".parse().unwrap();
        let b: IpAddr = "2001:db8::1".parse().unwrap();
        let g1 = p.enter(a).unwrap();
        let g2 = p.enter(mapped).unwrap();
        assert!(
            p.enter(a).is_none(),
            "a third connection from the same address"
        );
        let _g3 = p.enter(b).unwrap();
        drop(g1);
        let _g4 = p.enter(a).unwrap();
        drop(g2);
        drop(_g4);
        assert_eq!(
            p.addresses(),
            1,
            "addresses without connections are forgotten"
        );

        let unlimited = PerIp::new(0);
        let guards: Vec<_> = (0..100).map(|_| unlimited.enter(a).unwrap()).collect();
        assert_eq!(guards.len(), 100);
    }
}
