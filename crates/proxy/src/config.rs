//! The TOML configuration: what it may contain, its defaults, and its checks.
//!
//! Every table refuses keys it does not know (`deny_unknown_fields`), so a typo is an
//! error naming the key rather than a silently ignored setting. Relative paths are
//! resolved against the directory of the configuration file. `docs/config.md`
//! documents every key.

use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A configuration that could not be used: the file, and what is wrong with it.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The configuration file.
        path: PathBuf,
        /// The system's reason.
        source: std::io::Error,
    },
    /// The file is not valid TOML, or a key or value is not what is expected.
    #[error("{path}: {message}")]
    Parse {
        /// The configuration file.
        path: PathBuf,
        /// toml's description, which names the line, the column and the key.
        message: String,
    },
    /// The values are individually fine but do not fit together.
    #[error("{path}: {message}")]
    Invalid {
        /// The configuration file.
        path: PathBuf,
        /// What is wrong, naming the key.
        message: String,
    },
}

/// The whole configuration file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Process-wide settings: threads, timeouts, grace period.
    #[serde(default)]
    pub server: ServerConfig,
    /// Where clients connect (`[[listener]]`).
    #[serde(default, rename = "listener")]
    pub listeners: Vec<ListenerConfig>,
    /// Pools of upstream servers (`[[upstream]]`).
    #[serde(default, rename = "upstream")]
    pub upstreams: Vec<UpstreamConfig>,
    /// Which pool serves which host or path (`[[route]]`), first match wins.
    #[serde(default, rename = "route")]
    pub routes: Vec<RouteConfig>,
    /// SecLang sources in load order (`[[rules]]`).
    #[serde(default)]
    pub rules: Vec<RuleSource>,
    /// Sites (`[[site]]`): virtual hosts or routes with their own policy over the
    /// shared rules, first match in order.
    #[serde(default, rename = "site")]
    pub sites: Vec<SiteSection>,
    /// Size and count limits.
    #[serde(default)]
    pub limits: LimitsConfig,
    /// Log destinations.
    #[serde(default)]
    pub logs: LogsConfig,
    /// The admin listener (`/metrics`, `/status`, `/ctx`); absent means no admin
    /// listener.
    pub admin: Option<AdminConfig>,
    /// The store of persistent collections (IP, GLOBAL, SESSION, USER, RESOURCE).
    /// Absent: an embedded store at the default path, with the defaults below.
    #[serde(default)]
    pub store: StoreSection,
    /// Fleet sync of collection writes through a Redis stream; absent means none.
    pub sync: Option<SyncSection>,
    /// Client address allow and deny lists (`[access]`), decided once per
    /// connection; absent means every address may connect.
    pub access: Option<AccessSection>,
    /// Request rate limits (`[[rate_limit]]`), each with its own key.
    #[serde(default, rename = "rate_limit")]
    pub rate_limits: Vec<RateLimitSection>,
    /// Bandwidth shaping classes for response bodies (`[[shape]]`), tried in order.
    #[serde(default, rename = "shape")]
    pub shapes: Vec<ShapeSection>,
    /// DNS block-list lookups (`@rbl`): resolvers, timeout, cache, limit.
    #[serde(default)]
    pub dns: DnsSection,
    /// Incident capture (`[incidents]`): a profile and a state snapshot taken by
    /// itself when a condition holds; absent: off.
    pub incidents: Option<IncidentSection>,
    /// Syslog receivers the logs are shipped to (`[[syslog]]`).
    #[serde(default, rename = "syslog")]
    pub syslogs: Vec<SyslogSection>,
    /// OpenTelemetry export of spans and log records (`[otlp]`); absent: off.
    pub otlp: Option<OtlpSection>,
    /// The client's real address behind trusted proxies (`[client_address]`);
    /// absent: the TCP peer is the client.
    #[serde(default)]
    pub client_address: ClientAddressSection,
    /// Certificates from an ACME certificate authority (`[acme]`); absent: none.
    pub acme: Option<AcmeSection>,
    /// A second rule set run detection-only beside the blocking one on a sample
    /// of the requests (`[shadow]`, docs/shadow.md); absent: none.
    pub shadow: Option<ShadowSection>,
    /// The forward proxy's policy (`[forward]`, docs/forward.md), for the
    /// listeners with `mode = "forward"`; absent: its defaults.
    pub forward: Option<ForwardSection>,
    /// The file this configuration was read from (not a key).
    #[serde(skip)]
    pub path: PathBuf,
}

/// `[server]`: process-wide settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Tokio worker threads; 0 means one per CPU.
    pub worker_threads: usize,
    /// How long in-flight requests may take to finish after SIGTERM/SIGINT.
    #[serde(with = "duration")]
    pub grace_period: Duration,
    /// Time allowed to receive a complete request head.
    #[serde(with = "duration")]
    pub client_header_timeout: Duration,
    /// The longest a connection may wait for its TLS handshake, its request head or
    /// its next request while more than 80% of `limits.connections` are open (see
    /// [`crate::slots`]).
    #[serde(with = "duration")]
    pub client_header_timeout_under_pressure: Duration,
    /// Longest pause allowed between two reads of a request body.
    #[serde(with = "duration")]
    pub client_body_timeout: Duration,
    /// Longest time allowed for a whole request body.
    #[serde(with = "duration")]
    pub client_body_deadline: Duration,
    /// Lowest average rate of a request body, in bytes per second, once
    /// `client_body_min_rate_grace` is over: every byte received buys
    /// `1/client_body_min_rate` seconds more. 0 switches the check off.
    pub client_body_min_rate: u64,
    /// Time a request body may take before its average rate is checked.
    #[serde(with = "duration")]
    pub client_body_min_rate_grace: Duration,
    /// How long an idle client connection is kept open between requests.
    #[serde(with = "duration")]
    pub keepalive_timeout: Duration,
    /// Longest pause allowed while writing a response to a client.
    #[serde(with = "duration")]
    pub send_timeout: Duration,
    /// How long an upgraded connection (WebSocket) may carry no byte either way
    /// before it is closed.
    #[serde(with = "duration")]
    pub tunnel_idle_timeout: Duration,
    /// What happens to a request whose transaction fails inside the rule engine.
    pub engine_failure: FailurePolicy,
    /// Threads of the inspection pool, which evaluates rules over large inputs at
    /// a lower priority than the workers; 0 means half the CPUs (at least one).
    pub inspection_threads: usize,
    /// CPU time rule evaluation may take for one request (all phases together),
    /// or `"off"` to leave it to the rules' `SecPalisadeCpuBudget`.
    pub waf_cpu_budget: CpuBudgetSetting,
    /// What happens to a request over `waf_cpu_budget`.
    pub waf_cpu_budget_action: BudgetActionSetting,
    /// The status of a request blocked by `waf_cpu_budget`.
    pub waf_cpu_budget_status: u16,
    /// Phases over at most this many bytes of input (head and body so far, or the
    /// buffered response) are evaluated inline on the worker; larger ones on the
    /// inspection pool.
    pub inspect_inline_bytes: usize,
    /// The fraction of requests (0 to 1) whose rules are timed one by one for the
    /// per-rule cost account (`GET /top`, the dashboard); 0 turns it off.
    pub rule_cost_sample: f64,
    /// Which requests have their WAF phases' CPU time read (`waf_cpu_us` in the
    /// access log and the slow requests): those sampled by `rule_cost_sample`, or
    /// all of them.
    pub waf_cpu_measure: WafCpuMeasure,
}

/// `server.waf_cpu_measure`: which requests have the CPU time of their WAF phases
/// read (two system calls per phase).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WafCpuMeasure {
    /// The requests sampled by `rule_cost_sample` (their CPU is also split into
    /// user and kernel time).
    Sampled,
    /// Every request.
    Always,
}

/// `server.engine_failure`: refuse (500) or let through a request the engine failed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FailurePolicy {
    /// Answer 500 (the default).
    Closed,
    /// Forward the request uninspected.
    Open,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            worker_threads: 0,
            grace_period: Duration::from_secs(10),
            client_header_timeout: Duration::from_secs(30),
            client_header_timeout_under_pressure: Duration::from_secs(5),
            client_body_timeout: Duration::from_secs(60),
            client_body_deadline: Duration::from_secs(300),
            client_body_min_rate: 500,
            client_body_min_rate_grace: Duration::from_secs(20),
            keepalive_timeout: Duration::from_secs(75),
            send_timeout: Duration::from_secs(60),
            tunnel_idle_timeout: Duration::from_secs(300),
            engine_failure: FailurePolicy::Closed,
            waf_cpu_budget: CpuBudgetSetting::Limit(Duration::from_secs(1)),
            waf_cpu_budget_action: BudgetActionSetting::Block,
            waf_cpu_budget_status: 403,
            inspection_threads: 0,
            inspect_inline_bytes: 16 * 1024,
            rule_cost_sample: 0.01,
            waf_cpu_measure: WafCpuMeasure::Sampled,
        }
    }
}

/// `server.waf_cpu_budget`: a CPU time, or `"off"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuBudgetSetting {
    /// No budget from the configuration file (the rules may set one).
    Off,
    /// At most this much CPU time per request.
    Limit(Duration),
}

impl<'de> Deserialize<'de> for CpuBudgetSetting {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s.trim().eq_ignore_ascii_case("off") {
            return Ok(CpuBudgetSetting::Off);
        }
        let t = duration::parse(&s).map_err(serde::de::Error::custom)?;
        if t.is_zero() {
            return Err(serde::de::Error::custom(
                "waf_cpu_budget must be more than 0 (or \"off\")",
            ));
        }
        Ok(CpuBudgetSetting::Limit(t))
    }
}

/// `server.waf_cpu_budget_action`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BudgetActionSetting {
    /// Refuse the request with `waf_cpu_budget_status` (the default).
    Block,
    /// Let it continue uninspected; the event is logged and counted.
    Pass,
}

/// `[[listener]]`: one address clients connect to.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListenerConfig {
    /// `IP:PORT` to bind.
    pub address: SocketAddr,
    /// Certificate and key: when present, the listener speaks TLS.
    pub tls: Option<TlsConfig>,
    /// Offer HTTP/2 through ALPN (TLS listeners only).
    #[serde(default = "yes")]
    pub http2: bool,
    /// Every connection begins with a PROXY protocol header (version 1 or 2), read
    /// before TLS and HTTP, from a peer in `client_address.trusted_proxies`; any
    /// other connection is closed.
    #[serde(default)]
    pub proxy_protocol: bool,
    /// What the listener is: a reverse proxy for the `[[upstream]]`s (the
    /// default), or a forward proxy for clients that name their destination
    /// (`"forward"`, docs/forward.md).
    #[serde(default)]
    pub mode: ListenerMode,
}

impl UpstreamConfig {
    /// A pool of one plain-HTTP server at `server` (`host:port`) with every
    /// other setting at its default: what the forward proxy sends a
    /// destination's requests through.
    pub fn plain(name: &str, server: String) -> UpstreamConfig {
        UpstreamConfig {
            name: name.to_owned(),
            servers: vec![server],
            backup: Vec::new(),
            keepalive: default_keepalive(),
            connect_timeout: default_connect_timeout(),
            read_timeout: default_read_timeout(),
            idle_timeout: default_idle_timeout(),
            tls: false,
            tls_sni: None,
            tls_ca_file: None,
            tls_verify: true,
            balance: Balance::default(),
            hash_key: None,
            max_fails: default_max_fails(),
            fail_timeout: default_fail_timeout(),
            retries: default_retries(),
            retry_budget: default_retry_budget(),
            resolve_min_ttl: default_resolve_min_ttl(),
            health_check: None,
        }
    }
}

/// `mode` of a `[[listener]]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ListenerMode {
    /// A reverse proxy: requests go to the `[[upstream]]` pools through the
    /// `[[route]]`s.
    #[default]
    Reverse,
    /// A forward proxy: absolute-form `http://` requests go to the host they
    /// name, and `CONNECT` opens a tunnel (`[forward]`).
    Forward,
}

/// `[forward]`: the policy of the forward-proxy listeners.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForwardSection {
    /// The ports a `CONNECT` may open a tunnel to (default `[443]`).
    #[serde(default = "default_connect_ports")]
    pub connect_ports: Vec<u16>,
    /// Domain-list files (one domain or IP address a line; a domain covers its
    /// subdomains) of destinations refused.
    #[serde(default)]
    pub deny: Vec<PathBuf>,
    /// Domain-list files of the only destinations allowed; absent: every
    /// destination not denied.
    pub allow: Option<Vec<PathBuf>>,
    /// Close a TLS tunnel whose ClientHello names (SNI) another host than the
    /// `CONNECT` did (domain fronting); default true.
    #[serde(default = "yes")]
    pub refuse_fronting: bool,
    /// How many destinations keep a connection pool at once (least recently
    /// used dropped first); default 1024.
    #[serde(default = "default_max_destinations")]
    pub max_destinations: usize,
    /// The proxy as clients reach it (`host:port`), written into the PAC file
    /// served at `GET /proxy.pac`; absent: the Host header of the PAC request.
    pub pac_proxy: Option<String>,
    /// Domains whose hosts the PAC file sends `DIRECT` (besides plain host
    /// names and the private and loopback networks).
    #[serde(default)]
    pub pac_direct: Vec<String>,
    /// An htpasswd file (bcrypt hashes only): when set, every forward request
    /// must carry valid `Proxy-Authorization: Basic` credentials (else `407`).
    pub htpasswd: Option<PathBuf>,
    /// An Apache-style group file (`group: user1 user2`), for `[[forward.group]]`.
    pub groups: Option<PathBuf>,
    /// The realm of the `407`'s `Proxy-Authenticate` challenge (default
    /// `"Palisade"`).
    #[serde(default = "default_realm")]
    pub realm: String,
    /// A directory of URL-category files (`<category>.txt`: domains, with an
    /// optional path prefix).
    pub categories: Option<PathBuf>,
    /// Categories refused for everyone (names of files in `categories`).
    #[serde(default)]
    pub block_categories: Vec<String>,
    /// Rules for the members of a group of the group file.
    #[serde(default, rename = "group")]
    pub groups_rules: Vec<ForwardGroup>,
    /// TLS inspection (docs/forward.md): the CA certificate (PEM) the leaf
    /// certificates minted for inspected tunnels are signed with; with
    /// `inspect_ca_key`, both or neither.
    pub inspect_ca_cert: Option<PathBuf>,
    /// The PKCS#8 key (PEM) of `inspect_ca_cert`.
    pub inspect_ca_key: Option<PathBuf>,
    /// Domain-list files of the destinations whose tunnels are decrypted and
    /// their requests passed through the rules; a line `*` stands for every
    /// destination.
    #[serde(default)]
    pub inspect: Vec<PathBuf>,
    /// Decrypt every tunnel (but those of `inspect_bypass`).
    #[serde(default)]
    pub inspect_all: bool,
    /// Domain-list files of destinations never decrypted (pinned applications,
    /// banking, health).
    #[serde(default)]
    pub inspect_bypass: Vec<PathBuf>,
    /// PEM file of certificate authorities trusted for the origins of
    /// inspected tunnels, besides the system's roots.
    pub upstream_ca_file: Option<PathBuf>,
}

/// `[[forward.group]]`: what applies to the members of one group, besides the
/// rules of `[forward]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForwardGroup {
    /// The group's name in the `groups` file.
    pub name: String,
    /// Categories refused for the members (beyond `forward.block_categories`).
    #[serde(default)]
    pub block_categories: Vec<String>,
    /// Domain-list files of destinations refused to the members.
    #[serde(default)]
    pub deny: Vec<PathBuf>,
    /// Domain-list files of destinations the members may reach even when a
    /// category would refuse them (the global and group deny lists still win).
    #[serde(default)]
    pub allow: Vec<PathBuf>,
}

impl Default for ForwardSection {
    fn default() -> Self {
        ForwardSection {
            connect_ports: default_connect_ports(),
            deny: Vec::new(),
            allow: None,
            refuse_fronting: true,
            max_destinations: default_max_destinations(),
            pac_proxy: None,
            pac_direct: Vec::new(),
            htpasswd: None,
            groups: None,
            realm: default_realm(),
            categories: None,
            block_categories: Vec::new(),
            groups_rules: Vec::new(),
            inspect_ca_cert: None,
            inspect_ca_key: None,
            inspect: Vec::new(),
            inspect_all: false,
            inspect_bypass: Vec::new(),
            upstream_ca_file: None,
        }
    }
}

fn default_realm() -> String {
    "Palisade".into()
}

fn default_connect_ports() -> Vec<u16> {
    vec![443]
}
fn default_max_destinations() -> usize {
    1024
}

impl ForwardSection {
    fn validate(&self) -> Result<(), String> {
        if let Some(p) = self.connect_ports.iter().find(|p| **p == 0) {
            return Err(format!("forward.connect_ports: {p} is not a port"));
        }
        if self.max_destinations == 0 {
            return Err("forward.max_destinations must be at least 1".into());
        }
        if self.allow.as_ref().is_some_and(Vec::is_empty) {
            return Err(
                "forward.allow is empty: it would refuse every destination (leave it out to allow all but forward.deny)"
                    .into(),
            );
        }
        let mut pac = crate::forward::pac::PacSettings::new(
            self.pac_proxy.as_deref().unwrap_or("proxy:3128"),
        );
        pac.direct_suffixes = self.pac_direct.clone();
        crate::forward::pac::render(&pac).map_err(|e| match e {
            crate::forward::pac::PacError::Proxy(_) => format!("forward.pac_proxy: {e}"),
            _ => format!("forward.pac_direct: {e}"),
        })?;
        for (key, f) in self
            .deny
            .iter()
            .map(|f| ("forward.deny", f))
            .chain(self.allow.iter().flatten().map(|f| ("forward.allow", f)))
            .chain(self.inspect.iter().map(|f| ("forward.inspect", f)))
            .chain(
                self.inspect_bypass
                    .iter()
                    .map(|f| ("forward.inspect_bypass", f)),
            )
        {
            if !f.is_file() {
                return Err(format!("{key}: {} is not a readable file", f.display()));
            }
        }
        crate::forward::inspect::validate(self)?;
        self.validate_policy()
    }

    /// The keys of proxy authentication, categories and groups.
    fn validate_policy(&self) -> Result<(), String> {
        for (key, f) in [
            ("forward.htpasswd", &self.htpasswd),
            ("forward.groups", &self.groups),
        ] {
            if let Some(f) = f
                && !f.is_file()
            {
                return Err(format!("{key}: {} is not a readable file", f.display()));
            }
        }
        if self.realm.len() > 256 || self.realm.chars().any(char::is_control) {
            return Err(format!(
                "forward.realm {:?} holds control characters or is over 256 bytes",
                self.realm
            ));
        }
        if let Some(d) = &self.categories
            && !d.is_dir()
        {
            return Err(format!(
                "forward.categories: {} is not a directory",
                d.display()
            ));
        }
        let check_cats = |key: &str, names: &[String]| -> Result<(), String> {
            if names.is_empty() {
                return Ok(());
            }
            let Some(dir) = &self.categories else {
                return Err(format!(
                    "{key} needs forward.categories (a directory of <category>.txt files)"
                ));
            };
            for n in names {
                let bad = n.is_empty() || n.contains(['/', '\\']) || n.starts_with('.');
                if bad || !dir.join(format!("{n}.txt")).is_file() {
                    return Err(format!(
                        "{key}: unknown category {n:?} (no {}/{n}.txt)",
                        dir.display()
                    ));
                }
            }
            Ok(())
        };
        check_cats("forward.block_categories", &self.block_categories)?;
        if !self.groups_rules.is_empty() && self.groups.is_none() {
            return Err("[[forward.group]] needs forward.groups (a group file)".into());
        }
        if !self.groups_rules.is_empty() && self.htpasswd.is_none() {
            return Err("[[forward.group]] needs forward.htpasswd (users to group)".into());
        }
        let mut seen = std::collections::HashSet::new();
        for g in &self.groups_rules {
            if g.name.trim().is_empty() {
                return Err("forward.group.name must not be empty".into());
            }
            if !seen.insert(g.name.as_str()) {
                return Err(format!("forward.group {:?} is defined twice", g.name));
            }
            check_cats(
                &format!("forward.group {:?} block_categories", g.name),
                &g.block_categories,
            )?;
            for (key, f) in g
                .deny
                .iter()
                .map(|f| ("deny", f))
                .chain(g.allow.iter().map(|f| ("allow", f)))
            {
                if !f.is_file() {
                    return Err(format!(
                        "forward.group {:?} {key}: {} is not a readable file",
                        g.name,
                        f.display()
                    ));
                }
            }
        }
        Ok(())
    }
}

/// `[client_address]`: which proxies may say who the client is, and how.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientAddressSection {
    /// Addresses and CIDR networks of the load balancers and proxies in front of
    /// Palisade: only they may send a PROXY protocol header or a forwarding header.
    #[serde(default)]
    pub trusted_proxies: Vec<String>,
    /// The header a trusted proxy names the client in: `X-Forwarded-For`,
    /// `Forwarded` (RFC 7239), `X-Real-IP` or another header holding a list of
    /// addresses; absent: none is read.
    pub header: Option<String>,
}

/// `tls` of a listener: where its certificates come from, and how sessions resume.
///
/// Certificates are chosen by the name the client asks for (SNI) among every
/// source: `cert`/`key`, `certificates`, the pairs in `certificate_dir`, and, with
/// `acme`, the certificates `[acme]` obtains (`docs/config.md`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// PEM certificate chain, leaf first (with `key`); the default certificate.
    pub cert: Option<PathBuf>,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1) of `cert`.
    pub key: Option<PathBuf>,
    /// More certificate and key pairs, chosen by SNI.
    #[serde(default)]
    pub certificates: Vec<CertKeyPair>,
    /// A directory of pairs: `NAME.crt` or `NAME.pem` with `NAME.key`, or a
    /// `NAME.pem` that holds both the chain and the key.
    pub certificate_dir: Option<PathBuf>,
    /// Serve the certificates `[acme]` obtains on this listener (when there is an
    /// `[acme]` section); they take precedence for their names.
    #[serde(default = "yes")]
    pub acme: bool,
    /// How often the certificate files are checked for changes (modification
    /// time, size, the directory's file list); a changed file is loaded without a
    /// reload. `0s`: never (SIGHUP still reloads them).
    #[serde(with = "duration", default = "default_watch_interval")]
    pub watch_interval: Duration,
    /// Resume sessions from tickets the server encrypts and the client keeps
    /// (TLS 1.2 and 1.3), with keys made at start and rotated every 6 hours.
    #[serde(default = "yes")]
    pub session_tickets: bool,
    /// Sessions kept in memory for resumption by session ID (TLS 1.2 clients
    /// without tickets; all clients when `session_tickets` is off); 0: none.
    #[serde(default = "default_session_cache")]
    pub session_cache: usize,
}

impl TlsConfig {
    /// The settings that only a restart changes (everything but where the
    /// certificates come from and how often they are checked), for telling a
    /// reload that changes them.
    pub fn restart_only(&self) -> (bool, bool, usize) {
        (self.acme, self.session_tickets, self.session_cache)
    }
}

/// One `{ cert = "...", key = "..." }` of `tls.certificates`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CertKeyPair {
    /// PEM certificate chain, leaf first.
    pub cert: PathBuf,
    /// PEM private key of `cert`.
    pub key: PathBuf,
}

fn default_watch_interval() -> Duration {
    Duration::from_secs(10)
}

/// `[acme]`: certificates obtained and renewed from an ACME (RFC 8555)
/// certificate authority, served by the TLS listeners (`docs/config.md`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AcmeSection {
    /// The CA's directory URL (`https://acme-v02.api.letsencrypt.org/directory`).
    pub directory: String,
    /// Contact addresses for the account (`ops@example.com` or `mailto:...`).
    #[serde(default)]
    pub contact: Vec<String>,
    /// The DNS names to obtain certificates for, one certificate per name.
    pub names: Vec<String>,
    /// Where the account key and the certificates are kept (created when missing,
    /// mode 0700).
    pub state_dir: PathBuf,
    /// How the CA checks that Palisade answers for a name.
    #[serde(default)]
    pub challenge: AcmeChallenge,
    /// A certificate is renewed when it expires in less than this.
    #[serde(with = "duration", default = "default_renew_before")]
    pub renew_before: Duration,
    /// PEM file of the authorities trusted for the CA's own HTTPS (pebble's test
    /// CA); absent: the system's trust roots.
    pub ca_file: Option<PathBuf>,
    /// Wait after a failed order before the next attempt; doubled after each
    /// failure in a row, up to 6 hours.
    #[serde(with = "duration", default = "default_acme_retry")]
    pub retry_interval: Duration,
    /// Longest time one order may take (validation and issuance) before it counts
    /// as failed.
    #[serde(with = "duration", default = "default_acme_order_timeout")]
    pub order_timeout: Duration,
}

/// `acme.challenge`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub enum AcmeChallenge {
    /// The CA fetches `http://NAME/.well-known/acme-challenge/TOKEN` from a plain
    /// listener (port 80).
    #[default]
    #[serde(rename = "http-01")]
    Http01,
    /// The CA opens TLS to `NAME:443` offering ALPN `acme-tls/1` (RFC 8737).
    #[serde(rename = "tls-alpn-01")]
    TlsAlpn01,
}

fn default_renew_before() -> Duration {
    Duration::from_secs(30 * 86_400)
}
fn default_acme_retry() -> Duration {
    Duration::from_secs(60)
}
fn default_acme_order_timeout() -> Duration {
    Duration::from_secs(120)
}

fn default_session_cache() -> usize {
    10_000
}

/// `[[upstream]]`: a named pool of servers.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamConfig {
    /// The name routes refer to.
    pub name: String,
    /// `HOST:PORT` of each server; names are resolved on every new connection.
    pub servers: Vec<String>,
    /// Servers used only when no primary server accepts a connection.
    #[serde(default)]
    pub backup: Vec<String>,
    /// Idle connections kept open per server for reuse.
    #[serde(default = "default_keepalive")]
    pub keepalive: usize,
    /// Time allowed to open a TCP connection to a server.
    #[serde(with = "duration", default = "default_connect_timeout")]
    pub connect_timeout: Duration,
    /// Time allowed for the response head, and longest pause between body reads.
    #[serde(with = "duration", default = "default_read_timeout")]
    pub read_timeout: Duration,
    /// How long an idle pooled connection is kept.
    #[serde(with = "duration", default = "default_idle_timeout")]
    pub idle_timeout: Duration,
    /// Speak TLS to every server of the pool (a server written `https://HOST:PORT`
    /// speaks TLS whatever this says).
    #[serde(default)]
    pub tls: bool,
    /// The name sent as SNI and checked against the server's certificate; absent:
    /// the server's host when it is a name, its IP address (checked against the
    /// certificate's IP addresses, no SNI sent) when it is an address.
    pub tls_sni: Option<String>,
    /// PEM file of the certificate authorities trusted for this pool; absent: the
    /// system's trust roots.
    pub tls_ca_file: Option<PathBuf>,
    /// Check the server's certificate (chain, validity, name). `false` accepts any
    /// certificate: the connection is encrypted but not authenticated.
    #[serde(default = "yes")]
    pub tls_verify: bool,
    /// How a server is chosen for a request.
    #[serde(default)]
    pub balance: Balance,
    /// What `balance = "hash"` hashes: `client_ip`, `header:NAME` or `cookie:NAME`.
    pub hash_key: Option<String>,
    /// Failures (no connection, no response head) within `fail_timeout` that take a
    /// server out for `fail_timeout`; `0`: never taken out on failures.
    #[serde(default = "default_max_fails")]
    pub max_fails: u32,
    /// The window in which `max_fails` failures are counted, and how long the
    /// server is then left out.
    #[serde(with = "duration", default = "default_fail_timeout")]
    pub fail_timeout: Duration,
    /// Most times an idempotent request is sent again to another server after one
    /// failed before its response head.
    #[serde(default = "default_retries")]
    pub retries: u32,
    /// Retries allowed per request sent (a fraction), so that retries cannot
    /// multiply the load of an outage; the budget holds at most 10 retries.
    #[serde(default = "default_retry_budget")]
    pub retry_budget: f64,
    /// Shortest time a resolved server name is kept (answers with a shorter TTL are
    /// kept this long; a name resolved by the system resolver, which gives no TTL,
    /// is kept exactly this long).
    #[serde(with = "duration", default = "default_resolve_min_ttl")]
    pub resolve_min_ttl: Duration,
    /// Active health checks of the pool's servers.
    pub health_check: Option<HealthCheckConfig>,
}

/// `balance` of an `[[upstream]]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Balance {
    /// In turn.
    #[default]
    RoundRobin,
    /// The server with the fewest requests in flight.
    LeastConn,
    /// Rendezvous hashing of `hash_key`.
    Hash,
}

/// The kind of an active health check.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HealthCheckKind {
    /// A GET of `path`, answered with an expected status.
    #[default]
    Http,
    /// A TCP connection accepted.
    Tcp,
}

/// `[upstream.health_check]`: checks run in the background on every server.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthCheckConfig {
    /// `http` or `tcp`.
    #[serde(rename = "type", default)]
    pub kind: HealthCheckKind,
    /// Path (and query) an HTTP check asks for.
    #[serde(default = "default_health_path")]
    pub path: String,
    /// Host header of an HTTP check; absent: the server's `HOST:PORT`.
    pub host: Option<String>,
    /// Statuses that pass an HTTP check; empty: 200 to 399.
    #[serde(default)]
    pub expect_status: Vec<u16>,
    /// Time between two checks of a server.
    #[serde(with = "duration", default = "default_health_interval")]
    pub interval: Duration,
    /// Time one check may take.
    #[serde(with = "duration", default = "default_health_timeout")]
    pub timeout: Duration,
    /// Passed checks in a row that bring a server that is out back in.
    #[serde(default = "default_health_rise")]
    pub rise: u32,
    /// Failed checks in a row that take a server out.
    #[serde(default = "default_health_fall")]
    pub fall: u32,
}

/// What a `hash` pool hashes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HashKey {
    /// The client's address: REMOTE_ADDR, as `[client_address]` finds it.
    ClientIp,
    /// A request header's value.
    Header(http::HeaderName),
    /// A cookie's value.
    Cookie(String),
}

impl HashKey {
    /// Parses `client_ip`, `header:NAME` or `cookie:NAME`.
    pub fn parse(text: &str) -> Result<HashKey, String> {
        if text == "client_ip" {
            return Ok(HashKey::ClientIp);
        }
        if let Some(h) = text.strip_prefix("header:") {
            return http::HeaderName::from_bytes(h.as_bytes())
                .map(HashKey::Header)
                .map_err(|_| format!("{h:?} is not a header name"));
        }
        if let Some(c) = text.strip_prefix("cookie:")
            && !c.is_empty()
            && !c.contains([';', '=', ' '])
        {
            return Ok(HashKey::Cookie(c.to_owned()));
        }
        Err(format!(
            "{text:?}: expected client_ip, header:NAME or cookie:NAME"
        ))
    }
}

impl UpstreamConfig {
    /// The key of a `hash` pool (checked by validation).
    pub fn hash_key(&self) -> Option<HashKey> {
        self.hash_key
            .as_deref()
            .and_then(|k| HashKey::parse(k).ok())
    }

    /// Whether any server of the pool speaks TLS.
    pub fn uses_tls(&self) -> bool {
        self.tls
            || self
                .servers
                .iter()
                .chain(&self.backup)
                .any(|s| s.starts_with("https://"))
    }
}

/// `[[route]]`: sends matching requests to a pool.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// Host to match (without port, case-insensitive); `*.example.com` matches
    /// subdomains. Absent: any host.
    pub host: Option<String>,
    /// Path prefix to match (case-sensitive). Absent: any path.
    pub path_prefix: Option<String>,
    /// Name of the `[[upstream]]` that serves the matching requests.
    pub upstream: String,
}

/// `[[rules]]`: one SecLang source; exactly one of `file` and `inline`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSource {
    /// A SecLang file, or a glob (files are loaded in lexical order).
    pub file: Option<PathBuf>,
    /// SecLang text written in the configuration.
    pub inline: Option<String>,
}

/// `[[site]]`: requests for some hosts (and a path prefix) with a policy of their
/// own over the rules of `[[rules]]`, which are compiled once and shared
/// (`docs/config.md`, "Sites").
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SiteSection {
    /// The site's name: a label of logs and metrics (1 to 64 letters, digits, `-`,
    /// `_` or `.`; not `default`, which names the requests of no site).
    pub name: String,
    /// Hosts the site serves, as `[[route]]` matches them: exact names
    /// (case-insensitive, without port), `*.example.com` for every subdomain, `*`
    /// for any host. Empty: any host (then `path_prefix` is required).
    #[serde(default)]
    pub hosts: Vec<String>,
    /// Path prefix the site serves (case-sensitive, starting with `/`).
    pub path_prefix: Option<String>,
    /// `On`, `DetectionOnly` or `Off`, in place of `SecRuleEngine` for the site.
    pub rule_engine: Option<String>,
    /// CRS's paranoia level for the site (1 to 4).
    pub paranoia_level: Option<u8>,
    /// CRS's detection paranoia level for the site (at least `paranoia_level`).
    pub detection_paranoia_level: Option<u8>,
    /// The site's own SecLang: rules that run before the shared ones, and
    /// exclusions of shared rules.
    #[serde(default)]
    pub rules: Vec<RuleSource>,
    /// The site's body and argument limits.
    #[serde(default)]
    pub limits: SiteLimits,
}

/// `[site.limits]`: a site's limits; each absent key keeps the global setting.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SiteLimits {
    /// `limits.request_body_bytes` for the site: the largest body the proxy takes.
    pub request_body_bytes: Option<usize>,
    /// `SecRequestBodyLimit` for the site: the body bytes the rules inspect.
    pub request_body_limit: Option<usize>,
    /// `SecRequestBodyNoFilesLimit` for the site.
    pub request_body_no_files_limit: Option<usize>,
    /// `SecArgumentsLimit` for the site.
    pub arguments_limit: Option<usize>,
    /// `SecRequestBodyJsonDepthLimit` for the site.
    pub json_depth_limit: Option<usize>,
}

/// `[shadow]`: a second rule set that runs detection-only beside the blocking
/// one on a sample of the requests, within a CPU budget of its own, and is
/// compared with it request by request (docs/shadow.md).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShadowSection {
    /// The shadow's rule set, in the form of `[[rules]]` (its own engine
    /// settings included). Empty: the shadow runs the rules of `[[rules]]`,
    /// compiled once and shared, with its own paranoia level and overlay.
    #[serde(default)]
    pub rules: Vec<RuleSource>,
    /// SecLang run before the shadow's rules of each phase, as a site's own rules
    /// are (candidate exclusions, extra rules).
    #[serde(default)]
    pub overlay: Vec<RuleSource>,
    /// CRS's paranoia level for the shadow (1 to 4).
    pub paranoia_level: Option<u8>,
    /// CRS's detection paranoia level for the shadow (at least `paranoia_level`).
    pub detection_paranoia_level: Option<u8>,
    /// The fraction of requests the shadow sees, 0.0 to 1.0.
    pub sample: f64,
    /// The CPU time the shadow may use, as a fraction of one core (0.1: 100 ms
    /// per second); requests over it are skipped and counted.
    #[serde(default = "default_shadow_cpu_budget")]
    pub cpu_budget: f64,
    /// The CPU time the shadow may use, as a fraction of the CPU time the rest of
    /// the process uses meanwhile (0.1: at most a tenth more CPU than the proxy
    /// without the shadow); requests over it are skipped and counted.
    #[serde(default = "default_shadow_cpu_share")]
    pub cpu_share: f64,
    /// How many sampled requests may wait for the shadow thread; more are
    /// skipped and counted.
    #[serde(default = "default_shadow_queue")]
    pub queue: usize,
    /// How many of the last disagreements are kept for the dashboard and the
    /// admin API.
    #[serde(default = "default_shadow_disagreements")]
    pub disagreements: usize,
}

fn default_shadow_cpu_budget() -> f64 {
    0.1
}

fn default_shadow_cpu_share() -> f64 {
    0.1
}

fn default_shadow_queue() -> usize {
    256
}

fn default_shadow_disagreements() -> usize {
    200
}

impl ShadowSection {
    /// The paranoia levels (blocking, detection) the shadow's prefilter must reach
    /// when it runs above level 1.
    pub fn reach(&self) -> Option<(u8, u8)> {
        self.paranoia_level
            .filter(|&l| l > 1)
            .map(|l| (l, self.detection_paranoia_level.unwrap_or(l)))
    }

    /// Checks the section's keys; errors name the key.
    fn validate(&self) -> Result<(), String> {
        if !(0.0..=1.0).contains(&self.sample) {
            return Err(format!(
                "shadow.sample {}: expected a fraction from 0.0 to 1.0",
                self.sample
            ));
        }
        if !(self.cpu_budget > 0.0 && self.cpu_budget <= 1024.0) {
            return Err(format!(
                "shadow.cpu_budget {}: expected a fraction of one core above 0 (0.1: 100 ms of CPU time per second)",
                self.cpu_budget
            ));
        }
        if !(self.cpu_share > 0.0 && self.cpu_share <= 1024.0) {
            return Err(format!(
                "shadow.cpu_share {}: expected a fraction of the proxy's own CPU time above 0 (0.1: at most a tenth more CPU)",
                self.cpu_share
            ));
        }
        if !(1..=65_536).contains(&self.queue) {
            return Err(format!(
                "shadow.queue {}: expected 1 to 65536 requests",
                self.queue
            ));
        }
        if !(1..=100_000).contains(&self.disagreements) {
            return Err(format!(
                "shadow.disagreements {}: expected 1 to 100000 entries",
                self.disagreements
            ));
        }
        check_paranoia(
            self.paranoia_level,
            self.detection_paranoia_level,
            "shadow.",
        )?;
        for (key, list) in [("rules", &self.rules), ("overlay", &self.overlay)] {
            for (i, r) in list.iter().enumerate() {
                if r.file.is_some() == r.inline.is_some() {
                    return Err(format!(
                        "shadow.{key} entry {} must have exactly one of `file` and `inline`",
                        i + 1
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Checks a paranoia level and detection paranoia level (`[[site]]`, `[shadow]`);
/// errors name the keys, each after `prefix`.
fn check_paranoia(blocking: Option<u8>, detection: Option<u8>, prefix: &str) -> Result<(), String> {
    if let Some(l) = blocking
        && !(1..=4).contains(&l)
    {
        return Err(format!("{prefix}paranoia_level {l}: expected 1 to 4"));
    }
    match (blocking, detection) {
        (_, Some(d)) if !(1..=4).contains(&d) => Err(format!(
            "{prefix}detection_paranoia_level {d}: expected 1 to 4"
        )),
        (None, Some(_)) => Err(format!(
            "{prefix}detection_paranoia_level needs {prefix}paranoia_level"
        )),
        (Some(b), Some(d)) if d < b => Err(format!(
            "{prefix}detection_paranoia_level {d} is below {prefix}paranoia_level {b}"
        )),
        _ => Ok(()),
    }
}

/// The name of the requests no `[[site]]` matches.
pub const DEFAULT_SITE: &str = "default";

impl SiteSection {
    /// The engine mode `rule_engine` names (checked by validation).
    pub fn engine_mode(&self) -> Option<engine::RuleEngineMode> {
        self.rule_engine
            .as_deref()
            .and_then(engine::RuleEngineMode::parse)
    }

    /// Checks the site's keys; errors name the site and the key.
    fn validate(&self) -> Result<(), String> {
        let n = &self.name;
        let label_ok = !n.is_empty()
            && n.len() <= 64
            && n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
        if !label_ok {
            return Err(format!(
                "site.name {n:?}: expected 1 to 64 letters, digits, '-', '_' or '.' (it labels logs and metrics)"
            ));
        }
        if n == DEFAULT_SITE {
            return Err(format!(
                "site.name {n:?} is reserved for the requests no [[site]] matches"
            ));
        }
        if self.hosts.is_empty() && self.path_prefix.is_none() {
            return Err(format!(
                "site {n:?}: hosts is empty and there is no path_prefix: the site would take every request (give hosts, a path_prefix, or both)"
            ));
        }
        for h in &self.hosts {
            let bare = h.strip_prefix("*.").unwrap_or(h);
            let ipv6 = h.len() > 2
                && h.starts_with('[')
                && h.ends_with(']')
                && h[1..h.len() - 1].parse::<std::net::Ipv6Addr>().is_ok();
            let ok = h == "*"
                || ipv6
                || (!bare.is_empty()
                    && !bare.contains(['*', ':', '/', ' ', '[', ']'])
                    && bare.bytes().all(|b| b.is_ascii_graphic()));
            if !ok {
                return Err(format!(
                    "site {n:?}: hosts entry {h:?}: expected a host name without port (\"www.example.com\"), \"*.example.com\" or \"*\""
                ));
            }
        }
        if let Some(p) = &self.path_prefix
            && !p.starts_with('/')
        {
            return Err(format!("site {n:?}: path_prefix {p:?} must start with '/'"));
        }
        if let Some(m) = &self.rule_engine
            && engine::RuleEngineMode::parse(m).is_none()
        {
            return Err(format!(
                "site {n:?}: rule_engine {m:?}: expected \"On\", \"DetectionOnly\" or \"Off\""
            ));
        }
        check_paranoia(self.paranoia_level, self.detection_paranoia_level, "")
            .map_err(|e| format!("site {n:?}: {e}"))?;
        let l = &self.limits;
        for (v, key) in [
            (l.request_body_bytes, "request_body_bytes"),
            (l.request_body_limit, "request_body_limit"),
            (l.request_body_no_files_limit, "request_body_no_files_limit"),
            (l.arguments_limit, "arguments_limit"),
            (l.json_depth_limit, "json_depth_limit"),
        ] {
            if v == Some(0) {
                return Err(format!("site {n:?}: limits.{key} must be at least 1"));
            }
        }
        for (i, r) in self.rules.iter().enumerate() {
            match (&r.file, &r.inline) {
                (Some(_), None) | (None, Some(_)) => {}
                _ => {
                    return Err(format!(
                        "site {n:?}: rules entry {} must have exactly one of `file` and `inline`",
                        i + 1
                    ));
                }
            }
        }
        Ok(())
    }
}

/// `[limits]`: bounds on what a client may send.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Largest request head (request line and headers), in bytes; 431 above it.
    pub header_bytes: usize,
    /// Most header lines in a request; 431 above it.
    pub max_headers: usize,
    /// Largest request body the proxy accepts and buffers, in bytes; 413 above it.
    pub request_body_bytes: usize,
    /// Most response body bytes buffered for phase 4; the rest streams through.
    pub response_body_inspect_bytes: usize,
    /// Most decoded bytes per compressed byte when a compressed response body is
    /// decoded for phase 4 (past the first 64 KiB); 0: no ratio limit.
    pub response_decompression_ratio: u64,
    /// Most client connections open at once; further clients wait in the backlog.
    pub connections: usize,
    /// Most connections open at once from one client address (1000 by default, a
    /// tenth of `connections`); a connection over it is closed at once. 0: no limit
    /// per address.
    pub connections_per_ip: usize,
    /// What to do with a request body sent under a `Content-Encoding` (gzip,
    /// deflate, br, ...), which the rules would see only compressed.
    pub request_content_encoding: EncodedBodyPolicy,
    /// When a compressed request body is decoded for the rules, the most decoded
    /// bytes per compressed byte (past the first 64 KiB); 0: no ratio limit.
    pub request_decompression_ratio: u64,
}

/// `limits.request_content_encoding`: a request body under a `Content-Encoding`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EncodedBodyPolicy {
    /// Decode `gzip`, `deflate` and `br` for the rules (within the engine's
    /// `SecRequestBodyLimit` and `request_decompression_ratio`) and forward the body
    /// as sent; refuse (415) any other coding, several codings, and a body that does
    /// not decode (400).
    #[default]
    Decode,
    /// Answer 415 (with `Accept-Encoding: identity`) before the body is read: the
    /// rules cannot inspect what they cannot read.
    Refuse,
    /// Inspect and forward the body as sent: the rules see the encoded bytes. For
    /// applications that take compressed uploads and are protected otherwise.
    Pass,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            header_bytes: 32 * 1024,
            max_headers: 200,
            request_body_bytes: 13_107_200,
            response_body_inspect_bytes: 524_288,
            response_decompression_ratio: 100,
            connections: 10_000,
            connections_per_ip: 1000,
            request_content_encoding: EncodedBodyPolicy::Decode,
            request_decompression_ratio: 100,
        }
    }
}

/// `[logs]`: where log lines go.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogsConfig {
    /// ModSecurity-style match lines and request errors; absent means standard error.
    pub error_log: Option<PathBuf>,
    /// One JSON line per request; absent means no access log.
    pub access_log: Option<PathBuf>,
    /// ModSecurity v3 JSON audit records; absent means no audit log.
    pub audit_log: Option<PathBuf>,
    /// Lines that may wait for the writer thread before new ones are dropped (and counted).
    pub channel_capacity: usize,
    /// Write (and flush) a request's error-log lines before its response is sent:
    /// the request waits for the writer's acknowledgement. For tools that read the
    /// log as soon as they have the response (go-ftw); off by default.
    pub error_log_before_response: bool,
    /// Level of the operator log on standard error (`error`..`trace`, or a
    /// tracing-subscriber filter); `RUST_LOG` overrides it.
    pub level: String,
}

impl Default for LogsConfig {
    fn default() -> Self {
        Self {
            error_log: None,
            access_log: None,
            audit_log: None,
            channel_capacity: 8_192,
            error_log_before_response: false,
            level: "info".to_owned(),
        }
    }
}

/// `[admin]`: the metrics and status listener.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdminConfig {
    /// `IP:PORT` to bind; loopback only unless `allow_non_loopback` is set.
    #[serde(default = "default_admin_address")]
    pub address: SocketAddr,
    /// Permit a non-loopback admin address.
    #[serde(default)]
    pub allow_non_loopback: bool,
    /// Longest time an admin connection stays open, request head included.
    #[serde(with = "duration", default = "default_admin_timeout")]
    pub timeout: Duration,
    /// Most admin connections open at once; further ones wait in the backlog.
    #[serde(default = "default_admin_connections")]
    pub connections: usize,
    /// A file holding the bearer token the `/ctx` endpoints ask for
    /// (`PALISADE_ADMIN_TOKEN` in the environment takes its place when unset).
    pub token_file: Option<PathBuf>,
    /// Largest request body the admin API reads (`POST /ctx/import`), in bytes.
    #[serde(default = "default_admin_body_bytes")]
    pub max_body_bytes: usize,
    /// Serve the dashboard at `/dashboard` (behind the admin token), and run the
    /// aggregator that reads the request summaries for it.
    #[serde(default = "default_admin_dashboard")]
    pub dashboard: bool,
    /// The dashboard's readiness to block: the fewest requests of a
    /// DetectionOnly site in the last 60 minutes before it gets a verdict.
    #[serde(default = "default_readiness_min_requests")]
    pub readiness_min_requests: u64,
    /// The dashboard's readiness to block: the highest would-block rate (0 to 1)
    /// of a DetectionOnly site judged ready.
    #[serde(default = "default_readiness_max_rate")]
    pub readiness_max_rate: f64,
    /// The attack corpus (JSON lines, as `palisade tune --attacks` reads it) the
    /// dashboard's tuning panel replays to prove its proposals; absent: the proof
    /// covers the recorded requests only.
    #[serde(default)]
    pub tune_attacks: Option<PathBuf>,
}

/// `[store]`: where and how persistent collections are kept.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreSection {
    /// The store's directory; absent: the documented default
    /// (`store::StoreConfig::default_path`, which `PALISADE_STORE` overrides).
    pub path: Option<PathBuf>,
    /// Largest size the store may grow to, in bytes (LMDB's map size). A write
    /// that does not fit is refused with an error and counted.
    pub map_size: u64,
    /// How long the writer gathers writes before committing them together.
    #[serde(with = "duration")]
    pub batch_interval: Duration,
    /// How often expired records are removed.
    #[serde(with = "duration")]
    pub sweep_interval: Duration,
    /// This host's name in the sync stream; absent: the host name.
    pub host_id: Option<String>,
}

impl Default for StoreSection {
    fn default() -> Self {
        Self {
            path: None,
            map_size: 1 << 30,
            batch_interval: Duration::from_millis(5),
            sweep_interval: Duration::from_secs(60),
            host_id: None,
        }
    }
}

/// `[sync]`: collection writes shared by a fleet through a Redis stream
/// (`docs/store-sync.md`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyncSection {
    /// `redis://[user:password@]HOST:PORT[/DB]` (or `rediss://`, `redis+unix://`).
    pub redis: String,
    /// The stream's key (the fleet snapshot is `<stream>:snapshot`).
    #[serde(default = "default_sync_stream")]
    pub stream: String,
    /// Entries the stream keeps (`XADD MAXLEN ~`): a host away for longer than the
    /// stream takes to grow by this many entries restarts from the snapshot.
    #[serde(default = "default_sync_retention")]
    pub retention: u64,
    /// How often this host rewrites the fleet snapshot new hosts start from.
    #[serde(with = "duration", default = "default_snapshot_interval")]
    pub snapshot_interval: Duration,
}

/// `[access]`: which client addresses may connect, decided when a connection is
/// accepted (a refused one is closed before anything is read). An address in an allow
/// list is let in; otherwise one in a deny list is refused; otherwise `default`
/// decides.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccessSection {
    /// Addresses and CIDR networks always let in.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Files of addresses and networks always let in, one per line (`#` comments).
    #[serde(default)]
    pub allow_files: Vec<PathBuf>,
    /// Addresses and CIDR networks refused.
    #[serde(default)]
    pub deny: Vec<String>,
    /// Files of addresses and networks refused, one per line (`#` comments).
    #[serde(default)]
    pub deny_files: Vec<PathBuf>,
    /// `"allow"` (default) or `"deny"`: the verdict for an address in no list.
    #[serde(default = "default_access_default")]
    pub default: String,
}

/// `[[rate_limit]]`: at most `rate` requests per key, with `burst` more at once;
/// over it, the request is answered `status` (429) with `Retry-After`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimitSection {
    /// The limit's name (metrics label, log lines).
    pub name: String,
    /// What the key is made of: `client_ip`, `path`, `header:NAME`, `cookie:NAME`,
    /// `tx:NAME`, or a list of them (joined).
    pub key: RateLimitKey,
    /// Requests per unit: `100/s`, `600/min`, `36000/h`.
    pub rate: String,
    /// Requests allowed at once beyond the steady rate.
    #[serde(default)]
    pub burst: u32,
    /// The status of a refused request (4xx or 5xx).
    #[serde(default = "default_rate_limit_status")]
    pub status: u16,
    /// Only requests whose path starts with this are limited.
    #[serde(default)]
    pub path_prefix: Option<String>,
    /// Only requests of these sites (`[[site]]` names, `default` for requests of
    /// no site) are limited; absent: every request.
    #[serde(default)]
    pub sites: Option<Vec<String>>,
    /// Most keys tracked at once (memory: about 20 bytes each).
    #[serde(default = "default_rate_limit_keys")]
    pub max_keys: usize,
}

/// `[[shape]]`: a bandwidth class. A response whose request the class selects is
/// sent at most at `rate` bytes per second per key (after `burst` bytes at once),
/// all the key's responses together.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShapeSection {
    /// The class's name (metrics label).
    pub name: String,
    /// Whose bucket a response draws on: `client_ip`, `path`, `header:NAME`,
    /// `cookie:NAME`, `tx:NAME`, or a list of them (joined).
    pub key: RateLimitKey,
    /// Bytes per second per key: `256KiB/s`, `2Mbit/s`, `1MB/s`.
    pub rate: String,
    /// Bytes a key may be sent at once beyond the steady rate (`64KiB`).
    #[serde(default = "default_shape_burst")]
    pub burst: String,
    /// The class applies only to requests that have this key part (`header:NAME`,
    /// `cookie:NAME`, `tx:NAME`, ...); with `equals`, only when its value is that.
    #[serde(default)]
    pub when: Option<String>,
    /// The value `when` must have.
    #[serde(default)]
    pub equals: Option<String>,
    /// Only requests whose path starts with this are shaped.
    #[serde(default)]
    pub path_prefix: Option<String>,
    /// Most keys tracked at once (memory: about 20 bytes each).
    #[serde(default = "default_rate_limit_keys")]
    pub max_keys: usize,
}

fn default_shape_burst() -> String {
    "16KiB".to_owned()
}

/// A rate limit's key: one part or several.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum RateLimitKey {
    /// One part.
    One(String),
    /// Several parts, joined.
    Many(Vec<String>),
}

impl RateLimitKey {
    /// The parts as written.
    pub fn parts(&self) -> Vec<String> {
        match self {
            RateLimitKey::One(p) => vec![p.clone()],
            RateLimitKey::Many(v) => v.clone(),
        }
    }
}

/// `[otlp]`: spans (one per request) and log records sent to an OTLP/HTTP
/// receiver (docs/config.md).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OtlpSection {
    /// The receiver's base URL, `http://HOST:PORT` or `https://HOST:PORT` (and a
    /// path prefix, if any); `/v1/traces` and `/v1/logs` are added.
    pub endpoint: String,
    /// With an `https://` endpoint: the certificate authorities the receiver's
    /// certificate is checked against (PEM); absent: the system's roots.
    pub tls_ca_file: Option<PathBuf>,
    /// Export one span per request, and pass W3C trace context to the upstream.
    #[serde(default = "default_true")]
    pub traces: bool,
    /// Which logs are exported as log records: `access`, `audit`, `error`,
    /// `debug`.
    #[serde(default = "default_otlp_logs")]
    pub logs: Vec<String>,
    /// The `service.name` of the resource.
    #[serde(default = "default_syslog_app_name")]
    pub service_name: String,
    /// Spans and records held while the receiver is slow or away; past it, new
    /// ones are dropped and counted.
    #[serde(default = "default_syslog_queue")]
    pub queue: usize,
    /// The most spans and records one export carries.
    #[serde(default = "default_otlp_batch")]
    pub batch: usize,
    /// How long the exporter gathers before it sends a batch that is not full.
    #[serde(with = "duration", default = "default_otlp_interval")]
    pub interval: Duration,
    /// The longest an export may take.
    #[serde(with = "duration", default = "default_otlp_timeout")]
    pub timeout: Duration,
}

fn default_true() -> bool {
    true
}
fn default_otlp_logs() -> Vec<String> {
    vec!["access".into(), "audit".into(), "error".into()]
}
fn default_otlp_batch() -> usize {
    512
}
fn default_otlp_interval() -> Duration {
    Duration::from_secs(1)
}
fn default_otlp_timeout() -> Duration {
    Duration::from_secs(10)
}

impl OtlpSection {
    /// Refuses values that cannot work, naming the key.
    fn validate(&self) -> Result<(), String> {
        let uri: http::Uri = self
            .endpoint
            .parse()
            .map_err(|e| format!("otlp.endpoint {:?}: {e}", self.endpoint))?;
        let https = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => {
                return Err(format!(
                    "otlp.endpoint {:?}: expected http://HOST:PORT or https://HOST:PORT",
                    self.endpoint
                ));
            }
        };
        let Some(host) = uri.host().filter(|h| !h.is_empty()) else {
            return Err(format!("otlp.endpoint {:?}: no host", self.endpoint));
        };
        if https {
            let name = host.trim_start_matches('[').trim_end_matches(']');
            if rustls::pki_types::ServerName::try_from(name).is_err() {
                return Err(format!(
                    "otlp.endpoint {:?}: {host:?} is not a host name or IP address a certificate can be checked against",
                    self.endpoint
                ));
            }
        }
        match &self.tls_ca_file {
            Some(_) if !https => {
                return Err(format!(
                    "otlp.tls_ca_file is for https:// endpoints, and otlp.endpoint is {:?}",
                    self.endpoint
                ));
            }
            Some(f) => {
                crate::tls::client::read_roots(f).map_err(|e| format!("otlp.tls_ca_file {e}"))?;
            }
            None => {}
        }
        if uri.query().is_some() {
            return Err(format!(
                "otlp.endpoint {:?}: no query, please",
                self.endpoint
            ));
        }
        for l in &self.logs {
            if !["access", "audit", "error", "debug"].contains(&l.as_str()) {
                return Err(format!(
                    "otlp.logs: {l:?}: expected access, audit, error or debug"
                ));
            }
        }
        if self.queue == 0 || self.batch == 0 {
            return Err("otlp.queue and otlp.batch must be at least 1".into());
        }
        if self.interval < Duration::from_millis(10) || self.timeout < Duration::from_millis(100) {
            return Err(
                "otlp.interval must be at least 10ms and otlp.timeout at least 100ms".into(),
            );
        }
        Ok(())
    }
}

/// `[[syslog]]`: a syslog receiver the access, audit and error lines are shipped
/// to as RFC 5424 messages (docs/config.md).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyslogSection {
    /// The receiver, `IP:PORT`.
    pub address: SocketAddr,
    /// `udp` (the default), `tcp` or `tls`.
    #[serde(default)]
    pub transport: SyslogTransport,
    /// Which logs are shipped: `access`, `audit`, `error`, `debug`.
    #[serde(default = "default_syslog_logs")]
    pub logs: Vec<String>,
    /// The syslog facility: `local0` (the default) to `local7`, `user`, `daemon`,
    /// `auth`, `authpriv`, `syslog`.
    #[serde(default = "default_syslog_facility")]
    pub facility: String,
    /// The APP-NAME of the messages.
    #[serde(default = "default_syslog_app_name")]
    pub app_name: String,
    /// Lines held while the receiver is slow or away; past it, new lines are
    /// dropped and counted.
    #[serde(default = "default_syslog_queue")]
    pub queue: usize,
    /// With `tls`: the certificate authorities the receiver's certificate is
    /// checked against (PEM); absent: the system's roots.
    pub tls_ca_file: Option<PathBuf>,
    /// With `tls`: the name the receiver's certificate must carry; absent: its IP
    /// address.
    pub server_name: Option<String>,
}

/// How a `[[syslog]]` receiver is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SyslogTransport {
    /// One datagram per message (RFC 5426).
    #[default]
    Udp,
    /// A TCP stream, messages framed by their length (RFC 6587).
    Tcp,
    /// TLS over TCP (RFC 5425).
    Tls,
}

impl SyslogTransport {
    /// Its name in the configuration.
    pub fn label(self) -> &'static str {
        match self {
            SyslogTransport::Udp => "udp",
            SyslogTransport::Tcp => "tcp",
            SyslogTransport::Tls => "tls",
        }
    }
}

/// The facilities `[[syslog]] facility` takes, with their codes.
const SYSLOG_FACILITIES: [(&str, u8); 14] = [
    ("user", 1),
    ("daemon", 3),
    ("auth", 4),
    ("syslog", 5),
    ("authpriv", 10),
    ("local0", 16),
    ("local1", 17),
    ("local2", 18),
    ("local3", 19),
    ("local4", 20),
    ("local5", 21),
    ("local6", 22),
    ("local7", 23),
    ("kern", 0),
];

impl SyslogSection {
    /// The facility's code (`local0` when the name is unknown, which
    /// [`Config::validate`] refuses).
    pub fn facility_code(&self) -> u8 {
        SYSLOG_FACILITIES
            .iter()
            .find(|(n, _)| *n == self.facility)
            .map_or(16, |(_, c)| *c)
    }

    /// Refuses values that cannot work, naming the receiver and the key.
    fn validate(&self) -> Result<(), String> {
        let at = format!("[[syslog]] {}", self.address);
        if !SYSLOG_FACILITIES.iter().any(|(n, _)| *n == self.facility) {
            return Err(format!(
                "{at}: facility {:?}: expected one of {}",
                self.facility,
                SYSLOG_FACILITIES.map(|(n, _)| n).join(", ")
            ));
        }
        if self.logs.is_empty() {
            return Err(format!("{at}: logs is empty"));
        }
        for l in &self.logs {
            if !["access", "audit", "error", "debug"].contains(&l.as_str()) {
                return Err(format!(
                    "{at}: logs: {l:?}: expected access, audit, error or debug"
                ));
            }
        }
        if self.queue == 0 {
            return Err(format!("{at}: queue must be at least 1"));
        }
        if self.transport != SyslogTransport::Tls
            && (self.tls_ca_file.is_some() || self.server_name.is_some())
        {
            return Err(format!(
                "{at}: tls_ca_file and server_name are for transport = \"tls\""
            ));
        }
        Ok(())
    }
}

fn default_syslog_logs() -> Vec<String> {
    vec!["access".into(), "audit".into(), "error".into()]
}
fn default_syslog_facility() -> String {
    "local0".into()
}
fn default_syslog_app_name() -> String {
    "palisade".into()
}
fn default_syslog_queue() -> usize {
    10_000
}

/// `[incidents]`: when the proxy takes a CPU profile and a state snapshot by itself
/// (docs/diagnostics.md). Each condition set is checked every second over the
/// last `hold`; when one is above its threshold, an incident is captured, at most
/// once per `cooldown`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IncidentSection {
    /// Where incidents are kept, one directory each (`incident-TIME-REASON`);
    /// created when missing.
    pub dir: PathBuf,
    /// How many incidents are kept (the oldest go first).
    #[serde(default = "default_incident_keep")]
    pub keep: usize,
    /// The window each condition is measured over.
    #[serde(with = "duration", default = "default_incident_hold")]
    pub hold: Duration,
    /// The shortest time between two captures.
    #[serde(with = "duration", default = "default_incident_cooldown")]
    pub cooldown: Duration,
    /// The length of the CPU profile taken, in seconds (1 to 300).
    #[serde(default = "default_incident_profile_seconds")]
    pub profile_seconds: u64,
    /// Capture when the 99th percentile of a WAF phase's time over the window is
    /// above this many milliseconds.
    pub phase_p99_ms: Option<f64>,
    /// Capture when the process used more than this many CPU cores on average
    /// over the window (1.0: one core busy).
    pub cpu_cores: Option<f64>,
    /// Capture when the kernel's share of the process's CPU time over the window
    /// is above this (0 to 1), while the process used at least a tenth of a core.
    pub kernel_share: Option<f64>,
}

fn default_incident_keep() -> usize {
    5
}
fn default_incident_hold() -> Duration {
    Duration::from_secs(30)
}
fn default_incident_cooldown() -> Duration {
    Duration::from_secs(600)
}
fn default_incident_profile_seconds() -> u64 {
    10
}

/// `[dns]`: how `@rbl` rules look names up (`docs/config.md`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DnsSection {
    /// `false` turns DNS block-list lookups off: `@rbl` rules then never match
    /// (loading them warns).
    pub enabled: bool,
    /// Name servers as `IP:PORT`, asked in turn; empty: those of
    /// `/etc/resolv.conf`.
    pub resolvers: Vec<SocketAddr>,
    /// How long one lookup may take before it counts as failed.
    #[serde(with = "duration")]
    pub timeout: Duration,
    /// Most answers kept in the cache.
    pub cache_entries: u64,
    /// Shortest time an answer is kept (answers with a shorter TTL, and
    /// negative answers without one, are kept this long).
    #[serde(with = "duration")]
    pub min_ttl: Duration,
    /// Longest time an answer is kept, whatever its TTL.
    #[serde(with = "duration")]
    pub max_ttl: Duration,
    /// How long a failed lookup (timeout, server failure) is remembered, so that a
    /// dead resolver costs one timeout per name in that time, not one per request.
    #[serde(with = "duration")]
    pub failure_ttl: Duration,
    /// Most names one request may look up; later `@rbl` evaluations do not match.
    pub max_lookups_per_transaction: usize,
}

impl Default for DnsSection {
    fn default() -> Self {
        Self {
            enabled: true,
            resolvers: Vec::new(),
            timeout: Duration::from_millis(500),
            cache_entries: 10_000,
            min_ttl: Duration::from_secs(10),
            max_ttl: Duration::from_secs(3600),
            failure_ttl: Duration::from_secs(5),
            max_lookups_per_transaction: engine::lookups::DEFAULT_RBL_LOOKUPS,
        }
    }
}

fn default_rate_limit_status() -> u16 {
    429
}
fn default_rate_limit_keys() -> usize {
    1_000_000
}

fn default_access_default() -> String {
    "allow".to_owned()
}

fn default_sync_stream() -> String {
    store::sync::SyncConfig::DEFAULT_STREAM.to_owned()
}
fn default_sync_retention() -> u64 {
    store::sync::SyncConfig::DEFAULT_RETENTION
}
fn default_snapshot_interval() -> Duration {
    store::sync::SyncConfig::DEFAULT_SNAPSHOT_INTERVAL
}

fn yes() -> bool {
    true
}
fn default_max_fails() -> u32 {
    1
}
fn default_fail_timeout() -> Duration {
    Duration::from_secs(10)
}
fn default_retries() -> u32 {
    1
}
fn default_retry_budget() -> f64 {
    0.2
}
fn default_resolve_min_ttl() -> Duration {
    Duration::from_secs(1)
}
fn default_health_path() -> String {
    "/".to_owned()
}
fn default_health_interval() -> Duration {
    Duration::from_secs(5)
}
fn default_health_timeout() -> Duration {
    Duration::from_secs(2)
}
fn default_health_rise() -> u32 {
    2
}
fn default_health_fall() -> u32 {
    3
}
fn default_keepalive() -> usize {
    32
}
fn default_connect_timeout() -> Duration {
    Duration::from_secs(5)
}
fn default_read_timeout() -> Duration {
    Duration::from_secs(60)
}
fn default_idle_timeout() -> Duration {
    Duration::from_secs(60)
}
fn default_admin_timeout() -> Duration {
    Duration::from_secs(10)
}
fn default_admin_connections() -> usize {
    16
}
fn default_admin_body_bytes() -> usize {
    64 * 1024 * 1024
}
fn default_admin_dashboard() -> bool {
    true
}
fn default_readiness_min_requests() -> u64 {
    1000
}
fn default_readiness_max_rate() -> f64 {
    0.001
}
fn default_admin_address() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 9901))
}

impl Config {
    /// Reads, parses and checks a configuration file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Parses and checks configuration text; `path` names it in errors and anchors
    /// relative paths.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let mut cfg: Config = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_owned(),
            message: e.to_string().trim_end().to_owned(),
        })?;
        cfg.path = path.to_owned();
        let base = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        cfg.resolve_paths(&base);
        cfg.validate().map_err(|message| ConfigError::Invalid {
            path: path.to_owned(),
            message,
        })?;
        Ok(cfg)
    }

    fn resolve_paths(&mut self, base: &Path) {
        let fix = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        for l in &mut self.listeners {
            if let Some(t) = &mut l.tls {
                for p in [&mut t.cert, &mut t.key, &mut t.certificate_dir]
                    .into_iter()
                    .flatten()
                {
                    fix(p);
                }
                for pair in &mut t.certificates {
                    fix(&mut pair.cert);
                    fix(&mut pair.key);
                }
            }
        }
        if let Some(i) = &mut self.incidents {
            fix(&mut i.dir);
        }
        for s in &mut self.syslogs {
            if let Some(f) = &mut s.tls_ca_file {
                fix(f);
            }
        }
        if let Some(f) = self.otlp.as_mut().and_then(|o| o.tls_ca_file.as_mut()) {
            fix(f);
        }
        if let Some(a) = &mut self.acme {
            fix(&mut a.state_dir);
            if let Some(f) = &mut a.ca_file {
                fix(f);
            }
        }
        for u in &mut self.upstreams {
            if let Some(f) = &mut u.tls_ca_file {
                fix(f);
            }
        }
        for r in self
            .rules
            .iter_mut()
            .chain(self.sites.iter_mut().flat_map(|s| s.rules.iter_mut()))
            .chain(
                self.shadow
                    .iter_mut()
                    .flat_map(|s| s.rules.iter_mut().chain(s.overlay.iter_mut())),
            )
        {
            if let Some(f) = &mut r.file {
                fix(f);
            }
        }
        if let Some(a) = &mut self.access {
            for f in a.allow_files.iter_mut().chain(a.deny_files.iter_mut()) {
                fix(f);
            }
        }
        if let Some(f) = &mut self.forward {
            for p in f
                .deny
                .iter_mut()
                .chain(f.allow.iter_mut().flatten())
                .chain(f.inspect.iter_mut())
                .chain(f.inspect_bypass.iter_mut())
                .chain(f.inspect_ca_cert.iter_mut())
                .chain(f.inspect_ca_key.iter_mut())
                .chain(f.upstream_ca_file.iter_mut())
            {
                fix(p);
            }
            for p in [&mut f.htpasswd, &mut f.groups, &mut f.categories]
                .into_iter()
                .flatten()
            {
                fix(p);
            }
            for g in &mut f.groups_rules {
                for p in g.deny.iter_mut().chain(g.allow.iter_mut()) {
                    fix(p);
                }
            }
        }
        for p in [
            &mut self.logs.error_log,
            &mut self.logs.access_log,
            &mut self.logs.audit_log,
            &mut self.store.path,
        ]
        .into_iter()
        .chain(
            self.admin
                .as_mut()
                .into_iter()
                .flat_map(|a| [&mut a.token_file, &mut a.tune_attacks]),
        )
        .flatten()
        {
            fix(p);
        }
    }

    fn validate(&self) -> Result<(), String> {
        if let Some(s) = &self.shadow {
            s.validate()?;
        }
        for (i, site) in self.sites.iter().enumerate() {
            site.validate()?;
            if self.sites[..i].iter().any(|o| o.name == site.name) {
                return Err(format!("site.name {:?} is used twice", site.name));
            }
        }
        for r in &self.rate_limits {
            for name in r.sites.iter().flatten() {
                if name != DEFAULT_SITE && !self.sites.iter().any(|s| &s.name == name) {
                    return Err(format!(
                        "rate_limit {:?}: sites names {name:?}, which is no [[site]] (nor \"default\", the requests of no site)",
                        r.name
                    ));
                }
            }
        }
        for (i, r) in self.rate_limits.iter().enumerate() {
            if self.rate_limits[..i].iter().any(|o| o.name == r.name) {
                return Err(format!("rate_limit {:?} is defined twice", r.name));
            }
            if !(400..=599).contains(&r.status) {
                return Err(format!(
                    "rate_limit {:?}: status must be 4xx or 5xx, got {}",
                    r.name, r.status
                ));
            }
            if r.max_keys == 0 {
                return Err(format!(
                    "rate_limit {:?}: max_keys must be at least 1",
                    r.name
                ));
            }
            crate::ratelimit::RateLimiter::new(r)?;
        }
        for (i, c) in self.shapes.iter().enumerate() {
            if self.shapes[..i].iter().any(|o| o.name == c.name) {
                return Err(format!("shape {:?} is defined twice", c.name));
            }
            crate::shaping::Shaper::new(c)?;
        }
        if let Some(a) = &self.access
            && a.default != "allow"
            && a.default != "deny"
        {
            return Err(format!(
                "access.default must be \"allow\" or \"deny\", got {:?}",
                a.default
            ));
        }
        if !(400..=599).contains(&self.server.waf_cpu_budget_status) {
            return Err(format!(
                "server.waf_cpu_budget_status must be a 4xx or 5xx status, got {}",
                self.server.waf_cpu_budget_status
            ));
        }
        if self.listeners.is_empty() {
            return Err("at least one [[listener]] is required".into());
        }
        if self.dns.timeout.is_zero() {
            return Err("dns.timeout must be more than 0".into());
        }
        if self.dns.min_ttl > self.dns.max_ttl {
            return Err(format!(
                "dns.min_ttl ({:?}) is more than dns.max_ttl ({:?})",
                self.dns.min_ttl, self.dns.max_ttl
            ));
        }
        for (i, l) in self.listeners.iter().enumerate() {
            if self.listeners[..i].iter().any(|o| o.address == l.address) {
                return Err(format!("listener.address {} is listed twice", l.address));
            }
        }
        let client_address = crate::client_address::ClientAddress::new(&self.client_address)
            .map_err(|e| e.to_string())?;
        if let Some(l) = self.listeners.iter().find(|l| l.proxy_protocol)
            && !client_address.is_configured()
        {
            return Err(format!(
                "listener {}: proxy_protocol = true needs client_address.trusted_proxies (the load balancers that may send the PROXY header); it is empty",
                l.address
            ));
        }
        let reverse = self
            .listeners
            .iter()
            .any(|l| l.mode == ListenerMode::Reverse);
        if self.upstreams.is_empty() && reverse {
            return Err("at least one [[upstream]] is required".into());
        }
        if let Some(f) = &self.forward {
            f.validate()?;
        }
        for (i, u) in self.upstreams.iter().enumerate() {
            if u.name.is_empty() {
                return Err("upstream.name must not be empty".into());
            }
            if self.upstreams[..i].iter().any(|o| o.name == u.name) {
                return Err(format!("upstream.name {:?} is used twice", u.name));
            }
            if u.servers.is_empty() {
                return Err(format!("upstream {:?}: servers must not be empty", u.name));
            }
            for s in u.servers.iter().chain(&u.backup) {
                check_server_address(s)
                    .map_err(|m| format!("upstream {:?}: server {s:?}: {m}", u.name))?;
            }
            if !u.uses_tls() && (u.tls_sni.is_some() || u.tls_ca_file.is_some() || !u.tls_verify) {
                return Err(format!(
                    "upstream {:?}: tls_sni, tls_ca_file and tls_verify need tls = true (or https:// servers)",
                    u.name
                ));
            }
            validate_balancing(u)?;
            if let Some(sni) = &u.tls_sni
                && rustls::pki_types::ServerName::try_from(sni.as_str()).is_err()
            {
                return Err(format!(
                    "upstream {:?}: tls_sni {sni:?} is not a host name or IP address",
                    u.name
                ));
            }
        }
        for r in &self.routes {
            if !self.upstreams.iter().any(|u| u.name == r.upstream) {
                return Err(format!(
                    "route.upstream {:?} names no [[upstream]]",
                    r.upstream
                ));
            }
            if let Some(p) = &r.path_prefix
                && !p.starts_with('/')
            {
                return Err(format!("route.path_prefix {p:?} must start with '/'"));
            }
        }
        for (i, r) in self.rules.iter().enumerate() {
            match (&r.file, &r.inline) {
                (Some(_), None) | (None, Some(_)) => {}
                _ => {
                    return Err(format!(
                        "rules entry {} must have exactly one of `file` and `inline`",
                        i + 1
                    ));
                }
            }
        }
        let l = &self.limits;
        if l.header_bytes < 256 {
            return Err("limits.header_bytes must be at least 256".into());
        }
        if l.max_headers == 0 {
            return Err("limits.max_headers must be at least 1".into());
        }
        if l.connections == 0 {
            return Err("limits.connections must be at least 1".into());
        }
        if self.logs.channel_capacity == 0 {
            return Err("logs.channel_capacity must be at least 1".into());
        }
        if let Some(a) = &self.admin
            && !a.address.ip().is_loopback()
            && !a.allow_non_loopback
        {
            return Err(format!(
                "admin.address {} is not a loopback address; set admin.allow_non_loopback = true to allow it",
                a.address
            ));
        }
        if self
            .listeners
            .iter()
            .any(|l| self.admin.as_ref().is_some_and(|a| a.address == l.address))
        {
            return Err("admin.address is also a listener address".into());
        }
        self.validate_tls()?;
        self.validate_store()
    }

    fn validate_tls(&self) -> Result<(), String> {
        for l in &self.listeners {
            let Some(t) = &l.tls else { continue };
            if t.cert.is_some() != t.key.is_some() {
                return Err(format!(
                    "listener {}: tls.cert and tls.key go together",
                    l.address
                ));
            }
            let acme = t.acme && self.acme.is_some();
            if t.cert.is_none() && t.certificates.is_empty() && t.certificate_dir.is_none() && !acme
            {
                return Err(format!(
                    "listener {}: tls needs a certificate: cert and key, certificates, certificate_dir, or an [acme] section",
                    l.address
                ));
            }
        }
        let Some(a) = &self.acme else { return Ok(()) };
        if !(a.directory.starts_with("https://") || a.directory.starts_with("http://")) {
            return Err(format!(
                "acme.directory {:?} must be an https:// URL",
                a.directory
            ));
        }
        if a.names.is_empty() {
            return Err("acme.names must name at least one DNS name".into());
        }
        for (i, n) in a.names.iter().enumerate() {
            check_acme_name(n).map_err(|m| format!("acme.names[{i}] {n:?}: {m}"))?;
            if a.names[..i].iter().any(|o| o.eq_ignore_ascii_case(n)) {
                return Err(format!("acme.names[{i}] {n:?} is listed twice"));
            }
        }
        for (i, c) in a.contact.iter().enumerate() {
            let addr = c.strip_prefix("mailto:").unwrap_or(c);
            if !addr.contains('@') || addr.contains(char::is_whitespace) {
                return Err(format!("acme.contact[{i}] {c:?} is not an e-mail address"));
            }
        }
        if a.state_dir.as_os_str().is_empty() {
            return Err("acme.state_dir must not be empty".into());
        }
        if a.renew_before.is_zero() {
            return Err("acme.renew_before must be more than 0".into());
        }
        at_least_a_second("acme.retry_interval", a.retry_interval)?;
        at_least_a_second("acme.order_timeout", a.order_timeout)?;
        let serves = |tls: bool| {
            self.listeners
                .iter()
                .any(|l| l.tls.as_ref().map_or(!tls, |t| tls && t.acme))
        };
        if !serves(true) {
            return Err(
                "[acme] needs a TLS [[listener]] to serve its certificates (tls = { acme = true })"
                    .into(),
            );
        }
        if a.challenge == AcmeChallenge::Http01 && !serves(false) {
            return Err(
                "acme.challenge \"http-01\" needs a plain-HTTP [[listener]] (port 80) to answer the CA"
                    .into(),
            );
        }
        Ok(())
    }

    fn validate_store(&self) -> Result<(), String> {
        let s = &self.store;
        if s.map_size < 1 << 20 {
            return Err(format!(
                "store.map_size must be at least 1048576 bytes (1 MiB), got {}",
                s.map_size
            ));
        }
        if s.batch_interval.is_zero() || s.batch_interval > Duration::from_secs(10) {
            return Err(format!(
                "store.batch_interval must be more than 0 and at most 10s, got {:?}",
                s.batch_interval
            ));
        }
        at_least_a_second("store.sweep_interval", s.sweep_interval)?;
        if let Some(h) = &s.host_id {
            check_host_id(h).map_err(|m| format!("store.host_id {h:?}: {m}"))?;
        }
        if let Some(p) = &s.path
            && p.as_os_str().is_empty()
        {
            return Err("store.path must not be empty".into());
        }
        if let Some(sync) = &self.sync {
            let scheme_ok = ["redis://", "rediss://", "redis+unix://", "unix://"]
                .iter()
                .any(|p| sync.redis.starts_with(p));
            if !scheme_ok {
                return Err(format!(
                    "sync.redis {:?} must be a redis:// (or rediss://, redis+unix://) URL",
                    sync.redis
                ));
            }
            if sync.stream.is_empty() {
                return Err("sync.stream must not be empty".into());
            }
            if sync.retention < 1000 {
                return Err(format!(
                    "sync.retention must be at least 1000 entries, got {}",
                    sync.retention
                ));
            }
            at_least_a_second("sync.snapshot_interval", sync.snapshot_interval)?;
        }
        if let Some(a) = &self.admin
            && a.max_body_bytes == 0
        {
            return Err("admin.max_body_bytes must be at least 1".into());
        }
        if let Some(i) = &self.incidents {
            i.validate()?;
        }
        for s in &self.syslogs {
            s.validate()?;
        }
        if let Some(o) = &self.otlp {
            o.validate()?;
        }
        if !(0.0..=1.0).contains(&self.server.rule_cost_sample) {
            return Err("server.rule_cost_sample must be between 0 and 1".into());
        }
        if let Some(a) = &self.admin
            && !(0.0..=1.0).contains(&a.readiness_max_rate)
        {
            return Err("admin.readiness_max_rate must be between 0 and 1".into());
        }
        Ok(())
    }
}

impl IncidentSection {
    /// Refuses values that cannot work, naming the key.
    fn validate(&self) -> Result<(), String> {
        if self.keep == 0 {
            return Err("incidents.keep must be at least 1".into());
        }
        if !(1..=crate::diag::profile::MAX_SECONDS).contains(&self.profile_seconds) {
            return Err(format!(
                "incidents.profile_seconds must be 1 to {}",
                crate::diag::profile::MAX_SECONDS
            ));
        }
        at_least_a_second("incidents.hold", self.hold)?;
        at_least_a_second("incidents.cooldown", self.cooldown)?;
        let positive = |key: &str, v: Option<f64>| match v {
            Some(v) if !(v.is_finite() && v >= 0.0) => {
                Err(format!("incidents.{key} must be a number of at least 0"))
            }
            _ => Ok(()),
        };
        positive("phase_p99_ms", self.phase_p99_ms)?;
        positive("cpu_cores", self.cpu_cores)?;
        if let Some(k) = self.kernel_share
            && !(0.0..=1.0).contains(&k)
        {
            return Err("incidents.kernel_share must be between 0 and 1".into());
        }
        if self.phase_p99_ms.is_none() && self.cpu_cores.is_none() && self.kernel_share.is_none() {
            return Err(
                "[incidents] sets no condition: phase_p99_ms, cpu_cores or kernel_share".into(),
            );
        }
        Ok(())
    }
}

/// Refuses a duration under a second, naming the key.
fn at_least_a_second(key: &str, d: Duration) -> Result<(), String> {
    if d < Duration::from_secs(1) {
        return Err(format!("{key} must be at least 1s, got {d:?}"));
    }
    Ok(())
}

/// Checks a host id: 1 to 64 printable ASCII characters without spaces or `@` (it
/// names the host in the sync stream, where `@` is a separator).
pub fn check_host_id(h: &str) -> Result<(), &'static str> {
    if h.is_empty() || h.len() > 64 {
        return Err("must be 1 to 64 characters");
    }
    if !h.bytes().all(|b| b.is_ascii_graphic() && b != b'@') {
        return Err("must be printable ASCII without spaces or '@'");
    }
    Ok(())
}

/// Checks the balancing, retry and health keys of a pool.
fn validate_balancing(u: &UpstreamConfig) -> Result<(), String> {
    let name = &u.name;
    match (&u.balance, &u.hash_key) {
        (Balance::Hash, None) => {
            return Err(format!(
                "upstream {name:?}: balance = \"hash\" needs hash_key (client_ip, header:NAME or cookie:NAME)"
            ));
        }
        (Balance::Hash, Some(k)) => {
            HashKey::parse(k).map_err(|m| format!("upstream {name:?}: hash_key {m}"))?;
        }
        (_, Some(_)) => {
            return Err(format!(
                "upstream {name:?}: hash_key needs balance = \"hash\""
            ));
        }
        (_, None) => {}
    }
    if !(0.0..=1.0).contains(&u.retry_budget) {
        return Err(format!(
            "upstream {name:?}: retry_budget must be between 0 and 1, got {}",
            u.retry_budget
        ));
    }
    if u.max_fails > 0 && u.fail_timeout.is_zero() {
        return Err(format!(
            "upstream {name:?}: fail_timeout must be more than 0 when max_fails is set"
        ));
    }
    if let Some(h) = &u.health_check {
        if h.interval.is_zero() || h.timeout.is_zero() {
            return Err(format!(
                "upstream {name:?}: health_check.interval and health_check.timeout must be more than 0"
            ));
        }
        if h.rise == 0 || h.fall == 0 {
            return Err(format!(
                "upstream {name:?}: health_check.rise and health_check.fall must be at least 1"
            ));
        }
        if h.kind == HealthCheckKind::Http {
            if !h.path.starts_with('/') || http::Uri::try_from(h.path.as_str()).is_err() {
                return Err(format!(
                    "upstream {name:?}: health_check.path {:?} must be a path starting with /",
                    h.path
                ));
            }
            if let Some(host) = &h.host
                && http::HeaderValue::from_str(host).is_err()
            {
                return Err(format!(
                    "upstream {name:?}: health_check.host {host:?} is not a header value"
                ));
            }
            if let Some(s) = h.expect_status.iter().find(|s| !(100..=599).contains(*s)) {
                return Err(format!(
                    "upstream {name:?}: health_check.expect_status {s} is not an HTTP status"
                ));
            }
        }
    }
    Ok(())
}

/// Checks a name of `acme.names`: a DNS name of letters, digits and hyphens in
/// dot-separated labels (no wildcard: that needs DNS-01, which is not offered).
fn check_acme_name(n: &str) -> Result<(), &'static str> {
    if n.starts_with("*.") {
        return Err("a wildcard needs the DNS-01 challenge, which Palisade does not offer");
    }
    if n.is_empty() || n.len() > 253 || n.parse::<std::net::IpAddr>().is_ok() {
        return Err("not a DNS name");
    }
    let ok = n.split('.').all(|l| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    });
    if !ok {
        return Err("not a DNS name");
    }
    Ok(())
}

/// Checks that an upstream server is `HOST:PORT` (or `https://HOST:PORT`) with a
/// numeric port.
fn check_server_address(s: &str) -> Result<(), &'static str> {
    let s = s.strip_prefix("https://").unwrap_or(s);
    let (host, port) = s.rsplit_once(':').ok_or("expected HOST:PORT")?;
    if host.is_empty() {
        return Err("empty host");
    }
    port.parse::<u16>().map_err(|_| "port is not a number")?;
    if host.contains('/') || host.contains(char::is_whitespace) {
        return Err("expected HOST:PORT, not a URL");
    }
    Ok(())
}

/// Durations written as text: `250ms`, `10s`, `5m`, `1h`, `30d`, or a combination of
/// them such as `1m30s`.
pub mod duration {
    use serde::{Deserialize, Deserializer};
    use std::time::Duration;

    /// Parses a duration such as `1m30s` or `250ms`.
    pub fn parse(text: &str) -> Result<Duration, String> {
        let t = text.trim();
        if t.is_empty() {
            return Err("empty duration".into());
        }
        let mut total = Duration::ZERO;
        let mut rest = t;
        while !rest.is_empty() {
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                return Err(format!("invalid duration {text:?}: expected a number"));
            }
            let n: u64 = rest[..digits]
                .parse()
                .map_err(|_| format!("invalid duration {text:?}: number too large"))?;
            rest = &rest[digits..];
            let unit_len = rest.bytes().take_while(|b| b.is_ascii_alphabetic()).count();
            let unit = &rest[..unit_len];
            rest = &rest[unit_len..];
            let d = match unit {
                "ms" => Duration::from_millis(n),
                "s" => Duration::from_secs(n),
                "m" => Duration::from_secs(n.saturating_mul(60)),
                "h" => Duration::from_secs(n.saturating_mul(3600)),
                "d" => Duration::from_secs(n.saturating_mul(86_400)),
                "" => {
                    return Err(format!(
                        "invalid duration {text:?}: missing unit (ms, s, m, h or d)"
                    ));
                }
                _ => {
                    return Err(format!(
                        "invalid duration {text:?}: unknown unit {unit:?} (use ms, s, m, h or d)"
                    ));
                }
            };
            total = total.saturating_add(d);
        }
        Ok(total)
    }

    /// serde adapter: reads a duration string.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let s = String::deserialize(d)?;
        parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, Path::new("/etc/palisade/test.toml"))
    }

    const MINIMAL: &str = r#"
[[listener]]
address = "127.0.0.1:8080"
[[upstream]]
name = "app"
servers = ["127.0.0.1:9000"]
"#;

    #[test]
    fn forward_policy_keys() {
        let dir = tempfile::tempdir().unwrap();
        let cats = dir.path().join("cats");
        std::fs::create_dir(&cats).unwrap();
        std::fs::write(cats.join("games.txt"), "games.example\n").unwrap();
        std::fs::write(dir.path().join("users"), "").unwrap();
        std::fs::write(dir.path().join("groups"), "").unwrap();
        let cfg_path = dir.path().join("p.toml");
        let with = |forward: &str| {
            Config::parse(&format!("{MINIMAL}\n[forward]\n{forward}\n"), &cfg_path)
                .map_err(|e| e.to_string())
        };
        let ok = with(
            "htpasswd = \"users\"\ngroups = \"groups\"\ncategories = \"cats\"\n\
             block_categories = [\"games\"]\n[[forward.group]]\nname = \"staff\"\n\
             block_categories = [\"games\"]\n",
        )
        .unwrap();
        let f = ok.forward.unwrap();
        assert_eq!(f.realm, "Palisade");
        assert_eq!(
            f.htpasswd.as_deref(),
            Some(dir.path().join("users").as_path())
        );
        assert_eq!(f.groups_rules[0].name, "staff");
        for (forward, key) in [
            ("htpasswd = \"nope\"", "forward.htpasswd"),
            ("groups = \"nope\"", "forward.groups"),
            ("categories = \"users\"", "forward.categories"),
            (
                "block_categories = [\"games\"]",
                "forward.block_categories needs",
            ),
            (
                "categories = \"cats\"\nblock_categories = [\"chess\"]",
                "forward.block_categories: unknown category \"chess\"",
            ),
            (
                "categories = \"cats\"\nblock_categories = [\"../users\"]",
                "unknown category",
            ),
            ("realm = \"a\\nb\"", "forward.realm"),
            ("[[forward.group]]\nname = \"x\"", "needs forward.groups"),
            (
                "htpasswd = \"users\"\ngroups = \"groups\"\n[[forward.group]]\nname = \"x\"\n\
                 deny = [\"nope\"]",
                "forward.group \"x\" deny",
            ),
            (
                "htpasswd = \"users\"\ngroups = \"groups\"\n[[forward.group]]\nname = \"x\"\n\
                 [[forward.group]]\nname = \"x\"",
                "defined twice",
            ),
        ] {
            let err = with(forward).unwrap_err();
            assert!(err.contains(key), "{forward}: {err}");
        }
    }

    #[test]
    fn forward_listener_and_section() {
        let c = parse("[[listener]]\naddress = \"127.0.0.1:3128\"\nmode = \"forward\"\n").unwrap();
        assert_eq!(c.listeners[0].mode, ListenerMode::Forward);
        assert!(c.forward.is_none());
        let d = ForwardSection::default();
        assert_eq!(d.connect_ports, vec![443]);
        assert!(d.refuse_fronting);
        assert_eq!(d.max_destinations, 1024);
        let err = parse(&format!("{MINIMAL}\n[forward]\nmax_destinations = 0\n"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("forward.max_destinations"), "{err}");
        let err = parse(&format!(
            "{MINIMAL}\n[forward]\ndeny = [\"/nonexistent/list\"]\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(err.contains("forward.deny"), "{err}");
        let err = parse(&format!("{MINIMAL}\n[forward]\nconnect_ports = [0]\n"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("forward.connect_ports"), "{err}");
        let err = parse(&format!("{MINIMAL}\n[forward]\npac_proxy = \"no port\"\n"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("forward.pac_proxy"), "{err}");
        let err = parse(&format!("{MINIMAL}\n[forward]\npac_direct = [\"a b\"]\n"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("forward.pac_direct"), "{err}");
        let err = parse(&format!("{MINIMAL}\n[forward]\nallow = []\n"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("forward.allow"), "{err}");
        let err = parse("[[listener]]\naddress = \"127.0.0.1:3128\"\nmode = \"sideways\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("sideways"), "{err}");
    }

    #[test]
    fn minimal_config_gets_defaults() {
        let c = parse(MINIMAL).unwrap();
        assert_eq!(c.listeners.len(), 1);
        assert!(c.listeners[0].tls.is_none());
        assert_eq!(c.upstreams[0].keepalive, 32);
        assert_eq!(c.upstreams[0].connect_timeout, Duration::from_secs(5));
        assert_eq!(c.server.grace_period, Duration::from_secs(10));
        assert_eq!(c.limits.header_bytes, 32 * 1024);
        assert!(c.admin.is_none());
        assert!(c.logs.error_log.is_none());
    }

    #[test]
    fn dashboard_readiness_settings() {
        let c = parse(&format!("{MINIMAL}\n[admin]\n")).unwrap();
        let a = c.admin.unwrap();
        assert_eq!(a.readiness_min_requests, 1000);
        assert!((a.readiness_max_rate - 0.001).abs() < f64::EPSILON);
        let c = parse(&format!(
            "{MINIMAL}\n[admin]\nreadiness_min_requests = 50\nreadiness_max_rate = 0.02\n"
        ))
        .unwrap();
        let a = c.admin.unwrap();
        assert_eq!(a.readiness_min_requests, 50);
        assert!((a.readiness_max_rate - 0.02).abs() < f64::EPSILON);
        for bad in ["1.5", "-0.1", "nan"] {
            let err = parse(&format!("{MINIMAL}\n[admin]\nreadiness_max_rate = {bad}\n"))
                .unwrap_err()
                .to_string();
            assert!(err.contains("readiness_max_rate"), "{bad}: {err}");
        }
    }

    #[test]
    fn rule_cost_sample_setting() {
        let c = parse(MINIMAL).unwrap();
        assert!((c.server.rule_cost_sample - 0.01).abs() < f64::EPSILON);
        let c = parse(&format!("{MINIMAL}\n[server]\nrule_cost_sample = 0\n")).unwrap();
        assert_eq!(c.server.rule_cost_sample, 0.0);
        for bad in ["1.5", "-0.1", "nan"] {
            let err = parse(&format!("{MINIMAL}\n[server]\nrule_cost_sample = {bad}\n"))
                .unwrap_err()
                .to_string();
            assert!(err.contains("rule_cost_sample"), "{bad}: {err}");
        }
    }

    #[test]
    fn dns_section() {
        let c = parse(MINIMAL).unwrap();
        assert!(c.dns.enabled && c.dns.resolvers.is_empty());
        assert_eq!(c.dns.timeout, Duration::from_millis(500));
        assert_eq!(c.dns.max_lookups_per_transaction, 8);
        let c = parse(&format!(
            "{MINIMAL}\n[dns]\nresolvers = [\"127.0.0.1:5353\", \"[::1]:53\"]\ntimeout = \"200ms\"\nfailure_ttl = \"0s\"\nmax_lookups_per_transaction = 2\n"
        ))
        .unwrap();
        assert_eq!(c.dns.resolvers.len(), 2);
        assert_eq!(c.dns.resolvers[0].port(), 5353);
        assert_eq!(c.dns.failure_ttl, Duration::ZERO);
        assert_eq!(c.dns.max_lookups_per_transaction, 2);
        for (bad, named) in [
            ("timeout = \"0s\"", "dns.timeout"),
            ("min_ttl = \"2h\"", "dns.min_ttl"),
            ("resolvers = [\"127.0.0.1\"]", "resolvers"),
            ("resolver = []", "resolver"),
        ] {
            let err = parse(&format!("{MINIMAL}\n[dns]\n{bad}\n"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(named), "{bad}: {err}");
        }
    }

    #[test]
    fn unknown_key_is_named() {
        let err = parse(&format!("{MINIMAL}\n[limits]\nheader_byts = 5\n"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("header_byts"), "{err}");
        let err = parse(&format!("{MINIMAL}\nfoo = 1\n"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("foo"), "{err}");
    }

    #[test]
    fn relative_paths_follow_the_config_file() {
        let c = parse(&format!(
            "{MINIMAL}\n[[rules]]\nfile = \"rules/*.conf\"\n[[rules]]\ninline = \"SecRuleEngine On\"\n[logs]\nerror_log = \"/var/log/e.log\"\naccess_log = \"a.log\"\n"
        ))
        .unwrap();
        assert_eq!(
            c.rules[0].file.as_deref(),
            Some(Path::new("/etc/palisade/rules/*.conf"))
        );
        assert_eq!(c.rules[1].inline.as_deref(), Some("SecRuleEngine On"));
        assert_eq!(
            c.logs.error_log.as_deref(),
            Some(Path::new("/var/log/e.log"))
        );
        assert_eq!(
            c.logs.access_log.as_deref(),
            Some(Path::new("/etc/palisade/a.log"))
        );
    }

    #[test]
    fn rules_entry_needs_exactly_one_source() {
        let err = parse(&format!("{MINIMAL}\n[[rules]]\n"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("exactly one"), "{err}");
        let err = parse(&format!(
            "{MINIMAL}\n[[rules]]\nfile = \"a\"\ninline = \"b\"\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(err.contains("exactly one"), "{err}");
    }

    #[test]
    fn balancing_health_and_retry_keys() {
        let c = parse(MINIMAL).unwrap();
        let u = &c.upstreams[0];
        assert_eq!(u.balance, Balance::RoundRobin);
        assert_eq!((u.max_fails, u.fail_timeout), (1, Duration::from_secs(10)));
        assert_eq!((u.retries, u.retry_budget), (1, 0.2));
        assert!(u.health_check.is_none());
        let c = parse(&format!(
            "{MINIMAL}balance = \"hash\"\nhash_key = \"cookie:sid\"\nretries = 3\n[upstream.health_check]\ntype = \"tcp\"\ninterval = \"1s\"\n"
        ))
        .unwrap();
        let u = &c.upstreams[0];
        assert_eq!(u.hash_key(), Some(HashKey::Cookie("sid".into())));
        let h = u.health_check.as_ref().unwrap();
        assert_eq!(h.kind, HealthCheckKind::Tcp);
        assert_eq!((h.interval, h.rise, h.fall), (Duration::from_secs(1), 2, 3));
        for (extra, needle) in [
            ("balance = \"hash\"\n", "needs hash_key"),
            ("hash_key = \"client_ip\"\n", "needs balance"),
            (
                "balance = \"hash\"\nhash_key = \"uri\"\n",
                "hash_key \"uri\"",
            ),
            ("balance = \"random\"\n", "unknown variant"),
            ("retry_budget = 1.5\n", "retry_budget"),
            ("[upstream.health_check]\nrise = 0\n", "rise"),
            (
                "[upstream.health_check]\npath = \"health\"\n",
                "health_check.path",
            ),
            (
                "[upstream.health_check]\nexpect_status = [42]\n",
                "expect_status 42",
            ),
            ("[upstream.health_check]\ninterval = \"0s\"\n", "interval"),
        ] {
            let err = parse(&format!("{MINIMAL}{extra}")).unwrap_err().to_string();
            assert!(err.contains(needle), "{extra}: {err}");
        }
    }

    #[test]
    fn route_must_name_a_pool() {
        let err = parse(&format!("{MINIMAL}\n[[route]]\nupstream = \"nope\"\n"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("nope"), "{err}");
    }

    #[test]
    fn cpu_budget_settings() {
        let c = parse(MINIMAL).unwrap();
        assert_eq!(
            c.server.waf_cpu_budget,
            CpuBudgetSetting::Limit(Duration::from_secs(1))
        );
        assert_eq!(c.server.waf_cpu_budget_action, BudgetActionSetting::Block);
        let c = parse(&format!(
            "[server]\nwaf_cpu_budget = \"off\"\nwaf_cpu_budget_action = \"pass\"\n{MINIMAL}"
        ))
        .unwrap();
        assert_eq!(c.server.waf_cpu_budget, CpuBudgetSetting::Off);
        assert_eq!(c.server.waf_cpu_budget_action, BudgetActionSetting::Pass);
        for (bad, why) in [
            ("waf_cpu_budget = \"0s\"", "more than 0"),
            ("waf_cpu_budget = \"soon\"", "invalid duration"),
            ("waf_cpu_budget_action = \"drop\"", "unknown variant"),
            ("waf_cpu_budget_status = 200", "4xx or 5xx"),
        ] {
            let err = parse(&format!("[server]\n{bad}\n{MINIMAL}"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }

    #[test]
    fn admin_is_loopback_unless_allowed() {
        let err = parse(&format!("{MINIMAL}\n[admin]\naddress = \"0.0.0.0:9901\"\n"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("loopback"), "{err}");
        let c = parse(&format!(
            "{MINIMAL}\n[admin]\naddress = \"0.0.0.0:9901\"\nallow_non_loopback = true\n"
        ))
        .unwrap();
        assert!(c.admin.unwrap().allow_non_loopback);
        let c = parse(&format!("{MINIMAL}\n[admin]\n")).unwrap();
        assert_eq!(c.admin.unwrap().address.to_string(), "127.0.0.1:9901");
    }

    #[test]
    fn bad_server_address_is_refused() {
        let text = MINIMAL.replace("127.0.0.1:9000", "http://x/");
        let err = parse(&text).unwrap_err().to_string();
        assert!(err.contains("http://x/"), "{err}");
    }

    #[test]
    fn store_defaults_and_checks() {
        let c = parse(MINIMAL).unwrap();
        assert!(c.store.path.is_none());
        assert_eq!(c.store.map_size, 1 << 30);
        assert!(c.sync.is_none());
        let c = parse(&format!(
            "{MINIMAL}\n[store]\npath = \"ctx\"\nmap_size = 2097152\nbatch_interval = \"2ms\"\nhost_id = \"edge-1\"\n[sync]\nredis = \"redis://127.0.0.1:6379\"\n[admin]\ntoken_file = \"token\"\n"
        ))
        .unwrap();
        assert_eq!(
            c.store.path.as_deref(),
            Some(Path::new("/etc/palisade/ctx"))
        );
        assert_eq!(c.store.batch_interval, Duration::from_millis(2));
        assert_eq!(c.sync.as_ref().unwrap().stream, "palisade:collections");
        assert_eq!(
            c.admin.unwrap().token_file.as_deref(),
            Some(Path::new("/etc/palisade/token"))
        );
        for (bad, why) in [
            ("[store]\nmap_size = 10", "store.map_size"),
            ("[store]\nbatch_interval = \"0s\"", "store.batch_interval"),
            ("[store]\nsweep_interval = \"10ms\"", "store.sweep_interval"),
            ("[store]\nhost_id = \"a b\"", "store.host_id"),
            ("[store]\nhost_id = \"a@b\"", "store.host_id"),
            ("[store]\npaht = \"x\"", "paht"),
            ("[sync]\nredis = \"http://x\"", "sync.redis"),
            (
                "[sync]\nredis = \"redis://x\"\nretention = 10",
                "sync.retention",
            ),
            (
                "[sync]\nredis = \"redis://x\"\nsnapshot_interval = \"1ms\"",
                "sync.snapshot_interval",
            ),
        ] {
            let err = parse(&format!("{MINIMAL}\n{bad}\n"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }

    #[test]
    fn client_address_section() {
        let c = parse(MINIMAL).unwrap();
        assert!(c.client_address.trusted_proxies.is_empty());
        assert!(c.client_address.header.is_none());
        assert!(!c.listeners[0].proxy_protocol);
        let text = format!(
            "{}\nproxy_protocol = true\n{}\n[client_address]\ntrusted_proxies = [\"10.0.0.0/8\", \"127.0.0.1\", \"::1\"]\nheader = \"X-Forwarded-For\"\n",
            &MINIMAL[..MINIMAL.find("[[upstream]]").unwrap()],
            &MINIMAL[MINIMAL.find("[[upstream]]").unwrap()..]
        );
        let c = parse(&text).unwrap();
        assert!(c.listeners[0].proxy_protocol);
        assert_eq!(c.client_address.trusted_proxies.len(), 3);
        for (bad, named) in [
            (
                "[client_address]\ntrusted_proxies = [\"10.0.0.0/40\"]",
                "client_address.trusted_proxies[0]",
            ),
            (
                "[client_address]\ntrusted_proxies = [\"lb\"]",
                "client_address.trusted_proxies[0]",
            ),
            (
                "[client_address]\ntrusted_proxies = \"10.0.0.1\"",
                "trusted_proxies",
            ),
            (
                "[client_address]\ntrusted_proxies = [\"::1\"]\nheader = \"X Real IP\"",
                "client_address.header",
            ),
            (
                "[client_address]\nheader = \"X-Forwarded-For\"",
                "client_address.trusted_proxies is empty",
            ),
            ("[client_address]\ntrusted = [\"::1\"]", "trusted"),
        ] {
            let err = parse(&format!("{MINIMAL}\n{bad}\n"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(named), "{bad}: {err}");
        }
        let err = parse(&MINIMAL.replace(
            "address = \"127.0.0.1:8080\"",
            "address = \"127.0.0.1:8080\"\nproxy_protocol = true",
        ))
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("proxy_protocol") && err.contains("client_address.trusted_proxies"),
            "{err}"
        );
        let err = parse(&MINIMAL.replace(
            "address = \"127.0.0.1:8080\"",
            "address = \"127.0.0.1:8080\"\nproxy_protocol = \"yes\"",
        ))
        .unwrap_err()
        .to_string();
        assert!(err.contains("proxy_protocol"), "{err}");
    }

    #[test]
    fn tls_and_acme_sections() {
        let tls = MINIMAL.replace(
            "address = \"127.0.0.1:8080\"",
            "address = \"127.0.0.1:8443\"\n[listener.tls]\ncertificates = [{ cert = \"a.crt\", key = \"a.key\" }]\ncertificate_dir = \"certs\"",
        );
        let c = parse(&tls).unwrap();
        let t = c.listeners[0].tls.as_ref().unwrap();
        assert_eq!(t.certificates[0].cert, Path::new("/etc/palisade/a.crt"));
        assert_eq!(
            t.certificate_dir.as_deref(),
            Some(Path::new("/etc/palisade/certs"))
        );
        assert_eq!(t.watch_interval, Duration::from_secs(10));
        assert!(t.acme && t.cert.is_none());
        let acme = "[[listener]]\naddress = \"127.0.0.1:80\"\n[[listener]]\naddress = \"127.0.0.1:443\"\ntls = { acme = true }\n[[upstream]]\nname = \"app\"\nservers = [\"127.0.0.1:9000\"]\n[acme]\ndirectory = \"https://ca.test/dir\"\nnames = [\"a.example.com\"]\nstate_dir = \"acme\"\n";
        let c = parse(acme).unwrap();
        let a = c.acme.as_ref().unwrap();
        assert_eq!(a.challenge, AcmeChallenge::Http01);
        assert_eq!(a.renew_before, Duration::from_secs(30 * 86_400));
        assert_eq!(a.state_dir, Path::new("/etc/palisade/acme"));
        let c = parse(&format!(
            "{acme}challenge = \"tls-alpn-01\"\nrenew_before = \"20d\"\n"
        ))
        .unwrap();
        assert_eq!(c.acme.unwrap().challenge, AcmeChallenge::TlsAlpn01);
        for (extra, named) in [
            ("challenge = \"dns-01\"", "dns-01"),
            ("contact = [\"ops\"]", "acme.contact[0]"),
            ("renew_before = \"0s\"", "acme.renew_before"),
            ("retry_interval = \"10ms\"", "acme.retry_interval"),
            ("colour = 1", "colour"),
        ] {
            let err = parse(&format!("{acme}{extra}\n")).unwrap_err().to_string();
            assert!(err.contains(named), "{extra}: {err}");
        }
        for (from, to, named) in [
            ("\"a.example.com\"", "\"*.example.com\"", "wildcard"),
            ("\"a.example.com\"", "\"10.0.0.1\"", "not a DNS name"),
            ("\"a.example.com\"", "\"a..b\"", "not a DNS name"),
            ("\"a.example.com\"", "\"a.b\", \"A.b\"", "listed twice"),
            ("names = [\"a.example.com\"]", "names = []", "acme.names"),
            ("https://ca.test/dir", "ftp://ca", "acme.directory"),
            (
                "address = \"127.0.0.1:80\"\n[[listener]]\n",
                "",
                "plain-HTTP",
            ),
            (
                "tls = { acme = true }",
                "tls = { acme = false }",
                "tls needs a certificate",
            ),
        ] {
            let err = parse(&acme.replacen(from, to, 1)).unwrap_err().to_string();
            assert!(err.contains(named), "{to}: {err}");
        }
        // Without [acme], a listener needs a certificate of its own.
        let err = parse(&acme[..acme.find("[acme]").unwrap()])
            .unwrap_err()
            .to_string();
        assert!(err.contains("tls needs a certificate"), "{err}");
    }

    #[test]
    fn durations() {
        assert_eq!(duration::parse("30d"), Ok(Duration::from_secs(30 * 86_400)));
        assert_eq!(duration::parse("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(duration::parse("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(duration::parse("2h"), Ok(Duration::from_secs(7200)));
        assert!(duration::parse("10").is_err());
        assert!(duration::parse("5 years").is_err());
        assert!(duration::parse("").is_err());
        let err = parse(&format!("{MINIMAL}\n[server]\ngrace_period = \"ten\"\n"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("ten"), "{err}");
    }
}
