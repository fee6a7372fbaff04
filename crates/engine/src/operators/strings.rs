//! String operators: `@streq`, `@contains`, `@containsWord`, `@beginsWith`,
//! `@endsWith`, `@within`, `@strmatch`. All compare bytes case-sensitively.

use memchr::memmem;

/// A literal searched in the input (`@contains`, `@strmatch`), with its searcher
/// prepared at load time.
#[derive(Debug, Clone)]
pub struct Needle {
    finder: memmem::Finder<'static>,
}

impl Needle {
    /// Prepares a search for `needle`.
    pub fn new(needle: &[u8]) -> Needle {
        Needle {
            finder: memmem::Finder::new(needle).into_owned(),
        }
    }

    /// The literal searched for.
    pub fn bytes(&self) -> &[u8] {
        self.finder.needle()
    }

    /// Whether the literal occurs in `input` (an empty literal always does).
    pub fn found_in(&self, input: &[u8]) -> bool {
        self.finder.find(input).is_some()
    }
}

/// `@within`: the input occurs inside the argument. libmodsecurity returns true for
/// an empty input.
pub fn within(argument: &[u8], input: &[u8]) -> bool {
    input.is_empty() || memmem::find(argument, input).is_some()
}

/// `@containsWord` as libmodsecurity implements it: the argument occurs in the input
/// with no ASCII letter immediately before or after it (digits, `_` and the edges of
/// the input are boundaries). An empty argument always matches; an empty input never
/// does (unless the argument is empty).
pub fn contains_word(word: &[u8], input: &[u8]) -> bool {
    if word.is_empty() {
        return true;
    }
    let boundary = |i: Option<usize>| match i.and_then(|i| input.get(i)) {
        Some(b) => !b.is_ascii_alphabetic(),
        None => true,
    };
    memmem::find_iter(input, word).any(|pos| {
        let before = pos.checked_sub(1);
        let after = pos + word.len();
        (pos == 0 || boundary(before)) && (after == input.len() || boundary(Some(after)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needle() {
        let n = Needle::new(b"/remote.php/webdav");
        assert!(n.found_in(b"/nextcloud/remote.php/webdav/x"));
        assert!(!n.found_in(b"/remote.php/"));
        assert!(!n.found_in(b""));
        assert!(Needle::new(b"").found_in(b""));
        assert!(Needle::new(b"\0\xFF").found_in(b"a\0\xFFb"));
    }

    #[test]
    fn within_examples() {
        // SecRule REQUEST_METHOD "!@within GET,POST,HEAD"
        assert!(within(b"GET,POST,HEAD", b"POST"));
        assert!(!within(b"GET,POST,HEAD", b"PUT"));
        // Substring semantics: "ST" is inside "POST".
        assert!(within(b"GET,POST,HEAD", b"ST"));
        assert!(within(b"GET,POST", b""));
        assert!(!within(b"", b"x"));
        // CRS writes extensions as /.ext/ so that only whole items match.
        assert!(within(b"/.bak/ /.config/", b"/.bak/"));
        assert!(!within(b"/.bak/ /.config/", b"/.ba/x"));
    }

    #[test]
    fn contains_word_examples() {
        // SecRule ARGS "@containsWord select"
        assert!(contains_word(b"select", b"select"));
        assert!(contains_word(b"select", b"-1 union select 1"));
        assert!(contains_word(b"select", b"select * from t"));
        assert!(contains_word(b"select", b"x=select"));
        assert!(!contains_word(b"select", b"selection"));
        assert!(!contains_word(b"select", b"preselect"));
        // The second occurrence is a word even if the first is not.
        assert!(contains_word(b"select", b"selects select"));
        // Digits and `_` are boundaries in libmodsecurity.
        assert!(contains_word(b"select", b"1select_"));
        assert!(!contains_word(b"select", b""));
        assert!(contains_word(b"", b""));
        assert!(contains_word(b"a", b"\xFFa\x80"));
    }
}
