//! TLS at the edge: the listeners' certificates and how they are chosen.
//!
//! - [`sni`]: the certificates of one TLS listener (`cert`/`key`, `certificates`,
//!   `certificate_dir`), chosen by the name a client asks for (SNI), wildcards
//!   included; replaced on reload and when their files change.
//! - [`acme`]: certificates obtained and renewed from an ACME (RFC 8555)
//!   certificate authority, with the HTTP-01 and TLS-ALPN-01 challenges.
//! - `acme_client`: the HTTP client the ACME protocol runs over (hyper and rustls).
//! - [`client`]: the client configuration of the senders off the box (syslog over
//!   TLS, OTLP over https): a `tls_ca_file` or the system's roots.
//!
//! This module holds what they share: loading a PEM pair into what rustls serves,
//! reading what a certificate says (names, validity, serial), and the rustls server
//! configuration of a listener.

pub mod acme;
mod acme_client;
pub mod client;
pub mod sni;

use crate::config::TlsConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::ResolvesServerCert;
use rustls::sign::CertifiedKey;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The ALPN protocol of the TLS-ALPN-01 challenge (RFC 8737).
pub const ACME_TLS_ALPN: &[u8] = b"acme-tls/1";

/// A certificate or key that could not be used; every variant names its file.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The system's reason.
        source: std::io::Error,
    },
    /// The file is not PEM, or a PEM block in it is damaged.
    #[error("{path}: not a valid PEM file: {message}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// What the PEM reader says.
        message: String,
    },
    /// The file holds no `CERTIFICATE` block.
    #[error("{path}: no certificate found")]
    NoCertificate {
        /// The file.
        path: PathBuf,
    },
    /// The file holds no private key block.
    #[error("{path}: no private key found (PKCS#8, PKCS#1 or SEC1)")]
    NoKey {
        /// The file.
        path: PathBuf,
    },
    /// The leaf certificate is not valid X.509.
    #[error("{path}: the certificate cannot be read: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What the X.509 reader says.
        message: String,
    },
    /// The key is of a kind rustls cannot sign with, or does not belong to the
    /// certificate.
    #[error("certificate {cert} and key {key} do not fit together: {message}")]
    Mismatch {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// rustls's reason.
        message: String,
    },
    /// A certificate file of `certificate_dir` has no key beside it nor in it.
    #[error("{cert}: no key file {key} beside it, and it holds no private key")]
    MissingKey {
        /// The certificate file.
        cert: PathBuf,
        /// The key file looked for.
        key: PathBuf,
    },
    /// `certificate_dir` could not be listed.
    #[error("certificate_dir {dir}: {source}")]
    Dir {
        /// The directory.
        dir: PathBuf,
        /// The system's reason.
        source: std::io::Error,
    },
    /// `certificate_dir` holds no certificate, and the listener has no other.
    #[error("certificate_dir {dir}: no certificate in it (NAME.crt or NAME.pem with NAME.key)")]
    EmptyDir {
        /// The directory.
        dir: PathBuf,
    },
}

/// A certificate ready to serve, with what it says.
#[derive(Debug, Clone)]
pub struct LoadedCert {
    /// The chain and signing key rustls serves.
    pub key: Arc<CertifiedKey>,
    /// The DNS names of the leaf's subjectAltName, lowercased (`*.example.com`
    /// for a wildcard).
    pub names: Vec<String>,
    /// Start of validity, Unix seconds.
    pub not_before: i64,
    /// End of validity, Unix seconds.
    pub not_after: i64,
    /// The serial number in hexadecimal (`0a:1b:...`).
    pub serial: String,
    /// Where it came from: the certificate file, or `acme:NAME`.
    pub source: String,
}

/// What a leaf certificate says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertInfo {
    /// The DNS names of its subjectAltName, lowercased.
    pub names: Vec<String>,
    /// Start of validity, Unix seconds.
    pub not_before: i64,
    /// End of validity, Unix seconds.
    pub not_after: i64,
    /// The serial number in hexadecimal.
    pub serial: String,
}

/// Reads the names, validity and serial of a DER certificate.
pub fn cert_info(der: &[u8]) -> Result<CertInfo, String> {
    use x509_parser::extensions::GeneralName;
    let (_, cert) = x509_parser::parse_x509_certificate(der).map_err(|e| e.to_string())?;
    let mut names = Vec::new();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for n in &san.value.general_names {
            if let GeneralName::DNSName(d) = n {
                let d = d.trim_end_matches('.').to_ascii_lowercase();
                if !d.is_empty() && !names.contains(&d) {
                    names.push(d);
                }
            }
        }
    }
    Ok(CertInfo {
        names,
        not_before: cert.validity().not_before.timestamp(),
        not_after: cert.validity().not_after.timestamp(),
        serial: cert.raw_serial_as_string(),
    })
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Reads a file, naming it in the error.
fn read(path: &Path) -> Result<Vec<u8>, CertError> {
    std::fs::read(path).map_err(|source| CertError::Read {
        path: path.to_owned(),
        source,
    })
}

/// The certificates of a PEM text (`path` names it in errors); none is an error.
fn pem_certs(pem: &[u8], path: &Path) -> Result<Vec<CertificateDer<'static>>, CertError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CertError::Pem {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(CertError::NoCertificate {
            path: path.to_owned(),
        });
    }
    Ok(certs)
}

/// The first private key of a PEM text (`path` names it in errors).
fn pem_key(pem: &[u8], path: &Path) -> Result<PrivateKeyDer<'static>, CertError> {
    use rustls::pki_types::pem::Error;
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| match e {
        Error::NoItemsFound => CertError::NoKey {
            path: path.to_owned(),
        },
        e => CertError::Pem {
            path: path.to_owned(),
            message: e.to_string(),
        },
    })
}

/// Makes a servable certificate of a PEM chain and key; `cert_path` and
/// `key_path` name them in errors, and the first is its `source`.
pub fn from_pem(
    cert_pem: &[u8],
    key_pem: &[u8],
    cert_path: &Path,
    key_path: &Path,
) -> Result<LoadedCert, CertError> {
    let chain = pem_certs(cert_pem, cert_path)?;
    let key = pem_key(key_pem, key_path)?;
    let info = cert_info(&chain[0]).map_err(|message| CertError::Parse {
        path: cert_path.to_owned(),
        message,
    })?;
    let certified =
        CertifiedKey::from_der(chain, key, &provider()).map_err(|e| CertError::Mismatch {
            cert: cert_path.to_owned(),
            key: key_path.to_owned(),
            message: e.to_string(),
        })?;
    Ok(LoadedCert {
        key: Arc::new(certified),
        names: info.names,
        not_before: info.not_before,
        not_after: info.not_after,
        serial: info.serial,
        source: cert_path.display().to_string(),
    })
}

/// Loads a certificate chain file and its key file (which may be the same file).
pub fn load_pair(cert: &Path, key: &Path) -> Result<LoadedCert, CertError> {
    let cert_pem = read(cert)?;
    let key_pem = if key == cert {
        cert_pem.clone()
    } else {
        read(key)?
    };
    from_pem(&cert_pem, &key_pem, cert, key)
}

/// The rustls configuration of a TLS listener: certificates from `resolver`, ALPN
/// `h2` (with `http2`) and `http/1.1` (and `acme-tls/1` last, with `acme_alpn`, for
/// the TLS-ALPN-01 challenge), session tickets and cache as `tls` asks.
pub fn server_config(
    tls: &TlsConfig,
    http2: bool,
    resolver: Arc<dyn ResolvesServerCert>,
    acme_alpn: bool,
) -> Result<rustls::ServerConfig, rustls::Error> {
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    if tls.session_tickets {
        cfg.ticketer = rustls::crypto::ring::Ticketer::new()?;
    }
    cfg.session_storage = if tls.session_cache > 0 {
        rustls::server::ServerSessionMemoryCache::new(tls.session_cache)
    } else {
        Arc::new(rustls::server::NoServerSessionStorage {})
    };
    let mut alpn = Vec::new();
    if http2 {
        alpn.push(b"h2".to_vec());
    }
    alpn.push(b"http/1.1".to_vec());
    if acme_alpn {
        // Last: rustls picks the first of its own list the client offers, so only
        // a client that offers nothing else (the CA's validation) gets it.
        alpn.push(ACME_TLS_ALPN.to_vec());
    }
    cfg.alpn_protocols = alpn;
    Ok(cfg)
}

/// Unix seconds now.
pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Seconds since the Unix epoch as RFC 3339 UTC text (`2025-01-31T12:00:00Z`).
pub fn rfc3339(unix: i64) -> String {
    let days = unix.div_euclid(86_400);
    let secs = unix.rem_euclid(86_400);
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn self_signed(names: &[&str]) -> (String, String) {
        let c = rcgen::generate_simple_self_signed(
            names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>(),
        )
        .unwrap();
        (c.cert.pem(), c.signing_key.serialize_pem())
    }

    #[test]
    fn a_pair_loads_with_its_names() {
        let (cert, key) = self_signed(&["Example.COM", "*.example.com"]);
        let c = from_pem(
            cert.as_bytes(),
            key.as_bytes(),
            Path::new("a.crt"),
            Path::new("a.key"),
        )
        .unwrap();
        assert_eq!(c.names, ["example.com", "*.example.com"]);
        assert!(c.not_after > c.not_before);
        assert!(!c.serial.is_empty());
        assert_eq!(c.source, "a.crt");
    }

    #[test]
    fn bad_pem_names_the_file() {
        let (cert, key) = self_signed(&["a.test"]);
        let (_, other_key) = self_signed(&["b.test"]);
        let cases: [(&[u8], &[u8], &str); 4] = [
            (b"garbage", key.as_bytes(), "a.crt: no certificate found"),
            (
                b"-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n",
                key.as_bytes(),
                "a.crt: not a valid PEM file",
            ),
            (cert.as_bytes(), b"", "a.key: no private key found"),
            (
                cert.as_bytes(),
                other_key.as_bytes(),
                "certificate a.crt and key a.key do not fit together",
            ),
        ];
        for (c, k, want) in cases {
            let e = from_pem(c, k, Path::new("a.crt"), Path::new("a.key"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{want}: {e}");
        }
        let e = load_pair(
            Path::new("/nonexistent/x.crt"),
            Path::new("/nonexistent/x.key"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("/nonexistent/x.crt: "), "{e}");
    }

    #[test]
    fn rfc3339_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_735_689_599), "2024-12-31T23:59:59Z");
    }
}
