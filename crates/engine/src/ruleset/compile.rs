//! Turning directives into compiled rules.

use super::Ruleset;
use super::tags::TagSelector;
use crate::actions::{Action, AllowScope, BodyProcessor, CollectionKind, Ctl, Disruptive, SetOp};
use crate::config::{AuditEngineMode, EngineConfig, RuleEngineMode, SettingOutcome};
use crate::error::{LoadError, LoadErrors};
use crate::macros::Macro;
use crate::operators::{CompileContext, Operator};
use crate::rule::{Entry, Rule, RuleMeta, RuleOperator};
use crate::transforms::Transform;
use crate::variables::{self, Exclusion, Target, Var};
use seclang::{
    ActionDef, Directive, DirectiveKind, Failure, FileSource, IdRange, Parsed, RuleDef,
    RuleSelector, Span,
};
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Builds a [`Ruleset`] from SecLang files and text, in order.
pub struct RulesetBuilder {
    source: Arc<dyn FileSource + Send + Sync>,
    config: EngineConfig,
    /// Raw default actions per phase (index 0 = phase 1).
    defaults: [Vec<ActionDef>; 5],
    entries: Vec<Entry>,
    /// True while the last rule ended with `chain`.
    open_chain: bool,
    files: Vec<PathBuf>,
    warnings: Vec<String>,
    prefixes: HashMap<Vec<Transform>, u32>,
    ids: HashSet<i64>,
    hasher: std::collections::hash_map::DefaultHasher,
    /// Operators compiled so far, by lower-case name, argument and (for operators that
    /// read data files) the directory names resolve against: CRS repeats patterns and
    /// phrase files across rules, and their clones share one compiled program.
    operators: HashMap<(String, String, PathBuf), Operator>,
    /// Whether the server gives transactions a DNS block-list resolver
    /// ([`RulesetBuilder::rbl_resolver`]).
    rbl_resolver: bool,
    /// Where `@rbl` and `@geoLookup` rules are, for the warnings given at build
    /// when nothing answers them.
    rbl_rules: Vec<String>,
    geo_rules: Vec<String>,
    /// Set when the builder compiles a site's overlay over a base rule set
    /// ([`crate::policy`]): what the site's directives remove from the base.
    overlay: Option<OverlayState>,
    /// TX seeds of the sites that will run over the rule set (their paranoia
    /// levels): the shared prefilter covers the rules their transactions reach too.
    reach_seeds: Vec<Vec<(Vec<u8>, Vec<u8>)>>,
    /// `Some(limit)` once [`RulesetBuilder::keep_going`] was called: errors are
    /// kept (up to `limit`, the rest counted) and loading goes on.
    keep_going: Option<usize>,
    /// The errors kept in that mode, and how many were found.
    errors: Vec<LoadError>,
    error_total: usize,
    /// A rule that failed (to parse or compile) and may have opened a chain: the
    /// rules that follow it as its links are compiled for their own errors, then
    /// dropped.
    broken_chain: Option<BrokenChain>,
    /// The ids of rules that failed to compile: a later directive that names one
    /// (`SecRuleUpdateActionById`) is skipped rather than reported again.
    failed_ids: HashSet<i64>,
}

/// The chain of a rule that failed (see [`RulesetBuilder::keep_going`]).
#[derive(Debug, Clone, Copy)]
struct BrokenChain {
    /// The phase and id its links are compiled with.
    phase: u8,
    head_id: Option<i64>,
    /// True when the failed rule is known to have had `chain`, so that the next
    /// directive must be a link; false when the rule did not parse, so that
    /// whether links follow is a guess (a SecRule without `id` or `phase` is taken
    /// for one).
    certain: bool,
}

/// What a site's directives do to the base rule set, gathered while its overlay is
/// compiled: removals by id, tag and message, and target exclusions, which apply to
/// the site's transactions only (the base is not copied).
#[derive(Debug)]
pub(crate) struct OverlayState {
    /// The base rule set.
    pub base: Arc<Ruleset>,
    /// `SecRuleRemoveById` ranges.
    pub removed_ids: Vec<IdRange>,
    /// `SecRuleRemoveByTag` patterns.
    pub removed_tags: Vec<TagSelector>,
    /// `SecRuleRemoveByMsg` messages.
    pub removed_msgs: Vec<String>,
    /// `SecRuleUpdateTargetBy*` exclusions (`!VAR`) of base rules.
    pub target_removals: Vec<(PendingTarget, Exclusion)>,
}

/// Which base rules a site's target exclusion applies to, before the tags are
/// numbered.
#[derive(Debug, Clone)]
pub(crate) enum PendingTarget {
    /// By id (every link of the chain).
    Ids(Vec<IdRange>),
    /// By tag pattern.
    Tag(TagSelector),
    /// By message.
    Msg(String),
}

/// A compiled overlay: a site's own rules, per phase, bound to the base rule set
/// they were compiled against.
#[derive(Debug)]
pub(crate) struct OverlayBuild {
    /// The rules per phase (markers in every phase), without folds or prefilter.
    pub phases: [Vec<Entry>; 5],
    /// The base's transformation prefixes followed by the overlay's new ones, when it
    /// has new ones.
    pub chain_nodes: Option<Vec<super::ChainNode>>,
    /// The disruptive action of `block` per phase for the overlay's rules.
    pub default_disruptive: [(Disruptive, Option<u16>); 5],
    /// What the site removes from the base.
    pub state: OverlayState,
    /// Load warnings.
    pub warnings: Vec<String>,
    /// The files the overlay was read from.
    pub files: Vec<PathBuf>,
    /// A hash of the overlay's directives.
    pub hash: u64,
}

impl RulesetBuilder {
    /// A builder that reads rule and data files through `source`.
    pub fn new(source: Arc<dyn FileSource + Send + Sync>) -> Self {
        RulesetBuilder {
            source,
            config: EngineConfig::default(),
            defaults: Default::default(),
            entries: Vec::new(),
            open_chain: false,
            files: Vec::new(),
            warnings: Vec::new(),
            prefixes: HashMap::new(),
            ids: HashSet::new(),
            hasher: Default::default(),
            operators: HashMap::new(),
            rbl_resolver: false,
            rbl_rules: Vec::new(),
            geo_rules: Vec::new(),
            overlay: None,
            reach_seeds: Vec::new(),
            keep_going: None,
            errors: Vec::new(),
            error_total: 0,
            broken_chain: None,
            failed_ids: HashSet::new(),
        }
    }

    /// Tells the builder the paranoia levels (blocking, detection) that sites
    /// ([`crate::policy`]) will seed over this rule set: its shared prefilter (the
    /// one pass of every pattern over each value, and the phrase union) then covers
    /// the rules CRS runs at those levels as well as at its own, so that such a
    /// site's transactions cost what CRS built at its level costs. The rule set's
    /// own transactions run the same rules as without it; the shared automata are
    /// larger.
    pub fn reach_paranoia_levels(&mut self, levels: &[(u8, u8)]) -> &mut Self {
        for &(blocking, detection) in levels {
            let seeds = vec![
                (
                    crate::policy::BLOCKING_PARANOIA_TX.as_bytes().to_vec(),
                    blocking.to_string().into_bytes(),
                ),
                (
                    crate::policy::DETECTION_PARANOIA_TX.as_bytes().to_vec(),
                    detection.to_string().into_bytes(),
                ),
            ];
            if !self.reach_seeds.contains(&seeds) {
                self.reach_seeds.push(seeds);
            }
        }
        self
    }

    /// A builder for a site's overlay over `base`: its rules get the base's
    /// `SecDefaultAction`s, transformation cache keys, tag numbers and settings, and
    /// their ids must not be the base's.
    pub(crate) fn for_overlay(
        base: &Arc<Ruleset>,
        source: Arc<dyn FileSource + Send + Sync>,
    ) -> Self {
        let mut b = RulesetBuilder::new(source);
        b.config = base.config.clone();
        b.defaults = base.defaults.clone();
        b.rbl_resolver = base.rbl_resolver;
        // Every pipeline of the base keeps its key: the overlay's rules share the
        // transaction's cached forms with the base's.
        for (id, _) in base.chain_nodes.iter().enumerate() {
            let mut steps = Vec::new();
            let mut cur = Some(id as u32);
            while let Some(c) = cur {
                let node = &base.chain_nodes[c as usize];
                steps.push(node.step);
                cur = node.parent;
            }
            steps.reverse();
            b.prefixes.insert(steps, id as u32);
        }
        b.ids = base
            .phases
            .iter()
            .flatten()
            .filter_map(|e| match e {
                Entry::Rule(r) => r.id,
                Entry::Marker(_) => None,
            })
            .collect();
        b.overlay = Some(OverlayState {
            base: base.clone(),
            removed_ids: Vec::new(),
            removed_tags: Vec::new(),
            removed_msgs: Vec::new(),
            target_removals: Vec::new(),
        });
        b
    }

    /// Whether `sel` selects a rule of the overlay so far or of the base: for a
    /// selector by ids, each range must select one (the first that selects none is
    /// the error).
    fn check_selects(
        &self,
        span: &Span,
        directive: &str,
        written: &RuleSelector,
        sel: &CompiledSelector,
    ) -> Result<(), LoadError> {
        let Some(o) = &self.overlay else {
            return Ok(());
        };
        let overlay = self.entries.iter().filter_map(|e| match e {
            Entry::Rule(r) => Some(r.as_ref()),
            Entry::Marker(_) => None,
        });
        let base = o.base.phases.iter().flatten().filter_map(|e| match e {
            Entry::Rule(r) => Some(r.as_ref()),
            Entry::Marker(_) => None,
        });
        let mut all = overlay.chain(base);
        match written {
            RuleSelector::Ids(ranges) => {
                for r in ranges {
                    let one = CompiledSelector::Ids(vec![*r]);
                    if !all.clone().any(|x| one.selects(x)) {
                        let what = if r.start == r.end {
                            format!("id {}", r.start)
                        } else {
                            format!("an id in {}-{}", r.start, r.end)
                        };
                        return Err(LoadError::rule(
                            span,
                            None,
                            format!(
                                "{directive}: no rule with {what} is loaded (in the base rule set or this site's rules)"
                            ),
                        ));
                    }
                }
                Ok(())
            }
            RuleSelector::Tag(t) if !all.any(|x| sel.selects(x)) => Err(LoadError::rule(
                span,
                None,
                format!("{directive}: no loaded rule has a tag matching {t:?}"),
            )),
            RuleSelector::Msg(m) if !all.any(|x| sel.selects(x)) => Err(LoadError::rule(
                span,
                None,
                format!("{directive}: no loaded rule has the message {m:?}"),
            )),
            _ => Ok(()),
        }
    }

    /// Makes the builder go on after an error instead of stopping at the first:
    /// a directive that does not parse or compile is recorded and skipped, and
    /// loading goes on with the next one, so that one load finds every error
    /// (`palisade check`). Errors that only follow from an earlier one are not
    /// reported: the links of a chain whose first rule failed are checked on their
    /// own and dropped, and `SecRuleUpdateActionById` on a rule that failed is
    /// skipped. The first `max_errors` errors (at least 1) are kept and the rest
    /// counted. In this mode [`add_file`](Self::add_file),
    /// [`add_text`](Self::add_text) and [`add_directives`](Self::add_directives)
    /// return `Ok`, and [`finish`](Self::finish) returns the errors.
    pub fn keep_going(&mut self, max_errors: usize) -> &mut Self {
        self.keep_going = Some(max_errors.max(1));
        self
    }

    /// In the keep-going mode, keeps (or counts) `e` and returns `Ok`; otherwise
    /// returns it.
    fn record(&mut self, e: LoadError) -> Result<(), LoadError> {
        let Some(limit) = self.keep_going else {
            return Err(e);
        };
        self.error_total += 1;
        if self.errors.len() < limit {
            self.errors.push(e);
        }
        Ok(())
    }

    /// Tells the builder whether the server will give transactions a DNS
    /// block-list resolver ([`TxContext::rbl`](crate::TxContext::rbl)). Without
    /// one, each `@rbl` rule gets a load warning (it never matches).
    pub fn rbl_resolver(&mut self, available: bool) -> &mut Self {
        self.rbl_resolver = available;
        self
    }

    /// Loads a SecLang file (or every file a glob pattern matches, in lexical order).
    /// Stops at the first error, unless [`keep_going`](Self::keep_going) was called.
    pub fn add_file(&mut self, path: &Path) -> Result<&mut Self, LoadError> {
        let is_glob = path.to_str().is_some_and(|s| s.contains(['*', '?', '[']));
        let paths = if is_glob {
            match self.source.glob(path) {
                Ok(paths) => paths,
                Err(e) => {
                    self.record(io_error(path, &e.to_string()))?;
                    return Ok(self);
                }
            }
        } else {
            vec![path.to_path_buf()]
        };
        if paths.is_empty() {
            self.record(io_error(path, "no file matches the pattern"))?;
        }
        for p in paths {
            let source = self.source.clone();
            self.files.push(p.clone());
            self.load_each(|each| seclang::parse_file_each(source.as_ref(), &p, each))?;
        }
        Ok(self)
    }

    /// Loads SecLang text; `name` stands for its file name in errors and logs.
    /// Stops at the first error, unless [`keep_going`](Self::keep_going) was called.
    pub fn add_text(&mut self, text: &str, name: &str) -> Result<&mut Self, LoadError> {
        let source = self.source.clone();
        self.load_each(|each| {
            seclang::parse_source_each(source.as_ref(), text, Path::new(name), each)
        })?;
        Ok(self)
    }

    /// Applies the directives of a parse as they come, so that the first error in
    /// the text's order is the first reported (and, in the keep-going mode, every
    /// other after it).
    fn load_each(
        &mut self,
        parse: impl FnOnce(&mut dyn FnMut(Parsed) -> ControlFlow<()>),
    ) -> Result<(), LoadError> {
        let mut stopped = None;
        parse(&mut |item| {
            let done = match item {
                Parsed::Directive(d) => self.apply(d),
                Parsed::Failed(f) => self.parse_failed(f),
            };
            match done {
                Ok(()) => ControlFlow::Continue(()),
                Err(e) => {
                    stopped = Some(e);
                    ControlFlow::Break(())
                }
            }
        });
        stopped.map_or(Ok(()), Err)
    }

    /// Applies parsed directives, in order. Stops at the first error, unless
    /// [`keep_going`](Self::keep_going) was called.
    pub fn add_directives(&mut self, directives: Vec<Directive>) -> Result<&mut Self, LoadError> {
        for d in directives {
            self.apply(d)?;
        }
        Ok(self)
    }

    /// Applies one directive; its error is returned, or kept in the keep-going mode.
    fn apply(&mut self, d: Directive) -> Result<(), LoadError> {
        format!("{:?}", d.kind).hash(&mut self.hasher);
        match self.add_directive(d) {
            Ok(()) => Ok(()),
            Err(e) => self.record(e),
        }
    }

    /// Records a directive that did not parse. When it may have been a rule, the
    /// chain it may have opened or continued is broken (see [`BrokenChain`]); a
    /// directive that is not a rule ends any chain, silently (the error about it is
    /// this one).
    fn parse_failed(&mut self, f: Failure) -> Result<(), LoadError> {
        let maybe_rule = matches!(f.directive, None | Some("SecRule") | Some("SecAction"));
        let open = match (self.open_chain, self.entries.last(), self.broken_chain) {
            (true, Some(Entry::Rule(head)), _) => Some((head.phase, head.id)),
            (_, _, Some(b)) => Some((b.phase, b.head_id)),
            _ => None,
        };
        self.open_chain = false;
        self.broken_chain = maybe_rule.then(|| {
            let (phase, head_id) = open.unwrap_or((2, None));
            BrokenChain {
                phase,
                head_id,
                certain: false,
            }
        });
        self.record(LoadError::Parse(f.error))
    }

    fn add_directive(&mut self, d: Directive) -> Result<(), LoadError> {
        let span = d.span;
        if let (Some(_), DirectiveKind::Setting { name, .. }) = (&self.overlay, &d.kind) {
            return Err(LoadError::rule(
                &span,
                None,
                format!(
                    "{name} is an engine setting, which a site's rules cannot change: use the site's keys (rule_engine, paranoia_level, limits) or the top-level [[rules]]"
                ),
            ));
        }
        match d.kind {
            DirectiveKind::Rule(def) => self.add_rule(&span, Some(def.clone()), def.actions)?,
            DirectiveKind::Action(actions) => self.add_rule(&span, None, actions)?,
            DirectiveKind::Marker(name) => {
                self.close_chain(&span)?;
                self.entries.push(Entry::Marker(name));
            }
            DirectiveKind::DefaultAction(actions) => {
                self.close_chain(&span)?;
                let phase = find_phase(&actions)
                    .map_err(|e| LoadError::rule(&span, None, e))?
                    .unwrap_or(2);
                if actions.iter().any(|a| a.name.eq_ignore_ascii_case("id")) {
                    return Err(LoadError::rule(
                        &span,
                        None,
                        "SecDefaultAction must not have an id",
                    ));
                }
                if !actions.iter().any(|a| is_disruptive(&a.name)) {
                    return Err(LoadError::rule(
                        &span,
                        None,
                        "SecDefaultAction needs a disruptive action",
                    ));
                }
                // Check that the actions compile.
                self.compile_rule(&span, None, &actions, None, true)?;
                self.defaults[usize::from(phase - 1)] = actions;
            }
            DirectiveKind::RuleRemove(written) => {
                self.close_chain(&span)?;
                let sel = compile_selector(&span, &written)?;
                self.check_selects(&span, removal_name(&written), &written, &sel)?;
                self.entries.retain(|e| match e {
                    Entry::Rule(r) => !sel.selects(r),
                    Entry::Marker(_) => true,
                });
                if let Some(o) = &mut self.overlay {
                    // The base's rules are removed for the site's transactions only,
                    // as a `ctl:ruleRemove*` at the start of each would.
                    match (written, sel) {
                        (RuleSelector::Ids(r), _) => o.removed_ids.extend(r),
                        (_, CompiledSelector::Tag(re)) => {
                            o.removed_tags.push(TagSelector::new(re));
                        }
                        (RuleSelector::Msg(m), _) => o.removed_msgs.push(m),
                        _ => {}
                    }
                }
            }
            DirectiveKind::RuleUpdateTarget {
                selector,
                targets,
                replaced,
            } => {
                self.close_chain(&span)?;
                let sel = compile_selector(&span, &selector)?;
                let directive = match &selector {
                    RuleSelector::Ids(_) => "SecRuleUpdateTargetById",
                    RuleSelector::Tag(_) => "SecRuleUpdateTargetByTag",
                    RuleSelector::Msg(_) => "SecRuleUpdateTargetByMsg",
                };
                self.check_selects(&span, directive, &selector, &sel)?;
                let (add, excl) = compile_targets(&span, None, &targets)?;
                let replaced = match replaced {
                    Some(r) => Some(compile_targets(&span, None, &r)?.0),
                    None => None,
                };
                let mut found = false;
                for e in &mut self.entries {
                    if let Entry::Rule(r) = e
                        && sel.selects(r)
                    {
                        found = true;
                        if let Some(rep) = &replaced {
                            r.targets.retain(|t| {
                                !rep.iter()
                                    .any(|x| x.written.eq_ignore_ascii_case(&t.written))
                            });
                        }
                        r.targets.extend(add.iter().cloned());
                        r.exclusions.extend(excl.iter().cloned());
                    }
                }
                if let Some(o) = &mut self.overlay {
                    let in_base = o.base.phases.iter().flatten().find_map(|e| match e {
                        Entry::Rule(r) if sel.selects(r) => Some(r.as_ref()),
                        _ => None,
                    });
                    if let Some(r) = in_base {
                        if !add.is_empty() || replaced.is_some() {
                            return Err(LoadError::rule(
                                &span,
                                r.id,
                                format!(
                                    "{directive}: a site can only exclude targets (`!VAR`) from the rules of the base rule set; adding or replacing targets of rule {} would copy it for the site (exclude the rule with SecRuleRemoveById and write the site's own, or change it in the top-level [[rules]])",
                                    r.id.unwrap_or_default()
                                ),
                            ));
                        }
                        let pending = match sel {
                            CompiledSelector::Ids(r) => PendingTarget::Ids(r),
                            CompiledSelector::Tag(re) => PendingTarget::Tag(TagSelector::new(re)),
                            CompiledSelector::Msg(m) => PendingTarget::Msg(m),
                        };
                        for x in excl {
                            o.target_removals.push((pending.clone(), x));
                        }
                    }
                } else if !found {
                    self.warnings.push(format!(
                        "{span}: SecRuleUpdateTarget matched no rule loaded so far"
                    ));
                }
            }
            DirectiveKind::RuleUpdateAction { id, actions } => {
                self.close_chain(&span)?;
                let pos = self
                    .entries
                    .iter()
                    .position(|e| matches!(e, Entry::Rule(r) if r.id == Some(id)));
                let Some(pos) = pos else {
                    if self.failed_ids.contains(&id) {
                        // Its rule failed, and that error is reported.
                        return Ok(());
                    }
                    if self
                        .overlay
                        .as_ref()
                        .is_some_and(|o| o.base.rule_by_id(id).is_some())
                    {
                        return Err(LoadError::rule(
                            &span,
                            Some(id),
                            "SecRuleUpdateActionById: the rule belongs to the base rule set, and a site cannot change its actions (that would copy the rule for the site); remove it with SecRuleRemoveById and write the site's own rule, or change it in the top-level [[rules]]",
                        ));
                    }
                    return Err(LoadError::rule(
                        &span,
                        Some(id),
                        "SecRuleUpdateActionById: no rule with this id is loaded",
                    ));
                };
                let Entry::Rule(old) = &self.entries[pos] else {
                    unreachable!()
                };
                let mut defs: Vec<ActionDef> = old
                    .action_defs
                    .iter()
                    .filter(|a| {
                        let n = a.name.to_ascii_lowercase();
                        n == "t"
                            || n == "id"
                            || n == "phase"
                            || !actions.iter().any(|b| {
                                b.name.eq_ignore_ascii_case(&a.name)
                                    || (is_disruptive(&b.name) && is_disruptive(&a.name))
                            })
                    })
                    .cloned()
                    .collect();
                defs.extend(
                    actions
                        .iter()
                        .filter(|a| !a.name.eq_ignore_ascii_case("id"))
                        .cloned(),
                );
                let old_span = old.span.clone();
                let def = old.def.clone();
                let chain = old.chain.clone();
                let mut rule = self.compile_rule(&old_span, def.as_ref(), &defs, None, false)?;
                rule.chain = chain;
                self.entries[pos] = Entry::Rule(Box::new(rule));
            }
            DirectiveKind::Setting { name, args }
                if name.eq_ignore_ascii_case("SecUnicodeMapFile") =>
            {
                self.close_chain(&span)?;
                let map = self
                    .load_unicode_map(&span, &args)
                    .map_err(|e| LoadError::rule(&span, None, format!("SecUnicodeMapFile: {e}")))?;
                self.config.unicode_map = Some(Arc::new(map));
            }
            DirectiveKind::Setting { name, args }
                if name.eq_ignore_ascii_case("SecGeoLookupDb") =>
            {
                self.close_chain(&span)?;
                let db = self
                    .load_geo_db(&span, &args)
                    .map_err(|e| LoadError::rule(&span, None, format!("SecGeoLookupDb: {e}")))?;
                self.config.geo_db = Some(Arc::new(db));
            }
            DirectiveKind::Setting { name, args } => {
                self.close_chain(&span)?;
                match self.config.apply(&name, &args) {
                    Ok(SettingOutcome::Applied) => {}
                    Ok(SettingOutcome::Ignored(why)) => {
                        tracing::warn!("{span}: {why}");
                        self.warnings.push(format!("{span}: {why}"));
                    }
                    Err(e) => return Err(LoadError::rule(&span, None, e)),
                }
            }
        }
        Ok(())
    }

    /// Reads `SecUnicodeMapFile FILE CODEPAGE`: the file as given, else relative to the
    /// directory of the file the directive is in (as ModSecurity v3 looks for it), and
    /// its section for the code page.
    fn load_unicode_map(
        &self,
        span: &Span,
        args: &[String],
    ) -> Result<crate::transforms::UnicodeMap, String> {
        let [file, code_page] = args else {
            return Err(format!(
                "expected a file and a code page (as `SecUnicodeMapFile unicode.mapping 20127`), got {} argument(s)",
                args.len()
            ));
        };
        let code_page: u32 = code_page
            .parse()
            .map_err(|_| format!("the code page must be a number, got {code_page:?}"))?;
        let (path, bytes) = self.read_beside(span, file)?;
        let text = String::from_utf8_lossy(&bytes);
        crate::transforms::UnicodeMap::parse(&text, code_page)
            .map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Reads `SecGeoLookupDb FILE`: a MaxMind database, found as
    /// [`RulesetBuilder::read_beside`] finds files.
    fn load_geo_db(&self, span: &Span, args: &[String]) -> Result<crate::lookups::GeoDb, String> {
        let [file] = args else {
            return Err(format!("expected one file, got {} argument(s)", args.len()));
        };
        let (path, bytes) = self.read_beside(span, file)?;
        crate::lookups::GeoDb::from_bytes(bytes)
            .map_err(|e| format!("{} is not a MaxMind database: {e}", path.display()))
    }

    /// Reads a file a directive names: as given, else relative to the directory
    /// of the file the directive is in (as ModSecurity v3 looks for it).
    fn read_beside(&self, span: &Span, file: &str) -> Result<(PathBuf, Vec<u8>), String> {
        let given = Path::new(file);
        let beside = span.file.parent().unwrap_or(Path::new(".")).join(given);
        match self.source.read(given) {
            Ok(b) => Ok((given.to_path_buf(), b)),
            Err(first) if given.is_relative() => match self.source.read(&beside) {
                Ok(b) => Ok((beside, b)),
                Err(_) => Err(format!(
                    "cannot read {}: {first} (nor {})",
                    given.display(),
                    beside.display()
                )),
            },
            Err(e) => Err(format!("cannot read {}: {e}", given.display())),
        }
    }

    /// Before a directive that is not a rule: a chain left open is an error (kept in
    /// the keep-going mode, which then goes on with the directive).
    fn close_chain(&mut self, span: &Span) -> Result<(), LoadError> {
        let broken = self.broken_chain.take().is_some_and(|b| b.certain);
        if self.open_chain || broken {
            self.open_chain = false;
            return self.record(LoadError::rule(
                span,
                None,
                "a rule with `chain` must be followed by a SecRule",
            ));
        }
        Ok(())
    }

    fn add_rule(
        &mut self,
        span: &Span,
        def: Option<RuleDef>,
        actions: Vec<ActionDef>,
    ) -> Result<(), LoadError> {
        let opens = has_action(&actions, "chain");
        if let Some(broken) = self.broken_chain.take() {
            // After a rule that failed: a link of its chain when it surely had one,
            // or when this rule looks like a link (no id, no phase).
            let looks_like_link =
                def.is_some() && !has_action(&actions, "id") && !has_action(&actions, "phase");
            if broken.certain || looks_like_link {
                if def.is_none() {
                    return Err(LoadError::rule(
                        span,
                        broken.head_id,
                        "a chained rule must be a SecRule, not SecAction",
                    ));
                }
                if opens {
                    self.broken_chain = Some(BrokenChain {
                        certain: true,
                        ..broken
                    });
                }
                // Checked for its own errors, then dropped with its chain.
                let link_of = Some((broken.phase, broken.head_id));
                self.compile_rule(span, def.as_ref(), &actions, link_of, false)?;
                return Ok(());
            }
        }
        if self.open_chain {
            // A link of the chain opened by the last rule.
            let Some(Entry::Rule(head)) = self.entries.last() else {
                self.open_chain = false;
                return Err(LoadError::rule(span, None, "chain without a starting rule"));
            };
            let (phase, head_id) = (head.phase, head.id);
            if def.is_none() {
                self.open_chain = false;
                return Err(LoadError::rule(
                    span,
                    head_id,
                    "a chained rule must be a SecRule, not SecAction",
                ));
            }
            let rule = match self.compile_rule(
                span,
                def.as_ref(),
                &actions,
                Some((phase, head_id)),
                false,
            ) {
                Ok(rule) => rule,
                Err(e) => {
                    self.open_chain = false;
                    self.broken_chain = opens.then_some(BrokenChain {
                        phase,
                        head_id,
                        certain: true,
                    });
                    return Err(e);
                }
            };
            let Some(Entry::Rule(head)) = self.entries.last_mut() else {
                unreachable!()
            };
            let mut link = head;
            while link.chain.is_some() {
                link = link.chain.as_mut().expect("checked");
            }
            link.chain = Some(Box::new(rule));
            self.open_chain = opens;
            return Ok(());
        }
        let failed_chain = |phase: Option<u8>, id: Option<i64>| {
            opens.then_some(BrokenChain {
                phase: phase.unwrap_or(2),
                head_id: id,
                certain: true,
            })
        };
        let rule = match self.compile_rule(span, def.as_ref(), &actions, None, false) {
            Ok(rule) => rule,
            Err(e) => {
                let id = find_id(&actions).ok().flatten();
                self.failed_ids.extend(id);
                self.broken_chain = failed_chain(find_phase(&actions).ok().flatten(), id);
                return Err(e);
            }
        };
        if let Some(id) = rule.id
            && !self.ids.insert(id)
        {
            self.broken_chain = failed_chain(Some(rule.phase), Some(id));
            return Err(LoadError::rule(span, Some(id), "duplicate rule id"));
        }
        self.open_chain = opens;
        self.entries.push(Entry::Rule(Box::new(rule)));
        Ok(())
    }

    fn intern(&mut self, prefix: &[Transform]) -> u32 {
        intern_in(&mut self.prefixes, prefix)
    }

    /// Compiles one rule (or one link of a chain when `link_of` gives the chain's phase
    /// and id, or the actions of a `SecDefaultAction` when `default` is set).
    fn compile_rule(
        &mut self,
        span: &Span,
        def: Option<&RuleDef>,
        actions: &[ActionDef],
        link_of: Option<(u8, Option<i64>)>,
        default: bool,
    ) -> Result<Rule, LoadError> {
        let id = find_id(actions).map_err(|e| LoadError::rule(span, None, e))?;
        let chain_id = link_of.map(|l| l.1).unwrap_or(id);
        let err = |reason: String| LoadError::rule(span, chain_id, reason);
        if link_of.is_some() && id.is_some() {
            return Err(err("a chained rule must not have an id".into()));
        }
        if link_of.is_none() && !default && id.is_none() {
            return Err(err("rule has no id".into()));
        }
        let phase = match link_of {
            Some((p, _)) => {
                if find_phase(actions).map_err(&err)?.is_some() {
                    return Err(err("a chained rule must not set phase".into()));
                }
                p
            }
            None => find_phase(actions).map_err(&err)?.unwrap_or(2),
        };
        let is_starter = link_of.is_none() && !default;
        let defaults: Vec<ActionDef> = if is_starter {
            self.defaults[usize::from(phase - 1)].clone()
        } else {
            Vec::new()
        };

        let mut rule = Rule {
            id,
            chain_id,
            phase,
            span: span.clone(),
            targets: Vec::new(),
            exclusions: Vec::new(),
            operator: RuleOperator::Static(Box::new(Operator::UnconditionalMatch)),
            negated: false,
            operator_text: ("unconditionalMatch".into(), String::new()),
            transforms: Vec::new(),
            prefix_ids: Vec::new(),
            meta: RuleMeta::default(),
            tag_set: Default::default(),
            log: true,
            auditlog: true,
            v3_log: true,
            v3_auditlog: true,
            capture: false,
            multi_match: false,
            match_actions: Vec::new(),
            full_match_actions: Vec::new(),
            disruptive: None,
            status: None,
            skip: 0,
            skip_after: None,
            chain: None,
            action_defs: actions.to_vec(),
            def: def.cloned(),
            prefilter: None,
            pm_list: None,
            folded: None,
            breaks_folds: false,
            fold_slot: u32::MAX,
        };

        // The log flags as libmodsecurity v3 reads them (see below).
        let (mut v3_log, mut v3_no_audit) = (true, false);
        // Default actions first (transformations, log flags, disruptive, status), then
        // the rule's own, which override them.
        for (a, from_default) in defaults
            .iter()
            .map(|a| (a, true))
            .chain(actions.iter().map(|a| (a, false)))
        {
            let name = a.name.to_ascii_lowercase();
            if from_default
                && !matches!(
                    name.as_str(),
                    "t" | "log" | "nolog" | "auditlog" | "noauditlog" | "status"
                )
                && !is_disruptive(&name)
            {
                continue;
            }
            let value = a.value.as_deref();
            let need = |what: &str| {
                value.ok_or_else(|| err(format!("action {}: needs a value ({what})", a.name)))
            };
            match name.as_str() {
                "id" | "phase" => {}
                "msg" => rule.meta.msg = Some(Macro::parse(need("text")?).map_err(&err)?),
                "logdata" => rule.meta.logdata = Some(Macro::parse(need("text")?).map_err(&err)?),
                "severity" => {
                    rule.meta.severity = Some(parse_severity(need("severity")?).map_err(&err)?)
                }
                "tag" => rule.meta.tags.push(need("tag")?.to_string()),
                "ver" => rule.meta.ver = Some(need("version")?.to_string()),
                "rev" => rule.meta.rev = Some(need("revision")?.to_string()),
                "maturity" => rule.meta.maturity = Some(parse_small(need("1-9")?).map_err(&err)?),
                "accuracy" => rule.meta.accuracy = Some(parse_small(need("1-9")?).map_err(&err)?),
                "chain" => {}
                "capture" => rule.capture = true,
                "multimatch" => rule.multi_match = true,
                // Two readings of these four (`SecPalisadeNoAuditLog`, docs/config.md).
                // ModSecurity v2's manual: log/nolog decide the error-log line,
                // auditlog/noauditlog the audit log, nolog both. libmodsecurity v3: the
                // last of the four decides whether a match is logged at all (line and
                // audit message; `noauditlog` silences like `nolog`, `auditlog` logs
                // like `log`), and a logged match makes the transaction relevant unless
                // `noauditlog` came after the last `auditlog`.
                "log" => {
                    rule.log = true;
                    v3_log = true;
                }
                "nolog" => {
                    rule.log = false;
                    rule.auditlog = false;
                    v3_log = false;
                }
                "auditlog" => {
                    rule.auditlog = true;
                    v3_log = true;
                    v3_no_audit = false;
                }
                "noauditlog" => {
                    rule.auditlog = false;
                    v3_log = false;
                    v3_no_audit = true;
                }
                "t" => {
                    let v = need("transformation")?;
                    if v.eq_ignore_ascii_case("none") {
                        rule.transforms.clear();
                    } else {
                        let t = Transform::from_name(v)
                            .ok_or_else(|| err(format!("unknown transformation {v:?}")))?;
                        rule.transforms.push(t);
                    }
                }
                "skip" => {
                    rule.skip = need("count")?
                        .trim()
                        .parse()
                        .map_err(|_| err(format!("skip: bad count {value:?}")))?
                }
                "skipafter" => rule.skip_after = Some(need("marker")?.to_string()),
                "status" => {
                    let s: u16 = need("status")?
                        .trim()
                        .parse()
                        .map_err(|_| err(format!("status: bad value {value:?}")))?;
                    if !(100..=999).contains(&s) {
                        return Err(err(format!("status: {s} is not an HTTP status")));
                    }
                    rule.status = Some(s);
                }
                "pass" => rule.disruptive = Some(Disruptive::Pass),
                "deny" => rule.disruptive = Some(Disruptive::Deny),
                "drop" => rule.disruptive = Some(Disruptive::Drop),
                "block" => rule.disruptive = Some(Disruptive::Block),
                "allow" => {
                    let scope = match value.map(|v| v.to_ascii_lowercase()) {
                        None => AllowScope::All,
                        Some(v) if v == "phase" => AllowScope::Phase,
                        Some(v) if v == "request" => AllowScope::Request,
                        Some(v) => {
                            return Err(err(format!(
                                "allow: expected phase or request, got {v:?}"
                            )));
                        }
                    };
                    rule.disruptive = Some(Disruptive::Allow(scope));
                }
                "redirect" => {
                    rule.disruptive = Some(Disruptive::Redirect(
                        Macro::parse(need("URL")?).map_err(&err)?,
                    ))
                }
                "setvar" => rule
                    .match_actions
                    .push(parse_setvar(need("variable")?).map_err(&err)?),
                "setenv" => {
                    let v = need("name=value")?;
                    let (n, val) = v.split_once('=').unwrap_or((v, "1"));
                    rule.full_match_actions.push(Action::SetEnv {
                        name: n.trim().to_string(),
                        value: Macro::parse(val).map_err(&err)?,
                    });
                }
                "expirevar" | "deprecatevar" => {
                    let v = need("collection.name=value")?;
                    let (target, amount) = v.split_once('=').ok_or_else(|| {
                        err(format!("{name}: expected collection.name=value, got {v:?}"))
                    })?;
                    let (collection, var) = split_collection(target).map_err(&err)?;
                    let var = Macro::parse(var).map_err(&err)?;
                    let amount = Macro::parse(amount).map_err(&err)?;
                    rule.full_match_actions.push(if name == "expirevar" {
                        Action::ExpireVar {
                            collection,
                            name: var,
                            seconds: amount,
                        }
                    } else {
                        Action::DeprecateVar {
                            collection,
                            name: var,
                            spec: amount,
                        }
                    });
                }
                "addmember" | "delmember" => {
                    let v = need("collection.name=value")?;
                    let (target, member) = v.split_once('=').ok_or_else(|| {
                        err(format!("{name}: expected collection.name=value, got {v:?}"))
                    })?;
                    let (collection, var) = split_collection(target).map_err(&err)?;
                    if collection == CollectionKind::Tx {
                        return Err(err(format!(
                            "{name}: members live in persistent collections (IP, GLOBAL, \
                             SESSION, USER, RESOURCE), not TX"
                        )));
                    }
                    rule.match_actions.push(Action::Member {
                        collection,
                        name: Macro::parse(var).map_err(&err)?,
                        value: Macro::parse(member).map_err(&err)?,
                        add: name == "addmember",
                    });
                }
                "initcol" => {
                    let v = need("collection=key")?;
                    let (c, key) = v.split_once('=').ok_or_else(|| {
                        err(format!("initcol: expected collection=key, got {v:?}"))
                    })?;
                    let collection = CollectionKind::from_name(c.trim())
                        .filter(|c| *c != CollectionKind::Tx)
                        .ok_or_else(|| {
                            err(format!("initcol: unknown persistent collection {c:?}"))
                        })?;
                    // Collections open when the rule matches, before its setvars, so
                    // `initcol:ip=...,setvar:ip.n=+1` works in one rule.
                    rule.match_actions.push(Action::InitCol {
                        collection,
                        key: Macro::parse(key).map_err(&err)?,
                    });
                }
                "setuid" => rule.match_actions.push(Action::SetUid(
                    Macro::parse(need("user id")?).map_err(&err)?,
                )),
                "setsid" => rule.match_actions.push(Action::SetSid(
                    Macro::parse(need("session id")?).map_err(&err)?,
                )),
                "ctl" => rule
                    .full_match_actions
                    .push(Action::Ctl(parse_ctl(need("option=value")?).map_err(&err)?)),
                "exec" => {
                    return Err(err(
                        "action exec is refused: Palisade does not run external programs".into(),
                    ));
                }
                "append"
                | "prepend"
                | "proxy"
                | "pause"
                | "sanitisearg"
                | "sanitisematched"
                | "sanitisematchedbytes"
                | "sanitiserequestheader"
                | "sanitiseresponseheader"
                | "xmlns" => {
                    return Err(err(format!("action {} is not supported", a.name)));
                }
                _ => return Err(err(format!("unknown action {:?}", a.name))),
            }
        }
        rule.v3_log = v3_log;
        rule.v3_auditlog = v3_log && !v3_no_audit;
        if !is_starter && !default && rule.disruptive.is_some() && link_of.is_some() {
            // ModSecurity refuses disruptive actions on chain links.
            return Err(err(
                "a chained rule must not have a disruptive action".into()
            ));
        }
        let prefix_ids: Vec<u32> = (0..rule.transforms.len())
            .map(|i| {
                let p = rule.transforms[..=i].to_vec();
                self.intern(&p)
            })
            .collect();
        rule.prefix_ids = prefix_ids;

        if let Some(def) = def {
            let (targets, exclusions) = compile_targets(span, chain_id, &def.variables)?;
            if targets.is_empty() {
                return Err(err("rule has no target (only exclusions)".into()));
            }
            rule.targets = targets;
            rule.exclusions = exclusions;
            rule.negated = def.operator.negated;
            rule.operator_text = (def.operator.name.clone(), def.operator.argument.clone());
            rule.operator = self
                .compile_operator(span, &def.operator.name, &def.operator.argument)
                .map_err(&err)?;
        }
        Ok(rule)
    }

    fn compile_operator(
        &mut self,
        span: &Span,
        name: &str,
        argument: &str,
    ) -> Result<RuleOperator, String> {
        let lname = name.to_ascii_lowercase();
        match lname.as_str() {
            "rbl" => {
                let zone = argument.trim().trim_matches('.');
                if zone.is_empty() {
                    return Err("@rbl needs a block-list zone (as `@rbl zen.example.org`)".into());
                }
                let at = span.to_string();
                if !self.rbl_rules.contains(&at) {
                    self.rbl_rules.push(at);
                }
                return Ok(RuleOperator::Rbl(zone.to_string()));
            }
            "memberof" => {
                let (collection, var) = split_collection(argument)?;
                if collection == CollectionKind::Tx {
                    return Err(
                        "@memberOf: members live in persistent collections, not TX".to_string()
                    );
                }
                return Ok(RuleOperator::MemberOf {
                    collection,
                    name: var.trim().to_ascii_lowercase().into_bytes(),
                });
            }
            "geolookup" => {
                let at = span.to_string();
                if !self.geo_rules.contains(&at) {
                    self.geo_rules.push(at);
                }
                return Ok(RuleOperator::GeoLookup);
            }
            _ => {}
        }
        if argument.contains("%{")
            && let Ok(m) = Macro::parse(argument)
            && !m.is_literal()
        {
            // Check the operator exists and takes such an argument.
            let probe = Operator::compile(name, "0", &self.compile_context(span));
            if let Err(e) = probe
                && e.reason.contains("unknown")
            {
                return Err(e.to_string());
            }
            return Ok(RuleOperator::Dynamic {
                name: name.to_string(),
                argument: m,
                plain: crate::operators::PlainOperator::from_name(name),
            });
        }
        let reads_files = matches!(
            lname.as_str(),
            "pmfromfile" | "pmf" | "ipmatchfromfile" | "ipmatchf"
        );
        let dir = if reads_files {
            span.file.parent().unwrap_or(Path::new(".")).to_path_buf()
        } else {
            PathBuf::new()
        };
        let key = (lname, argument.to_string(), dir);
        if let Some(op) = self.operators.get(&key) {
            return Ok(RuleOperator::Static(Box::new(op.clone())));
        }
        let op = Operator::compile(name, argument, &self.compile_context(span))
            .map_err(|e| e.to_string())?;
        self.operators.insert(key, op.clone());
        Ok(RuleOperator::Static(Box::new(op)))
    }

    fn compile_context<'a>(&'a self, span: &'a Span) -> CompileContext<'a> {
        CompileContext {
            source: self.source.as_ref(),
            base_dir: span.file.parent().unwrap_or(Path::new(".")),
        }
    }

    /// Finishes the rule set, or gives the first error (see
    /// [`RulesetBuilder::finish`] for all of them).
    pub fn build(self) -> Result<Ruleset, LoadError> {
        self.finish().map_err(LoadErrors::into_first)
    }

    /// Builds the rule set, or gives every error of the load: in the keep-going
    /// mode ([`RulesetBuilder::keep_going`]) those kept and counted on the way and
    /// the one found here, otherwise the one found here.
    pub fn finish(mut self) -> Result<Ruleset, LoadErrors> {
        // (A chain broken by a failed rule was reported with that rule.)
        if self.open_chain {
            let span = match self.entries.last() {
                Some(Entry::Rule(r)) => r.span.clone(),
                _ => Span {
                    file: Arc::new(PathBuf::from("?")),
                    line: 0,
                    column: 0,
                },
            };
            let e = LoadError::rule(&span, None, "the last rule has `chain` but no rule follows");
            if let Err(e) = self.record(e) {
                return Err(LoadErrors::new(vec![e], 1));
            }
        }
        if self.error_total > 0 {
            return Err(LoadErrors::new(
                std::mem::take(&mut self.errors),
                self.error_total,
            ));
        }
        let mut warnings = std::mem::take(&mut self.warnings);
        for w in self.lookup_warnings() {
            tracing::warn!("{w}");
            warnings.push(w);
        }
        let mut phases = into_phases(self.entries);
        let default_disruptive = default_disruptives(&self.defaults);
        let tag_ids = super::tags::number(&mut phases);
        let reached = super::fold::fold(&mut phases, self.config.unicode_map.as_deref());
        // The shared automata cover the rules the sites' levels reach too; the
        // groups computed together up front stay those of the rule set's own flow.
        let mut shared = reached.clone();
        for seeds in &self.reach_seeds {
            let more =
                super::fold::reached_with(&phases, seeds, self.config.unicode_map.as_deref());
            for (r, m) in shared.iter_mut().zip(more) {
                for (a, b) in r.iter_mut().zip(m) {
                    *a |= b;
                }
            }
        }
        let prefixes = &mut self.prefixes;
        let mut prefilter = super::prefilter::Prefilter::build(&mut phases, &shared, &mut |p| {
            intern_in(prefixes, p)
        });
        prefilter.set_eager(&phases, &reached);
        let mut chain_nodes = vec![
            super::ChainNode {
                parent: None,
                step: Transform::Lowercase,
                triggers: 0,
            };
            self.prefixes.len()
        ];
        for (prefix, &id) in &self.prefixes {
            if let Some((&step, head)) = prefix.split_last() {
                chain_nodes[id as usize] = super::ChainNode {
                    parent: self.prefixes.get(head).copied(),
                    step,
                    triggers: prefix.iter().fold(0, |t, s| t | s.triggers()),
                };
            }
        }
        let rbl_use = super::RblUse::of(&phases);
        let uses_inputs = super::uses_inputs(&phases);
        let jumps = super::jumps::Jumps::of(None, &phases);
        let plan = crate::plan::Plan::build(&crate::plan::WalkParts {
            overlay: None,
            base: &phases,
            jumps: &jumps,
            folds: None,
            pauses: (None, &rbl_use.entries),
            defaults: (None, &default_disruptive),
        });
        Ok(Ruleset {
            jumps,
            plan,
            rbl_use,
            uses_inputs,
            prefilter,
            chain_nodes,
            phases,
            config: self.config,
            files: self.files,
            warnings,
            default_disruptive,
            hash: self.hasher.finish(),
            defaults: self.defaults,
            tag_ids,
            rbl_resolver: self.rbl_resolver,
        })
    }

    /// The warnings of `@rbl` and `@geoLookup` rules nothing will answer.
    fn lookup_warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.rbl_resolver {
            for at in &self.rbl_rules {
                out.push(format!(
                    "{at}: @rbl never matches: no DNS block-list resolver is configured"
                ));
            }
        }
        if self.config.geo_db.is_none() {
            for at in &self.geo_rules {
                out.push(format!(
                    "{at}: @geoLookup never matches and GEO stays empty: no GeoIP \
                     database is configured (SecGeoLookupDb)"
                ));
            }
        }
        out
    }

    /// Finishes a site's overlay (a builder made by [`RulesetBuilder::for_overlay`]):
    /// its rules per phase, numbered in the base's tag table, with the `ctl`s that
    /// remove by tag filled from it. Its rules are not folded and have no place in
    /// the base's prefilter: they run as written.
    pub(crate) fn build_overlay(mut self) -> Result<OverlayBuild, LoadError> {
        if self.open_chain {
            let span = match self.entries.last() {
                Some(Entry::Rule(r)) => r.span.clone(),
                _ => Span {
                    file: Arc::new(PathBuf::from("?")),
                    line: 0,
                    column: 0,
                },
            };
            return Err(LoadError::rule(
                &span,
                None,
                "the last rule has `chain` but no rule follows",
            ));
        }
        let Some(mut state) = self.overlay.take() else {
            return Err(LoadError::rule(
                &Span {
                    file: Arc::new(PathBuf::from("?")),
                    line: 0,
                    column: 0,
                },
                None,
                "not an overlay builder",
            ));
        };
        let mut warnings = self.warnings.clone();
        for w in self.lookup_warnings() {
            tracing::warn!("{w}");
            warnings.push(w);
        }
        let mut phases = into_phases(std::mem::take(&mut self.entries));
        let default_disruptive = default_disruptives(&self.defaults);
        let mut tag_ids = state.base.tag_ids.clone();
        super::tags::number_with(&mut phases, &mut tag_ids);
        for sel in &mut state.removed_tags {
            super::tags::fill(sel, &tag_ids);
        }
        for (t, _) in &mut state.target_removals {
            if let PendingTarget::Tag(sel) = t {
                super::tags::fill(sel, &tag_ids);
            }
        }
        let base_nodes = state.base.chain_nodes.len();
        let chain_nodes = (self.prefixes.len() > base_nodes).then(|| {
            let mut nodes = state.base.chain_nodes.clone();
            nodes.resize(
                self.prefixes.len(),
                super::ChainNode {
                    parent: None,
                    step: Transform::Lowercase,
                    triggers: 0,
                },
            );
            for (prefix, &id) in &self.prefixes {
                if (id as usize) < base_nodes {
                    continue;
                }
                if let Some((&step, head)) = prefix.split_last() {
                    nodes[id as usize] = super::ChainNode {
                        parent: self.prefixes.get(head).copied(),
                        step,
                        triggers: prefix.iter().fold(0, |t, s| t | s.triggers()),
                    };
                }
            }
            nodes
        });
        Ok(OverlayBuild {
            phases,
            chain_nodes,
            default_disruptive,
            state,
            warnings,
            files: self.files,
            hash: self.hasher.finish(),
        })
    }
}

fn io_error(path: &Path, reason: &str) -> LoadError {
    LoadError::Parse(seclang::ParseError {
        span: Span {
            file: Arc::new(path.to_path_buf()),
            line: 0,
            column: 0,
        },
        kind: seclang::ParseErrorKind::Io {
            path: path.to_path_buf(),
            reason: reason.to_string(),
        },
    })
}

/// The directive a removal selector was written with, for messages.
fn removal_name(sel: &RuleSelector) -> &'static str {
    match sel {
        RuleSelector::Ids(_) => "SecRuleRemoveById",
        RuleSelector::Tag(_) => "SecRuleRemoveByTag",
        RuleSelector::Msg(_) => "SecRuleRemoveByMsg",
    }
}

/// The disruptive action and status of each phase's `SecDefaultAction`.
fn default_disruptives(defaults: &[Vec<ActionDef>; 5]) -> [(Disruptive, Option<u16>); 5] {
    let mut out: [(Disruptive, Option<u16>); 5] = Default::default();
    for (i, defs) in defaults.iter().enumerate() {
        for a in defs {
            let n = a.name.to_ascii_lowercase();
            match n.as_str() {
                "deny" => out[i].0 = Disruptive::Deny,
                "drop" => out[i].0 = Disruptive::Drop,
                "pass" => out[i].0 = Disruptive::Pass,
                "status" => out[i].1 = a.value.as_deref().and_then(|v| v.trim().parse().ok()),
                "redirect" => {
                    if let Some(m) = a.value.as_deref().and_then(|v| Macro::parse(v).ok()) {
                        out[i].0 = Disruptive::Redirect(m);
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// Splits the entries into phases (markers in every phase) and drops what only
/// loading needed: the rules as written (for `SecRuleUpdateActionById`).
fn into_phases(entries: Vec<Entry>) -> [Vec<Entry>; 5] {
    let mut phases: [Vec<Entry>; 5] = Default::default();
    for e in entries {
        match &e {
            Entry::Rule(r) => phases[usize::from(r.phase - 1)].push(e),
            Entry::Marker(_) => {
                for p in &mut phases {
                    p.push(e.clone());
                }
            }
        }
    }
    for phase in &mut phases {
        for e in phase.iter_mut() {
            if let Entry::Rule(r) = e {
                let mut link = Some(r.as_mut());
                while let Some(l) = link {
                    l.def = None;
                    l.action_defs = Vec::new();
                    link = l.chain.as_deref_mut();
                }
            }
        }
    }
    phases
}

fn is_disruptive(name: &str) -> bool {
    matches!(
        name.to_ascii_lowercase().as_str(),
        "pass" | "deny" | "drop" | "block" | "allow" | "redirect"
    )
}

fn has_action(actions: &[ActionDef], name: &str) -> bool {
    actions.iter().any(|a| a.name.eq_ignore_ascii_case(name))
}

fn find_id(actions: &[ActionDef]) -> Result<Option<i64>, String> {
    match actions.iter().find(|a| a.name.eq_ignore_ascii_case("id")) {
        None => Ok(None),
        Some(a) => {
            let v = a.value.as_deref().unwrap_or("");
            let id: i64 = v
                .trim()
                .parse()
                .map_err(|_| format!("id: not a number: {v:?}"))?;
            if id <= 0 {
                return Err(format!("id: must be positive, got {id}"));
            }
            Ok(Some(id))
        }
    }
}

fn find_phase(actions: &[ActionDef]) -> Result<Option<u8>, String> {
    match actions
        .iter()
        .rev()
        .find(|a| a.name.eq_ignore_ascii_case("phase"))
    {
        None => Ok(None),
        Some(a) => {
            let v = a.value.as_deref().unwrap_or("").trim().to_ascii_lowercase();
            let p = match v.as_str() {
                "request" => 2,
                "response" => 4,
                "logging" => 5,
                n => n
                    .parse::<u8>()
                    .map_err(|_| format!("phase: expected 1-5, got {v:?}"))?,
            };
            if !(1..=5).contains(&p) {
                return Err(format!("phase: expected 1-5, got {p}"));
            }
            Ok(Some(p))
        }
    }
}

fn parse_severity(v: &str) -> Result<u8, String> {
    const NAMES: [&str; 8] = [
        "EMERGENCY",
        "ALERT",
        "CRITICAL",
        "ERROR",
        "WARNING",
        "NOTICE",
        "INFO",
        "DEBUG",
    ];
    let v = v.trim();
    if let Ok(n) = v.parse::<u8>()
        && n <= 7
    {
        return Ok(n);
    }
    NAMES
        .iter()
        .position(|n| n.eq_ignore_ascii_case(v))
        .map(|p| p as u8)
        .ok_or_else(|| format!("severity: unknown value {v:?}"))
}

fn parse_small(v: &str) -> Result<u8, String> {
    v.trim()
        .parse::<u8>()
        .map_err(|_| format!("expected a number 0-9, got {v:?}"))
}

fn split_collection(target: &str) -> Result<(CollectionKind, &str), String> {
    let (c, name) = target
        .trim()
        .split_once('.')
        .ok_or_else(|| format!("expected collection.name, got {target:?}"))?;
    let coll = CollectionKind::from_name(c).ok_or_else(|| format!("unknown collection {c:?}"))?;
    Ok((coll, name))
}

/// Parses a `setvar` value: `[!]coll.name[=[+|-]value]`.
fn parse_setvar(v: &str) -> Result<Action, String> {
    let v = v.trim();
    if let Some(rest) = v.strip_prefix('!') {
        let (collection, name) = split_collection(rest)?;
        return Ok(Action::SetVar {
            collection,
            name: Macro::parse(name)?,
            op: SetOp::Delete,
        });
    }
    let (target, value) = match v.split_once('=') {
        Some((t, val)) => (t, Some(val)),
        None => (v, None),
    };
    let (collection, name) = split_collection(target)?;
    let op = match value {
        None => SetOp::SetOne,
        Some(val) => {
            if let Some(x) = val.strip_prefix('+') {
                SetOp::Add(Macro::parse(x)?)
            } else if let Some(x) = val.strip_prefix('-') {
                SetOp::Sub(Macro::parse(x)?)
            } else {
                SetOp::Set(Macro::parse(val)?)
            }
        }
    };
    Ok(Action::SetVar {
        collection,
        name: Macro::parse(name.trim())?,
        op,
    })
}

fn on_off(v: &str) -> Result<bool, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("expected On or Off, got {v:?}")),
    }
}

fn parse_ranges(v: &str) -> Result<Vec<IdRange>, String> {
    v.split([',', ' '])
        .filter(|s| !s.is_empty())
        .map(|s| {
            let bad = || format!("bad rule id or range {s:?}");
            match s.split_once('-') {
                Some((a, b)) => Ok(IdRange {
                    start: a.trim().parse().map_err(|_| bad())?,
                    end: b.trim().parse().map_err(|_| bad())?,
                }),
                None => {
                    let id = s.trim().parse().map_err(|_| bad())?;
                    Ok(IdRange { start: id, end: id })
                }
            }
        })
        .collect()
}

fn tag_regex(v: &str) -> Result<regex::bytes::Regex, String> {
    regex::bytes::RegexBuilder::new(v)
        .unicode(false)
        .build()
        .map_err(|e| format!("bad tag pattern {v:?}: {e}"))
}

fn parse_exclusion(target: &str) -> Result<Exclusion, String> {
    let target = target.trim();
    let (name, sel) = match target.split_once(':') {
        Some((n, s)) => (n, Some(s)),
        None => (target, None),
    };
    let var = Var::from_name(name).ok_or_else(|| format!("unknown variable {name:?}"))?;
    let sel = sel.map(|s| {
        if s.len() >= 2 && s.starts_with('/') && s.ends_with('/') {
            seclang::Selector::Regex(s[1..s.len() - 1].to_string())
        } else {
            seclang::Selector::Key(s.trim_matches('\'').to_string())
        }
    });
    let selector = variables::compile_selector(var, sel.as_ref())?;
    Ok(Exclusion { var, selector })
}

fn parse_ctl(v: &str) -> Result<Ctl, String> {
    let (opt, val) = v
        .split_once('=')
        .ok_or_else(|| format!("ctl: expected option=value, got {v:?}"))?;
    let val = val.trim();
    let split_target = |val: &str| -> Result<(String, Exclusion), String> {
        let (sel, target) = val
            .split_once(';')
            .ok_or_else(|| format!("ctl:{opt}: expected SELECTOR;TARGET, got {val:?}"))?;
        Ok((sel.to_string(), parse_exclusion(target)?))
    };
    Ok(match opt.trim().to_ascii_lowercase().as_str() {
        "ruleengine" => Ctl::RuleEngine(
            RuleEngineMode::parse(val)
                .ok_or_else(|| format!("ctl:ruleEngine: bad value {val:?}"))?,
        ),
        "ruleremovebyid" => Ctl::RuleRemoveById(parse_ranges(val)?),
        "ruleremovebytag" => Ctl::RuleRemoveByTag(TagSelector::new(tag_regex(val)?)),
        "ruleremovebymsg" => Ctl::RuleRemoveByMsg(val.to_string()),
        "ruleremovetargetbyid" => {
            let (sel, ex) = split_target(val)?;
            Ctl::RuleRemoveTargetById(parse_ranges(&sel)?, ex)
        }
        "ruleremovetargetbytag" => {
            let (sel, ex) = split_target(val)?;
            Ctl::RuleRemoveTargetByTag(TagSelector::new(tag_regex(&sel)?), ex)
        }
        "ruleremovetargetbymsg" => {
            let (sel, ex) = split_target(val)?;
            Ctl::RuleRemoveTargetByMsg(sel, ex)
        }
        "requestbodyprocessor" => Ctl::RequestBodyProcessor(
            BodyProcessor::from_name(val)
                .ok_or_else(|| format!("ctl:requestBodyProcessor: unknown processor {val:?}"))?,
        ),
        "forcerequestbodyvariable" => Ctl::ForceRequestBodyVariable(on_off(val)?),
        "requestbodyaccess" => Ctl::RequestBodyAccess(on_off(val)?),
        "responsebodyaccess" => Ctl::ResponseBodyAccess(on_off(val)?),
        "requestbodylimit" => Ctl::RequestBodyLimit(
            val.parse()
                .map_err(|_| format!("ctl:requestBodyLimit: bad size {val:?}"))?,
        ),
        "auditengine" => Ctl::AuditEngine(
            AuditEngineMode::parse(val)
                .ok_or_else(|| format!("ctl:auditEngine: bad value {val:?}"))?,
        ),
        "auditlogparts" => Ctl::AuditLogParts(val.to_string()),
        other => return Err(format!("ctl: unsupported option {other:?}")),
    })
}

/// Splits variable definitions into targets and exclusions.
fn compile_targets(
    span: &Span,
    id: Option<i64>,
    defs: &[seclang::VariableDef],
) -> Result<(Vec<Target>, Vec<Exclusion>), LoadError> {
    let mut targets = Vec::new();
    let mut exclusions = Vec::new();
    for d in defs {
        let err = |reason: String| LoadError::rule(span, id, reason);
        let var =
            Var::from_name(&d.name).ok_or_else(|| err(format!("unknown variable {:?}", d.name)))?;
        let selector = variables::compile_selector(var, d.selector.as_ref()).map_err(err)?;
        if d.exclude {
            exclusions.push(Exclusion { var, selector });
        } else {
            targets.push(Target {
                var,
                selector,
                count: d.count,
                written: variables::written(d),
            });
        }
    }
    Ok((targets, exclusions))
}

/// A compiled `RuleSelector`.
enum CompiledSelector {
    Ids(Vec<IdRange>),
    Tag(regex::bytes::Regex),
    Msg(String),
}

impl CompiledSelector {
    fn selects(&self, rule: &Rule) -> bool {
        match self {
            CompiledSelector::Ids(r) => rule.id.is_some_and(|id| r.iter().any(|r| r.contains(id))),
            CompiledSelector::Tag(re) => rule.meta.tags.iter().any(|t| re.is_match(t.as_bytes())),
            CompiledSelector::Msg(m) => rule.meta.msg.as_ref().is_some_and(|msg| msg.text() == m),
        }
    }
}

fn compile_selector(span: &Span, sel: &RuleSelector) -> Result<CompiledSelector, LoadError> {
    Ok(match sel {
        RuleSelector::Ids(r) => CompiledSelector::Ids(r.clone()),
        RuleSelector::Tag(t) => {
            CompiledSelector::Tag(tag_regex(t).map_err(|e| LoadError::rule(span, None, e))?)
        }
        RuleSelector::Msg(m) => CompiledSelector::Msg(m.clone()),
    })
}

/// The transformation-cache key of the chain `prefix` in `prefixes`, a new one when
/// the chain has none yet.
fn intern_in(prefixes: &mut HashMap<Vec<Transform>, u32>, prefix: &[Transform]) -> u32 {
    let next = prefixes.len() as u32;
    *prefixes.entry(prefix.to_vec()).or_insert(next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use seclang::MemorySource;

    /// The errors of a keep-going load of `text` (as `r.conf`), each as displayed.
    fn errors(text: &str, limit: usize) -> (Vec<String>, usize) {
        let mut b = RulesetBuilder::new(Arc::new(MemorySource::new()));
        b.keep_going(limit);
        assert!(b.add_text(text, "r.conf").is_ok());
        match b.finish() {
            Ok(_) => (Vec::new(), 0),
            Err(e) => (
                e.listed().iter().map(ToString::to_string).collect(),
                e.total(),
            ),
        }
    }

    const GOOD: &str = "SecRule ARGS \"@rx a\" \"id:100,phase:2,deny\"\n";

    #[test]
    fn keep_going_reports_every_independent_error_with_its_place() {
        let text = format!(
            "{GOOD}SecRule ARGS \"@rx a\" \"id:1,phase:2,deny,t:nosuch\"\n\
             SecBogus 1\n\
             SecRule ARGS \"@nosuchop a\" \"id:2,phase:2,deny\"\n\
             SecRule ARGS \"@rx b\" \"id:3,phase:2,deny\"\n\
             SecRuleEngine Sometimes\n"
        );
        let (got, total) = errors(&text, 50);
        assert_eq!(total, 4, "{got:#?}");
        assert!(got[0].starts_with("r.conf:2:1: [id 1] "), "{got:?}");
        assert!(got[0].contains("nosuch"), "{got:?}");
        assert_eq!(got[1], "r.conf:3:1: unknown directive \"SecBogus\"");
        assert!(got[2].starts_with("r.conf:4:1: [id 2] "), "{got:?}");
        assert!(got[3].starts_with("r.conf:6:1: "), "{got:?}");
        // Without keep_going, the first one stops the load.
        let mut b = RulesetBuilder::new(Arc::new(MemorySource::new()));
        let e = b.add_text(&text, "r.conf").err().map(|e| e.to_string());
        assert_eq!(e.as_deref(), Some(got[0].as_str()));
    }

    #[test]
    fn the_links_of_a_failed_rule_are_checked_but_not_reported_as_rules() {
        // Rule 1 fails; its links have no id, which is right for links.
        let (got, _) = errors(
            &format!(
                "SecRule ARGS \"@rx a\" \"id:1,phase:2,deny,t:nosuch,chain\"\n\
                 SecRule ARGS \"@rx b\" \"chain\"\n\
                 SecRule ARGS \"@rx c\" \"t:none\"\n{GOOD}"
            ),
            50,
        );
        assert_eq!(got.len(), 1, "{got:#?}");
        assert!(got[0].starts_with("r.conf:1:1: [id 1]"), "{got:?}");
        // A link's own error is reported, once, with the chain's id.
        let (got, _) = errors(
            "SecRule ARGS \"@rx a\" \"id:1,phase:2,deny,t:nosuch,chain\"\n\
             SecRule ARGS \"@rx b\" \"chain,t:alsonot\"\n\
             SecRule ARGS \"@rx c\" \"t:none\"\n\
             SecRule ARGS \"@rx d\" \"id:2,phase:2,deny,chain\"\n\
             SecRule ARGS \"@rx e\" \"t:third\"\n\
             SecRule ARGS \"@rx f\" \"id:3,phase:2,deny\"\n",
            50,
        );
        assert_eq!(got.len(), 3, "{got:#?}");
        assert!(got[1].starts_with("r.conf:2:1: [id 1]"), "{got:?}");
        assert!(got[2].starts_with("r.conf:5:1: [id 2]"), "{got:?}");
    }

    #[test]
    fn a_chain_start_that_does_not_parse_does_not_turn_its_links_into_errors() {
        let (got, _) = errors(
            &format!(
                "SecRule ARGS \"@rx a\" \"id:1,phase:2,deny,chain\n\
                 SecRule ARGS \"@rx b\" \"t:none\"\n{GOOD}"
            ),
            50,
        );
        assert_eq!(got, ["r.conf:1:1: unterminated quoted string"]);
        // A rule without an id that sets its phase is taken for a rule, not a link.
        let (got, _) = errors("SecFoo 1\nSecRule ARGS \"@rx b\" \"phase:2,deny\"\n", 50);
        assert_eq!(got.len(), 2, "{got:#?}");
        assert!(got[1].contains("rule has no id"), "{got:?}");
    }

    #[test]
    fn an_open_chain_is_reported_and_the_next_directive_still_applies() {
        let (got, _) = errors(
            "SecRule ARGS \"@rx a\" \"id:1,phase:2,deny,chain\"\n\
             SecRuleEngine On\n\
             SecRuleUpdateActionById 1 \"pass\"\n\
             SecRuleUpdateActionById 7 \"pass\"\n\
             SecRule ARGS \"@rx a\" \"id:1,phase:2,deny\"\n",
            50,
        );
        assert_eq!(got.len(), 3, "{got:#?}");
        assert!(
            got[0].starts_with("r.conf:2:1: a rule with `chain`"),
            "{got:?}"
        );
        assert!(got[1].starts_with("r.conf:4:1: [id 7]"), "{got:?}");
        assert!(
            got[2].starts_with("r.conf:5:1: [id 1] duplicate"),
            "{got:?}"
        );
    }

    #[test]
    fn updates_of_a_rule_that_failed_are_not_reported_again() {
        let (got, _) = errors(
            "SecRule ARGS \"@rx a\" \"id:5,phase:2,deny,t:nosuch\"\n\
             SecRuleUpdateActionById 5 \"pass\"\n\
             SecRuleUpdateTargetById 5 \"!ARGS:x\"\n\
             SecRuleRemoveById 5\n",
            50,
        );
        assert_eq!(got.len(), 1, "{got:#?}");
    }

    #[test]
    fn errors_past_the_limit_are_counted() {
        let text: String = (1..=60)
            .map(|i| format!("SecRule ARGS \"@rx a\" \"id:{i},phase:2,deny,t:bad{i}\"\n"))
            .collect();
        let mut b = RulesetBuilder::new(Arc::new(MemorySource::new()));
        b.keep_going(50);
        assert!(b.add_text(&text, "r.conf").is_ok());
        let Err(e) = b.finish() else {
            panic!("the load has errors")
        };
        assert_eq!((e.listed().len(), e.total(), e.unlisted()), (50, 60, 10));
        assert!(e.first().to_string().starts_with("r.conf:1:1: [id 1]"));
        let shown = e.to_string();
        assert_eq!(shown.lines().count(), 51);
        assert!(shown.ends_with("\nand 10 more error(s)"), "{shown}");
        assert!(
            shown
                .lines()
                .nth(49)
                .is_some_and(|l| l.starts_with("r.conf:50:1:"))
        );
    }

    #[test]
    fn keep_going_reads_every_file_and_reports_an_unmatched_pattern() {
        let mut source = MemorySource::new();
        source.insert(
            "/r/a.conf",
            "SecBogus 1\nSecRule ARGS \"@rx a\" \"id:1,phase:2,deny\"\n",
        );
        source.insert(
            "/r/b.conf",
            "SecRule ARGS \"@rx a\" \"id:1,phase:2,deny\"\n",
        );
        let mut b = RulesetBuilder::new(Arc::new(source));
        b.keep_going(10);
        for f in ["/r/a.conf", "/r/none/*.conf", "/r/b.conf"] {
            assert!(b.add_file(Path::new(f)).is_ok());
        }
        let got: Vec<String> = match b.finish() {
            Ok(_) => Vec::new(),
            Err(e) => e.listed().iter().map(ToString::to_string).collect(),
        };
        assert_eq!(got.len(), 3, "{got:#?}");
        assert!(got[0].starts_with("/r/a.conf:2:1") || got[0].starts_with("/r/a.conf:1:1"));
        assert!(got[1].contains("no file matches the pattern"), "{got:?}");
        assert!(
            got[2].starts_with("/r/b.conf:1:1: [id 1] duplicate"),
            "{got:?}"
        );
        // Without errors, a keep-going load builds.
        let mut b = RulesetBuilder::new(Arc::new(MemorySource::new()));
        b.keep_going(10);
        assert!(b.add_text(GOOD, "g.conf").is_ok());
        assert_eq!(b.finish().map(|r| r.rule_count()).ok(), Some(1));
    }
}
