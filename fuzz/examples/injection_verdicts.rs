//! Palisade's side of the libinjection differential test
//! (`differential/libinjection_diff.py`): reads one hex-encoded value per line on
//! standard input and prints, per value, `SQLI FINGERPRINT XSS`: `1` or `0` for each
//! verdict of `@detectSQLi` and `@detectXSS`, and the SQLi fingerprint (`-` when the
//! value is not SQLi). A line that is not hex gets `error`.

use engine::internals::operators::injection::{detect_sqli, detect_xss};
use std::io::{self, BufRead, BufWriter, Write};

fn unhex(line: &str) -> Option<Vec<u8>> {
    let line = line.trim();
    if !line.len().is_multiple_of(2) {
        return None;
    }
    (0..line.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(line.get(i..i + 2)?, 16).ok())
        .collect()
}

fn main() -> io::Result<()> {
    let stdin = io::stdin().lock();
    let mut out = BufWriter::new(io::stdout().lock());
    for line in stdin.lines() {
        let line = line?;
        let Some(value) = unhex(&line) else {
            writeln!(out, "error")?;
            continue;
        };
        let sqli = detect_sqli(&value);
        let fingerprint = sqli.map_or_else(
            || "-".to_string(),
            |f| String::from_utf8_lossy(f.as_bytes()).into_owned(),
        );
        writeln!(
            out,
            "{} {} {}",
            u8::from(sqli.is_some()),
            fingerprint,
            u8::from(detect_xss(&value))
        )?;
    }
    out.flush()
}
