//! The PCRE-to-`regex` translator: PCRE's byte-oriented syntax (as ModSecurity
//! compiles it, without UTF mode) rewritten for the `regex` crate, with marker groups
//! for the features the exact evaluations of [`compat`](crate::compat) take over. The
//! rules are in the documentation of [`rx`](crate::rx).

use std::fmt::Write as _;

use crate::vocab::{BACKTRACKING, LookKind, MARK_ATOMIC, MARK_LOOK, MARK_POSSESSIVE, Translation};

fn refuse(what: &str, at: usize) -> String {
    format!("{what} at byte {at} {BACKTRACKING}")
}

/// PCRE `\h` in non-UTF mode: tab, space, no-break space.
const HSPACE: &str = r"\x09\x20\xA0";
/// PCRE `\v` in non-UTF mode: LF, VT, FF, CR, NEL.
const VSPACE: &str = r"\x0A-\x0D\x85";

/// Runs the translator.
pub(crate) fn translate_full(pcre: &str) -> Result<Translation, String> {
    let mut t = Translator {
        src: pcre.as_bytes(),
        pos: 0,
        out: String::with_capacity(pcre.len() + 16),
        carets: Vec::new(),
        item_start: 0,
        groups: Vec::new(),
        edits: Vec::new(),
        lookarounds: Vec::new(),
        markers: 0,
        possessive: false,
        look_depth: 0,
        capture_count: 0,
        group_texts: Vec::new(),
        backreference: None,
    };
    t.run()?;
    // An unclosed lookaround, even with other groups opened inside it left unclosed
    // too: its text is still apart from the rest.
    if let Some(at) = t.groups.iter().rev().find_map(|g| match g.kind {
        GroupKind::Look { .. } => Some(g.at),
        _ => None,
    }) {
        return Err(format!("missing `)` for the lookaround at byte {at}"));
    }
    let marked = (!t.edits.is_empty()).then(|| {
        let extra: usize = t.edits.iter().map(|e| e.insert.len()).sum();
        let mut m = String::with_capacity(t.out.len() + extra);
        let mut last = 0;
        for e in &t.edits {
            m.push_str(&t.out[last..e.at]);
            m.push_str(&e.insert);
            last = e.at + e.remove;
        }
        m.push_str(&t.out[last..]);
        m
    });
    Ok(Translation {
        pattern: t.out,
        carets: t.carets,
        marked,
        lookarounds: t.lookarounds,
        possessive: t.possessive,
        backreference: t.backreference,
    })
}

struct Translator<'a> {
    src: &'a [u8],
    pos: usize,
    out: String,
    /// Offsets in `out` of the `^` assertions emitted.
    carets: Vec<usize>,
    /// Offset in `out` where the last complete item (what a quantifier applies to)
    /// starts.
    item_start: usize,
    /// The groups open at `pos`.
    groups: Vec<Group>,
    /// Edits that turn `out` into the marked pattern, in offset order.
    edits: Vec<Edit>,
    /// Kinds of the lookarounds met so far.
    lookarounds: Vec<LookKind>,
    /// Possessive and atomic markers emitted so far.
    markers: usize,
    /// Whether a possessive quantifier or an atomic group was met.
    possessive: bool,
    /// How many lookarounds are open (0 or 1: nesting is refused).
    look_depth: usize,
    /// Capture groups opened so far (PCRE numbers them in that order).
    capture_count: usize,
    /// Translated sub-pattern of each closed capture group (index = number - 1),
    /// `None` while open or when it holds other capture groups.
    group_texts: Vec<Option<String>>,
    /// The refusal message for the first backreference.
    backreference: Option<String>,
}

/// An open group.
struct Group {
    /// Where the group starts in `out` (for a lookaround: in the buffer it saved).
    start: usize,
    /// Offset of its `(` in the PCRE pattern, for messages.
    at: usize,
    kind: GroupKind,
}

enum GroupKind {
    /// A group that is not a capture group (`(?:`, `(?i:`).
    Plain,
    /// Capture group number `n`; `captures_before` is the capture count when it opened.
    Capture { n: usize, captures_before: usize },
    /// `(?>`: marked as `(?P<palisade.atomic.N>`.
    Atomic,
    /// A lookaround: its content is translated into a fresh `out`; `saved` is the
    /// outer one.
    Look { kind: LookKind, saved: String },
}

/// Replace `remove` bytes at `at` in `out` with `insert`, in the marked pattern.
struct Edit {
    at: usize,
    remove: usize,
    insert: String,
}

/// One element of a character class.
enum ClassItem {
    Byte(u8),
    /// Already in `regex` class syntax (`\d`, `[:alpha:]`, a nested class...).
    Set(String),
}

impl Translator<'_> {
    fn peek(&self, ahead: usize) -> Option<u8> {
        self.src.get(self.pos + ahead).copied()
    }

    fn push_byte(&mut self, b: u8) {
        if b.is_ascii_alphanumeric() {
            self.out.push(char::from(b));
        } else {
            let _ = write!(self.out, "\\x{b:02X}");
        }
    }

    fn run(&mut self) -> Result<(), String> {
        // Whether the previous token was a quantifier (to spot possessive `+`).
        let mut after_quantifier = false;
        // Whether the previous token was a lookaround (which may not be quantified).
        let mut after_look = false;
        while let Some(c) = self.peek(0) {
            let start = self.pos;
            match c {
                b'\\' => {
                    self.item_start = self.out.len();
                    self.escape()?;
                }
                b'[' => {
                    self.item_start = self.out.len();
                    self.class()?;
                }
                b'(' => self.group_open()?,
                b')' => {
                    after_look = self.group_close()?;
                    after_quantifier = false;
                    continue;
                }
                b'*' | b'+' | b'?' | b'{' if after_look => {
                    if c != b'{' || counted_repetition(&self.src[self.pos..]).is_some() {
                        return Err(format!(
                            "quantifier at byte {start} after a lookaround is not supported"
                        ));
                    }
                    self.item_start = self.out.len();
                    self.out.push_str(r"\{");
                    self.pos += 1;
                }
                b'*' | b'+' | b'?' => {
                    if after_quantifier && c == b'+' {
                        self.possessive_mark(start)?;
                        self.pos += 1;
                        after_quantifier = false;
                        continue;
                    }
                    self.out.push(char::from(c));
                    self.pos += 1;
                    // `??`, `*?`... make the quantifier lazy; nothing may follow.
                    after_quantifier = !(after_quantifier && c == b'?');
                    continue;
                }
                b'{' => {
                    if let Some(len) = counted_repetition(&self.src[self.pos..]) {
                        // A repetition right after another one is left for `regex`
                        // to report.
                        self.out
                            .push_str(ascii(&self.src[self.pos..self.pos + len]));
                        self.pos += len;
                        after_quantifier = true;
                        continue;
                    }
                    self.item_start = self.out.len();
                    self.out.push_str(r"\{");
                    self.pos += 1;
                }
                b'}' => {
                    self.item_start = self.out.len();
                    self.out.push_str(r"\}");
                    self.pos += 1;
                }
                b'^' => {
                    if self.look_depth == 0 {
                        self.carets.push(self.out.len());
                    }
                    self.item_start = self.out.len();
                    self.out.push('^');
                    self.pos += 1;
                }
                0x80..=0xFF => {
                    self.item_start = self.out.len();
                    self.push_byte(c);
                    self.pos += 1;
                }
                _ => {
                    self.item_start = self.out.len();
                    self.out.push(char::from(c));
                    self.pos += 1;
                }
            }
            after_quantifier = false;
            after_look = false;
        }
        Ok(())
    }

    /// A possessive `+` at byte `at`, after a quantifier: the quantifier stays
    /// (greedy) and an empty marker group follows it in the marked pattern.
    fn possessive_mark(&mut self, at: usize) -> Result<(), String> {
        if self.look_depth > 0 {
            return Err(refuse("possessive quantifier inside a lookaround", at));
        }
        self.possessive = true;
        let n = self.markers;
        self.markers += 1;
        self.edits.push(Edit {
            at: self.out.len(),
            remove: 0,
            insert: format!("(?P<{MARK_POSSESSIVE}{n}>)"),
        });
        Ok(())
    }

    /// `(`: plain groups pass through; lookarounds and atomic groups are marked
    /// (see [`Translation`]); other PCRE-only group kinds are refused.
    fn group_open(&mut self) -> Result<(), String> {
        let at = self.pos;
        let start = self.out.len();
        match self.peek(1) {
            Some(b'?') => {}
            Some(b'*') => return Err(refuse("backtracking control verb `(*...)`", at)),
            _ => {
                self.open_capture(at)?;
                self.out.push('(');
                self.pos += 1;
                return Ok(());
            }
        }
        let look = match (self.peek(2), self.peek(3)) {
            (Some(b'='), _) => Some((LookKind::Ahead, 3)),
            (Some(b'!'), _) => Some((LookKind::NotAhead, 3)),
            (Some(b'<'), Some(b'=')) => Some((LookKind::Behind, 4)),
            (Some(b'<'), Some(b'!')) => Some((LookKind::NotBehind, 4)),
            _ => None,
        };
        if let Some((kind, len)) = look {
            if self.look_depth > 0 {
                return Err(refuse("lookaround inside a lookaround", at));
            }
            self.look_depth += 1;
            let saved = std::mem::take(&mut self.out);
            self.groups.push(Group {
                start,
                at,
                kind: GroupKind::Look { kind, saved },
            });
            self.pos += len;
            return Ok(());
        }
        match self.peek(2) {
            Some(b'#') => {
                // Comment: skipped up to the next `)`.
                let rest = &self.src[self.pos..];
                let Some(end) = rest.iter().position(|&b| b == b')') else {
                    return Err(format!("unterminated comment `(?#` at byte {at}"));
                };
                self.pos += end + 1;
                Ok(())
            }
            Some(b'>') => {
                if self.look_depth > 0 {
                    return Err(refuse("atomic group `(?>` inside a lookaround", at));
                }
                self.possessive = true;
                let n = self.markers;
                self.markers += 1;
                self.edits.push(Edit {
                    at: start,
                    remove: 3,
                    insert: format!("(?P<{MARK_ATOMIC}{n}>"),
                });
                self.groups.push(Group {
                    start,
                    at,
                    kind: GroupKind::Atomic,
                });
                self.out.push_str("(?:");
                self.pos += 3;
                Ok(())
            }
            Some(b'|') => Err(format!(
                "branch reset group `(?|` at byte {at} is not supported"
            )),
            Some(b'(') => Err(refuse("conditional group `(?(`", at)),
            Some(b'C') => Err(format!("callout `(?C` at byte {at} is not supported")),
            Some(b'R') | Some(b'&') | Some(b'+') | Some(b'0'..=b'9') => {
                Err(refuse("recursion or subroutine call", at))
            }
            Some(b'-') if matches!(self.peek(3), Some(b'0'..=b'9')) => {
                Err(refuse("recursion or subroutine call", at))
            }
            Some(b'P') => match self.peek(3) {
                Some(b'=') => Err(refuse("backreference `(?P=name)`", at)),
                Some(b'>') => Err(refuse("subroutine call `(?P>name)`", at)),
                _ => {
                    if self.peek(3) == Some(b'<') {
                        self.open_capture(at)?;
                    } else {
                        self.groups.push(Group {
                            start,
                            at,
                            kind: GroupKind::Plain,
                        });
                    }
                    self.out.push_str("(?P");
                    self.pos += 3;
                    Ok(())
                }
            },
            Some(b'<') => {
                // `(?<name>...)`: a named capture group.
                self.open_capture(at)?;
                self.out.push_str("(?");
                self.pos += 2;
                Ok(())
            }
            Some(b'\'') => {
                // `(?'name'...)`: the `regex` crate spells it `(?<name>...)`.
                let rest = &self.src[self.pos + 3..];
                let Some(end) = rest.iter().position(|&b| b == b'\'') else {
                    return Err(format!("unterminated group name at byte {at}"));
                };
                self.open_capture(at)?;
                self.out.push_str("(?<");
                self.out.push_str(ascii(&rest[..end]));
                self.out.push('>');
                self.pos += 3 + end + 1;
                Ok(())
            }
            _ => {
                // Flags (`(?i)`, `(?i:`, `(?-s)`) and non-capturing groups: the rest
                // is plain text that `regex` understands or rejects. A flag setting
                // such as `(?i)` opens no group.
                let flags = self.src[self.pos + 2..]
                    .iter()
                    .take_while(|b| b.is_ascii_alphabetic() || **b == b'-' || **b == b'^')
                    .count();
                if self.src.get(self.pos + 2 + flags) != Some(&b')') {
                    self.groups.push(Group {
                        start,
                        at,
                        kind: GroupKind::Plain,
                    });
                }
                self.out.push_str("(?");
                self.pos += 2;
                Ok(())
            }
        }
    }

    /// Opens capture group number `capture_count + 1` (its `(` is not written yet).
    fn open_capture(&mut self, at: usize) -> Result<(), String> {
        if self.look_depth > 0 {
            return Err(format!(
                "capture group at byte {at} inside a lookaround is not supported"
            ));
        }
        let before = self.capture_count;
        self.capture_count += 1;
        self.group_texts.push(None);
        self.groups.push(Group {
            start: self.out.len(),
            at,
            kind: GroupKind::Capture {
                n: self.capture_count,
                captures_before: before,
            },
        });
        Ok(())
    }

    /// `)`: closes the innermost group. Returns whether it was a lookaround.
    fn group_close(&mut self) -> Result<bool, String> {
        self.pos += 1;
        let Some(group) = self.groups.pop() else {
            // Unbalanced: left for `regex` to report.
            self.out.push(')');
            return Ok(false);
        };
        match group.kind {
            GroupKind::Look { kind, saved } => {
                let inner = std::mem::replace(&mut self.out, saved);
                self.look_depth -= 1;
                let n = self.lookarounds.len();
                self.lookarounds.push(kind);
                self.edits.push(Edit {
                    at: self.out.len(),
                    remove: 0,
                    insert: format!("(?P<{MARK_LOOK}{n}>{inner})"),
                });
                self.item_start = self.out.len();
                Ok(true)
            }
            GroupKind::Capture { n, captures_before } => {
                self.out.push(')');
                if self.capture_count == n && captures_before + 1 == n {
                    // The sub-pattern, without the group's own parentheses and
                    // name (named groups: after the `>`).
                    let text = &self.out[group.start + 1..self.out.len() - 1];
                    let text = match text.strip_prefix('?') {
                        Some(named) => named.split_once('>').map_or("", |(_, t)| t),
                        None => text,
                    };
                    if let Some(slot) = self.group_texts.get_mut(n - 1) {
                        *slot = Some(text.to_string());
                    }
                }
                self.item_start = group.start;
                Ok(false)
            }
            GroupKind::Plain | GroupKind::Atomic => {
                self.out.push(')');
                self.item_start = group.start;
                Ok(false)
            }
        }
    }

    /// An escape outside a character class.
    fn escape(&mut self) -> Result<(), String> {
        let at = self.pos;
        let Some(n) = self.peek(1) else {
            return Err("the pattern ends with a lone backslash".to_string());
        };
        self.pos += 2;
        match n {
            b'1'..=b'9' => {
                // Refused unless the pattern is in the table of `compat`; the
                // translation (a superset) holds a copy of the group's sub-pattern.
                if self.backreference.is_none() {
                    self.backreference = Some(refuse("backreference", at));
                }
                let text = self
                    .group_texts
                    .get(usize::from(n - b'1'))
                    .and_then(Option::as_ref);
                match text {
                    Some(t) => {
                        let t = t.clone();
                        let _ = write!(self.out, "(?:{t})");
                    }
                    None => self.out.push_str(r"(?:[\x00-\xFF]*)"),
                }
            }
            b'k' | b'g' => return Err(refuse("backreference or subroutine call", at)),
            b'K' => return Err(refuse("match start reset `\\K`", at)),
            b'G' => return Err(refuse("`\\G` anchor", at)),
            b'Z' => {
                return Err(format!(
                    "`\\Z` at byte {at} (end of subject or before a final newline) has no \
                     linear-time equivalent here; use `\\z` or `$`"
                ));
            }
            b'd' | b'D' | b's' | b'S' | b'w' | b'W' | b'b' | b'B' | b'A' | b'z' => {
                self.out.push('\\');
                self.out.push(char::from(n));
            }
            b'h' => {
                let _ = write!(self.out, "[{HSPACE}]");
            }
            b'H' => {
                let _ = write!(self.out, "[^{HSPACE}]");
            }
            b'v' => {
                let _ = write!(self.out, "[{VSPACE}]");
            }
            b'V' => {
                let _ = write!(self.out, "[^{VSPACE}]");
            }
            b'R' => {
                let _ = write!(self.out, "(?:\\x0D\\x0A|[{VSPACE}])");
            }
            b'N' => self.out.push_str(r"[^\x0A]"),
            b'C' => self.out.push_str(r"[\x00-\xFF]"),
            b'Q' => {
                while self.pos < self.src.len() {
                    if self.src[self.pos] == b'\\' && self.peek(1) == Some(b'E') {
                        self.pos += 2;
                        break;
                    }
                    let b = self.src[self.pos];
                    self.item_start = self.out.len();
                    self.push_byte(b);
                    self.pos += 1;
                }
            }
            b'E' => {}
            _ => {
                let b = self.byte_escape(n, at)?;
                self.push_byte(b);
            }
        }
        Ok(())
    }

    /// Escapes that stand for one byte: `n` is the character after the backslash,
    /// `self.pos` is just after it. Reads any further digits.
    fn byte_escape(&mut self, n: u8, at: usize) -> Result<u8, String> {
        Ok(match n {
            b'0'..=b'7' => {
                // Octal: up to three digits in all (`\0nn` anywhere, `\nnn` inside
                // classes, where `\1` cannot be a backreference).
                let max_more = 2;
                let mut value = u32::from(n - b'0');
                let mut taken = 0;
                while taken < max_more {
                    match self.peek(0) {
                        Some(d @ b'0'..=b'7') => {
                            value = value * 8 + u32::from(d - b'0');
                            self.pos += 1;
                            taken += 1;
                        }
                        _ => break,
                    }
                }
                u8::try_from(value)
                    .map_err(|_| format!("octal escape at byte {at} is larger than 0xFF"))?
            }
            b'x' => {
                if self.peek(0) == Some(b'{') {
                    let rest = &self.src[self.pos + 1..];
                    let Some(end) = rest.iter().position(|&b| b == b'}') else {
                        return Err(format!("unterminated `\\x{{` at byte {at}"));
                    };
                    let digits = &rest[..end];
                    if digits.is_empty() || !digits.iter().all(u8::is_ascii_hexdigit) {
                        return Err(format!("invalid hexadecimal escape at byte {at}"));
                    }
                    let value = u32::from_str_radix(ascii(digits), 16).map_err(|_| {
                        format!("hexadecimal escape at byte {at} is larger than 0xFF")
                    })?;
                    self.pos += end + 2;
                    u8::try_from(value).map_err(|_| {
                        format!(
                            "hexadecimal escape at byte {at} is larger than 0xFF (patterns \
                             are byte strings, as in ModSecurity)"
                        )
                    })?
                } else {
                    let mut value = 0u8;
                    for _ in 0..2 {
                        match self.peek(0) {
                            Some(d) if d.is_ascii_hexdigit() => {
                                value = value * 16 + hex_value(d);
                                self.pos += 1;
                            }
                            _ => break,
                        }
                    }
                    value
                }
            }
            b'o' => {
                if self.peek(0) != Some(b'{') {
                    return Err(format!("`\\o` at byte {at} must be followed by `{{`"));
                }
                let rest = &self.src[self.pos + 1..];
                let Some(end) = rest.iter().position(|&b| b == b'}') else {
                    return Err(format!("unterminated `\\o{{` at byte {at}"));
                };
                let digits = &rest[..end];
                if digits.is_empty() || !digits.iter().all(|d| (b'0'..=b'7').contains(d)) {
                    return Err(format!("invalid octal escape at byte {at}"));
                }
                let value = u32::from_str_radix(ascii(digits), 8)
                    .ok()
                    .and_then(|v| u8::try_from(v).ok())
                    .ok_or_else(|| format!("octal escape at byte {at} is larger than 0xFF"))?;
                self.pos += end + 2;
                value
            }
            b'c' => {
                let Some(x) = self.peek(0).filter(u8::is_ascii) else {
                    return Err(format!(
                        "`\\c` at byte {at} must be followed by an ASCII character"
                    ));
                };
                self.pos += 1;
                x.to_ascii_uppercase() ^ 0x40
            }
            b'e' => 0x1B,
            b'a' => 0x07,
            b'f' => 0x0C,
            b'n' => 0x0A,
            b'r' => 0x0D,
            b't' => 0x09,
            b'p' | b'P' | b'X' => {
                return Err(format!(
                    "Unicode escape `\\{}` at byte {at} is not supported (patterns are \
                     byte strings, as in ModSecurity)",
                    char::from(n)
                ));
            }
            _ if n.is_ascii_alphanumeric() => {
                return Err(format!(
                    "unrecognized escape `\\{}` at byte {at}",
                    char::from(n)
                ));
            }
            // Any other escaped byte (punctuation, space, non-ASCII) is itself.
            _ => n,
        })
    }

    /// A character class starting at `[`.
    fn class(&mut self) -> Result<(), String> {
        let at = self.pos;
        self.pos += 1;
        let negated = self.peek(0) == Some(b'^');
        if negated {
            self.pos += 1;
        }
        let mut items: Vec<ClassItem> = Vec::new();
        let mut first = true;
        loop {
            let Some(c) = self.peek(0) else {
                return Err(format!("missing `]` for the character class at byte {at}"));
            };
            if c == b']' && !first {
                self.pos += 1;
                break;
            }
            first = false;
            if c == b'\\' && self.peek(1) == Some(b'Q') {
                self.pos += 2;
                while self.pos < self.src.len() {
                    if self.src[self.pos] == b'\\' && self.peek(1) == Some(b'E') {
                        self.pos += 2;
                        break;
                    }
                    items.push(ClassItem::Byte(self.src[self.pos]));
                    self.pos += 1;
                }
                continue;
            }
            if c == b'\\' && self.peek(1) == Some(b'E') {
                self.pos += 2;
                continue;
            }
            let item = self.class_item()?;
            // A range `a-z` needs single bytes on both sides and no `]` after `-`.
            if let ClassItem::Byte(lo) = item
                && self.peek(0) == Some(b'-')
                && !matches!(self.peek(1), Some(b']') | None)
            {
                self.pos += 1;
                match self.class_item()? {
                    ClassItem::Byte(hi) => {
                        if lo > hi {
                            return Err(format!(
                                "range out of order in the character class at byte {at}"
                            ));
                        }
                        let mut s = String::new();
                        push_class_byte(&mut s, lo);
                        s.push('-');
                        push_class_byte(&mut s, hi);
                        items.push(ClassItem::Set(s));
                    }
                    other => {
                        // PCRE reads `-` before a class escape as a literal.
                        items.push(ClassItem::Byte(lo));
                        items.push(ClassItem::Byte(b'-'));
                        items.push(other);
                    }
                }
                continue;
            }
            items.push(item);
        }
        self.out.push('[');
        if negated {
            self.out.push('^');
        }
        for item in items {
            match item {
                ClassItem::Byte(b) => push_class_byte(&mut self.out, b),
                ClassItem::Set(s) => self.out.push_str(&s),
            }
        }
        self.out.push(']');
        Ok(())
    }

    /// One element of a class (not a range), at `self.pos`.
    fn class_item(&mut self) -> Result<ClassItem, String> {
        let at = self.pos;
        let Some(c) = self.peek(0) else {
            return Err("missing `]` for a character class".to_string());
        };
        if c == b'[' && self.peek(1) == Some(b':') {
            // POSIX class `[:name:]` / `[:^name:]`, else a literal `[`.
            let rest = &self.src[self.pos + 2..];
            let end = rest.windows(2).position(|w| w == b":]");
            let name = end.map(|e| &rest[..e]);
            let bare = name.map(|n| n.strip_prefix(b"^").unwrap_or(n));
            if let (Some(end), Some(name), Some(bare)) = (end, name, bare)
                && !bare.is_empty()
                && bare.iter().all(u8::is_ascii_alphabetic)
            {
                if !POSIX_CLASSES.contains(&ascii(bare)) {
                    return Err(format!(
                        "unknown POSIX class `[:{}:]` at byte {at}",
                        String::from_utf8_lossy(name)
                    ));
                }
                self.pos += 2 + end + 2;
                return Ok(ClassItem::Set(format!("[:{}:]", ascii(name))));
            }
        }
        if c != b'\\' {
            self.pos += 1;
            return Ok(ClassItem::Byte(c));
        }
        let Some(n) = self.peek(1) else {
            return Err("the pattern ends with a lone backslash".to_string());
        };
        self.pos += 2;
        Ok(match n {
            b'd' | b'D' | b's' | b'S' | b'w' | b'W' => {
                ClassItem::Set(format!("\\{}", char::from(n)))
            }
            b'h' => ClassItem::Set(HSPACE.to_string()),
            b'v' => ClassItem::Set(VSPACE.to_string()),
            b'H' => ClassItem::Set(format!("[^{HSPACE}]")),
            b'V' => ClassItem::Set(format!("[^{VSPACE}]")),
            b'b' => ClassItem::Byte(0x08),
            b'8' | b'9' => ClassItem::Byte(n),
            b'B' | b'R' | b'N' | b'A' | b'z' | b'Z' | b'G' | b'K' | b'k' | b'g' | b'C' => {
                return Err(format!(
                    "escape `\\{}` at byte {at} is not allowed in a character class",
                    char::from(n)
                ));
            }
            _ => ClassItem::Byte(self.byte_escape(n, at)?),
        })
    }
}

const POSIX_CLASSES: [&str; 14] = [
    "alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph", "lower", "print", "punct",
    "space", "upper", "word", "xdigit",
];

/// A byte inside a class: alphanumerics as themselves, everything else as `\xHH`
/// (so that `regex`'s class operators `[`, `&&`, `--`, `~~` never appear).
fn push_class_byte(out: &mut String, b: u8) {
    if b.is_ascii_alphanumeric() {
        out.push(char::from(b));
    } else {
        let _ = write!(out, "\\x{b:02X}");
    }
}

/// If `s` starts with a PCRE counted repetition (`{n}`, `{n,}`, `{n,m}`), its length.
fn counted_repetition(s: &[u8]) -> Option<usize> {
    let mut i = 1;
    let digits = |i: &mut usize| {
        let start = *i;
        while s.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i > start
    };
    if !digits(&mut i) {
        return None;
    }
    if s.get(i) == Some(&b',') {
        i += 1;
        digits(&mut i);
    }
    (s.get(i) == Some(&b'}')).then_some(i + 1)
}

fn hex_value(d: u8) -> u8 {
    match d {
        b'0'..=b'9' => d - b'0',
        b'a'..=b'f' => d - b'a' + 10,
        _ => d - b'A' + 10,
    }
}

/// Bytes known to be ASCII (checked by the caller's grammar) as `&str`; anything
/// else is shown lossily, which only affects error messages.
fn ascii(b: &[u8]) -> &str {
    std::str::from_utf8(b).unwrap_or("\u{FFFD}")
}
