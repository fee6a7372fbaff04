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
/// letters, digits and `_ - . [ ] + ^ $` (as [`super::group::exclusion_target`]
/// writes them).
pub fn safe_var(var: &str) -> bool {
    let (coll, key) = match var.split_once(':') {
        Some((c, k)) => (c, Some(k)),
        None => (var, None),
    };
    let coll_ok = !coll.is_empty() && coll.bytes().all(|b| b.is_ascii_uppercase() || b == b'_');
    let key_ok = key.is_none_or(|k| {
        if let Some(rx) = k.strip_prefix("/^").and_then(|r| r.strip_suffix("$/")) {
            return !rx.is_empty()
                && rx
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_-.[]+".contains(&b));
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
    if !template.contains("{}") {
        return format!("@streq {template}");
    }
    let mut rx = String::from("^");
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
    rx.push('$');
    format!("@rx {rx}")
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

    fn take(&mut self) -> i64 {
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

/// The exclusion of a candidate: path-scoped when it is on at most `max_paths`
/// path shapes, else on every path.
pub fn propose(c: &Candidate, max_paths: usize, ids: &mut Ids) -> Result<Proposal, Unwritable> {
    if !safe_var(&c.var) {
        return Err(Unwritable::Variable(c.var.clone()));
    }
    let covers: Vec<usize> = {
        let mut v: Vec<usize> = c.paths.values().flatten().copied().collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    let what = format!(
        "# palisade tune: rule {} on {} ({} request(s), {} client(s), rank {:.2}): {}",
        c.rule_id,
        c.var,
        c.requests,
        c.clients,
        c.signals.rank,
        c.message.replace(['\n', '\r'], " ")
    );
    let site_placement = c.site.clone().map(Placement::Site);
    if c.paths.len() <= max_paths {
        let paths: Vec<String> = c.paths.keys().filter(|p| safe_path(p)).cloned().collect();
        if paths.is_empty() {
            return Err(Unwritable::Path(
                c.paths.keys().next().cloned().unwrap_or_default(),
            ));
        }
        let covers: Vec<usize> = {
            let mut v: Vec<usize> = paths.iter().flat_map(|p| c.paths[p].clone()).collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        let mut text = what;
        for p in &paths {
            text.push_str(&format!(
                "\nSecRule REQUEST_FILENAME \"{}\" \"id:{},phase:1,pass,nolog,ctl:ruleRemoveTargetById={};{}\"",
                path_operator(p),
                ids.take(),
                c.rule_id,
                c.var
            ));
        }
        Ok(Proposal {
            site: c.site.clone(),
            rule_id: c.rule_id,
            var: c.var.clone(),
            form: Form::Paths(paths),
            text,
            placement: site_placement.unwrap_or(Placement::Before),
            covers,
            rank: c.signals.rank,
        })
    } else {
        Ok(Proposal {
            site: c.site.clone(),
            rule_id: c.rule_id,
            var: c.var.clone(),
            form: Form::Everywhere,
            text: format!(
                "{what}\nSecRuleUpdateTargetById {} \"!{}\"",
                c.rule_id, c.var
            ),
            placement: site_placement.unwrap_or(Placement::After),
            covers,
            rank: c.signals.rank,
        })
    }
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
        assert!(safe_path("/a/{}/b.json"));
        assert_eq!(path_operator("/a/{}/b.json"), "@rx ^/a/[^/]+/b[.]json$");
    }
}
