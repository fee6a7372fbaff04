//! The SecLang parser and the ruleset compiler.
//!
//! The input is a rule file. It is read through an in-memory file source (so an
//! `Include` or `@pmFromFile` never touches the disk: it names the input itself, a
//! small data file, or nothing), parsed, and compiled into a ruleset. Either step
//! may refuse the file; neither may panic. The pieces of each line are also given to
//! the stand-alone parsers of variables, operators and actions, which the engine
//! uses for the same syntax inside actions (`ctl:ruleRemoveTargetById=1;ARGS:x`).

use engine::RulesetBuilder;
use seclang::MemorySource;
use std::path::Path;
use std::sync::Arc;

/// Where the input is stored in the in-memory file source.
const MAIN: &str = "/fuzz/main.conf";

/// Parses and compiles one rule file.
pub fn fuzz_seclang(data: &[u8]) {
    let mut source = MemorySource::new();
    source.insert(MAIN, data);
    // Something for `Include`, `@pmFromFile` and `@ipMatchFromFile` to find.
    source.insert("/fuzz/words.data", &b"union\nselect\n# comment\n\n"[..]);
    source.insert("/fuzz/nets.data", &b"10.0.0.0/8\n192.168.1.1\n::1\n"[..]);
    source.insert(
        "/fuzz/inc/a.conf",
        &b"SecRule ARGS \"@rx a\" \"id:9001,pass\"\n"[..],
    );
    let source = Arc::new(source);

    // The parser alone, then parser and compiler together.
    let _ = seclang::parse_file(source.as_ref(), Path::new(MAIN));
    let mut builder = RulesetBuilder::new(source);
    if builder.add_file(Path::new(MAIN)).is_ok() {
        let _ = builder.build();
    }

    // The stand-alone parsers of the rule pieces, on every line's words.
    let text = String::from_utf8_lossy(data);
    for line in text.lines().take(64) {
        let mut words = line.splitn(3, ' ');
        let first = words.next().unwrap_or_default();
        let second = words.next().unwrap_or_default();
        let third = words.next().unwrap_or_default();
        let _ = seclang::rule::parse_variables(first);
        let _ = seclang::rule::parse_operator(second);
        let _ = seclang::rule::parse_actions(third);
        let _ = seclang::rule::parse_id_range(first);
        let _ = seclang::rule::parse_id_list(line);
    }
}
