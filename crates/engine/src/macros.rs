//! Macro expansion: `%{tx.anomaly_score}`, `%{MATCHED_VAR}`, `%{REQUEST_HEADERS.host}`.
//!
//! Macros are parsed once at load time into a [`Macro`]; at run time only the variable
//! lookups happen.

use crate::variables::Var;
use std::borrow::Cow;

/// A piece of text with macros, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Macro {
    parts: Vec<Part>,
    text: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Literal(Vec<u8>),
    Var { var: Var, key: Option<Vec<u8>> },
}

/// Looks up the value a macro names. Implemented by the transaction.
pub trait MacroContext {
    /// The first value of `var` (with `key` for collections), or `None` when unset.
    fn lookup(&self, var: Var, key: Option<&[u8]>) -> Option<Cow<'_, [u8]>>;
}

impl Macro {
    /// Parses text. A `%{...}` that names an unknown variable is an error; text
    /// without `%{` is a plain literal.
    pub fn parse(text: &str) -> Result<Macro, String> {
        let bytes = text.as_bytes();
        let mut parts = Vec::new();
        let mut lit = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%'
                && bytes.get(i + 1) == Some(&b'{')
                && let Some(end) = bytes[i + 2..].iter().position(|&b| b == b'}')
            {
                let inner = &text[i + 2..i + 2 + end];
                let (name, key) = match inner.find(['.', ':']) {
                    Some(p) => (&inner[..p], Some(&inner[p + 1..])),
                    None => (inner, None),
                };
                let var = Var::from_name(name)
                    .ok_or_else(|| format!("unknown variable {name:?} in macro %{{{inner}}}"))?;
                if !lit.is_empty() {
                    parts.push(Part::Literal(std::mem::take(&mut lit)));
                }
                parts.push(Part::Var {
                    var,
                    key: key.map(|k| k.to_ascii_lowercase().into_bytes()),
                });
                i += end + 3;
                continue;
            }
            lit.push(bytes[i]);
            i += 1;
        }
        if !lit.is_empty() {
            parts.push(Part::Literal(lit));
        }
        Ok(Macro {
            parts,
            text: text.to_string(),
        })
    }

    /// The text as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The text, when it has no macro in it.
    pub fn as_literal(&self) -> Option<&[u8]> {
        match self.parts.as_slice() {
            [] => Some(&[]),
            [Part::Literal(l)] => Some(l),
            _ => None,
        }
    }

    /// The literal text before the first macro (all of it when there is none).
    pub fn literal_prefix(&self) -> &[u8] {
        match self.parts.first() {
            Some(Part::Literal(l)) => l,
            Some(Part::Var { .. }) | None => &[],
        }
    }

    /// True when the text has no macro in it.
    pub fn is_literal(&self) -> bool {
        self.parts.iter().all(|p| matches!(p, Part::Literal(_)))
    }

    /// True when the text names `var` anywhere.
    pub fn uses(&self, var: Var) -> bool {
        self.parts
            .iter()
            .any(|p| matches!(p, Part::Var { var: v, .. } if *v == var))
    }

    /// Expands the macros. Unset variables expand to the empty string (ModSecurity v3).
    pub fn expand<'a>(&'a self, ctx: &'a dyn MacroContext) -> Cow<'a, [u8]> {
        match self.parts.as_slice() {
            [] => Cow::Borrowed(&[]),
            [Part::Literal(l)] => Cow::Borrowed(l),
            // A lone variable needs no copy.
            [Part::Var { var, key }] => ctx
                .lookup(*var, key.as_deref())
                .unwrap_or(Cow::Borrowed(&[])),
            parts => {
                // Room for the literals and a few short values, so that the usual
                // expansion allocates once.
                let literals: usize = parts
                    .iter()
                    .map(|p| match p {
                        Part::Literal(l) => l.len(),
                        Part::Var { .. } => 24,
                    })
                    .sum();
                let mut out = Vec::with_capacity(literals);
                for p in parts {
                    match p {
                        Part::Literal(l) => out.extend_from_slice(l),
                        Part::Var { var, key } => {
                            if let Some(v) = ctx.lookup(*var, key.as_deref()) {
                                out.extend_from_slice(&v);
                            }
                        }
                    }
                }
                Cow::Owned(out)
            }
        }
    }

    /// The first `max` bytes (or fewer, when the expansion is shorter) of
    /// [`Macro::expand`]'s result: no more than `max` bytes of the variables' values are
    /// copied, so a bounded view of a macro that names a huge value stays cheap.
    pub fn expand_prefix<'a>(&'a self, ctx: &'a dyn MacroContext, max: usize) -> Cow<'a, [u8]> {
        if let [] | [Part::Literal(_)] | [Part::Var { .. }] = self.parts.as_slice() {
            return match self.expand(ctx) {
                Cow::Borrowed(b) => Cow::Borrowed(&b[..b.len().min(max)]),
                Cow::Owned(mut v) => {
                    v.truncate(max);
                    Cow::Owned(v)
                }
            };
        }
        let mut out = Vec::new();
        for p in &self.parts {
            let room = max - out.len();
            if room == 0 {
                break;
            }
            match p {
                Part::Literal(l) => out.extend_from_slice(&l[..l.len().min(room)]),
                Part::Var { var, key } => {
                    if let Some(v) = ctx.lookup(*var, key.as_deref()) {
                        out.extend_from_slice(&v[..v.len().min(room)]);
                    }
                }
            }
        }
        Cow::Owned(out)
    }

    /// Expands to a string, replacing invalid UTF-8 lossily.
    pub fn expand_string(&self, ctx: &dyn MacroContext) -> String {
        utf8_lossy(self.expand(ctx))
    }
}

/// `bytes` as a string, invalid UTF-8 replaced as [`String::from_utf8_lossy`] does.
/// Valid text (the usual case) is checked with the standard library's word-at-a-time
/// validation and kept without a copy when owned; the lossy walk, byte by byte, runs
/// only on invalid input (a 1 MiB matched value costs ten times less this way).
pub(crate) fn utf8_lossy(bytes: Cow<'_, [u8]>) -> String {
    match String::from_utf8(bytes.into_owned()) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Ctx;
    impl MacroContext for Ctx {
        fn lookup(&self, var: Var, key: Option<&[u8]>) -> Option<Cow<'_, [u8]>> {
            match (var, key) {
                (Var::Tx, Some(b"score")) => Some(Cow::Borrowed(b"5")),
                (Var::MatchedVar, None) => Some(Cow::Borrowed(b"x")),
                _ => None,
            }
        }
    }

    #[test]
    fn utf8_lossy_is_the_standard_lossy_conversion() {
        let mut rng = crate::body::fuzz::XorShift(0x5eed_cafe);
        for _ in 0..5_000 {
            let v = rng.value_of(&crate::body::fuzz::UTF8_PIECES, 12, 0);
            let want = String::from_utf8_lossy(&v).into_owned();
            assert_eq!(utf8_lossy(Cow::Borrowed(&v)), want, "{v:?}");
            assert_eq!(utf8_lossy(Cow::Owned(v.clone())), want, "{v:?}");
        }
    }

    #[test]
    fn expands() {
        let m = Macro::parse("a %{TX.score} b %{matched_var} %{tx.nope}!").unwrap();
        assert_eq!(&*m.expand(&Ctx), b"a 5 b x !");
        assert!(!m.is_literal());
        let l = Macro::parse("plain 100%").unwrap();
        assert!(l.is_literal());
        assert_eq!(&*l.expand(&Ctx), b"plain 100%");
        assert!(Macro::parse("%{bogus.x}").is_err());
        assert_eq!(
            &*Macro::parse("%{unterminated").unwrap().expand(&Ctx),
            b"%{unterminated"
        );
    }

    /// A bounded expansion is the whole expansion's prefix, at every bound.
    #[test]
    fn expands_a_prefix() {
        for text in [
            "a %{TX.score} b %{matched_var} %{tx.nope}!",
            "%{matched_var}",
            "plain",
            "",
        ] {
            let m = Macro::parse(text).unwrap();
            let whole = m.expand(&Ctx).into_owned();
            for max in 0..whole.len() + 3 {
                assert_eq!(
                    &*m.expand_prefix(&Ctx, max),
                    &whole[..whole.len().min(max)],
                    "{text:?} cut to {max}"
                );
            }
        }
    }
}
