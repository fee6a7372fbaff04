//! `@verifyCC`: find credit card number candidates with a regex, then keep only
//! those that pass the Luhn checksum.
//!
//! As in libmodsecurity, the argument is a regex (PCRE syntax, translated like
//! `@rx`); the operator looks for a match from every start offset in turn and
//! matches as soon as one candidate's digits pass the Luhn check (other bytes in
//! the candidate, such as spaces or dashes, are skipped; a candidate without digits
//! fails). The capture (`TX.0`) is the candidate that passed.

use super::Captures;
use super::rx::{Rx, fill_captures};

/// A compiled `@verifyCC` operator.
#[derive(Debug, Clone)]
pub struct VerifyCc {
    rx: Rx,
}

impl VerifyCc {
    /// Compiles the candidate regex.
    pub fn new(pattern: &str) -> Result<VerifyCc, String> {
        let rx = Rx::new(pattern).map_err(|e| e.to_string())?;
        if !rx.regex_is_exact() {
            return Err("a lookaround, possessive quantifier or backreference that \
                 needs Palisade's guarded evaluation is not supported in the candidate \
                 regex of @verifyCC"
                .to_string());
        }
        Ok(VerifyCc { rx })
    }

    /// The candidate regex.
    pub fn rx(&self) -> &Rx {
        &self.rx
    }

    /// Whether some candidate in `input` passes the Luhn check.
    pub fn matches(&self, input: &[u8], captures: Option<&mut Captures>) -> bool {
        let regex = self.rx.regex();
        let mut start = 0;
        while start <= input.len() {
            let Some(m) = regex.find(regex_automata::Input::new(input).range(start..)) else {
                return false;
            };
            let candidate = &input[m.start()..m.end()];
            if luhn(candidate) {
                if let Some(out) = captures {
                    fill_captures(out, std::iter::once(candidate));
                }
                return true;
            }
            // libmodsecurity retries from every offset; a search from any offset up
            // to this match's start finds this same match, so skip past its start.
            start = m.start() + 1;
        }
        false
    }
}

/// The Luhn (mod 10) check over the decimal digits of `s`, other bytes skipped.
pub fn luhn(s: &[u8]) -> bool {
    let mut sum = 0u32;
    let mut digits = 0usize;
    for &b in s.iter().rev().filter(|b| b.is_ascii_digit()) {
        let d = u32::from(b - b'0');
        sum += if digits % 2 == 1 {
            let twice = d * 2;
            if twice > 9 { twice - 9 } else { twice }
        } else {
            d
        };
        digits += 1;
    }
    digits > 0 && sum.is_multiple_of(10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn luhn_checksum() {
        assert!(luhn(b"4111111111111111"));
        assert!(luhn(b"4111 1111 1111 1111"));
        assert!(luhn(b"5500-0000-0000-0004"));
        assert!(luhn(b"378282246310005"));
        assert!(!luhn(b"4111111111111112"));
        assert!(!luhn(b""));
        assert!(!luhn(b"abc"));
        assert!(luhn(b"0"));
    }

    #[test]
    fn reference_manual_example() {
        // SecRule ARGS "@verifyCC \d{13,16}"
        let v = VerifyCc::new(r"\d{13,16}").expect("compile");
        let mut caps = Captures::new();
        assert!(v.matches(b"card=4111111111111111&x=1", Some(&mut caps)));
        assert_eq!(caps, vec![b"4111111111111111".to_vec()]);
        assert!(!v.matches(b"", None));
        // With word boundaries only whole 16-digit numbers are candidates.
        let whole = VerifyCc::new(r"\b\d{16}\b").expect("compile");
        assert!(!whole.matches(b"card=4111111111111112", None));
        assert!(whole.matches(b"card=4111111111111111", None));
        // The leftmost 16 digits fail, but a later offset finds a valid number.
        assert!(v.matches(b"94111111111111111", None));
    }
}
