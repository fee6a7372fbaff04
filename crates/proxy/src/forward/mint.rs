//! Certificates for TLS inspection: leaf certificates minted per host name and
//! signed by the operator's CA, which the inspected clients trust.
//!
//! [`LeafMinter`] loads the CA (certificate and PKCS#8 key, PEM) and checks that it
//! is a CA, that the key is the certificate's, and that it has not expired. At
//! each load it makes one fresh ECDSA P-256 key that all its leaves share (one key
//! generation per load, a signature per host). A leaf has:
//! - the host as its only subject alternative name: a DNS name, or an IP address
//!   for an IP literal (`192.0.2.1`, `[2001:db8::1]`), and as its common name
//!   when it fits in the 64 characters X.509 allows there;
//! - a random 128-bit serial (browsers refuse two certificates with the same issuer
//!   and serial, which a serial derived from the shared key would give);
//! - validity from a day ago (clocks run late) to 30 days ahead, clamped into the
//!   CA's own validity;
//! - `digitalSignature`, `serverAuth`, and the CA's key identifier.
//!
//! [`LeafMinter::certified_key`] keeps the leaves in a bounded cache by host, the
//! least recently used going first, and mints again once half of a leaf's
//! remaining validity has passed. The chain handed to rustls is the leaf followed by
//! every certificate of the CA file.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rcgen::{
    CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, PKCS_ECDSA_P256_SHA256, SanType, SerialNumber,
};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use thiserror::Error;
use time::{Duration, OffsetDateTime};

/// How long before now a leaf becomes valid.
pub const BACKDATE: Duration = Duration::days(1);

/// The longest validity of a leaf from now.
pub const MAX_LEAF_VALIDITY: Duration = Duration::days(30);

/// Errors loading the CA or minting a leaf.
#[derive(Debug, Error)]
pub enum MintError {
    /// A file could not be read.
    #[error("{path}: cannot read: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The certificate file holds no PEM certificate, or a broken one.
    #[error("{path}: no usable PEM certificate: {detail}")]
    Certificate {
        /// The certificate file.
        path: PathBuf,
        /// What went wrong.
        detail: String,
    },
    /// The first certificate is not a CA certificate that may sign certificates.
    #[error("{path}: the first certificate is not a CA: {why}")]
    NotCa {
        /// The certificate file.
        path: PathBuf,
        /// Which check failed.
        why: &'static str,
    },
    /// The CA certificate's validity has ended.
    #[error("{path}: the CA certificate expired at {not_after}")]
    CaExpired {
        /// The certificate file.
        path: PathBuf,
        /// Its notAfter.
        not_after: OffsetDateTime,
    },
    /// The key file holds no usable PKCS#8 key.
    #[error("{path}: no usable private key: {detail}")]
    Key {
        /// The key file.
        path: PathBuf,
        /// What went wrong.
        detail: String,
    },
    /// The key is not the CA certificate's.
    #[error("{key_path}: the private key does not belong to the certificate in {cert_path}")]
    KeyMismatch {
        /// The certificate file.
        cert_path: PathBuf,
        /// The key file.
        key_path: PathBuf,
    },
    /// A host name a leaf cannot be made for.
    #[error("cannot mint a certificate for {0:?}: not a DNS name or IP address")]
    HostName(String),
    /// rcgen or rustls refused to make or use the leaf.
    #[error("minting a certificate for {host:?}: {detail}")]
    Sign {
        /// The host.
        host: String,
        /// The library's error.
        detail: String,
    },
    /// No random bytes for a serial number.
    #[error("no random serial number: {0}")]
    Random(String),
}

/// The host a leaf is for, normalised.
#[derive(Debug, Clone, PartialEq, Eq)]
enum LeafName {
    Dns(String),
    Ip(IpAddr),
}

/// Lower case, without a final dot; IPv6 literals with or without brackets.
fn leaf_name(host: &str) -> Result<LeafName, MintError> {
    let bad = || MintError::HostName(host.to_owned());
    let trimmed = host.strip_suffix('.').unwrap_or(host);
    let unbracketed = trimmed
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(trimmed);
    if let Ok(ip) = unbracketed.parse::<IpAddr>() {
        return Ok(LeafName::Ip(ip));
    }
    let name = trimmed.to_ascii_lowercase();
    rustls::pki_types::DnsName::try_from(name.as_str()).map_err(|_| bad())?;
    if name.is_empty() || name.contains(['*', '[', ']']) {
        return Err(bad());
    }
    Ok(LeafName::Dns(name))
}

impl LeafName {
    fn cache_key(&self) -> String {
        match self {
            LeafName::Dns(n) => n.clone(),
            LeafName::Ip(ip) => ip.to_string(),
        }
    }
}

/// A cached leaf.
struct Entry {
    key: Arc<CertifiedKey>,
    /// When to mint again: half-way between minting and notAfter.
    refresh_at: OffsetDateTime,
    /// The cache's tick at the last use, for least-recently-used eviction.
    last_used: u64,
}

#[derive(Default)]
struct Cache {
    entries: HashMap<String, Entry>,
    tick: u64,
}

/// The operator's CA, a leaf key, and a bounded cache of leaves by host.
pub struct LeafMinter {
    issuer: Issuer<'static, KeyPair>,
    /// The certificates of the CA file, sent after each leaf.
    ca_chain: Vec<CertificateDer<'static>>,
    ca_not_before: OffsetDateTime,
    ca_not_after: OffsetDateTime,
    ca_path: PathBuf,
    leaf_key: KeyPair,
    leaf_signer: Arc<dyn rustls::sign::SigningKey>,
    capacity: usize,
    cache: Mutex<Cache>,
}

impl std::fmt::Debug for LeafMinter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeafMinter")
            .field("ca_path", &self.ca_path)
            .field("ca_not_after", &self.ca_not_after)
            .field("capacity", &self.capacity)
            .field("cached", &self.cached_len())
            .finish_non_exhaustive()
    }
}

fn read(path: &Path) -> Result<Vec<u8>, MintError> {
    std::fs::read(path).map_err(|source| MintError::Read {
        path: path.to_owned(),
        source,
    })
}

fn asn1_time(t: x509_parser::time::ASN1Time) -> Option<OffsetDateTime> {
    OffsetDateTime::from_unix_timestamp(t.timestamp()).ok()
}

impl LeafMinter {
    /// Loads the CA from PEM files: `cert_path` (the CA certificate first, then
    /// any certificates to send after it) and `key_path` (its PKCS#8 key); keeps
    /// at most `capacity` leaves (0: none, every call mints).
    ///
    /// # Errors
    ///
    /// [`MintError`] naming the file: unreadable, no certificate or key, not a
    /// CA, expired, or a key of another certificate.
    pub fn from_pem_files(
        cert_path: &Path,
        key_path: &Path,
        capacity: usize,
    ) -> Result<Self, MintError> {
        let cert_pem = read(cert_path)?;
        let key_pem = read(key_path)?;
        Self::from_pem(&cert_pem, cert_path, &key_pem, key_path, capacity)
    }

    /// Loads the CA from PEM text; `cert_path` and `key_path` name it in errors.
    ///
    /// # Errors
    ///
    /// As [`LeafMinter::from_pem_files`], but for reading.
    pub fn from_pem(
        cert_pem: &[u8],
        cert_path: &Path,
        key_pem: &[u8],
        key_path: &Path,
        capacity: usize,
    ) -> Result<Self, MintError> {
        let cert_error = |detail: String| MintError::Certificate {
            path: cert_path.to_owned(),
            detail,
        };
        let ca_chain = CertificateDer::pem_slice_iter(cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| cert_error(e.to_string()))?;
        let Some(ca) = ca_chain.first() else {
            return Err(cert_error("no CERTIFICATE block".into()));
        };
        let (_, x509) =
            x509_parser::parse_x509_certificate(ca).map_err(|e| cert_error(e.to_string()))?;
        let not_ca = |why| MintError::NotCa {
            path: cert_path.to_owned(),
            why,
        };
        match x509.basic_constraints() {
            Ok(Some(bc)) if bc.value.ca => {}
            Ok(_) => return Err(not_ca("basicConstraints without cA")),
            Err(_) => return Err(not_ca("malformed basicConstraints")),
        }
        match x509.key_usage() {
            Ok(None) => {}
            Ok(Some(ku)) if ku.value.key_cert_sign() => {}
            Ok(Some(_)) => return Err(not_ca("keyUsage without keyCertSign")),
            Err(_) => return Err(not_ca("malformed keyUsage")),
        }
        let validity = x509.validity();
        let (Some(ca_not_before), Some(ca_not_after)) = (
            asn1_time(validity.not_before),
            asn1_time(validity.not_after),
        ) else {
            return Err(cert_error("validity dates out of range".into()));
        };
        if ca_not_after <= OffsetDateTime::now_utc() {
            return Err(MintError::CaExpired {
                path: cert_path.to_owned(),
                not_after: ca_not_after,
            });
        }

        let key_error = |detail: String| MintError::Key {
            path: key_path.to_owned(),
            detail,
        };
        let key_der =
            PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| key_error(e.to_string()))?;
        let PrivateKeyDer::Pkcs8(pkcs8) = &key_der else {
            return Err(key_error(
                "not PKCS#8 (\"BEGIN PRIVATE KEY\"); convert it with \
                 `openssl pkcs8 -topk8 -nocrypt -in KEY -out KEY.pk8`"
                    .into(),
            ));
        };
        let ca_key = KeyPair::try_from(pkcs8.secret_pkcs8_der()).map_err(|e| {
            key_error(format!(
                "unsupported key ({e}): ECDSA P-256/P-384, Ed25519 or RSA"
            ))
        })?;
        if rcgen::PublicKeyData::subject_public_key_info(&ca_key) != x509.public_key().raw {
            return Err(MintError::KeyMismatch {
                cert_path: cert_path.to_owned(),
                key_path: key_path.to_owned(),
            });
        }
        let issuer = Issuer::from_ca_cert_der(ca, ca_key).map_err(|e| cert_error(e.to_string()))?;

        let leaf_key =
            KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(|e| MintError::Sign {
                host: String::new(),
                detail: format!("leaf key: {e}"),
            })?;
        let leaf_signer = rustls::crypto::ring::sign::any_ecdsa_type(&PrivateKeyDer::Pkcs8(
            leaf_key.serialize_der().into(),
        ))
        .map_err(|e| MintError::Sign {
            host: String::new(),
            detail: format!("leaf key: {e}"),
        })?;

        Ok(LeafMinter {
            issuer,
            ca_chain: ca_chain
                .into_iter()
                .map(CertificateDer::into_owned)
                .collect(),
            ca_not_before,
            ca_not_after,
            ca_path: cert_path.to_owned(),
            leaf_key,
            leaf_signer,
            capacity,
            cache: Mutex::new(Cache::default()),
        })
    }

    /// The CA certificate's notAfter.
    pub fn ca_not_after(&self) -> OffsetDateTime {
        self.ca_not_after
    }

    /// The number of cached leaves.
    pub fn cached_len(&self) -> usize {
        self.lock_cache().entries.len()
    }

    /// The leaf for `host` (a DNS name in any case, or an IP literal), from the
    /// cache or minted now. A miss on a full cache evicts the least recently used
    /// leaf, found by a scan of the cache (microseconds for thousands of entries,
    /// next to the signature the miss costs anyway).
    ///
    /// # Errors
    ///
    /// [`MintError::HostName`] for a host that is neither, [`MintError::CaExpired`]
    /// once the CA has expired, [`MintError::Sign`] if signing fails.
    pub fn certified_key(&self, host: &str) -> Result<Arc<CertifiedKey>, MintError> {
        self.certified_key_at(host, OffsetDateTime::now_utc())
    }

    /// [`LeafMinter::certified_key`] at the time `now`.
    ///
    /// # Errors
    ///
    /// As [`LeafMinter::certified_key`].
    pub fn certified_key_at(
        &self,
        host: &str,
        now: OffsetDateTime,
    ) -> Result<Arc<CertifiedKey>, MintError> {
        let name = leaf_name(host)?;
        let key = name.cache_key();
        {
            let mut cache = self.lock_cache();
            cache.tick += 1;
            let tick = cache.tick;
            if let Some(entry) = cache.entries.get_mut(&key)
                && now < entry.refresh_at
            {
                entry.last_used = tick;
                return Ok(Arc::clone(&entry.key));
            }
        }
        // Signing happens outside the lock; two threads missing the same host at
        // once both mint, and the later one stays.
        let (certified, not_after) = self.mint_name(&name, &key, now)?;
        let certified = Arc::new(certified);
        if self.capacity > 0 {
            let mut cache = self.lock_cache();
            if cache.entries.len() >= self.capacity && !cache.entries.contains_key(&key) {
                let oldest = cache
                    .entries
                    .iter()
                    .min_by_key(|(_, e)| e.last_used)
                    .map(|(k, _)| k.clone());
                if let Some(oldest) = oldest {
                    cache.entries.remove(&oldest);
                }
            }
            cache.tick += 1;
            let last_used = cache.tick;
            let refresh_at = now + (not_after - now) / 2;
            cache.entries.insert(
                key,
                Entry {
                    key: Arc::clone(&certified),
                    refresh_at,
                    last_used,
                },
            );
        }
        Ok(certified)
    }

    /// Mints a leaf for `host` valid at `now`, without the cache.
    ///
    /// # Errors
    ///
    /// As [`LeafMinter::certified_key`].
    pub fn mint(&self, host: &str, now: OffsetDateTime) -> Result<CertifiedKey, MintError> {
        let name = leaf_name(host)?;
        let key = name.cache_key();
        self.mint_name(&name, &key, now).map(|(c, _)| c)
    }

    fn mint_name(
        &self,
        name: &LeafName,
        host: &str,
        now: OffsetDateTime,
    ) -> Result<(CertifiedKey, OffsetDateTime), MintError> {
        let sign_error = |detail: String| MintError::Sign {
            host: host.to_owned(),
            detail,
        };
        let not_after = (now + MAX_LEAF_VALIDITY).min(self.ca_not_after);
        if not_after <= now {
            return Err(MintError::CaExpired {
                path: self.ca_path.clone(),
                not_after: self.ca_not_after,
            });
        }
        let not_before = (now - BACKDATE).max(self.ca_not_before);

        let mut serial = [0u8; 16];
        getrandom::fill(&mut serial).map_err(|e| MintError::Random(e.to_string()))?;
        // Positive, and 16 bytes long whatever the first byte.
        serial[0] = (serial[0] & 0x7f) | 0x40;

        let mut params = CertificateParams::default();
        params.not_before = not_before;
        params.not_after = not_after;
        params.serial_number = Some(SerialNumber::from_slice(&serial));
        let mut dn = DistinguishedName::new();
        // X.509 bounds the common name at 64 characters; the SAN is what counts.
        if host.len() <= 64 {
            dn.push(DnType::CommonName, host);
        }
        params.distinguished_name = dn;
        params.subject_alt_names = vec![match name {
            LeafName::Ip(ip) => SanType::IpAddress(*ip),
            LeafName::Dns(n) => SanType::DnsName(
                n.as_str()
                    .try_into()
                    .map_err(|e: rcgen::Error| sign_error(e.to_string()))?,
            ),
        }];
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;

        let cert = params
            .signed_by(&self.leaf_key, &self.issuer)
            .map_err(|e| sign_error(e.to_string()))?;
        let mut chain = Vec::with_capacity(1 + self.ca_chain.len());
        chain.push(cert.der().clone());
        chain.extend(self.ca_chain.iter().cloned());
        Ok((
            CertifiedKey::new(chain, Arc::clone(&self.leaf_signer)),
            not_after,
        ))
    }

    fn lock_cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        // The cache holds no invariant a panic elsewhere could break.
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::client::WebPkiServerVerifier;
    use rustls::client::danger::ServerCertVerifier as _;
    use rustls::pki_types::{ServerName, UnixTime};

    fn ca_pem(not_before: OffsetDateTime, not_after: OffsetDateTime) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::default();
        params.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, "Palisade Test Inspection CA");
        params.distinguished_name = dn;
        params.not_before = not_before;
        params.not_after = not_after;
        let cert = params.self_signed(&key).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    fn year_ca() -> (String, String) {
        let now = OffsetDateTime::now_utc();
        ca_pem(now - Duration::days(10), now + Duration::days(365))
    }

    fn minter(ca: &(String, String), capacity: usize) -> LeafMinter {
        LeafMinter::from_pem(
            ca.0.as_bytes(),
            Path::new("ca.pem"),
            ca.1.as_bytes(),
            Path::new("ca.key"),
            capacity,
        )
        .unwrap()
    }

    fn verify(ca: &(String, String), leaf: &CertifiedKey, name: &str) -> Result<(), rustls::Error> {
        let ca_der = CertificateDer::from_pem_slice(ca.0.as_bytes()).unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca_der).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .unwrap();
        let server_name = ServerName::try_from(name.to_owned()).unwrap();
        verifier
            .verify_server_cert(
                &leaf.cert[0],
                &leaf.cert[1..],
                &server_name,
                &[],
                UnixTime::now(),
            )
            .map(|_| ())
    }

    fn leaf_x509<R>(
        leaf: &CertifiedKey,
        f: impl FnOnce(&x509_parser::certificate::X509Certificate<'_>) -> R,
    ) -> R {
        let (_, x509) = x509_parser::parse_x509_certificate(&leaf.cert[0]).unwrap();
        f(&x509)
    }

    #[test]
    fn leaf_verifies_for_its_name_only() {
        let ca = year_ca();
        let m = minter(&ca, 16);
        let leaf = m.certified_key("www.Example.com.").unwrap();
        leaf.keys_match().unwrap();
        assert_eq!(leaf.cert.len(), 2);
        verify(&ca, &leaf, "www.example.com").unwrap();
        let err = verify(&ca, &leaf, "other.example.com").unwrap_err();
        assert!(
            matches!(err, rustls::Error::InvalidCertificate(_)),
            "{err:?}"
        );
        assert!(verify(&ca, &leaf, "example.com").is_err());
    }

    #[test]
    fn other_ca_key_types() {
        for alg in [&rcgen::PKCS_ECDSA_P384_SHA384, &rcgen::PKCS_ED25519] {
            let key = KeyPair::generate_for(alg).unwrap();
            let mut params = CertificateParams::default();
            params.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
            params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
            let now = OffsetDateTime::now_utc();
            params.not_before = now - Duration::days(1);
            params.not_after = now + Duration::days(100);
            let ca = (params.self_signed(&key).unwrap().pem(), key.serialize_pem());
            let m = minter(&ca, 1);
            let long = format!("{}.example", "a".repeat(60));
            for host in ["p384-or-ed25519.example", long.as_str()] {
                let leaf = m.certified_key(host).unwrap();
                verify(&ca, &leaf, host).unwrap();
            }
        }
    }

    #[test]
    fn ip_literals_get_ip_sans() {
        let ca = year_ca();
        let m = minter(&ca, 16);
        let v4 = m.certified_key("192.0.2.10").unwrap();
        verify(&ca, &v4, "192.0.2.10").unwrap();
        assert!(verify(&ca, &v4, "192.0.2.11").is_err());
        let v6 = m.certified_key("[2001:DB8::1]").unwrap();
        verify(&ca, &v6, "2001:db8::1").unwrap();
        assert!(Arc::ptr_eq(&v6, &m.certified_key("2001:db8::1").unwrap()));
    }

    #[test]
    fn validity_is_clamped_into_the_cas() {
        let now = OffsetDateTime::now_utc();
        // A CA made an hour ago that ends in ten days.
        let ca = ca_pem(now - Duration::hours(1), now + Duration::days(10));
        let m = minter(&ca, 4);
        let leaf = m.certified_key("short.example").unwrap();
        verify(&ca, &leaf, "short.example").unwrap();
        let (nb, na) = leaf_x509(&leaf, |x| {
            (
                x.validity().not_before.timestamp(),
                x.validity().not_after.timestamp(),
            )
        });
        assert_eq!(na, m.ca_not_after().unix_timestamp());
        assert!((nb - (now - Duration::hours(1)).unix_timestamp()).abs() <= 1);

        // A long-lived CA: a day back, 30 days ahead.
        let ca = year_ca();
        let m = minter(&ca, 4);
        let leaf = m.certified_key("long.example").unwrap();
        let (nb, na) = leaf_x509(&leaf, |x| {
            (
                x.validity().not_before.timestamp(),
                x.validity().not_after.timestamp(),
            )
        });
        let now = OffsetDateTime::now_utc().unix_timestamp();
        assert!((nb - (now - 86_400)).abs() <= 5, "{nb} {now}");
        assert!((na - (now + 30 * 86_400)).abs() <= 5, "{na} {now}");
        let (ca_flag, serverauth, has_aki) = leaf_x509(&leaf, |x| {
            (
                x.basic_constraints().unwrap().is_some_and(|b| b.value.ca),
                x.extended_key_usage()
                    .unwrap()
                    .is_some_and(|e| e.value.server_auth),
                x.extensions().iter().any(|e| {
                    e.oid == x509_parser::oid_registry::OID_X509_EXT_AUTHORITY_KEY_IDENTIFIER
                }),
            )
        });
        assert!(!ca_flag && serverauth && has_aki);

        // Past the CA's end, nothing is minted.
        let later = m.ca_not_after() + Duration::seconds(1);
        assert!(matches!(
            m.mint("late.example", later),
            Err(MintError::CaExpired { .. })
        ));
    }

    #[test]
    fn leaf_key_shared_within_a_load_serials_differ() {
        let ca = year_ca();
        let m = minter(&ca, 4);
        let a = m.certified_key("a.example").unwrap();
        let b = m.certified_key("b.example").unwrap();
        let spki = |c: &CertifiedKey| leaf_x509(c, |x| x.public_key().raw.to_vec());
        let serial = |c: &CertifiedKey| leaf_x509(c, |x| x.raw_serial().to_vec());
        assert_eq!(spki(&a), spki(&b));
        assert_ne!(serial(&a), serial(&b));
        assert_eq!(serial(&a).len(), 16);
        let other = minter(&ca, 4).certified_key("a.example").unwrap();
        assert_ne!(spki(&a), spki(&other));
    }

    #[test]
    fn cache_is_bounded_lru_and_refreshes() {
        let ca = year_ca();
        let m = minter(&ca, 2);
        let now = OffsetDateTime::now_utc();
        let a = m.certified_key_at("a.example", now).unwrap();
        assert!(Arc::ptr_eq(
            &a,
            &m.certified_key_at("A.EXAMPLE", now).unwrap()
        ));
        let b = m.certified_key_at("b.example", now).unwrap();
        // a is used again, so b is the least recently used when c comes.
        m.certified_key_at("a.example", now).unwrap();
        m.certified_key_at("c.example", now).unwrap();
        assert_eq!(m.cached_len(), 2);
        assert!(Arc::ptr_eq(
            &a,
            &m.certified_key_at("a.example", now).unwrap()
        ));
        assert!(!Arc::ptr_eq(
            &b,
            &m.certified_key_at("b.example", now).unwrap()
        ));
        assert_eq!(m.cached_len(), 2);

        // Half of the 30 days later, a is minted again.
        let a_later = m
            .certified_key_at("a.example", now + Duration::days(14))
            .unwrap();
        assert!(Arc::ptr_eq(&a, &a_later));
        let a_much_later = m
            .certified_key_at("a.example", now + Duration::days(16))
            .unwrap();
        assert!(!Arc::ptr_eq(&a, &a_much_later));

        let none = minter(&ca, 0);
        let x = none.certified_key("x.example").unwrap();
        assert!(!Arc::ptr_eq(&x, &none.certified_key("x.example").unwrap()));
        assert_eq!(none.cached_len(), 0);
    }

    #[test]
    fn shared_between_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<LeafMinter>();
    }

    #[test]
    fn bad_host_names() {
        let m = minter(&year_ca(), 2);
        for host in [
            "",
            ".",
            "exa mple.com",
            "*.example.com",
            "a..b",
            "[::1",
            "ex\u{e9}.com",
            "a/b",
        ] {
            assert!(
                matches!(m.certified_key(host), Err(MintError::HostName(_))),
                "{host:?}"
            );
        }
    }

    #[test]
    fn bad_cas_are_refused_naming_the_file() {
        let ca = year_ca();
        let load = |cert: &str, key: &str| {
            LeafMinter::from_pem(
                cert.as_bytes(),
                Path::new("/etc/ca.pem"),
                key.as_bytes(),
                Path::new("/etc/ca.key"),
                1,
            )
        };
        let err = load("garbage", &ca.1).unwrap_err();
        assert!(matches!(err, MintError::Certificate { .. }));
        assert!(err.to_string().starts_with("/etc/ca.pem: "), "{err}");

        // A self-signed server certificate is no CA.
        let leaf_key = KeyPair::generate().unwrap();
        let leaf = CertificateParams::new(vec!["server.example".to_owned()])
            .unwrap()
            .self_signed(&leaf_key)
            .unwrap();
        let err = load(&leaf.pem(), &leaf_key.serialize_pem()).unwrap_err();
        assert!(matches!(err, MintError::NotCa { .. }), "{err}");

        // Another CA's key.
        let other = year_ca();
        let err = load(&ca.0, &other.1).unwrap_err();
        assert!(matches!(err, MintError::KeyMismatch { .. }), "{err}");
        assert!(err.to_string().starts_with("/etc/ca.key: "), "{err}");

        // No key, or a key that is not PKCS#8.
        assert!(matches!(
            load(&ca.0, "nothing").unwrap_err(),
            MintError::Key { .. }
        ));
        let sec1 = ca.1.replace("PRIVATE KEY", "EC PRIVATE KEY");
        let err = load(&ca.0, &sec1).unwrap_err();
        assert!(err.to_string().contains("PKCS#8"), "{err}");

        // Expired.
        let now = OffsetDateTime::now_utc();
        let old = ca_pem(now - Duration::days(60), now - Duration::days(1));
        assert!(matches!(
            load(&old.0, &old.1).unwrap_err(),
            MintError::CaExpired { .. }
        ));

        let err = LeafMinter::from_pem_files(
            Path::new("/nonexistent/palisade-ca.pem"),
            Path::new("/nonexistent/palisade-ca.key"),
            1,
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("/nonexistent/palisade-ca.pem: cannot read")
        );
    }

    #[test]
    fn handshake_with_a_minted_leaf() {
        use std::io::{Read as _, Write as _};

        #[derive(Debug)]
        struct ByName(LeafMinter);
        impl rustls::server::ResolvesServerCert for ByName {
            fn resolve(&self, hello: rustls::server::ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
                self.0.certified_key(hello.server_name()?).ok()
            }
        }

        let ca = year_ca();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let server_config = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(ByName(minter(&ca, 4))));
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(ca.0.as_bytes()).unwrap())
            .unwrap();
        let client_config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let mut client = rustls::ClientConnection::new(
            Arc::new(client_config),
            ServerName::try_from("inspected.example").unwrap(),
        )
        .unwrap();
        let mut server = rustls::ServerConnection::new(Arc::new(server_config)).unwrap();
        client.writer().write_all(b"ping").unwrap();
        for _ in 0..10 {
            let mut buf = Vec::new();
            while client.wants_write() {
                client.write_tls(&mut buf).unwrap();
            }
            server.read_tls(&mut buf.as_slice()).unwrap();
            server.process_new_packets().unwrap();
            let mut buf = Vec::new();
            while server.wants_write() {
                server.write_tls(&mut buf).unwrap();
            }
            client.read_tls(&mut buf.as_slice()).unwrap();
            client.process_new_packets().unwrap();
        }
        assert!(!client.is_handshaking() && !server.is_handshaking());
        let mut got = [0u8; 4];
        server.reader().read_exact(&mut got).unwrap();
        assert_eq!(&got, b"ping");
    }
}
