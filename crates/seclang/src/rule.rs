//! The parts of a rule: its variable list, its operator, its action list, and the
//! rule id lists used by removal and update directives.
//!
//! These functions take one argument of a directive, already unquoted, and are public
//! so that the engine can parse the same syntax where it appears inside actions (for
//! example the target of `ctl:ruleRemoveTargetById=942100;ARGS:foo`).

use crate::ast::{ActionDef, IdRange, OperatorDef, Selector, VariableDef};
use crate::error::ParseErrorKind;
use crate::lexer::read_quoted;

/// True for the blanks allowed around list items.
fn is_blank(b: u8) -> bool {
    b.is_ascii_whitespace()
}

fn skip_blanks(bytes: &[u8], mut i: usize) -> usize {
    while i < bytes.len() && is_blank(bytes[i]) {
        i += 1;
    }
    i
}

/// True when only blanks separate `i` from the end of `bytes` or from a `|`.
fn at_target_end(bytes: &[u8], i: usize) -> bool {
    let j = skip_blanks(bytes, i);
    j >= bytes.len() || bytes[j] == b'|'
}

/// Parses a rule's variable list, such as `ARGS|!ARGS:foo|&TX:bar|ARGS:/^(a|b)$/`.
///
/// Targets are separated by `|`, except inside a `/regex/` selector or a quoted
/// `'key'` selector. Names are upper-cased. The selector of the `XML` collection is an
/// XPath expression and is always kept as [`Selector::Key`].
pub fn parse_variables(text: &str) -> Result<Vec<VariableDef>, ParseErrorKind> {
    let bytes = text.as_bytes();
    let mut vars = Vec::new();
    let mut i = 0;
    loop {
        i = skip_blanks(bytes, i);
        let target_start = i;
        let (count, exclude) = match bytes.get(i) {
            Some(b'&') => {
                i += 1;
                (true, false)
            }
            Some(b'!') => {
                i += 1;
                (false, true)
            }
            _ => (false, false),
        };
        let name_start = i;
        while i < bytes.len() && bytes[i] != b':' && bytes[i] != b'|' {
            i += 1;
        }
        let name = text[name_start..i].trim();
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(bad_variable(text, target_start, i));
        }
        let name = name.to_ascii_uppercase();
        let mut selector = None;
        if bytes.get(i) == Some(&b':') {
            i += 1;
            let sel_start = skip_blanks(bytes, i);
            let (sel, end) = parse_selector(text, sel_start, name == "XML")
                .ok_or_else(|| bad_variable(text, target_start, bytes.len()))?;
            selector = Some(sel);
            i = end;
        }
        i = skip_blanks(bytes, i);
        vars.push(VariableDef {
            count,
            exclude,
            name,
            selector,
        });
        match bytes.get(i) {
            None => return Ok(vars),
            Some(b'|') => i += 1,
            Some(_) => return Err(bad_variable(text, target_start, bytes.len())),
        }
    }
}

/// The error for the target that starts at `start`, showing its text up to `end`
/// (or up to the next `|`).
fn bad_variable(text: &str, start: usize, end: usize) -> ParseErrorKind {
    let start = start.min(text.len());
    let end = end.clamp(start, text.len());
    let shown = text[start..end].trim();
    ParseErrorKind::BadVariable(if shown.is_empty() {
        text.trim().to_owned()
    } else {
        shown.to_owned()
    })
}

/// Parses the selector that starts at byte `start` (just after the colon). Returns the
/// selector and the index where the target ends (at a `|`, blanks or the end), or
/// `None` when the selector is empty or malformed.
fn parse_selector(text: &str, start: usize, xpath: bool) -> Option<(Selector, usize)> {
    let bytes = text.as_bytes();
    let plain_key = |start: usize| {
        let mut end = start;
        while end < bytes.len() && bytes[end] != b'|' {
            end += 1;
        }
        let key = text[start..end].trim();
        (!key.is_empty()).then(|| (Selector::Key(key.to_owned()), end))
    };
    match bytes.get(start) {
        None => None,
        Some(b'/') if !xpath => {
            // The regex ends at the first unescaped `/` that ends the target; a `/`
            // followed by anything else belongs to the regex.
            let mut i = start + 1;
            while i < bytes.len() {
                match bytes[i] {
                    b'\\' => i += 2,
                    b'/' if at_target_end(bytes, i + 1) => {
                        return Some((Selector::Regex(text[start + 1..i].to_owned()), i + 1));
                    }
                    _ => i += 1,
                }
            }
            // No closing slash: the text is an ordinary key, as ModSecurity v2 reads it.
            plain_key(start)
        }
        Some(b'\'') => {
            let (key, end) = read_quoted(text, start)?;
            at_target_end(bytes, end).then(|| (Selector::Key(key.into_owned()), end))
        }
        Some(_) => plain_key(start),
    }
}

/// Parses a rule's operator string, such as `@rx ^a`, `!@pm a b`, `@detectSQLi` or a
/// bare regular expression (which means `@rx`).
///
/// The argument is everything after the operator name and the blanks that follow it;
/// it may be empty.
pub fn parse_operator(text: &str) -> OperatorDef {
    let mut rest = text.trim_start();
    let negated = match rest.strip_prefix('!') {
        Some(r) => {
            rest = r.trim_start();
            true
        }
        None => false,
    };
    match rest.strip_prefix('@') {
        Some(op) => {
            let name_end = op
                .bytes()
                .position(|b| b.is_ascii_whitespace())
                .unwrap_or(op.len());
            OperatorDef {
                negated,
                name: op[..name_end].to_owned(),
                argument: op[name_end..].trim_start().to_owned(),
            }
        }
        None => OperatorDef {
            negated,
            name: "rx".to_owned(),
            argument: rest.to_owned(),
        },
    }
}

/// Parses an action list, such as `id:1,phase:2,t:none,msg:'a, b',setvar:'tx.x=+1'`.
///
/// Actions are separated by commas. A value after the first colon may be single-quoted,
/// and may then contain commas and colons, with `\'` for a quote; an unquoted value
/// runs to the next comma. Blanks around actions and values are trimmed, and empty
/// items (`a,,b`, a trailing comma) are skipped.
pub fn parse_actions(text: &str) -> Result<Vec<ActionDef>, ParseErrorKind> {
    let bytes = text.as_bytes();
    let mut actions = Vec::new();
    let mut i = 0;
    loop {
        i = skip_blanks(bytes, i);
        match bytes.get(i) {
            None => return Ok(actions),
            Some(b',') => {
                i += 1;
                continue;
            }
            Some(_) => {}
        }
        let name_start = i;
        while i < bytes.len() && bytes[i] != b':' && bytes[i] != b',' {
            i += 1;
        }
        let name = text[name_start..i].trim();
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(ParseErrorKind::BadAction(format!(
                "bad action name {name:?} in {:?}",
                text.trim()
            )));
        }
        let mut value = None;
        if bytes.get(i) == Some(&b':') {
            i = skip_blanks(bytes, i + 1);
            if bytes.get(i) == Some(&b'\'') {
                let (v, end) = read_quoted(text, i).ok_or(ParseErrorKind::UnterminatedQuote)?;
                i = skip_blanks(bytes, end);
                if i < bytes.len() && bytes[i] != b',' {
                    return Err(ParseErrorKind::BadAction(format!(
                        "unexpected text after the quoted value of action {name:?}"
                    )));
                }
                value = Some(v.into_owned());
            } else {
                let start = i;
                while i < bytes.len() && bytes[i] != b',' {
                    i += 1;
                }
                value = Some(text[start..i].trim_end().to_owned());
            }
        }
        actions.push(ActionDef {
            name: name.to_owned(),
            value,
        });
    }
}

/// Parses one rule id (`942100`) or an inclusive range (`942100-942999`).
pub fn parse_id_range(text: &str) -> Result<IdRange, ParseErrorKind> {
    let bad = || ParseErrorKind::BadId(text.to_owned());
    let number = |s: &str| -> Result<i64, ParseErrorKind> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        s.parse::<i64>().map_err(|_| bad())
    };
    let range = match text.split_once('-') {
        Some((a, b)) => IdRange {
            start: number(a)?,
            end: number(b)?,
        },
        None => {
            let id = number(text)?;
            IdRange { start: id, end: id }
        }
    };
    if range.start > range.end {
        return Err(bad());
    }
    Ok(range)
}

/// Parses a list of ids and ranges separated by blanks or commas
/// (`1 2 100-200`, `1,2`). An empty list is an error.
pub fn parse_id_list(text: &str) -> Result<Vec<IdRange>, ParseErrorKind> {
    let ids = text
        .split(|c: char| c.is_ascii_whitespace() || c == ',')
        .filter(|s| !s.is_empty())
        .map(parse_id_range)
        .collect::<Result<Vec<_>, _>>()?;
    if ids.is_empty() {
        return Err(ParseErrorKind::BadId(text.to_owned()));
    }
    Ok(ids)
}

/// True when the text is an id list that [`parse_id_list`] accepts.
pub(crate) fn looks_like_id_list(text: &str) -> bool {
    parse_id_list(text).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn var(name: &str, selector: Option<Selector>) -> VariableDef {
        VariableDef {
            count: false,
            exclude: false,
            name: name.to_owned(),
            selector,
        }
    }

    fn key(s: &str) -> Option<Selector> {
        Some(Selector::Key(s.to_owned()))
    }

    fn regex(s: &str) -> Option<Selector> {
        Some(Selector::Regex(s.to_owned()))
    }

    #[test]
    fn plain_variables() {
        let v = parse_variables("args|request_headers:User-Agent|TX:foo").unwrap();
        assert_eq!(
            v,
            vec![
                var("ARGS", None),
                var("REQUEST_HEADERS", key("User-Agent")),
                var("TX", key("foo")),
            ]
        );
    }

    #[test]
    fn exclusion_and_count() {
        let v = parse_variables("REQUEST_HEADERS|!REQUEST_HEADERS:Referer|&TX:x").unwrap();
        assert!(v[1].exclude && !v[1].count);
        assert_eq!(v[1].selector, key("Referer"));
        assert!(v[2].count && !v[2].exclude);
        assert_eq!(v[2].name, "TX");
    }

    #[test]
    fn pipe_inside_regex_selector() {
        let v = parse_variables(r"ARGS:/^(a|b)$/|ARGS_NAMES|!REQUEST_COOKIES:/^_ga(?:_\w+)?$/")
            .unwrap();
        assert_eq!(
            v,
            vec![
                var("ARGS", regex("^(a|b)$")),
                var("ARGS_NAMES", None),
                VariableDef {
                    count: false,
                    exclude: true,
                    name: "REQUEST_COOKIES".to_owned(),
                    selector: regex(r"^_ga(?:_\w+)?$"),
                },
            ]
        );
    }

    #[test]
    fn slash_inside_regex_selector() {
        let v = parse_variables(r"ARGS:/a\/b/|ARGS:/x/y/").unwrap();
        assert_eq!(v[0].selector, regex(r"a\/b"));
        assert_eq!(v[1].selector, regex("x/y"));
    }

    #[test]
    fn quoted_selector() {
        let v = parse_variables("TX:'a|b'|ARGS:'x'").unwrap();
        assert_eq!(v, vec![var("TX", key("a|b")), var("ARGS", key("x"))]);
    }

    #[test]
    fn xml_selectors_are_xpath_keys() {
        let v = parse_variables("ARGS|XML:/*|XML://@*").unwrap();
        assert_eq!(
            v,
            vec![
                var("ARGS", None),
                var("XML", key("/*")),
                var("XML", key("//@*"))
            ]
        );
    }

    #[test]
    fn unterminated_regex_selector_is_a_key() {
        let v = parse_variables("REQUEST_FILENAME:/index.php").unwrap();
        assert_eq!(v[0].selector, key("/index.php"));
    }

    #[test]
    fn blanks_around_targets() {
        let v = parse_variables(" ARGS | ARGS_NAMES ").unwrap();
        assert_eq!(v, vec![var("ARGS", None), var("ARGS_NAMES", None)]);
    }

    #[test]
    fn bad_variables() {
        for text in [
            "", "|", "ARGS|", "ARGS||X", "ARGS:", "AR GS", "!", "&", "ARGS:'a", "TX:'a'b",
        ] {
            assert!(
                matches!(parse_variables(text), Err(ParseErrorKind::BadVariable(_))),
                "{text:?}"
            );
        }
        assert_eq!(
            parse_variables("ARGS|RE$X"),
            Err(ParseErrorKind::BadVariable("RE$X".to_owned()))
        );
    }

    #[test]
    fn operators() {
        let op = parse_operator("@rx ^a b$");
        assert_eq!(
            (op.negated, op.name.as_str(), op.argument.as_str()),
            (false, "rx", "^a b$")
        );
        let op = parse_operator("!@pm a b");
        assert_eq!(
            (op.negated, op.name.as_str(), op.argument.as_str()),
            (true, "pm", "a b")
        );
        let op = parse_operator("@detectSQLi");
        assert_eq!((op.name.as_str(), op.argument.as_str()), ("detectSQLi", ""));
        let op = parse_operator("^(?:GET|HEAD)$");
        assert_eq!(
            (op.negated, op.name.as_str(), op.argument.as_str()),
            (false, "rx", "^(?:GET|HEAD)$")
        );
        let op = parse_operator("!^a");
        assert_eq!(
            (op.negated, op.name.as_str(), op.argument.as_str()),
            (true, "rx", "^a")
        );
        let op = parse_operator("@rx   \\d+\" ");
        assert_eq!(op.argument, "\\d+\" ");
        let op = parse_operator("");
        assert_eq!((op.name.as_str(), op.argument.as_str()), ("rx", ""));
    }

    fn act(name: &str, value: Option<&str>) -> ActionDef {
        ActionDef {
            name: name.to_owned(),
            value: value.map(str::to_owned),
        }
    }

    #[test]
    fn actions() {
        let a = parse_actions(
            "id:1, phase:2 ,t:none,msg:'a, b: c',setvar:'tx.x=+%{tx.y}',\
             ctl:ruleRemoveTargetById=942100;ARGS:foo,tag:application-multi,chain",
        )
        .unwrap();
        assert_eq!(
            a,
            vec![
                act("id", Some("1")),
                act("phase", Some("2")),
                act("t", Some("none")),
                act("msg", Some("a, b: c")),
                act("setvar", Some("tx.x=+%{tx.y}")),
                act("ctl", Some("ruleRemoveTargetById=942100;ARGS:foo")),
                act("tag", Some("application-multi")),
                act("chain", None),
            ]
        );
    }

    #[test]
    fn quoted_action_values_with_escapes() {
        let a = parse_actions(
            r"logdata:'Matched Data: %{TX.0} found within %{MATCHED_VAR_NAME}: %{MATCHED_VAR}',msg:'it\'s',x:''",
        )
        .unwrap();
        assert_eq!(
            a,
            vec![
                act(
                    "logdata",
                    Some("Matched Data: %{TX.0} found within %{MATCHED_VAR_NAME}: %{MATCHED_VAR}")
                ),
                act("msg", Some("it's")),
                act("x", Some("")),
            ]
        );
    }

    #[test]
    fn empty_items_are_skipped() {
        assert_eq!(parse_actions("").unwrap(), vec![]);
        assert_eq!(
            parse_actions(" pass ,, log, ").unwrap(),
            vec![act("pass", None), act("log", None)]
        );
    }

    #[test]
    fn bad_actions() {
        assert_eq!(
            parse_actions("msg:'abc,id:1"),
            Err(ParseErrorKind::UnterminatedQuote)
        );
        assert!(matches!(
            parse_actions("msg:'a'b,id:1"),
            Err(ParseErrorKind::BadAction(_))
        ));
        assert!(matches!(
            parse_actions("id:1,:2"),
            Err(ParseErrorKind::BadAction(_))
        ));
        assert!(matches!(
            parse_actions("'id':1"),
            Err(ParseErrorKind::BadAction(_))
        ));
    }

    #[test]
    fn id_ranges() {
        assert_eq!(
            parse_id_list("1 2,100-200").unwrap(),
            vec![
                IdRange { start: 1, end: 1 },
                IdRange { start: 2, end: 2 },
                IdRange {
                    start: 100,
                    end: 200
                },
            ]
        );
        for bad in [
            "",
            "a",
            "1-",
            "-1",
            "5-2",
            "1-2-3",
            "99999999999999999999",
            "+1",
        ] {
            assert!(
                matches!(parse_id_list(bad), Err(ParseErrorKind::BadId(_))),
                "{bad:?}"
            );
        }
    }
}
