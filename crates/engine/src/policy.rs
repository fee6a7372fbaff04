//! Per-site policies over one shared base rule set.
//!
//! A server that protects several sites (virtual hosts, or routes by path) loads
//! its base rule set (CRS) once, as one [`Ruleset`] behind an `Arc`, and gives each
//! site a [`Policy`]: a small overlay bound to that base. A site's transactions are
//! made with [`Transaction::with_policy`](crate::Transaction::with_policy) and run
//! the base's compiled rules with the site's changes; nothing of the base is copied
//! per site.
//!
//! What a policy holds, and how a transaction uses it:
//!
//! - **Engine mode**: `On`, `DetectionOnly` or `Off` in place of `SecRuleEngine`
//!   (as a `ctl:ruleEngine` would set it before the first rule).
//! - **Seeded TX variables**: the paranoia level sets `tx.blocking_paranoia_level`
//!   and `tx.detection_paranoia_level` (CRS v4's names) before the first rule runs,
//!   so CRS's initialisation (901120, 901125, which set them only when unset) keeps
//!   them.
//! - **The site's own rules** (`SecRule`, `SecAction`, `SecMarker`,
//!   `SecDefaultAction`), compiled once into an overlay whose rules run before the
//!   base's rules of each phase, as CRS's `REQUEST-900` exclusion file does: their
//!   `ctl:ruleRemove*` actions act on the base's rules for that transaction.
//! - **Configure-time exclusions** of base rules: `SecRuleRemoveById`,
//!   `SecRuleRemoveByTag`, `SecRuleRemoveByMsg`, and the `!VAR` exclusions of
//!   `SecRuleUpdateTargetById|ByTag|ByMsg`. They are kept as the removal set and
//!   target-exclusion table a transaction's `ctl:ruleRemove*` actions fill, and a
//!   site's transactions start with them filled.
//! - **Limits**: `SecRequestBodyLimit`, `SecRequestBodyNoFilesLimit`,
//!   `SecArgumentsLimit` and `SecRequestBodyJsonDepthLimit` for the site's
//!   transactions.
//!
//! Engine settings (`SecRuleEngine`, `SecRequestBodyLimit`, ...) are refused in a
//! site's rules (the policy's own settings take their place), as are changes to a
//! base rule that would copy it: `SecRuleUpdateActionById` on a base rule, and
//! target additions or replacements of a base rule.
//!
//! The base rule set's load-time folds ([`crate::ruleset::fold`]) assume every
//! transaction starts with an empty TX and walks the base's rules alone. When a
//! policy is built, the abstract run is made again over the site's walk (its
//! overlay first, its removals, its seeds); where it agrees with the base's folds
//! the site's transactions use them, otherwise the policy keeps a fold table of its
//! own over the base's links (a few KiB: a seeded paranoia level decides CRS's
//! level checks differently). Only a target exclusion of a TX variable, which the
//! abstract run does not model, makes a site evaluate every rule as written
//! ([`Policy::keeps_folds`]).

use crate::actions::Action;
use crate::actions::CollectionKind;
use crate::config::RuleEngineMode;
use crate::error::LoadError;
use crate::rule::{Entry, Rule};
use crate::ruleset::compile::{OverlayBuild, PendingTarget};
use crate::ruleset::tags::TagSet;
use crate::ruleset::{ChainNode, RblUse, Ruleset, RulesetBuilder};
use crate::transaction::eval::TargetRemoval;
use crate::transaction::removed::RemovedIds;
use crate::variables::{Exclusion, Var};
use seclang::FileSource;
use std::path::Path;
use std::sync::Arc;

/// The TX variables CRS v4 reads its paranoia levels from.
pub const BLOCKING_PARANOIA_TX: &str = "blocking_paranoia_level";
/// See [`BLOCKING_PARANOIA_TX`].
pub const DETECTION_PARANOIA_TX: &str = "detection_paranoia_level";

/// Why a policy could not be built.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PolicyError {
    /// The site's rules do not load (file:line and the reason, as for a rule set):
    /// invalid SecLang, an engine setting, an exclusion naming no loaded rule, a
    /// change that would copy a base rule, a rule id the base already has.
    #[error(transparent)]
    Rules(#[from] LoadError),
    /// A paranoia level outside 1 to 4.
    #[error("paranoia level {0}: expected 1 to 4")]
    ParanoiaLevel(u8),
    /// A detection paranoia level below the blocking one.
    #[error("detection paranoia level {detection} is below the paranoia level {blocking}")]
    DetectionBelowBlocking {
        /// The blocking level.
        blocking: u8,
        /// The detection level.
        detection: u8,
    },
    /// A base rule sets a paranoia variable on every request, so the policy's seed
    /// would never be seen.
    #[error(
        "{at}: rule {id} sets tx.{var} on every request, so a site's paranoia level cannot take effect; comment it out (as crs-setup.conf ships it: CRS then starts at level 1, 901120) or make it set the variable only when unset (SecRule &TX:{var} \"@eq 0\" ...)"
    )]
    ParanoiaOverridden {
        /// Where the rule is written.
        at: String,
        /// Its id.
        id: i64,
        /// The variable it sets.
        var: &'static str,
    },
    /// A limit of 0.
    #[error("{0} must be at least 1")]
    ZeroLimit(&'static str),
}

/// Per-site limits; `None` keeps the base rule set's setting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PolicyLimits {
    /// `SecRequestBodyLimit`: the request body bytes the engine takes.
    pub request_body_limit: Option<usize>,
    /// `SecRequestBodyNoFilesLimit`: the body bytes without files.
    pub request_body_no_files_limit: Option<usize>,
    /// `SecArgumentsLimit`: arguments kept (query string and body together).
    pub arguments_limit: Option<usize>,
    /// `SecRequestBodyJsonDepthLimit`: how deep a JSON body may nest.
    pub json_depth_limit: Option<usize>,
}

/// A site's own rules, per phase, compiled against the base rule set.
#[derive(Debug)]
pub(crate) struct Overlay {
    /// Entries per phase (markers in every phase); they run before the base's.
    pub phases: [Vec<Entry>; 5],
    /// Where the site's walk (these entries, then the base's) goes on after a
    /// rule matched.
    pub jumps: crate::ruleset::jumps::Jumps,
    /// The base's transformation prefixes and the overlay's new ones, when it has
    /// any (otherwise the base's serve).
    pub chain_nodes: Option<Vec<ChainNode>>,
    /// What the overlay's `@rbl` rules read (positions in the overlay's phases).
    pub rbl_use: RblUse,
    /// Whether an overlay rule reads the input table.
    pub uses_inputs: bool,
    /// `block` for the overlay's rules.
    pub default_disruptive: [(crate::actions::Disruptive, Option<u16>); 5],
}

/// What a site removes from the base for its transactions: the same sets a
/// transaction's `ctl:ruleRemove*` actions fill.
#[derive(Debug, Clone, Default)]
pub(crate) struct Removals {
    pub ids: RemovedIds,
    pub tags: TagSet,
    pub msgs: Vec<String>,
    pub targets: Vec<(TargetRemoval, Exclusion)>,
}

impl Removals {
    /// Whether `rule` is removed, as a transaction decides it.
    fn removes(&self, rule: &Rule) -> bool {
        rule.id.is_some_and(|id| self.ids.contains(id))
            || rule.tag_set.intersects(&self.tags)
            || rule
                .meta
                .msg
                .as_ref()
                .is_some_and(|m| self.msgs.iter().any(|x| x == m.text()))
    }
}

/// A site's policy over a shared base rule set: see the module documentation.
/// Share it between transactions with an `Arc`.
#[derive(Debug)]
pub struct Policy {
    pub(crate) base: Arc<Ruleset>,
    pub(crate) name: String,
    pub(crate) mode: Option<RuleEngineMode>,
    pub(crate) seeds: Vec<(Vec<u8>, Vec<u8>)>,
    pub(crate) limits: PolicyLimits,
    pub(crate) overlay: Overlay,
    pub(crate) removals: Removals,
    pub(crate) folds: crate::ruleset::fold::SiteFolds,
    /// The plan of the site's walk: its overlay, then the base.
    pub(crate) plan: crate::plan::Plan,
    warnings: Vec<String>,
    files: Vec<std::path::PathBuf>,
    hash: u64,
}

impl Policy {
    /// For tests: checks the table of where the site's walk (its overlay, then
    /// the base) goes on after a match against the flow walked entry by entry.
    #[doc(hidden)]
    pub fn check_jumps(&self) -> Result<(), String> {
        self.overlay
            .jumps
            .check(Some(&self.overlay.phases), &self.base.phases)
    }

    /// The base rule set the policy is bound to.
    pub fn base(&self) -> &Arc<Ruleset> {
        &self.base
    }

    /// The site's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The engine mode of the site's transactions.
    pub fn rule_engine(&self) -> RuleEngineMode {
        self.mode.unwrap_or(self.base.config().rule_engine)
    }

    /// The site's limits (`None` where the base's setting stands).
    pub fn limits(&self) -> &PolicyLimits {
        &self.limits
    }

    /// The request body limit of the site's transactions (`SecRequestBodyLimit`).
    pub fn request_body_limit(&self) -> usize {
        self.limits
            .request_body_limit
            .unwrap_or(self.base.config().request_body_limit)
    }

    /// The TX variables set before the first rule, lower-case.
    pub fn seeds(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.seeds.iter().map(|(k, v)| (k.as_slice(), v.as_slice()))
    }

    /// The site's own rules (chains counted once).
    pub fn rule_count(&self) -> usize {
        self.overlay
            .phases
            .iter()
            .flatten()
            .filter(|e| matches!(e, Entry::Rule(_)))
            .count()
    }

    /// The site's own rules of a phase (1-5), in order.
    pub fn rules(&self, phase: u8) -> impl Iterator<Item = &Rule> {
        let idx = usize::from(phase.clamp(1, 5) - 1);
        self.overlay.phases[idx].iter().filter_map(|e| match e {
            Entry::Rule(r) => Some(r.as_ref()),
            Entry::Marker(_) => None,
        })
    }

    /// Whether the site's transactions skip the base rule `id` (a configure-time
    /// removal by id, tag or message).
    pub fn removes(&self, id: i64) -> bool {
        self.base
            .rule_by_id(id)
            .is_some_and(|r| self.removals.removes(r))
    }

    /// Whether the site's transactions use load-time folds (see the module
    /// documentation): the base rule set's, or a table of the site's own when its
    /// walk decides them differently. When not, they evaluate every rule as
    /// written, which costs CPU but never changes a verdict.
    pub fn keeps_folds(&self) -> bool {
        !matches!(self.folds, crate::ruleset::fold::SiteFolds::Off)
    }

    /// Whether the site's transactions use a fold table of the site's own (its
    /// walk decides some rules differently from the base's: a seeded paranoia
    /// level, say), rather than the base rule set's.
    pub fn own_folds(&self) -> bool {
        matches!(self.folds, crate::ruleset::fold::SiteFolds::Own { .. })
    }

    /// Load warnings of the site's rules.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The files the site's rules were read from, in load order.
    pub fn files(&self) -> &[std::path::PathBuf] {
        &self.files
    }

    /// A hash of the site's directives, to compare deployments.
    pub fn content_hash(&self) -> u64 {
        self.hash
    }

    /// What the `@rbl` rules of the base and of the overlay read, per phase (index
    /// 0 for phase 1): whether the phase holds an `@rbl` rule on a value other than
    /// the client's address.
    pub fn rbl_other_input_phases(&self) -> [bool; 5] {
        let b = self.base.rbl_use().other_input_phases();
        let o = self.overlay.rbl_use.other_input_phases();
        std::array::from_fn(|i| b[i] || o[i])
    }

    /// Whether the base or the overlay has `@rbl` rules.
    pub fn has_rbl_rules(&self) -> bool {
        let (b, o) = (self.base.rbl_use(), &self.overlay.rbl_use);
        b.other_inputs || o.other_inputs || !b.client_zones.is_empty() || !o.client_zones.is_empty()
    }

    /// The block-list names the `@rbl` rules on the client's address (base and
    /// overlay) will look up for `client`.
    pub fn rbl_client_names(&self, client: std::net::IpAddr) -> Vec<String> {
        let mut names = self.base.rbl_client_names(client);
        let ip = client.to_canonical().to_string();
        let key = self.base.config().httpbl_key.as_deref();
        for zone in &self.overlay.rbl_use.client_zones {
            if let Ok(n) = crate::lookups::rbl_name(ip.as_bytes(), zone, key)
                && !names.contains(&n)
            {
                names.push(n);
            }
        }
        names
    }

    /// The transformation prefixes of the site's transactions.
    pub(crate) fn chain_nodes(&self) -> &[ChainNode] {
        self.overlay
            .chain_nodes
            .as_deref()
            .unwrap_or(&self.base.chain_nodes)
    }
}

/// Builds a [`Policy`] for one site over a base rule set.
pub struct PolicyBuilder {
    base: Arc<Ruleset>,
    name: String,
    rules: RulesetBuilder,
    mode: Option<RuleEngineMode>,
    paranoia: Option<(u8, u8)>,
    limits: PolicyLimits,
}

impl std::fmt::Debug for PolicyBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyBuilder")
            .field("name", &self.name)
            .finish()
    }
}

impl PolicyBuilder {
    /// A policy named `name` over `base`, whose rule files are read through
    /// `source`.
    pub fn new(
        base: &Arc<Ruleset>,
        name: &str,
        source: Arc<dyn FileSource + Send + Sync>,
    ) -> PolicyBuilder {
        PolicyBuilder {
            base: base.clone(),
            name: name.to_owned(),
            rules: RulesetBuilder::for_overlay(base, source),
            mode: None,
            paranoia: None,
            limits: PolicyLimits::default(),
        }
    }

    /// Loads a SecLang file of the site's (or every file a glob matches).
    pub fn add_file(&mut self, path: &Path) -> Result<&mut Self, PolicyError> {
        self.rules.add_file(path)?;
        Ok(self)
    }

    /// Loads SecLang text of the site's; `name` stands for its file name.
    pub fn add_text(&mut self, text: &str, name: &str) -> Result<&mut Self, PolicyError> {
        self.rules.add_text(text, name)?;
        Ok(self)
    }

    /// The engine mode of the site's transactions, in place of `SecRuleEngine`.
    pub fn rule_engine(&mut self, mode: RuleEngineMode) -> &mut Self {
        self.mode = Some(mode);
        self
    }

    /// The paranoia level (1 to 4) and, when given, the detection paranoia level
    /// (at least the paranoia level; it defaults to it): seeded as
    /// `tx.blocking_paranoia_level` and `tx.detection_paranoia_level`.
    pub fn paranoia_level(
        &mut self,
        blocking: u8,
        detection: Option<u8>,
    ) -> Result<&mut Self, PolicyError> {
        let detection = detection.unwrap_or(blocking);
        for l in [blocking, detection] {
            if !(1..=4).contains(&l) {
                return Err(PolicyError::ParanoiaLevel(l));
            }
        }
        if detection < blocking {
            return Err(PolicyError::DetectionBelowBlocking {
                blocking,
                detection,
            });
        }
        self.paranoia = Some((blocking, detection));
        Ok(self)
    }

    /// The site's limits.
    pub fn limits(&mut self, limits: PolicyLimits) -> Result<&mut Self, PolicyError> {
        for (v, name) in [
            (limits.request_body_limit, "request_body_limit"),
            (
                limits.request_body_no_files_limit,
                "request_body_no_files_limit",
            ),
            (limits.arguments_limit, "arguments_limit"),
            (limits.json_depth_limit, "json_depth_limit"),
        ] {
            if v == Some(0) {
                return Err(PolicyError::ZeroLimit(name));
            }
        }
        self.limits = limits;
        Ok(self)
    }

    /// Compiles the overlay and checks the policy against the base.
    pub fn build(self) -> Result<Policy, PolicyError> {
        let OverlayBuild {
            mut phases,
            chain_nodes,
            default_disruptive,
            state,
            warnings,
            files,
            hash,
        } = self.rules.build_overlay()?;
        let mut removals = Removals::default();
        removals.ids.add(&state.removed_ids);
        for sel in &state.removed_tags {
            removals.tags.union_with(&sel.tags);
        }
        removals.msgs = state.removed_msgs.clone();
        removals.targets = state
            .target_removals
            .iter()
            .map(|(t, e)| {
                let t = match t {
                    PendingTarget::Ids(r) => TargetRemoval::Ids(r.clone()),
                    PendingTarget::Tag(sel) => TargetRemoval::Tag(sel.tags.clone()),
                    PendingTarget::Msg(m) => TargetRemoval::Msg(m.clone()),
                };
                (t, e.clone())
            })
            .collect();
        let mut seeds = Vec::new();
        if let Some((blocking, detection)) = self.paranoia {
            check_paranoia_not_overridden(&self.base)?;
            seeds.push((
                BLOCKING_PARANOIA_TX.as_bytes().to_vec(),
                blocking.to_string().into_bytes(),
            ));
            seeds.push((
                DETECTION_PARANOIA_TX.as_bytes().to_vec(),
                detection.to_string().into_bytes(),
            ));
        }
        let removed = |r: &Rule| removals.removes(r);
        let drops_tx_target = |l: &Rule| {
            removals
                .targets
                .iter()
                .any(|(sel, e)| e.var == Var::Tx && sel.applies(l))
        };
        let (marks, folds) = crate::ruleset::fold::site_folds(
            &self.base.phases,
            &crate::ruleset::fold::SiteFlow {
                overlay: &phases,
                removed: &removed,
                seeds: &seeds,
                drops_tx_target: &drops_tx_target,
            },
            self.base.config().unicode_map.as_deref(),
        );
        let mut marks = marks.into_iter();
        for e in phases.iter_mut().flatten() {
            if let Entry::Rule(r) = e {
                let mut link = Some(r.as_mut());
                while let Some(l) = link {
                    l.breaks_folds = marks.next().unwrap_or(true);
                    link = l.chain.as_deref_mut();
                }
            }
        }
        let mut warnings = warnings;
        warnings.extend(unknown_ctl_ids(&self.base, &phases));
        let rbl_use = RblUse::of(&phases);
        let uses_inputs = crate::ruleset::uses_inputs(&phases);
        let jumps = crate::ruleset::jumps::Jumps::of(Some(&phases), &self.base.phases);
        let plan = crate::plan::Plan::build(&crate::plan::WalkParts {
            overlay: Some(&phases),
            base: &self.base.phases,
            jumps: &jumps,
            folds: Some(&folds),
            pauses: (Some(&rbl_use.entries), &self.base.rbl_use.entries),
            defaults: (Some(&default_disruptive), &self.base.default_disruptive),
        });
        Ok(Policy {
            plan,
            base: self.base,
            name: self.name,
            mode: self.mode,
            seeds,
            limits: self.limits,
            overlay: Overlay {
                phases,
                jumps,
                chain_nodes,
                rbl_use,
                uses_inputs,
                default_disruptive,
            },
            removals,
            folds,
            warnings,
            files,
            hash,
        })
    }
}

/// Warnings for the `ctl:ruleRemoveById` and `ctl:ruleRemoveTargetById` actions of
/// the site's rules whose ids (or ranges) name no loaded rule: such an exclusion
/// does nothing, most likely a typo. (They are decided per request, so they are not
/// refused as the configure-time exclusions are.)
fn unknown_ctl_ids(base: &Ruleset, overlay: &[Vec<Entry>; 5]) -> Vec<String> {
    use crate::actions::Ctl;
    let rules = || {
        (1..=5)
            .flat_map(|p| base.rules(p))
            .chain(overlay.iter().flatten().filter_map(|e| match e {
                Entry::Rule(r) => Some(r.as_ref()),
                Entry::Marker(_) => None,
            }))
    };
    let mut out = Vec::new();
    for link in overlay
        .iter()
        .flatten()
        .filter_map(|e| match e {
            Entry::Rule(r) => Some(r.as_ref()),
            Entry::Marker(_) => None,
        })
        .flat_map(Rule::links)
    {
        for a in &link.full_match_actions {
            let (name, ranges) = match a {
                Action::Ctl(Ctl::RuleRemoveById(r)) => ("ruleRemoveById", r),
                Action::Ctl(Ctl::RuleRemoveTargetById(r, _)) => ("ruleRemoveTargetById", r),
                _ => continue,
            };
            for r in ranges {
                if !rules().any(|x| x.id.is_some_and(|id| r.contains(id))) {
                    let what = if r.start == r.end {
                        format!("{}", r.start)
                    } else {
                        format!("{}-{}", r.start, r.end)
                    };
                    out.push(format!(
                        "{}:{}: ctl:{name} names {what}, which no loaded rule has: it removes nothing",
                        link.span.file.display(),
                        link.span.line
                    ));
                }
            }
        }
    }
    out
}

/// Refuses a base whose rules set a paranoia variable on every request (CRS's
/// 900000 and 900001, `SecAction`s, once uncommented in crs-setup.conf): a site's
/// seed would be overwritten before any rule reads it. (CRS's own 901120 and
/// 901125 set them only when unset.)
fn check_paranoia_not_overridden(base: &Ruleset) -> Result<(), PolicyError> {
    for r in (1..=5).flat_map(|p| base.rules(p)) {
        if !r.targets.is_empty() {
            continue;
        }
        for a in &r.match_actions {
            let Action::SetVar {
                collection: CollectionKind::Tx,
                name,
                ..
            } = a
            else {
                continue;
            };
            for var in [BLOCKING_PARANOIA_TX, DETECTION_PARANOIA_TX] {
                if name.is_literal() && name.text().eq_ignore_ascii_case(var) {
                    return Err(PolicyError::ParanoiaOverridden {
                        at: format!("{}:{}", r.span.file.display(), r.span.line),
                        id: r.id.unwrap_or_default(),
                        var,
                    });
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Transaction, TxContext};

    fn base(text: &str) -> Arc<Ruleset> {
        let mut b = RulesetBuilder::new(Arc::new(seclang::MemorySource::new()));
        b.add_text(text, "base.conf").expect("base loads");
        Arc::new(b.build().expect("base builds"))
    }

    fn builder(base: &Arc<Ruleset>, name: &str) -> PolicyBuilder {
        PolicyBuilder::new(base, name, Arc::new(seclang::MemorySource::new()))
    }

    fn policy(base: &Arc<Ruleset>, name: &str, text: &str) -> Arc<Policy> {
        let mut b = builder(base, name);
        b.add_text(text, &format!("{name}.conf"))
            .expect("site loads");
        Arc::new(b.build().expect("site builds"))
    }

    fn error(base: &Arc<Ruleset>, text: &str) -> String {
        let mut b = builder(base, "bad");
        match b.add_text(text, "bad.conf") {
            Err(e) => e.to_string(),
            Ok(_) => b.build().expect_err("refused").to_string(),
        }
    }

    use crate::transaction::test_get::get;

    fn status_of(p: Option<&Arc<Policy>>, rs: &Arc<Ruleset>, uri: &str) -> Option<u16> {
        let tx = match p {
            Some(p) => Transaction::with_policy(p.clone(), TxContext::default()),
            None => Transaction::new(rs.clone(), TxContext::default()),
        };
        get(tx, uri).0.map(|i| i.status)
    }

    const BASE: &str = r#"
SecRuleEngine On
SecDefaultAction "phase:1,log,auditlog,deny,status:418"
SecDefaultAction "phase:2,log,auditlog,deny,status:419"
SecRule TX:flag "@eq 1" "id:10,phase:1,deny,status:401,tag:'flags'"
SecRule ARGS "@contains attack" "id:20,phase:2,deny,status:403,tag:'attack-generic',msg:'Attack'"
SecRule ARGS "@contains evil" "id:21,phase:2,block,tag:'attack-evil',msg:'Evil'"
SecMarker END-BASE-1
"#;

    #[test]
    fn overlay_rules_run_before_the_base_rules_of_each_phase() {
        let rs = base(BASE);
        let site = policy(
            &rs,
            "flagged",
            r#"SecAction "id:100,phase:1,pass,nolog,setvar:tx.flag=1""#,
        );
        assert!(Arc::ptr_eq(site.base(), &rs));
        assert_eq!(site.rule_count(), 1);
        assert_eq!(status_of(Some(&site), &rs, "/"), Some(401));
        assert_eq!(status_of(None, &rs, "/"), None);
        // The base's own rules still run for the site.
        let plain = policy(&rs, "plain", "");
        assert_eq!(status_of(Some(&plain), &rs, "/?a=attack"), Some(403));
        assert_eq!(status_of(Some(&plain), &rs, "/?a=evil"), Some(419));
    }

    #[test]
    fn runtime_ctl_exclusions_of_the_overlay_act_on_the_base() {
        let rs = base(BASE);
        let site = policy(
            &rs,
            "uploads",
            r#"SecRule REQUEST_FILENAME "@beginsWith /upload" "id:101,phase:1,pass,nolog,ctl:ruleRemoveById=20""#,
        );
        assert_eq!(status_of(Some(&site), &rs, "/upload?a=attack"), None);
        assert_eq!(status_of(Some(&site), &rs, "/other?a=attack"), Some(403));
        assert_eq!(status_of(None, &rs, "/upload?a=attack"), Some(403));
    }

    #[test]
    fn configure_time_removals_apply_to_their_site_only() {
        let rs = base(BASE);
        let by_id = policy(&rs, "a", "SecRuleRemoveById 20");
        let by_tag = policy(&rs, "b", "SecRuleRemoveByTag ^attack-gen");
        let by_msg = policy(&rs, "c", "SecRuleRemoveByMsg Attack");
        let target = policy(&rs, "d", r#"SecRuleUpdateTargetById 20 "!ARGS:a""#);
        let other = policy(&rs, "e", "");
        // Interleaved, so that a removal left in shared state would show.
        for _ in 0..2 {
            for p in [&by_id, &by_tag, &by_msg, &target] {
                assert_eq!(status_of(Some(p), &rs, "/?a=attack"), None, "{}", p.name());
                assert_eq!(status_of(Some(&other), &rs, "/?a=attack"), Some(403));
                assert_eq!(status_of(None, &rs, "/?a=attack"), Some(403));
            }
        }
        // The target exclusion leaves the rule on other arguments.
        assert_eq!(status_of(Some(&target), &rs, "/?b=attack"), Some(403));
        assert!(by_id.removes(20) && by_tag.removes(20) && by_msg.removes(20));
        assert!(!by_id.removes(21) && !other.removes(20));
        // The base is not touched.
        assert!(rs.rule_by_id(20).unwrap().exclusions.is_empty());
    }

    #[test]
    fn detection_only_and_off_sites_never_disrupt() {
        let rs = base(BASE);
        let mut b = builder(&rs, "watch");
        b.rule_engine(RuleEngineMode::DetectionOnly);
        let watch = Arc::new(b.build().unwrap());
        let (i, mut tx) = get(
            Transaction::with_policy(watch.clone(), TxContext::default()),
            "/?a=attack",
        );
        assert_eq!(i, None);
        assert_eq!(tx.matched_rule_ids(), vec![20]);
        assert!(
            tx.events()
                .filter_map(crate::events::Event::into_log_line)
                .collect::<Vec<_>>()
                .iter()
                .any(|l| l.contains("[id \"20\"]"))
        );
        let mut b = builder(&rs, "off");
        b.rule_engine(RuleEngineMode::Off);
        let off = Arc::new(b.build().unwrap());
        let (i, tx) = get(
            Transaction::with_policy(off, TxContext::default()),
            "/?a=attack",
        );
        assert_eq!(i, None);
        assert!(tx.matched_rule_ids().is_empty());
        assert_eq!(status_of(None, &rs, "/?a=attack"), Some(403));
    }

    #[test]
    fn block_in_the_overlay_takes_the_default_action() {
        let rs = base(BASE);
        let site = policy(
            &rs,
            "s",
            r#"SecRule ARGS "@contains nasty" "id:102,phase:1,block""#,
        );
        assert_eq!(status_of(Some(&site), &rs, "/?a=nasty"), Some(418));
        let own = policy(
            &rs,
            "t",
            "SecDefaultAction \"phase:1,log,deny,status:409\"\nSecRule ARGS \"@contains nasty\" \"id:102,phase:1,block\"",
        );
        assert_eq!(status_of(Some(&own), &rs, "/?a=nasty"), Some(409));
        // The base keeps its own.
        assert_eq!(status_of(Some(&own), &rs, "/?a=evil"), Some(419));
    }

    #[test]
    fn ctl_removals_of_ids_no_rule_has_are_warned_about() {
        let rs = base(BASE);
        let site = policy(
            &rs,
            "w",
            "SecRule ARGS:x \"@streq 1\" \"id:130,phase:1,pass,nolog,ctl:ruleRemoveById=20,ctl:ruleRemoveById=99999,ctl:ruleRemoveTargetById=30-40;ARGS:a\"",
        );
        let w = site.warnings().join("\n");
        assert!(
            w.contains("w.conf:1: ctl:ruleRemoveById names 99999"),
            "{w}"
        );
        assert!(w.contains("ctl:ruleRemoveTargetById names 30-40"), "{w}");
        assert!(!w.contains("names 20"), "{w}");
    }

    #[test]
    fn a_skip_after_of_the_overlay_may_jump_over_base_rules() {
        let rs = base(BASE);
        let site = policy(
            &rs,
            "skip",
            r#"SecAction "id:103,phase:1,pass,nolog,setvar:tx.flag=1,skipAfter:END-BASE-1""#,
        );
        // 10 (phase 1) is skipped over: the flag does not deny.
        assert_eq!(status_of(Some(&site), &rs, "/"), None);
    }

    #[test]
    fn new_transformation_pipelines_of_the_overlay_share_the_cache() {
        let rs = base(
            "SecRuleEngine On\nSecRule ARGS \"@contains attack\" \"id:20,phase:2,t:lowercase,deny,status:403\"",
        );
        let site = policy(
            &rs,
            "t",
            "SecRule ARGS \"@contains xyz\" \"id:110,phase:2,t:lowercase,t:removeWhitespace,deny,status:406\"\nSecRule ARGS \"@contains q\" \"id:111,phase:2,t:lowercase,deny,status:407\"",
        );
        assert!(site.overlay.chain_nodes.as_ref().unwrap().len() > rs.chain_nodes.len());
        assert_eq!(status_of(Some(&site), &rs, "/?a=X%20Y%20Z"), Some(406));
        assert_eq!(status_of(Some(&site), &rs, "/?a=ATTACK"), Some(403));
        assert_eq!(status_of(Some(&site), &rs, "/?a=Q"), Some(407));
    }

    #[test]
    fn limits_apply_to_the_site_transactions() {
        let rs = base("SecRuleEngine On\nSecRequestBodyAccess On\nSecArgumentsLimit 10");
        let mut b = builder(&rs, "many");
        b.limits(PolicyLimits {
            arguments_limit: Some(3),
            request_body_limit: Some(5),
            ..Default::default()
        })
        .unwrap();
        let site = Arc::new(b.build().unwrap());
        assert_eq!(site.request_body_limit(), 5);
        let (i, _) = get(
            Transaction::with_policy(site.clone(), TxContext::default()),
            "/?a=1&b=2&c=3&d=4",
        );
        assert_eq!(i.map(|i| i.status), Some(400));
        assert_eq!(status_of(None, &rs, "/?a=1&b=2&c=3&d=4"), None);
        let mut tx = Transaction::with_policy(site, TxContext::default());
        assert_eq!(tx.request_body_limit(), 5);
        tx.set_request_line(b"POST", b"/", b"HTTP/1.1");
        tx.add_request_header(b"Content-Type", b"application/octet-stream");
        assert_eq!(tx.process_request_headers(), None);
        assert_eq!(
            tx.append_request_body(b"123456"),
            crate::BodyAppend::LimitReached { reject: true }
        );
        let mut b = builder(&rs, "zero");
        assert!(matches!(
            b.limits(PolicyLimits {
                arguments_limit: Some(0),
                ..Default::default()
            }),
            Err(PolicyError::ZeroLimit("arguments_limit"))
        ));
    }

    #[test]
    fn site_rules_are_refused_where_they_would_copy_or_reconfigure() {
        let rs = base(BASE);
        let e = error(&rs, "SecRuleRemoveById 20 999999");
        assert!(
            e.contains("bad.conf:1") && e.contains("no rule with id 999999"),
            "{e}"
        );
        let e = error(&rs, "SecRuleRemoveById 500-600");
        assert!(e.contains("no rule with an id in 500-600"), "{e}");
        let e = error(&rs, "SecRuleRemoveByTag ^nothing$");
        assert!(e.contains("no loaded rule has a tag matching"), "{e}");
        let e = error(&rs, r#"SecRuleUpdateTargetById 999 "!ARGS:a""#);
        assert!(
            e.contains("SecRuleUpdateTargetById: no rule with id 999"),
            "{e}"
        );
        let e = error(&rs, r#"SecRuleUpdateTargetById 20 "ARGS_NAMES""#);
        assert!(e.contains("can only exclude targets"), "{e}");
        let e = error(&rs, r#"SecRuleUpdateActionById 20 "status:404""#);
        assert!(e.contains("belongs to the base rule set"), "{e}");
        let e = error(&rs, "SecRuleEngine DetectionOnly");
        assert!(e.contains("SecRuleEngine is an engine setting"), "{e}");
        let e = error(&rs, "SecRequestBodyLimit 5");
        assert!(e.contains("rule_engine, paranoia_level, limits"), "{e}");
        let e = error(&rs, r#"SecAction "id:20,phase:1,pass""#);
        assert!(e.contains("duplicate rule id"), "{e}");
        // The site's own rules can be updated.
        let ok = policy(
            &rs,
            "own",
            "SecRule ARGS \"@contains x\" \"id:120,phase:1,deny,status:403\"\nSecRuleUpdateActionById 120 \"status:404\"\nSecRuleUpdateTargetById 120 \"!ARGS:skip\"",
        );
        assert_eq!(status_of(Some(&ok), &rs, "/?a=x"), Some(404));
        assert_eq!(status_of(Some(&ok), &rs, "/?skip=x"), None);
    }

    const FOLDED: &str = r#"
SecRuleEngine On
SecRule &TX:blocking_paranoia_level "@eq 0" "id:1,phase:1,pass,nolog,setvar:tx.blocking_paranoia_level=1"
SecRule &TX:detection_paranoia_level "@eq 0" "id:2,phase:1,pass,nolog,setvar:tx.detection_paranoia_level=%{tx.blocking_paranoia_level}"
SecRule TX:DETECTION_PARANOIA_LEVEL "@lt 1" "id:10,phase:1,pass,nolog,skipAfter:END-1"
SecRule ARGS "@contains attack" "id:11,phase:1,deny,status:403"
SecRule TX:DETECTION_PARANOIA_LEVEL "@lt 2" "id:12,phase:1,pass,nolog,skipAfter:END-1"
SecRule ARGS "@contains paranoid" "id:13,phase:1,deny,status:406"
SecMarker END-1
SecRule TX:DETECTION_PARANOIA_LEVEL "@lt 2" "id:20,phase:2,pass,nolog,skipAfter:END-2"
SecRule ARGS "@contains paranoid" "id:21,phase:2,deny,status:407"
SecMarker END-2
"#;

    #[test]
    fn paranoia_levels_are_seeded_and_the_folds_follow() {
        let rs = base(FOLDED);
        // The base folds the checks at level 1.
        assert!(rs.rule_by_id(12).unwrap().folded.is_some());
        let mut b = builder(&rs, "pl2");
        b.paranoia_level(2, None).unwrap();
        let pl2 = Arc::new(b.build().unwrap());
        assert!(pl2.keeps_folds() && pl2.own_folds());
        let mut b = builder(&rs, "pl1");
        b.paranoia_level(1, None).unwrap();
        let pl1 = Arc::new(b.build().unwrap());
        // Even the level the base arrives at is a different walk (rule 1 does not
        // match when the level is seeded): the site has folds of its own.
        assert!(pl1.own_folds());
        let plain = policy(&rs, "plain", "");
        assert!(plain.keeps_folds() && !plain.own_folds());
        for _ in 0..2 {
            assert_eq!(status_of(Some(&pl2), &rs, "/?a=paranoid"), Some(406));
            assert_eq!(status_of(Some(&pl1), &rs, "/?a=paranoid"), None);
            assert_eq!(status_of(None, &rs, "/?a=paranoid"), None);
            assert_eq!(status_of(Some(&pl2), &rs, "/?a=attack"), Some(403));
        }
        let (_, tx) = get(Transaction::with_policy(pl2, TxContext::default()), "/");
        assert_eq!(tx.tx_var("blocking_paranoia_level"), Some(&b"2"[..]));
        assert_eq!(tx.tx_var("detection_paranoia_level"), Some(&b"2"[..]));
        let mut b = builder(&rs, "x");
        assert!(matches!(
            b.paranoia_level(5, None),
            Err(PolicyError::ParanoiaLevel(5))
        ));
        assert!(matches!(
            b.paranoia_level(3, Some(2)),
            Err(PolicyError::DetectionBelowBlocking { .. })
        ));
        let mut b = builder(&rs, "detect");
        b.paranoia_level(1, Some(2)).unwrap();
        let detect = Arc::new(b.build().unwrap());
        assert_eq!(status_of(Some(&detect), &rs, "/?a=paranoid"), Some(406));
    }

    #[test]
    fn an_overlay_that_writes_what_the_folds_read_runs_without_them() {
        let rs = base(FOLDED);
        let site = policy(
            &rs,
            "raise",
            r#"SecAction "id:100,phase:1,pass,nolog,setvar:tx.detection_paranoia_level=2""#,
        );
        assert!(site.own_folds());
        assert_eq!(status_of(Some(&site), &rs, "/?a=paranoid"), Some(406));
        // Writing something no fold reads keeps the base's.
        let other = policy(
            &rs,
            "other",
            r#"SecAction "id:100,phase:1,pass,nolog,setvar:tx.unrelated=2""#,
        );
        assert!(other.keeps_folds() && !other.own_folds());
        // Removing a rule the folds lean on gives the site folds of its own;
        // removing one they do not keeps the base's.
        let remove_writer = policy(&rs, "rw", "SecRuleRemoveById 1");
        assert!(remove_writer.own_folds());
        // Rule 1 removed: the blocking level stays unset, rule 2 copies it (empty),
        // and the check of level 1 (10) skips every check; the base's folds would
        // have let 11 run.
        assert_eq!(status_of(Some(&remove_writer), &rs, "/?a=attack"), None);
        assert_eq!(status_of(None, &rs, "/?a=attack"), Some(403));
        let remove_check = policy(&rs, "rc", "SecRuleRemoveById 11");
        assert!(remove_check.keeps_folds() && !remove_check.own_folds());
        assert_eq!(status_of(Some(&remove_check), &rs, "/?a=attack"), None);
        // A runtime removal of the writer by the overlay breaks them when it runs.
        let ctl = policy(
            &rs,
            "ctl",
            r#"SecRule ARGS:off "@streq 1" "id:100,phase:1,pass,nolog,ctl:ruleRemoveById=1-2""#,
        );
        assert!(ctl.keeps_folds() && !ctl.own_folds());
        assert!(ctl.rules(1).next().unwrap().breaks_folds);
        assert_eq!(status_of(Some(&ctl), &rs, "/?a=paranoid&off=1"), Some(406));
        assert_eq!(status_of(Some(&ctl), &rs, "/?a=paranoid"), None);
    }

    #[test]
    fn a_target_exclusion_of_a_tx_variable_turns_the_folds_off() {
        let rs = base(FOLDED);
        let site = policy(
            &rs,
            "tx",
            r#"SecRuleUpdateTargetById 12 "!TX:DETECTION_PARANOIA_LEVEL""#,
        );
        assert!(!site.keeps_folds());
        // 12 sees no value: it does not skip, 13 runs.
        assert_eq!(status_of(Some(&site), &rs, "/?a=paranoid"), Some(406));
        assert_eq!(status_of(None, &rs, "/?a=paranoid"), None);
    }

    #[test]
    fn a_base_that_sets_the_paranoia_level_itself_is_refused() {
        let rs = base(&format!(
            "SecAction \"id:900000,phase:1,pass,nolog,setvar:tx.blocking_paranoia_level=1\"\n{FOLDED}"
        ));
        let mut b = builder(&rs, "pl2");
        b.paranoia_level(2, None).unwrap();
        let e = b.build().unwrap_err().to_string();
        assert!(
            e.contains("base.conf:1") && e.contains("rule 900000"),
            "{e}"
        );
        // Without a paranoia level the site is fine.
        assert!(builder(&rs, "plain").build().is_ok());
    }

    #[test]
    fn the_audit_record_names_the_site() {
        let rs = base(&format!("SecAuditEngine On\n{BASE}"));
        let site = policy(&rs, "shop", "");
        let (_, tx) = get(Transaction::with_policy(site, TxContext::default()), "/");
        let rec = tx.audit_record().unwrap();
        assert!(rec.text.contains("\"site\":\"shop\""), "{}", rec.text);
        let (_, tx) = get(Transaction::new(rs, TxContext::default()), "/");
        assert!(!tx.audit_record().unwrap().text.contains("\"site\""));
    }
}
