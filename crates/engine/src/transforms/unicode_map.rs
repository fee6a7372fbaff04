//! `SecUnicodeMapFile FILE CODEPAGE`: the table `t:urlDecodeUni` maps `%uHHHH` code
//! points through, as ModSecurity v3 does.
//!
//! The file (ModSecurity ships it as `unicode.mapping`) is a list of code page
//! sections: a line starting with the code page number (`20127 (US-ASCII)`), then
//! whitespace-separated `HHHH:HH` pairs, a code point and the byte it stands for in
//! that code page. Only the configured code page's section is read; it ends at the next
//! word that is not a pair. As in v3, loading a map also maps the full stops of
//! RFC 3490 (U+3002, U+FF0E, U+FF61, and U+002E itself) to `.`, and a code point the
//! table does not list decodes as without a map (its low byte).

use std::fmt;

/// A code point to byte table for `t:urlDecodeUni`.
#[derive(Clone, PartialEq, Eq)]
pub struct UnicodeMap {
    /// The code page the table was read for.
    code_page: u32,
    /// One entry per code point: the byte, or `None` when unmapped.
    table: Box<[Option<u8>]>,
}

impl fmt::Debug for UnicodeMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnicodeMap")
            .field("code_page", &self.code_page)
            .field(
                "entries",
                &self.table.iter().filter(|e| e.is_some()).count(),
            )
            .finish()
    }
}

/// Leading decimal digits of `word` as a number (how ModSecurity reads a section's
/// code page: `20127` and `20127(US-ASCII)` both name 20127).
fn leading_number(word: &str) -> Option<u32> {
    let end = word
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(word.len());
    word[..end].parse().ok()
}

impl UnicodeMap {
    /// Reads the section of `code_page` from the text of a mapping file. An error
    /// names the line (1-based) and what is wrong with it; the caller adds the file.
    pub fn parse(text: &str, code_page: u32) -> Result<Self, String> {
        if code_page == 0 {
            return Err("code page 0 is not a code page".into());
        }
        let mut table = vec![None; 0x1_0000].into_boxed_slice();
        for c in [0x3002usize, 0xff61, 0xff0e, 0x002e] {
            table[c] = Some(b'.');
        }
        let mut found = false;
        let mut pairs = 0usize;
        'lines: for (n, line) in text.lines().enumerate() {
            for word in line.split([' ', '\t', '\r']).filter(|w| !w.is_empty()) {
                let Some((code, byte)) = word.split_once(':') else {
                    if pairs > 0 {
                        break 'lines;
                    }
                    if leading_number(word) == Some(code_page) {
                        found = true;
                    }
                    continue;
                };
                if !found {
                    continue;
                }
                let hex = |s: &str, max: usize| {
                    (!s.is_empty() && s.len() <= max && s.bytes().all(|b| b.is_ascii_hexdigit()))
                        .then(|| u32::from_str_radix(s, 16).ok())
                        .flatten()
                };
                match (hex(code, 4), hex(byte, 2)) {
                    (Some(c), Some(b)) => {
                        table[c as usize] = Some(b as u8);
                        pairs += 1;
                    }
                    _ => {
                        return Err(format!(
                            "line {}: {word:?} is not a mapping (HHHH:HH, a code point and a byte in hex)",
                            n + 1
                        ));
                    }
                }
            }
        }
        if !found {
            return Err(format!("no section for code page {code_page}"));
        }
        Ok(UnicodeMap { code_page, table })
    }

    /// The code page the table was read for.
    pub fn code_page(&self) -> u32 {
        self.code_page
    }

    /// The byte `code` maps to, if the table lists it.
    pub fn get(&self, code: u16) -> Option<u8> {
        self.table[usize::from(code)]
    }
}

#[cfg(test)]
mod tests {
    use super::UnicodeMap;

    const FILE: &str = "(MAC - Roman)\n\n\n1252  (ANSI - Latin I)\n0100:41 2019:22\n\n\
                        20127 (US-ASCII)\n00a0:20 2019:27 ff01:21\n00c0:41\n\n20261 (T.61)\n00c1:42\n";

    #[test]
    fn reads_only_the_configured_code_page() {
        let m = UnicodeMap::parse(FILE, 20127).expect("loads");
        assert_eq!(m.code_page(), 20127);
        assert_eq!(m.get(0x2019), Some(b'\''));
        assert_eq!(m.get(0xff01), Some(b'!'));
        // The section goes on over line breaks, up to the next code page.
        assert_eq!(m.get(0x00c0), Some(b'A'));
        assert_eq!(m.get(0x00c1), None);
        assert_eq!(m.get(0x0100), None);
        // RFC 3490 full stops come with any map.
        assert_eq!(m.get(0x3002), Some(b'.'));
        assert_eq!(m.get(0xff0e), Some(b'.'));
        let m = UnicodeMap::parse(FILE, 1252).expect("loads");
        assert_eq!(m.get(0x2019), Some(b'"'));
        assert_eq!(m.get(0x0100), Some(b'A'));
        assert_eq!(m.get(0x00a0), None);
    }

    #[test]
    fn errors_name_the_line_or_the_code_page() {
        let e = UnicodeMap::parse(FILE, 850).unwrap_err();
        assert_eq!(e, "no section for code page 850");
        let bad = "20127 (US-ASCII)\n00a0:20\n2019:zz\n";
        let e = UnicodeMap::parse(bad, 20127).unwrap_err();
        assert!(e.starts_with("line 3: \"2019:zz\" is not a mapping"), "{e}");
        let e = UnicodeMap::parse("20127\n12345:20\n", 20127).unwrap_err();
        assert!(e.starts_with("line 2:"), "{e}");
        // A bad pair in another section is not read, as in ModSecurity.
        assert!(UnicodeMap::parse("1 x\n00:zz\n20127\n0041:41\n", 20127).is_ok());
        assert!(UnicodeMap::parse(FILE, 0).is_err());
    }
}
