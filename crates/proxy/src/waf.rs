//! The seam between the proxy and the rule engine: every call into `engine` is here.
//!
//! [`Waf`] is a loaded rule set with what the proxy reports about it (files, rule
//! counts, a content hash); [`WafTx`] is one request's transaction, run phase by
//! phase. Engine phases are CPU work only (no I/O), so they run inline on the
//! worker that handles the request.

use crate::config::{
    BudgetActionSetting, CpuBudgetSetting, FailurePolicy, RuleSource, ServerConfig,
};
use engine::{
    BodyAppend, BudgetAction, CollectionError, CollectionReader, CpuBudget, InterventionKind,
    RulesetBuilder, Transaction, TxContext,
};
use sha2::{Digest, Sha256};
use std::net::SocketAddr;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How many errors of one rule set load are listed ([`WafLoadError::errors`]);
/// the others are counted.
pub const MAX_LOAD_ERRORS: usize = 50;

/// A rule set could not be loaded: every error found (each
/// `file:line:column: [id N] reason`), the first [`MAX_LOAD_ERRORS`] listed and
/// the others counted. Displays as the first, with how many others there are.
#[derive(Debug, thiserror::Error)]
#[error("{}{}", errors.first().map_or("", String::as_str), more_errors(*total))]
pub struct WafLoadError {
    errors: Vec<String>,
    total: usize,
}

/// The tail of a [`WafLoadError`]'s display: how many errors follow the first.
fn more_errors(total: usize) -> String {
    match total {
        0 | 1 => String::new(),
        n => format!(
            " (and {} more error(s); `palisade check` lists them)",
            n - 1
        ),
    }
}

impl WafLoadError {
    fn one(error: String) -> Self {
        WafLoadError {
            errors: vec![error],
            total: 1,
        }
    }

    /// The errors listed, in the order found (at least one).
    pub fn errors(&self) -> &[String] {
        &self.errors
    }

    /// How many errors were found, listed or not.
    pub fn total(&self) -> usize {
        self.total
    }
}

impl From<engine::LoadErrors> for WafLoadError {
    fn from(e: engine::LoadErrors) -> Self {
        WafLoadError {
            errors: e.listed().iter().map(ToString::to_string).collect(),
            total: e.total(),
        }
    }
}

/// A compiled rule set and facts about it.
#[derive(Debug)]
pub struct Waf {
    ruleset: Arc<engine::Ruleset>,
    hash: String,
    clock: Arc<dyn engine::Clock>,
    meter: Arc<dyn engine::CpuMeter>,
    /// The configuration file's CPU budget; `None` leaves the rules' own.
    budget: Option<CpuBudget>,
    fail_closed: bool,
    empty: bool,
    /// `dns.max_lookups_per_transaction` when `@rbl` lookups have a resolver.
    rbl_limit: Option<usize>,
    /// The sites (`[[site]]`) bound to `ruleset`, and the default site last.
    sites: crate::sites::Sites,
    /// Load warnings about the sites.
    site_warnings: Vec<String>,
    /// Which transactions are timed rule by rule (`server.rule_cost_sample`).
    rule_cost_sampler: crate::rulecost::Sampler,
    /// Every transaction reads its phases' CPU clock (`server.waf_cpu_measure`),
    /// not only the sampled ones.
    cpu_always: bool,
    /// The `[shadow]` rule set that runs beside these rules, if any.
    shadow: Option<Arc<crate::shadow::ShadowSet>>,
}

/// The engine's CPU meter: the calling thread's own CPU clock, so that time spent
/// waiting for a core is not charged to a transaction (each phase runs on one
/// thread from start to end).
#[derive(Debug)]
struct ThreadCpuMeter;

impl engine::CpuMeter for ThreadCpuMeter {
    fn now_micros(&self) -> u64 {
        u64::try_from(crate::inspect::thread_cpu_time().as_micros()).unwrap_or(u64::MAX)
    }
}

/// The CPU budget `server` sets, if any.
fn cpu_budget(server: &ServerConfig) -> Option<CpuBudget> {
    let CpuBudgetSetting::Limit(limit) = server.waf_cpu_budget else {
        return None;
    };
    Some(CpuBudget {
        limit_micros: u64::try_from(limit.as_micros()).unwrap_or(u64::MAX),
        action: match server.waf_cpu_budget_action {
            BudgetActionSetting::Block => BudgetAction::Block {
                status: server.waf_cpu_budget_status,
            },
            BudgetActionSetting::Pass => BudgetAction::Pass,
        },
    })
}

#[derive(Debug)]
struct SystemClock;

impl engine::Clock for SystemClock {
    fn now_unix_micros(&self) -> i64 {
        crate::logs::now_unix_micros()
    }
}

impl Waf {
    /// Loads the rule sources in order. `config_path` names inline sources (as
    /// `CONFIG#rulesN`) and anchors their relative `Include`s. From `server`: the
    /// failure policy (`engine_failure = "closed"`: a request whose transaction
    /// fails inside the engine is answered 500; otherwise it continues
    /// uninspected) and the CPU budget. `rbl_limit` is the lookup limit per
    /// transaction when a DNS resolver answers `@rbl` (`None`: none does, and each
    /// `@rbl` rule gets a load warning).
    pub fn load(
        sources: &[RuleSource],
        config_path: &Path,
        server: &ServerConfig,
        rbl_limit: Option<usize>,
    ) -> Result<Waf, WafLoadError> {
        Self::load_reaching(sources, config_path, server, rbl_limit, &[])
    }

    /// [`Waf::load`] for rules that sites will run at the paranoia `levels`
    /// (blocking, detection): the shared prefilter covers the rules CRS runs at
    /// those levels too ([`RulesetBuilder::reach_paranoia_levels`]).
    pub fn load_reaching(
        sources: &[RuleSource],
        config_path: &Path,
        server: &ServerConfig,
        rbl_limit: Option<usize>,
        levels: &[(u8, u8)],
    ) -> Result<Waf, WafLoadError> {
        Self::load_labelled(sources, config_path, "rules", server, rbl_limit, levels)
    }

    /// [`Waf::load_reaching`] with inline sources named `CONFIG#{label}N`.
    fn load_labelled(
        sources: &[RuleSource],
        config_path: &Path,
        label: &str,
        server: &ServerConfig,
        rbl_limit: Option<usize>,
        levels: &[(u8, u8)],
    ) -> Result<Waf, WafLoadError> {
        let fail_closed = server.engine_failure == FailurePolicy::Closed;
        let mut b = RulesetBuilder::new(Arc::new(seclang::FsSource));
        b.rbl_resolver(rbl_limit.is_some());
        b.reach_paranoia_levels(levels);
        // Every error is found in one load (`palisade check` lists them).
        b.keep_going(MAX_LOAD_ERRORS);
        let mut inline_texts: Vec<&str> = Vec::new();
        for (i, src) in sources.iter().enumerate() {
            if let Some(file) = &src.file {
                b.add_file(file)
                    .map_err(|e| WafLoadError::one(e.to_string()))?;
            } else if let Some(text) = &src.inline {
                let name = format!("{}#{label}{}", config_path.display(), i + 1);
                b.add_text(text, &name)
                    .map_err(|e| WafLoadError::one(e.to_string()))?;
                inline_texts.push(text);
            }
        }
        let ruleset = b.finish()?;
        let hash = content_hash(ruleset.files(), &inline_texts);
        let empty = cannot_act(&ruleset, None);
        let waf = Waf {
            ruleset: Arc::new(ruleset),
            hash,
            clock: Arc::new(SystemClock),
            meter: Arc::new(ThreadCpuMeter),
            budget: cpu_budget(server),
            fail_closed,
            empty,
            rbl_limit,
            sites: crate::sites::Sites::none(empty),
            site_warnings: Vec::new(),
            rule_cost_sampler: crate::rulecost::Sampler::new(server.rule_cost_sample),
            cpu_always: server.waf_cpu_measure == crate::config::WafCpuMeasure::Always,
            shadow: None,
        };
        waf.check_audit_settings().map_err(WafLoadError::one)?;
        Ok(waf)
    }

    /// Which transactions are timed rule by rule (`server.rule_cost_sample`).
    pub fn rule_cost_sampler(&self) -> crate::rulecost::Sampler {
        self.rule_cost_sampler
    }

    /// Compiles the `[[site]]`s over these rules (each site's own rules once, into
    /// a small overlay; the rules themselves are shared, not copied). Errors name
    /// the site and, for its rules, the file and line.
    pub fn with_sites(
        mut self,
        sections: &[crate::config::SiteSection],
        config_path: &Path,
        global_request_body_bytes: usize,
    ) -> Result<Waf, WafLoadError> {
        if sections.is_empty() {
            return Ok(self);
        }
        self.sites = crate::sites::Sites::compile(&self.ruleset, sections, config_path, |p| {
            cannot_act(p.base(), Some(p))
        })
        .map_err(WafLoadError::one)?;
        // The site sources count in the rules' hash: a change of a site's rules is
        // a change of the rules in force.
        let mut h = Sha256::new();
        h.update(self.hash.as_bytes());
        for s in sections {
            h.update(s.name.as_bytes());
            h.update([0]);
            let files: Vec<PathBuf> = s
                .rules
                .iter()
                .filter_map(|r| r.file.clone())
                .flat_map(|f| glob_or_file(&f))
                .collect();
            let inline: Vec<&str> = s.rules.iter().filter_map(|r| r.inline.as_deref()).collect();
            h.update(content_hash(&files, &inline).as_bytes());
        }
        self.hash = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
        let engine_rejects = self.ruleset.config().request_body_access
            && self.ruleset.config().request_body_limit_action
                == engine::config::BodyLimitAction::Reject;
        for site in self.sites.iter() {
            let Some(p) = site.policy() else { continue };
            for w in p.warnings() {
                self.site_warnings
                    .push(format!("site {:?}: {w}", site.name().as_ref()));
            }
            let proxy = site.request_body_bytes(global_request_body_bytes);
            let engine = p.request_body_limit();
            if site.own_request_body_bytes() && engine_rejects && proxy > engine {
                self.site_warnings.push(format!(
                    "site {:?}: limits.request_body_bytes ({proxy}) is above the rules' request body limit ({engine}, SecRequestBodyLimit or the site's limits.request_body_limit): bodies between the two are refused with 413 by SecRequestBodyLimitAction Reject",
                    site.name().as_ref()
                ));
            }
        }
        Ok(self)
    }

    /// Builds the `[shadow]` rule set beside these rules, loaded from `primary`
    /// (`section` absent: none). Its own `rules` are loaded as a rule set of their
    /// own; without them it shares these rules' compiled base, unless it runs them
    /// at a paranoia level above 1: `primary` is then compiled again, its
    /// prefilter reaching that level. Either way its overlay, paranoia level and
    /// engine mode `On` (it reports what it would do; the proxy never acts on it)
    /// make one policy. Errors begin with `[shadow]`.
    pub fn with_shadow(
        mut self,
        section: Option<&crate::config::ShadowSection>,
        primary: &[RuleSource],
        config_path: &Path,
        server: &ServerConfig,
    ) -> Result<Waf, WafLoadError> {
        let Some(s) = section else {
            return Ok(self);
        };
        let shadow = self
            .shadow_rules(s, primary, config_path, server)
            .map_err(|e| {
                let errors = e.errors.iter().map(|m| format!("[shadow] {m}")).collect();
                WafLoadError {
                    errors,
                    total: e.total,
                }
            })?;
        self.shadow = Some(Arc::new(crate::shadow::ShadowSet::new(shadow, s)));
        Ok(self)
    }

    /// The shadow's rules as a [`Waf`] of one site whose policy is the shadow's.
    fn shadow_rules(
        &self,
        s: &crate::config::ShadowSection,
        primary: &[RuleSource],
        config_path: &Path,
        server: &ServerConfig,
    ) -> Result<Waf, WafLoadError> {
        let levels: Vec<(u8, u8)> = s.reach().into_iter().collect();
        let own = if !s.rules.is_empty() {
            Some(Self::load_labelled(
                &s.rules,
                config_path,
                "shadow.rules",
                server,
                None,
                &levels,
            )?)
        } else if !levels.is_empty() {
            // The rules' shared prefilter covers their own paranoia level only: at a
            // higher one the shadow would pay for every pattern the prefilter does
            // not cover. Compiled again, reaching the shadow's level, it costs what
            // CRS at that level costs, and the blocking rules keep their automata.
            Some(Self::load_labelled(
                primary,
                config_path,
                "rules",
                server,
                None,
                &levels,
            )?)
        } else {
            None
        };
        let (ruleset, base_hash) = match &own {
            Some(w) => (w.ruleset.clone(), w.hash.clone()),
            None => (self.ruleset.clone(), self.hash.clone()),
        };
        let err = |e: engine::PolicyError| WafLoadError::one(e.to_string());
        let mut b = engine::PolicyBuilder::new(&ruleset, "shadow", Arc::new(seclang::FsSource));
        for (i, src) in s.overlay.iter().enumerate() {
            if let Some(file) = &src.file {
                b.add_file(file).map_err(err)?;
            } else if let Some(text) = &src.inline {
                let label = format!("{}#shadow.overlay{}", config_path.display(), i + 1);
                b.add_text(text, &label).map_err(err)?;
            }
        }
        b.rule_engine(engine::RuleEngineMode::On);
        if let Some(l) = s.paranoia_level {
            b.paranoia_level(l, s.detection_paranoia_level)
                .map_err(err)?;
        }
        let policy = b.build().map_err(err)?;
        let mut h = Sha256::new();
        h.update(base_hash.as_bytes());
        let files: Vec<PathBuf> = s
            .overlay
            .iter()
            .filter_map(|r| r.file.clone())
            .flat_map(|f| glob_or_file(&f))
            .collect();
        let inline: Vec<&str> = s
            .overlay
            .iter()
            .filter_map(|r| r.inline.as_deref())
            .collect();
        h.update(content_hash(&files, &inline).as_bytes());
        h.update(format!("{:?}", (s.paranoia_level, s.detection_paranoia_level)).as_bytes());
        // The warnings of rules of its own (those of the [[rules]] compiled again
        // are the blocking rules' own, reported with them).
        let mut warnings: Vec<String> = own
            .as_ref()
            .filter(|_| !s.rules.is_empty())
            .map(|w| w.warnings().to_vec())
            .unwrap_or_default();
        warnings.extend(policy.warnings().iter().cloned());
        let empty = cannot_act(&ruleset, Some(&policy));
        Ok(Waf {
            ruleset,
            hash: h.finalize().iter().map(|b| format!("{b:02x}")).collect(),
            clock: self.clock.clone(),
            meter: self.meter.clone(),
            budget: self.budget,
            fail_closed: false,
            empty,
            rbl_limit: None,
            sites: crate::sites::Sites::single(Arc::new(policy), empty),
            site_warnings: warnings,
            // The shadow's rules are not in the per-rule cost account.
            rule_cost_sampler: crate::rulecost::Sampler::new(0.0),
            cpu_always: false,
            shadow: None,
        })
    }

    /// The `[shadow]` rule set in force with these rules, if any.
    pub fn shadow(&self) -> Option<&Arc<crate::shadow::ShadowSet>> {
        self.shadow.as_ref()
    }

    /// The sites (the default site last; alone without `[[site]]`).
    pub fn sites(&self) -> &crate::sites::Sites {
        &self.sites
    }

    /// The sites for `/status`: each one's name, engine mode, paranoia level, own
    /// rules, and whether it uses the rules' load-time folds (empty without
    /// `[[site]]`).
    pub fn site_status(&self) -> Vec<serde_json::Value> {
        if !self.sites.configured() {
            return Vec::new();
        }
        self.sites
            .iter()
            .filter_map(|s| {
                let p = s.policy()?;
                let level = p
                    .seeds()
                    .next()
                    .and_then(|(_, v)| std::str::from_utf8(v).ok()?.parse::<u8>().ok());
                Some(serde_json::json!({
                    "name": s.name().as_ref(),
                    "engine_mode": format!("{:?}", p.rule_engine()),
                    "paranoia_level": level,
                    "rules": p.rule_count(),
                    "keeps_folds": p.keeps_folds(),
                }))
            })
            .collect()
    }

    /// Warnings about the sites: their rules' load warnings, and limits that do
    /// not fit together.
    pub fn site_warnings(&self) -> &[String] {
        &self.site_warnings
    }

    /// True when the rules have `@rbl` rules, answered or not.
    pub fn has_rbl_rules(&self) -> bool {
        let u = self.ruleset.rbl_use();
        u.other_inputs
            || !u.client_zones.is_empty()
            || self
                .sites
                .iter()
                .filter_map(crate::sites::Site::policy)
                .any(|p| p.has_rbl_rules())
    }

    /// True when the rules have `@rbl` rules and a resolver answers them: each
    /// transaction then gets a [`crate::dns::TxResolver`].
    pub fn uses_rbl(&self) -> bool {
        self.rbl_limit.is_some() && self.has_rbl_rules()
    }

    /// Per phase (index 0 for phase 1): true when that phase holds an `@rbl` rule
    /// that looks up a value other than the client's address, so the phase runs
    /// where a lookup may be waited for. The other phases run as they would
    /// without such rules (a handoff to the pool costs two thread switches).
    pub fn rbl_waits(&self, site: usize) -> [bool; 5] {
        if self.rbl_limit.is_none() {
            return [false; 5];
        }
        match self.sites.get(site).policy() {
            Some(p) => p.rbl_other_input_phases(),
            None => self.ruleset.rbl_use().other_input_phases(),
        }
    }

    /// The block-list names the `@rbl` rules on the client's address will ask
    /// for, to resolve before phase 1.
    pub fn rbl_client_names(&self, site: usize, client: std::net::IpAddr) -> Vec<String> {
        if self.rbl_limit.is_none() {
            return Vec::new();
        }
        match self.sites.get(site).policy() {
            Some(p) => p.rbl_client_names(client),
            None => self.ruleset.rbl_client_names(client),
        }
    }

    /// True when the rule set cannot act on any request: it has no rules, and none
    /// of its settings does anything by itself (a body limit that refuses, an audit
    /// log that records transactions without a match). The proxy then makes no
    /// transaction at all: no phase runs, nothing is timed or logged by the engine.
    pub fn is_empty(&self) -> bool {
        self.empty
    }

    /// [`Waf::is_empty`] for the requests of one site (its own rules and engine
    /// mode count).
    pub fn is_empty_for(&self, site: usize) -> bool {
        self.sites.get(site).empty
    }

    /// The variables rule `id` (its first link) reads, as written
    /// (`REQUEST_HEADERS:Content-Type`, `ARGS`); empty for an unknown id. For
    /// `palisade tune`, which names the variable a chained rule's finding was on.
    pub fn rule_targets(&self, id: i64) -> Vec<String> {
        self.ruleset
            .rule_by_id(id)
            .map(|r| r.targets.iter().map(|t| t.written.clone()).collect())
            .unwrap_or_default()
    }

    /// Number of rules (a chain counts once).
    pub fn rule_count(&self) -> usize {
        self.ruleset.rule_count()
    }

    /// Rules in each phase; index 0 is phase 1.
    pub fn rules_per_phase(&self) -> [usize; 5] {
        self.ruleset.rules_per_phase()
    }

    /// The rule files loaded, in order.
    pub fn files(&self) -> &[PathBuf] {
        self.ruleset.files()
    }

    /// Directives the engine accepted but ignores.
    pub fn warnings(&self) -> &[String] {
        self.ruleset.warnings()
    }

    /// SHA-256 (hex) of the loaded rule files' contents and inline rule text, in
    /// load order.
    pub fn hash(&self) -> &str {
        &self.hash
    }

    /// The names of the sites whose engine mode is DetectionOnly (their own
    /// `SecRuleEngine`, or the rules' for the default site without `[[site]]`).
    pub fn detection_only_sites(&self) -> Vec<Arc<str>> {
        use engine::config::RuleEngineMode;
        let base = self.ruleset.config().rule_engine;
        self.sites
            .iter()
            .filter(|s| {
                s.policy().map_or(base, |p| p.rule_engine()) == RuleEngineMode::DetectionOnly
            })
            .map(|s| s.name().clone())
            .collect()
    }

    /// `SecRuleEngine` as text (`On`, `Off`, `DetectionOnly`).
    pub fn engine_mode(&self) -> String {
        format!("{:?}", self.ruleset.config().rule_engine)
    }

    /// `SecDebugLog`, when the rules name a debug log and `SecDebugLogLevel` is
    /// above 0.
    pub fn debug_log_path(&self) -> Option<PathBuf> {
        let cfg = self.ruleset.config();
        cfg.debug_log
            .as_ref()
            .filter(|_| cfg.debug_log_level > 0)
            .map(PathBuf::from)
    }

    /// Checks the audit log settings the rules give: `SecAuditLogType Concurrent`
    /// needs `SecAuditLogStorageDir`; `HTTPS` (sending records to a server) is not
    /// supported.
    fn check_audit_settings(&self) -> Result<(), String> {
        let audit = &self.ruleset.config().audit;
        if audit.engine == engine::config::AuditEngineMode::Off {
            return Ok(());
        }
        if audit.log_type.eq_ignore_ascii_case("https") {
            return Err("SecAuditLogType HTTPS is not supported: use Serial or Concurrent".into());
        }
        if audit.log_type.eq_ignore_ascii_case("concurrent") && audit.storage_dir.is_none() {
            return Err(
                "SecAuditLogType Concurrent needs SecAuditLogStorageDir (where each record's file goes)"
                    .into(),
            );
        }
        Ok(())
    }

    /// True when audit records go to files of their own (`SecAuditLogType
    /// Concurrent`), so the audit log is written even without a `SecAuditLog` file.
    pub fn audit_concurrent(&self) -> bool {
        let audit = &self.ruleset.config().audit;
        audit.engine != engine::config::AuditEngineMode::Off
            && audit.log_type.eq_ignore_ascii_case("concurrent")
    }

    /// `SecAuditLog`, if the rules name an audit log file.
    pub fn audit_log_path(&self) -> Option<PathBuf> {
        self.ruleset
            .config()
            .audit
            .log_path
            .as_ref()
            .map(PathBuf::from)
    }

    /// Starts a transaction of the default site (see [`Waf::site_transaction`]).
    #[allow(clippy::too_many_arguments)]
    pub fn transaction(
        &self,
        client: SocketAddr,
        peer: Option<SocketAddr>,
        server: SocketAddr,
        unique_id: String,
        now_unix_micros: i64,
        store: Option<Arc<dyn CollectionReader>>,
        rbl: Option<Arc<dyn engine::RblResolver>>,
    ) -> WafTx {
        self.site_transaction(
            self.sites.default_index(),
            client,
            peer,
            server,
            unique_id,
            now_unix_micros,
            store,
            rbl,
        )
    }

    /// Starts a transaction of site `site` ([`crate::sites::Sites::select`]) for a
    /// request from `client` that arrived on `server` from the TCP peer `peer`
    /// (`None`: the client is the peer). `store` reads persistent collections (the
    /// proxy's store, which outlives rule reloads); `None` leaves them empty at the
    /// start of every transaction. `rbl` answers `@rbl` lookups (`None`: they never
    /// match).
    #[allow(clippy::too_many_arguments)]
    pub fn site_transaction(
        &self,
        site: usize,
        client: SocketAddr,
        peer: Option<SocketAddr>,
        server: SocketAddr,
        unique_id: String,
        now_unix_micros: i64,
        store: Option<Arc<dyn CollectionReader>>,
        rbl: Option<Arc<dyn engine::RblResolver>>,
    ) -> WafTx {
        let ctx = TxContext {
            client_ip: client.ip().to_canonical(),
            client_port: client.port(),
            peer: peer.map(|p| SocketAddr::new(p.ip().to_canonical(), p.port())),
            server_ip: server.ip().to_canonical(),
            server_port: server.port(),
            unique_id,
            now_unix_micros,
            store,
            clock: Some(self.clock.clone()),
            rbl,
        };
        let policy = self.sites.get(site).policy();
        match catch_unwind(AssertUnwindSafe(|| {
            let mut tx = Box::new(match policy {
                Some(p) => Transaction::with_policy(p.clone(), ctx),
                None => Transaction::new(self.ruleset.clone(), ctx),
            });
            if let Some(limit) = self.rbl_limit {
                tx.set_rbl_lookup_limit(limit);
            }
            tx.set_cpu_meter(self.meter.clone());
            if let Some(b) = self.budget {
                tx.set_cpu_budget(Some(b));
            }
            let sampled = self.rule_cost_sampler.next();
            if sampled {
                tx.time_rules();
            }
            (tx, sampled)
        })) {
            Ok((tx, sampled)) => WafTx {
                tx: Some(tx),
                sampled,
                cpu_always: self.cpu_always,
                failure: None,
                fail_closed: self.fail_closed,
                events: std::collections::VecDeque::new(),
                store_failed: false,
            },
            Err(p) => WafTx {
                tx: None,
                sampled: false,
                cpu_always: false,
                failure: Some(panic_text(&*p)),
                fail_closed: self.fail_closed,
                events: std::collections::VecDeque::new(),
                store_failed: false,
            },
        }
    }
}

/// The files a rule source names: those a glob matches, or the file itself.
pub(crate) fn glob_or_file(path: &Path) -> Vec<PathBuf> {
    use seclang::FileSource as _;
    let is_glob = path.to_str().is_some_and(|s| s.contains(['*', '?', '[']));
    if is_glob {
        seclang::FsSource.glob(path).unwrap_or_default()
    } else {
        vec![path.to_path_buf()]
    }
}

/// What [`Waf::is_empty`] says: no rules, and no setting that acts without one;
/// for a site, with its own rules and engine mode.
fn cannot_act(ruleset: &engine::Ruleset, policy: Option<&engine::Policy>) -> bool {
    use engine::config::{AuditEngineMode, BodyLimitAction, RuleEngineMode};
    let cfg = ruleset.config();
    let mode = policy.map_or(cfg.rule_engine, engine::Policy::rule_engine);
    let own_rules = policy.map_or(0, engine::Policy::rule_count);
    let engine_on = mode != RuleEngineMode::Off;
    // Over SecRequestBodyLimit / SecResponseBodyLimit with the Reject action, the
    // engine refuses the transaction (413 / 500) whether or not a rule runs.
    let request_limit = engine_on
        && cfg.request_body_access
        && cfg.request_body_limit_action == BodyLimitAction::Reject;
    let response_limit = engine_on
        && cfg.response_body_access
        && cfg.response_body_limit_action == BodyLimitAction::Reject;
    // SecAuditEngine On records every transaction; RelevantOnly with a
    // SecAuditLogRelevantStatus records by status alone.
    let audit = match cfg.audit.engine {
        AuditEngineMode::Off => false,
        AuditEngineMode::On => true,
        AuditEngineMode::RelevantOnly => cfg.audit.relevant_status.is_some(),
    };
    ruleset.rule_count() + own_rules == 0 && !request_limit && !response_limit && !audit
}

fn content_hash(files: &[PathBuf], inline: &[&str]) -> String {
    let mut h = Sha256::new();
    for f in files {
        h.update(f.as_os_str().as_encoded_bytes());
        h.update([0]);
        match std::fs::read(f) {
            Ok(bytes) => h.update(&bytes),
            Err(e) => h.update(e.to_string().as_bytes()),
        }
        h.update([0]);
    }
    for t in inline {
        h.update(t.as_bytes());
        h.update([0]);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// What a rule decided to do with a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Status to answer with.
    pub status: u16,
    /// How to answer.
    pub kind: VerdictKind,
    /// The deciding rule.
    pub rule_id: Option<i64>,
}

/// How to carry out a verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerdictKind {
    /// Answer `status` with a short body.
    Deny,
    /// Close the connection without answering.
    Drop,
    /// Redirect to this location.
    Redirect(String),
}

/// The outcome of giving the engine a body chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFeed {
    /// Keep going.
    Ok,
    /// The engine's limit was reached; inspect what it has and let the rest pass.
    LimitPartial,
    /// The engine's limit was reached and the transaction must be refused.
    LimitReject,
}

fn verdict(i: Option<engine::Intervention>) -> Option<Verdict> {
    i.map(|i| Verdict {
        status: i.status,
        kind: match i.kind {
            InterventionKind::Deny => VerdictKind::Deny,
            InterventionKind::Drop => VerdictKind::Drop,
            InterventionKind::Redirect(to) => VerdictKind::Redirect(to),
        },
        rule_id: i.rule_id,
    })
}

fn feed(r: BodyAppend) -> BodyFeed {
    match r {
        BodyAppend::Ok => BodyFeed::Ok,
        BodyAppend::LimitReached { reject: true } => BodyFeed::LimitReject,
        BodyAppend::LimitReached { reject: false } => BodyFeed::LimitPartial,
    }
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "engine panicked".to_owned()
    }
}

/// One request's transaction. A panic inside the engine is caught: the transaction
/// stops (no further engine calls), the failure is kept for the logs, and the
/// request is refused with 500 (fail closed) or continues uninspected (fail open).
///
/// A persistent collection that could not be read (the store failed, or a rule
/// named a collection or key that cannot be) is handled the same way after the
/// phase that opened it: refused with 500 when failing closed, else let through;
/// either way the error is kept for the logs and metrics
/// ([`engine::Event::CollectionReadFailed`] from [`WafTx::poll_event`]), never
/// taken for an empty record.
#[derive(Debug)]
pub struct WafTx {
    /// Boxed: the engine's transaction is nearly 3 KiB, and a `WafTx` moves into
    /// the exchange's record and in and out of every phase's evaluation.
    tx: Option<Box<Transaction>>,
    /// Sampled for rule costs (`server.rule_cost_sample`): its rules are timed,
    /// and its phases' CPU is split into user and kernel time.
    sampled: bool,
    /// Its phases' CPU clock is read (`server.waf_cpu_measure = "always"`).
    cpu_always: bool,
    failure: Option<String>,
    fail_closed: bool,
    /// The engine's events not yet taken by the caller ([`WafTx::poll_event`]).
    events: std::collections::VecDeque<engine::Event>,
    /// A read of the store failed in this transaction: its collection writes were
    /// computed from records it could not see.
    store_failed: bool,
}

impl WafTx {
    /// Whether this transaction is sampled for rule costs: the caller then splits
    /// its phases' CPU time into user and kernel time.
    pub fn sampled(&self) -> bool {
        self.sampled
    }

    /// Whether every phase's CPU clock is read (`server.waf_cpu_measure`).
    pub fn cpu_always(&self) -> bool {
        self.cpu_always
    }

    fn guard<T>(&mut self, default: T, f: impl FnOnce(&mut Transaction) -> T) -> T {
        let Some(tx) = self.tx.as_mut() else {
            return default;
        };
        match catch_unwind(AssertUnwindSafe(|| f(tx))) {
            Ok(v) => v,
            Err(p) => {
                self.failure = Some(panic_text(&*p));
                self.tx = None;
                default
            }
        }
    }

    fn phase(
        &mut self,
        f: impl FnOnce(&mut Transaction) -> Option<engine::Intervention>,
    ) -> Option<Verdict> {
        let v = self.guard(None, f);
        let failed = Some(Verdict {
            status: 500,
            kind: VerdictKind::Deny,
            rule_id: None,
        });
        if self.tx.is_none() && self.fail_closed {
            return failed;
        }
        if self.gather() && self.fail_closed && v.is_none() {
            return failed;
        }
        verdict(v)
    }

    /// Moves the engine's queued events into this transaction's queue. Returns
    /// whether a persistent collection could not be read among them.
    fn gather(&mut self) -> bool {
        let Some(tx) = self.tx.as_mut() else {
            return false;
        };
        let mut read_failed = false;
        while let Some(e) = tx.poll_event() {
            if let engine::Event::CollectionReadFailed(c) = &e {
                read_failed = true;
                self.store_failed |= matches!(
                    c,
                    CollectionError::Read { .. } | CollectionError::Corrupt(_)
                );
            }
            self.events.push_back(e);
        }
        read_failed
    }

    /// The next event of the transaction (rule matches, interventions, failed
    /// reads and lookups, limits, debug lines, collection writes), oldest first,
    /// taking it.
    pub fn poll_event(&mut self) -> Option<engine::Event> {
        if self.events.is_empty() {
            self.gather();
        }
        self.events.pop_front()
    }

    /// For a transaction cut short before phase 5: queues its collection writes
    /// ([`WafTx::poll_event`]).
    pub fn close(&mut self) {
        self.guard((), Transaction::close);
    }

    /// True when a read of the store failed in this transaction.
    pub fn store_failed(&self) -> bool {
        self.store_failed
    }

    /// The engine failure of this transaction, if it had one.
    pub fn failure(&self) -> Option<&str> {
        self.failure.as_deref()
    }

    /// Gives the request line as sent.
    pub fn request_line(&mut self, method: &[u8], uri: &[u8], protocol: &[u8]) {
        self.guard((), |tx| tx.set_request_line(method, uri, protocol));
    }

    /// Gives one request header line as sent.
    pub fn request_header(&mut self, name: &[u8], value: &[u8]) {
        self.guard((), |tx| tx.add_request_header(name, value));
    }

    /// Phase 1.
    pub fn request_headers_done(&mut self) -> Option<Verdict> {
        self.phase(Transaction::process_request_headers)
    }

    /// True when the engine wants the request body.
    pub fn wants_request_body(&self) -> bool {
        self.tx
            .as_deref()
            .is_some_and(Transaction::request_body_wanted)
    }

    /// The transaction's request body limit (`SecRequestBodyLimit`, or what a
    /// `ctl:requestBodyLimit` set): how many bytes the engine takes.
    pub fn request_body_limit(&self) -> usize {
        self.tx
            .as_deref()
            .map_or(usize::MAX, Transaction::request_body_limit)
    }

    /// Gives a piece of the request body.
    pub fn request_body(&mut self, chunk: &[u8]) -> BodyFeed {
        feed(self.guard(BodyAppend::Ok, |tx| tx.append_request_body(chunk)))
    }

    /// Phase 2.
    pub fn request_body_done(&mut self) -> Option<Verdict> {
        self.phase(Transaction::process_request_body)
    }

    /// Sets REMOTE_USER ([`Transaction::set_remote_user`]).
    pub fn set_remote_user(&mut self, user: &[u8]) {
        self.guard((), |tx| tx.set_remote_user(user));
    }

    /// The work after which the phases run next pause ([`Transaction::set_slice`]).
    pub fn set_slice(&mut self, work: Option<u64>) {
        self.guard((), |tx| tx.set_slice(work));
    }

    /// Whether the phases run next pause before a rule that may wait for a DNS
    /// lookup ([`Transaction::set_pause_for_lookups`]).
    pub fn set_pause_for_lookups(&mut self, pause: bool) {
        self.guard((), |tx| tx.set_pause_for_lookups(pause));
    }

    /// True when the last phase paused before a rule that may wait for a DNS lookup.
    pub fn paused(&self) -> bool {
        self.tx.as_deref().is_some_and(Transaction::paused)
    }

    /// Finishes the paused phase ([`Transaction::resume_phase`]).
    pub fn resume_phase(&mut self) -> Option<Verdict> {
        self.phase(Transaction::resume_phase)
    }

    /// Gives the response status line.
    pub fn response_status(&mut self, status: u16, protocol: &[u8]) {
        self.guard((), |tx| tx.set_response_status(status, protocol));
    }

    /// Gives one response header.
    pub fn response_header(&mut self, name: &[u8], value: &[u8]) {
        self.guard((), |tx| tx.add_response_header(name, value));
    }

    /// Phase 3.
    pub fn response_headers_done(&mut self) -> Option<Verdict> {
        self.phase(Transaction::process_response_headers)
    }

    /// True when the engine wants the response body (access on, type inspected).
    pub fn wants_response_body(&self) -> bool {
        self.tx
            .as_deref()
            .is_some_and(Transaction::response_body_wanted)
    }

    /// Gives a piece of the response body.
    pub fn response_body(&mut self, chunk: &[u8]) -> BodyFeed {
        feed(self.guard(BodyAppend::Ok, |tx| tx.append_response_body(chunk)))
    }

    /// `SecResponseBodyLimit`, and whether going over it refuses the response
    /// (`SecResponseBodyLimitAction Reject`); `None` once the transaction has failed.
    pub fn response_body_limit(&self) -> Option<(usize, bool)> {
        self.tx.as_ref().map(|t| {
            let c = t.ruleset().config();
            (
                c.response_body_limit,
                c.response_body_limit_action == engine::config::BodyLimitAction::Reject,
            )
        })
    }

    /// Phase 4.
    pub fn response_body_done(&mut self) -> Option<Verdict> {
        self.phase(Transaction::process_response_body)
    }

    /// Phase 5. Collection errors of this phase are kept like those of the others
    /// (nothing is left to refuse).
    pub fn logging(&mut self) {
        let _ = self.phase(|tx| {
            tx.process_logging();
            None
        });
    }

    /// A TX variable's value (rate limit keys chosen by the rules).
    pub fn tx_var(&mut self, name: &str) -> Option<Vec<u8>> {
        self.guard(None, |tx| tx.tx_var(name).map(<[u8]>::to_vec))
    }

    /// The audit record, when the audit engine selects this transaction.
    pub fn audit_record(&mut self) -> Option<engine::log::AuditRecord> {
        self.guard(None, |tx| tx.audit_record())
    }

    /// Inbound and outbound anomaly scores, as the engine sums them up.
    pub fn anomaly_scores(&mut self) -> (i64, i64) {
        self.guard((0, 0), |tx| tx.anomaly_scores())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inline(text: &str) -> Vec<RuleSource> {
        vec![RuleSource {
            file: None,
            inline: Some(text.to_owned()),
        }]
    }

    #[test]
    fn loads_inline_rules_and_blocks() {
        let waf = Waf::load(
            &inline(
                "SecRuleEngine On\nSecRequestBodyAccess On\nSecRule ARGS \"@rx (?i)' or '\" \"id:1,phase:2,deny,status:403,log,msg:'sqli'\"",
            ),
            Path::new("/etc/palisade/palisade.toml"),
            &ServerConfig::default(),
            None,
        )
        .unwrap();
        assert_eq!(waf.rule_count(), 1);
        assert_eq!(waf.rules_per_phase(), [0, 1, 0, 0, 0]);
        assert_eq!(waf.hash().len(), 64);
        let mut tx = waf.transaction(
            "10.0.0.1:5555".parse().unwrap(),
            None,
            "127.0.0.1:80".parse().unwrap(),
            "abc".into(),
            0,
            None,
            None,
        );
        tx.request_line(b"POST", b"/login", b"HTTP/1.1");
        tx.request_header(b"Host", b"x");
        tx.request_header(b"Content-Type", b"application/x-www-form-urlencoded");
        assert_eq!(tx.request_headers_done(), None);
        assert!(tx.wants_request_body());
        assert_eq!(tx.request_body(b"user=a' or '1'='1"), BodyFeed::Ok);
        let v = tx.request_body_done().expect("blocked");
        assert_eq!(v.status, 403);
        assert_eq!(v.kind, VerdictKind::Deny);
        assert_eq!(v.rule_id, Some(1));
        tx.logging();
        let events: Vec<_> = std::iter::from_fn(|| tx.poll_event()).collect();
        let ids: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                engine::Event::RuleMatched(m) => m.rule_id,
                _ => None,
            })
            .collect();
        assert_eq!(ids, vec![1]);
        let lines: Vec<_> = events
            .into_iter()
            .filter_map(engine::Event::into_log_line)
            .collect();
        assert!(lines.iter().any(|l| l.contains("[id \"1\"]")), "{lines:?}");
    }

    #[test]
    fn empty_means_nothing_could_act() {
        let waf = |text: &str| {
            Waf::load(
                &inline(text),
                Path::new("/etc/palisade/palisade.toml"),
                &ServerConfig::default(),
                None,
            )
            .unwrap()
        };
        assert!(
            Waf::load(&[], Path::new("/p.toml"), &ServerConfig::default(), None)
                .unwrap()
                .is_empty()
        );
        assert!(waf("SecRuleEngine On\nSecRequestBodyAccess Off").is_empty());
        // A rule, in any phase, can act.
        assert!(!waf("SecRule ARGS \"@rx a\" \"id:1,phase:5,pass,log\"").is_empty());
        // Body limits that refuse act without rules, unless the engine is off.
        assert!(!waf("SecRequestBodyAccess On").is_empty());
        assert!(
            waf("SecRequestBodyAccess On\nSecRequestBodyLimitAction ProcessPartial").is_empty()
        );
        assert!(!waf("SecResponseBodyAccess On").is_empty());
        assert!(
            waf("SecRuleEngine Off\nSecRequestBodyAccess On\nSecResponseBodyAccess On").is_empty()
        );
        // An audit log that records every transaction, or by status.
        assert!(!waf("SecAuditEngine On").is_empty());
        assert!(waf("SecAuditEngine RelevantOnly").is_empty());
        assert!(!waf("SecAuditEngine RelevantOnly\nSecAuditLogRelevantStatus \"^5\"").is_empty());
    }

    /// A request whose evaluation goes over the configuration file's CPU budget is
    /// refused with the configured status, or let through and reported.
    #[test]
    fn cpu_budget_from_the_configuration() {
        let rules = inline(
            "SecRuleEngine On\nSecRequestBodyAccess On\n\
             SecRule ARGS \"@rx (?:a|b)+c[0-9]{2,}\" \"id:1,phase:2,t:lowercase,t:urlDecodeUni,pass\"\n\
             SecRule ARGS \"@rx x{3}y\" \"id:2,phase:2,t:removeWhitespace,pass\"",
        );
        let body = format!("q={}", "ab".repeat(200_000));
        let run = |server: &ServerConfig| {
            let waf = Waf::load(&rules, Path::new("/p.toml"), server, None).unwrap();
            let mut tx = waf.transaction(
                "10.0.0.1:5555".parse().unwrap(),
                None,
                "127.0.0.1:80".parse().unwrap(),
                "abc".into(),
                0,
                None,
                None,
            );
            tx.request_line(b"POST", b"/", b"HTTP/1.1");
            tx.request_header(b"Host", b"x");
            tx.request_header(b"Content-Type", b"application/x-www-form-urlencoded");
            assert_eq!(tx.request_headers_done(), None);
            assert_eq!(tx.request_body(body.as_bytes()), BodyFeed::Ok);
            let verdict = tx.request_body_done();
            let exceeded = std::iter::from_fn(|| tx.poll_event()).find_map(|e| match e {
                engine::Event::LimitReached(engine::Limit::CpuBudget(b)) => Some(b),
                _ => None,
            });
            (verdict, exceeded)
        };
        let mut server = ServerConfig {
            waf_cpu_budget: CpuBudgetSetting::Limit(std::time::Duration::from_micros(1)),
            waf_cpu_budget_status: 429,
            ..ServerConfig::default()
        };
        let (verdict, exceeded) = run(&server);
        let v = verdict.expect("blocked by the budget");
        assert_eq!(
            (v.status, v.kind, v.rule_id),
            (429, VerdictKind::Deny, None)
        );
        let e = exceeded.expect("reported");
        assert!(e.blocked && e.phase == 2 && e.limit_micros == 1, "{e:?}");

        server.waf_cpu_budget_action = BudgetActionSetting::Pass;
        let (verdict, exceeded) = run(&server);
        assert_eq!(verdict, None);
        assert!(!exceeded.expect("reported").blocked);

        // The default budget (1 s) is far above this request's cost.
        let (verdict, exceeded) = run(&ServerConfig::default());
        assert_eq!((verdict, exceeded), (None, None));
    }

    #[derive(Debug)]
    struct BrokenStore;

    impl CollectionReader for BrokenStore {
        fn read(
            &self,
            key: &engine::RecordKey,
        ) -> Result<Option<engine::StoredRecord>, CollectionError> {
            Err(CollectionError::Read {
                key: format!(
                    "{}:{}",
                    key.collection.name(),
                    String::from_utf8_lossy(&key.key)
                ),
                reason: "disk on fire".into(),
            })
        }
    }

    const COUNTER: &str = "SecRuleEngine On\n\
        SecAction \"id:1,phase:1,pass,nolog,initcol:ip=%{REMOTE_ADDR},setvar:ip.hits=+1\"\n\
        SecRule IP:HITS \"@gt 2\" \"id:2,phase:1,deny,status:429\"";

    fn counted(waf: &Waf, store: Arc<dyn CollectionReader>) -> (Option<Verdict>, WafTx) {
        let mut tx = waf.transaction(
            "192.0.2.9:5555".parse().unwrap(),
            None,
            "127.0.0.1:80".parse().unwrap(),
            "id".into(),
            1_700_000_000_000_000,
            Some(store),
            None,
        );
        tx.request_line(b"GET", b"/", b"HTTP/1.1");
        tx.request_header(b"Host", b"x");
        let v = tx.request_headers_done();
        tx.logging();
        (v, tx)
    }

    /// Collections read through the store given to the transaction, and what the
    /// rules wrote comes back as writes; counts add up across transactions.
    #[test]
    fn collections_count_across_transactions() {
        let waf = Waf::load(
            &inline(COUNTER),
            Path::new("/p.toml"),
            &ServerConfig::default(),
            None,
        )
        .unwrap();
        let store = Arc::new(engine::MemoryStore::new());
        let mut verdicts = Vec::new();
        for _ in 0..3 {
            let (v, mut tx) = counted(&waf, store.clone());
            verdicts.push(v.map(|v| v.status));
            let events: Vec<_> = std::iter::from_fn(|| tx.poll_event()).collect();
            assert!(
                !events
                    .iter()
                    .any(|e| matches!(e, engine::Event::CollectionReadFailed(_)))
            );
            assert!(!tx.store_failed());
            let writes: Vec<_> = events
                .into_iter()
                .filter_map(engine::Event::into_collection_write)
                .collect();
            assert_eq!(writes.len(), 1);
            store.apply_writes(writes);
        }
        assert_eq!(verdicts, vec![None, None, Some(429)]);
    }

    /// A failed read is never an empty record in silence: it is reported, and with
    /// `engine_failure = "closed"` the request is refused with 500; with "open" it
    /// passes. Either way the transaction is marked as one whose writes were made
    /// without the stored record.
    #[test]
    fn failed_reads_follow_the_failure_policy() {
        for (policy, want) in [
            (FailurePolicy::Closed, Some(500)),
            (FailurePolicy::Open, None),
        ] {
            let server = ServerConfig {
                engine_failure: policy,
                ..ServerConfig::default()
            };
            let waf = Waf::load(&inline(COUNTER), Path::new("/p.toml"), &server, None).unwrap();
            let (v, mut tx) = counted(&waf, Arc::new(BrokenStore));
            assert_eq!(v.map(|v| v.status), want, "{policy:?}");
            let errors: Vec<_> = std::iter::from_fn(|| tx.poll_event())
                .filter_map(engine::Event::into_collection_error)
                .collect();
            assert_eq!(errors.len(), 1, "{errors:?}");
            assert!(errors[0].to_string().contains("disk on fire"));
            assert!(tx.store_failed());
        }
    }

    #[test]
    fn load_errors_name_the_place() {
        let err = Waf::load(
            &inline("SecRuleEngine On\nSecRule ARGS \"@rx a\" \"id:1,phase:2,nosuchaction\""),
            Path::new("/etc/palisade/palisade.toml"),
            &ServerConfig::default(),
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("palisade.toml#rules1:2"), "{err}");
    }

    #[test]
    fn a_load_finds_every_error() {
        let err = Waf::load(
            &inline(
                "SecBogus 1
SecRule ARGS \"@rx a\" \"id:1,phase:2,nosuchaction\"\nSecFoo",
            ),
            Path::new("/p.toml"),
            &ServerConfig::default(),
            None,
        )
        .unwrap_err();
        assert_eq!(err.total(), 3);
        assert!(
            err.errors()[2].starts_with("/p.toml#rules1:3:1: "),
            "{err:?}"
        );
        assert!(
            err.to_string()
                .ends_with(" (and 2 more error(s); `palisade check` lists them)"),
            "{err}"
        );
    }
}
