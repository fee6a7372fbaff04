//! Grouping the recorded matches by site × rule × variable × path, and ranking the
//! likely false positives.
//!
//! A match counts when it is a rule's own finding: CRS's bookkeeping (the anomaly
//! score evaluation 949xxx/959xxx, the correlation 980xxx, the initialisation
//! 901xxx-905xxx, checks of `TX` variables, unconditional matches) is a
//! consequence of the findings and is left out.
//!
//! Paths are grouped by their shape: a segment that is a number or a long token with
//! digits (an id, a hash, a uuid) stands for any segment (`/api/items/{}`), so one
//! exclusion covers every item of an API.
//!
//! The signals of a likely false positive, each from 0 to 1:
//! The rank is their weighted sum: benign 0.55, the others 0.15 each.
//!
//! - **benign**: the share of matched values in which no detector of
//!   `crates/detect` finds an attack's syntax (the strongest signal, and a gate:
//!   below one half, nothing is proposed);
//! - **clients**: how many distinct clients sent them, up to [`Ranking::full_clients`];
//! - **alone**: the share of its requests in which this rule was the only finding;
//! - **low score**: the share of its requests whose findings add up to a low
//!   anomaly score (at most [`LOW_SCORE`]).

use super::audit::{Hit, Recorded};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// The most points of findings a request may have for its score to count as low
/// (two critical findings).
pub const LOW_SCORE: i64 = 10;

/// The collections a CRS rule may carry in a TX variable's name, as in
/// `TX:rfi_parameter_args:q` (CRS's `setvar:tx.NAME_%{MATCHED_VAR_NAME}`).
const COLLECTIONS: [&str; 12] = [
    "args_get_names",
    "args_post_names",
    "args_names",
    "args_get",
    "args_post",
    "args",
    "request_cookies_names",
    "request_cookies",
    "request_headers_names",
    "request_headers",
    "files_names",
    "xml",
];

/// The variable a match is on, as an exclusion names it: a chain's later links
/// (`MATCHED_VARS:ARGS:comment`) name the variable of the first; a TX variable
/// whose name carries a collection's (`TX:rfi_parameter_args:q`) names that one
/// (`ARGS:q`); anything else as it is.
pub fn match_target(var: &str) -> String {
    let mut v = var;
    while let Some(rest) = v
        .strip_prefix("MATCHED_VARS:")
        .or_else(|| v.strip_prefix("MATCHED_VAR:"))
    {
        v = rest;
    }
    if let Some(name) = v.strip_prefix("TX:") {
        let lower = name.to_ascii_lowercase();
        for c in COLLECTIONS {
            let Some(at) = lower.find(&format!("{c}:")) else {
                continue;
            };
            let starts = at == 0 || matches!(lower.as_bytes()[at - 1], b'_' | b'.' | b':');
            if starts {
                return format!("{}{}", c.to_ascii_uppercase(), &name[at + c.len()..]);
            }
        }
    }
    v.to_owned()
}

/// The variable of a finding: [`match_target`]; when that is a TX variable (the
/// capture a chain's later link checks, `TX:1`), the variable CRS's `logdata`
/// names (`Matched Data: X found within ARGS:q: ...`).
pub fn finding_var(var: &str, data: &str) -> String {
    let t = match_target(var);
    if !(t.starts_with("TX:") || t.eq_ignore_ascii_case("TX")) {
        return t;
    }
    let Some(i) = data.find(" found within ") else {
        return t;
    };
    let rest = &data[i + " found within ".len()..];
    let named = match_target(rest.split(": ").next().unwrap_or(""));
    let coll = named.split(':').next().unwrap_or("");
    let is_coll = !coll.is_empty() && coll.bytes().all(|b| b.is_ascii_uppercase() || b == b'_');
    if is_coll && coll != "TX" { named } else { t }
}

/// A TX variable [`finding_var`] could not name otherwise (the capture a chain
/// checks, `TX:content_type`), named by the rule's own first link when that reads
/// one keyed variable (`REQUEST_HEADERS:Content-Type`); `targets` gives a rule's
/// targets as written ([`crate::waf::Waf::rule_targets`]).
pub fn resolve_tx(var: String, rule_id: i64, targets: &dyn Fn(i64) -> Vec<String>) -> String {
    if !var.starts_with("TX:") {
        return var;
    }
    match targets(rule_id).as_slice() {
        [one] if one.contains(':') && !one.starts_with("TX:") && !one.starts_with('!') => {
            one.clone()
        }
        _ => var,
    }
}

/// The `[data "..."]` field of an error-log line.
pub fn logged_data(line: &str) -> &str {
    let Some(i) = line.find(" [data \"") else {
        return "";
    };
    let rest = &line[i + " [data \"".len()..];
    rest.find("\"] [severity").map_or(rest, |j| &rest[..j])
}

/// The target an exclusion removes for a match's variable: [`match_target`]; a
/// collection of names (`ARGS_NAMES`, `REQUEST_HEADERS_NAMES`, ...) as a whole; and a
/// key with array positions (`json.links.array_2`, `items.3.name`) as a selector
/// regex matching every position (`/^json[.]links[.]array_[0-9]+$/`), so that one
/// exclusion covers the whole list.
pub fn exclusion_target(var: &str) -> String {
    let t = match_target(var);
    let Some((coll, key)) = t.split_once(':') else {
        return t;
    };
    if coll.ends_with("_NAMES") {
        // A rule that matches names matches many of a request's names (a query
        // language's operators), and logs the first only: the exclusion is of
        // the names as a whole, narrowed by path.
        return coll.to_owned();
    }
    let is_index = |seg: &str| {
        let digits = seg.strip_prefix("array_").unwrap_or(seg);
        !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
    };
    if key.starts_with('/') || !key.split('.').any(is_index) {
        return t;
    }
    let mut parts: Vec<String> = Vec::new();
    for seg in key.split('.') {
        if is_index(seg) {
            parts.push(if seg.starts_with("array_") {
                "array_[0-9]+".to_owned()
            } else {
                "[0-9]+".to_owned()
            });
            continue;
        }
        let mut out = String::new();
        for c in seg.chars() {
            match c {
                c if c.is_ascii_alphanumeric() || c == '_' || c == '-' => out.push(c),
                '$' | '@' => {
                    out.push('[');
                    out.push(c);
                    out.push(']');
                }
                // Anything else stays the exact name: no regex for it.
                _ => return t,
            }
        }
        parts.push(out);
    }
    format!("{coll}:/^{}$/", parts.join("[.]"))
}

/// Whether a match is CRS bookkeeping rather than a finding of its own (`targets`:
/// as for [`resolve_tx`]).
pub fn is_consequence(h: &Hit, targets: &dyn Fn(i64) -> Vec<String>) -> bool {
    let block = h.rule_id / 1000;
    let target = resolve_tx(finding_var(&h.var, &h.data), h.rule_id, targets);
    h.rule_id <= 0
        || target.is_empty()
        || target.starts_with("TX:")
        || target.eq_ignore_ascii_case("TX")
        || matches!(block, 901..=905 | 949 | 959 | 980)
}

/// The anomaly points of a match by its severity, as CRS counts them (critical 5,
/// error 4, warning 3, notice 2).
pub fn points(h: &Hit) -> i64 {
    match h.severity {
        Some(0..=2) => 5,
        Some(3) => 4,
        Some(4) => 3,
        Some(5) => 2,
        _ => 0,
    }
}

/// Whether no detector finds an attack's syntax in `value`.
pub fn judged_benign(value: &str) -> bool {
    let bytes = value.as_bytes();
    let candidates = detect::candidates(bytes);
    detect::Class::ALL
        .iter()
        .filter(|c| candidates.contains(**c))
        .all(|c| c.scan(bytes).is_none())
}

/// A path's shape: segments that look like ids (all digits, or at least 8
/// characters of letters, digits, `-` and `_` with a digit among them) become `{}`.
pub fn path_template(path: &str) -> String {
    path.split('/')
        .map(|seg| {
            let id_like = (!seg.is_empty() && seg.bytes().all(|b| b.is_ascii_digit()))
                || (seg.len() >= 8
                    && seg.bytes().any(|b| b.is_ascii_digit())
                    && seg
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
            if id_like { "{}" } else { seg }
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// The ranking's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ranking {
    /// Candidates with fewer distinct clients are not proposed.
    pub min_clients: usize,
    /// The distinct clients at which the clients signal is full.
    pub full_clients: usize,
    /// The least rank proposed (0 to 1).
    pub threshold: f64,
}

impl Default for Ranking {
    fn default() -> Self {
        Ranking {
            min_clients: 1,
            full_clients: 5,
            threshold: 0.5,
        }
    }
}

/// The matches of one rule on one variable of one site: the paths (by shape) and
/// the requests they were on.
#[derive(Debug, Clone, Serialize)]
pub struct Candidate {
    /// The site (`None`: the default site).
    pub site: Option<String>,
    /// The rule.
    pub rule_id: i64,
    /// The variable as the engine named it.
    pub var: String,
    /// The rule's message (the first seen).
    pub message: String,
    /// Path shape -> indices of the requests (into the records) on it.
    pub paths: BTreeMap<String, Vec<usize>>,
    /// Distinct clients.
    pub clients: usize,
    /// Requests in all.
    pub requests: usize,
    /// The signals and the rank.
    pub signals: Signals,
    /// A few matched values, for the report.
    pub examples: Vec<String>,
}

/// The ranking signals of a candidate, each from 0 to 1, and the rank.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Signals {
    /// The share of matched values no detector finds an attack in.
    pub benign: f64,
    /// Distinct clients, relative to [`Ranking::full_clients`].
    pub clients: f64,
    /// The share of its requests where this rule was the only finding.
    pub alone: f64,
    /// The share of its requests with a low score.
    pub low_score: f64,
    /// The weighted sum: benign 0.55, the others 0.15 each.
    pub rank: f64,
}

/// Groups the matches of the refused requests among `records` into candidates,
/// ranked (highest first). Requests that were not refused are left out: they are
/// no false positive to remove.
pub fn candidates(
    records: &[Recorded],
    ranking: &Ranking,
    targets: &dyn Fn(i64) -> Vec<String>,
) -> Vec<Candidate> {
    #[derive(Default)]
    struct Acc {
        message: String,
        paths: BTreeMap<String, BTreeSet<usize>>,
        clients: BTreeSet<String>,
        values: usize,
        benign: usize,
        alone: BTreeSet<usize>,
        low: BTreeSet<usize>,
        examples: Vec<String>,
    }
    let mut groups: BTreeMap<(Option<String>, i64, String), Acc> = BTreeMap::new();
    for (i, r) in records.iter().enumerate() {
        if !r.refused() {
            continue;
        }
        let findings: Vec<&Hit> = r
            .hits
            .iter()
            .filter(|h| !is_consequence(h, targets))
            .collect();
        let rules: BTreeSet<i64> = findings.iter().map(|h| h.rule_id).collect();
        // A rule that matched several values of one variable counts once there.
        let mut counted: BTreeSet<(i64, String)> = BTreeSet::new();
        let score: i64 = {
            // Each rule counts once per request, as CRS adds its score once.
            let mut seen = BTreeSet::new();
            findings
                .iter()
                .filter(|h| seen.insert(h.rule_id))
                .map(|h| points(h))
                .sum()
        };
        let template = path_template(&r.path());
        for h in &findings {
            let target = exclusion_target(&resolve_tx(
                finding_var(&h.var, &h.data),
                h.rule_id,
                targets,
            ));
            if !counted.insert((h.rule_id, target.clone())) {
                continue;
            }
            let acc = groups
                .entry((r.site.clone(), h.rule_id, target))
                .or_default();
            if acc.message.is_empty() {
                acc.message = h.message.clone();
            }
            acc.paths.entry(template.clone()).or_default().insert(i);
            acc.clients.insert(r.client_ip.clone());
            acc.values += 1;
            if judged_benign(&h.value) {
                acc.benign += 1;
            }
            if rules.len() == 1 {
                acc.alone.insert(i);
            }
            if score <= LOW_SCORE {
                acc.low.insert(i);
            }
            if acc.examples.len() < 3 && !acc.examples.contains(&h.value) {
                acc.examples.push(h.value.clone());
            }
        }
    }
    let mut out: Vec<Candidate> = groups
        .into_iter()
        .map(|((site, rule_id, var), acc)| {
            let requests: BTreeSet<usize> = acc.paths.values().flatten().copied().collect();
            let n = requests.len().max(1) as f64;
            let benign = acc.benign as f64 / acc.values.max(1) as f64;
            let clients = (acc.clients.len() as f64 / ranking.full_clients.max(1) as f64).min(1.0);
            let alone = acc.alone.len() as f64 / n;
            let low_score = acc.low.len() as f64 / n;
            let rank = 0.55 * benign + 0.15 * (clients + alone + low_score);
            Candidate {
                site,
                rule_id,
                var,
                message: acc.message,
                paths: acc
                    .paths
                    .into_iter()
                    .map(|(p, s)| (p, s.into_iter().collect()))
                    .collect(),
                clients: acc.clients.len(),
                requests: requests.len(),
                signals: Signals {
                    benign,
                    clients,
                    alone,
                    low_score,
                    rank,
                },
                examples: acc.examples,
            }
        })
        .collect();
    out.sort_by(|a, b| {
        b.signals
            .rank
            .total_cmp(&a.signals.rank)
            .then(b.requests.cmp(&a.requests))
            .then(a.rule_id.cmp(&b.rule_id))
            .then(a.var.cmp(&b.var))
    });
    out
}

/// Whether a candidate is a likely false positive worth an exclusion: enough
/// clients, mostly benign values, and a rank at the threshold or above. `Err`
/// gives the reason it is not.
pub fn likely_false_positive(c: &Candidate, ranking: &Ranking) -> Result<(), String> {
    if c.clients < ranking.min_clients {
        return Err(format!(
            "{} distinct client(s), fewer than --min-clients {}",
            c.clients, ranking.min_clients
        ));
    }
    if c.signals.benign < 0.5 {
        return Err(format!(
            "the detectors find an attack in {:.0}% of the matched values",
            (1.0 - c.signals.benign) * 100.0
        ));
    }
    if c.signals.rank < ranking.threshold {
        return Err(format!(
            "rank {:.2} below the threshold {:.2}",
            c.signals.rank, ranking.threshold
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(client: &str, uri: &str, hits: &[(i64, &str, &str, u8)]) -> Recorded {
        Recorded {
            id: format!("{client}{uri}"),
            line: 1,
            client_ip: client.to_owned(),
            site: None,
            method: "GET".to_owned(),
            uri: uri.to_owned(),
            protocol: "HTTP/1.1".to_owned(),
            headers: Vec::new(),
            body: Vec::new(),
            status: 403,
            hits: hits
                .iter()
                .map(|(id, var, value, sev)| Hit {
                    rule_id: *id,
                    var: (*var).to_owned(),
                    value: (*value).to_owned(),
                    severity: Some(*sev),
                    message: format!("rule {id}"),
                    data: String::new(),
                })
                .collect(),
        }
    }

    #[test]
    fn targets_of_matches() {
        assert_eq!(
            match_target("MATCHED_VARS:MATCHED_VARS:ARGS:comment"),
            "ARGS:comment"
        );
        assert_eq!(
            match_target("TX:rfi_parameter_args:json.links.array_2"),
            "ARGS:json.links.array_2"
        );
        assert_eq!(
            match_target("TX:blocking_inbound_anomaly_score"),
            "TX:blocking_inbound_anomaly_score"
        );
        assert_eq!(
            match_target("REQUEST_HEADERS:Referer"),
            "REQUEST_HEADERS:Referer"
        );
        assert_eq!(
            exclusion_target("TX:rfi_parameter_args:json.links.array_2"),
            "ARGS:/^json[.]links[.]array_[0-9]+$/"
        );
        assert_eq!(
            exclusion_target("ARGS:items.3.name"),
            "ARGS:/^items[.][0-9]+[.]name$/"
        );
        assert_eq!(exclusion_target("ARGS:comment"), "ARGS:comment");
        assert_eq!(
            exclusion_target("ARGS:json.filter.$or.array_0.vip"),
            "ARGS:/^json[.]filter[.][$]or[.]array_[0-9]+[.]vip$/"
        );
        assert_eq!(
            exclusion_target("ARGS_NAMES:json.filter.$or.array_0.vip"),
            "ARGS_NAMES"
        );
        assert_eq!(exclusion_target("ARGS:a b.0"), "ARGS:a b.0");
        assert_eq!(
            finding_var(
                "TX:1",
                "Matched Data: h4 found within ARGS:json.content: <h4>x"
            ),
            "ARGS:json.content"
        );
        assert_eq!(
            finding_var("TX:1", "Matched Data: x found within TX:y: z"),
            "TX:1"
        );
        assert_eq!(
            finding_var("TX:content_type", "|text/x|"),
            "TX:content_type"
        );
        assert_eq!(
            logged_data(
                r#"ModSecurity: Warning. x [id "1"] [data "Matched Data: a found within ARGS:q: \"b"] [severity "2"]"#
            ),
            r#"Matched Data: a found within ARGS:q: \"b"#
        );
        assert_eq!(exclusion_target("REQUEST_BODY"), "REQUEST_BODY");
    }

    #[test]
    fn path_shapes() {
        assert_eq!(path_template("/api/items/42"), "/api/items/{}");
        assert_eq!(
            path_template("/u/3f2a9c1e-77aa-4b6e-9d1c-0a1b2c3d4e5f/edit"),
            "/u/{}/edit"
        );
        assert_eq!(path_template("/v1/blog/post"), "/v1/blog/post");
        assert_eq!(path_template("/"), "/");
    }

    #[test]
    fn bookkeeping_is_left_out() {
        let h = |id, var: &str| Hit {
            rule_id: id,
            var: var.to_owned(),
            value: String::new(),
            severity: None,
            message: String::new(),
            data: String::new(),
        };
        let none = |_| Vec::new();
        let ct = |id| {
            if id == 920420 {
                vec!["REQUEST_HEADERS:Content-Type".to_owned()]
            } else {
                vec!["ARGS".to_owned(), "ARGS_NAMES".to_owned()]
            }
        };
        assert!(is_consequence(
            &h(949110, "TX:blocking_inbound_anomaly_score"),
            &none
        ));
        assert!(is_consequence(&h(980170, ""), &none));
        assert!(is_consequence(&h(920000, "TX:x"), &ct));
        assert!(is_consequence(&h(0, "ARGS:a"), &none));
        assert!(!is_consequence(&h(942100, "ARGS:a"), &none));
        assert!(!is_consequence(&h(920420, "TX:content_type"), &ct));
        assert_eq!(
            resolve_tx("TX:content_type".to_owned(), 920420, &ct),
            "REQUEST_HEADERS:Content-Type"
        );
    }

    #[test]
    fn detectors_judge_values() {
        assert!(judged_benign("I'd like to select a union rep, or else."));
        assert!(!judged_benign("1' OR '1'='1' -- "));
        assert!(!judged_benign("<script>alert(1)</script>"));
    }

    #[test]
    fn groups_and_ranks() {
        let prose = "it's the best, and I'd select it again";
        let records = vec![
            rec(
                "1.1.1.1",
                "/blog/7?c=x",
                &[
                    (942100, "ARGS:comment", prose, 2),
                    (949110, "TX:anomaly", "10", 2),
                ],
            ),
            rec("1.1.1.2", "/blog/8", &[(942100, "ARGS:comment", prose, 2)]),
            rec("1.1.1.3", "/blog/9", &[(942100, "ARGS:comment", prose, 2)]),
            rec(
                "6.6.6.6",
                "/search",
                &[
                    (942100, "ARGS:q", "1' OR '1'='1' -- ", 2),
                    (942190, "ARGS:q", "1' OR '1'='1' -- ", 2),
                    (942200, "ARGS:q", "1' OR '1'='1' -- ", 2),
                ],
            ),
        ];
        let ranking = Ranking::default();
        let c = candidates(&records, &ranking, &|_| Vec::new());
        assert_eq!(c[0].rule_id, 942100);
        assert_eq!(c[0].var, "ARGS:comment");
        assert_eq!(c[0].requests, 3);
        assert_eq!(c[0].clients, 3);
        assert_eq!(c[0].paths.keys().collect::<Vec<_>>(), ["/blog/{}"]);
        assert_eq!(c[0].signals.benign, 1.0);
        assert_eq!(c[0].signals.alone, 1.0);
        assert!(likely_false_positive(&c[0], &ranking).is_ok());
        // The attack: no 949110 group, and its candidates are refused.
        assert!(c.iter().all(|c| c.rule_id != 949110));
        let attack: Vec<&Candidate> = c.iter().filter(|c| c.var == "ARGS:q").collect();
        assert_eq!(attack.len(), 3);
        for a in attack {
            let why = likely_false_positive(a, &ranking).unwrap_err();
            assert!(why.contains("detectors"), "{why}");
        }
        // Too few clients.
        let strict = Ranking {
            min_clients: 4,
            ..ranking
        };
        assert!(
            likely_false_positive(&c[0], &strict)
                .unwrap_err()
                .contains("--min-clients 4")
        );
    }

    #[test]
    fn passed_requests_are_no_false_positives() {
        let mut r = rec("1.1.1.1", "/", &[(942100, "ARGS:a", "x", 2)]);
        r.status = 200;
        assert!(candidates(&[r], &Ranking::default(), &|_| Vec::new()).is_empty());
    }
}
