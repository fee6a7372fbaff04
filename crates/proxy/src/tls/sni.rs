//! The certificates of one TLS listener, chosen by SNI.
//!
//! A listener's certificates come from `cert`/`key`, `certificates` and the pairs
//! of `certificate_dir`, in that order; each serves the DNS names of its
//! subjectAltName (`*.example.com` matches one label: `a.example.com`, not
//! `example.com` nor `a.b.example.com`). An exact name wins over a wildcard, and
//! for the same name the certificate listed first wins. The first certificate is
//! the default, for clients that send no SNI or a name no certificate has.
//!
//! The map a handshake reads is kept per worker thread ([`PerWorker`]) and
//! replaced whole: on reload ([`ListenerCerts::prepare`], [`ListenerCerts::apply`])
//! and when a file changes ([`ListenerCerts::check_files`], run every
//! `watch_interval`). A file that fails to load then keeps the certificate in force
//! for that pair and is logged; the listener never loses its certificates.

use super::acme::Acme;
use super::{CertError, LoadedCert, load_pair};
use crate::config::TlsConfig;
use crate::runtime::PerWorker;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// Certificates by name: exact names, wildcards (by the part after `*.`), and
/// the default.
#[derive(Debug, Default)]
pub struct CertMap {
    exact: HashMap<String, Arc<CertifiedKey>>,
    wildcard: HashMap<String, Arc<CertifiedKey>>,
    default: Option<Arc<CertifiedKey>>,
}

impl CertMap {
    /// The map of `certs`: the first is the default, and a name two of them carry
    /// goes to the first.
    pub fn build<'a>(certs: impl IntoIterator<Item = &'a LoadedCert>) -> CertMap {
        let mut map = CertMap::default();
        for c in certs {
            if map.default.is_none() {
                map.default = Some(c.key.clone());
            }
            for n in &c.names {
                let (table, key) = match n.strip_prefix("*.") {
                    Some(rest) => (&mut map.wildcard, rest),
                    None => (&mut map.exact, n.as_str()),
                };
                table.entry(key.to_owned()).or_insert_with(|| c.key.clone());
            }
        }
        map
    }

    /// The certificate for `name` (lowercase, without a trailing dot): an exact
    /// name, else a wildcard one label up; `None` when neither (the default is
    /// not consulted).
    pub fn lookup(&self, name: &str) -> Option<&Arc<CertifiedKey>> {
        if let Some(k) = self.exact.get(name) {
            return Some(k);
        }
        let (_, parent) = name.split_once('.')?;
        if parent.is_empty() {
            return None;
        }
        self.wildcard.get(parent)
    }

    /// The certificate for clients without SNI or with an unknown name.
    pub fn default_cert(&self) -> Option<&Arc<CertifiedKey>> {
        self.default.as_ref()
    }

    /// Whether the map holds no certificate.
    pub fn is_empty(&self) -> bool {
        self.default.is_none()
    }
}

/// The name a client asked for, lowercased and without a trailing dot.
fn normalize(name: &str) -> std::borrow::Cow<'_, str> {
    let name = name.strip_suffix('.').unwrap_or(name);
    if name.bytes().any(|b| b.is_ascii_uppercase()) {
        std::borrow::Cow::Owned(name.to_ascii_lowercase())
    } else {
        std::borrow::Cow::Borrowed(name)
    }
}

/// One certificate pair as found in the configuration or the directory (`key` is
/// `cert` for a PEM file holding both).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Pair {
    /// The certificate chain file.
    pub cert: PathBuf,
    /// The private key file.
    pub key: PathBuf,
}

/// The pairs of a listener's `tls`, in order: `cert`/`key`, `certificates`, then
/// `certificate_dir`'s in file-name order. The directory holds `NAME.crt` or
/// `NAME.pem` with `NAME.key`, or a `NAME.pem` holding both; hidden files (editors'
/// and tools' temporary files) are skipped. With `strict`, a certificate file of the
/// directory without a key is an error; otherwise it is left out (and reported in
/// `skipped`).
pub fn pairs(
    tls: &TlsConfig,
    strict: bool,
    skipped: &mut Vec<CertError>,
) -> Result<Vec<Pair>, CertError> {
    let mut out = Vec::new();
    if let (Some(cert), Some(key)) = (&tls.cert, &tls.key) {
        out.push(Pair {
            cert: cert.clone(),
            key: key.clone(),
        });
    }
    for p in &tls.certificates {
        out.push(Pair {
            cert: p.cert.clone(),
            key: p.key.clone(),
        });
    }
    if let Some(dir) = &tls.certificate_dir {
        let listed = std::fs::read_dir(dir).map_err(|source| CertError::Dir {
            dir: dir.clone(),
            source,
        })?;
        let mut files: Vec<PathBuf> = Vec::new();
        for e in listed {
            let e = e.map_err(|source| CertError::Dir {
                dir: dir.clone(),
                source,
            })?;
            files.push(e.path());
        }
        files.sort();
        for f in &files {
            let Some(name) = f.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            if name.starts_with('.') || !f.is_file() {
                continue;
            }
            let Some(stem) = name
                .strip_suffix(".crt")
                .or_else(|| name.strip_suffix(".pem"))
            else {
                continue;
            };
            let key = dir.join(format!("{stem}.key"));
            let pair = if key.is_file() {
                Pair {
                    cert: f.clone(),
                    key,
                }
            } else if name.ends_with(".pem") && pem_holds_key(f) {
                Pair {
                    cert: f.clone(),
                    key: f.clone(),
                }
            } else {
                let e = CertError::MissingKey {
                    cert: f.clone(),
                    key,
                };
                if strict {
                    return Err(e);
                }
                skipped.push(e);
                continue;
            };
            out.push(pair);
        }
    }
    Ok(out)
}

/// Whether a PEM file holds a private key block.
fn pem_holds_key(path: &Path) -> bool {
    std::fs::read(path).is_ok_and(|t| {
        memchr::memmem::find(&t, b"-----BEGIN ").is_some()
            && memchr::memmem::find(&t, b"PRIVATE KEY-----").is_some()
    })
}

/// What the periodic check compares: a file's modification time and size.
type Stamp = Option<(SystemTime, u64)>;

fn stamp(path: &Path) -> Stamp {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

/// What a listener serves from, as last loaded.
#[derive(Debug)]
struct Loaded {
    /// The `tls` table the certificates come from.
    tls: TlsConfig,
    /// Each pair in force with its certificate.
    certs: Vec<(Pair, LoadedCert)>,
    /// The stamps of every file of `certs`, as they were loaded.
    stamps: HashMap<PathBuf, Stamp>,
    /// The directory's certificate file names, as last listed.
    listing: Vec<PathBuf>,
    /// The last failure of the periodic check, with its Unix time.
    last_error: Option<(i64, String)>,
    /// Times the certificates were replaced (reloads and file changes).
    replaced: u64,
    /// Times a file failed to load (the certificate in force stayed).
    failures: u64,
}

/// A reload's certificates, loaded and checked before anything is swapped in.
#[derive(Debug)]
pub struct Prepared {
    tls: TlsConfig,
    certs: Vec<(Pair, LoadedCert)>,
}

impl Prepared {
    /// The certificates loaded, in order.
    pub fn certificates(&self) -> impl Iterator<Item = &LoadedCert> {
        self.certs.iter().map(|(_, c)| c)
    }
}

/// The certificates of one TLS listener, and the map its handshakes read.
#[derive(Debug)]
pub struct ListenerCerts {
    /// The listener's address (logs, metrics).
    pub address: SocketAddr,
    loaded: Mutex<Loaded>,
    map: PerWorker<Arc<CertMap>>,
    acme: Option<Arc<Acme>>,
}

/// Loads every pair of `tls` (any failure is an error naming the file). With no
/// certificate at all, a listener must have `[acme]`'s (`acme`).
fn load_all(tls: &TlsConfig, acme: bool) -> Result<Vec<(Pair, LoadedCert)>, CertError> {
    let mut skipped = Vec::new();
    let certs = pairs(tls, true, &mut skipped)?
        .into_iter()
        .map(|p| load_pair(&p.cert, &p.key).map(|c| (p, c)))
        .collect::<Result<Vec<_>, _>>()?;
    if certs.is_empty()
        && !(tls.acme && acme)
        && let Some(dir) = &tls.certificate_dir
    {
        return Err(CertError::EmptyDir { dir: dir.clone() });
    }
    Ok(certs)
}

fn stamps_of(certs: &[(Pair, LoadedCert)]) -> HashMap<PathBuf, Stamp> {
    let mut out = HashMap::new();
    for (p, _) in certs {
        out.insert(p.cert.clone(), stamp(&p.cert));
        out.insert(p.key.clone(), stamp(&p.key));
    }
    out
}

/// The certificate files of `tls.certificate_dir`, sorted (empty without one or
/// when it cannot be listed).
fn listing(tls: &TlsConfig) -> Vec<PathBuf> {
    let Some(dir) = &tls.certificate_dir else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|r| r.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    out.sort();
    out
}

impl ListenerCerts {
    /// Loads the certificates of a listener at `address` (every file must load)
    /// for `workers` worker threads; with `acme`, the listener also serves that
    /// manager's certificates and answers its TLS-ALPN-01 challenges.
    pub fn load(
        address: SocketAddr,
        tls: &TlsConfig,
        acme: Option<Arc<Acme>>,
        workers: usize,
    ) -> Result<Arc<ListenerCerts>, CertError> {
        let certs = load_all(tls, acme.is_some())?;
        let map = Arc::new(CertMap::build(certs.iter().map(|(_, c)| c)));
        Ok(Arc::new(ListenerCerts {
            address,
            map: PerWorker::new(map, workers),
            acme: if tls.acme { acme } else { None },
            loaded: Mutex::new(Loaded {
                stamps: stamps_of(&certs),
                listing: listing(tls),
                tls: tls.clone(),
                certs,
                last_error: None,
                replaced: 0,
                failures: 0,
            }),
        }))
    }

    fn state(&self) -> std::sync::MutexGuard<'_, Loaded> {
        self.loaded.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How often the files are to be checked (`tls.watch_interval`; zero: never).
    pub fn watch_interval(&self) -> std::time::Duration {
        self.state().tls.watch_interval
    }

    /// Loads the certificates of a (reloaded) configuration's `tls` for a
    /// listener (`acme`: the configuration has an `[acme]` section); nothing
    /// changes until [`ListenerCerts::apply`]. `palisade check` calls it too.
    pub fn prepare(tls: &TlsConfig, acme: bool) -> Result<Prepared, CertError> {
        Ok(Prepared {
            certs: load_all(tls, acme)?,
            tls: tls.clone(),
        })
    }

    /// Puts a reload's certificates in force.
    pub fn apply(&self, prepared: Prepared) {
        let mut s = self.state();
        s.stamps = stamps_of(&prepared.certs);
        s.listing = listing(&prepared.tls);
        s.tls = prepared.tls;
        s.certs = prepared.certs;
        s.replaced += 1;
        s.last_error = None;
        self.map
            .set(Arc::new(CertMap::build(s.certs.iter().map(|(_, c)| c))));
    }

    /// The periodic check: when a certificate or key file, or the directory's
    /// list of files, changed since the last look, loads what changed and puts the
    /// result in force. A pair whose files fail to load keeps the certificate in
    /// force (or stays out, if it is new), and the failure is returned, as are the
    /// certificates replaced; with no certificate left, all of those in force
    /// stay. Blocking (file reads): run it off the event loop.
    pub fn check_files(&self) -> Vec<Event> {
        let (tls, old_stamps, old_listing) = {
            let s = self.state();
            (s.tls.clone(), s.stamps.clone(), s.listing.clone())
        };
        let now_listing = listing(&tls);
        let mut skipped = Vec::new();
        let found = match pairs(&tls, false, &mut skipped) {
            Ok(p) => p,
            Err(e) => {
                let mut s = self.state();
                let text = format!("{e}; the certificates in force stay");
                if s.last_error.as_ref().map(|x| &x.1) == Some(&text) {
                    return Vec::new();
                }
                s.last_error = Some((super::unix_now(), text.clone()));
                s.failures += 1;
                return vec![Event::Error(text)];
            }
        };
        let changed = now_listing != old_listing
            || found.iter().any(|p| {
                old_stamps.get(&p.cert) != Some(&stamp(&p.cert))
                    || old_stamps.get(&p.key) != Some(&stamp(&p.key))
            });
        if !changed {
            return Vec::new();
        }
        let mut events = Vec::new();
        let mut certs = Vec::new();
        let mut failed = false;
        let old: HashMap<Pair, LoadedCert> = self.state().certs.iter().cloned().collect();
        // Stamps of every file looked at: a file that failed keeps the stamp it
        // failed with, so it is tried (and reported) again only when it changes.
        let mut stamps = HashMap::new();
        for p in found {
            let (cert_stamp, key_stamp) = (stamp(&p.cert), stamp(&p.key));
            let same = old_stamps.get(&p.cert) == Some(&cert_stamp)
                && old_stamps.get(&p.key) == Some(&key_stamp);
            stamps.insert(p.cert.clone(), cert_stamp);
            stamps.insert(p.key.clone(), key_stamp);
            match (same, old.get(&p)) {
                (true, Some(c)) => certs.push((p, c.clone())),
                // Failed before, unchanged since: still out, already reported.
                (true, None) => {}
                _ => match load_pair(&p.cert, &p.key) {
                    Ok(c) => {
                        events.push(Event::Info(format!(
                            "listener {}: certificate {} loaded ({}, serial {}, valid until {})",
                            self.address,
                            p.cert.display(),
                            if c.names.is_empty() {
                                "no DNS names".to_owned()
                            } else {
                                c.names.join(", ")
                            },
                            c.serial,
                            super::rfc3339(c.not_after)
                        )));
                        certs.push((p, c));
                    }
                    Err(e) => {
                        failed = true;
                        match old.get(&p) {
                            Some(c) => {
                                events.push(Event::Error(format!(
                                    "listener {}: {e}; the certificate in force for it stays (serial {})",
                                    self.address, c.serial
                                )));
                                certs.push((p, c.clone()));
                            }
                            None => events.push(Event::Error(format!(
                                "listener {}: {e}; not served",
                                self.address
                            ))),
                        }
                    }
                },
            }
        }
        for e in skipped {
            failed = true;
            events.push(Event::Error(format!(
                "listener {}: {e}; not served",
                self.address
            )));
        }
        let mut s = self.state();
        if certs.is_empty() && !s.certs.is_empty() {
            events.push(Event::Error(format!(
                "listener {}: no certificate could be loaded; the {} in force stay",
                self.address,
                s.certs.len()
            )));
            failed = true;
        } else {
            let same = certs.len() == s.certs.len()
                && certs
                    .iter()
                    .zip(&s.certs)
                    .all(|(a, b)| a.0 == b.0 && Arc::ptr_eq(&a.1.key, &b.1.key));
            if !same {
                s.replaced += 1;
            }
            s.certs = certs;
            self.map
                .set(Arc::new(CertMap::build(s.certs.iter().map(|(_, c)| c))));
        }
        s.stamps = stamps;
        s.listing = now_listing;
        if failed {
            s.failures += 1;
            s.last_error = events.iter().rev().find_map(|e| match e {
                Event::Error(t) => Some((super::unix_now(), t.clone())),
                Event::Info(_) => None,
            });
        } else {
            s.last_error = None;
        }
        events
    }

    /// The certificate for a handshake: an `acme-tls/1` challenge, an `[acme]`
    /// certificate for the name, the listener's own for the name (exact, then
    /// wildcard), then the listener's default, then the first `[acme]` one.
    fn resolve_name(&self, name: Option<&str>, acme_alpn: bool) -> Option<Arc<CertifiedKey>> {
        let name = name.map(normalize);
        let name = name.as_deref();
        if let Some(acme) = &self.acme {
            if acme_alpn {
                // Only the challenge certificate answers acme-tls/1 (RFC 8737);
                // without a pending challenge for the name the handshake fails.
                return name.and_then(|n| acme.challenge_cert(n));
            }
            if let Some(k) = name.and_then(|n| acme.lookup(n)) {
                return Some(k);
            }
        }
        let own = self.map.with(|m| {
            name.and_then(|n| m.lookup(n))
                .or_else(|| m.default_cert())
                .cloned()
        });
        own.or_else(|| self.acme.as_ref().and_then(|a| a.default_cert()))
    }

    /// The certificates in force, for `/status`.
    pub fn status(&self) -> serde_json::Value {
        let s = self.state();
        serde_json::json!({
            "address": self.address.to_string(),
            "certificates": s.certs.iter().map(|(p, c)| serde_json::json!({
                "cert": p.cert.display().to_string(),
                "key": p.key.display().to_string(),
                "names": c.names,
                "serial": c.serial,
                "not_after": super::rfc3339(c.not_after),
            })).collect::<Vec<_>>(),
            "acme": self.acme.is_some(),
            "replaced": s.replaced,
            "failures": s.failures,
            "last_error": s.last_error.as_ref().map(|(t, e)| serde_json::json!({
                "time": super::rfc3339(*t),
                "error": e,
            })),
        })
    }

    /// Appends this listener's series to `/metrics` (the HELP and TYPE lines are
    /// written by [`render_metrics`]).
    fn render(&self, out: &mut [String; 3]) {
        use std::fmt::Write as _;
        let s = self.state();
        let l = self.address;
        for (p, c) in &s.certs {
            let f = p
                .cert
                .display()
                .to_string()
                .replace('\\', "\\\\")
                .replace('"', "\\\"");
            let _ = writeln!(
                out[0],
                "palisade_tls_certificate_expiry_seconds{{listener=\"{l}\",file=\"{f}\"}} {}",
                c.not_after
            );
        }
        let _ = writeln!(
            out[1],
            "palisade_tls_certificate_replacements_total{{listener=\"{l}\"}} {}",
            s.replaced
        );
        let _ = writeln!(
            out[2],
            "palisade_tls_certificate_load_failures_total{{listener=\"{l}\"}} {}",
            s.failures
        );
    }
}

/// Appends the TLS listeners' certificate series to `/metrics`.
pub fn render_metrics(out: &mut String, listeners: &[Arc<ListenerCerts>]) {
    if listeners.is_empty() {
        return;
    }
    let mut parts: [String; 3] = Default::default();
    for l in listeners {
        l.render(&mut parts);
    }
    let heads = [
        (
            "palisade_tls_certificate_expiry_seconds",
            "gauge",
            "When each certificate of a TLS listener expires (Unix time).",
        ),
        (
            "palisade_tls_certificate_replacements_total",
            "counter",
            "Times a TLS listener's certificates were replaced (reloads and changed files).",
        ),
        (
            "palisade_tls_certificate_load_failures_total",
            "counter",
            "Checks of a TLS listener's certificate files that found a file that does not load (the certificate in force stayed).",
        ),
    ];
    for ((name, kind, help), body) in heads.iter().zip(parts) {
        out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
        out.push_str(&body);
    }
}

/// Something the periodic check has to say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A certificate was loaded.
    Info(String),
    /// A file failed to load.
    Error(String),
}

/// What a listener's rustls configuration asks for certificates.
#[derive(Debug)]
pub struct Resolver(pub Arc<ListenerCerts>);

impl ResolvesServerCert for Resolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let acme_alpn = hello
            .alpn()
            .is_some_and(|mut a| a.any(|p| p == super::ACME_TLS_ALPN));
        self.0.resolve_name(hello.server_name(), acme_alpn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert(names: &[&str]) -> LoadedCert {
        let c = rcgen::generate_simple_self_signed(
            names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>(),
        )
        .unwrap();
        super::super::from_pem(
            c.cert.pem().as_bytes(),
            c.signing_key.serialize_pem().as_bytes(),
            Path::new(names[0]),
            Path::new("key"),
        )
        .unwrap()
    }

    #[test]
    fn exact_names_then_one_label_wildcards_then_the_default() {
        let a = cert(&["a.test"]);
        let wild = cert(&["*.example.com"]);
        let www = cert(&["www.example.com", "a.test"]);
        let map = CertMap::build([&a, &wild, &www]);
        let is = |got: Option<&Arc<CertifiedKey>>, want: &LoadedCert| {
            got.is_some_and(|k| Arc::ptr_eq(k, &want.key))
        };
        assert!(is(map.lookup("a.test"), &a), "the first listed wins a name");
        assert!(
            is(map.lookup("www.example.com"), &www),
            "exact beats wildcard"
        );
        assert!(is(map.lookup("api.example.com"), &wild));
        assert!(map.lookup("example.com").is_none());
        assert!(map.lookup("a.b.example.com").is_none(), "one label only");
        assert!(map.lookup("other.test").is_none());
        assert!(map.lookup("com").is_none());
        assert!(is(map.default_cert(), &a), "the first is the default");
        assert_eq!(normalize("WWW.Example.com."), "www.example.com");
    }

    #[test]
    fn a_directory_pairs_files_by_name() {
        let dir = std::env::temp_dir().join(format!("palisade-sni-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let c = rcgen::generate_simple_self_signed(vec!["x.test".to_owned()]).unwrap();
        let (pem, key) = (c.cert.pem(), c.signing_key.serialize_pem());
        std::fs::write(dir.join("b.crt"), &pem).unwrap();
        std::fs::write(dir.join("b.key"), &key).unwrap();
        std::fs::write(dir.join("a.pem"), format!("{pem}{key}")).unwrap();
        std::fs::write(dir.join(".c.crt"), &pem).unwrap();
        std::fs::write(dir.join("notes.txt"), "x").unwrap();
        let tls: TlsConfig = toml::from_str(&format!(
            "certificate_dir = {:?}\nacme = false",
            dir.display().to_string()
        ))
        .unwrap();
        let mut skipped = Vec::new();
        let p = pairs(&tls, true, &mut skipped).unwrap();
        assert_eq!(
            p,
            [
                Pair {
                    cert: dir.join("a.pem"),
                    key: dir.join("a.pem")
                },
                Pair {
                    cert: dir.join("b.crt"),
                    key: dir.join("b.key")
                },
            ]
        );
        std::fs::write(dir.join("d.crt"), &pem).unwrap();
        let e = pairs(&tls, true, &mut skipped).unwrap_err().to_string();
        assert!(e.contains("d.crt: no key file"), "{e}");
        assert_eq!(pairs(&tls, false, &mut skipped).unwrap().len(), 2);
        assert_eq!(skipped.len(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
