//! `@detectSQLi` and `@detectXSS`: Palisade's wrapper around libinjection.
//!
//! Both detectors must answer every input; a SQLi fingerprint is 1 to 8 bytes of
//! libinjection's token type letters. The verdicts are compared with the C library
//! by `differential/libinjection_diff.py` (see the README), not here: the C library is
//! not part of the build.

use engine::internals::operators::injection::{detect_sqli, detect_xss};

/// libinjection's token types: the only bytes a fingerprint holds.
const TOKEN_TYPES: &[u8] = b"kUBEtfn1vsoc&A(){}.,:;TX?F\\";

/// Runs both detectors on one value.
pub fn fuzz_injection(data: &[u8]) {
    if let Some(fp) = detect_sqli(data) {
        let bytes = fp.as_bytes();
        assert!(
            (1..=8).contains(&bytes.len()),
            "fingerprint length {}",
            bytes.len()
        );
        assert!(
            bytes.iter().all(|b| TOKEN_TYPES.contains(b)),
            "fingerprint {:?} holds a byte that is no token type",
            String::from_utf8_lossy(bytes)
        );
    }
    let _ = detect_xss(data);
}
