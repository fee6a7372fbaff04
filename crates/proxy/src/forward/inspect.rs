//! TLS inspection of `CONNECT` tunnels (opt-in, `[forward] inspect*`).
//!
//! For a tunnel whose host is in `inspect` (or `inspect_all`) and not in
//! `inspect_bypass`, the front end ends the client's TLS itself with a leaf
//! certificate minted by [`LeafMinter`] for the SNI (or the `CONNECT` host), and
//! serves the decrypted requests through the same request path as any
//! other (HTTP/2 or HTTP/1.1, as the client negotiates with ALPN). Each of them
//! goes to the `CONNECT`'s `host:port` over TLS, through a
//! pool whose certificate check is a browser's: webpki with the `CONNECT` host
//! as the name, against the system's roots and those of `upstream_ca_file`.
//!
//! Which tunnel a request belongs to is carried by a task-local
//! ([`InspectedTunnel::scope`]): the exchange asks [`choose`] before the forward
//! proxy's own destination, which knows nothing of inspection.

use super::destination::TunnelTarget;
use super::mint::LeafMinter;
use crate::config::{ForwardSection, UpstreamConfig};
use crate::metrics::Metrics;
use crate::upstream::{Env, Peer, Pool, Refusal, RequestHeadView};
use domains::{Host, SuffixSet, normalize_host_port};
use http::Method;
use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// How many leaf certificates are kept.
const LEAF_CACHE: usize = 4096;

/// The name logs and metrics give the pools of inspected tunnels.
pub const INSPECT_PEER: &str = "forward";

tokio::task_local! {
    static INSPECTED: Arc<InspectedTunnel>;
}

/// Checks the inspection keys of `[forward]` at load: both CA files or
/// neither, a CA that loads, lists that need one, the origins' roots.
pub(crate) fn validate(cfg: &ForwardSection) -> Result<(), String> {
    match (&cfg.inspect_ca_cert, &cfg.inspect_ca_key) {
        (Some(cert), Some(key)) => {
            LeafMinter::from_pem_files(cert, key, 0)
                .map_err(|e| format!("forward.inspect_ca_cert/inspect_ca_key: {e}"))?;
        }
        (None, None) => {
            if cfg.inspect_all || !cfg.inspect.is_empty() {
                return Err(
                    "forward.inspect / forward.inspect_all need forward.inspect_ca_cert and forward.inspect_ca_key"
                        .into(),
                );
            }
        }
        (Some(_), None) => {
            return Err("forward.inspect_ca_cert is set without forward.inspect_ca_key".into());
        }
        (None, Some(_)) => {
            return Err("forward.inspect_ca_key is set without forward.inspect_ca_cert".into());
        }
    }
    if let Some(f) = &cfg.upstream_ca_file {
        read_roots(f).map_err(|e| format!("forward.upstream_ca_file: {e}"))?;
    }
    load_lists(cfg)?;
    Ok(())
}

fn read_roots(path: &std::path::Path) -> Result<usize, String> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;
    let pem = std::fs::read(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no PEM certificate", path.display()));
    }
    Ok(certs.len())
}

/// The `inspect` set (and whether a file holds `*`) and the `inspect_bypass` set.
fn load_lists(cfg: &ForwardSection) -> Result<(SuffixSet, bool, SuffixSet), String> {
    let mut all = cfg.inspect_all;
    let mut inspect = SuffixSet::new();
    for f in &cfg.inspect {
        let text = std::fs::read(f)
            .map_err(|e| format!("forward.inspect: {}: cannot read: {e}", f.display()))?;
        if text.split(|b| *b == b'\n').any(|l| l.trim_ascii() == b"*") {
            all = true;
            continue;
        }
        inspect
            .add_file(f, 1)
            .map_err(|e| format!("forward.inspect: {e}"))?;
    }
    let mut bypass = SuffixSet::new();
    for f in &cfg.inspect_bypass {
        bypass
            .add_file(f, 1)
            .map_err(|e| format!("forward.inspect_bypass: {e}"))?;
    }
    inspect.shrink_to_fit();
    bypass.shrink_to_fit();
    Ok((inspect, all, bypass))
}

/// What TLS inspection needs: the CA's minter, the lists, and the pools towards
/// the origins of inspected tunnels.
pub struct Inspector {
    minter: Arc<LeafMinter>,
    /// The configuration of every handshake whose ClientHello names a host: its
    /// leaf is picked per handshake from the SNI ([`BySni`]), and its session
    /// cache lets a client resume.
    by_sni: Arc<rustls::ServerConfig>,
    all: bool,
    inspect: SuffixSet,
    bypass: SuffixSet,
    upstream_ca_file: Option<PathBuf>,
    pools: moka::sync::Cache<String, Arc<Pool>>,
    /// The system's roots and `upstream_ca_file`'s, read when first needed.
    roots: Mutex<Option<Arc<rustls::RootCertStore>>>,
    env: Env,
}

impl std::fmt::Debug for Inspector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inspector")
            .field("all", &self.all)
            .field("minter", &self.minter)
            .finish_non_exhaustive()
    }
}

impl Inspector {
    /// The inspector of `cfg`, or `None` when no CA is configured.
    ///
    /// # Errors
    ///
    /// What is wrong with the CA, the lists or the roots, naming the key.
    pub(crate) fn new(cfg: Option<&ForwardSection>, env: Env) -> Result<Option<Self>, String> {
        let Some(cfg) = cfg else { return Ok(None) };
        let (Some(cert), Some(key)) = (&cfg.inspect_ca_cert, &cfg.inspect_ca_key) else {
            return Ok(None);
        };
        let minter = LeafMinter::from_pem_files(cert, key, LEAF_CACHE)
            .map_err(|e| format!("forward.inspect_ca_cert/inspect_ca_key: {e}"))?;
        let minter = Arc::new(minter);
        let by_sni = leaf_config(Arc::new(BySni(Arc::clone(&minter))))?;
        let (inspect, all, bypass) = load_lists(cfg)?;
        Ok(Some(Inspector {
            minter,
            by_sni,
            all,
            inspect,
            bypass,
            upstream_ca_file: cfg.upstream_ca_file.clone(),
            pools: moka::sync::Cache::new(cfg.max_destinations as u64),
            roots: Mutex::new(None),
            env,
        }))
    }

    /// Whether the tunnel to `host` may be decrypted, before its ClientHello is
    /// read: false when no SNI can change [`Inspector::wants`] to true. A tunnel
    /// that may be decrypted connects to its destination only once its
    /// ClientHello shows it will not be.
    pub fn may_want(&self, host: &Host) -> bool {
        !self.bypass.contains(host) && (self.all || self.inspect.contains(host))
    }

    /// Whether the tunnel to `host` (its ClientHello naming `sni`) is decrypted.
    pub fn wants(&self, host: &Host, sni: Option<&str>) -> bool {
        if self.bypass.contains(host) {
            return false;
        }
        if let Some(sni) = sni
            && let Ok(named) = domains::normalize_name(sni)
            && self.bypass.contains(&named)
        {
            return false;
        }
        self.all || self.inspect.contains(host)
    }

    /// The TLS configuration the client's handshake is answered with: a leaf
    /// for the SNI, or for `host` (the `CONNECT` host) when the ClientHello
    /// named none; ALPN `h2` and `http/1.1` (the client's choice decides which
    /// front end serves the tunnel). With an SNI, one configuration serves
    /// every tunnel (its session cache with it); without, one is made for the
    /// handshake.
    ///
    /// # Errors
    ///
    /// When no certificate can be minted for `host`.
    pub fn server_config(
        &self,
        sni: Option<&str>,
        host: &str,
    ) -> Result<Arc<rustls::ServerConfig>, String> {
        match sni {
            Some(name) => {
                // Minted (or found in the cache) now, so that a name that
                // cannot have a leaf is refused with its reason.
                self.minter.certified_key(name).map_err(|e| e.to_string())?;
                Ok(Arc::clone(&self.by_sni))
            }
            None => {
                let leaf = self.minter.certified_key(host).map_err(|e| e.to_string())?;
                leaf_config(Arc::new(Fixed(leaf)))
            }
        }
    }

    /// The decrypted side of the tunnel to `host:port` (whose ClientHello named
    /// `sni`): its requests go to a pool of that origin over TLS.
    ///
    /// # Errors
    ///
    /// When the pool cannot be made (the roots cannot be read).
    pub(crate) fn tunnel(
        &self,
        target: &TunnelTarget,
        sni: Option<Host>,
    ) -> Result<InspectedTunnel, String> {
        let (host, port) = (target.host.clone(), target.port);
        let key = format!("{host}:{port}");
        let pool = self
            .pools
            .try_get_with(key.clone(), || {
                let mut cfg = UpstreamConfig::plain(INSPECT_PEER, key.clone());
                cfg.tls = true;
                if let Host::Name(n) = &host {
                    cfg.tls_sni = Some(n.clone());
                }
                // The pool takes these as the system's roots.
                let mut roots = self
                    .roots
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if roots.is_none() {
                    *roots = Some(self.load_roots()?);
                }
                Pool::new(&cfg, &self.env, &mut roots, None)
                    .map(|mut pool| {
                        // Made only with a new pool, not per tunnel.
                        pool.set_address_check(target.address_check());
                        Arc::new(pool)
                    })
                    .map_err(|e| e.to_string())
            })
            .map_err(|e| e.to_string())?;
        Ok(InspectedTunnel {
            host,
            port,
            sni,
            pool,
            target: target.clone(),
        })
    }
}

impl Inspector {
    /// The roots the origins' certificates are verified against: the system's
    /// and those of `upstream_ca_file`.
    fn load_roots(&self) -> Result<Arc<rustls::RootCertStore>, String> {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject as _;
        let mut store = rustls::RootCertStore::empty();
        let found = rustls_native_certs::load_native_certs();
        store.add_parsable_certificates(found.certs);
        if let Some(path) = &self.upstream_ca_file {
            let pem = std::fs::read(path).map_err(|e| {
                format!(
                    "forward.upstream_ca_file: {}: cannot read: {e}",
                    path.display()
                )
            })?;
            for c in CertificateDer::pem_slice_iter(&pem) {
                let c =
                    c.map_err(|e| format!("forward.upstream_ca_file: {}: {e}", path.display()))?;
                store
                    .add(c)
                    .map_err(|e| format!("forward.upstream_ca_file: {}: {e}", path.display()))?;
            }
        }
        if store.is_empty() {
            return Err(
                "no trust roots for the origins of inspected tunnels: the system has none and forward.upstream_ca_file is not set"
                    .into(),
            );
        }
        Ok(Arc::new(store))
    }
}

/// One certificate for every handshake of a tunnel.
#[derive(Debug)]
struct Fixed(Arc<rustls::sign::CertifiedKey>);

/// The leaf of the name the ClientHello gives (minted, or from the cache).
#[derive(Debug)]
struct BySni(Arc<LeafMinter>);

impl rustls::server::ResolvesServerCert for BySni {
    fn resolve(
        &self,
        hello: rustls::server::ClientHello<'_>,
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        let name = hello.server_name()?;
        match self.0.certified_key(name) {
            Ok(leaf) => Some(leaf),
            Err(e) => {
                tracing::debug!("TLS inspection: no leaf for {name}: {e}");
                None
            }
        }
    }
}

/// A server configuration answering with the leaves `resolver` gives; ALPN
/// `h2` and `http/1.1`.
fn leaf_config(
    resolver: Arc<dyn rustls::server::ResolvesServerCert>,
) -> Result<Arc<rustls::ServerConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

impl rustls::server::ResolvesServerCert for Fixed {
    fn resolve(
        &self,
        _hello: rustls::server::ClientHello<'_>,
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        Some(Arc::clone(&self.0))
    }
}

/// The decrypted side of one inspected tunnel: where its requests go, and the
/// names their Host header must give.
#[derive(Debug)]
pub struct InspectedTunnel {
    host: Host,
    port: u16,
    sni: Option<Host>,
    pool: Arc<Pool>,
    /// The `CONNECT`'s destination, user and policy: each decrypted request is
    /// checked against the policy again, with its path.
    target: TunnelTarget,
}

impl InspectedTunnel {
    /// `host:port` as the logs give it.
    pub fn authority(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// Runs `fut` (the serving of the decrypted requests, or one request's
    /// exchange) with this tunnel as the destination of every request it makes.
    ///
    /// The scope is a task-local: it covers `fut` and what `fut` awaits, not the
    /// tasks `fut` spawns. The HTTP/2 front end, whose streams hyper runs in
    /// tasks of their own, enters it again for each stream (`front/h2.rs`).
    pub async fn scope<F: std::future::Future>(self: &Arc<Self>, fut: F) -> F::Output {
        INSPECTED.scope(Arc::clone(self), fut).await
    }

    /// Checks an HTTP/2 request's `:authority` inside the tunnel as its Host
    /// header is checked: it must name the tunnel's host and port (443 when it
    /// has none) and the SNI, after normalisation; 403 otherwise.
    ///
    /// # Errors
    ///
    /// The refusal: 400 for an authority that cannot be read, 403 for one that
    /// names another host (domain fronting after decryption).
    pub fn check_authority(&self, authority: &[u8]) -> Result<(), Refusal> {
        self.same_host(authority, ":authority")
    }

    /// Where a decrypted request goes: the origin's pool; refused when its Host
    /// header (or absolute URI) names another host or port than the tunnel's
    /// (domain fronting after decryption), and for a nested `CONNECT`.
    fn choose(&self, head: &RequestHeadView<'_>) -> Result<Peer, Refusal> {
        if *head.method == Method::CONNECT {
            return Err(refusal(400, "CONNECT inside an inspected tunnel"));
        }
        let target = head.target;
        let lower = target[..target.len().min(8)].to_ascii_lowercase();
        if lower.starts_with(b"https://") {
            let rest = &target[8..];
            let end = memchr::memchr3(b'/', b'?', b'#', rest).unwrap_or(rest.len());
            self.same_host(&rest[..end], "URI")?;
        } else if !(target.starts_with(b"/") || target == b"*") {
            return Err(refusal(
                400,
                "inside an inspected tunnel, a request target is a path or an https:// URI",
            ));
        }
        let Some(host) = head.host else {
            return Err(refusal(400, "a request without a Host header"));
        };
        self.same_host(host, "Host header")?;
        self.target.check_request(head.uri.path(), head.accept)?;
        Ok(Peer::Pool(Arc::clone(&self.pool)))
    }

    fn same_host(&self, raw: &[u8], what: &str) -> Result<(), Refusal> {
        let (named, port) = normalize_host_port(raw)
            .map_err(|e| refusal(400, format!("{what} inside an inspected tunnel: {e}")))?;
        let port = port.unwrap_or(443);
        let fronted = named != self.host
            || port != self.port
            || self.sni.as_ref().is_some_and(|s| *s != named);
        if fronted {
            return Err(refusal(
                403,
                format!(
                    "domain fronting inside an inspected tunnel: the {what} names {named}:{port}, the tunnel {}",
                    self.authority()
                ),
            ));
        }
        Ok(())
    }
}

fn refusal(status: u16, reason: impl Into<Cow<'static, str>>) -> Refusal {
    Refusal {
        status,
        reason: reason.into(),
        page: None,
    }
}

/// The user of the inspected tunnel a request is served in: `Some` inside one
/// (with the user its `CONNECT` authenticated as, if any), `None` outside.
pub(crate) fn tunnel_user() -> Option<Option<Arc<str>>> {
    INSPECTED.try_with(|t| t.target.user().cloned()).ok()
}

/// The destination of a request served inside an inspected tunnel; `None`
/// outside one.
pub(crate) fn choose(head: &RequestHeadView<'_>) -> Option<Result<Peer, Refusal>> {
    INSPECTED.try_with(|t| t.choose(head)).ok()
}

/// Counts a request inside an inspected tunnel that failed upstream because
/// the origin's certificate could not be verified.
pub(crate) fn upstream_failed(metrics: &Metrics, error: &str) {
    if INSPECTED.try_with(|_| ()).is_ok() && error.contains("certificate") {
        metrics.forward_tunnel("upstream_cert_failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_names_the_keys() {
        let mut cfg = ForwardSection {
            inspect_all: true,
            ..ForwardSection::default()
        };
        let err = validate(&cfg).unwrap_err();
        assert!(err.contains("forward.inspect_ca_cert"), "{err}");
        cfg.inspect_all = false;
        cfg.inspect_ca_key = Some("/nonexistent/ca.key".into());
        let err = validate(&cfg).unwrap_err();
        assert!(err.contains("forward.inspect_ca_key"), "{err}");
        cfg.inspect_ca_cert = Some("/nonexistent/ca.pem".into());
        let err = validate(&cfg).unwrap_err();
        assert!(err.contains("/nonexistent/ca.pem"), "{err}");
        let cfg = ForwardSection {
            upstream_ca_file: Some("/nonexistent/roots.pem".into()),
            ..ForwardSection::default()
        };
        let err = validate(&cfg).unwrap_err();
        assert!(err.contains("forward.upstream_ca_file"), "{err}");
    }
}
