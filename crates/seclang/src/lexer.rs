//! The lexical layer: physical lines to logical directives, and a directive's text to
//! its arguments.
//!
//! A logical directive is one or more physical lines: a line whose last non-blank
//! character is a backslash continues on the next line (the backslash is dropped and
//! the next line is appended as it is, leading blanks included). Blank lines and lines
//! whose first non-blank character is `#` are skipped; a comment line never continues.
//!
//! Arguments are separated by whitespace. An argument that starts with `"` or `'` runs
//! to the matching closing quote and may contain whitespace; inside it, a backslash
//! before the quote character stands for the quote itself, and every other backslash
//! is kept as written (a `\\` pair is kept as two backslashes and does not escape a
//! following quote).

use crate::error::ParseErrorKind;
use std::borrow::Cow;

/// One directive as written, its continuation lines joined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LogicalLine<'a> {
    /// The directive text, without the leading blanks of its first line.
    pub text: Cow<'a, str>,
    /// 1-based line where the directive starts.
    pub line: u32,
    /// 1-based column (in characters) of the directive's first character.
    pub column: u32,
}

/// Iterates over the logical directives of a text. Never fails: a backslash on the
/// last line simply ends the directive.
pub(crate) struct LogicalLines<'a> {
    rest: &'a str,
    /// 1-based number of the next physical line.
    next_line: u32,
}

impl<'a> LogicalLines<'a> {
    /// Starts at the first line of `text`.
    pub(crate) fn new(text: &'a str) -> Self {
        Self {
            rest: text,
            next_line: 1,
        }
    }

    /// The next physical line without its line terminator, or `None` at the end.
    fn physical_line(&mut self) -> Option<&'a str> {
        if self.rest.is_empty() {
            return None;
        }
        let (line, rest) = match memchr::memchr(b'\n', self.rest.as_bytes()) {
            Some(i) => (&self.rest[..i], &self.rest[i + 1..]),
            None => (self.rest, ""),
        };
        self.rest = rest;
        self.next_line = self.next_line.saturating_add(1);
        Some(line.strip_suffix('\r').unwrap_or(line))
    }
}

/// Splits a line into its content and whether it ends with a continuation backslash
/// (blanks after the backslash are tolerated).
fn split_continuation(line: &str) -> (&str, bool) {
    let trimmed = line.trim_end_matches([' ', '\t']);
    match trimmed.strip_suffix('\\') {
        Some(content) => (content, true),
        None => (line, false),
    }
}

impl<'a> Iterator for LogicalLines<'a> {
    type Item = LogicalLine<'a>;

    fn next(&mut self) -> Option<LogicalLine<'a>> {
        loop {
            let line_no = self.next_line;
            let raw = self.physical_line()?;
            let body = raw.trim_start();
            if body.is_empty() || body.starts_with('#') {
                continue;
            }
            let leading = &raw[..raw.len() - body.len()];
            let column = u32::try_from(leading.chars().count())
                .unwrap_or(u32::MAX - 1)
                .saturating_add(1);
            let (first, mut continued) = split_continuation(body);
            if !continued {
                return Some(LogicalLine {
                    text: Cow::Borrowed(body.trim_end()),
                    line: line_no,
                    column,
                });
            }
            let mut joined = String::from(first);
            while continued {
                let Some(next) = self.physical_line() else {
                    break;
                };
                let (content, more) = split_continuation(next);
                joined.push_str(content);
                continued = more;
            }
            let end = joined.trim_end().len();
            joined.truncate(end);
            return Some(LogicalLine {
                text: Cow::Owned(joined),
                line: line_no,
                column,
            });
        }
    }
}

/// Reads a quoted string whose opening quote is at byte `start` of `s`. Returns the
/// unescaped content (borrowed when nothing was unescaped) and the byte index just
/// past the closing quote, or `None` when the string is not closed.
pub(crate) fn read_quoted(s: &str, start: usize) -> Option<(Cow<'_, str>, usize)> {
    let bytes = s.as_bytes();
    let quote = *bytes.get(start)?;
    // Built only once an escaped quote is met.
    let mut owned: Option<String> = None;
    // Start of the pending run of bytes that are copied unchanged.
    let mut run = start + 1;
    let mut i = start + 1;
    while let Some(offset) = memchr::memchr2(quote, b'\\', &bytes[i..]) {
        i += offset;
        if bytes[i] == quote {
            let content = match owned {
                Some(mut out) => {
                    out.push_str(&s[run..i]);
                    Cow::Owned(out)
                }
                None => Cow::Borrowed(&s[run..i]),
            };
            return Some((content, i + 1));
        }
        // A backslash: `\<quote>` is the quote itself, `\\` is kept as a pair (so it
        // does not escape what follows), any other backslash is kept. `i` never passes
        // the end: each step checks the byte it skips over.
        match bytes.get(i + 1) {
            Some(&next) if next == quote => {
                owned.get_or_insert_with(String::new).push_str(&s[run..i]);
                run = i + 1; // the quote itself starts the next run
                i += 2;
            }
            Some(b'\\') => i += 2,
            _ => i += 1,
        }
    }
    None
}

/// Splits a directive's text into its words: the directive name first, then its
/// arguments with quotes removed.
pub(crate) fn split_args(text: &str) -> Result<Vec<Cow<'_, str>>, ParseErrorKind> {
    let bytes = text.as_bytes();
    let mut args = Vec::new();
    let mut i = 0;
    loop {
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= bytes.len() {
            return Ok(args);
        }
        if bytes[i] == b'"' || bytes[i] == b'\'' {
            let (arg, end) = read_quoted(text, i).ok_or(ParseErrorKind::UnterminatedQuote)?;
            args.push(arg);
            i = end;
        } else {
            let start = i;
            while i < bytes.len() && !bytes[i].is_ascii_whitespace() {
                i += 1;
            }
            args.push(Cow::Borrowed(&text[start..i]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<(String, u32, u32)> {
        LogicalLines::new(text)
            .map(|l| (l.text.into_owned(), l.line, l.column))
            .collect()
    }

    #[test]
    fn skips_comments_and_blank_lines() {
        let got = lines("# a comment\n\n   \n  # indented comment\nSecRuleEngine On\n");
        assert_eq!(got, vec![("SecRuleEngine On".to_owned(), 5, 1)]);
    }

    #[test]
    fn joins_continuation_lines() {
        let text = "  SecRule ARGS \"@rx a\" \\\n    \"id:1,\\\n    phase:2\"\nSecMarker X\n";
        let got = lines(text);
        assert_eq!(
            got,
            vec![
                (
                    "SecRule ARGS \"@rx a\"     \"id:1,    phase:2\"".to_owned(),
                    1,
                    3
                ),
                ("SecMarker X".to_owned(), 4, 1),
            ]
        );
    }

    #[test]
    fn crlf_and_blanks_after_backslash() {
        let got = lines("SecAction \\  \r\n \"id:1\"\r\nSecMarker A\r\n");
        assert_eq!(
            got,
            vec![
                ("SecAction  \"id:1\"".to_owned(), 1, 1),
                ("SecMarker A".to_owned(), 3, 1)
            ]
        );
    }

    #[test]
    fn comment_lines_do_not_continue() {
        let got = lines("# comment \\\nSecMarker A\n");
        assert_eq!(got, vec![("SecMarker A".to_owned(), 2, 1)]);
    }

    #[test]
    fn trailing_backslash_at_eof_ends_the_directive() {
        assert_eq!(
            lines("SecMarker A \\"),
            vec![("SecMarker A".to_owned(), 1, 1)]
        );
        assert_eq!(lines("\\"), vec![(String::new(), 1, 1)]);
    }

    #[test]
    fn column_counts_characters() {
        assert_eq!(
            lines("\t\tSecMarker A"),
            vec![("SecMarker A".to_owned(), 1, 3)]
        );
    }

    #[test]
    fn splits_quoted_and_plain_args() {
        let got = split_args(r#"SecRule ARGS "@rx \d+\"" 'a b' "x y""#).unwrap();
        assert_eq!(got, vec!["SecRule", "ARGS", r#"@rx \d+""#, "a b", "x y"]);
    }

    #[test]
    fn keeps_other_backslashes() {
        let got = split_args(r#"X "a\\" "\w\'" 'it\'s' plain\"x"#).unwrap();
        assert_eq!(got, vec!["X", r"a\\", r"\w\'", "it's", r#"plain\"x"#]);
    }

    #[test]
    fn empty_quoted_arg() {
        assert_eq!(
            split_args(r#"SecAction """#).unwrap(),
            vec!["SecAction", ""]
        );
    }

    #[test]
    fn unterminated_quote_is_an_error() {
        assert_eq!(
            split_args(r#"SecRule ARGS "@rx a"#),
            Err(ParseErrorKind::UnterminatedQuote)
        );
        assert_eq!(split_args("'"), Err(ParseErrorKind::UnterminatedQuote));
        assert_eq!(split_args(r#""\""#), Err(ParseErrorKind::UnterminatedQuote));
    }
}
