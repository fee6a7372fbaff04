//! Certificates from an ACME (RFC 8555) certificate authority: `[acme]`.
//!
//! One certificate per name of `acme.names`, kept in `acme.state_dir` with the
//! account:
//!
//! ```text
//! state_dir/account.json        the account (its key and URL) and the directory URL
//! state_dir/certs/NAME.crt      the chain the CA issued, leaf first
//! state_dir/certs/NAME.key      its private key (mode 0600)
//! ```
//!
//! At start the certificates on disk are served at once; a name without one, or
//! whose certificate expires within `acme.renew_before`, is ordered in the
//! background ([`Acme::run`], on the main thread's runtime: the workers never wait
//! for it). A certificate is served through the SNI map of every TLS listener with
//! `tls.acme` as soon as it is issued, without a reload, and renewed before it
//! expires. A failed order is retried after `acme.retry_interval`, doubled after
//! each failure in a row up to 6 hours; the certificate in force stays meanwhile.
//!
//! The challenges: HTTP-01 is answered by the plain-HTTP listeners
//! ([`Acme::http01`], before the rules and the routes, for pending tokens only);
//! TLS-ALPN-01 by the TLS listeners' certificate resolver, which hands the
//! challenge certificate ([`Acme::challenge_cert`], with the acmeIdentifier
//! extension of RFC 8737) to a ClientHello that offers only `acme-tls/1` for a
//! pending name.

use super::acme_client::AcmeHttp;
use super::sni::CertMap;
use super::{CertError, LoadedCert};
use crate::config::{AcmeChallenge, AcmeSection};
use crate::runtime::PerWorker;
use instant_acme::{
    Account, AccountCredentials, AuthorizationStatus, ChallengeType, Identifier, NewAccount,
    NewOrder, OrderStatus, RetryPolicy,
};
use rustls::pki_types::PrivateKeyDer;
use rustls::sign::CertifiedKey;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// The longest wait between two renewal after a failure in a row.
const MAX_RETRY: Duration = Duration::from_secs(6 * 3600);
/// The shortest time between two orders for one name, whatever `renew_before`
/// says (a certificate valid for less than `renew_before` is not renewed in a
/// loop).
const MIN_RENEW_GAP: Duration = Duration::from_secs(10);
/// The longest the manager sleeps before looking at the clock again.
const MAX_SLEEP: Duration = Duration::from_secs(3600);
/// The path prefix of HTTP-01 challenges.
pub const HTTP01_PREFIX: &str = "/.well-known/acme-challenge/";

/// What stops the ACME manager from starting.
#[derive(Debug, thiserror::Error)]
pub enum AcmeError {
    /// `acme.ca_file` could not be used.
    #[error("acme.ca_file {path}: {message}")]
    CaFile {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// No system trust roots (and no `acme.ca_file`).
    #[error("no system trust roots could be read ({0}); set acme.ca_file")]
    NoRoots(String),
    /// `acme.state_dir` could not be created or is not a directory.
    #[error("acme.state_dir {path}: {message}")]
    StateDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The rustls client configuration could not be made.
    #[error("TLS client for the ACME server: {0}")]
    Tls(#[from] rustls::Error),
}

/// Where one name stands.
#[derive(Debug, Default, Clone)]
struct NameState {
    /// The certificate in force (from disk or issued).
    cert: Option<LoadedCert>,
    /// When to order next (Unix seconds).
    next_attempt: i64,
    /// Failed orders in a row.
    failures: u32,
    /// The last failure: Unix time and reason.
    last_error: Option<(i64, String)>,
    /// When the last certificate was issued (Unix seconds).
    last_issued: Option<i64>,
    /// Orders that succeeded and failed.
    orders_ok: u64,
    orders_failed: u64,
}

/// The ACME manager: the certificates of `acme.names`, their pending challenges,
/// and their state.
pub struct Acme {
    cfg: AcmeSection,
    http: AcmeHttp,
    /// The certificates in force, as handshakes read them.
    certs: PerWorker<Arc<CertMap>>,
    /// Per name, in `acme.names` order.
    names: Mutex<Vec<(String, NameState)>>,
    /// Pending HTTP-01 tokens and their key authorizations.
    http_tokens: Mutex<HashMap<String, String>>,
    /// Pending TLS-ALPN-01 challenge certificates by name.
    alpn_certs: Mutex<HashMap<String, Arc<CertifiedKey>>>,
    /// Where events go besides the operator log (the error log).
    log: Option<crate::logs::LogSender>,
}

impl std::fmt::Debug for Acme {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Acme")
            .field("directory", &self.cfg.directory)
            .field("names", &self.cfg.names)
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The trust roots for the CA's HTTPS: `acme.ca_file`, or the system's.
fn roots(cfg: &AcmeSection) -> Result<Arc<rustls::RootCertStore>, AcmeError> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut store = rustls::RootCertStore::empty();
    match &cfg.ca_file {
        Some(path) => {
            let bad = |message: String| AcmeError::CaFile {
                path: path.clone(),
                message,
            };
            let pem = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
            let certs = CertificateDer::pem_slice_iter(&pem)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| bad(e.to_string()))?;
            if certs.is_empty() {
                return Err(bad("no certificate found".into()));
            }
            for c in certs {
                store.add(c).map_err(|e| bad(e.to_string()))?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = store.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(AcmeError::NoRoots(
                    found
                        .errors
                        .first()
                        .map_or_else(|| "none installed".to_owned(), ToString::to_string),
                ));
            }
        }
    }
    Ok(Arc::new(store))
}

/// Checks what `run` would refuse in `[acme]` without creating anything: the CA
/// file (or system roots), and that `state_dir`, when it exists, is a directory.
pub fn check(cfg: &AcmeSection) -> Result<(), AcmeError> {
    roots(cfg)?;
    if cfg.state_dir.exists() && !cfg.state_dir.is_dir() {
        return Err(AcmeError::StateDir {
            path: cfg.state_dir.clone(),
            message: "not a directory".into(),
        });
    }
    Ok(())
}

/// Creates a directory (and its parents) with mode 0700.
fn make_private_dir(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
}

/// Writes a file atomically (a temporary file renamed over it) with `mode`.
fn write_atomic(path: &Path, data: &[u8], mode: u32) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let tmp = path.with_extension(format!(
        "{}.tmp",
        path.extension().and_then(|e| e.to_str()).unwrap_or("")
    ));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)?;
    f.write_all(data)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)
}

/// The account file: the credentials and the directory they belong to.
#[derive(serde::Serialize, serde::Deserialize)]
struct AccountFile {
    directory: String,
    credentials: AccountCredentials,
}

/// Why an order failed, for the log and `/status`.
#[derive(Debug, thiserror::Error)]
enum OrderError {
    #[error("{0}")]
    Acme(#[from] instant_acme::Error),
    #[error("{0}")]
    Other(String),
    #[error("{0}")]
    Cert(#[from] CertError),
}

impl Acme {
    /// The manager for `cfg` and `workers` worker threads: creates `state_dir`
    /// (mode 0700) and serves the certificates already there (one that does not
    /// load, or does not cover its name, is logged and ordered again). Nothing is
    /// ordered until [`Acme::run`].
    pub fn new(
        cfg: &AcmeSection,
        workers: usize,
        log: Option<crate::logs::LogSender>,
    ) -> Result<Arc<Acme>, AcmeError> {
        let http = AcmeHttp::new(roots(cfg)?)?;
        let certs_dir = cfg.state_dir.join("certs");
        make_private_dir(&certs_dir).map_err(|e| AcmeError::StateDir {
            path: cfg.state_dir.clone(),
            message: e.to_string(),
        })?;
        let now = super::unix_now();
        let mut names = Vec::new();
        for name in &cfg.names {
            let name = name.to_ascii_lowercase();
            let (crt, key) = (
                certs_dir.join(format!("{name}.crt")),
                certs_dir.join(format!("{name}.key")),
            );
            let mut st = NameState {
                next_attempt: now,
                ..NameState::default()
            };
            if crt.exists() {
                match super::load_pair(&crt, &key) {
                    Ok(c) if c.names.contains(&name) => {
                        tracing::info!(
                            "acme: {name}: certificate from {} (serial {}, valid until {})",
                            crt.display(),
                            c.serial,
                            super::rfc3339(c.not_after)
                        );
                        st.next_attempt = renew_at(cfg, &c, None);
                        st.cert = Some(LoadedCert {
                            source: format!("acme:{name}"),
                            ..c
                        });
                    }
                    Ok(_) => tracing::warn!(
                        "acme: {name}: {} does not name {name}; ordering a new certificate",
                        crt.display()
                    ),
                    Err(e) => {
                        tracing::warn!("acme: {name}: {e}; ordering a new certificate")
                    }
                }
            }
            names.push((name, st));
        }
        let acme = Acme {
            cfg: cfg.clone(),
            http,
            certs: PerWorker::new(Arc::new(CertMap::default()), workers),
            names: Mutex::new(names),
            http_tokens: Mutex::new(HashMap::new()),
            alpn_certs: Mutex::new(HashMap::new()),
            log,
        };
        acme.publish();
        Ok(Arc::new(acme))
    }

    /// Puts the certificates in force in the map handshakes read.
    fn publish(&self) {
        let names = lock(&self.names);
        let map = CertMap::build(names.iter().filter_map(|(_, s)| s.cert.as_ref()));
        self.certs.set(Arc::new(map));
    }

    /// The certificate for `name` (exact names only).
    pub fn lookup(&self, name: &str) -> Option<Arc<CertifiedKey>> {
        self.certs.with(|m| m.lookup(name).cloned())
    }

    /// The first name's certificate, for clients without SNI on a listener that
    /// has no certificate of its own.
    pub fn default_cert(&self) -> Option<Arc<CertifiedKey>> {
        self.certs.with(|m| m.default_cert().cloned())
    }

    /// The TLS-ALPN-01 challenge certificate of a pending name.
    pub fn challenge_cert(&self, name: &str) -> Option<Arc<CertifiedKey>> {
        lock(&self.alpn_certs).get(name).cloned()
    }

    /// The answer to an HTTP-01 challenge request: the key authorization when
    /// `method` is GET or HEAD and `target` is `/.well-known/acme-challenge/TOKEN`
    /// for a pending token; `None` for anything else (which goes on to the rules
    /// and the routes as any request).
    pub fn http01(&self, method: &[u8], target: &[u8]) -> Option<String> {
        if method != b"GET" && method != b"HEAD" {
            return None;
        }
        let token = target.strip_prefix(HTTP01_PREFIX.as_bytes())?;
        let token = std::str::from_utf8(token).ok()?;
        let tokens = lock(&self.http_tokens);
        if tokens.is_empty() {
            return None;
        }
        tokens.get(token).cloned()
    }

    /// The challenge the CA is asked for.
    pub fn challenge(&self) -> AcmeChallenge {
        self.cfg.challenge
    }

    fn event(&self, level: &str, text: &str) {
        match level {
            "error" => tracing::error!("{text}"),
            "warn" => tracing::warn!("{text}"),
            _ => tracing::info!("{text}"),
        }
        if let Some(l) = &self.log {
            l.event(level, text);
        }
    }

    /// Orders and renews certificates until `stop` is set: each name whose next
    /// attempt is due is ordered, one at a time; between rounds the manager
    /// sleeps until the next one is due.
    pub async fn run(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        let mut account: Option<Account> = None;
        loop {
            let now = super::unix_now();
            let due: Vec<String> = lock(&self.names)
                .iter()
                .filter(|(_, s)| s.next_attempt <= now)
                .map(|(n, _)| n.clone())
                .collect();
            for name in due {
                let order =
                    tokio::time::timeout(self.cfg.order_timeout, self.order(&mut account, &name));
                let result = tokio::select! {
                    r = order => r.unwrap_or_else(|_| Err(OrderError::Other(format!(
                        "not done within acme.order_timeout ({:?})",
                        self.cfg.order_timeout
                    )))),
                    () = crate::runtime::stopped(&mut stop) => return,
                };
                // Whatever happened, no challenge stays pending.
                self.clear_challenges();
                if let Err(OrderError::Acme(instant_acme::Error::Api(p))) = &result
                    && p.r#type.as_deref() == Some("urn:ietf:params:acme:error:accountDoesNotExist")
                {
                    // The CA no longer knows the account (a CA reset, a test
                    // server restarted): set the file aside, the next attempt
                    // creates a new one.
                    account = None;
                    self.forget_account();
                }
                self.settle(&name, result);
            }
            let next = lock(&self.names)
                .iter()
                .map(|(_, s)| s.next_attempt)
                .min()
                .unwrap_or(i64::MAX);
            let wait = u64::try_from(next.saturating_sub(super::unix_now()))
                .map_or(Duration::ZERO, Duration::from_secs)
                .min(MAX_SLEEP);
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = crate::runtime::stopped(&mut stop) => return,
            }
        }
    }

    /// Records the end of an order for `name`: the new certificate in force, or
    /// the failure and when to try again.
    fn settle(&self, name: &str, result: Result<LoadedCert, OrderError>) {
        let now = super::unix_now();
        let text = {
            let mut names = lock(&self.names);
            let Some((_, st)) = names.iter_mut().find(|(n, _)| n == name) else {
                return;
            };
            match result {
                Ok(c) => {
                    let renewal = st.cert.is_some();
                    st.failures = 0;
                    st.last_error = None;
                    st.last_issued = Some(now);
                    st.orders_ok += 1;
                    st.next_attempt = renew_at(&self.cfg, &c, Some(now));
                    let text = format!(
                        "acme: {name}: certificate {} (serial {}, valid until {}); next renewal at {}",
                        if renewal { "renewed" } else { "issued" },
                        c.serial,
                        super::rfc3339(c.not_after),
                        super::rfc3339(st.next_attempt)
                    );
                    st.cert = Some(c);
                    ("info", text)
                }
                Err(e) => {
                    st.failures = st.failures.saturating_add(1);
                    st.orders_failed += 1;
                    let wait = self
                        .cfg
                        .retry_interval
                        .saturating_mul(1u32 << st.failures.saturating_sub(1).min(20))
                        .min(MAX_RETRY.max(self.cfg.retry_interval));
                    st.next_attempt =
                        now.saturating_add(i64::try_from(wait.as_secs()).unwrap_or(i64::MAX));
                    st.last_error = Some((now, e.to_string()));
                    let text = format!(
                        "acme: {name}: order failed ({} in a row): {e}; {}; next attempt in {}s",
                        st.failures,
                        match &st.cert {
                            Some(c) => format!(
                                "the certificate in force (valid until {}) stays",
                                super::rfc3339(c.not_after)
                            ),
                            None => "no certificate for it yet".to_owned(),
                        },
                        wait.as_secs()
                    );
                    ("error", text)
                }
            }
        };
        self.publish();
        self.event(text.0, &text.1);
    }

    fn clear_challenges(&self) {
        lock(&self.http_tokens).clear();
        lock(&self.alpn_certs).clear();
    }

    /// The account: loaded from `state_dir/account.json` when it belongs to the
    /// configured directory, otherwise created there and saved.
    async fn account(&self) -> Result<Account, OrderError> {
        let path = self.cfg.state_dir.join("account.json");
        if let Ok(text) = std::fs::read(&path) {
            match serde_json::from_slice::<AccountFile>(&text) {
                Ok(f) if f.directory == self.cfg.directory => {
                    return Ok(Account::builder_with_http(Box::new(self.http.clone()))
                        .from_credentials(f.credentials)
                        .await?);
                }
                Ok(_) => tracing::info!(
                    "acme: {} belongs to another directory; creating an account at {}",
                    path.display(),
                    self.cfg.directory
                ),
                Err(e) => tracing::warn!(
                    "acme: {} cannot be read ({e}); creating a new account",
                    path.display()
                ),
            }
        }
        let contact: Vec<String> = self
            .cfg
            .contact
            .iter()
            .map(|c| {
                if c.starts_with("mailto:") {
                    c.clone()
                } else {
                    format!("mailto:{c}")
                }
            })
            .collect();
        let contact: Vec<&str> = contact.iter().map(String::as_str).collect();
        let (account, credentials) = Account::builder_with_http(Box::new(self.http.clone()))
            .create(
                &NewAccount {
                    contact: &contact,
                    terms_of_service_agreed: true,
                    only_return_existing: false,
                },
                self.cfg.directory.clone(),
                None,
            )
            .await?;
        let file = AccountFile {
            directory: self.cfg.directory.clone(),
            credentials,
        };
        let text = serde_json::to_vec_pretty(&file)
            .map_err(|e| OrderError::Other(format!("saving the account: {e}")))?;
        write_atomic(&path, &text, 0o600)
            .map_err(|e| OrderError::Other(format!("{}: {e}", path.display())))?;
        self.event(
            "info",
            &format!(
                "acme: account {} created at {}, saved in {}",
                account.id(),
                self.cfg.directory,
                path.display()
            ),
        );
        Ok(account)
    }

    /// Moves `account.json` aside (to `account.json.unknown`), so that the next
    /// order creates a new account.
    fn forget_account(&self) {
        let path = self.cfg.state_dir.join("account.json");
        let aside = self.cfg.state_dir.join("account.json.unknown");
        match std::fs::rename(&path, &aside) {
            Ok(()) => self.event(
                "warn",
                &format!(
                    "acme: the CA does not know the account of {}; moved to {}, a new account will be created",
                    path.display(),
                    aside.display()
                ),
            ),
            Err(e) => tracing::warn!("acme: moving {} aside: {e}", path.display()),
        }
    }

    /// One order for `name`, from the account to the certificate saved on disk.
    async fn order(
        &self,
        account: &mut Option<Account>,
        name: &str,
    ) -> Result<LoadedCert, OrderError> {
        tracing::info!(
            "acme: {name}: ordering a certificate from {} ({})",
            self.cfg.directory,
            match self.cfg.challenge {
                AcmeChallenge::Http01 => "http-01",
                AcmeChallenge::TlsAlpn01 => "tls-alpn-01",
            }
        );
        let acct = match account {
            Some(a) => a,
            None => account.insert(self.account().await?),
        };
        let ids = [Identifier::Dns(name.to_owned())];
        let mut order = acct.new_order(&NewOrder::new(&ids)).await?;
        let kind = match self.cfg.challenge {
            AcmeChallenge::Http01 => ChallengeType::Http01,
            AcmeChallenge::TlsAlpn01 => ChallengeType::TlsAlpn01,
        };
        {
            let mut authzs = order.authorizations();
            while let Some(a) = authzs.next().await {
                let mut a = a?;
                match a.status {
                    AuthorizationStatus::Pending => {}
                    AuthorizationStatus::Valid => continue,
                    s => {
                        return Err(OrderError::Other(format!(
                            "the CA's authorization for {name} is {s:?}"
                        )));
                    }
                }
                let mut ch = a.challenge(kind.clone()).ok_or_else(|| {
                    OrderError::Other(format!("the CA offers no {kind:?} challenge for {name}"))
                })?;
                let ka = ch.key_authorization();
                match self.cfg.challenge {
                    AcmeChallenge::Http01 => {
                        lock(&self.http_tokens).insert(ch.token.clone(), ka.as_str().to_owned());
                    }
                    AcmeChallenge::TlsAlpn01 => {
                        let cert = alpn_challenge_cert(name, ka.digest().as_ref())?;
                        lock(&self.alpn_certs).insert(name.to_owned(), cert);
                    }
                }
                ch.set_ready().await?;
            }
        }
        let retry = RetryPolicy::new()
            .initial_delay(Duration::from_millis(250))
            .backoff(1.5)
            .timeout(self.cfg.order_timeout);
        let status = order.poll_ready(&retry).await?;
        if status != OrderStatus::Ready {
            let mut why = Vec::new();
            let mut authzs = order.authorizations();
            while let Some(Ok(mut a)) = authzs.next().await {
                if let Ok(state) = a.refresh().await {
                    why.extend(
                        state
                            .challenges
                            .iter()
                            .filter_map(|c| c.error.as_ref().map(ToString::to_string)),
                    );
                }
            }
            return Err(OrderError::Other(format!(
                "the order is {status:?}: {}",
                if why.is_empty() {
                    "the CA gave no reason".to_owned()
                } else {
                    why.join("; ")
                }
            )));
        }
        self.clear_challenges();
        let key = rcgen::KeyPair::generate().map_err(|e| OrderError::Other(e.to_string()))?;
        let mut params = rcgen::CertificateParams::new(vec![name.to_owned()])
            .map_err(|e| OrderError::Other(e.to_string()))?;
        params.distinguished_name = rcgen::DistinguishedName::new();
        let csr = params
            .serialize_request(&key)
            .map_err(|e| OrderError::Other(e.to_string()))?;
        order.finalize_csr(csr.der()).await?;
        let chain = order.poll_certificate(&retry).await?;
        let key_pem = key.serialize_pem();
        let dir = self.cfg.state_dir.join("certs");
        let (crt, key_path) = (
            dir.join(format!("{name}.crt")),
            dir.join(format!("{name}.key")),
        );
        let cert = super::from_pem(chain.as_bytes(), key_pem.as_bytes(), &crt, &key_path)?;
        if !cert.names.iter().any(|n| n == name) {
            return Err(OrderError::Other(format!(
                "the certificate issued names {:?}, not {name}",
                cert.names
            )));
        }
        // The key first: a crash between the two leaves the old chain with a new
        // key, which does not load and is ordered again, never a chain served
        // with the wrong key.
        let save = |path: &Path, data: &[u8], mode| {
            make_private_dir(&dir)
                .and_then(|()| write_atomic(path, data, mode))
                .map_err(|e| OrderError::Other(format!("saving {}: {e}", path.display())))
        };
        save(&key_path, key_pem.as_bytes(), 0o600)?;
        save(&crt, chain.as_bytes(), 0o644)?;
        Ok(LoadedCert {
            source: format!("acme:{name}"),
            ..cert
        })
    }

    /// Appends the ACME series to `/metrics`.
    pub fn render_metrics(&self, out: &mut String) {
        use std::fmt::Write as _;
        let names = lock(&self.names);
        let series: [(&str, &str, &str); 4] = [
            (
                "palisade_acme_certificate_expiry_seconds",
                "gauge",
                "When the ACME certificate in force for a name expires (Unix time); absent until there is one.",
            ),
            (
                "palisade_acme_orders_total",
                "counter",
                "ACME orders per name and result (ok, error).",
            ),
            (
                "palisade_acme_consecutive_failures",
                "gauge",
                "ACME orders for a name that failed in a row (0 after a success).",
            ),
            (
                "palisade_acme_next_attempt_seconds",
                "gauge",
                "When the next order for a name is due (Unix time).",
            ),
        ];
        for (i, (metric, kind, help)) in series.iter().enumerate() {
            let _ = writeln!(out, "# HELP {metric} {help}\n# TYPE {metric} {kind}");
            for (n, s) in names.iter() {
                match i {
                    0 => {
                        if let Some(c) = &s.cert {
                            let _ = writeln!(out, "{metric}{{name=\"{n}\"}} {}", c.not_after);
                        }
                    }
                    1 => {
                        let _ = writeln!(
                            out,
                            "{metric}{{name=\"{n}\",result=\"ok\"}} {}\n{metric}{{name=\"{n}\",result=\"error\"}} {}",
                            s.orders_ok, s.orders_failed
                        );
                    }
                    2 => {
                        let _ = writeln!(out, "{metric}{{name=\"{n}\"}} {}", s.failures);
                    }
                    _ => {
                        let _ = writeln!(out, "{metric}{{name=\"{n}\"}} {}", s.next_attempt);
                    }
                }
            }
        }
    }

    /// The state of every name, for `/status`.
    pub fn status(&self) -> serde_json::Value {
        let names = lock(&self.names);
        serde_json::json!({
            "directory": self.cfg.directory,
            "challenge": match self.cfg.challenge {
                AcmeChallenge::Http01 => "http-01",
                AcmeChallenge::TlsAlpn01 => "tls-alpn-01",
            },
            "names": names.iter().map(|(n, s)| serde_json::json!({
                "name": n,
                "serial": s.cert.as_ref().map(|c| c.serial.clone()),
                "not_after": s.cert.as_ref().map(|c| super::rfc3339(c.not_after)),
                "last_issued": s.last_issued.map(super::rfc3339),
                "next_attempt": super::rfc3339(s.next_attempt),
                "consecutive_failures": s.failures,
                "last_error": s.last_error.as_ref().map(|(t, e)| serde_json::json!({
                    "time": super::rfc3339(*t),
                    "error": e,
                })),
            })).collect::<Vec<_>>(),
        })
    }
}

/// When a certificate is to be renewed: `renew_before` ahead of its expiry, but
/// not sooner than [`MIN_RENEW_GAP`] after `issued` (when it was just issued).
fn renew_at(cfg: &AcmeSection, c: &LoadedCert, issued: Option<i64>) -> i64 {
    let before = i64::try_from(cfg.renew_before.as_secs()).unwrap_or(i64::MAX);
    let due = c.not_after.saturating_sub(before);
    match issued {
        Some(t) => due.max(t.saturating_add(MIN_RENEW_GAP.as_secs() as i64)),
        None => due,
    }
}

/// The TLS-ALPN-01 challenge certificate for `name` (RFC 8737): self-signed, the
/// name as its only subjectAltName, and the critical acmeIdentifier extension
/// holding the SHA-256 digest of the key authorization.
fn alpn_challenge_cert(name: &str, digest: &[u8]) -> Result<Arc<CertifiedKey>, OrderError> {
    if digest.len() != 32 {
        return Err(OrderError::Other(
            "the key authorization digest is not 32 bytes".into(),
        ));
    }
    let err = |e: rcgen::Error| OrderError::Other(format!("the challenge certificate: {e}"));
    let key = rcgen::KeyPair::generate().map_err(err)?;
    let mut params = rcgen::CertificateParams::new(vec![name.to_owned()]).map_err(err)?;
    params.custom_extensions = vec![rcgen::CustomExtension::new_acme_identifier(digest)];
    let cert = params.self_signed(&key).map_err(err)?;
    let key_der = PrivateKeyDer::Pkcs8(key.serialize_der().into());
    // Not CertifiedKey::from_der: its consistency check parses the certificate
    // with webpki, which refuses the critical acmeIdentifier extension.
    let signer = rustls::crypto::ring::default_provider()
        .key_provider
        .load_private_key(key_der)
        .map_err(|e| OrderError::Other(format!("the challenge certificate: {e}")))?;
    Ok(Arc::new(CertifiedKey::new(
        vec![cert.der().clone()],
        signer,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(extra: &str) -> AcmeSection {
        toml::from_str(&format!(
            "directory = \"https://127.0.0.1:1/dir\"\nnames = [\"a.test\"]\nstate_dir = \"/tmp/x\"\n{extra}"
        ))
        .unwrap()
    }

    #[test]
    fn the_challenge_certificate_carries_the_acme_identifier() {
        let digest = [7u8; 32];
        let c = alpn_challenge_cert("a.test", &digest).unwrap();
        let der = c.end_entity_cert().unwrap();
        let (_, x) = x509_parser::parse_x509_certificate(der).unwrap();
        let ext = x
            .extensions()
            .iter()
            .find(|e| e.oid.to_id_string() == "1.3.6.1.5.5.7.1.31")
            .expect("acmeIdentifier");
        assert!(ext.critical);
        // An OCTET STRING of the 32-byte digest.
        assert_eq!(&ext.value[..2], &[0x04, 32]);
        assert_eq!(&ext.value[2..], &digest);
        assert_eq!(super::super::cert_info(der).unwrap().names, ["a.test"]);
        assert!(alpn_challenge_cert("a.test", &[1, 2]).is_err());
    }

    #[test]
    fn http01_answers_pending_tokens_only() {
        let dir = std::env::temp_dir().join(format!("palisade-acme-{}", std::process::id()));
        let mut cfg = section("");
        cfg.state_dir = dir.clone();
        cfg.ca_file = None;
        // The system roots may be missing on a bare machine: a CA file instead.
        let ca = rcgen::generate_simple_self_signed(vec!["ca.test".to_owned()]).unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("ca.pem"), ca.cert.pem()).unwrap();
        cfg.ca_file = Some(dir.join("ca.pem"));
        let acme = Acme::new(&cfg, 1, None).unwrap();
        assert!(dir.join("certs").is_dir());
        let path = b"/.well-known/acme-challenge/tok1";
        assert_eq!(acme.http01(b"GET", path), None);
        lock(&acme.http_tokens).insert("tok1".into(), "tok1.thumb".into());
        assert_eq!(acme.http01(b"GET", path).as_deref(), Some("tok1.thumb"));
        assert_eq!(acme.http01(b"HEAD", path).as_deref(), Some("tok1.thumb"));
        assert_eq!(acme.http01(b"POST", path), None);
        assert_eq!(
            acme.http01(b"GET", b"/.well-known/acme-challenge/tok2"),
            None
        );
        assert_eq!(acme.http01(b"GET", b"/tok1"), None);
        acme.clear_challenges();
        assert_eq!(acme.http01(b"GET", path), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn renewal_is_due_renew_before_the_expiry_with_a_floor() {
        let cfg = section("renew_before = \"30d\"");
        let made = rcgen::generate_simple_self_signed(vec!["a.test".to_owned()]).unwrap();
        let mut c = super::super::from_pem(
            made.cert.pem().as_bytes(),
            made.signing_key.serialize_pem().as_bytes(),
            Path::new("c"),
            Path::new("k"),
        )
        .unwrap();
        c.not_after = 100 * 86_400;
        assert_eq!(renew_at(&cfg, &c, None), 70 * 86_400);
        // Valid for less than renew_before: not again sooner than the floor.
        c.not_after = 1000;
        assert_eq!(renew_at(&cfg, &c, Some(500)), 510);
    }
}
