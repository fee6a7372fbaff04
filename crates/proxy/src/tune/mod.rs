//! `palisade tune`: from false positives in the audit log to exclusions proven
//! safe (docs/tune.md).
//!
//! 1. [`audit`]: the JSON audit log's records (request line, headers, body, the
//!    rules' matches).
//! 2. [`group`]: the matches of refused requests grouped by site × rule ×
//!    variable × path shape, and ranked as likely false positives (values the
//!    detectors judge benign, many clients, the rule alone, low scores).
//! 3. [`propose`]: the narrowest exclusion of each likely false positive, in CRS's
//!    recommended forms (`ctl:ruleRemoveTargetById` scoped by path before CRS,
//!    `SecRuleUpdateTargetById` after it).
//! 4. [`prove`]: the recorded requests and an attack corpus replayed through the
//!    rules with and without the exclusions: an exclusion that lets an attack of
//!    the corpus through that was blocked, or that changes no recorded verdict, is
//!    dropped.
//!
//! Then [`write`] adds the proven exclusions to the tune files (`tune-before.conf`,
//! `tune-after.conf`, `tune-site-NAME.conf`), which the configuration loads; a
//! reload applies them.

pub mod audit;
pub mod group;
pub mod propose;
pub mod prove;

use crate::config::Config;
use propose::{Placement, Proposal};
use prove::{Extra, Outcome, Request};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The tune file loaded before CRS: its path-scoped `ctl` rules.
pub const BEFORE_FILE: &str = "tune-before.conf";
/// The tune file loaded after CRS: its `SecRuleUpdateTargetById` lines.
pub const AFTER_FILE: &str = "tune-after.conf";
/// The first rule id tune gives its rules, by default.
pub const DEFAULT_FIRST_ID: i64 = 1_000_000;
/// How many path shapes a rule × variable may be on and still get path-scoped
/// exclusions, by default; on more, it is excluded on every path.
pub const DEFAULT_MAX_PATHS: usize = 3;
/// How many of the candidates that got no proposal the report lists.
pub const SHOWN_REFUSED: usize = 20;
/// The most rounds of the proof (each drops what failed and tries again).
const MAX_ROUNDS: usize = 40;
/// The most passes of proposals (each over what the ones before left blocked).
const MAX_PASSES: usize = 5;

/// What `palisade tune` is asked to do.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// The audit log to read (`None`: the one the configuration writes).
    pub audit_log: Option<PathBuf>,
    /// The attack corpus (JSON lines), if any.
    pub attacks: Option<PathBuf>,
    /// The directory of the tune files (`None`: that of the configuration's
    /// `tune-before.conf` entry, else the configuration's own).
    pub out: Option<PathBuf>,
    /// The ranking's settings.
    pub ranking: group::Ranking,
    /// Path shapes at most for path-scoped exclusions.
    pub max_paths: usize,
    /// The first rule id of tune's rules.
    pub first_id: i64,
    /// Prove this exclusion file (loaded after the rules) instead of proposing.
    pub prove: Option<PathBuf>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            audit_log: None,
            attacks: None,
            out: None,
            ranking: group::Ranking::default(),
            max_paths: DEFAULT_MAX_PATHS,
            first_id: DEFAULT_FIRST_ID,
            prove: None,
        }
    }
}

/// Why `palisade tune` could not do its work.
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    /// The configuration did not load.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// The rules did not load.
    #[error(transparent)]
    Rules(#[from] prove::BuildError),
    /// The audit log could not be read.
    #[error(transparent)]
    Audit(#[from] audit::AuditError),
    /// The attack corpus could not be read.
    #[error(transparent)]
    Attacks(#[from] prove::AttackError),
    /// No audit log is configured and none was given.
    #[error(
        "{config}: no audit log: set [logs] audit_log or SecAuditLog (with SecAuditLogFormat JSON and SecAuditLogParts {parts}), or give --audit-log",
        parts = audit::NEEDED_PARTS
    )]
    NoAuditLog {
        /// The configuration file.
        config: PathBuf,
    },
    /// The audit log is written one record per file.
    #[error(
        "{config}: SecAuditLogType Concurrent writes one file per record; tune reads a Serial audit log"
    )]
    Concurrent {
        /// The configuration file.
        config: PathBuf,
    },
    /// A file could not be read.
    #[error("{path}: {reason}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The reason.
        reason: std::io::Error,
    },
    /// A tune file could not be written.
    #[error("writing {path}: {reason}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The reason.
        reason: std::io::Error,
    },
}

/// What the proof decided of a proposal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "status", content = "reason")]
pub enum Verdict {
    /// Kept: it removes false positives and lets no attack of the corpus through.
    Proven,
    /// Dropped, and why.
    Dropped(String),
}

/// A proposal and what the proof made of it.
#[derive(Debug, Clone, Serialize)]
pub struct Proposed {
    /// The exclusion.
    #[serde(flatten)]
    pub proposal: Proposal,
    /// Kept or dropped.
    pub verdict: Verdict,
    /// The recorded requests (unique ids) it turns from blocked to passed (with the
    /// others kept).
    pub removes: Vec<String>,
    /// The ranking signals.
    pub signals: group::Signals,
    /// Distinct clients.
    pub clients: usize,
    /// A few matched values.
    pub examples: Vec<String>,
    /// What the proof changed (narrowed to fewer paths, and why).
    pub notes: Vec<String>,
}

/// A candidate that got no proposal, and why.
#[derive(Debug, Clone, Serialize)]
pub struct NotProposed {
    /// The site (`None`: the default site).
    pub site: Option<String>,
    /// The rule.
    pub rule_id: i64,
    /// The variable.
    pub var: String,
    /// Its requests.
    pub requests: usize,
    /// Why not.
    pub reason: String,
}

/// The proof's figures.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Proof {
    /// Recorded requests replayed.
    pub recorded: usize,
    /// Of them, blocked by the rules in force.
    pub blocked_before: usize,
    /// Of them, blocked with the exclusions.
    pub blocked_after: usize,
    /// The recorded requests (unique ids) the exclusions turn from blocked to
    /// passed.
    pub passed_now: Vec<String>,
    /// The recorded requests the exclusions turn from passed to blocked.
    pub blocked_now: Vec<String>,
    /// Whether an attack corpus was replayed.
    pub attack_corpus: bool,
    /// Attacks replayed.
    pub attacks: usize,
    /// Of them, blocked by the rules in force.
    pub attacks_blocked_before: usize,
    /// Of them, blocked with the exclusions.
    pub attacks_blocked_after: usize,
    /// The attacks blocked by the rules in force that pass with the exclusions
    /// (labels): empty, or the exclusions are not proven.
    pub attacks_passing_now: Vec<String>,
}

/// A tune file: where it is, whether the configuration loads it, and its text with
/// the proven exclusions added.
#[derive(Debug, Clone, Serialize)]
pub struct TuneFile {
    /// Where it goes.
    pub placement: Placement,
    /// Its path.
    pub path: PathBuf,
    /// Whether the configuration loads it (a `[[rules]]` or `[[site.rules]]`
    /// entry with this file).
    pub loaded: bool,
    /// How many exclusions this run adds.
    pub added: usize,
    /// Its text with them.
    pub text: String,
}

/// What `palisade tune` found and proved.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The configuration file.
    pub config: PathBuf,
    /// The audit log read.
    pub audit_log: PathBuf,
    /// Records read.
    pub records: usize,
    /// Of them, refused (or to be refused) by the rules when recorded.
    pub refused: usize,
    /// Of them, whose replay under the rules in force gives the recorded verdict.
    pub replay_agrees: usize,
    /// The attack corpus, if one was given.
    pub attacks_file: Option<PathBuf>,
    /// The proposals, proven or dropped, highest rank first.
    pub proposals: Vec<Proposed>,
    /// Candidates without a proposal (the first [`SHOWN_REFUSED`]).
    pub not_proposed: Vec<NotProposed>,
    /// How many candidates had no proposal.
    pub not_proposed_total: usize,
    /// The proof of the proven exclusions together.
    pub proof: Proof,
    /// The directory of the tune files.
    pub out_dir: PathBuf,
    /// The tune files with the proven exclusions.
    pub files: Vec<TuneFile>,
    /// With `--prove FILE`: the file proven.
    pub proved_file: Option<PathBuf>,
}

impl Report {
    /// The proven proposals.
    pub fn proven(&self) -> impl Iterator<Item = &Proposed> {
        self.proposals
            .iter()
            .filter(|p| p.verdict == Verdict::Proven)
    }

    /// Whether the exclusions (proposed, or the file of `--prove`) let no attack
    /// of the corpus through that the rules in force block.
    pub fn safe(&self) -> bool {
        self.proof.attacks_passing_now.is_empty()
    }
}

/// The directory of the tune files: `out`, else that of the configuration's
/// `tune-before.conf` or `tune-after.conf` entry, else the configuration's.
pub fn out_dir(cfg: &Config, out: Option<&Path>) -> PathBuf {
    let dir = match out {
        Some(o) => o.to_owned(),
        None => cfg
            .rules
            .iter()
            .find(|r| prove::is_file(r, BEFORE_FILE) || prove::is_file(r, AFTER_FILE))
            .and_then(|r| r.file.as_deref()?.parent().map(Path::to_owned))
            .or_else(|| cfg.path.parent().map(Path::to_owned))
            .unwrap_or_else(|| PathBuf::from(".")),
    };
    // Absolute, as the configuration's paths are, so that they compare.
    std::path::absolute(&dir).unwrap_or(dir)
}

/// Whether the configuration loads the tune file of `placement` from `dir`.
fn loads(cfg: &Config, placement: &Placement, dir: &Path) -> bool {
    let name = placement.file_name();
    let here = |r: &crate::config::RuleSource| {
        prove::is_file(r, &name) && r.file.as_deref().and_then(Path::parent) == Some(dir)
    };
    match placement {
        Placement::Site(site) => cfg
            .sites
            .iter()
            .filter(|s| &s.name == site)
            .any(|s| s.rules.iter().any(here)),
        _ => cfg.rules.iter().any(here),
    }
}

fn read_optional(path: &Path) -> Result<String, TuneError> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(reason) => Err(TuneError::Read {
            path: path.to_owned(),
            reason,
        }),
    }
}

/// The text of a tune file with `added` appended.
fn joined(existing: &str, added: &[&str]) -> String {
    let mut t = existing.trim_end().to_owned();
    for a in added {
        if !t.is_empty() {
            t.push_str("\n\n");
        }
        t.push_str(a);
    }
    t
}

/// The exclusion text of `existing` files plus the proposals `active`.
fn extra_of(existing: &BTreeMap<Placement, String>, proposals: &[&Proposal]) -> Extra {
    let mut by: BTreeMap<Placement, Vec<&str>> = BTreeMap::new();
    for p in proposals {
        by.entry(p.placement.clone())
            .or_default()
            .push(p.text.as_str());
    }
    let mut x = Extra::default();
    let places: BTreeSet<&Placement> = existing.keys().chain(by.keys()).collect();
    for place in places {
        let text = joined(
            existing.get(place).map_or("", String::as_str),
            by.get(place).map_or(&[][..], Vec::as_slice),
        );
        match place {
            Placement::Before => x.before = text,
            Placement::After => x.after = text,
            Placement::Site(s) => {
                x.sites.insert(s.clone(), text);
            }
        }
    }
    x
}

/// Whether a proposal removes the target `(rule, var)` that matched a request for
/// `path`.
fn removes_hit(p: &Proposal, rule: i64, var: &str, path: &str) -> bool {
    p.rule_id == rule
        && p.var.eq_ignore_ascii_case(&group::exclusion_target(var))
        && p.applies_on(path)
}

/// Reads the configuration at `config_path`, the audit log and the attack corpus,
/// and proposes and proves exclusions (or proves the file of `opts.prove`).
/// Writes nothing.
pub fn analyse(config_path: &Path, opts: &Options) -> Result<Report, TuneError> {
    let cfg = Config::load(config_path)?;
    let base = prove::build(&cfg, None)?;
    if base.audit_concurrent() && opts.audit_log.is_none() {
        return Err(TuneError::Concurrent {
            config: config_path.to_owned(),
        });
    }
    let audit_log = opts
        .audit_log
        .clone()
        .or_else(|| cfg.logs.audit_log.clone())
        .or_else(|| base.audit_log_path())
        .ok_or_else(|| TuneError::NoAuditLog {
            config: config_path.to_owned(),
        })?;
    let records = audit::read(&audit_log)?;
    let attacks = match &opts.attacks {
        Some(p) => prove::read_attacks(p)?,
        None => Vec::new(),
    };
    let dir = out_dir(&cfg, opts.out.as_deref());
    let mut existing: BTreeMap<Placement, String> = BTreeMap::new();
    let mut places = vec![Placement::Before, Placement::After];
    places.extend(cfg.sites.iter().map(|s| Placement::Site(s.name.clone())));
    for place in &places {
        let text = read_optional(&dir.join(place.file_name()))?;
        if !text.trim().is_empty() {
            existing.insert(place.clone(), text);
        }
    }
    let requests: Vec<Request> = records.iter().map(Request::from).collect();
    let before = prove::replay_all(&base, &requests);
    let attacks_before = prove::replay_all(&base, &attacks);
    let refused = records.iter().filter(|r| r.refused()).count();
    let replay_agrees = records
        .iter()
        .zip(&before)
        .filter(|(r, o)| r.refused() == o.blocked)
        .count();

    let mut proposals: Vec<Proposed> = Vec::new();
    let mut not_proposed: Vec<NotProposed> = Vec::new();
    let proof;
    if let Some(file) = &opts.prove {
        let text = std::fs::read_to_string(file).map_err(|reason| TuneError::Read {
            path: file.clone(),
            reason,
        })?;
        let mut x = extra_of(&existing, &[]);
        x.after = joined(&x.after, &[text.as_str()]);
        let waf = prove::build(&cfg, Some(&x))?;
        proof = figures(
            &records,
            &before,
            &prove::replay_all(&waf, &requests),
            &attacks,
            &attacks_before,
            &prove::replay_all(&waf, &attacks),
        );
    } else {
        let used = existing.values().flat_map(|t| propose::ids_in(t));
        let mut ids = propose::Ids::new(opts.first_id, used);
        // Pass after pass: the matches of the requests the proposals so far leave
        // blocked (a rule that matched several values of a request logs the first
        // only; the next shows once it is excluded) make the next candidates.
        let mut seen: BTreeSet<(Option<String>, i64, String)> = BTreeSet::new();
        let mut still: Vec<audit::Recorded> = records.clone();
        // The index in `records` of each request of `still`.
        let mut origin: Vec<usize> = (0..records.len()).collect();
        let mut proposed_any = false;
        let input = ProofInputs {
            cfg: &cfg,
            existing: &existing,
            records: &records,
            requests: &requests,
            before: &before,
            attacks: &attacks,
            attacks_before: &attacks_before,
        };
        for pass in 0..MAX_PASSES {
            let candidates = group::candidates(&still, &opts.ranking, &|id| base.rule_targets(id));
            let mut added = 0;
            for c in &candidates {
                if !seen.insert((c.site.clone(), c.rule_id, c.var.clone())) {
                    continue;
                }
                let made = group::likely_false_positive(c, &opts.ranking).and_then(|()| {
                    propose::propose(c, opts.max_paths, &mut ids).map_err(|e| e.to_string())
                });
                match made {
                    Ok(mut p) => {
                        // Requests are indices into `records`: a later pass's
                        // candidates index `still`.
                        if pass > 0 {
                            for v in p.shapes.values_mut() {
                                for i in v.iter_mut() {
                                    *i = origin[*i];
                                }
                            }
                            p.render(&mut ids);
                        }
                        added += 1;
                        proposals.push(Proposed {
                            proposal: p,
                            verdict: Verdict::Proven,
                            removes: Vec::new(),
                            signals: c.signals,
                            clients: c.clients,
                            examples: c.examples.clone(),
                            notes: Vec::new(),
                        });
                    }
                    Err(reason) => not_proposed.push(NotProposed {
                        site: c.site.clone(),
                        rule_id: c.rule_id,
                        var: c.var.clone(),
                        requests: c.requests,
                        reason,
                    }),
                }
            }
            if added == 0 && proposed_any {
                break;
            }
            proposed_any = true;
            let (_, after) = prove_proposals(&input, &mut proposals, &mut ids, false)?;
            // What still blocks: the replayed matches of the requests left blocked.
            origin = (0..records.len()).filter(|&i| after[i].blocked).collect();
            still = origin
                .iter()
                .map(|&i| audit::Recorded {
                    hits: after[i].details.clone(),
                    ..records[i].clone()
                })
                .collect();
            if still.is_empty() {
                break;
            }
        }
        // The last pass kept proposals that changed nothing alone; drop them now.
        let (figures, _) = prove_proposals(&input, &mut proposals, &mut ids, true)?;
        proof = figures;
    }
    let proven: Vec<&Proposal> = proposals
        .iter()
        .filter(|p| p.verdict == Verdict::Proven)
        .map(|p| &p.proposal)
        .collect();
    let mut files = Vec::new();
    for place in &places {
        let added: Vec<&str> = proven
            .iter()
            .filter(|p| &p.placement == place)
            .map(|p| p.text.as_str())
            .collect();
        let old = existing.get(place).map_or("", String::as_str);
        if matches!(place, Placement::Site(_)) && added.is_empty() && old.is_empty() {
            continue;
        }
        let header = if old.trim().is_empty() {
            file_header(place)
        } else {
            old.to_owned()
        };
        files.push(TuneFile {
            placement: place.clone(),
            path: dir.join(place.file_name()),
            loaded: loads(&cfg, place, &dir),
            added: added.len(),
            text: joined(&header, &added) + "\n",
        });
    }
    let not_proposed_total = not_proposed.len();
    not_proposed.truncate(SHOWN_REFUSED);
    Ok(Report {
        config: config_path.to_owned(),
        audit_log,
        records: records.len(),
        refused,
        replay_agrees,
        attacks_file: opts.attacks.clone(),
        proposals,
        not_proposed,
        not_proposed_total,
        proof,
        out_dir: dir,
        files,
        proved_file: opts.prove.clone(),
    })
}

/// The first lines of a new tune file.
fn file_header(place: &Placement) -> String {
    let (load, what) = match place {
        Placement::Before => (
            "before the CRS rules (a [[rules]] entry ahead of rules/*.conf)",
            "path-scoped ctl:ruleRemoveTargetById rules",
        ),
        Placement::After => (
            "after the CRS rules (a [[rules]] entry behind rules/*.conf)",
            "SecRuleUpdateTargetById lines",
        ),
        Placement::Site(_) => ("in the site's [[site.rules]]", "this site's exclusions"),
    };
    format!(
        "# Written by `palisade tune` (docs/tune.md): {what}, each proven on the recorded\n# requests and the attack corpus before it was added. Loaded {load}.\n# Edit freely: tune keeps what is here and adds below it."
    )
}

/// The figures of a proof from the outcomes before and after.
fn figures(
    records: &[audit::Recorded],
    before: &[Outcome],
    after: &[Outcome],
    attacks: &[Request],
    attacks_before: &[Outcome],
    attacks_after: &[Outcome],
) -> Proof {
    let flips = |from: bool| -> Vec<String> {
        records
            .iter()
            .zip(before.iter().zip(after))
            .filter(|(_, (b, a))| b.blocked == from && a.blocked != from)
            .map(|(r, _)| r.id.clone())
            .collect()
    };
    Proof {
        recorded: records.len(),
        blocked_before: before.iter().filter(|o| o.blocked).count(),
        blocked_after: after.iter().filter(|o| o.blocked).count(),
        passed_now: flips(true),
        blocked_now: flips(false),
        attack_corpus: !attacks.is_empty(),
        attacks: attacks.len(),
        attacks_blocked_before: attacks_before.iter().filter(|o| o.blocked).count(),
        attacks_blocked_after: attacks_after.iter().filter(|o| o.blocked).count(),
        attacks_passing_now: attacks
            .iter()
            .zip(attacks_before.iter().zip(attacks_after))
            .filter(|(_, (b, a))| b.blocked && !a.blocked)
            .map(|(r, _)| r.label.clone())
            .collect(),
    }
}

/// What every round of a proof replays and compares with.
struct ProofInputs<'a> {
    cfg: &'a Config,
    existing: &'a BTreeMap<Placement, String>,
    records: &'a [audit::Recorded],
    requests: &'a [Request],
    before: &'a [Outcome],
    attacks: &'a [Request],
    attacks_before: &'a [Outcome],
}

/// Proves the proposals together, dropping (with the reason) those that let an
/// attack through and those that change no recorded verdict, round by round until
/// what is left holds.
fn prove_proposals(
    input: &ProofInputs<'_>,
    proposals: &mut [Proposed],
    ids: &mut propose::Ids,
    drop_useless: bool,
) -> Result<(Proof, Vec<Outcome>), TuneError> {
    let ProofInputs {
        cfg,
        existing,
        records,
        requests,
        before,
        attacks,
        attacks_before,
    } = *input;
    for round in 0..MAX_ROUNDS {
        let active: Vec<usize> = (0..proposals.len())
            .filter(|&i| proposals[i].verdict == Verdict::Proven)
            .collect();
        let texts: Vec<&Proposal> = active.iter().map(|&i| &proposals[i].proposal).collect();
        let waf = prove::build(cfg, Some(&extra_of(existing, &texts)))?;
        let attacks_after = prove::replay_all(&waf, attacks);
        let passing: Vec<usize> = (0..attacks.len())
            .filter(|&i| attacks_before[i].blocked && !attacks_after[i].blocked)
            .collect();
        if !passing.is_empty() && !active.is_empty() {
            let mut dropped = false;
            let snapshot: BTreeMap<usize, Proposal> = active
                .iter()
                .map(|&i| (i, proposals[i].proposal.clone()))
                .collect();
            for &a in &passing {
                let path = audit::request_path(&attacks[a].uri);
                // The matches the exclusions took from the attack.
                let after: BTreeSet<&(i64, String)> = attacks_after[a].hits.iter().collect();
                let lost: Vec<&(i64, String)> = attacks_before[a]
                    .hits
                    .iter()
                    .filter(|h| !after.contains(h))
                    .collect();
                let lost_rules: BTreeSet<i64> = lost.iter().map(|(r, _)| *r).collect();
                let on_path = |p: &Proposal| p.applies_on(&path);
                // Culprits are chosen among the proposals as they were when the
                // attacks were replayed (the round's start), not as earlier
                // attacks of this round left them.
                let pick = |f: &dyn Fn(&Proposal) -> bool| -> Vec<usize> {
                    active
                        .iter()
                        .copied()
                        .filter(|&i| f(&snapshot[&i]))
                        .collect()
                };
                let mut narrowable = true;
                let mut culprits =
                    pick(&|p| lost.iter().any(|(r, v)| removes_hit(p, *r, v, &path)));
                if culprits.is_empty() {
                    culprits = pick(&|p| lost_rules.contains(&p.rule_id) && on_path(p));
                }
                if culprits.is_empty() {
                    narrowable = false;
                    culprits = pick(&|p| lost_rules.contains(&p.rule_id));
                }
                let label = &attacks[a].label;
                let took: Vec<String> = lost
                    .iter()
                    .take(3)
                    .map(|(r, v)| format!("{r} on {v}"))
                    .collect();
                for i in culprits {
                    if proposals[i].verdict != Verdict::Proven
                        || (narrowable && !on_path(&proposals[i].proposal))
                    {
                        // Dropped, or narrowed off this path, for another attack.
                        continue;
                    }
                    dropped = true;
                    if narrowable && proposals[i].proposal.narrow(&path, ids) {
                        proposals[i].notes.push(format!(
                            "narrowed: not on {path}, where it let an attack of the corpus through ({label})"
                        ));
                    } else {
                        proposals[i].verdict = Verdict::Dropped(format!(
                            "lets an attack of the corpus through: {label} (no longer matched: {})",
                            took.join(", ")
                        ));
                    }
                }
            }
            if !dropped {
                // No proposal touches what the attacks matched: the lowest ranked
                // goes, and the rest is tried again.
                if let Some(&i) = active.last() {
                    proposals[i].verdict = Verdict::Dropped(format!(
                        "with the others, lets an attack of the corpus through: {}",
                        attacks[passing[0]].label
                    ));
                }
            }
            continue;
        }
        let after = prove::replay_all(&waf, requests);
        let mut removes: BTreeMap<usize, Vec<String>> = BTreeMap::new();
        for (r, (b, a)) in records
            .iter()
            .enumerate()
            .map(|(i, r)| (r, (&before[i], &after[i])))
        {
            if !b.blocked || a.blocked {
                continue;
            }
            let path = r.path();
            for &i in &active {
                let p = &proposals[i].proposal;
                if b.hits
                    .iter()
                    .any(|(rule, var)| removes_hit(p, *rule, var, &path))
                {
                    removes.entry(i).or_default().push(r.id.clone());
                }
            }
        }
        let useless: Vec<usize> = active
            .iter()
            .copied()
            .filter(|i| !removes.contains_key(i))
            .collect();
        if drop_useless && !useless.is_empty() && round + 1 < MAX_ROUNDS {
            for i in useless {
                proposals[i].verdict = Verdict::Dropped("changes no recorded verdict".to_owned());
            }
            continue;
        }
        for p in proposals.iter_mut() {
            p.removes.clear();
        }
        for (i, ids) in removes {
            proposals[i].removes = ids;
        }
        let proof = figures(
            records,
            before,
            &after,
            attacks,
            attacks_before,
            &attacks_after,
        );
        return Ok((proof, after));
    }
    // Every round dropped something: nothing is proven.
    for p in proposals.iter_mut() {
        if p.verdict == Verdict::Proven {
            p.verdict = Verdict::Dropped(format!("not proven in {MAX_ROUNDS} rounds"));
        }
    }
    let proof = figures(
        records,
        before,
        before,
        attacks,
        attacks_before,
        attacks_before,
    );
    Ok((proof, before.to_vec()))
}

/// Writes the tune files of `report` that gain exclusions (and creates the
/// missing ones, empty but for their header, so that the configuration can load
/// them). Each is written whole to a temporary file then renamed. Returns the
/// files written.
pub fn write(report: &Report) -> Result<Vec<PathBuf>, TuneError> {
    std::fs::create_dir_all(&report.out_dir).map_err(|reason| TuneError::Write {
        path: report.out_dir.clone(),
        reason,
    })?;
    let mut written = Vec::new();
    for f in &report.files {
        if f.added == 0 && f.path.exists() {
            continue;
        }
        let tmp = f.path.with_extension("conf.tmp");
        let err = |reason| TuneError::Write {
            path: f.path.clone(),
            reason,
        };
        std::fs::write(&tmp, &f.text).map_err(err)?;
        std::fs::rename(&tmp, &f.path).map_err(err)?;
        written.push(f.path.clone());
    }
    Ok(written)
}

/// The report as text, for a terminal.
pub fn render(report: &Report, written: Option<&[PathBuf]>) -> String {
    let mut s = String::new();
    let p = &report.proof;
    let _ = writeln!(
        s,
        "palisade tune: {} record(s) in {}, {} refused; the replay under the rules in force agrees with {} of them",
        report.records,
        report.audit_log.display(),
        report.refused,
        report.replay_agrees
    );
    match &report.attacks_file {
        Some(f) => {
            let _ = writeln!(
                s,
                "attack corpus: {} request(s) from {}, {} blocked by the rules in force",
                p.attacks,
                f.display(),
                p.attacks_blocked_before
            );
        }
        None => {
            let _ = writeln!(
                s,
                "attack corpus: none (--attacks FILE): the proof covers the recorded requests only"
            );
        }
    }
    if let Some(f) = &report.proved_file {
        let _ = writeln!(s, "\nProving {}:", f.display());
    } else {
        let proven = report.proven().count();
        let _ = writeln!(
            s,
            "\nProposals: {} proven, {} dropped",
            proven,
            report.proposals.len() - proven
        );
        for x in &report.proposals {
            let pr = &x.proposal;
            let scope = match &pr.form {
                propose::Form::Paths(paths) => format!("on {}", paths.join(", ")),
                propose::Form::Everywhere => "on every path".to_owned(),
                propose::Form::AllBut(but) => format!("on every path but {}", but.join(", ")),
            };
            let site = pr
                .site
                .as_deref()
                .map_or(String::new(), |s| format!("site {s}: "));
            let status = match &x.verdict {
                Verdict::Proven => "proven".to_owned(),
                Verdict::Dropped(why) => format!("dropped: {why}"),
            };
            let g = &x.signals;
            let _ = writeln!(
                s,
                "\n  [{status}]\n  {site}rule {} on {} {scope}: {} request(s), {} client(s); rank {:.2} (benign {:.2}, clients {:.2}, alone {:.2}, low score {:.2})",
                pr.rule_id,
                pr.var,
                pr.covers.len(),
                x.clients,
                g.rank,
                g.benign,
                g.clients,
                g.alone,
                g.low_score
            );
            if x.verdict == Verdict::Proven {
                let shown: Vec<&str> = x.removes.iter().take(5).map(String::as_str).collect();
                let _ = writeln!(
                    s,
                    "  passes {} refused request(s): {}{}",
                    x.removes.len(),
                    shown.join(" "),
                    if x.removes.len() > 5 { " ..." } else { "" }
                );
            }
            for n in &x.notes {
                let _ = writeln!(s, "  {n}");
            }
            for line in pr.text.lines() {
                let _ = writeln!(s, "    {line}");
            }
        }
        if report.not_proposed_total > 0 {
            let _ = writeln!(
                s,
                "\nNot proposed ({}, the first {} shown):",
                report.not_proposed_total,
                report.not_proposed.len()
            );
            for n in &report.not_proposed {
                let _ = writeln!(
                    s,
                    "  rule {} on {} ({} request(s)): {}",
                    n.rule_id, n.var, n.requests, n.reason
                );
            }
        }
    }
    let _ = writeln!(
        s,
        "\nProof:\n  recorded requests: blocked {} -> {} ({} pass now, {} blocked now)",
        p.blocked_before,
        p.blocked_after,
        p.passed_now.len(),
        p.blocked_now.len()
    );
    if p.attack_corpus {
        let _ = writeln!(
            s,
            "  attack corpus: blocked {} -> {} of {} ({} pass now{})",
            p.attacks_blocked_before,
            p.attacks_blocked_after,
            p.attacks,
            p.attacks_passing_now.len(),
            if p.attacks_passing_now.is_empty() {
                String::new()
            } else {
                format!(": {}", p.attacks_passing_now.join(", "))
            }
        );
    }
    if report.proved_file.is_some() {
        let _ = writeln!(
            s,
            "  {}",
            if report.safe() {
                "no attack of the corpus passes that the rules in force block"
            } else {
                "REFUSED: the exclusion lets attacks of the corpus through"
            }
        );
        return s;
    }
    let _ = writeln!(s, "\nFiles in {}:", report.out_dir.display());
    let mut missing = Vec::new();
    for f in &report.files {
        let _ = writeln!(
            s,
            "  {} ({} exclusion(s) added; {})",
            f.placement.file_name(),
            f.added,
            if f.loaded {
                "loaded by the configuration"
            } else {
                "NOT loaded by the configuration"
            }
        );
        if !f.loaded {
            missing.push(f);
        }
    }
    if !missing.is_empty() {
        let _ = writeln!(s, "\nTo load them, add to {}:", report.config.display());
        for f in missing {
            let _ = writeln!(
                s,
                "  {}\n  file = {:?}",
                match &f.placement {
                    Placement::Before =>
                        "[[rules]]   # before CRS's rules/*.conf (after crs-setup.conf)",
                    Placement::After => "[[rules]]   # after CRS's rules/*.conf",
                    Placement::Site(_) => "[[site.rules]]   # in this site's [[site]]",
                },
                f.path.display().to_string()
            );
        }
    }
    match written {
        None => {
            let _ = writeln!(
                s,
                "\nNothing written: run again with --write to add the proven exclusions."
            );
        }
        Some([]) => {
            let _ = writeln!(s, "\nNothing to write.");
        }
        Some(w) => {
            let _ = writeln!(s, "\nWritten:");
            for f in w {
                let _ = writeln!(s, "  {}", f.display());
            }
            let _ = writeln!(
                s,
                "Reload to apply them: SIGHUP (`systemctl reload palisade`) or POST /reload on the admin listener."
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    use propose::shape_covers;

    #[test]
    fn shapes_cover_paths_as_the_rx_does() {
        assert!(shape_covers("/blog/{}", "/blog/my-post"));
        assert!(!shape_covers("/blog/{}", "/blog/"));
        assert!(!shape_covers("/blog/{}", "/blog/a/b"));
        assert!(shape_covers("/contact", "/contact"));
        assert!(!shape_covers("/contact", "/contact2"));
    }

    #[test]
    fn files_keep_what_is_there() {
        assert_eq!(joined("", &["a"]), "a");
        assert_eq!(joined("old\n\n", &["a", "b"]), "old\n\na\n\nb");
        let mut existing = BTreeMap::new();
        existing.insert(Placement::After, "X".to_owned());
        let x = extra_of(&existing, &[]);
        assert_eq!(x.after, "X");
        assert_eq!(x.before, "");
    }
}
