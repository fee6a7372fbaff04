//! A compiled rule: targets, operator, transformations and actions, resolved once.

use crate::actions::{Action, Disruptive};
use crate::macros::Macro;
use crate::operators::Operator;
use crate::transforms::Transform;
use crate::variables::{Exclusion, Target};
use seclang::Span;

/// The operator of a compiled rule.
#[derive(Debug, Clone)]
pub enum RuleOperator {
    /// Compiled at load time.
    Static(Box<Operator>),
    /// The argument holds macros; it is expanded per evaluation. A plain operator
    /// (`@eq`, `@within`, ...) then runs on the expanded bytes; any other is compiled
    /// per evaluation.
    Dynamic {
        /// Operator name.
        name: String,
        /// The argument.
        argument: Macro,
        /// The operator when it needs no compiling.
        plain: Option<crate::operators::PlainOperator>,
    },
    /// `@rbl`: a DNS block-list lookup, answered by the transaction's lookup hook.
    Rbl(String),
    /// `@geoLookup`: needs a GeoIP database, answered by the transaction's lookup hook.
    GeoLookup,
    /// `@memberOf coll.name`: the value is a member of that multi-valued variable of
    /// an open persistent collection (one hash lookup).
    MemberOf {
        /// Which collection.
        collection: crate::actions::CollectionKind,
        /// The variable's lower-case name.
        name: Vec<u8>,
    },
}

/// Metadata used in logs.
#[derive(Debug, Clone, Default)]
pub struct RuleMeta {
    /// `msg`.
    pub msg: Option<Macro>,
    /// `logdata`.
    pub logdata: Option<Macro>,
    /// `severity`, 0 (EMERGENCY) to 7 (DEBUG).
    pub severity: Option<u8>,
    /// `tag`s, in order.
    pub tags: Vec<String>,
    /// `ver`.
    pub ver: Option<String>,
    /// `rev`.
    pub rev: Option<String>,
    /// `maturity`.
    pub maturity: Option<u8>,
    /// `accuracy`.
    pub accuracy: Option<u8>,
}

/// One compiled rule (a link in a chain has its own `Rule`).
#[derive(Debug, Clone)]
pub struct Rule {
    /// `id`; links after the first in a chain have none.
    pub id: Option<i64>,
    /// The id of the chain's first rule (equal to `id` for a first rule).
    pub chain_id: Option<i64>,
    /// Phase 1-5.
    pub phase: u8,
    /// Where the rule is written.
    pub span: Span,
    /// What the rule inspects. Empty for `SecAction`.
    pub targets: Vec<Target>,
    /// `!VAR` exclusions (and `SecRuleUpdateTargetById` exclusions).
    pub exclusions: Vec<Exclusion>,
    /// The operator.
    pub operator: RuleOperator,
    /// `!@op`.
    pub negated: bool,
    /// The operator as written (`@rx foo`), for logs.
    pub operator_text: (String, String),
    /// Transformations, after merging the phase's default transformations.
    pub transforms: Vec<Transform>,
    /// Transformation-cache key of each prefix of `transforms` (`prefix_ids[i]` names
    /// `transforms[..=i]`).
    pub prefix_ids: Vec<u32>,
    /// Metadata for logs.
    pub meta: RuleMeta,
    /// `meta.tags` as numbers in the rule set's tag table
    /// ([`crate::ruleset::tags`]), for removal by tag.
    pub tag_set: crate::ruleset::tags::TagSet,
    /// `log` (true) or `nolog`: the error-log line, as ModSecurity v2's manual reads it.
    pub log: bool,
    /// `auditlog` or `noauditlog` (and `nolog`): audit log relevance and message, as
    /// ModSecurity v2's manual reads it.
    pub auditlog: bool,
    /// Whether a match is logged at all (line and audit message) as libmodsecurity v3
    /// reads the flags: the last of `log`/`auditlog` (true) and `nolog`/`noauditlog`.
    pub v3_log: bool,
    /// Whether a logged match makes the transaction relevant for the audit log, as
    /// libmodsecurity v3 reads the flags: no `noauditlog` after the last `auditlog`.
    pub v3_auditlog: bool,
    /// `capture`.
    pub capture: bool,
    /// `multiMatch`.
    pub multi_match: bool,
    /// Actions run for every matched value, whether or not the chain goes on to match
    /// (ModSecurity v3 runs `setvar` this way; v2 ran it only on a full match), with
    /// `initcol`, `setuid` and `setsid` among them so a collection opened by a rule is
    /// there for the same rule's `setvar`.
    pub match_actions: Vec<Action>,
    /// Actions run once the whole chain has matched (`ctl`, `initcol`, `setenv`, ...).
    pub full_match_actions: Vec<Action>,
    /// The disruptive action (chain starters only).
    pub disruptive: Option<Disruptive>,
    /// `status`.
    pub status: Option<u16>,
    /// `skip:N`.
    pub skip: u32,
    /// `skipAfter:MARKER`.
    pub skip_after: Option<String>,
    /// The next link of the chain.
    pub chain: Option<Box<Rule>>,
    /// This rule's place in the `@rx` prefilter, if it has one.
    pub prefilter: Option<crate::ruleset::prefilter::Slot>,
    /// This rule's `@pm` phrase list in the prefilter's union of all lists
    /// ([`crate::ruleset::prefilter::PmUnion`]), if it has one.
    pub pm_list: Option<u32>,
    /// This link's outcome when the rule set decides it at load time
    /// ([`crate::ruleset::fold`]); used while the transaction keeps the folds valid.
    pub folded: Option<crate::ruleset::fold::Folded>,
    /// This link runs a `ctl:ruleRemove*` that may remove what the load-time folds
    /// depend on: the transaction stops using them when it runs.
    pub breaks_folds: bool,
    /// This link's place in the rule set's list of links (in phase, entry and chain
    /// order), where a site's own fold table keeps its outcome for that site
    /// ([`crate::policy`]); `u32::MAX` for a site's own rules.
    pub(crate) fold_slot: u32,
    /// The action string as written, kept for `SecRuleUpdateActionById`.
    pub(crate) action_defs: Vec<seclang::ActionDef>,
    /// The rule as written, kept so updates can recompile it.
    pub(crate) def: Option<seclang::RuleDef>,
}

/// An entry of a phase's rule list.
#[derive(Debug, Clone)]
pub enum Entry {
    /// A rule (with its chain).
    Rule(Box<Rule>),
    /// A `SecMarker`.
    Marker(String),
}

impl Rule {
    /// How debug lines name the rule: its id (a chain's links by their chain's
    /// id), file and line.
    pub(crate) fn label(&self) -> String {
        let id = self
            .id
            .or(self.chain_id)
            .map(|i| i.to_string())
            .unwrap_or_else(|| "-".into());
        format!(
            "(Rule {id}, {}:{})",
            self.span.file.display(),
            self.span.line
        )
    }

    /// Iterates over the links of this rule's chain, starting with itself.
    pub fn links(&self) -> impl Iterator<Item = &Rule> {
        std::iter::successors(Some(self), |r| r.chain.as_deref())
    }
}
