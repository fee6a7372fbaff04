//! The narrowest exclusion of a candidate, in the forms CRS recommends:
//!
//! - on one or a few paths: a phase 1 rule on `REQUEST_FILENAME` (`@streq`, or
//!   `@rx` for a path shape with an id segment) that removes the variable from the
//!   rule for that request only, `ctl:ruleRemoveTargetById=ID;VAR`. It must run
//!   before the rule it changes: it goes in the file loaded before CRS;
//! - on many paths: `SecRuleUpdateTargetById ID "!VAR"`, which must come after the
//!   rule is defined: it goes in the file loaded after CRS.
//!
//! A candidate of a `[[site]]` goes in that site's file (its `[[site.rules]]` run
//! before CRS, and its exclusions apply to the site only).

use super::group::Candidate;
use serde::Serialize;

/// Where an exclusion's text is loaded.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case", tag = "file", content = "site")]
pub enum Placement {
    /// The file loaded before CRS (`tune-before.conf`).
    Before,
    /// The file loaded after CRS (`tune-after.conf`).
    After,
    /// A site's file (`tune-site-NAME.conf`), in the site's `[[site.rules]]`.
    Site(String),
}

impl Placement {
    /// The file name the exclusion is written to.
    pub fn file_name(&self) -> String {
        match self {
            Placement::Before => super::BEFORE_FILE.to_owned(),
            Placement::After => super::AFTER_FILE.to_owned(),
            Placement::Site(name) => format!("tune-site-{name}.conf"),
        }
    }
}

/// The form of an exclusion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Form {
    /// `ctl:ruleRemoveTargetById` on these path shapes.
    Paths(Vec<String>),
    /// `SecRuleUpdateTargetById`, on every path.
    Everywhere,
    /// `ctl:ruleRemoveTargetById` on every path but these shapes (an exclusion on
    /// every path narrowed where the proof found it let an attack through).
    AllBut(Vec<String>),
}

/// One proposed exclusion.
#[derive(Debug, Clone, Serialize)]
pub struct Proposal {
    /// The site (`None`: the default site).
    pub site: Option<String>,
    /// The rule.
    pub rule_id: i64,
    /// The variable removed from it.
    pub var: String,
    /// The form.
    pub form: Form,
    /// The SecLang text, with a comment line saying what it is for.
    pub text: String,
    /// Where it is loaded.
    pub placement: Placement,
    /// The recorded requests (indices) whose matches it covers.
    pub covers: Vec<usize>,
    /// The candidate's rank.
    pub rank: f64,
    /// The comment line the text starts with.
    #[serde(skip)]
    pub header: String,
    /// Every path shape of the candidate and its requests (what narrowing chooses
    /// from).
    #[serde(skip)]
    pub shapes: std::collections::BTreeMap<String, Vec<usize>>,
}

/// Why a candidate got no proposal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unwritable {
    /// The variable's name cannot be written as a rule target safely.
    #[error("the variable {0:?} cannot be written as a rule target safely")]
    Variable(String),
    /// No path of the candidate can be written in a rule safely.
    #[error("no path of it can be written in a rule safely ({0:?})")]
    Path(String),
}

/// Whether a variable name can be written as a target: a collection name of
/// upper-case letters and `_`, and a key (if any) of letters, digits and
/// `_ - . [ ] @ $`, not starting with `/`; or a selector regex `/^...$/` of
/// letters, digits and `_ - . [ ] + @ $` (as [`super::group::exclusion_target`]
/// writes them); or `XML:/*`, `XML://@*`.
pub fn safe_var(var: &str) -> bool {
    let (coll, key) = match var.split_once(':') {
        Some((c, k)) => (c, Some(k)),
        None => (var, None),
    };
    let coll_ok = !coll.is_empty() && coll.bytes().all(|b| b.is_ascii_uppercase() || b == b'_');
    if matches!(var, "XML:/*" | "XML://@*") {
        return true;
    }
    let key_ok = key.is_none_or(|k| {
        if let Some(rx) = k.strip_prefix("/^").and_then(|r| r.strip_suffix("$/")) {
            return !rx.is_empty()
                && rx
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_-.[]+$@".contains(&b));
        }
        !k.is_empty()
            && !k.starts_with('/')
            && k.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_-.[]@$".contains(&b))
    });
    coll_ok && key_ok
}

/// Whether a path shape can be written in a rule: `/` then letters, digits,
/// `_ - . ~ /` and `{}` placeholders.
pub fn safe_path(template: &str) -> bool {
    template.starts_with('/')
        && template
            .replace("{}", "")
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.~/".contains(&b))
}

/// The operator and argument matching REQUEST_FILENAME for a path shape: `@streq`
/// for a plain path, `@rx` (anchored, `[^/]+` for each `{}`) for a shape.
pub fn path_operator(template: &str) -> String {
    if template.contains("{}") {
        format!("@rx ^{}$", shape_regex(template))
    } else {
        format!("@streq {template}")
    }
}

/// Hands out rule ids from a first one up.
#[derive(Debug, Clone)]
pub struct Ids {
    next: i64,
}

impl Ids {
    /// Ids from `first`, or above the highest id already used among `used` if
    /// that is higher.
    pub fn new(first: i64, used: impl IntoIterator<Item = i64>) -> Ids {
        let top = used.into_iter().filter(|&i| i >= first).max();
        Ids {
            next: top.map_or(first, |t| t + 1),
        }
    }

    /// The next id.
    pub fn take(&mut self) -> i64 {
        let id = self.next;
        self.next += 1;
        id
    }
}

/// The `id:N` values of SecLang text (for the ids of an existing tune file).
pub fn ids_in(text: &str) -> Vec<i64> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(p) = rest.find("id:") {
        let after = &rest[p + 3..];
        let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
        if let Ok(n) = digits.parse() {
            out.push(n);
        }
        rest = after;
    }
    out
}

/// The most path shapes a narrowed exclusion keeps rules for; past that it is
/// dropped rather than narrowed.
pub const MAX_NARROWED: usize = 32;

/// The exclusion of a candidate: path-scoped when it is on at most `max_paths`
/// path shapes, else on every path.
pub fn propose(c: &Candidate, max_paths: usize, ids: &mut Ids) -> Result<Proposal, Unwritable> {
    if !safe_var(&c.var) {
        return Err(Unwritable::Variable(c.var.clone()));
    }
    let header = format!(
        "# palisade tune: rule {} on {} ({} request(s), {} client(s), rank {:.2}): {}",
        c.rule_id,
        c.var,
        c.requests,
        c.clients,
        c.signals.rank,
        c.message.replace(['\n', '\r'], " ")
    );
    let mut p = Proposal {
        site: c.site.clone(),
        rule_id: c.rule_id,
        var: c.var.clone(),
        form: Form::Everywhere,
        text: String::new(),
        placement: Placement::After,
        covers: Vec::new(),
        rank: c.signals.rank,
        header,
        shapes: c.paths.clone(),
    };
    if c.paths.len() <= max_paths {
        let paths: Vec<String> = c.paths.keys().filter(|p| safe_path(p)).cloned().collect();
        if paths.is_empty() {
            return Err(Unwritable::Path(
                c.paths.keys().next().cloned().unwrap_or_default(),
            ));
        }
        p.form = Form::Paths(paths);
    }
    p.render(ids);
    Ok(p)
}

impl Proposal {
    /// Writes the text, placement and covered requests of the form (new rule ids
    /// for path-scoped rules).
    pub fn render(&mut self, ids: &mut Ids) {
        let site = self.site.clone().map(Placement::Site);
        match &self.form {
            Form::Paths(paths) => {
                let mut text = self.header.clone();
                for p in paths {
                    text.push_str(&format!(
                        "\nSecRule REQUEST_FILENAME \"{}\" \"id:{},phase:1,pass,nolog,ctl:ruleRemoveTargetById={};{}\"",
                        path_operator(p),
                        ids.take(),
                        self.rule_id,
                        self.var
                    ));
                }
                self.text = text;
                self.placement = site.unwrap_or(Placement::Before);
                self.covers = paths
                    .iter()
                    .filter_map(|p| self.shapes.get(p))
                    .flatten()
                    .copied()
                    .collect();
            }
            Form::AllBut(shapes) => {
                let alternatives: Vec<String> = shapes.iter().map(|p| shape_regex(p)).collect();
                self.text = format!(
                    "{}\nSecRule REQUEST_FILENAME \"!@rx ^(?:{})$\" \"id:{},phase:1,pass,nolog,ctl:ruleRemoveTargetById={};{}\"",
                    self.header,
                    alternatives.join("|"),
                    ids.take(),
                    self.rule_id,
                    self.var
                );
                self.placement = site.unwrap_or(Placement::Before);
                self.covers = self
                    .shapes
                    .iter()
                    .filter(|(s, _)| !shapes.iter().any(|b| shape_covers(b, s)))
                    .flat_map(|(_, v)| v.iter().copied())
                    .collect();
            }
            Form::Everywhere => {
                self.text = format!(
                    "{}\nSecRuleUpdateTargetById {} \"!{}\"",
                    self.header, self.rule_id, self.var
                );
                self.placement = site.unwrap_or(Placement::After);
                self.covers = self.shapes.values().flatten().copied().collect();
            }
        }
        self.covers.sort_unstable();
        self.covers.dedup();
    }

    /// Whether the exclusion applies to a request for `path`.
    pub fn applies_on(&self, path: &str) -> bool {
        match &self.form {
            Form::Everywhere => true,
            Form::Paths(shapes) => shapes.iter().any(|s| shape_covers(s, path)),
            Form::AllBut(shapes) => !shapes.iter().any(|s| shape_covers(s, path)),
        }
    }

    /// Narrows the exclusion so that it no longer applies to requests for `path`
    /// (where it let an attack through): a path-scoped one loses the shapes that
    /// cover it; one on every path becomes one per path shape of its requests but
    /// those, or, past [`MAX_NARROWED`] shapes, one on every path but the shape of
    /// `path`. `false` when that leaves nothing to write (or cannot be written):
    /// then drop it.
    pub fn narrow(&mut self, path: &str, ids: &mut Ids) -> bool {
        if !self.applies_on(path) {
            return false;
        }
        let shape = super::group::path_template(path);
        match &self.form {
            Form::Paths(paths) => {
                let kept: Vec<String> = paths
                    .iter()
                    .filter(|s| !shape_covers(s, path))
                    .cloned()
                    .collect();
                if kept.is_empty() {
                    return false;
                }
                self.form = Form::Paths(kept);
            }
            Form::Everywhere => {
                let kept: Vec<String> = self
                    .shapes
                    .keys()
                    .filter(|s| safe_path(s) && !shape_covers(s, path))
                    .cloned()
                    .collect();
                if kept.is_empty() {
                    return false;
                }
                if kept.len() <= MAX_NARROWED {
                    self.form = Form::Paths(kept);
                } else if safe_path(&shape) {
                    self.form = Form::AllBut(vec![shape]);
                } else {
                    return false;
                }
            }
            Form::AllBut(but) => {
                if !safe_path(&shape) || but.len() >= MAX_NARROWED {
                    return false;
                }
                let mut but = but.clone();
                but.push(shape);
                self.form = Form::AllBut(but);
            }
        }
        self.render(ids);
        true
    }
}

/// Whether a path shape (`{}` for a segment) covers `path`, as the `@rx` written
/// for it does.
pub fn shape_covers(shape: &str, path: &str) -> bool {
    let a: Vec<&str> = shape.split('/').collect();
    let b: Vec<&str> = path.split('/').collect();
    a.len() == b.len()
        && a.iter()
            .zip(&b)
            .all(|(s, p)| s == p || (*s == "{}" && !p.is_empty()))
}

/// The regex of a path shape, without anchors: `[^/]+` for each `{}`, `[.]` for a
/// dot (no backslash, which SecLang's quoting would have to carry).
fn shape_regex(template: &str) -> String {
    let mut rx = String::new();
    for (i, part) in template.split("{}").enumerate() {
        if i > 0 {
            rx.push_str("[^/]+");
        }
        for c in part.chars() {
            if c == '.' {
                rx.push_str("[.]");
            } else {
                rx.push(c);
            }
        }
    }
    rx
}

#[cfg(test)]
mod tests {
    use super::super::group::Signals;
    use super::*;
    use std::collections::BTreeMap;

    fn cand(var: &str, paths: &[&str]) -> Candidate {
        Candidate {
            site: None,
            rule_id: 942100,
            var: var.to_owned(),
            message: "SQL Injection Attack\nDetected".to_owned(),
            paths: paths
                .iter()
                .enumerate()
                .map(|(i, p)| ((*p).to_owned(), vec![i]))
                .collect::<BTreeMap<_, _>>(),
            clients: 4,
            requests: paths.len(),
            signals: Signals {
                rank: 0.9,
                ..Signals::default()
            },
            examples: Vec::new(),
        }
    }

    #[test]
    fn path_scoped_text() {
        let mut ids = Ids::new(1_000_000, ids_in("x id:999 id:1000004,phase:1"));
        let p = propose(
            &cand("ARGS:comment", &["/blog/{}", "/contact"]),
            3,
            &mut ids,
        )
        .unwrap();
        assert_eq!(p.placement, Placement::Before);
        assert_eq!(
            p.form,
            Form::Paths(vec!["/blog/{}".to_owned(), "/contact".to_owned()])
        );
        let lines: Vec<&str> = p.text.lines().collect();
        assert!(lines[0].starts_with("# palisade tune: rule 942100 on ARGS:comment"));
        assert!(
            lines[0].ends_with("SQL Injection Attack Detected"),
            "{}",
            lines[0]
        );
        assert_eq!(
            lines[1],
            r#"SecRule REQUEST_FILENAME "@rx ^/blog/[^/]+$" "id:1000005,phase:1,pass,nolog,ctl:ruleRemoveTargetById=942100;ARGS:comment""#
        );
        assert_eq!(
            lines[2],
            r#"SecRule REQUEST_FILENAME "@streq /contact" "id:1000006,phase:1,pass,nolog,ctl:ruleRemoveTargetById=942100;ARGS:comment""#
        );
        assert_eq!(p.covers, [0, 1]);
    }

    #[test]
    fn many_paths_update_the_target() {
        let mut ids = Ids::new(1_000_000, []);
        let p = propose(
            &cand("REQUEST_COOKIES:prefs", &["/a", "/b", "/c", "/d"]),
            3,
            &mut ids,
        )
        .unwrap();
        assert_eq!(p.form, Form::Everywhere);
        assert_eq!(p.placement, Placement::After);
        assert_eq!(
            p.text.lines().nth(1).unwrap(),
            r#"SecRuleUpdateTargetById 942100 "!REQUEST_COOKIES:prefs""#
        );
        let mut site = cand("ARGS:a", &["/x"]);
        site.site = Some("shop".to_owned());
        let p = propose(&site, 3, &mut ids).unwrap();
        assert_eq!(p.placement, Placement::Site("shop".to_owned()));
        assert_eq!(p.placement.file_name(), "tune-site-shop.conf");
    }

    #[test]
    fn narrowing() {
        let mut ids = Ids::new(1_000_000, []);
        let mut p = propose(
            &cand("REQUEST_METHOD", &["/a", "/b/{}", "/c", "/d"]),
            3,
            &mut ids,
        )
        .unwrap();
        assert_eq!(p.form, Form::Everywhere);
        assert!(p.narrow("/b/77", &mut ids));
        assert_eq!(
            p.form,
            Form::Paths(vec!["/a".to_owned(), "/c".to_owned(), "/d".to_owned()])
        );
        assert_eq!(p.placement, Placement::Before);
        assert_eq!(p.covers, [0, 2, 3]);
        assert_eq!(p.text.lines().count(), 4);
        // A path it does not apply to: nothing to narrow.
        assert!(!p.narrow("/zzz", &mut ids));
        assert!(p.narrow("/c", &mut ids));
        assert!(p.narrow("/d", &mut ids));
        assert!(!p.narrow("/a", &mut ids));
        // On many paths: every path but the attack's.
        let many: Vec<String> = (0..40).map(|i| format!("/p{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let mut p = propose(&cand("REQUEST_METHOD", &many), 3, &mut ids).unwrap();
        assert!(p.narrow("/items/7", &mut ids));
        assert_eq!(p.form, Form::AllBut(vec!["/items/{}".to_owned()]));
        assert!(
            p.text
                .contains(r#"SecRule REQUEST_FILENAME "!@rx ^(?:/items/[^/]+)$""#),
            "{}",
            p.text
        );
        assert!(
            p.text
                .contains("ctl:ruleRemoveTargetById=942100;REQUEST_METHOD")
        );
        assert!(!p.applies_on("/items/8"));
        assert!(p.applies_on("/p1"));
        assert!(p.narrow("/x.json", &mut ids));
        assert!(
            p.text.contains("^(?:/items/[^/]+|/x[.]json)$"),
            "{}",
            p.text
        );
        assert_eq!(p.covers.len(), 40);
    }

    #[test]
    fn refuses_what_cannot_be_written_safely() {
        let mut ids = Ids::new(1, []);
        for var in [
            "ARGS:a;b",
            "ARGS:a\"",
            "ARGS:/re/",
            "args:x",
            "ARGS:",
            "ARGS:a b",
        ] {
            assert!(
                matches!(
                    propose(&cand(var, &["/"]), 3, &mut ids),
                    Err(Unwritable::Variable(_))
                ),
                "{var}"
            );
        }
        let e = propose(&cand("ARGS:a", &["/a b", "/\"x"]), 3, &mut ids).unwrap_err();
        assert!(matches!(e, Unwritable::Path(_)), "{e}");
        assert!(safe_var("REQUEST_HEADERS:User-Agent"));
        assert!(safe_var("ARGS:json.items[0].name"));
        assert!(safe_var("REQUEST_BODY"));
        assert!(safe_var("ARGS:/^json[.]links[.]array_[0-9]+$/"));
        assert!(!safe_var("ARGS:/^a,b$/"));
        assert!(safe_var("XML:/*"));
        assert!(safe_var(
            "ARGS_NAMES:/^json[.]filter[.][$]or[.]array_[0-9]+$/"
        ));
        assert!(safe_path("/a/{}/b.json"));
        assert_eq!(path_operator("/a/{}/b.json"), "@rx ^/a/[^/]+/b[.]json$");
    }
}
