//! The SecLang parser: directives to syntax tree, with `Include` resolved.
//!
//! The work is split in three layers: the lexer turns text into logical
//! directives and words, [`crate::rule`] parses the variable, operator and action
//! arguments of rules, and this module dispatches on the directive name and follows
//! includes.

use crate::ast::{Directive, DirectiveKind, RuleDef, RuleSelector, Span};
use crate::directives;
use crate::error::{ParseError, ParseErrorKind};
use crate::lexer::{LogicalLines, split_args};
use crate::rule::{
    looks_like_id_list, parse_actions, parse_id_list, parse_operator, parse_variables,
};
use crate::source::{FileSource, FsSource};
use std::borrow::Cow;
use std::io;
use std::ops::ControlFlow;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// How many files deep `Include` may nest (the top-level file counts as one).
pub const MAX_INCLUDE_DEPTH: usize = 16;

/// Parses SecLang text. `name` is used as the file name in spans; `Include` paths are
/// resolved relative to its directory and read from the file system.
pub fn parse_str(text: &str, name: &str) -> Result<Vec<Directive>, ParseError> {
    parse_source(&FsSource, text, Path::new(name))
}

/// Parses SecLang text whose file name (for spans and relative `Include` paths) is
/// `name`; included files are read through `source`. Stops at the first error.
pub fn parse_source(
    source: &dyn FileSource,
    text: &str,
    name: &Path,
) -> Result<Vec<Directive>, ParseError> {
    first_error(|each| parse_source_each(source, text, name, each))
}

/// Reads and parses a file and everything it includes. Stops at the first error.
pub fn parse_file(source: &dyn FileSource, path: &Path) -> Result<Vec<Directive>, ParseError> {
    first_error(|each| parse_file_each(source, path, each))
}

/// One step of a recovering parse ([`parse_source_each`], [`parse_file_each`]), in
/// the order of the text (the directives of an included file where the `Include`
/// is).
#[derive(Debug, Clone)]
pub enum Parsed {
    /// A directive that parsed.
    Directive(Directive),
    /// A directive that did not parse, or a file that could not be read; the parse
    /// goes on with the next directive (or the next file of an `Include`).
    Failed(Failure),
}

/// A directive that did not parse, and what is known of it.
#[derive(Debug, Clone)]
pub struct Failure {
    /// What went wrong and where.
    pub error: ParseError,
    /// The directive's canonical name (such as `SecRule` or `Include`) when it was
    /// recognised; `None` for an unknown directive or a file that could not be read
    /// or decoded at the top level.
    pub directive: Option<&'static str>,
}

/// Parses SecLang text like [`parse_source`], but goes on after an error: `each`
/// gets every directive and every error in order, and the parse stops early only
/// when `each` returns [`ControlFlow::Break`]. Recovery is per logical directive
/// (a directive and its continuation lines): a directive that fails is skipped
/// whole, an `Include` that fails reads none of the files it failed on, and a file
/// that cannot be decoded is skipped whole.
pub fn parse_source_each(
    source: &dyn FileSource,
    text: &str,
    name: &Path,
    each: &mut dyn FnMut(Parsed) -> ControlFlow<()>,
) {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut parser = Parser::new(source, each);
    parser.open.push(normalize(name));
    let _ = parser.parse_text(text, &Arc::new(name.to_path_buf()));
}

/// Reads and parses a file and everything it includes like [`parse_file`], but
/// goes on after an error as [`parse_source_each`] does.
pub fn parse_file_each(
    source: &dyn FileSource,
    path: &Path,
    each: &mut dyn FnMut(Parsed) -> ControlFlow<()>,
) {
    let file = Arc::new(path.to_path_buf());
    let whole_file = Span {
        file: Arc::clone(&file),
        line: 1,
        column: 1,
    };
    let mut parser = Parser::new(source, each);
    let text = match source.read(path) {
        Ok(bytes) => decode(bytes, &file),
        Err(e) => Err(io_error(&whole_file, path, &e)),
    };
    let text = match text {
        Ok(text) => text,
        Err(error) => {
            let _ = parser.fail(error, None);
            return;
        }
    };
    parser.open.push(normalize(path));
    let _ = parser.parse_text(&text, &file);
}

/// The directives a recovering parse gives, or its first error (the parse stops
/// there).
fn first_error(
    parse: impl FnOnce(&mut dyn FnMut(Parsed) -> ControlFlow<()>),
) -> Result<Vec<Directive>, ParseError> {
    let mut out = Vec::new();
    let mut first = None;
    parse(&mut |item| match item {
        Parsed::Directive(d) => {
            out.push(d);
            ControlFlow::Continue(())
        }
        Parsed::Failed(f) => {
            first = Some(f.error);
            ControlFlow::Break(())
        }
    });
    match first {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

fn error(span: &Span, kind: ParseErrorKind) -> ParseError {
    ParseError {
        span: span.clone(),
        kind,
    }
}

fn io_error(span: &Span, path: &Path, e: &io::Error) -> ParseError {
    error(
        span,
        ParseErrorKind::Io {
            path: path.to_path_buf(),
            reason: e.to_string(),
        },
    )
}

/// Turns file content into text: drops a UTF-8 byte order mark, and rejects bytes that
/// are not UTF-8 with the line where they are.
fn decode(mut bytes: Vec<u8>, file: &Arc<PathBuf>) -> Result<String, ParseError> {
    if bytes.starts_with(b"\xEF\xBB\xBF") {
        bytes.drain(..3);
    }
    String::from_utf8(bytes).map_err(|e| {
        let valid = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        let line = bytes[..valid].iter().filter(|&&b| b == b'\n').count() + 1;
        let column = valid
            - bytes[..valid]
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |p| p + 1)
            + 1;
        error(
            &Span {
                file: Arc::clone(file),
                line: u32::try_from(line).unwrap_or(u32::MAX),
                column: u32::try_from(column).unwrap_or(u32::MAX),
            },
            ParseErrorKind::Io {
                path: file.to_path_buf(),
                reason: "the file is not valid UTF-8".to_owned(),
            },
        )
    })
}

/// A path with `.` components removed and `..` resolved against the components before
/// it, without touching the file system. Used to recognise a file already being read.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if matches!(out.components().next_back(), Some(Component::Normal(_))) {
                    out.pop();
                } else if !out.has_root() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// True when an `Include` argument is a glob pattern rather than a file name.
fn is_glob(pattern: &str) -> bool {
    pattern.contains(['*', '?', '['])
}

/// The canonical name of the directive a text starts with, when its first word is
/// one (for the errors of a directive whose arguments cannot be split).
fn leading_directive(text: &str) -> Option<&'static str> {
    let word = text.split_ascii_whitespace().next()?;
    directives::lookup(word).map(|(name, _)| name)
}

struct Parser<'s, 'e> {
    source: &'s dyn FileSource,
    /// Normalized paths of the files being read, outermost first.
    open: Vec<PathBuf>,
    /// Where the directives and the errors go, in order.
    each: &'e mut dyn FnMut(Parsed) -> ControlFlow<()>,
}

impl<'s, 'e> Parser<'s, 'e> {
    fn new(source: &'s dyn FileSource, each: &'e mut dyn FnMut(Parsed) -> ControlFlow<()>) -> Self {
        Self {
            source,
            open: Vec::new(),
            each,
        }
    }

    /// Reports an error; `Break` when the caller wants no more.
    fn fail(&mut self, error: ParseError, directive: Option<&'static str>) -> ControlFlow<()> {
        (self.each)(Parsed::Failed(Failure { error, directive }))
    }

    fn parse_text(&mut self, text: &str, file: &Arc<PathBuf>) -> ControlFlow<()> {
        for line in LogicalLines::new(text) {
            let span = Span {
                file: Arc::clone(file),
                line: line.line,
                column: line.column,
            };
            self.directive(&line.text, span)?;
        }
        ControlFlow::Continue(())
    }

    /// Parses one directive and hands it (or the directives it includes) on.
    fn directive(&mut self, text: &str, span: Span) -> ControlFlow<()> {
        let mut args = match split_args(text) {
            Ok(args) => args,
            Err(kind) => return self.fail(error(&span, kind), leading_directive(text)),
        };
        if args.is_empty() {
            return ControlFlow::Continue(());
        }
        let written = args.remove(0).into_owned();
        let Some((name, arity)) = directives::lookup(&written) else {
            return self.fail(
                error(&span, ParseErrorKind::UnknownDirective(written)),
                None,
            );
        };
        if !arity.accepts(args.len()) {
            let kind = ParseErrorKind::ArgumentCount {
                directive: name.to_owned(),
                expected: arity.describe,
                got: args.len(),
            };
            return self.fail(error(&span, kind), Some(name));
        }
        if name == "Include" || name == "IncludeOptional" {
            let pattern = args.first().map_or("", |a| a.as_ref());
            return self.include(name, pattern, &span);
        }
        match build(name, args) {
            Ok(kind) => (self.each)(Parsed::Directive(Directive { span, kind })),
            Err(kind) => self.fail(error(&span, kind), Some(name)),
        }
    }

    /// Reads the files an `Include` (or `IncludeOptional`, `name`) names and splices
    /// their directives in. A file that fails is reported and skipped; the others
    /// are read.
    fn include(&mut self, name: &'static str, pattern: &str, span: &Span) -> ControlFlow<()> {
        let optional = name == "IncludeOptional";
        if self.open.len() >= MAX_INCLUDE_DEPTH {
            return self.fail(
                error(span, ParseErrorKind::IncludeDepth(MAX_INCLUDE_DEPTH)),
                Some(name),
            );
        }
        let base = span.file.parent().unwrap_or(Path::new(""));
        // Joining drops interior `.` components; an absolute pattern replaces `base`.
        let path: PathBuf = base.join(pattern).components().collect();
        let files = if is_glob(pattern) {
            let mut files = match self.source.glob(&path) {
                Ok(files) => files,
                Err(e) => return self.fail(io_error(span, &path, &e), Some(name)),
            };
            files.sort();
            if files.is_empty() && !optional {
                let kind = ParseErrorKind::Io {
                    path,
                    reason: "no file matches the pattern".to_owned(),
                };
                return self.fail(error(span, kind), Some(name));
            }
            files
        } else {
            vec![path]
        };
        for file in files {
            let key = normalize(&file);
            if self.open.contains(&key) {
                self.fail(error(span, ParseErrorKind::IncludeLoop(file)), Some(name))?;
                continue;
            }
            let bytes = match self.source.read(&file) {
                Ok(bytes) => bytes,
                Err(e) if optional && e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => {
                    self.fail(io_error(span, &file, &e), Some(name))?;
                    continue;
                }
            };
            let file = Arc::new(file);
            let text = match decode(bytes, &file) {
                Ok(text) => text,
                Err(e) => {
                    self.fail(e, Some(name))?;
                    continue;
                }
            };
            self.open.push(key);
            let flow = self.parse_text(&text, &file);
            self.open.pop();
            flow?;
        }
        ControlFlow::Continue(())
    }
}

/// Builds the syntax tree of a directive other than `Include`, from its canonical name
/// and its arguments (whose count has been checked).
fn build(name: &'static str, args: Vec<Cow<'_, str>>) -> Result<DirectiveKind, ParseErrorKind> {
    let kind = match (name, args.as_slice()) {
        ("SecRule", [variables, operator, rest @ ..]) => DirectiveKind::Rule(RuleDef {
            variables: parse_variables(variables)?,
            operator: parse_operator(operator),
            actions: match rest.first() {
                Some(actions) => parse_actions(actions)?,
                None => Vec::new(),
            },
        }),
        ("SecAction", [actions]) => DirectiveKind::Action(parse_actions(actions)?),
        ("SecDefaultAction", [actions]) => DirectiveKind::DefaultAction(parse_actions(actions)?),
        ("SecMarker", [marker]) => DirectiveKind::Marker(marker.to_string()),
        ("SecRuleRemoveById", ids) => {
            let mut ranges = Vec::new();
            for arg in ids {
                ranges.extend(parse_id_list(arg)?);
            }
            DirectiveKind::RuleRemove(RuleSelector::Ids(ranges))
        }
        ("SecRuleRemoveByTag", [tag]) => {
            DirectiveKind::RuleRemove(RuleSelector::Tag(tag.to_string()))
        }
        ("SecRuleRemoveByMsg", [msg]) => {
            DirectiveKind::RuleRemove(RuleSelector::Msg(msg.to_string()))
        }
        ("SecRuleUpdateTargetById", _) => {
            // Leading arguments that read as ids name the rules; at least one argument
            // after them is the target list.
            let id_args = args
                .iter()
                .take(args.len().saturating_sub(1))
                .take_while(|a| looks_like_id_list(a))
                .count()
                .max(1);
            let (ids, rest) = args.split_at(id_args.min(args.len()));
            let mut ranges = Vec::new();
            for arg in ids {
                ranges.extend(parse_id_list(arg)?);
            }
            update_target(name, RuleSelector::Ids(ranges), rest, args.len())?
        }
        ("SecRuleUpdateTargetByTag", [tag, rest @ ..]) => {
            update_target(name, RuleSelector::Tag(tag.to_string()), rest, args.len())?
        }
        ("SecRuleUpdateTargetByMsg", [msg, rest @ ..]) => {
            update_target(name, RuleSelector::Msg(msg.to_string()), rest, args.len())?
        }
        ("SecRuleUpdateActionById", [id, actions]) => {
            let id = match parse_id_list(id)?.as_slice() {
                [range] if range.start == range.end => range.start,
                _ => return Err(ParseErrorKind::BadId(id.to_string())),
            };
            DirectiveKind::RuleUpdateAction {
                id,
                actions: parse_actions(actions)?,
            }
        }
        _ => DirectiveKind::Setting {
            name: name.to_owned(),
            args: args.into_iter().map(Cow::into_owned).collect(),
        },
    };
    Ok(kind)
}

/// The `SecRuleUpdateTarget*` tree from the arguments after the rule selector:
/// the targets, then optionally the replaced target.
fn update_target(
    name: &'static str,
    selector: RuleSelector,
    rest: &[Cow<'_, str>],
    total: usize,
) -> Result<DirectiveKind, ParseErrorKind> {
    match rest {
        [targets] | [targets, _] => Ok(DirectiveKind::RuleUpdateTarget {
            selector,
            targets: parse_variables(targets)?,
            replaced: rest.get(1).map(|r| parse_variables(r)).transpose()?,
        }),
        _ => Err(ParseErrorKind::ArgumentCount {
            directive: name.to_owned(),
            expected: "rule ids, then targets and an optional replaced target",
            got: total,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ast::{ActionDef, IdRange, OperatorDef, Selector, VariableDef};
    use crate::source::MemorySource;

    fn parse(text: &str) -> Vec<Directive> {
        match parse_str(text, "test.conf") {
            Ok(dirs) => dirs,
            Err(e) => panic!("parse failed: {e}"),
        }
    }

    fn parse_err(text: &str) -> ParseError {
        match parse_str(text, "test.conf") {
            Ok(dirs) => panic!("expected an error, got {dirs:?}"),
            Err(e) => e,
        }
    }

    fn kinds(text: &str) -> Vec<DirectiveKind> {
        parse(text).into_iter().map(|d| d.kind).collect()
    }

    fn act(name: &str, value: Option<&str>) -> ActionDef {
        ActionDef {
            name: name.to_owned(),
            value: value.map(str::to_owned),
        }
    }

    fn ids(list: &[(i64, i64)]) -> RuleSelector {
        RuleSelector::Ids(
            list.iter()
                .map(|&(start, end)| IdRange { start, end })
                .collect(),
        )
    }

    #[test]
    fn crs_style_rule_with_continuations() {
        let text = "\n# comment\nSecRule REQUEST_HEADERS:User-Agent|ARGS:/^(a|b)$/ \"@rx (?i)foo\\\"bar\" \\\n    \"id:920100,\\\n    phase:1,\\\n    block,\\\n    msg:'Invalid HTTP Request Line, really',\\\n    logdata:'%{request_line}',\\\n    setvar:'tx.inbound_anomaly_score_pl1=+%{tx.warning_anomaly_score}'\"\nSecMarker \"END\"\n";
        let dirs = parse(text);
        assert_eq!(dirs.len(), 2);
        assert_eq!(dirs[0].span.to_string(), "test.conf:3:1");
        assert_eq!(dirs[1].span.line, 10);
        let DirectiveKind::Rule(rule) = &dirs[0].kind else {
            panic!("not a rule: {:?}", dirs[0].kind);
        };
        assert_eq!(
            rule.variables,
            vec![
                VariableDef {
                    count: false,
                    exclude: false,
                    name: "REQUEST_HEADERS".to_owned(),
                    selector: Some(Selector::Key("User-Agent".to_owned())),
                },
                VariableDef {
                    count: false,
                    exclude: false,
                    name: "ARGS".to_owned(),
                    selector: Some(Selector::Regex("^(a|b)$".to_owned())),
                },
            ]
        );
        assert_eq!(
            rule.operator,
            OperatorDef {
                negated: false,
                name: "rx".to_owned(),
                argument: "(?i)foo\"bar".to_owned(),
            }
        );
        assert_eq!(
            rule.actions,
            vec![
                act("id", Some("920100")),
                act("phase", Some("1")),
                act("block", None),
                act("msg", Some("Invalid HTTP Request Line, really")),
                act("logdata", Some("%{request_line}")),
                act(
                    "setvar",
                    Some("tx.inbound_anomaly_score_pl1=+%{tx.warning_anomaly_score}")
                ),
            ]
        );
        assert_eq!(dirs[1].kind, DirectiveKind::Marker("END".to_owned()));
    }

    #[test]
    fn escaped_quote_and_backslashes_in_operator() {
        let dirs = kinds(r#"SecRule ARGS "@rx \d+\"\x5c" "id:1""#);
        let DirectiveKind::Rule(rule) = &dirs[0] else {
            panic!("not a rule");
        };
        assert_eq!(rule.operator.argument, r#"\d+"\x5c"#);
    }

    #[test]
    fn rule_without_actions_and_negated_operator() {
        let dirs = kinds("SecRule &TX:x \"!@eq 0\"\nSecRule ARGS ^foo$ id:3");
        let DirectiveKind::Rule(rule) = &dirs[0] else {
            panic!("not a rule");
        };
        assert!(rule.actions.is_empty());
        assert!(rule.variables[0].count);
        assert!(rule.operator.negated);
        assert_eq!(
            (rule.operator.name.as_str(), rule.operator.argument.as_str()),
            ("eq", "0")
        );
        let DirectiveKind::Rule(rule) = &dirs[1] else {
            panic!("not a rule");
        };
        assert_eq!(
            (rule.operator.name.as_str(), rule.operator.argument.as_str()),
            ("rx", "^foo$")
        );
        assert_eq!(rule.actions, vec![act("id", Some("3"))]);
    }

    #[test]
    fn actions_markers_and_defaults() {
        let got = kinds(
            "SecAction \"id:900990,phase:1,pass,t:none,nolog,setvar:tx.crs_setup_version=4280\"\n\
             SecMarker 'END-HOST-CHECK'\n\
             SecMarker END-2\n\
             SecDefaultAction \"phase:2,log,auditlog,pass\"\n",
        );
        assert_eq!(
            got,
            vec![
                DirectiveKind::Action(vec![
                    act("id", Some("900990")),
                    act("phase", Some("1")),
                    act("pass", None),
                    act("t", Some("none")),
                    act("nolog", None),
                    act("setvar", Some("tx.crs_setup_version=4280")),
                ]),
                DirectiveKind::Marker("END-HOST-CHECK".to_owned()),
                DirectiveKind::Marker("END-2".to_owned()),
                DirectiveKind::DefaultAction(vec![
                    act("phase", Some("2")),
                    act("log", None),
                    act("auditlog", None),
                    act("pass", None),
                ]),
            ]
        );
    }

    #[test]
    fn settings_use_canonical_names() {
        let got = kinds(
            "secruleengine DetectionOnly\n\
             SECREQUESTBODYLIMIT 13107200\n\
             SecResponseBodyMimeType text/plain text/html \"text/xml\"\n\
             SecResponseBodyMimeTypesClear\n\
             SecUnicodeMapFile unicode.mapping 20127\n\
             SecComponentSignature \"OWASP_CRS/4.28.0\"\n",
        );
        let setting = |name: &str, args: &[&str]| DirectiveKind::Setting {
            name: name.to_owned(),
            args: args.iter().map(|s| (*s).to_owned()).collect(),
        };
        assert_eq!(
            got,
            vec![
                setting("SecRuleEngine", &["DetectionOnly"]),
                setting("SecRequestBodyLimit", &["13107200"]),
                setting(
                    "SecResponseBodyMimeType",
                    &["text/plain", "text/html", "text/xml"]
                ),
                setting("SecResponseBodyMimeTypesClear", &[]),
                setting("SecUnicodeMapFile", &["unicode.mapping", "20127"]),
                setting("SecComponentSignature", &["OWASP_CRS/4.28.0"]),
            ]
        );
    }

    #[test]
    fn argument_counts_are_checked() {
        let e = parse_err("SecRuleEngine On Off");
        assert_eq!(
            e.kind,
            ParseErrorKind::ArgumentCount {
                directive: "SecRuleEngine".to_owned(),
                expected: "1 argument",
                got: 2,
            }
        );
        assert_eq!(
            e.to_string(),
            "test.conf:1:1: SecRuleEngine: expected 1 argument, got 2 argument(s)"
        );
        for text in [
            "SecRule ARGS",
            "SecRule ARGS \"@rx a\" \"id:1\" extra",
            "SecAction",
            "SecMarker",
            "SecMarker a b",
            "SecResponseBodyMimeTypesClear x",
            "SecResponseBodyMimeType",
            "SecRuleRemoveById",
            "SecRuleUpdateActionById 1",
            "SecRuleUpdateTargetById 1",
            "Include",
        ] {
            let e = parse_err(text);
            assert!(
                matches!(e.kind, ParseErrorKind::ArgumentCount { .. }),
                "{text}: {e}"
            );
        }
    }

    #[test]
    fn unknown_directive_error_text() {
        let e = parse_err("SecRuleEngine On\n\n  SecFoo bar\n");
        assert_eq!(
            e.kind,
            ParseErrorKind::UnknownDirective("SecFoo".to_owned())
        );
        assert_eq!(e.to_string(), "test.conf:3:3: unknown directive \"SecFoo\"");
    }

    #[test]
    fn unterminated_quote_error_points_at_the_directive() {
        let e = parse_err("SecMarker A\nSecRule ARGS \"@rx a \\\n  id:1\n");
        assert_eq!(e.kind, ParseErrorKind::UnterminatedQuote);
        assert_eq!(e.to_string(), "test.conf:2:1: unterminated quoted string");
        let e = parse_err("SecAction 'id:1");
        assert_eq!(e.kind, ParseErrorKind::UnterminatedQuote);
    }

    #[test]
    fn bad_parts_carry_the_span() {
        let e = parse_err("\nSecRule ARGS|| \"@rx a\" \"id:1\"");
        assert!(matches!(e.kind, ParseErrorKind::BadVariable(_)), "{e}");
        assert_eq!(e.span.line, 2);
        let e = parse_err("SecAction \"id:1,msg:'x'y\"");
        assert!(matches!(e.kind, ParseErrorKind::BadAction(_)), "{e}");
        let e = parse_err("SecRuleRemoveById 1 x");
        assert_eq!(e.kind, ParseErrorKind::BadId("x".to_owned()));
    }

    #[test]
    fn rule_removal() {
        assert_eq!(
            kinds(
                "SecRuleRemoveById 1 2 100-200\n\
                 SecRuleRemoveById \"300 301,302\"\n\
                 SecRuleRemoveByTag attack-sqli\n\
                 SecRuleRemoveByMsg 'SQL Injection Attack'\n"
            ),
            vec![
                DirectiveKind::RuleRemove(ids(&[(1, 1), (2, 2), (100, 200)])),
                DirectiveKind::RuleRemove(ids(&[(300, 300), (301, 301), (302, 302)])),
                DirectiveKind::RuleRemove(RuleSelector::Tag("attack-sqli".to_owned())),
                DirectiveKind::RuleRemove(RuleSelector::Msg("SQL Injection Attack".to_owned())),
            ]
        );
    }

    fn targets(text: &str) -> Vec<VariableDef> {
        match parse_variables(text) {
            Ok(v) => v,
            Err(e) => panic!("{text}: {e}"),
        }
    }

    #[test]
    fn rule_target_updates() {
        let got = kinds(
            "SecRuleUpdateTargetById 942100 \"!ARGS:foo\"\n\
             SecRuleUpdateTargetById 942100 942200 942300-942310 \"!ARGS:/^(a|b)$/|!ARGS:c\"\n\
             SecRuleUpdateTargetById 1 ARGS:new ARGS:old\n\
             SecRuleUpdateTargetByTag attack-xss \"!REQUEST_COOKIES:x\"\n\
             SecRuleUpdateTargetByMsg 'Some message' !ARGS:y ARGS\n",
        );
        assert_eq!(
            got,
            vec![
                DirectiveKind::RuleUpdateTarget {
                    selector: ids(&[(942100, 942100)]),
                    targets: targets("!ARGS:foo"),
                    replaced: None,
                },
                DirectiveKind::RuleUpdateTarget {
                    selector: ids(&[(942100, 942100), (942200, 942200), (942300, 942310)]),
                    targets: targets("!ARGS:/^(a|b)$/|!ARGS:c"),
                    replaced: None,
                },
                DirectiveKind::RuleUpdateTarget {
                    selector: ids(&[(1, 1)]),
                    targets: targets("ARGS:new"),
                    replaced: Some(targets("ARGS:old")),
                },
                DirectiveKind::RuleUpdateTarget {
                    selector: RuleSelector::Tag("attack-xss".to_owned()),
                    targets: targets("!REQUEST_COOKIES:x"),
                    replaced: None,
                },
                DirectiveKind::RuleUpdateTarget {
                    selector: RuleSelector::Msg("Some message".to_owned()),
                    targets: targets("!ARGS:y"),
                    replaced: Some(targets("ARGS")),
                },
            ]
        );
        let e = parse_err("SecRuleUpdateTargetById 1 ARGS:a ARGS:b ARGS:c");
        assert_eq!(
            e.kind,
            ParseErrorKind::ArgumentCount {
                directive: "SecRuleUpdateTargetById".to_owned(),
                expected: "rule ids, then targets and an optional replaced target",
                got: 4,
            }
        );
        let e = parse_err("SecRuleUpdateTargetById abc ARGS");
        assert_eq!(e.kind, ParseErrorKind::BadId("abc".to_owned()));
    }

    #[test]
    fn rule_action_updates() {
        assert_eq!(
            kinds("SecRuleUpdateActionById 942100 \"t:none,t:lowercase,msg:'a, b'\""),
            vec![DirectiveKind::RuleUpdateAction {
                id: 942100,
                actions: vec![
                    act("t", Some("none")),
                    act("t", Some("lowercase")),
                    act("msg", Some("a, b"))
                ],
            }]
        );
        for bad in ["1:2", "1-5", "x"] {
            let e = parse_err(&format!("SecRuleUpdateActionById {bad} \"pass\""));
            assert!(matches!(e.kind, ParseErrorKind::BadId(_)), "{bad}: {e}");
        }
    }

    fn memory(files: &[(&str, &str)]) -> MemorySource {
        let mut source = MemorySource::new();
        for (path, content) in files {
            source.insert(*path, content.as_bytes());
        }
        source
    }

    fn markers(dirs: &[Directive]) -> Vec<(String, String)> {
        dirs.iter()
            .map(|d| match &d.kind {
                DirectiveKind::Marker(m) => (m.clone(), d.span.to_string()),
                other => (format!("{other:?}"), d.span.to_string()),
            })
            .collect()
    }

    #[test]
    fn include_glob_is_sorted_and_spliced_in_place() {
        let source = memory(&[
            ("/waf/rules/b.conf", "SecMarker B1\n\nSecMarker B2\n"),
            ("/waf/rules/a.conf", "# first\nSecMarker A\n"),
            ("/waf/rules/c.data", "SecMarker NOT-INCLUDED\n"),
            ("/waf/setup.conf", "SecMarker SETUP\n"),
        ]);
        let main =
            "SecMarker BEFORE\nInclude setup.conf\n  include \"rules/*.conf\"\nSecMarker AFTER\n";
        let dirs = parse_source(&source, main, Path::new("/waf/main.conf")).unwrap();
        assert_eq!(
            markers(&dirs),
            vec![
                ("BEFORE".to_owned(), "/waf/main.conf:1:1".to_owned()),
                ("SETUP".to_owned(), "/waf/setup.conf:1:1".to_owned()),
                ("A".to_owned(), "/waf/rules/a.conf:2:1".to_owned()),
                ("B1".to_owned(), "/waf/rules/b.conf:1:1".to_owned()),
                ("B2".to_owned(), "/waf/rules/b.conf:3:1".to_owned()),
                ("AFTER".to_owned(), "/waf/main.conf:4:1".to_owned()),
            ]
        );
    }

    #[test]
    fn nested_includes_resolve_relative_to_the_including_file() {
        let source = memory(&[
            ("/etc/waf/main.conf", "Include ./crs/setup.conf\n"),
            (
                "/etc/waf/crs/setup.conf",
                "Include rules/x.conf\nInclude /abs/y.conf\n",
            ),
            ("/etc/waf/crs/rules/x.conf", "SecMarker X\n"),
            ("/abs/y.conf", "SecMarker Y\n"),
        ]);
        let dirs = parse_file(&source, Path::new("/etc/waf/main.conf")).unwrap();
        assert_eq!(
            markers(&dirs),
            vec![
                ("X".to_owned(), "/etc/waf/crs/rules/x.conf:1:1".to_owned()),
                ("Y".to_owned(), "/abs/y.conf:1:1".to_owned()),
            ]
        );
    }

    #[test]
    fn error_span_points_into_the_included_file() {
        let source = memory(&[
            ("/w/inc/a.conf", "SecMarker OK\n# c\n\n    SecBogus 1\n"),
            ("/w/main.conf", "SecMarker M\nInclude inc/*.conf\n"),
        ]);
        let e = parse_file(&source, Path::new("/w/main.conf")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "/w/inc/a.conf:4:5: unknown directive \"SecBogus\""
        );
    }

    #[test]
    fn missing_includes() {
        let source = memory(&[("/w/a.conf", "SecMarker A\n")]);
        let parse = |text: &str| parse_source(&source, text, Path::new("/w/main.conf"));

        let e = parse("SecMarker X\nInclude missing.conf").unwrap_err();
        assert_eq!(e.span.line, 2);
        assert!(
            matches!(&e.kind, ParseErrorKind::Io { path, .. } if path == Path::new("/w/missing.conf")),
            "{e}"
        );
        let e = parse("Include nothing/*.conf").unwrap_err();
        assert_eq!(
            e.to_string(),
            "/w/main.conf:1:1: cannot read /w/nothing/*.conf: no file matches the pattern"
        );

        let dirs = parse(
            "IncludeOptional missing.conf\nIncludeOptional none/*.conf\nIncludeOptional a.conf",
        )
        .unwrap();
        assert_eq!(dirs.len(), 1);
        assert_eq!(dirs[0].kind, DirectiveKind::Marker("A".to_owned()));

        let e = parse_file(&source, Path::new("/w/none.conf")).unwrap_err();
        assert!(matches!(e.kind, ParseErrorKind::Io { .. }), "{e}");
    }

    #[test]
    fn include_loops_are_detected() {
        let source = memory(&[
            ("/w/a.conf", "SecMarker A\nInclude b.conf\n"),
            ("/w/b.conf", "Include ../w/./a.conf\n"),
            ("/w/self.conf", "Include self.conf\n"),
        ]);
        let e = parse_file(&source, Path::new("/w/a.conf")).unwrap_err();
        assert_eq!(e.span.to_string(), "/w/b.conf:1:1");
        assert!(matches!(e.kind, ParseErrorKind::IncludeLoop(_)), "{e}");
        let e = parse_file(&source, Path::new("/w/self.conf")).unwrap_err();
        assert!(matches!(e.kind, ParseErrorKind::IncludeLoop(_)), "{e}");
    }

    #[test]
    fn include_depth_is_limited() {
        let mut source = MemorySource::new();
        for i in 0..40 {
            source.insert(format!("/d/{i}.conf"), format!("Include {}.conf\n", i + 1));
        }
        let e = parse_file(&source, Path::new("/d/0.conf")).unwrap_err();
        assert_eq!(e.kind, ParseErrorKind::IncludeDepth(MAX_INCLUDE_DEPTH));
        assert_eq!(e.span.file.as_path(), Path::new("/d/15.conf"));

        // A chain just inside the limit parses.
        let mut source = MemorySource::new();
        for i in 0..MAX_INCLUDE_DEPTH - 1 {
            source.insert(format!("/d/{i}.conf"), format!("Include {}.conf\n", i + 1));
        }
        source.insert(
            format!("/d/{}.conf", MAX_INCLUDE_DEPTH - 1),
            "SecMarker DEEP\n",
        );
        let dirs = parse_file(&source, Path::new("/d/0.conf")).unwrap();
        assert_eq!(dirs.len(), 1);
    }

    /// Every item of a recovering parse of `text` (as `/w/main.conf`).
    fn parse_each(source: &MemorySource, text: &str) -> (Vec<Directive>, Vec<Failure>) {
        let (mut dirs, mut fails) = (Vec::new(), Vec::new());
        parse_source_each(source, text, Path::new("/w/main.conf"), &mut |item| {
            match item {
                Parsed::Directive(d) => dirs.push(d),
                Parsed::Failed(f) => fails.push(f),
            }
            ControlFlow::Continue(())
        });
        (dirs, fails)
    }

    fn failure_lines(fails: &[Failure]) -> Vec<(String, Option<&'static str>)> {
        fails
            .iter()
            .map(|f| (f.error.to_string(), f.directive))
            .collect()
    }

    #[test]
    fn a_recovering_parse_reports_every_bad_directive_and_keeps_the_good_ones() {
        let text = "SecMarker A\n\
                    SecFoo 1\n\
                    SecRule ARGS \"@rx a\" \"id:1,msg:'x'y\"\n\
                    SecMarker B\n\
                    SecRuleEngine On \\\n  Off\n\
                    SecAction 'id:2\n\
                    SecMarker C\n";
        let (dirs, fails) = parse_each(&MemorySource::new(), text);
        let names: Vec<_> = markers(&dirs).into_iter().map(|(m, _)| m).collect();
        assert_eq!(names, ["A", "B", "C"]);
        assert_eq!(
            failure_lines(&fails),
            [
                (
                    "/w/main.conf:2:1: unknown directive \"SecFoo\"".to_owned(),
                    None
                ),
                (
                    "/w/main.conf:3:1: bad action list: unexpected text after the quoted value of action \"msg\"".to_owned(),
                    Some("SecRule")
                ),
                (
                    "/w/main.conf:5:1: SecRuleEngine: expected 1 argument, got 2 argument(s)"
                        .to_owned(),
                    Some("SecRuleEngine")
                ),
                (
                    "/w/main.conf:7:1: unterminated quoted string".to_owned(),
                    Some("SecAction")
                ),
            ]
        );
        // The stopping parse gives the first of them.
        let e = parse_source(&MemorySource::new(), text, Path::new("/w/main.conf")).unwrap_err();
        assert_eq!(e.to_string(), failure_lines(&fails)[0].0);
    }

    #[test]
    fn a_recovering_parse_skips_the_include_files_that_fail_and_reads_the_others() {
        let mut source = memory(&[
            ("/w/inc/a.conf", "SecMarker A1\nSecBogus x\nSecMarker A2\n"),
            ("/w/inc/c.conf", "SecMarker C\nInclude ../main.conf\n"),
            ("/w/main.conf", "SecMarker NEVER\n"),
        ]);
        source.insert("/w/inc/b.conf", b"SecMarker B\n\xff\n".to_vec());
        let text = "Include missing.conf\n\
                    Include inc/*.conf\n\
                    Include nothing/*.conf\n\
                    IncludeOptional nothing/*.conf\n\
                    SecMarker END\n";
        let (dirs, fails) = parse_each(&source, text);
        let names: Vec<_> = markers(&dirs).into_iter().map(|(m, _)| m).collect();
        assert_eq!(names, ["A1", "A2", "C", "END"]);
        let got = failure_lines(&fails);
        assert_eq!(got.len(), 5, "{got:#?}");
        assert!(
            got[0]
                .0
                .starts_with("/w/main.conf:1:1: cannot read /w/missing.conf"),
            "{got:?}"
        );
        assert_eq!(got[0].1, Some("Include"));
        assert_eq!(
            got[1],
            (
                "/w/inc/a.conf:2:1: unknown directive \"SecBogus\"".to_owned(),
                None
            )
        );
        assert_eq!(
            got[2],
            (
                "/w/inc/b.conf:2:1: cannot read /w/inc/b.conf: the file is not valid UTF-8"
                    .to_owned(),
                Some("Include")
            )
        );
        assert_eq!(
            got[3],
            (
                "/w/inc/c.conf:2:1: include loop: /w/inc/../main.conf includes itself".to_owned(),
                Some("Include")
            )
        );
        assert_eq!(
            got[4],
            (
                "/w/main.conf:3:1: cannot read /w/nothing/*.conf: no file matches the pattern"
                    .to_owned(),
                Some("Include")
            )
        );
    }

    #[test]
    fn a_recovering_parse_stops_when_told_and_reports_an_unreadable_file() {
        let text = "SecFoo 1\nSecMarker A\nSecBar 2\n";
        let mut seen = Vec::new();
        parse_source_each(
            &MemorySource::new(),
            text,
            Path::new("m.conf"),
            &mut |item| {
                seen.push(format!("{item:?}").chars().take(9).collect::<String>());
                ControlFlow::Break(())
            },
        );
        assert_eq!(seen, ["Failed(Fa"]);

        let mut fails = Vec::new();
        parse_file_each(
            &MemorySource::new(),
            Path::new("/w/none.conf"),
            &mut |item| {
                if let Parsed::Failed(f) = item {
                    fails.push(f);
                }
                ControlFlow::Continue(())
            },
        );
        assert_eq!(fails.len(), 1);
        assert_eq!(fails[0].directive, None);
        assert!(matches!(fails[0].error.kind, ParseErrorKind::Io { .. }));
    }

    #[test]
    fn byte_order_mark_in_text() {
        let dirs = parse("\u{feff}SecMarker A\n");
        assert_eq!(dirs[0].kind, DirectiveKind::Marker("A".to_owned()));
    }

    #[test]
    fn non_utf8_and_bom() {
        let mut source = MemorySource::new();
        source.insert("/w/bad.conf", b"SecMarker A\nSecMarker \xff\n".to_vec());
        source.insert("/w/bom.conf", b"\xEF\xBB\xBFSecMarker A\n".to_vec());
        let e = parse_file(&source, Path::new("/w/bad.conf")).unwrap_err();
        assert_eq!(e.span.to_string(), "/w/bad.conf:2:11");
        let dirs = parse_file(&source, Path::new("/w/bom.conf")).unwrap();
        assert_eq!(dirs[0].span.column, 1);
    }

    #[test]
    fn normalize_paths() {
        assert_eq!(
            normalize(Path::new("/a/./b/../c.conf")),
            Path::new("/a/c.conf")
        );
        assert_eq!(normalize(Path::new("../x/../y")), Path::new("../y"));
        assert_eq!(normalize(Path::new("/../x")), Path::new("/x"));
    }

    /// A small deterministic generator, so the garbage tests are reproducible.
    struct Lcg(u64);

    impl Lcg {
        fn next(&mut self) -> u8 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 33) as u8
        }
    }

    #[test]
    fn garbage_input_never_panics() {
        let source = memory(&[("/g/x.conf", "SecMarker X\n")]);
        let alphabet: &[u8] = b"SecRule ARGS|:/'\"\\\n\t,@!&#-_0123456789Include x.conf*?[]";
        let mut rng = Lcg(42);
        for round in 0..3000 {
            let len = usize::from(rng.next()) % 120;
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    let r = rng.next();
                    if round % 3 == 0 {
                        r
                    } else {
                        alphabet[usize::from(r) % alphabet.len()]
                    }
                })
                .collect();
            let text = String::from_utf8_lossy(&bytes);
            let _ = parse_source(&source, &text, Path::new("/g/main.conf"));
            let directive = format!("SecRule {text}");
            let _ = parse_source(&source, &directive, Path::new("/g/main.conf"));
            let _ = parse_source(&source, &format!("SecAction \"{text}\""), Path::new("/g/m"));
        }
    }

    #[test]
    fn odd_inputs() {
        let source = MemorySource::new();
        let parse = |text: &str| parse_source(&source, text, Path::new("odd.conf"));
        for text in [
            "",
            "\\",
            "\\\n\\\n",
            "\"",
            "'",
            "SecRule \"",
            "SecRule ARGS \"@rx",
            "SecRule ARGS '",
            "SecAction \"id:1,msg:'\"",
            "\u{feff}",
            "SecMarker \\",
            "SecRule A B \\",
            "\"SecMarker\" x",
            "SecRule ARGS:/ \"\"",
            "SecRule ARGS:/\\",
            "SecRule :",
            "SecRule ARGS \"@\"",
            "Include [",
            "SecRuleRemoveById 1-",
            "SecRuleRemoveById -",
            "é \u{2028} ü",
            "SecRule é \"@rx é\" \"msg:'é',tag:é\"",
        ] {
            let _ = parse(text);
        }
        assert!(parse("\\").unwrap().is_empty());
        assert!(parse("SecMarker A \\").is_ok());
        assert!(parse("\"").is_err());
        assert!(parse("SecRule A B \\").is_ok());
    }
}
