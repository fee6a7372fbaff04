//! A transaction: one request/response pair run through phases 1 to 5.
//!
//! The server feeds the transaction what it receives (request line, headers, body
//! chunks, then the response) and runs each phase; a phase returns an
//! [`Intervention`] when a rule disrupts. The transaction does no I/O: persistent
//! collections are read through [`CollectionReader`] and written back as data
//! ([`Transaction::poll_event`]), time comes through [`TxContext`].

pub mod budget;
pub(crate) mod collect;
pub(crate) mod eval;
mod limits;
pub(crate) mod removed;
mod request;
#[cfg(test)]
pub(crate) mod test_get;

pub use limits::ARGUMENTS_LIMIT_TX;

use crate::actions::{AllowScope, BodyProcessor};
use crate::body::Arg;
use crate::body::multipart::Multipart;
use crate::body::xml::XmlDoc;
use crate::collections::{CollectionReader, RecordKey, StoredVar, WriteLog};
use crate::config::{AuditEngineMode, BodyLimitAction, RuleEngineMode};
use crate::intervention::Intervention;
use crate::log::MatchRecord;
use crate::operators::Captures;
use crate::ruleset::Ruleset;
pub use budget::{BudgetAction, BudgetExceeded, CpuBudget, CpuMeter};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

/// `State::fold_phase` of a transaction that never uses the load-time folds (its
/// site's walk differs from the one they were proven for).
pub(crate) const NO_FOLDS: u8 = u8::MAX;

/// A source of the current time, for DURATION and collection expiry.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Microseconds since the Unix epoch.
    fn now_unix_micros(&self) -> i64;
}

/// What the server knows about a transaction before the request arrives.
#[derive(Debug, Clone)]
pub struct TxContext {
    /// Client address (REMOTE_ADDR).
    pub client_ip: IpAddr,
    /// Client port (REMOTE_PORT).
    pub client_port: u16,
    /// The TCP peer the request came from (PEER_ADDR, PEER_PORT), when the server
    /// took the client's address from elsewhere (a PROXY protocol header, or a
    /// trusted proxy's X-Forwarded-For); `None`: the client is the peer.
    pub peer: Option<std::net::SocketAddr>,
    /// Local address the request arrived on (SERVER_ADDR).
    pub server_ip: IpAddr,
    /// Local port (SERVER_PORT).
    pub server_port: u16,
    /// UNIQUE_ID.
    pub unique_id: String,
    /// When the transaction started, in microseconds since the Unix epoch.
    pub now_unix_micros: i64,
    /// Where persistent collections are read from; `None` keeps IP, GLOBAL, ... for
    /// this transaction only. Writes come back as events
    /// ([`Transaction::poll_event`]).
    pub store: Option<Arc<dyn CollectionReader>>,
    /// The clock for DURATION; `None` makes DURATION read 0.
    pub clock: Option<Arc<dyn Clock>>,
    /// Answers `@rbl` lookups; `None`: `@rbl` never matches (loading the rules
    /// warned, unless [`RulesetBuilder::rbl_resolver`](crate::RulesetBuilder::rbl_resolver)
    /// said a resolver would be given).
    pub rbl: Option<Arc<dyn crate::lookups::RblResolver>>,
}

impl Default for TxContext {
    fn default() -> Self {
        TxContext {
            client_ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            client_port: 0,
            peer: None,
            server_ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            server_port: 80,
            unique_id: String::from("0"),
            now_unix_micros: 0,
            store: None,
            clock: None,
            rbl: None,
        }
    }
}

/// The result of appending a body chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyAppend {
    /// Buffered; more may come.
    Ok,
    /// The body went over its limit. With `reject`, the server must refuse the
    /// transaction (413 for a request, as ModSecurity); otherwise the part within the
    /// limit is inspected and the rest passes uninspected.
    LimitReached {
        /// Refuse the transaction.
        reject: bool,
    },
}

/// Everything the request gave, as the engine sees it.
#[derive(Debug, Default)]
pub(crate) struct RequestData {
    pub method: Vec<u8>,
    pub uri_raw: Vec<u8>,
    pub protocol: Vec<u8>,
    pub uri: Vec<u8>,
    pub filename: Vec<u8>,
    pub basename: Vec<u8>,
    pub query: Vec<u8>,
    pub line: Vec<u8>,
    pub headers: Vec<Arg>,
    pub cookies: Vec<Arg>,
    pub args_get: Vec<Arg>,
    pub args_post: Vec<Arg>,
    pub server_name: Vec<u8>,
    pub content_type: Vec<u8>,
    pub body: Vec<u8>,
    pub body_seen: usize,
    pub body_set: bool,
    pub urlencoded_error: bool,
    pub processor: Option<BodyProcessor>,
    pub processor_error: Option<String>,
    pub multipart: Option<Multipart>,
    pub xml: Option<XmlDoc>,
    pub inbound_data_error: bool,
    /// The query string had more arguments than `SecArgumentsLimit`.
    pub query_args_dropped: bool,
    /// The first limit that cut the body short (see [`limits`]).
    pub shortfall: Option<limits::Shortfall>,
    /// REQBODY_ERROR_MSG when a limit, not the processor, made the body incomplete.
    pub body_error: Option<String>,
    /// The input stage's table (INPUTS, INPUTS_DECODED), filled only when a rule
    /// reads it.
    pub inputs: crate::inputs::Inputs,
    /// REMOTE_USER: the user the server authenticated, when it did.
    pub remote_user: Option<Vec<u8>>,
}

/// The response, as far as it has come.
#[derive(Debug, Default)]
pub(crate) struct ResponseData {
    pub status: u16,
    pub protocol: Vec<u8>,
    pub headers: Vec<Arg>,
    pub body: Vec<u8>,
    pub body_seen: usize,
    pub outbound_data_error: bool,
}

/// A persistent collection loaded by `initcol`, `setsid` or `setuid`: what the
/// rules see (stored variables, then the built-in fields) and what they wrote.
#[derive(Debug)]
pub(crate) struct Persistent {
    pub key: RecordKey,
    pub values: std::collections::HashMap<Vec<u8>, StoredVar>,
    pub log: WriteLog,
}

/// MATCHED_VARS: the names and values the current rule (and the chain links before
/// it) matched. Clearing keeps the buffers, so the next rule's matches are written
/// into them without allocating.
#[derive(Debug, Default)]
pub(crate) struct MatchedVars {
    items: Vec<(Vec<u8>, Vec<u8>)>,
    len: usize,
}

impl MatchedVars {
    /// Forgets the entries, keeping their buffers.
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Appends a copy of a name and value.
    pub fn push(&mut self, name: &[u8], value: &[u8]) {
        if self.len == self.items.len() {
            self.items.push((Vec::new(), Vec::new()));
        }
        let (n, v) = &mut self.items[self.len];
        n.clear();
        n.extend_from_slice(name);
        v.clear();
        v.extend_from_slice(value);
        self.len += 1;
    }

    /// The entries, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &(Vec<u8>, Vec<u8>)> {
        self.items[..self.len].iter()
    }
}

/// One value a rule matched: its name, the value as the operator saw it, and the
/// operator's captures when the rule captures.
#[derive(Debug, Default)]
pub(crate) struct Hit {
    pub name: Vec<u8>,
    pub value: Vec<u8>,
    pub caps: Option<Captures>,
}

/// Mutable evaluation state.
#[derive(Debug)]
pub(crate) struct State {
    pub mode: RuleEngineMode,
    /// TX, keys lower-case. A hash map for speed (CRS reads and writes it hundreds of
    /// times per request); iteration sorts by key, so it is ordered as a tree would be.
    pub tx: rustc_hash::FxHashMap<Vec<u8>, Vec<u8>>,
    pub persistent: [Option<Persistent>; 6],
    pub env: BTreeMap<Vec<u8>, Vec<u8>>,
    pub matched_var: Vec<u8>,
    pub matched_var_name: Vec<u8>,
    pub matched_vars: MatchedVars,
    pub removed_ids: removed::RemovedIds,
    pub removed_tags: crate::ruleset::tags::TagSet,
    pub removed_msgs: Vec<String>,
    pub target_removals: Vec<(eval::TargetRemoval, crate::variables::Exclusion)>,
    pub body_processor: Option<BodyProcessor>,
    pub force_body_variable: bool,
    /// `SecPalisadeRequestBodyVariable`: which bodies REQUEST_BODY exposes.
    pub request_body_variable: crate::config::RequestBodyVariable,
    pub request_body_access: bool,
    pub response_body_access: bool,
    pub request_body_limit: usize,
    pub audit_engine: AuditEngineMode,
    pub audit_parts: String,
    pub allow: Option<AllowScope>,
    pub allow_phase: u8,
    /// The last phase that ran to its end (or to an `allow:phase`) with the rule
    /// set's load-time folds valid, every phase before it likewise (0: none yet).
    pub fold_phase: u8,
    /// Whether the links folded at load time (`Rule::folded`) may stand for the
    /// written ones in the phase running: the phases before it all ran in order to
    /// their end, and no `ctl:ruleRemove*` ran (see `ruleset::fold`).
    pub folds_valid: bool,
    pub highest_severity: u8,
    pub intervention: Option<Intervention>,
    pub phases_done: u8,
    /// GEO, filled by the last `@geoLookup` that found its address.
    pub geo: Vec<(&'static str, String)>,
}

/// Cached transformation results: for each value with a stable identity, a row with one
/// cell per pipeline prefix of the rule set (see `ChainNode`), so a lookup is an index,
/// not a hash, once the value's row is found.
#[derive(Debug, Default)]
pub(crate) struct TransformCache {
    /// Row start in `cells` plus one (0: no row yet), by value identity: indexed by
    /// the identity's source (its top byte), then by its index within the source.
    pub rows: Vec<Vec<u32>>,
    /// Rows of `width` cells: one per prefix (0: not computed yet, 1: the value is
    /// unchanged, k >= 2: `forms[k - 2]`), then the raw value's byte classes with
    /// `KNOWN` set once computed, then the quiet bits.
    pub cells: Vec<u32>,
    /// Transformed values that differ from their raw value, with their byte classes.
    pub forms: Vec<(Arc<[u8]>, u32)>,
    /// The cell each transformation step made of a cell of a row, keyed by (row
    /// start, input cell, step): pipelines that reach the same bytes by different
    /// prefixes (`t:urlDecodeUni,t:removeWhitespace` on a value `t:urlDecodeUni`
    /// leaves alone, and `t:removeWhitespace` alone) share one result, computed once.
    pub steps: rustc_hash::FxHashMap<(u32, u32, crate::transforms::Transform), u32>,
    /// The cells of the forms of at least `SHARED_FORM_MIN_LEN` bytes (`eval.rs`),
    /// keyed by (row start, length): a step whose result equals one of them shares
    /// its cell instead of taking a new one.
    pub long_forms: rustc_hash::FxHashMap<(u32, usize), Vec<u32>>,
    /// The prefilter's set of all patterns run on a form of a value, keyed by (row
    /// start, cell). (A raw value's answer is also marked in its row, so that the
    /// usual case, a raw value that matches nothing, needs no lookup here.)
    pub all_hits: rustc_hash::FxHashMap<(u32, u32), AllAnswer>,
    /// The `@pm` lists (of the prefilter's union, one bit each) that have a phrase in
    /// a form of a value, keyed by (row start, cell): the full answer, or as far as a
    /// walk that stopped at a list a rule asked for got.
    pub pm_lists: rustc_hash::FxHashMap<(u32, u32), crate::operators::pm::ListsSoFar>,
    /// What a group's [`Narrow`](crate::ruleset::prefilter::Narrow) found in a form
    /// of a value, keyed by (row start, cell, group): the group's pattern that matches,
    /// if any.
    pub narrow_hits: rustc_hash::FxHashMap<(u32, u32, u32), Option<u32>>,
    /// A pattern set kept between runs of the prefilter's set of all patterns, so
    /// that the usual answer ("nothing matches") allocates nothing; only a value that
    /// matches keeps a copy (in `all_hits`).
    pub all_scratch: Option<regex_automata::PatternSet>,
    /// Per prefilter group, which patterns matched some value in the current phase
    /// (`None` until the group's first rule is reached in the phase).
    pub unions: Vec<Option<crate::ruleset::prefilter::Union>>,
    /// Whether the phase's eager groups (`Prefilter::eager`) were computed together.
    pub eager_done: bool,
    /// Cells per row: one per pipeline prefix, one for the raw value's byte classes,
    /// one for the prefilter's set of all patterns on the raw value (0: not run, 1: no
    /// pattern matched, 2: some did, see `all_hits`),
    /// then one bit per prefilter group, set when the value matched none of the group's
    /// patterns (it needs no second look in a later phase).
    pub width: usize,
    /// The `SecUnicodeMapFile` table `t:urlDecodeUni` maps through.
    pub unicode_map: Option<Arc<crate::transforms::UnicodeMap>>,
}

/// What the prefilter's set of all patterns found in one form of a value.
#[derive(Debug)]
pub(crate) enum AllAnswer {
    /// No pattern matches.
    Quiet,
    /// Exactly these patterns match.
    Hits(regex_automata::PatternSet),
    /// The set's lazy DFA gave up on the bytes, made of these: each group scans
    /// them itself, and when its own walk gives up too, keeps the patterns these
    /// bytes do not rule out (computed once per form, not per group).
    GaveUp(crate::operators::rx_set::ByteSet),
}

/// One transaction. Create it with [`Transaction::new`], feed it the request and run
/// the phases in order.
#[derive(Debug)]
pub struct Transaction {
    ruleset: Arc<Ruleset>,
    /// The site's policy over `ruleset`, when the transaction has one.
    pub(crate) policy: Option<Arc<crate::policy::Policy>>,
    ctx: TxContext,
    pub(crate) req: RequestData,
    pub(crate) resp: ResponseData,
    pub(crate) state: State,
    pub(crate) cache: TransformCache,
    /// A spare vector for the values a rule inspects, kept between rules so that
    /// collecting targets does not allocate.
    pub(crate) scratch: Vec<collect::Value<'static>>,
    /// The values the rule being evaluated matched, waiting for its actions; kept
    /// between rules so that matching does not allocate.
    pub(crate) hits: Vec<Hit>,
    pub(crate) matches: Vec<MatchRecord>,
    /// What the transaction reports, oldest first ([`Transaction::poll_event`]).
    pub(crate) events: std::collections::VecDeque<crate::events::Event>,
    /// `SecDebugLogLevel`: debug lines of this level and below are kept.
    pub(crate) debug_level: u8,
    /// The CPU budget and the time accounted against it.
    pub(crate) budget: budget::BudgetState,
    /// `@rbl` answers and failures, and `@geoLookup`'s pending GEO.
    pub(crate) lookups: crate::lookups::TxLookups,
    /// Whether phases 1 to 4 pause before a rule that may wait for a DNS lookup
    /// ([`Transaction::set_pause_for_lookups`]).
    pub(crate) pause_for_lookups: bool,
    /// The work after which a walk pauses at its next rule
    /// ([`Transaction::set_slice`]).
    pub(crate) slice: Option<u64>,
    /// The phase and the entry of it (the plan's step, or the interpreter's entry)
    /// where the walk paused, until it is resumed.
    pub(crate) paused: Option<(u8, usize)>,
    /// Runs phases with the interpreter instead of the plan (the test oracle:
    /// [`Transaction::use_interpreter`]).
    pub(crate) interpreter: bool,
    /// Each evaluated rule's time in the phase running now, when the transaction
    /// is timed ([`Transaction::time_rules`]); handed out as one
    /// [`Event::RuleTimes`](crate::events::Event::RuleTimes) per phase.
    pub(crate) rule_times: Option<Vec<crate::events::RuleTime>>,
}

impl Transaction {
    /// Starts a transaction against a rule set.
    pub fn new(ruleset: Arc<Ruleset>, ctx: TxContext) -> Self {
        Self::start(ruleset, None, ctx)
    }

    /// Starts a transaction of a site: against the policy's base rule set, with the
    /// policy's engine mode, limits, seeded TX variables, removals and own rules
    /// (see [`crate::policy`]).
    pub fn with_policy(policy: Arc<crate::policy::Policy>, ctx: TxContext) -> Self {
        let ruleset = policy.base.clone();
        let mut tx = Self::start(ruleset, Some(policy.clone()), ctx);
        let s = &mut tx.state;
        if let Some(mode) = policy.mode {
            s.mode = mode;
        }
        if let Some(limit) = policy.limits.request_body_limit {
            s.request_body_limit = limit;
        }
        for (k, v) in &policy.seeds {
            s.tx.insert(k.clone(), v.clone());
        }
        // The site's configure-time exclusions, as `ctl:ruleRemove*` actions leave
        // them.
        let r = &policy.removals;
        s.removed_ids = r.ids.clone();
        s.removed_tags = r.tags.clone();
        s.removed_msgs = r.msgs.clone();
        s.target_removals = r.targets.clone();
        if !policy.keeps_folds() {
            s.fold_phase = NO_FOLDS;
        }
        tx
    }

    fn start(
        ruleset: Arc<Ruleset>,
        policy: Option<Arc<crate::policy::Policy>>,
        ctx: TxContext,
    ) -> Self {
        let nodes = policy
            .as_deref()
            .map_or(ruleset.chain_nodes.len(), |p| p.chain_nodes().len());
        let width = nodes + 2 + ruleset.prefilter.groups.len().div_ceil(32);
        let cfg = ruleset.config();
        let cpu_budget = cfg.cpu_budget;
        let debug_level = if cfg.debug_log.is_some() {
            cfg.debug_log_level
        } else {
            0
        };
        let unicode_map = cfg.unicode_map.clone();
        let state = State {
            mode: cfg.rule_engine,
            tx: Default::default(),
            persistent: Default::default(),
            env: BTreeMap::new(),
            matched_var: Vec::new(),
            matched_var_name: Vec::new(),
            matched_vars: MatchedVars::default(),
            removed_ids: Default::default(),
            removed_tags: Default::default(),
            removed_msgs: Vec::new(),
            target_removals: Vec::new(),
            body_processor: None,
            force_body_variable: false,
            request_body_variable: cfg.request_body_variable,
            request_body_access: cfg.request_body_access,
            response_body_access: cfg.response_body_access,
            request_body_limit: cfg.request_body_limit,
            audit_engine: cfg.audit.engine,
            audit_parts: cfg.audit.parts.clone(),
            allow: None,
            allow_phase: 0,
            fold_phase: 0,
            folds_valid: false,
            highest_severity: 255,
            intervention: None,
            phases_done: 0,
            geo: Vec::new(),
        };
        Transaction {
            ruleset,
            policy,
            ctx,
            req: RequestData::default(),
            resp: ResponseData::default(),
            state,
            cache: TransformCache {
                width,
                unicode_map,
                ..Default::default()
            },
            scratch: Vec::new(),
            hits: Vec::new(),
            matches: Vec::new(),
            events: std::collections::VecDeque::new(),
            debug_level,
            budget: budget::BudgetState::new(cpu_budget),
            lookups: Default::default(),
            pause_for_lookups: false,
            slice: None,
            paused: None,
            interpreter: false,
            rule_times: None,
        }
    }

    /// Runs this transaction's phases with the interpreter, which works out the
    /// walk rule by rule, instead of the compiled plan: the oracle the plan is
    /// checked against (`tests/plan_oracle.rs`). Call before the first phase.
    #[doc(hidden)]
    pub fn use_interpreter(&mut self) {
        self.interpreter = true;
    }

    /// Every TX variable and its value, sorted by name: for comparing two runs
    /// in tests.
    #[doc(hidden)]
    pub fn tx_snapshot(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out: Vec<_> = self
            .state
            .tx
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        out.sort();
        out
    }

    /// Has phases 1 to 4 pause before any rule that may wait for a DNS lookup (an
    /// `@rbl` on a value other than the client's address), for a server that runs
    /// them on threads that must not wait. A paused phase returns no intervention
    /// and [`Transaction::paused`] is true; the server then calls
    /// [`Transaction::resume_phase`] on a thread that may wait, which goes on from
    /// that rule (as if the phase had not stopped) and returns what the phase
    /// returns. Starting another phase instead drops the rest of the paused one.
    /// A phase that reaches no such rule runs to its end as usual.
    pub fn set_pause_for_lookups(&mut self, pause: bool) {
        self.pause_for_lookups = pause;
    }

    /// Has the walks of phases 1 to 5 pause at the next rule once `work` units of
    /// evaluation (the CPU budget's units: a few nanoseconds each) were done since
    /// the walk began or resumed; `None`: no such pause. A server that evaluates
    /// long phases on a few shared threads uses it to take turns between
    /// transactions: a paused phase returns no intervention, [`Transaction::paused`]
    /// is true, and [`Transaction::resume_phase`] goes on from that rule (and may
    /// pause again). A walk does at least one rule between pauses.
    pub fn set_slice(&mut self, work: Option<u64>) {
        self.slice = work;
    }

    /// True when the last phase run paused before a rule: one that may wait for
    /// a DNS lookup ([`Transaction::set_pause_for_lookups`]), or where its slice
    /// ended ([`Transaction::set_slice`]).
    pub fn paused(&self) -> bool {
        self.paused.is_some()
    }

    /// Finishes the paused phase from the rule it paused before, without pausing
    /// again; returns its intervention, as the phase's own method would have. Does
    /// nothing (None) when no phase is paused.
    pub fn resume_phase(&mut self) -> Option<Intervention> {
        let (phase, out) = self.resume_paused_phase()?;
        self.phase_result(phase, out)
    }

    /// What a phase's method returns once the phase's rules ran: nothing while it is
    /// paused; for phases 1 and 2, the rules' intervention or else the one the
    /// request's limits call for.
    fn phase_result(&mut self, phase: u8, out: Option<Intervention>) -> Option<Intervention> {
        if self.paused.is_some() {
            return None;
        }
        match phase {
            1 | 2 => out.or_else(|| self.check_limits(phase)),
            _ => out,
        }
    }

    /// Sets how many DNS block-list names this transaction may look up
    /// (default [`DEFAULT_RBL_LOOKUPS`](crate::lookups::DEFAULT_RBL_LOOKUPS)); an
    /// `@rbl` past the limit does not match, and the limit is reported once
    /// ([`Event::LimitReached`](crate::events::Event::LimitReached)).
    pub fn set_rbl_lookup_limit(&mut self, limit: usize) {
        self.lookups.limit = limit;
    }

    /// Sets REMOTE_USER: the user the server authenticated for this request
    /// (a forward proxy's `Proxy-Authorization`), before phase 1 runs. Without
    /// it, REMOTE_USER is empty.
    pub fn set_remote_user(&mut self, user: &[u8]) {
        self.req.remote_user = Some(user.to_vec());
    }

    /// The next thing the transaction reports, oldest first, taking it: rule
    /// matches, interventions, failed collection reads and lookups, limits reached,
    /// debug-log lines and (from phase 5, or [`Transaction::close`]) collection
    /// writes. A server takes them after each phase; nothing is lost by taking them
    /// later.
    pub fn poll_event(&mut self) -> Option<crate::events::Event> {
        if !self.lookups.failures.is_empty() {
            for f in std::mem::take(&mut self.lookups.failures) {
                self.events.push_back(match f {
                    crate::lookups::RblFailure::Failed { name, reason } => {
                        crate::events::Event::LookupFailed { name, reason }
                    }
                    crate::lookups::RblFailure::OverLimit { name, limit } => {
                        crate::events::Event::LimitReached(crate::events::Limit::Lookups {
                            name,
                            limit,
                        })
                    }
                });
            }
        }
        self.events.pop_front()
    }

    /// [`Transaction::poll_event`] as an iterator: the events queued so far.
    pub fn events(&mut self) -> impl Iterator<Item = crate::events::Event> + '_ {
        std::iter::from_fn(|| self.poll_event())
    }

    /// Queues the rules' changes to persistent collections (one
    /// [`Event::CollectionWrite`](crate::events::Event::CollectionWrite) per record
    /// written) for a transaction cut short before phase 5, which queues them
    /// itself. Writes already queued are not queued again.
    pub fn close(&mut self) {
        let at = self.ctx.now_unix_micros / 1_000_000;
        let timeout = i64::try_from(self.ruleset.config().collection_timeout).unwrap_or(i64::MAX);
        for p in self.state.persistent.iter_mut().flatten() {
            if p.log.is_empty() {
                continue;
            }
            let log = std::mem::take(&mut p.log);
            self.events.push_back(crate::events::Event::CollectionWrite(
                p.key.clone(),
                log.finish(at, timeout),
            ));
        }
    }

    /// Records an intervention decided in `phase` and reports it.
    pub(crate) fn intervene(&mut self, phase: u8, i: &Intervention) {
        self.state.intervention = Some(i.clone());
        self.events.push_back(crate::events::Event::Intervention {
            phase,
            intervention: i.clone(),
        });
    }

    /// Records a match for the audit log and reports it, with its error-log line
    /// when the rule logs.
    pub(crate) fn push_match(&mut self, record: MatchRecord, log_line: Option<String>) {
        self.events
            .push_back(crate::events::Event::RuleMatched(Box::new(
                crate::events::RuleMatch {
                    rule_id: record.rule_id,
                    phase: record.phase,
                    msg: record.msg.clone(),
                    var_name: record.var_name.clone(),
                    value: record.var_value.clone(),
                    severity: record.severity,
                    tags: record.tags.clone(),
                    denied_with: record.denied_with,
                    log_line,
                },
            )));
        self.matches.push(record);
    }

    /// Gives the transaction a meter of consumed CPU time: from then on the time of
    /// each phase is accounted ([`Transaction::cpu_used_micros`]) and the CPU budget
    /// (the configuration's `cpu_budget`, or the one set with
    /// [`Transaction::set_cpu_budget`]) is enforced. Without a meter there is no
    /// budget. Set it before the first phase.
    pub fn set_cpu_meter(&mut self, meter: Arc<dyn CpuMeter>) {
        self.budget.set_meter(meter);
    }

    /// Times each rule this transaction evaluates from now on, for a sampled
    /// account of what rules cost: each phase then reports an
    /// [`Event::RuleTimes`](crate::events::Event::RuleTimes). A rule's time is
    /// the wall time of its evaluation on this thread (targets, transformations,
    /// operators, chain and actions); evaluation never waits, so it is CPU time
    /// unless the thread was preempted. A transaction not timed pays one branch per
    /// rule.
    pub fn time_rules(&mut self) {
        self.rule_times.get_or_insert_with(Vec::new);
    }

    /// Replaces the configuration's CPU budget for this transaction (`None`: no
    /// limit, the time is still accounted when there is a meter).
    pub fn set_cpu_budget(&mut self, budget: Option<CpuBudget>) {
        self.budget.budget = budget;
    }

    /// Whether rule evaluation stopped because the CPU budget was exceeded, and where:
    /// from then on no rule ran, in that phase or any later one (phase 5 included).
    /// When the outcome was to block, the phase returned an [`Intervention`] too.
    pub fn budget_exceeded(&self) -> Option<&BudgetExceeded> {
        self.budget.exceeded.as_ref()
    }

    /// The CPU time accounted to this transaction's phases so far, in microseconds
    /// (`None` without a meter).
    pub fn cpu_used_micros(&self) -> Option<u64> {
        self.budget.used_micros()
    }

    /// The rule set this transaction runs (a site's: its policy's base).
    pub fn ruleset(&self) -> &Arc<Ruleset> {
        &self.ruleset
    }

    /// The site's policy, for a transaction made with
    /// [`Transaction::with_policy`].
    pub fn policy(&self) -> Option<&Arc<crate::policy::Policy>> {
        self.policy.as_ref()
    }

    /// `SecArgumentsLimit` for this transaction (the site's, or the rule set's).
    pub(crate) fn arguments_limit(&self) -> usize {
        self.policy
            .as_ref()
            .and_then(|p| p.limits.arguments_limit)
            .unwrap_or(self.ruleset.config().arguments_limit)
    }

    /// `SecRequestBodyNoFilesLimit` for this transaction.
    pub(crate) fn no_files_limit(&self) -> usize {
        self.policy
            .as_ref()
            .and_then(|p| p.limits.request_body_no_files_limit)
            .unwrap_or(self.ruleset.config().request_body_no_files_limit)
    }

    /// `SecRequestBodyJsonDepthLimit` for this transaction.
    pub(crate) fn json_depth_limit(&self) -> usize {
        self.policy
            .as_ref()
            .and_then(|p| p.limits.json_depth_limit)
            .unwrap_or(self.ruleset.config().json_depth_limit)
    }

    /// Whether a rule (of the base, or of the site's overlay) reads the input
    /// table.
    fn uses_inputs(&self) -> bool {
        self.ruleset.uses_inputs || self.policy.as_ref().is_some_and(|p| p.overlay.uses_inputs)
    }

    /// UNIQUE_ID.
    pub fn unique_id(&self) -> &str {
        &self.ctx.unique_id
    }

    /// Sets the request line: method, the URI exactly as sent (with query string and
    /// fragment, not decoded) and the protocol (`HTTP/1.1`).
    pub fn set_request_line(&mut self, method: &[u8], raw_uri: &[u8], protocol: &[u8]) {
        let arguments_limit = self.arguments_limit();
        request::set_request_line(
            &mut self.req,
            self.ruleset.config().argument_separator,
            arguments_limit,
            method,
            raw_uri,
            protocol,
        );
        self.flag_dropped_arguments();
    }

    /// Adds one request header, in the order received. Duplicates are kept.
    pub fn add_request_header(&mut self, name: &[u8], value: &[u8]) {
        request::add_request_header(&mut self.req, name, value);
    }

    /// Runs phase 1 (request headers).
    pub fn process_request_headers(&mut self) -> Option<Intervention> {
        if self.req.processor.is_none() && self.state.request_body_access {
            self.req.processor = request::processor_for(&self.req.content_type);
        }
        if self.uses_inputs() {
            let mut inputs = std::mem::take(&mut self.req.inputs);
            inputs.fill_head(&self.req);
            self.req.inputs = inputs;
        }
        let out = self.run_phase(1);
        self.phase_result(1, out)
    }

    /// The request body limit in force: `SecRequestBodyLimit`, or what a
    /// `ctl:requestBodyLimit` set for this transaction.
    pub fn request_body_limit(&self) -> usize {
        self.state.request_body_limit
    }

    /// True when the request body should be read and given to the engine.
    pub fn request_body_wanted(&self) -> bool {
        self.state.request_body_access && self.state.mode != RuleEngineMode::Off
    }

    /// Appends a chunk of the request body, up to `SecRequestBodyLimit`, or up to
    /// `SecRequestBodyNoFilesLimit` when that is lower and the body is one without
    /// files (URLENCODED, JSON or XML processor).
    ///
    /// Going over either sets INBOUND_DATA_ERROR; over `SecRequestBodyNoFilesLimit`
    /// also REQBODY_ERROR with ModSecurity v3's message, and, when the transaction is
    /// refused, an error-log line naming the limit. The transaction is refused (the
    /// server answers 413) when `SecRequestBodyLimitAction` is Reject and the rule
    /// engine is On; otherwise the part within the limit is inspected.
    pub fn append_request_body(&mut self, chunk: &[u8]) -> BodyAppend {
        let (limit, no_files) = self.request_body_cap();
        self.req.body_seen += chunk.len();
        let room = limit.saturating_sub(self.req.body.len());
        if chunk.len() <= room {
            self.req.body.extend_from_slice(chunk);
            return BodyAppend::Ok;
        }
        self.req.body.extend_from_slice(&chunk[..room]);
        self.req.inbound_data_error = true;
        let reject = self.request_limit_rejects();
        if no_files {
            self.no_files_limit_reached(reject, 2);
        }
        BodyAppend::LimitReached { reject }
    }

    /// Runs phase 2 (request body). Call it even when there is no body.
    pub fn process_request_body(&mut self) -> Option<Intervention> {
        if self.state.intervention.is_some() {
            return self.state.intervention.clone();
        }
        // Body processing is phase 2's work: its time counts.
        self.budget.open();
        if self.state.request_body_access && self.budget.exceeded.is_none() {
            let mut cfg = self.ruleset.config().clone();
            cfg.arguments_limit = self.arguments_limit();
            cfg.json_depth_limit = self.json_depth_limit();
            cfg.request_body_no_files_limit = self.no_files_limit();
            request::process_body(&mut self.req, &self.state, &cfg);
            self.flag_dropped_arguments();
            if self.uses_inputs() {
                let mut inputs = std::mem::take(&mut self.req.inputs);
                inputs.fill_body(&self.req);
                self.req.inputs = inputs;
            }
            // A multipart body's size without its files is known only now.
            if self.req.shortfall == Some(limits::Shortfall::NoFilesLimit)
                && self.req.multipart.is_some()
            {
                let reject = self.request_limit_rejects();
                if let Some(i) = self.no_files_limit_reached(reject, 2) {
                    self.budget.close();
                    return Some(i);
                }
            }
            self.budget.check_now();
        }
        let out = self.run_phase(2);
        self.phase_result(2, out)
    }

    /// Sets the response status and protocol (`HTTP/1.1`).
    pub fn set_response_status(&mut self, status: u16, protocol: &[u8]) {
        self.resp.status = status;
        self.resp.protocol = protocol.to_vec();
    }

    /// Adds one response header.
    pub fn add_response_header(&mut self, name: &[u8], value: &[u8]) {
        self.resp.headers.push((name.to_vec(), value.to_vec()));
    }

    /// Runs phase 3 (response headers).
    pub fn process_response_headers(&mut self) -> Option<Intervention> {
        self.run_phase(3)
    }

    /// True when the response body should be buffered and inspected: response body
    /// access is on and the content type is one of `SecResponseBodyMimeType`.
    pub fn response_body_wanted(&self) -> bool {
        if !self.state.response_body_access || self.state.mode == RuleEngineMode::Off {
            return false;
        }
        let ct = self
            .resp
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(b"content-type"))
            .map(|(_, v)| v.as_slice())
            .unwrap_or(b"");
        let ct = String::from_utf8_lossy(ct);
        let essence = ct
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        self.ruleset
            .config()
            .response_body_mime_types
            .contains(&essence)
    }

    /// Appends a chunk of the response body, up to `SecResponseBodyLimit`.
    pub fn append_response_body(&mut self, chunk: &[u8]) -> BodyAppend {
        let limit = self.ruleset.config().response_body_limit;
        self.resp.body_seen += chunk.len();
        let room = limit.saturating_sub(self.resp.body.len());
        if chunk.len() <= room {
            self.resp.body.extend_from_slice(chunk);
            return BodyAppend::Ok;
        }
        self.resp.body.extend_from_slice(&chunk[..room]);
        self.resp.outbound_data_error = true;
        BodyAppend::LimitReached {
            reject: self.ruleset.config().response_body_limit_action == BodyLimitAction::Reject,
        }
    }

    /// Runs phase 4 (response body).
    pub fn process_response_body(&mut self) -> Option<Intervention> {
        self.run_phase(4)
    }

    /// Runs phase 5 (logging), which never pauses, then queues the collection
    /// writes ([`Event::CollectionWrite`](crate::events::Event::CollectionWrite)).
    pub fn process_logging(&mut self) {
        // Phase 5 always runs, even after an intervention or `allow`.
        self.state.allow = None;
        let saved = self.state.intervention.take();
        self.run_phase(5);
        self.state.intervention = saved;
        self.close();
    }

    /// True when debug lines of `level` are kept: build a message only then.
    #[inline]
    pub(crate) fn debug_on(&self, level: u8) -> bool {
        level <= self.debug_level
    }

    /// Keeps a debug-log line of `level` (check [`Transaction::debug_on`] first, so
    /// that no message is built for nothing).
    pub(crate) fn debug_line(&mut self, level: u8, msg: &str) {
        let line = format!(
            "[{}] [{}] [{level}] {}",
            self.ctx.unique_id,
            String::from_utf8_lossy(&self.req.uri_raw),
            crate::log::escape(msg)
        );
        self.events.push_back(crate::events::Event::Debug(line));
    }

    /// The ids of the rules that matched and logged (or decided), in order (chains by
    /// their first rule). Rules with `nolog` and `noauditlog` are left out.
    pub fn matched_rule_ids(&self) -> Vec<i64> {
        self.matches.iter().filter_map(|m| m.rule_id).collect()
    }

    /// The matches recorded so far, for logs and audit records.
    pub fn matches(&self) -> &[MatchRecord] {
        &self.matches
    }

    /// The inbound and outbound anomaly scores, as CRS keeps them in TX
    /// (`blocking_inbound_anomaly_score`, falling back to `anomaly_score`, and
    /// `outbound_anomaly_score`).
    pub fn anomaly_scores(&self) -> (i64, i64) {
        let get = |k: &[u8]| {
            self.state
                .tx
                .get(k)
                .map(|v| crate::collections::to_number(v))
        };
        let inbound = get(b"blocking_inbound_anomaly_score")
            .or_else(|| get(b"anomaly_score"))
            .unwrap_or(0);
        let outbound = get(b"blocking_outbound_anomaly_score")
            .or_else(|| get(b"outbound_anomaly_score"))
            .unwrap_or(0);
        (inbound, outbound)
    }

    /// A TX variable's value, by name (case-insensitive).
    pub fn tx_var(&self, name: &str) -> Option<&[u8]> {
        self.state
            .tx
            .get(name.to_ascii_lowercase().as_bytes())
            .map(Vec::as_slice)
    }

    /// The intervention decided so far, if any.
    pub fn intervention(&self) -> Option<&Intervention> {
        self.state.intervention.as_ref()
    }

    /// The audit record (in the configured `SecAuditLogFormat` and
    /// `SecAuditLogType`) when the audit engine says this transaction is to be
    /// recorded, else `None`.
    pub fn audit_record(&self) -> Option<crate::log::AuditRecord> {
        let relevant = match self.state.audit_engine {
            AuditEngineMode::Off => false,
            AuditEngineMode::On => true,
            AuditEngineMode::RelevantOnly => {
                let by_status = self
                    .ruleset
                    .config()
                    .audit
                    .relevant_status
                    .as_ref()
                    .is_some_and(|p| p.matches(self.resp.status));
                by_status || self.matches.iter().any(|m| m.auditlog)
            }
        };
        relevant.then(|| crate::log::build_audit_record(self))
    }

    pub(crate) fn ctx(&self) -> &TxContext {
        &self.ctx
    }
}
