//! Listeners: binding, the accept loop, TLS handshakes with ALPN (the certificates
//! are [`crate::tls`]'s), the connection limit, and graceful shutdown. The workers
//! that run the accept loops are [`crate::runtime`]'s.

use crate::client_address::SourceTrust;
use crate::exchange::{ConnInfo, Shared};
use crate::runtime::stopped;
use crate::slots::{ConnectionSlot, PerIpGuard, Wait};
use anyhow::Context as _;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio_rustls::TlsAcceptor;

/// The socket of one listener that one worker thread accepts from.
pub struct WorkerListener {
    socket: std::net::TcpListener,
    tls: Option<TlsAcceptor>,
    /// Connections begin with a PROXY protocol header.
    proxy_protocol: bool,
    /// A forward-proxy listener (`mode = "forward"`).
    forward: bool,
    address: SocketAddr,
}

impl WorkerListener {
    /// One worker's socket of a listener at `address`, with its options.
    pub fn new(
        socket: std::net::TcpListener,
        tls: Option<TlsAcceptor>,
        proxy_protocol: bool,
        address: SocketAddr,
    ) -> WorkerListener {
        WorkerListener {
            socket,
            tls,
            proxy_protocol,
            forward: false,
            address,
        }
    }

    /// The same listener as a forward proxy (`mode = "forward"`) when `forward`.
    pub fn forward(mut self, forward: bool) -> WorkerListener {
        self.forward = forward;
        self
    }
}

impl std::fmt::Debug for WorkerListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerListener")
            .field("address", &self.address)
            .field("tls", &self.tls.is_some())
            .field("proxy_protocol", &self.proxy_protocol)
            .field("forward", &self.forward)
            .finish()
    }
}

/// One listening socket on `address`, non-blocking; with `reuse_port`, other
/// sockets with the option may share the address.
fn listen_socket(address: SocketAddr, reuse_port: bool) -> std::io::Result<std::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(
        Domain::for_address(address),
        Type::STREAM,
        Some(Protocol::TCP),
    )?;
    // Like the standard library and tokio: rebinding right after a restart works
    // while old connections are in TIME_WAIT.
    socket.set_reuse_address(true)?;
    if reuse_port {
        socket.set_reuse_port(true)?;
    }
    socket.set_nonblocking(true)?;
    socket.bind(&address.into())?;
    socket.listen(1024)?;
    Ok(socket.into())
}

/// Binds a listener's `address`: one socket per worker thread; returns the
/// address actually bound (the port the system chose, for port 0) and the sockets.
///
/// The address is first bound once without `SO_REUSEPORT`, which fails when any
/// other socket holds it, another Palisade's included, so two instances never
/// share a port by accident; that probe is then closed and the `workers` sockets
/// are bound with `SO_REUSEPORT` (on the port the probe got, for port 0).
pub fn bind_sockets(
    address: SocketAddr,
    workers: usize,
) -> anyhow::Result<(SocketAddr, Vec<std::net::TcpListener>)> {
    let cannot = || format!("cannot listen on {address}");
    let probe = listen_socket(address, false).with_context(cannot)?;
    let bound = probe.local_addr().with_context(cannot)?;
    drop(probe);
    let sockets = (0..workers.max(1))
        .map(|_| listen_socket(bound, true))
        .collect::<Result<Vec<_>, _>>()
        .with_context(cannot)?;
    Ok((bound, sockets))
}

/// Accepts connections on one worker's socket until `accepting` is set (a reload
/// changed the listener's options: new loops take over the socket) or `drain` is
/// (the listener was removed, or shutdown began). Each connection runs on this
/// worker's runtime, drains when `drain` is set, and holds a clone of `alive`, so
/// the main thread knows when all of them have ended.
pub async fn accept_loop(
    listener: WorkerListener,
    worker: usize,
    shared: Arc<Shared>,
    mut accepting: watch::Receiver<bool>,
    drain: watch::Receiver<bool>,
    alive: mpsc::Sender<()>,
) {
    let mut shutdown = drain;
    let WorkerListener {
        socket,
        tls,
        proxy_protocol,
        forward,
        address,
    } = listener;
    let listener = match TcpListener::from_std(socket) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("worker {worker}: cannot accept on {address}: {e}");
            return;
        }
    };
    loop {
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
            () = stopped(&mut accepting) => return,
            () = stopped(&mut shutdown) => return,
        };
        shared.workers.count_connection(worker);
        let trust = shared.policy().client_address.trust(peer.ip());
        if proxy_protocol && trust != SourceTrust::Trusted {
            // Only a trusted proxy may say who the client is: closed at once,
            // before any read.
            shared.metrics.proxy_protocol_refused("untrusted");
            tracing::debug!(
                "{}: PROXY protocol listener {address}: not a trusted proxy",
                peer.ip()
            );
            drop(stream);
            continue;
        }
        // A trusted proxy's connections carry other clients: the [access] lists and
        // limits.connections_per_ip apply to those clients once they are known
        // (from the PROXY header, or per request), not to the proxy.
        let per_ip = if trust == SourceTrust::Trusted {
            None
        } else {
            match admit(&shared, peer.ip()) {
                Some(g) => Some(g),
                None => {
                    drop(stream);
                    continue;
                }
            }
        };
        // A slot of limits.connections; when none is free, the oldest connections
        // waiting for a handshake, a head or their next request are reclaimed.
        let first_wait = if tls.is_some() {
            Wait::Handshake
        } else {
            Wait::Head
        };
        // A connection accepted is served whenever a slot is free, even when a
        // drain began meanwhile (the front end then serves it gracefully): were the
        // two branches tried in random order, one accepted just as a drain began
        // would be dropped, and its client reset (seen once in 300,000 requests of
        // the zero-downtime load run, during a binary upgrade). Only a connection
        // still waiting for a slot gives up when the drain begins.
        let slot = tokio::select! {
            biased;
            s = shared.slots.take(first_wait) => match s {
                Some(s) => s,
                None => return,
            },
            () = stopped(&mut shutdown) => return,
        };
        let _ = stream.set_nodelay(true);
        let local = stream.local_addr().unwrap_or(address);
        let shared = shared.clone();
        let tls = tls.clone();
        let shutdown = shutdown.clone();
        let alive = alive.clone();
        tokio::spawn(async move {
            let _alive = alive;
            let mut stream = stream;
            shared
                .metrics
                .connections_total
                .fetch_add(1, Ordering::Relaxed);
            shared
                .metrics
                .connections_open
                .fetch_add(1, Ordering::Relaxed);
            let accepted = if proxy_protocol {
                // Boxed: only the connections of these listeners carry its state.
                Box::pin(accept_proxied(
                    &shared,
                    &mut stream,
                    peer,
                    local,
                    tls.is_some(),
                    &slot,
                ))
                .await
            } else {
                Some((ConnInfo::direct(peer, local, tls.is_some(), trust), per_ip))
            };
            if let Some((mut conn, per_ip)) = accepted {
                conn.forward = forward;
                let _per_ip = per_ip;
                serve_conn(&shared, conn, stream, tls, slot, shutdown).await;
            }
            shared
                .metrics
                .connections_open
                .fetch_sub(1, Ordering::Relaxed);
        });
    }
}

/// The connection-time checks on a client address: the `[access]` lists, then
/// `limits.connections_per_ip`. `None` (counted and logged) when the connection
/// is to be closed; otherwise the connection's place in the per-address count.
fn admit(shared: &Shared, ip: IpAddr) -> Option<PerIpGuard> {
    if !shared.access_allows(ip) {
        // Refused by the [access] lists: closed at once, before any read.
        shared
            .metrics
            .connections_denied
            .fetch_add(1, Ordering::Relaxed);
        tracing::debug!("{ip}: refused by the access lists");
        return None;
    }
    let Some(per_ip) = shared.per_ip.enter(ip) else {
        // Over limits.connections_per_ip: closed at once, before any read.
        shared
            .metrics
            .connections_refused_per_ip
            .fetch_add(1, Ordering::Relaxed);
        tracing::debug!("{ip}: over limits.connections_per_ip");
        return None;
    };
    Some(per_ip)
}

/// Reads the PROXY protocol header of a connection from the trusted proxy `peer`
/// (within `server.client_header_timeout`, and while its slot is not reclaimed),
/// then applies the connection-time checks to the client it names, unless that
/// client is itself a trusted proxy. `None` (counted and logged at debug level)
/// when the connection is to be closed.
async fn accept_proxied(
    shared: &Shared,
    stream: &mut TcpStream,
    peer: SocketAddr,
    local: SocketAddr,
    tls: bool,
    slot: &ConnectionSlot,
) -> Option<(ConnInfo, Option<PerIpGuard>)> {
    let read = tokio::time::timeout(
        shared.server.client_header_timeout,
        crate::client_address::proxy_protocol::read_header(stream),
    );
    let header = tokio::select! {
        r = read => r,
        () = slot.reclaimed() => {
            tracing::debug!("{peer}: reclaimed while waiting for its PROXY header (connection slots)");
            return None;
        }
    };
    let header = match header {
        Ok(Ok(h)) => h,
        Ok(Err(e)) => {
            shared.metrics.proxy_protocol_refused(e.label());
            tracing::debug!("{peer}: {e}");
            return None;
        }
        Err(_) => {
            shared.metrics.proxy_protocol_refused("timeout");
            tracing::debug!("{peer}: no PROXY protocol header within server.client_header_timeout");
            return None;
        }
    };
    let source = header.source.unwrap_or(peer);
    let trust = shared.policy().client_address.trust(source.ip());
    let per_ip = if trust == SourceTrust::Trusted {
        None
    } else {
        Some(admit(shared, source.ip())?)
    };
    Some((ConnInfo::proxied(peer, source, local, tls, trust), per_ip))
}

async fn serve_conn(
    shared: &Arc<Shared>,
    conn: ConnInfo,
    stream: TcpStream,
    tls: Option<TlsAcceptor>,
    slot: ConnectionSlot,
    shutdown: watch::Receiver<bool>,
) {
    // The plain HTTP/1 front end is the only part held by every waiting plain
    // connection; the TLS parts (the handshake, HTTP/2's state) are boxed so that
    // they do not make every connection's task as large as theirs.
    let Some(acceptor) = tls else {
        crate::front::h1::serve(shared.clone(), conn, stream, slot, shutdown).await;
        return;
    };
    let handshake = Box::pin(tokio::time::timeout(
        shared.server.client_header_timeout,
        acceptor.accept(stream),
    ));
    let hs = tokio::select! {
        hs = handshake => hs,
        () = slot.reclaimed() => {
            tracing::debug!("TLS handshake with {}: reclaimed (connection slots)", conn.source);
            return;
        }
    };
    let tls_stream = match hs {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            tracing::debug!("TLS handshake with {}: {e}", conn.source);
            return;
        }
        Err(_) => {
            tracing::debug!("TLS handshake with {} timed out", conn.source);
            return;
        }
    };
    let alpn = tls_stream.get_ref().1.alpn_protocol();
    if alpn == Some(crate::tls::ACME_TLS_ALPN) {
        // A TLS-ALPN-01 validation: the handshake (with the challenge certificate)
        // was all of it; no HTTP follows (RFC 8737).
        let mut tls_stream = tls_stream;
        let _ = tokio::io::AsyncWriteExt::shutdown(&mut tls_stream).await;
        return;
    }
    let h2 = alpn == Some(b"h2");
    if h2 {
        Box::pin(crate::front::h2::serve(
            shared.clone(),
            conn,
            tls_stream,
            slot,
            shutdown,
        ))
        .await;
    } else {
        Box::pin(crate::front::h1::serve(
            shared.clone(),
            conn,
            tls_stream,
            slot,
            shutdown,
        ))
        .await;
    }
}
