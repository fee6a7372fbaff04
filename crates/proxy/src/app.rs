//! The `palisade` commands as library functions: `check` loads a configuration and
//! its rules and reports every error, like `nginx -t`; `run` serves until SIGTERM or
//! SIGINT (runtime, listeners, admin API, reloads on SIGHUP or `POST /reload`, log
//! files reopened on SIGUSR1, systemd notifications, graceful drain); `ctx` reads and
//! writes the persistent collections of a store, while the proxy runs or not.

use crate::config::{Config, StoreSection};
use crate::ctx::{CtxArgs, CtxCommand};
use crate::reload::{Outcome, ReloadHandle, ReloadRequest, Trigger};
use crate::{access, admin, ctx, exchange, logs, metrics, notify, runtime, upstream, waf};
use anyhow::Context as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// How many errors `check` prints (each error of the rules and each refusal of
/// the configuration counts as one); the others are counted.
pub const MAX_REPORTED_ERRORS: usize = crate::waf::MAX_LOAD_ERRORS;

/// Errors found together, in the order found: the first [`MAX_REPORTED_ERRORS`]
/// listed, the others counted. Displays one error per line, then
/// `and N more error(s)` when some were only counted.
#[derive(Debug, Default)]
pub struct ErrorList {
    listed: Vec<String>,
    total: usize,
}

impl ErrorList {
    /// Adds an error (with its causes, on one line).
    pub fn push(&mut self, e: impl std::fmt::Display) {
        self.total += 1;
        if self.listed.len() < MAX_REPORTED_ERRORS {
            self.listed.push(format!("{e:#}"));
        }
    }

    /// Adds every error of a rule set load: those it lists and those it counted.
    pub fn push_rules(&mut self, e: &waf::WafLoadError) {
        for one in e.errors() {
            self.push(one);
        }
        self.total += e.total().saturating_sub(e.errors().len());
    }

    /// Adds every error of another list: those it lists and those it counted.
    pub fn append(&mut self, other: ErrorList) {
        let counted = other.total - other.listed.len();
        for one in other.listed {
            self.push(one);
        }
        self.total += counted;
    }

    /// The errors listed, in the order found.
    pub fn listed(&self) -> &[String] {
        &self.listed
    }

    /// How many errors were found, listed or not.
    pub fn total(&self) -> usize {
        self.total
    }

    /// True when no error was found.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// Keeps the error of `r`, if any, and gives its value otherwise.
    fn keep<T>(&mut self, r: anyhow::Result<T>) -> Option<T> {
        r.map_err(|e| self.push(e)).ok()
    }
}

impl std::fmt::Display for ErrorList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.listed.join("\n"))?;
        let more = self.total - self.listed.len();
        if more > 0 {
            write!(f, "\nand {more} more error(s)")?;
        }
        Ok(())
    }
}

impl std::error::Error for ErrorList {}

/// `palisade check` found errors. Displays them, one per line (see
/// [`ErrorList`]), then `configuration file FILE test failed: N error(s)`.
#[derive(Debug, thiserror::Error)]
#[error("{errors}\nconfiguration file {} test failed: {} error(s)", path.display(), errors.total())]
pub struct CheckFailed {
    /// The configuration file checked.
    pub path: PathBuf,
    /// What was wrong.
    pub errors: ErrorList,
}

/// What [`validate`] loaded and built on the way, for `run` to use as it is.
struct Validated {
    access: Option<Arc<access::AccessList>>,
    token: admin::AdminToken,
    log_targets: logs::LogTargets,
    rate_limits: Vec<crate::ratelimit::RateLimiter>,
    shapes: Vec<crate::shaping::Shaper>,
}

/// Everything `run` refuses for its configuration, checked without serving and
/// without creating anything: every listener's TLS files, the access lists, the
/// upstream pools, the admin token, the log files, the rate limits and shapes,
/// the store's and the sync's settings, the incidents' directory, and the TLS
/// settings of the `[[syslog]]` receivers. `check` and `run` both call it (`run`
/// then uses what it built), so `check` refuses whatever `run` would. Each is
/// checked whatever the others gave, and every refusal is returned. `waf` gives
/// the log files the rules name (`None`: the rules did not load, and only the
/// configuration's log files are checked). Left to `run`: binding the listening
/// addresses (a running Palisade holds them), connecting to Redis, and LMDB's own
/// checks of the store's files.
fn validate(cfg: &Config, waf: Option<&waf::Waf>) -> Result<Validated, ErrorList> {
    let mut errors = ErrorList::default();
    for l in &cfg.listeners {
        if let Some(t) = &l.tls {
            errors.keep(
                crate::tls::sni::ListenerCerts::prepare(t, cfg.acme.is_some())
                    .with_context(|| format!("listener {}", l.address)),
            );
        }
    }
    if let Some(a) = &cfg.acme {
        errors.keep(crate::tls::acme::check(a).context("[acme]"));
    }
    let access = errors.keep(load_access(cfg));
    errors.keep(
        upstream::Upstreams::build(cfg, &Arc::new(crate::metrics::Metrics::new()), None, None)
            .with_context(|| format!("{}", cfg.path.display())),
    );
    let token = errors.keep(match &cfg.admin {
        Some(a) => admin::AdminToken::load(a).context("[admin] token"),
        None => Ok(admin::AdminToken::none()),
    });
    let log_targets = log_targets(cfg, waf);
    errors.keep(log_targets.check().context("opening log files"));
    let rate_limits = errors.keep(
        cfg.rate_limits
            .iter()
            .map(crate::ratelimit::RateLimiter::new)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| anyhow::anyhow!("[[rate_limit]]: {e}")),
    );
    let shapes = errors.keep(
        cfg.shapes
            .iter()
            .map(crate::shaping::Shaper::new)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| anyhow::anyhow!("[[shape]]: {e}")),
    );
    errors.keep(
        store_config(&cfg.store)
            .validate()
            .with_context(|| store_error_context(&cfg.store)),
    );
    if let Some(s) = &cfg.sync {
        errors.keep(
            sync_config(s)
                .validate()
                .with_context(|| format!("[sync] {}", s.redis)),
        );
    }
    if let Some(i) = &cfg.incidents {
        errors.keep(crate::diag::incident::check_dir(&i.dir).map_err(|e| anyhow::anyhow!(e)));
    }
    errors.keep(crate::logship::check(&cfg.syslogs).map_err(anyhow::Error::from));
    match (access, token, rate_limits, shapes) {
        (Some(access), Some(token), Some(rate_limits), Some(shapes)) if errors.is_empty() => {
            Ok(Validated {
                access,
                token,
                log_targets,
                rate_limits,
                shapes,
            })
        }
        _ => Err(errors),
    }
}

/// Where the logs of `cfg` go: `[logs]`, and the audit and debug logs its rules
/// name (`waf`, when they loaded).
fn log_targets(cfg: &Config, waf: Option<&waf::Waf>) -> logs::LogTargets {
    logs::LogTargets {
        error: cfg.logs.error_log.clone(),
        access: cfg.logs.access_log.clone(),
        audit: cfg
            .logs
            .audit_log
            .clone()
            .or_else(|| waf.and_then(waf::Waf::audit_log_path)),
        audit_files: waf.is_some_and(waf::Waf::audit_concurrent),
        debug: waf.and_then(waf::Waf::debug_log_path),
    }
}

/// Loads the configuration at `path` and every rule it names, checks everything
/// `run` would refuse (see [`validate`]), and prints a summary. On errors, returns
/// [`CheckFailed`] with every one found, each naming its file and line: the rules'
/// (up to [`MAX_REPORTED_ERRORS`], then counted) and the configuration's refusals
/// alike. A configuration file that cannot be read or parsed is one error: nothing
/// else can be checked without it.
pub fn check(path: &Path) -> anyhow::Result<()> {
    let mut errors = ErrorList::default();
    let cfg = match Config::load(path) {
        Ok(cfg) => cfg,
        Err(e) => {
            errors.push(e);
            return Err(check_failed(path, errors));
        }
    };
    let (dns_config, dns_error) = dns_setup(&cfg);
    let rbl_limit = dns_config
        .as_ref()
        .map(|_| cfg.dns.max_lookups_per_transaction);
    let waf = match load_waf(&cfg, rbl_limit) {
        Ok(waf) => Some(waf),
        Err(e) => {
            errors.push_rules(&e);
            None
        }
    };
    let access = match validate(&cfg, waf.as_ref()) {
        Ok(Validated { access, .. }) => access,
        Err(refused) => {
            errors.append(refused);
            None
        }
    };
    let Some(waf) = waf.filter(|_| errors.is_empty()) else {
        return Err(check_failed(path, errors));
    };
    let p = waf.rules_per_phase();
    println!("palisade: configuration file {} is ok", path.display());
    println!(
        "palisade: {} rule(s) (phase 1: {}, phase 2: {}, phase 3: {}, phase 4: {}, phase 5: {}), SecRuleEngine {}",
        waf.rule_count(),
        p[0],
        p[1],
        p[2],
        p[3],
        p[4],
        waf.engine_mode()
    );
    if let Some(a) = &access {
        println!(
            "palisade: access lists: {} network(s), {} KiB",
            a.len(),
            a.heap_bytes() / 1024
        );
    }
    for l in &cfg.listeners {
        let Some(t) = &l.tls else { continue };
        let p = crate::tls::sni::ListenerCerts::prepare(t, cfg.acme.is_some())?;
        let names: Vec<String> = p
            .certificates()
            .map(|c| {
                if c.names.is_empty() {
                    "(no DNS name)".to_owned()
                } else {
                    c.names.join(" ")
                }
            })
            .collect();
        println!(
            "palisade: listener {}: {} certificate(s){}{}",
            l.address,
            names.len(),
            if names.is_empty() {
                String::new()
            } else {
                format!(": {} (default: the first)", names.join(", "))
            },
            if t.acme && cfg.acme.is_some() {
                ", and the [acme] certificates"
            } else {
                ""
            }
        );
    }
    if let Some(a) = &cfg.acme {
        println!(
            "palisade: acme: {} name(s) from {} ({}), state in {}",
            a.names.len(),
            a.directory,
            match a.challenge {
                crate::config::AcmeChallenge::Http01 => "http-01",
                crate::config::AcmeChallenge::TlsAlpn01 => "tls-alpn-01",
            },
            a.state_dir.display()
        );
    }
    let ca = &cfg.client_address;
    if !ca.trusted_proxies.is_empty() {
        let pp = cfg.listeners.iter().filter(|l| l.proxy_protocol).count();
        println!(
            "palisade: client address from {} trusted proxy entr{}: {}; PROXY protocol on {pp} listener(s)",
            ca.trusted_proxies.len(),
            if ca.trusted_proxies.len() == 1 {
                "y"
            } else {
                "ies"
            },
            match &ca.header {
                Some(h) => format!("header {h}"),
                None => "no header".to_owned(),
            }
        );
    }
    let inline = cfg.rules.iter().filter(|r| r.inline.is_some()).count();
    println!(
        "palisade: {} rule file(s) loaded{}{}",
        waf.files().len(),
        if inline > 0 {
            format!(" and {inline} inline rule block(s)")
        } else {
            String::new()
        },
        if waf.files().is_empty() { "" } else { ":" }
    );
    for f in waf.files() {
        println!("  {}", f.display());
    }
    for line in site_summaries(&waf) {
        println!("palisade: {line}");
    }
    if let Some(s) = waf.shadow() {
        println!("palisade: {}", s.summary());
        for w in s.warnings() {
            println!("palisade: warning: [shadow] {w}");
        }
    }
    for w in waf.warnings().iter().chain(waf.site_warnings()) {
        println!("palisade: warning: {w}");
    }
    if let (Some(e), true) = (&dns_error, waf.has_rbl_rules()) {
        println!("palisade: warning: @rbl lookups are off: {e}");
    }
    println!("palisade: rules sha256 {}", waf.hash());
    let sc = store_config(&cfg.store);
    println!(
        "palisade: collection store {} (map size {} bytes, host id {:?}){}",
        sc.path.display(),
        sc.map_size,
        sc.host_id,
        match &cfg.sync {
            Some(s) => format!(", synced through {} stream {:?}", s.redis, s.stream),
            None => String::new(),
        }
    );
    Ok(())
}

/// Loads the rules of `cfg` and compiles its sites over them: the rule set once,
/// each site's own rules into a small overlay.
pub(crate) fn load_waf(
    cfg: &Config,
    rbl_limit: Option<usize>,
) -> Result<waf::Waf, waf::WafLoadError> {
    let waf = waf::Waf::load(&cfg.rules, &cfg.path, &cfg.server, rbl_limit)?.with_sites(
        &cfg.sites,
        &cfg.path,
        cfg.limits.request_body_bytes,
    )?;
    waf.with_shadow(cfg.shadow.as_ref(), &cfg.rules, &cfg.path, &cfg.server)
}

/// One line per site for `palisade check` and the start: what selects it and what
/// its policy changes.
fn site_summaries(waf: &waf::Waf) -> Vec<String> {
    let sites = waf.sites();
    if !sites.configured() {
        return Vec::new();
    }
    sites
        .iter()
        .filter_map(|s| {
            let p = s.policy()?;
            let mut parts = vec![format!("SecRuleEngine {:?}", p.rule_engine())];
            if let Some((_, level)) = p.seeds().next() {
                parts.push(format!("paranoia level {}", String::from_utf8_lossy(level)));
            }
            parts.push(format!("{} rule(s) of its own", p.rule_count()));
            if !p.keeps_folds() {
                parts.push("rules evaluated as written (no load-time folds)".into());
            } else if p.own_folds() {
                parts.push("load-time folds of its own".into());
            }
            Some(format!(
                "site {:?}: {}",
                s.name().as_ref(),
                parts.join(", ")
            ))
        })
        .collect()
}

/// The error `check` returns for `errors`.
fn check_failed(path: &Path, errors: ErrorList) -> anyhow::Error {
    CheckFailed {
        path: path.to_path_buf(),
        errors,
    }
    .into()
}

/// The name servers of `[dns]` (`None` when lookups are off), and why they could
/// not be found (then lookups are off too).
fn dns_setup(
    cfg: &Config,
) -> (
    Option<hickory_resolver::config::ResolverConfig>,
    Option<String>,
) {
    match crate::dns::resolver_config(&cfg.dns) {
        Ok(c) => (c, None),
        Err(e) => (None, Some(e.to_string())),
    }
}

/// The store's settings from `[store]`: its path defaults to
/// [`store::StoreConfig::default_path`], its host id to the host name.
pub fn store_config(section: &StoreSection) -> store::StoreConfig {
    store::StoreConfig {
        path: section
            .path
            .clone()
            .unwrap_or_else(store::StoreConfig::default_path),
        map_size: section.map_size,
        batch_interval: section.batch_interval,
        sweep_interval: section.sweep_interval,
        host_id: section
            .host_id
            .clone()
            .unwrap_or_else(store::StoreConfig::default_host_id),
    }
}

/// Opens the store `[store]` describes, with an error naming its path and how to
/// choose another.
pub fn open_store(section: &StoreSection) -> anyhow::Result<store::Store> {
    store::Store::open(&store_config(section)).with_context(|| store_error_context(section))
}

/// What an error about the store `[store]` describes is about: its path, and how
/// to choose another.
fn store_error_context(section: &StoreSection) -> String {
    format!(
        "opening the collection store at {}{}",
        store_config(section).path.display(),
        if section.path.is_none() {
            " (the default path: set [store] path in the configuration, or PALISADE_STORE, to use another)"
        } else {
            " (store.path)"
        }
    )
}

/// The sync's settings from `[sync]`.
fn sync_config(s: &crate::config::SyncSection) -> store::sync::SyncConfig {
    store::sync::SyncConfig {
        redis: s.redis.clone(),
        stream: s.stream.clone(),
        retention: s.retention,
        snapshot_interval: s.snapshot_interval,
        ..store::sync::SyncConfig::new(s.redis.clone())
    }
}

/// `palisade diag`: writes the incident bundle, prints its path, and says on
/// standard error what could not be collected.
pub fn diag(req: &crate::diag::bundle::DiagRequest) -> anyhow::Result<()> {
    let w = crate::diag::bundle::write(req)?;
    for (part, why) in &w.missing {
        eprintln!("palisade: diag: not collected: {part}: {why}");
    }
    println!("{}", w.path.display());
    Ok(())
}

/// `palisade tune`: proposes exclusions of the likely false positives in the audit
/// log and proves them ([`crate::tune`]); prints the report (text, or JSON with
/// `--json`) and, with `--write`, adds the proven ones to the tune files. With
/// `--prove FILE`, fails when the file lets an attack of the corpus through.
pub fn tune(args: &crate::cli::TuneArgs) -> anyhow::Result<()> {
    use std::io::Write as _;
    if !(0.0..=1.0).contains(&args.threshold) {
        anyhow::bail!("--threshold {} is not between 0 and 1", args.threshold);
    }
    if args.first_id <= 0 {
        anyhow::bail!("--first-id {} is not a positive rule id", args.first_id);
    }
    let opts = crate::tune::Options {
        audit_log: args.audit_log.clone(),
        attacks: args.attacks.clone(),
        out: args.out.clone(),
        ranking: crate::tune::group::Ranking {
            min_clients: args.min_clients,
            threshold: args.threshold,
            ..Default::default()
        },
        max_paths: args.max_paths,
        first_id: args.first_id,
        prove: args.prove.clone(),
    };
    let report = crate::tune::analyse(&args.config, &opts)?;
    let written = if args.write {
        Some(crate::tune::write(&report)?)
    } else {
        None
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        let mut doc = serde_json::to_value(&report)?;
        doc["written"] = serde_json::json!(written);
        writeln!(out, "{doc}")?;
    } else {
        write!(out, "{}", crate::tune::render(&report, written.as_deref()))?;
    }
    out.flush()?;
    if report.proved_file.is_some() && !report.safe() {
        anyhow::bail!(
            "the exclusion lets {} attack(s) of the corpus through that the rules in force block",
            report.proof.attacks_passing_now.len()
        );
    }
    Ok(())
}

/// `palisade ctx`: carries out one operation on the store named by `--config`'s
/// `[store]`, by `--store`, or at the default path. Returns false when `get` or
/// `del` found nothing (the command then exits 3, [`crate::cli::Exit::NotFound`]).
pub fn ctx(args: CtxArgs) -> anyhow::Result<bool> {
    let section = match (&args.config, &args.store) {
        (Some(c), _) => Config::load(c)?.store,
        (None, Some(p)) => StoreSection {
            path: Some(p.clone()),
            ..StoreSection::default()
        },
        (None, None) => StoreSection::default(),
    };
    let store = open_store(&section)?;
    let app = args.app.as_str();
    let note = |k: &engine::RecordKey| {
        if let Some(n) = ctx::long_key_note(k) {
            eprintln!("palisade: note: {n}");
        }
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    use std::io::Write as _;
    let found = match args.command {
        CtxCommand::Get { collection, key } => {
            let k = ctx::record_key(app, &collection, key.as_bytes())?;
            note(&k);
            match ctx::get(&store, &k)? {
                Some(r) => {
                    writeln!(out, "{}", ctx::record_line(&k, &r))?;
                    true
                }
                None => {
                    eprintln!(
                        "palisade: no record {}:{key} (app {app})",
                        k.collection.name()
                    );
                    false
                }
            }
        }
        CtxCommand::Set {
            collection,
            key,
            variable,
            value,
            ttl,
        } => {
            let k = ctx::record_key(app, &collection, key.as_bytes())?;
            note(&k);
            ctx::set(&store, &k, &variable, value.as_bytes(), ttl)
                .with_context(|| format!("setting {}:{key} {variable}", k.collection.name()))?;
            true
        }
        CtxCommand::Del {
            collection,
            key,
            variable,
        } => {
            let k = ctx::record_key(app, &collection, key.as_bytes())?;
            note(&k);
            let done = ctx::delete(&store, &k, variable.as_deref())?;
            if !done {
                eprintln!(
                    "palisade: nothing to delete: {}:{key}{} (app {app})",
                    k.collection.name(),
                    variable.map(|v| format!(" {v}")).unwrap_or_default()
                );
            }
            done
        }
        CtxCommand::List { collection, limit } => {
            let kind = collection.as_deref().map(ctx::collection).transpose()?;
            ctx::list(&store, app, kind, limit, &mut out)?;
            true
        }
        CtxCommand::Import {
            file,
            follow,
            batch_lines,
            batch_ms,
        } => {
            let (input, from): (Box<dyn std::io::BufRead + Send>, String) = match file.as_deref() {
                Some(p) if p.as_os_str() != "-" => {
                    let f = std::fs::File::open(p)
                        .with_context(|| format!("opening {}", p.display()))?;
                    (
                        Box::new(std::io::BufReader::new(f)),
                        p.display().to_string(),
                    )
                }
                _ => (
                    Box::new(std::io::BufReader::new(std::io::stdin())),
                    "standard input".to_owned(),
                ),
            };
            if follow {
                let batch = usize::try_from(batch_lines).unwrap_or(usize::MAX);
                let t = ctx::import_follow(
                    &store,
                    input,
                    batch,
                    std::time::Duration::from_millis(batch_ms),
                )
                .with_context(|| {
                    format!("following {from}: the batches before the line named were imported")
                })?;
                eprintln!(
                    "palisade: imported {} line(s) in {} commit(s)",
                    t.lines, t.batches
                );
            } else {
                let n = store
                    .import(input)
                    .with_context(|| format!("importing {from}: nothing was imported"))?;
                eprintln!("palisade: imported {n} line(s)");
            }
            true
        }
        CtxCommand::Export {
            collection,
            all_apps,
        } => {
            let kind = collection.as_deref().map(ctx::collection).transpose()?;
            let n = store.export(&mut out, (!all_apps).then_some(app), kind)?;
            eprintln!("palisade: exported {n} record(s)");
            true
        }
    };
    out.flush()?;
    Ok(found)
}

fn init_tracing(level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(level))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
}

/// Serves with the configuration at `path` until SIGTERM or SIGINT, then drains
/// the requests in flight for `server.grace_period`. Under systemd (`Type=notify`,
/// `NOTIFY_SOCKET` set) it reports readiness once the listeners are bound and the
/// rules loaded, reloads, shutdown, and sends watchdog pings while healthy (see
/// [`notify`]).
pub fn run(path: &Path) -> anyhow::Result<()> {
    // First, before any file is opened: the sockets a binary upgrade (or systemd)
    // handed over.
    let (inherited, notes) = crate::upgrade::Inherited::from_env();
    let cfg = Config::load(path)?;
    init_tracing(&cfg.logs.level);
    for n in notes {
        tracing::warn!("{n}");
    }
    if inherited.is_upgrade() {
        tracing::info!(
            "started by a binary upgrade: {} listening socket(s) inherited",
            inherited.len()
        );
    }
    // The main thread's runtime carries the signals, the admin API, reloads and
    // housekeeping; client connections run on the worker threads started in `serve`.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let signals = {
        let _in_runtime = rt.enter();
        Signals::install()?
    };
    let (dns_config, dns_error) = dns_setup(&cfg);
    let rbl_limit = dns_config
        .as_ref()
        .map(|_| cfg.dns.max_lookups_per_transaction);
    let waf = Arc::new(load_waf(&cfg, rbl_limit)?);
    // The compiler's temporaries are freed; this thread now mostly waits.
    crate::memory::collect();
    if let (Some(e), true) = (&dns_error, waf.has_rbl_rules()) {
        tracing::warn!("@rbl lookups are off: {e}");
    }
    tracing::info!(
        "loaded {} rules from {} files (sha256 {}), SecRuleEngine {}",
        waf.rule_count(),
        waf.files().len(),
        waf.hash(),
        waf.engine_mode()
    );
    for line in site_summaries(&waf) {
        tracing::info!("{line}");
    }
    if let Some(s) = waf.shadow() {
        tracing::info!("{}", s.summary());
        for w in s.warnings() {
            tracing::warn!("[shadow] {w}");
        }
    }
    for w in waf.site_warnings() {
        tracing::warn!("{w}");
    }
    let validated = validate(&cfg, Some(&waf))?;
    // What the validation built only to check it (the upstream pools, the forward
    // proxy's domain lists: 73 MiB for 1.6 million domains) is freed: give it back
    // before the real ones are built.
    crate::memory::collect();
    let shippers = Arc::new(crate::logship::Shippers::start(&cfg.syslogs)?);
    let otlp = match &cfg.otlp {
        Some(o) => {
            tracing::info!(
                "exporting {}{} to {} (OTLP/HTTP)",
                if o.traces { "spans" } else { "no spans" },
                if o.logs.is_empty() {
                    String::new()
                } else {
                    format!(" and the {} log(s)", o.logs.join(", "))
                },
                o.endpoint
            );
            Some(crate::otlp::Exporter::start(o)?)
        }
        None => None,
    };
    let mut line_sinks: Vec<Arc<dyn crate::logship::LineSink>> = vec![shippers.clone()];
    if let Some(o) = &otlp {
        line_sinks.push(o.clone());
    }
    for s in &cfg.syslogs {
        tracing::info!(
            "shipping the {} log(s) to syslog at {} ({})",
            s.logs.join(", "),
            s.address,
            s.transport.label()
        );
    }
    let (log_tx, writer) = logs::LogWriter::start(
        &validated.log_targets,
        cfg.logs.channel_capacity,
        line_sinks,
    )
    .context("opening log files")?;
    let log_tx = log_tx.with_error_ack(cfg.logs.error_log_before_response);
    // Opened once, beside the rule set: a SIGHUP reload swaps the rules and keeps
    // the store, its writer and its data.
    let store = open_store(&cfg.store)?;
    let sync = match &cfg.sync {
        Some(s) => {
            let sync = store::sync::Sync::start(&store, sync_config(s))
                .with_context(|| format!("starting the sync with {}", s.redis))?;
            tracing::info!(
                "syncing collections through stream {:?} at {} as host {:?}",
                s.stream,
                s.redis,
                store.config().host_id
            );
            Some(sync)
        }
        None => {
            // Nothing publishes: committed changes must not pile up for a sync.
            store
                .set_publishing(false)
                .context("setting up the collection store")?;
            None
        }
    };
    tracing::info!(
        "collection store at {} (map size {} bytes)",
        store_config(&cfg.store).path.display(),
        cfg.store.map_size
    );
    let result = rt.block_on(serve(
        cfg,
        waf,
        validated,
        (log_tx, otlp.clone()),
        (store.clone(), sync),
        dns_config,
        signals,
        inherited,
    ));
    rt.shutdown_timeout(Duration::from_millis(500));
    // What the last requests wrote is committed before the process exits.
    if let Err(e) = store.flush() {
        tracing::error!("committing the last collection writes: {e}");
    }
    writer.finish();
    // What the writer offered them is sent (or counted as lost) before exiting.
    shippers.finish();
    if let Some(o) = &otlp {
        o.finish();
    }
    result
}

/// SIGHUP, SIGUSR1 and SIGUSR2, caught from before the rules are compiled: a reload or a log
/// rotation asked for while Palisade starts must not end it (their default action),
/// and is carried out once it serves. SIGTERM and SIGINT keep their default action
/// until then, so that a start can be stopped at once.
struct Signals {
    hup: tokio::signal::unix::Signal,
    usr1: tokio::signal::unix::Signal,
    usr2: tokio::signal::unix::Signal,
}

impl Signals {
    /// Installs the handlers; must run inside the main runtime.
    fn install() -> anyhow::Result<Signals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            hup: signal(SignalKind::hangup()).context("installing the SIGHUP handler")?,
            usr1: signal(SignalKind::user_defined1()).context("installing the SIGUSR1 handler")?,
            usr2: signal(SignalKind::user_defined2()).context("installing the SIGUSR2 handler")?,
        })
    }
}

#[allow(clippy::too_many_arguments)]
async fn serve(
    cfg: Config,
    waf: Arc<waf::Waf>,
    validated: Validated,
    (log_tx, otlp): (logs::LogSender, Option<Arc<crate::otlp::Exporter>>),
    (store, sync): (store::Store, Option<store::sync::Sync>),
    dns_config: Option<hickory_resolver::config::ResolverConfig>,
    signals: Signals,
    mut inherited: crate::upgrade::Inherited,
) -> anyhow::Result<()> {
    let Validated {
        access,
        token,
        rate_limits,
        shapes,
        ..
    } = validated;
    use tokio::sync::{mpsc, watch};
    // systemd's notification socket, if started by a unit of Type=notify.
    let notifier = Arc::new(notify::Notifier::from_env());
    let token = admin::TokenCell::new(token);
    let dns = match dns_config.map(|c| crate::dns::Dns::start(&cfg.dns, c)) {
        Some(Ok(d)) => Some(Arc::new(d)),
        Some(Err(e)) => {
            tracing::error!("@rbl lookups are off, @rbl rules never match: {e}");
            None
        }
        None => None,
    };

    let workers = runtime::worker_count(cfg.server.worker_threads);
    // Certificates already in the ACME state directory are served from the start;
    // the missing ones are ordered in the background once the listeners run.
    let acme = match &cfg.acme {
        Some(a) => {
            Some(crate::tls::acme::Acme::new(a, workers, Some(log_tx.clone())).context("[acme]")?)
        }
        None => None,
    };
    let admin_listener = match &cfg.admin {
        Some(a) => Some(match inherited.take(a.address).into_iter().next() {
            Some(s) => tokio::net::TcpListener::from_std(s)
                .with_context(|| format!("admin address {} (inherited)", a.address))?,
            None => tokio::net::TcpListener::bind(a.address)
                .await
                .with_context(|| format!("cannot listen on admin address {}", a.address))?,
        }),
        None => None,
    };
    // Bound after the admin listener: once a client can connect to a listener,
    // the admin API can be reached too.
    let prepared = crate::listeners::Prepared::new(
        &crate::listeners::Plan::empty(workers),
        &cfg,
        acme.as_ref(),
        &mut inherited,
    )?;
    for a in inherited.leftover() {
        tracing::warn!("inherited socket {a} is no configured listener's: closed");
    }
    // A binary upgrade hands the admin socket over too.
    let admin_fd = match &admin_listener {
        Some(l) => {
            use std::os::fd::AsFd as _;
            Some(rustix::io::fcntl_dupfd_cloexec(l.as_fd(), 3).context("admin socket")?)
        }
        None => None,
    };
    let metrics = Arc::new(metrics::Metrics::for_workers(workers));
    let client_address = crate::client_address::ClientAddress::new(&cfg.client_address)
        .with_context(|| format!("{}", cfg.path.display()))?;
    let upstreams = upstream::Upstreams::build(&cfg, &metrics, dns.clone(), Some(log_tx.clone()))
        .with_context(|| format!("{}", cfg.path.display()))?;
    upstreams.start();
    if let Some(a) = &access {
        tracing::info!(
            "access lists: {} networks ({} KiB)",
            a.len(),
            a.heap_bytes() / 1024
        );
    }
    let shared = Arc::new(
        exchange::Shared::new(
            waf,
            upstreams,
            log_tx,
            metrics,
            cfg.limits.clone(),
            cfg.server.clone(),
            crate::inspect::Inspector::new(
                cfg.server.inspection_threads,
                cfg.server.inspect_inline_bytes,
            )?,
        )
        .with_store(store)
        .with_sync(sync)
        .with_otlp(otlp)
        .with_routes(cfg.upstreams.iter().map(|u| u.name.as_str()))
        .with_rate_limits(rate_limits)
        .with_shapes(shapes)
        .with_dns(dns)
        .with_client_address(client_address)
        .with_access(access)
        .with_tls(Vec::new(), acme.clone())
        .with_workers(workers),
    );
    let (stop_tx, stop_rx) = watch::channel(false);
    let (exit_tx, exit_rx) = watch::channel(false);
    let (alive_tx, mut alive_rx) = mpsc::channel::<()>(1);
    // Kept only when systemd's watchdog is on (WatchdogSec=).
    let heartbeats = notifier
        .watchdog()
        .map(|_| notify::Heartbeats::new(workers));
    let ctx = runtime::WorkerContext {
        exit: exit_rx,
        alive: alive_tx.clone(),
        heartbeats: heartbeats.clone(),
    };
    let mut threads = Vec::new();
    let mut handles = Vec::new();
    for w in 0..workers {
        // Built here so that a runtime that cannot start stops Palisade at once.
        let rt = runtime::worker_runtime()?;
        handles.push(rt.handle().clone());
        let ctx = ctx.clone();
        // Thread names are cut at 15 bytes: this one stays whole in /proc and
        // `ps -L` (bench/cores.py pins each worker by it).
        let t = std::thread::Builder::new()
            .name(format!("palisade-w{w}"))
            .spawn(move || runtime::run_worker(w, rt, ctx))
            .context("starting a worker thread")?;
        threads.push(t);
    }
    drop(ctx);
    let mut listeners = crate::listeners::Listeners::new(handles, shared.clone(), alive_tx.clone());
    listeners.apply(prepared);
    for (l, address) in cfg.listeners.iter().zip(listeners.addresses()) {
        tracing::info!(
            "listening on {address} ({}, {workers} worker thread(s))",
            if l.tls.is_some() { "https" } else { "http" }
        );
    }
    let (reload_handle, reload_rx) = ReloadHandle::channel();
    if let (Some(l), Some(a)) = (admin_listener, &cfg.admin) {
        tracing::info!("admin API on {}", l.local_addr()?);
        if !token.current().is_set() {
            tracing::info!(
                "no admin token (admin.token_file or {}): the /ctx, /top and /reload endpoints are off",
                admin::TOKEN_ENV
            );
        }
        tokio::spawn(admin::serve(
            l,
            a.clone(),
            token.clone(),
            shared.clone(),
            reload_handle.clone(),
            stop_rx.clone(),
            cfg.path.clone(),
        ));
    }
    drop(reload_handle);
    if let Some(i) = &cfg.incidents {
        tracing::info!(
            "incident capture on: checked every second over {:?}, kept in {}",
            i.hold,
            i.dir.display()
        );
        tokio::spawn(crate::diag::incident::run(
            shared.clone(),
            i.clone(),
            stop_rx.clone(),
        ));
    }
    if let Some(h) = heartbeats {
        tokio::spawn(notify::watchdog(notifier.clone(), h, stop_rx.clone()));
    }
    {
        let shared = shared.clone();
        let mut stop = stop_rx.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(crate::memory::INTERVAL);
            let mut sweep = tokio::time::interval(crate::slots::SWEEP_INTERVAL);
            sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => {
                        shared.upstreams().reap_idle();
                        // The workers give back their own (memory::collect_periodically).
                        shared.inspector.release_memory();
                        crate::memory::collect();
                    }
                    _ = sweep.tick() => {
                        // Under pressure, connections that waited too long for
                        // their handshake, head or next request lose their slot.
                        shared.slots.sweep();
                    }
                    () = crate::runtime::stopped(&mut stop) => return,
                }
            }
        });
    }

    tokio::spawn(watch_certificates(shared.clone(), stop_rx.clone()));
    if let Some(a) = acme {
        tokio::spawn(a.run(stop_rx.clone()));
    }

    // The listeners are bound (connections queue until the workers accept them),
    // the rules loaded and the admin API up: ready.
    notifier.ready(&serving_status(&shared, listeners.len()));
    if inherited.is_upgrade() {
        notifier.upgraded(&serving_status(&shared, listeners.len()));
        inherited.ready();
        tracing::info!("serving: told the old process to stop accepting and drain");
    }
    drop(inherited);
    if notifier.is_enabled() {
        tracing::info!(
            "told the service manager: ready{}",
            match notifier.watchdog() {
                Some(w) => format!("; watchdog pings every {:?}", w / 2),
                None => String::new(),
            }
        );
    }
    let stop = wait_for_stop(
        &cfg,
        &shared,
        &token,
        &notifier,
        &mut listeners,
        admin_fd,
        signals,
        reload_rx,
    )
    .await?;
    if stop == Stop::Signal {
        notifier.stopping();
    }
    tracing::info!(
        "stopping: no new connections; waiting up to {:?} for requests in flight",
        cfg.server.grace_period
    );
    listeners.stop();
    let _ = stop_tx.send(true);
    drop(alive_tx);
    let drained = tokio::time::timeout(cfg.server.grace_period, alive_rx.recv()).await;
    match drained {
        Ok(_) => tracing::info!("all connections closed; exiting"),
        Err(_) => tracing::warn!(
            "grace period over with {} connection(s) still open; closing them",
            shared
                .metrics
                .connections_open
                .load(std::sync::atomic::Ordering::Relaxed)
        ),
    }
    let _ = exit_tx.send(true);
    for t in threads {
        if t.join().is_err() {
            tracing::error!("a worker thread panicked");
        }
    }
    Ok(())
}

/// Checks the TLS listeners' certificate files every `tls.watch_interval` (off
/// the event loop) and logs what changed, until shutdown.
async fn watch_certificates(
    shared: Arc<exchange::Shared>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    // When each listener's files were last checked, by address (a reload may add
    // and remove TLS listeners).
    let mut last: std::collections::HashMap<std::net::SocketAddr, tokio::time::Instant> =
        std::collections::HashMap::new();
    loop {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
            () = runtime::stopped(&mut stop) => return,
        }
        for l in shared.tls_listeners() {
            let every = l.watch_interval();
            let at = last
                .entry(l.address)
                .or_insert_with(tokio::time::Instant::now);
            if every.is_zero() || at.elapsed() < every {
                continue;
            }
            *at = tokio::time::Instant::now();
            let l = l.clone();
            let Ok(events) = tokio::task::spawn_blocking(move || l.check_files()).await else {
                continue;
            };
            for e in events {
                match e {
                    crate::tls::sni::Event::Info(t) => tracing::info!("{t}"),
                    crate::tls::sni::Event::Error(t) => {
                        tracing::error!("{t}");
                        shared.logs.event("error", &t);
                    }
                }
            }
        }
    }
}

/// Loads the `[access]` lists of `cfg` (`None` without the section).
fn load_access(cfg: &Config) -> anyhow::Result<Option<Arc<access::AccessList>>> {
    cfg.access
        .as_ref()
        .map(|a| access::AccessList::load(a).map(Arc::new))
        .transpose()
        .with_context(|| format!("loading the [access] lists of {}", cfg.path.display()))
}

/// What a reload does not apply, as it is named in the file, with what it holds
/// (compared to tell a changed one), each for a reason (docs/config.md,
/// "Reloading"):
/// - `[server]` (other than the keys the rules are loaded with): the worker
///   threads, the inspection pool and the timeouts are set up at start;
/// - `[limits] connections`: the connection slot table is sized at start;
/// - `[logs]` other than the files: the level, the channel's capacity and
///   `error_log_before_response` are set up at start;
/// - `[acme]`: its account, state directory and orders run from the start;
/// - `[admin]` (other than `token_file`): the admin listener is bound at start;
/// - `[store]` and `[sync]`: the store stays open (with its data) and the sync
///   connected across reloads;
/// - `[dns]`: the `@rbl` resolver and its cache are made at start.
fn restart_only(cfg: &Config) -> [(&'static str, String); 11] {
    let logs = crate::config::LogsConfig {
        error_log: None,
        access_log: None,
        audit_log: None,
        ..cfg.logs.clone()
    };
    [
        ("[server]", format!("{:?}", cfg.server)),
        (
            "[limits] connections",
            format!("{}", cfg.limits.connections),
        ),
        ("[logs] (other than the log files)", format!("{logs:?}")),
        ("[acme]", format!("{:?}", cfg.acme)),
        (
            "[admin] (other than token_file)",
            format!(
                "{:?}",
                cfg.admin.as_ref().map(|a| crate::config::AdminConfig {
                    token_file: None,
                    ..a.clone()
                })
            ),
        ),
        ("[store]", format!("{:?}", cfg.store)),
        ("[sync]", format!("{:?}", cfg.sync)),
        ("[dns]", format!("{:?}", cfg.dns)),
        ("[incidents]", format!("{:?}", cfg.incidents)),
        ("[[syslog]]", format!("{:?}", cfg.syslogs)),
        ("[otlp]", format!("{:?}", cfg.otlp)),
    ]
}

/// The sections that differ between the configuration in force and one read again
/// (see [`restart_only`]).
fn changed_restart_only(running: &Config, read: &Config) -> Vec<&'static str> {
    // The [server] keys the rules are loaded with are applied with them.
    let mut read = read.clone();
    read.server.engine_failure = running.server.engine_failure;
    read.server.waf_cpu_budget = running.server.waf_cpu_budget;
    read.server.waf_cpu_budget_action = running.server.waf_cpu_budget_action;
    read.server.waf_cpu_budget_status = running.server.waf_cpu_budget_status;
    read.server.rule_cost_sample = running.server.rule_cost_sample;
    restart_only(running)
        .into_iter()
        .zip(restart_only(&read))
        .filter(|(a, b)| a.1 != b.1)
        .map(|(a, _)| a.0)
        .collect()
}

/// Reports a reload that failed (everything in force stays) in the operator log and
/// the error log.
fn reload_failed(shared: &exchange::Shared, why: &str) {
    let text = format!("reload failed, the configuration in force stays: {why}");
    tracing::error!("{text}");
    shared.logs.event("error", &text);
}

/// The status line given to the service manager (`systemctl status`).
fn serving_status(shared: &exchange::Shared, listeners: usize) -> String {
    let waf = shared.waf();
    let mut s = format!(
        "serving on {listeners} listener(s), {} rules (sha256 {})",
        waf.rule_count(),
        waf.hash().get(..12).unwrap_or(waf.hash())
    );
    if let Some(o) = shared.reloads.last()
        && let Some(e) = &o.error
    {
        s.push_str("; the last reload failed: ");
        s.push_str(e);
    }
    s
}

/// Everything a reload prepares before it puts anything in force.
struct Reloaded {
    cfg: Config,
    waf: waf::Waf,
    access: Option<Arc<access::AccessList>>,
    pools: upstream::Upstreams,
    policy: exchange::Policy,
    logs: logs::PreparedLogs,
    listeners: crate::listeners::Prepared,
}

/// Why [`wait_for_stop`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// SIGTERM or SIGINT.
    Signal,
    /// A binary upgrade: the new process serves (and is the service's main
    /// process now).
    Upgraded,
}

/// Waits for SIGTERM or SIGINT, or for a binary upgrade to succeed. Meanwhile:
/// - SIGHUP, and a reload asked for through the admin API (`POST /reload`), run
///   [`reload`], one at a time; the admin API gets the outcome back;
/// - SIGUSR1 reopens the log files (after log rotation) and touches nothing else;
/// - SIGUSR2 starts the binary upgrade ([`crate::upgrade`]): once the new process
///   serves, this one returns [`Stop::Upgraded`] and drains; if it fails, this one
///   keeps serving.
#[allow(clippy::too_many_arguments)]
async fn wait_for_stop(
    cfg: &Config,
    shared: &Arc<exchange::Shared>,
    token: &admin::TokenCell,
    notifier: &notify::Notifier,
    listeners: &mut crate::listeners::Listeners,
    admin_fd: Option<std::os::fd::OwnedFd>,
    signals: Signals,
    mut reloads: tokio::sync::mpsc::Receiver<ReloadRequest>,
) -> anyhow::Result<Stop> {
    use tokio::signal::unix::{SignalKind, signal};
    let Signals {
        mut hup,
        mut usr1,
        mut usr2,
    } = signals;
    let mut running = cfg.clone();
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let (upgrade_tx, mut upgrade_rx) = tokio::sync::mpsc::channel::<Result<u32, String>>(1);
    let mut upgrading = false;
    loop {
        let (trigger, reply) = tokio::select! {
            _ = term.recv() => {
                tracing::info!("SIGTERM received");
                return Ok(Stop::Signal);
            }
            _ = int.recv() => {
                tracing::info!("SIGINT received");
                return Ok(Stop::Signal);
            }
            _ = usr1.recv() => {
                shared.logs.request_reopen();
                tracing::info!("SIGUSR1 received: reopening the log files (rules and configuration unchanged)");
                continue;
            }
            _ = usr2.recv() => {
                if upgrading {
                    tracing::warn!("SIGUSR2 received: a binary upgrade is already under way");
                    continue;
                }
                use std::os::fd::AsFd as _;
                let sockets = listeners
                    .sockets()
                    .map(|s| s.as_fd())
                    .chain(admin_fd.iter().map(|f| f.as_fd()));
                match crate::upgrade::spawn(sockets) {
                    Ok(started) => {
                        let pid = started.pid();
                        tracing::info!(
                            "SIGUSR2 received: binary upgrade: started process {pid}; this one serves until it does"
                        );
                        upgrading = true;
                        let tx = upgrade_tx.clone();
                        tokio::spawn(async move {
                            let wait = tokio::task::spawn_blocking(move || started.wait_ready());
                            let r = match tokio::time::timeout(crate::upgrade::READY_TIMEOUT, wait).await {
                                Ok(Ok(r)) => r,
                                Ok(Err(e)) => Err(format!("waiting for process {pid}: {e}")),
                                Err(_) => {
                                    crate::upgrade::kill(pid);
                                    Err(format!(
                                        "process {pid} did not serve within {:?}; stopped",
                                        crate::upgrade::READY_TIMEOUT
                                    ))
                                }
                            };
                            let _ = tx.send(r).await;
                        });
                    }
                    Err(e) => {
                        let text = format!("binary upgrade failed, this process keeps serving: {e}");
                        tracing::error!("{text}");
                        shared.logs.event("error", &text);
                    }
                }
                continue;
            }
            Some(r) = upgrade_rx.recv() => {
                upgrading = false;
                match r {
                    Ok(pid) => {
                        notifier.main_pid(pid);
                        tracing::info!("binary upgrade: process {pid} serves; this one stops accepting and drains");
                        return Ok(Stop::Upgraded);
                    }
                    Err(e) => {
                        let text = format!("binary upgrade failed, this process keeps serving: {e}");
                        tracing::error!("{text}");
                        shared.logs.event("error", &text);
                        continue;
                    }
                }
            }
            _ = hup.recv() => {
                tracing::info!(
                    "SIGHUP received: reloading {} and reopening logs",
                    running.path.display()
                );
                (Trigger::Signal, None)
            }
            Some(r) = reloads.recv() => {
                tracing::info!(
                    "reload asked for through the admin API: reloading {} and reopening logs",
                    running.path.display()
                );
                (Trigger::Admin, Some(r.reply))
            }
        };
        notifier.reloading();
        let outcome = reload(&mut running, shared, token, listeners, trigger).await;
        shared.reloads.record(&outcome);
        notifier.reloaded(&serving_status(shared, listeners.len()));
        if let Some(reply) = reply {
            // The admin client may have gone: the outcome is in /status anyway.
            let _ = reply.send(outcome);
        }
    }
}

/// Reads the configuration file again (the one `running` was read from) and puts it
/// in force, all or nothing: its rules (with sites), access lists, upstream pools
/// and routes, listeners (added ones bound, removed ones drained, changed ones
/// accepting with their new options; the sockets of those that stay are kept),
/// TLS certificates, `[limits]`, `[[rate_limit]]`s and `[[shape]]`s (keeping the
/// state of those whose identity stays), `[client_address]` and log files.
/// Everything is prepared first (off the event loop: files read, rules compiled,
/// sockets bound, log files opened); when any step fails, the error (naming the
/// file and the key or line) is logged and everything in force stays. It also
/// rereads the admin token (the token in force stays when the new one cannot be
/// read) and reopens the log files. Changes to what a reload cannot apply are
/// logged as needing a restart ([`restart_only`]). On success `running` becomes
/// the configuration read.
async fn reload(
    running: &mut Config,
    shared: &Arc<exchange::Shared>,
    token: &admin::TokenCell,
    listeners: &mut crate::listeners::Listeners,
    trigger: Trigger,
) -> Outcome {
    let started = std::time::Instant::now();
    shared.logs.request_reopen();
    let path = running.path.clone();
    // [dns] is read at start: the resolver in force answers the new rules.
    let rbl_limit = shared.dns().map(|d| d.max_lookups);
    let upstreams = shared.upstreams();
    let acme = shared.acme().cloned();
    let policy = shared.policy();
    let log_sender = shared.logs.clone();
    let plan = listeners.plan();
    let loaded = tokio::task::spawn_blocking(move || -> anyhow::Result<Reloaded> {
        let cfg = Config::load(&path)?;
        let waf = load_waf(&cfg, rbl_limit)?;
        crate::memory::collect();
        let access = load_access(&cfg)?;
        let pools = upstreams
            .reload(&cfg)
            .with_context(|| format!("{}", cfg.path.display()))?;
        let policy = exchange::Policy::build(&cfg, Some(&policy))
            .with_context(|| format!("{}", cfg.path.display()))?;
        let logs = log_sender
            .prepare(&log_targets(&cfg, Some(&waf)))
            .context("opening log files")?;
        // Last: binding new addresses (dropped, and so closed, if this fails).
        let listeners = crate::listeners::Prepared::new(
            &plan,
            &cfg,
            acme.as_ref(),
            &mut crate::upgrade::Inherited::none(),
        )?;
        Ok(Reloaded {
            cfg,
            waf,
            access,
            pools,
            policy,
            logs,
            listeners,
        })
    })
    .await;
    let Reloaded {
        cfg,
        waf: w,
        access,
        pools,
        policy,
        logs,
        listeners: prepared,
    } = match loaded {
        Ok(Ok(x)) => x,
        Ok(Err(e)) => {
            let why = format!("{e:#}");
            reload_failed(shared, &why);
            return Outcome::failed(trigger, started.elapsed(), why);
        }
        Err(e) => {
            let why = format!("the reload stopped: {e}");
            reload_failed(shared, &why);
            return Outcome::failed(trigger, started.elapsed(), why);
        }
    };
    // Everything is ready: put it in force.
    let log_changes = logs.changed();
    shared.logs.apply(logs);
    // The rules, pools and routes, limits and access lists: one snapshot, put in
    // force at once.
    let w = Arc::new(w);
    let pools = Arc::new(pools);
    let old = shared.put_in_force(exchange::PolicySnapshot {
        waf: w.clone(),
        upstreams: pools.clone(),
        policy: Arc::new(policy),
        access,
    });
    let applied = listeners.apply(prepared);
    old.upstreams.retire(&pools);
    pools.start();
    drop(old);
    let ignored = changed_restart_only(running, &cfg);
    if !ignored.is_empty() {
        tracing::warn!(
            "reload: {} changed in {}; a reload does not apply them, they take effect on restart",
            ignored.join(", "),
            cfg.path.display()
        );
    }
    match cfg.admin.as_ref().map(admin::AdminToken::load) {
        Some(Ok(t)) => token.replace(t),
        Some(Err(e)) => tracing::error!("reload: the admin token in force stays: {e}"),
        None => {}
    }
    for w in w.site_warnings() {
        tracing::warn!("reload: {w}");
    }
    if let Some(s) = w.shadow() {
        tracing::info!("reload: {}", s.summary());
        for w in s.warnings() {
            tracing::warn!("reload: [shadow] {w}");
        }
    }
    let list = |v: &[std::net::SocketAddr]| {
        v.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" ")
    };
    tracing::info!(
        "reloaded {} rules from {} files (sha256 {}), {} upstream pool(s) and {} route(s), {} listener certificate(s), {} listener(s) (added: [{}], changed: [{}], removed and draining: [{}]), {} rate limit(s), {} shape(s), {log_changes} log file change(s)",
        w.rule_count(),
        w.files().len(),
        w.hash(),
        cfg.upstreams.len(),
        cfg.routes.len().max(1),
        applied.certificates,
        listeners.len(),
        list(&applied.added),
        list(&applied.changed),
        list(&applied.removed),
        cfg.rate_limits.len(),
        cfg.shapes.len(),
    );
    let outcome = Outcome::ok(
        trigger,
        started.elapsed(),
        w.rule_count(),
        w.hash().to_owned(),
        ignored,
    );
    *running = cfg;
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: &str) -> Config {
        let text = format!(
            "[[listener]]\naddress = \"127.0.0.1:1\"\n[[upstream]]\nname = \"a\"\nservers = [\"127.0.0.1:2\"]\n{extra}"
        );
        Config::parse(&text, Path::new("/x.toml")).unwrap()
    }

    #[test]
    fn an_error_list_keeps_the_first_errors_and_counts_the_rest() {
        let mut list = ErrorList::default();
        assert!(list.is_empty());
        for i in 0..MAX_REPORTED_ERRORS + 3 {
            list.push(format!("error {i}"));
        }
        let mut other = ErrorList::default();
        other.push("another");
        list.append(other);
        assert_eq!(list.listed().len(), MAX_REPORTED_ERRORS);
        assert_eq!(list.total(), MAX_REPORTED_ERRORS + 4);
        let shown = list.to_string();
        assert!(shown.starts_with("error 0\nerror 1\n"), "{shown}");
        assert!(shown.ends_with("\nand 4 more error(s)"), "{shown}");
        let failed = CheckFailed {
            path: PathBuf::from("/p.toml"),
            errors: list,
        };
        assert!(
            failed
                .to_string()
                .ends_with("\nconfiguration file /p.toml test failed: 54 error(s)")
        );
    }

    #[test]
    fn a_reload_names_the_sections_it_does_not_apply() {
        let running = config("");
        let same_but_upstreams = config("[[route]]\nupstream = \"a\"\n");
        assert!(changed_restart_only(&running, &same_but_upstreams).is_empty());
        // Loaded with the rules: applied by a reload.
        let engine = config("[server]\nengine_failure = \"open\"\n");
        assert!(changed_restart_only(&running, &engine).is_empty());
        let threads = config("[server]\nworker_threads = 3\n[dns]\nmin_ttl = \"2s\"\n");
        assert_eq!(
            changed_restart_only(&running, &threads),
            ["[server]", "[dns]"]
        );
        let admin = config("[admin]\naddress = \"127.0.0.1:9\"\n");
        let token = config("[admin]\naddress = \"127.0.0.1:9\"\ntoken_file = \"t\"\n");
        assert!(changed_restart_only(&admin, &token).is_empty());
    }
}
