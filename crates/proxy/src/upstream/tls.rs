//! TLS towards upstream servers: a pool's rustls client configuration (trust
//! roots from `tls_ca_file` or the system, or no verification), the name each
//! server's certificate must carry, and what identifies those settings across a
//! reload.

use crate::config::UpstreamConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use std::sync::Arc;

/// TLS towards one server: the client configuration of its pool and the name the
/// certificate must carry.
pub(super) struct TlsTarget {
    pub(super) connector: tokio_rustls::TlsConnector,
    pub(super) name: ServerName<'static>,
}

/// The rustls client configuration of a pool that speaks TLS, and what identifies
/// its settings (see [`tls_identity`]). `system_roots` caches the system's trust
/// roots across pools (read once, when first needed).
pub(super) fn tls_client_config(
    cfg: &UpstreamConfig,
    system_roots: &mut Option<Arc<rustls::RootCertStore>>,
) -> Result<(Arc<rustls::ClientConfig>, Arc<str>), String> {
    let mut ca_digest = None;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS protocol versions: {e}"))?;
    let mut client = if !cfg.tls_verify {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
            .with_no_client_auth()
    } else {
        let roots = match &cfg.tls_ca_file {
            Some(path) => {
                let mut store = rustls::RootCertStore::empty();
                let pem = std::fs::read(path)
                    .map_err(|e| format!("tls_ca_file {}: {e}", path.display()))?;
                ca_digest = Some(<sha2::Sha256 as sha2::Digest>::digest(&pem));
                let certs = CertificateDer::pem_slice_iter(&pem)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| format!("tls_ca_file {}: {e}", path.display()))?;
                if certs.is_empty() {
                    return Err(format!(
                        "tls_ca_file {}: no certificate found",
                        path.display()
                    ));
                }
                for c in certs {
                    store
                        .add(c)
                        .map_err(|e| format!("tls_ca_file {}: {e}", path.display()))?;
                }
                Arc::new(store)
            }
            None => match system_roots {
                Some(r) => r.clone(),
                None => {
                    let found = rustls_native_certs::load_native_certs();
                    let mut store = rustls::RootCertStore::empty();
                    let (added, _) = store.add_parsable_certificates(found.certs);
                    if added == 0 {
                        let why = found
                            .errors
                            .first()
                            .map_or_else(|| "none installed".to_owned(), ToString::to_string);
                        return Err(format!(
                            "no system trust roots could be read ({why}); set tls_ca_file"
                        ));
                    }
                    let store = Arc::new(store);
                    *system_roots = Some(store.clone());
                    store
                }
            },
        };
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    // The pool speaks HTTP/1.1 to its servers.
    client.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok((Arc::new(client), tls_identity(cfg, ca_digest.as_deref())))
}

/// What decides how a pool's servers are spoken to over TLS: `tls_verify`,
/// `tls_sni`, and the trust roots (`ca_digest`: the SHA-256 of `tls_ca_file`'s
/// content; none: the system's). A reload keeps a server's connections only when
/// this stays the same, so a changed CA file is never trusted through old
/// connections.
pub(super) fn tls_identity(cfg: &UpstreamConfig, ca_digest: Option<&[u8]>) -> Arc<str> {
    use std::fmt::Write as _;
    let mut id = format!("verify={} sni={:?} ca=", cfg.tls_verify, cfg.tls_sni);
    match ca_digest {
        Some(d) => {
            for b in d {
                let _ = write!(id, "{b:02x}");
            }
        }
        None => id.push_str("system"),
    }
    Arc::from(id)
}

/// The name a server's certificate must carry: `tls_sni` when set, else the host
/// of `HOST:PORT` (a name, or an IP address).
pub(super) fn server_name(addr: &str, sni: Option<&str>) -> Result<ServerName<'static>, String> {
    let host = sni.unwrap_or_else(|| {
        let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
        host.strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host)
    });
    ServerName::try_from(host.to_owned())
        .map_err(|_| format!("{host:?} is not a host name or IP address (set tls_sni)"))
}

/// The certificate check of `tls_verify = false`: any certificate is accepted,
/// though the handshake signatures are still checked against it.
#[derive(Debug)]
pub(super) struct AnyCertificate(pub(super) Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
