//! `@eq`, `@ge`, `@gt`, `@le`, `@lt`: integer comparisons.
//!
//! Both sides are read the way libmodsecurity reads them (`std::stoi`): optional
//! leading C whitespace, an optional sign, then decimal digits up to the first
//! non-digit. A value without digits, or one outside the 32-bit signed range, counts
//! as 0.

use super::pm::is_c_space;

/// Which comparison an operator makes (input on the left, argument on the right).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    /// `@eq`: input == argument.
    Eq,
    /// `@ge`: input >= argument.
    Ge,
    /// `@gt`: input > argument.
    Gt,
    /// `@le`: input <= argument.
    Le,
    /// `@lt`: input < argument.
    Lt,
}

impl Comparison {
    /// Whether `input`, read as an integer, compares to `argument` this way.
    pub fn holds(self, input: &[u8], argument: i32) -> bool {
        let value = parse_int(input);
        match self {
            Comparison::Eq => value == argument,
            Comparison::Ge => value >= argument,
            Comparison::Gt => value > argument,
            Comparison::Le => value <= argument,
            Comparison::Lt => value < argument,
        }
    }
}

/// Reads an integer like `std::stoi`, with 0 where `stoi` would throw.
pub fn parse_int(s: &[u8]) -> i32 {
    let mut i = s.iter().position(|&b| !is_c_space(b)).unwrap_or(s.len());
    let negative = match s.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let mut value: i64 = 0;
    let mut digits = 0usize;
    for &b in &s[i..] {
        if !b.is_ascii_digit() {
            break;
        }
        digits += 1;
        value = value * 10 + i64::from(b - b'0');
        if value > i64::from(i32::MAX) + 1 {
            // Out of range for int: stoi throws, ModSecurity uses 0.
            return 0;
        }
    }
    if digits == 0 {
        return 0;
    }
    let value = if negative { -value } else { value };
    i32::try_from(value).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsing() {
        assert_eq!(parse_int(b"15"), 15);
        assert_eq!(parse_int(b"  \t-7abc"), -7);
        assert_eq!(parse_int(b"+3"), 3);
        assert_eq!(parse_int(b"abc"), 0);
        assert_eq!(parse_int(b""), 0);
        assert_eq!(parse_int(b"-"), 0);
        assert_eq!(parse_int(b"- 5"), 0);
        assert_eq!(parse_int(b"12.9"), 12);
        assert_eq!(parse_int(b"0x10"), 0);
        assert_eq!(parse_int(b"2147483647"), i32::MAX);
        assert_eq!(parse_int(b"-2147483648"), i32::MIN);
        assert_eq!(parse_int(b"2147483648"), 0);
        assert_eq!(parse_int(b"99999999999999999999999"), 0);
        assert_eq!(parse_int(b"\x00 5"), 0);
        assert_eq!(parse_int(b"\xFF5"), 0);
        assert_eq!(parse_int(b"0005"), 5);
    }

    #[test]
    fn comparisons() {
        // SecRule &REQUEST_HEADERS_NAMES "@eq 15"
        assert!(Comparison::Eq.holds(b"15", 15));
        assert!(!Comparison::Eq.holds(b"16", 15));
        // Non-numeric input is 0.
        assert!(Comparison::Eq.holds(b"abc", 0));
        assert!(Comparison::Lt.holds(b"", 1));
        assert!(Comparison::Ge.holds(b"5", 5));
        assert!(!Comparison::Gt.holds(b"5", 5));
        assert!(Comparison::Gt.holds(b"6", 5));
        assert!(Comparison::Le.holds(b"-1", 0));
        assert!(!Comparison::Lt.holds(b"10", 2));
    }
}
