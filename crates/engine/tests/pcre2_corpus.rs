//! Every static `@rx` pattern of CRS v4.28.0 and CRS 3.3.4 gives PCRE2's verdict on
//! generated values: the corpus `tests/data/pcre2-verdicts.jsonl.gz`, made once by
//! `bench/pcre2/corpus.py` with Debian's PCRE2 10.42 and libmodsecurity v3's flags
//! (`PCRE2_DOTALL | PCRE2_MULTILINE`, no UTF mode), holds for each pattern (as the
//! engine's loader parsed it) about 32 values and, for each, whether PCRE2 matches and
//! the span of group 0. The test compiles each pattern with the `@rx` operator and
//! requires the same verdict, with and without captures, and the same group 0.
//!
//! The test needs neither PCRE2 nor CRS: it reads the committed file.

use engine::internals::operators::{Captures, CompileContext, Operator};
use std::io::Read;
use std::path::Path;

/// Differences that are known and documented, as (pattern id, what differs, why).
/// Only group 0 differences may be listed: a verdict difference is always a bug.
const KNOWN: &[(&str, &str)] = &[];

fn unescape(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' {
            if b.get(i + 1) == Some(&b'\\') {
                out.push(b'\\');
                i += 2;
            } else {
                let hex = std::str::from_utf8(&b[i + 2..i + 4]).expect("escape");
                out.push(u8::from_str_radix(hex, 16).expect("\\xHH"));
                i += 4;
            }
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

fn show(v: &[u8]) -> String {
    v.escape_ascii().to_string()
}

#[test]
fn crs_patterns_give_pcre2_verdicts() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/pcre2-verdicts.jsonl.gz");
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&path).expect("the corpus"))
        .read_to_string(&mut text)
        .expect("gzip");
    let mut lines = text.lines();
    let header: serde_json::Value = serde_json::from_str(lines.next().expect("header")).unwrap();
    let source = seclang::MemorySource::new();
    let ctx = CompileContext {
        source: &source,
        base_dir: Path::new("."),
    };
    let (mut patterns, mut values, mut matches) = (0, 0, 0);
    let mut differences: Vec<String> = Vec::new();
    let mut known_seen = 0;
    for line in lines {
        let entry: serde_json::Value = serde_json::from_str(line).expect("a corpus line");
        let ids: Vec<&str> = entry["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i.as_str().unwrap())
            .collect();
        let pattern = entry["pattern"].as_str().unwrap();
        patterns += 1;
        let op = match Operator::compile("rx", pattern, &ctx) {
            Ok(op) => op,
            Err(e) => {
                differences.push(format!("{ids:?}: the engine refuses the pattern: {e}"));
                continue;
            }
        };
        for v in entry["values"].as_array().unwrap() {
            let v = v.as_array().unwrap();
            let value = unescape(v[0].as_str().unwrap());
            let want = (v.len() == 3).then(|| {
                let (s, e) = (v[1].as_u64().unwrap(), v[2].as_u64().unwrap());
                value[s as usize..e as usize].to_vec()
            });
            values += 1;
            matches += usize::from(want.is_some());
            let mut caps = Captures::new();
            let got = op.matches(&value, Some(&mut caps));
            let plain = op.matches(&value, None);
            if got != want.is_some() || plain != got {
                differences.push(format!(
                    "{ids:?} value `{}`: PCRE2 {}, engine {} (without captures: {})",
                    show(&value),
                    if want.is_some() {
                        "matches"
                    } else {
                        "does not match"
                    },
                    if got { "matches" } else { "does not match" },
                    if plain { "matches" } else { "does not match" },
                ));
                continue;
            }
            if let Some(want) = want {
                let group0 = caps.first().map(Vec::as_slice).unwrap_or_default();
                if group0 != want.as_slice() {
                    if let Some((id, why)) = KNOWN.iter().find(|(id, _)| ids.contains(id)) {
                        known_seen += 1;
                        eprintln!("known ({id}: {why}): value `{}`", show(&value));
                        continue;
                    }
                    differences.push(format!(
                        "{ids:?} value `{}`: PCRE2's group 0 `{}`, the engine's `{}`",
                        show(&value),
                        show(&want),
                        show(group0),
                    ));
                }
            }
        }
    }
    eprintln!(
        "pcre2 corpus: {patterns} patterns, {values} values ({matches} match), \
         {known_seen} known group 0 differences, {} differences",
        differences.len()
    );
    assert_eq!(
        patterns, header["patterns"],
        "the corpus's header and its lines disagree"
    );
    assert_eq!(values, header["values"]);
    assert!(
        differences.is_empty(),
        "{} differences from PCRE2:\n{}",
        differences.len(),
        differences.join("\n")
    );
}
