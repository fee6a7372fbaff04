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
/// `name`; included files are read through `source`.
pub fn parse_source(
    source: &dyn FileSource,
    text: &str,
    name: &Path,
) -> Result<Vec<Directive>, ParseError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut parser = Parser::new(source);
    parser.open.push(normalize(name));
    parser.parse_text(text, &Arc::new(name.to_path_buf()))?;
    Ok(parser.out)
}

/// Reads and parses a file and everything it includes.
pub fn parse_file(source: &dyn FileSource, path: &Path) -> Result<Vec<Directive>, ParseError> {
    let file = Arc::new(path.to_path_buf());
    let whole_file = Span {
        file: Arc::clone(&file),
        line: 1,
        column: 1,
    };
    let bytes = source
        .read(path)
        .map_err(|e| io_error(&whole_file, path, &e))?;
    let text = decode(bytes, &file)?;
    let mut parser = Parser::new(source);
    parser.open.push(normalize(path));
    parser.parse_text(&text, &file)?;
    Ok(parser.out)
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

struct Parser<'s> {
    source: &'s dyn FileSource,
    /// Normalized paths of the files being read, outermost first.
    open: Vec<PathBuf>,
    out: Vec<Directive>,
}

impl<'s> Parser<'s> {
    fn new(source: &'s dyn FileSource) -> Self {
        Self {
            source,
            open: Vec::new(),
            out: Vec::new(),
        }
    }

    fn parse_text(&mut self, text: &str, file: &Arc<PathBuf>) -> Result<(), ParseError> {
        for line in LogicalLines::new(text) {
            let span = Span {
                file: Arc::clone(file),
                line: line.line,
                column: line.column,
            };
            self.directive(&line.text, span)?;
        }
        Ok(())
    }

    /// Parses one directive and appends it (or the directives it includes) to the output.
    fn directive(&mut self, text: &str, span: Span) -> Result<(), ParseError> {
        let mut args = split_args(text).map_err(|kind| error(&span, kind))?;
        if args.is_empty() {
            return Ok(());
        }
        let written = args.remove(0).into_owned();
        let Some((name, arity)) = directives::lookup(&written) else {
            return Err(error(&span, ParseErrorKind::UnknownDirective(written)));
        };
        if !arity.accepts(args.len()) {
            return Err(error(
                &span,
                ParseErrorKind::ArgumentCount {
                    directive: name.to_owned(),
                    expected: arity.describe,
                    got: args.len(),
                },
            ));
        }
        if name == "Include" || name == "IncludeOptional" {
            let pattern = args.first().map_or("", |a| a.as_ref());
            return self.include(pattern, name == "IncludeOptional", &span);
        }
        let kind = build(name, args).map_err(|kind| error(&span, kind))?;
        self.out.push(Directive { span, kind });
        Ok(())
    }

    /// Reads the files an `Include` names and splices their directives in.
    fn include(&mut self, pattern: &str, optional: bool, span: &Span) -> Result<(), ParseError> {
        if self.open.len() >= MAX_INCLUDE_DEPTH {
            return Err(error(span, ParseErrorKind::IncludeDepth(MAX_INCLUDE_DEPTH)));
        }
        let base = span.file.parent().unwrap_or(Path::new(""));
        // Joining drops interior `.` components; an absolute pattern replaces `base`.
        let path: PathBuf = base.join(pattern).components().collect();
        let files = if is_glob(pattern) {
            let mut files = self
                .source
                .glob(&path)
                .map_err(|e| io_error(span, &path, &e))?;
            files.sort();
            if files.is_empty() && !optional {
                return Err(error(
                    span,
                    ParseErrorKind::Io {
                        path,
                        reason: "no file matches the pattern".to_owned(),
                    },
                ));
            }
            files
        } else {
            vec![path]
        };
        for file in files {
            let key = normalize(&file);
            if self.open.contains(&key) {
                return Err(error(span, ParseErrorKind::IncludeLoop(file)));
            }
            let bytes = match self.source.read(&file) {
                Ok(bytes) => bytes,
                Err(e) if optional && e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io_error(span, &file, &e)),
            };
            let file = Arc::new(file);
            let text = decode(bytes, &file)?;
            self.open.push(key);
            let result = self.parse_text(&text, &file);
            self.open.pop();
            result?;
        }
        Ok(())
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
