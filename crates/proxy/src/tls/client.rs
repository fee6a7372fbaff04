//! The rustls client configuration of the proxy's own senders off the box: syslog
//! over TLS (`[[syslog]] transport = "tls"`) and the OTLP exporter over https
//! (`[otlp]`). Both check the receiver's certificate against a `tls_ca_file` (PEM)
//! or, without one, the system's roots (rustls-native-certs), with ring as the
//! crypto provider.

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why a client configuration could not be made. Each variant about the CA file
/// names it; the messages start with the file, so a caller puts its key before.
#[derive(Debug, thiserror::Error)]
pub enum ClientTlsError {
    /// The CA file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The system's reason.
        source: std::io::Error,
    },
    /// A PEM block of the CA file is damaged, or a certificate in it is refused.
    #[error("{path}: {message}")]
    Certificate {
        /// The file.
        path: PathBuf,
        /// What the PEM reader or rustls says.
        message: String,
    },
    /// The CA file holds no certificate.
    #[error("{path}: no certificate")]
    NoCertificate {
        /// The file.
        path: PathBuf,
    },
    /// rustls refused the protocol versions (not expected with ring).
    #[error("TLS client: {0}")]
    Rustls(rustls::Error),
}

/// The certificate authorities in the PEM file `path`: at least one, or an error
/// naming the file.
pub fn read_roots(path: &Path) -> Result<rustls::RootCertStore, ClientTlsError> {
    let pem = std::fs::read(path).map_err(|source| ClientTlsError::Read {
        path: path.to_owned(),
        source,
    })?;
    let bad = |message: String| ClientTlsError::Certificate {
        path: path.to_owned(),
        message,
    };
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(&pem) {
        let c = c.map_err(|e| bad(e.to_string()))?;
        roots.add(c).map_err(|e| bad(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(ClientTlsError::NoCertificate {
            path: path.to_owned(),
        });
    }
    Ok(roots)
}

/// The client configuration checking servers against `ca_file`, or the system's
/// roots when there is none (certificates the system store holds that rustls
/// refuses are skipped). No client certificate; no ALPN (a caller may set it).
pub fn client_config(ca_file: Option<&Path>) -> Result<rustls::ClientConfig, ClientTlsError> {
    let roots = match ca_file {
        Some(path) => read_roots(path)?,
        None => {
            let mut roots = rustls::RootCertStore::empty();
            for c in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(c);
            }
            roots
        }
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(ClientTlsError::Rustls)?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_must_be_readable_and_hold_a_certificate() {
        let dir = std::env::temp_dir().join(format!("palisade-tls-client-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = dir.join("missing.pem");
        let e = client_config(Some(&missing)).unwrap_err();
        assert!(matches!(e, ClientTlsError::Read { .. }), "{e}");
        assert!(e.to_string().contains("missing.pem"), "{e}");

        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "no PEM here\n").unwrap();
        let e = client_config(Some(&empty)).unwrap_err();
        assert!(matches!(e, ClientTlsError::NoCertificate { .. }), "{e}");
        assert_eq!(
            e.to_string(),
            format!("{}: no certificate", empty.display())
        );

        let ca = rcgen::generate_simple_self_signed(vec!["ca.test".to_owned()]).unwrap();
        let good = dir.join("ca.pem");
        std::fs::write(&good, ca.cert.pem()).unwrap();
        assert_eq!(read_roots(&good).unwrap().len(), 1);
        assert!(client_config(Some(&good)).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
