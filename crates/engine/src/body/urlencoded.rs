//! `application/x-www-form-urlencoded` bodies and query strings.

use super::Arg;

/// Splits `input` at `separator` and url-decodes names and values as ModSecurity does.
/// Returns the pairs and whether an invalid %-encoding was seen (URLENCODED_ERROR).
pub fn parse(input: &[u8], separator: u8, max_args: usize) -> (Vec<Arg>, bool) {
    let _ = (input, separator, max_args);
    unimplemented!("urlencoded")
}
