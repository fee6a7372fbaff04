//! Comment handling: `removeComments`, `replaceComments`, `removeCommentsChar`.

use std::borrow::Cow;
use std::sync::LazyLock;

use memchr::memmem::Finder;

use super::out::Out;

/// Searchers for the two-byte comment markers, built once: a search made with
/// `memmem::find` builds its searcher on every call, which on a value full of
/// comments costs more than the search.
static OPEN: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"/*"));
static CLOSE: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"*/"));
static DASHES: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"--"));

/// `t:removeComments`, as libmodsecurity 3.0.x does it:
/// - `/* ... */` and `<!-- ... -->` are removed; an unterminated one is removed to the end
///   and replaced by one space;
/// - `--` or `#` outside a comment ends the output there (everything after it is dropped,
///   not just the rest of the line);
/// - the byte right after a closing `*/` or `-->` is copied without being examined (so a
///   comment opener there is kept), and when the closer ends the input a NUL byte is
///   appended in its place.
pub(super) fn remove_comments(input: &[u8]) -> Cow<'_, [u8]> {
    let n = input.len();
    let at = |i: usize| -> u8 { input.get(i).copied().unwrap_or(0) };
    let mut out = Out::new(input);
    let mut i = 0;
    let mut in_comment = false;
    while i < n {
        if !in_comment {
            // Copy plain bytes up to the next possible comment start in one go.
            let next = input[i..]
                .iter()
                .position(|&b| matches!(b, b'/' | b'<' | b'-' | b'#'))
                .map_or(n, |k| i + k);
            out.copy_input(i, next);
            i = next;
            if i >= n {
                break;
            }
            let rest = &input[i..];
            if rest.starts_with(b"/*") {
                in_comment = true;
                i += 2;
            } else if rest.starts_with(b"<!--") {
                in_comment = true;
                i += 4;
            } else if rest.starts_with(b"--") || rest[0] == b'#' {
                break;
            } else {
                out.push(rest[0]);
                i += 1;
            }
        } else {
            let rest = &input[i..];
            let closer = if rest.starts_with(b"*/") {
                2
            } else if rest.starts_with(b"-->") {
                3
            } else {
                i += 1;
                continue;
            };
            in_comment = false;
            i += closer;
            out.push(at(i));
            i += 1;
        }
    }
    if in_comment {
        out.push(b' ');
    }
    out.finish()
}

/// `t:replaceComments`: each `/* ... */`, and an unterminated `/*` to the end, becomes one
/// space. A lone `*/` is kept.
pub(super) fn replace_comments(input: &[u8]) -> Cow<'_, [u8]> {
    let n = input.len();
    let mut out = Out::new(input);
    let mut i = 0;
    loop {
        let Some(start) = OPEN.find(&input[i..]) else {
            out.copy_input(i, n);
            break;
        };
        out.copy_input(i, i + start);
        let body = i + start + 2;
        match CLOSE.find(&input[body..]) {
            Some(end) => {
                out.push(b' ');
                i = body + end + 2;
            }
            None => {
                out.push(b' ');
                break;
            }
        }
    }
    out.finish()
}

/// `t:removeCommentsChar`: removes the comment markers `/*`, `*/`, `<!--`, `-->`, `--` and
/// `#`, keeping the text between them.
pub(super) fn remove_comments_char(input: &[u8]) -> Cow<'_, [u8]> {
    if input.len() >= super::SCAN_MIN_LEN && !has_comment_marker(input) {
        return Cow::Borrowed(input);
    }
    remove_comments_char_walk(input)
}

/// [`remove_comments_char`] byte by byte (from one possible marker to the next).
fn remove_comments_char_walk(input: &[u8]) -> Cow<'_, [u8]> {
    let n = input.len();
    let mut out = Out::new(input);
    let mut i = 0;
    while i < n {
        let next = input[i..]
            .iter()
            .position(|&b| matches!(b, b'/' | b'*' | b'<' | b'-' | b'#'))
            .map_or(n, |k| i + k);
        out.copy_input(i, next);
        i = next;
        if i >= n {
            break;
        }
        let rest = &input[i..];
        let marker = if rest.starts_with(b"/*") || rest.starts_with(b"*/") {
            2
        } else if rest.starts_with(b"<!--") {
            4
        } else if rest.starts_with(b"-->") {
            3
        } else if rest.starts_with(b"--") {
            2
        } else if rest[0] == b'#' {
            1
        } else {
            out.push(rest[0]);
            i += 1;
            continue;
        };
        i += marker;
    }
    out.finish()
}

/// Whether `input` holds a marker `removeCommentsChar` removes: `#`, `/*`, `*/`, or
/// `--` (which `<!--` and `-->` contain). Searched with the vector searches of
/// `memchr`, so that a long value without one (where the byte walk above would only
/// confirm that nothing changes) costs a fraction of a walk.
fn has_comment_marker(input: &[u8]) -> bool {
    memchr::memchr(b'#', input).is_some()
        || OPEN.find(input).is_some()
        || CLOSE.find(input).is_some()
        || DASHES.find(input).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The walk leaves a value unchanged exactly when it holds no marker, so long
    /// values without one can be returned as they are.
    #[test]
    fn values_without_markers_are_unchanged() {
        // The first six pieces never make a marker, whatever their order.
        let pieces: &[&[u8]] = &[
            b"a", b"/a", b"*b", b"-c", b"<!", b" ", b"#", b"/", b"*", b"-", b"<!-",
        ];
        super::super::check_fast_path_is_exact(
            pieces,
            6,
            0x0c0f_fee0_0000_0042,
            remove_comments_char_walk,
            has_comment_marker,
            remove_comments_char,
        );
    }

    fn borrowed(c: Cow<'_, [u8]>) -> bool {
        matches!(c, Cow::Borrowed(_))
    }

    #[test]
    fn remove() {
        assert_eq!(&*remove_comments(b"a/*x*/b"), b"ab");
        assert_eq!(&*remove_comments(b"a/*x"), b"a ");
        assert_eq!(&*remove_comments(b"a<!--x-->b"), b"ab");
        assert_eq!(&*remove_comments(b"a<!--x"), b"a ");
        assert_eq!(&*remove_comments(b"/*a--x*/b"), b"b");
        // `--` and `#` drop everything after them in v3.
        assert_eq!(&*remove_comments(b"a--b\nc"), b"a");
        assert_eq!(&*remove_comments(b"a#b\nc"), b"a");
        assert_eq!(&*remove_comments(b"a-->b"), b"a");
        // Quirks: the byte after a closer is copied unexamined; NUL when at the end.
        assert_eq!(&*remove_comments(b"/*x*/"), b"\x00");
        assert_eq!(&*remove_comments(b"/*a*//*b*/c"), b"/*b*/c");
        assert_eq!(&*remove_comments(b"x*/y"), b"x*/y");
        assert_eq!(&*remove_comments(b"1/*!union*/ select"), b"1 select");
        assert_eq!(&*remove_comments(b""), b"");
        assert!(borrowed(remove_comments(b"a - b < c / d")));
    }

    #[test]
    fn replace() {
        assert_eq!(&*replace_comments(b"a/*x*/b"), b"a b");
        assert_eq!(&*replace_comments(b"a/*x"), b"a ");
        assert_eq!(&*replace_comments(b"/**/"), b" ");
        assert_eq!(&*replace_comments(b"/*/"), b" ");
        assert_eq!(&*replace_comments(b"a*/b"), b"a*/b");
        assert_eq!(&*replace_comments(b"a/*1*/b/*2*/c"), b"a b c");
        assert_eq!(&*replace_comments(b""), b"");
        assert!(borrowed(replace_comments(b"a / * b")));
    }

    #[test]
    fn remove_char() {
        assert_eq!(&*remove_comments_char(b"a/*b*/c--d#e<!--f-->g"), b"abcdefg");
        assert_eq!(&*remove_comments_char(b"--->"), b"->");
        assert_eq!(&*remove_comments_char(b"/*/"), b"/");
        assert_eq!(&*remove_comments_char(b""), b"");
        assert!(borrowed(remove_comments_char(b"a - b < c / d * e")));
    }
}
