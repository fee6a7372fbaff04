//! Rule sets: SecLang directives compiled into per-phase rule lists.

pub(crate) mod compile;
pub mod fold;
pub(crate) mod jumps;
pub mod prefilter;
pub mod tags;

pub use compile::RulesetBuilder;

use crate::actions::Disruptive;
use crate::config::EngineConfig;
use crate::rule::{Entry, Rule};
use std::path::PathBuf;

/// A compiled, immutable rule set. Share it between transactions with an `Arc`.
#[derive(Debug)]
pub struct Ruleset {
    /// Entries per phase (index 0 is phase 1). Markers appear in every phase.
    pub(crate) phases: [Vec<Entry>; 5],
    /// Where each phase's walk goes on after a rule matched ([`jumps`]).
    pub(crate) jumps: jumps::Jumps,
    /// The plan of the base's walk (a transaction without a site).
    pub(crate) plan: crate::plan::Plan,
    pub(crate) config: EngineConfig,
    pub(crate) files: Vec<PathBuf>,
    pub(crate) warnings: Vec<String>,
    /// The disruptive action and status of each phase's `SecDefaultAction`.
    pub(crate) default_disruptive: [(Disruptive, Option<u16>); 5],
    pub(crate) hash: u64,
    /// The `@rx` prefilter.
    pub(crate) prefilter: prefilter::Prefilter,
    /// Every distinct transformation pipeline prefix, indexed by its cache key (the
    /// `prefix_ids` of rules): a tree, so pipelines that start alike share their work.
    pub(crate) chain_nodes: Vec<ChainNode>,
    /// What the `@rbl` rules read.
    pub(crate) rbl_use: RblUse,
    /// Whether a rule reads INPUTS or INPUTS_DECODED: only then does a transaction
    /// build its table of inputs.
    pub(crate) uses_inputs: bool,
    /// The `SecDefaultAction` of each phase as written, for the rules of a site's
    /// overlay ([`crate::policy`]), which inherit them.
    pub(crate) defaults: [Vec<seclang::ActionDef>; 5],
    /// The tag table: each distinct tag's number ([`tags`]), so that a site's
    /// overlay numbers its tags the same way.
    pub(crate) tag_ids: std::collections::HashMap<String, usize>,
    /// Whether the server gives transactions a DNS block-list resolver.
    pub(crate) rbl_resolver: bool,
}

/// What a rule set's `@rbl` rules read, so that a server can look up ahead of
/// evaluation the names they will ask for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RblUse {
    /// Zones of `@rbl` rules on REMOTE_ADDR (or REMOTE_HOST) without
    /// transformations: their names are known when the transaction starts.
    pub client_zones: Vec<String>,
    /// Some `@rbl` rule reads another value, or a transformed one: its names are
    /// known only while the rule runs.
    pub other_inputs: bool,
    /// Per phase: the positions, in order, of the rules that hold such a link
    /// (where a phase pauses, `Transaction::set_pause_for_lookups`).
    pub(crate) entries: [Vec<u32>; 5],
}

/// Whether a rule (or a chain link) of `phases` reads INPUTS, INPUTS_DECODED or
/// DETECTIONS.
pub(crate) fn uses_inputs(phases: &[Vec<Entry>; 5]) -> bool {
    use crate::variables::Var;
    phases.iter().flatten().any(|e| {
        let Entry::Rule(r) = e else { return false };
        let mut link = Some(r.as_ref());
        while let Some(l) = link {
            if l.targets
                .iter()
                .any(|t| matches!(t.var, Var::Inputs | Var::InputsDecoded | Var::Detections))
            {
                return true;
            }
            link = l.chain.as_deref();
        }
        false
    })
}

impl RblUse {
    /// Per phase (index 0 for phase 1): whether that phase holds an `@rbl` rule on
    /// another value, so that a server need make only those phases able to wait for a
    /// lookup.
    pub fn other_input_phases(&self) -> [bool; 5] {
        std::array::from_fn(|p| !self.entries[p].is_empty())
    }

    /// Walks every rule and chain link of `phases`.
    pub(crate) fn of(phases: &[Vec<Entry>; 5]) -> RblUse {
        use crate::rule::RuleOperator;
        use crate::variables::Var;
        let mut out = RblUse::default();
        for (phase, index, e) in phases
            .iter()
            .enumerate()
            .flat_map(|(i, p)| p.iter().enumerate().map(move |(k, e)| (i, k, e)))
        {
            let Entry::Rule(r) = e else { continue };
            let mut link = Some(r.as_ref());
            while let Some(l) = link {
                if let RuleOperator::Rbl(zone) = &l.operator {
                    for t in &l.targets {
                        let client = matches!(t.var, Var::RemoteAddr | Var::RemoteHost)
                            && !t.count
                            && l.transforms.is_empty();
                        if !client {
                            out.other_inputs = true;
                            if out.entries[phase].last() != Some(&(index as u32)) {
                                out.entries[phase].push(index as u32);
                            }
                        } else if !out.client_zones.contains(zone) {
                            out.client_zones.push(zone.clone());
                        }
                    }
                }
                link = l.chain.as_deref();
            }
        }
        out
    }
}

/// One transformation pipeline prefix: its parent prefix and the step it adds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ChainNode {
    /// The prefix without its last step (`None` for a one-step prefix).
    pub parent: Option<u32>,
    /// The last step.
    pub step: crate::transforms::Transform,
    /// The byte classes that can make any step of the prefix change a value (the
    /// union of their triggers): a value with none of them passes through unchanged.
    pub triggers: u32,
}

impl Ruleset {
    /// For tests: checks the table of where each phase's walk goes on after a
    /// match against the flow walked entry by entry; the first difference.
    #[doc(hidden)]
    pub fn check_jumps(&self) -> Result<(), String> {
        self.jumps.check(None, &self.phases)
    }

    /// Engine-wide settings.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// The files the rules were read from, in load order (data files excluded).
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// Warnings from loading: directives accepted and ignored.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The rules of a phase (1-5), in order, chains as one rule.
    pub fn rules(&self, phase: u8) -> impl Iterator<Item = &Rule> {
        let idx = usize::from(phase.clamp(1, 5) - 1);
        self.phases[idx].iter().filter_map(|e| match e {
            Entry::Rule(r) => Some(r.as_ref()),
            Entry::Marker(_) => None,
        })
    }

    /// Rules (chains counted once) in each phase, index 0 being phase 1.
    pub fn rules_per_phase(&self) -> [usize; 5] {
        let mut out = [0; 5];
        for (i, n) in out.iter_mut().enumerate() {
            *n = self.rules(i as u8 + 1).count();
        }
        out
    }

    /// Total rules (chains counted once).
    pub fn rule_count(&self) -> usize {
        self.rules_per_phase().iter().sum()
    }

    /// Finds a rule by id.
    pub fn rule_by_id(&self, id: i64) -> Option<&Rule> {
        (1..=5)
            .flat_map(|p| self.rules(p))
            .find(|r| r.id == Some(id))
    }

    /// What the `@rbl` rules read.
    pub fn rbl_use(&self) -> &RblUse {
        &self.rbl_use
    }

    /// The DNS block-list names the `@rbl` rules on the client's address will look
    /// up for `client` (none for an IPv6 client: only IPv4 addresses are looked up
    /// in reversed form), so that a server can resolve them before phase 1.
    pub fn rbl_client_names(&self, client: std::net::IpAddr) -> Vec<String> {
        let ip = client.to_canonical().to_string();
        let key = self.config.httpbl_key.as_deref();
        self.rbl_use
            .client_zones
            .iter()
            .filter_map(|zone| crate::lookups::rbl_name(ip.as_bytes(), zone, key).ok())
            .collect()
    }

    /// A hash of every loaded rule file's text, to compare deployments.
    pub fn content_hash(&self) -> u64 {
        self.hash
    }
}
