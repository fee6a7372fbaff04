//! Expected values come from PCRE2 10.42 (`DOTALL | MULTILINE`, no UTF), the
//! engine libmodsecurity 3.0.9 uses.

use super::TABLE;
use crate::rx::tests::{err, rx};
use crate::vocab::Captures;

/// Checks the verdict and the captures PCRE gives for each input
/// (`None`: no match).
/// A value and what PCRE captures for it (`None`: no match).
type Case<'a> = (&'a [u8], Option<&'a [&'a [u8]]>);

fn check(p: &str, cases: &[Case]) {
    let r = rx(p);
    for (input, want) in cases {
        let mut caps = Captures::new();
        let got = r.matches(input, Some(&mut caps));
        assert_eq!(got, r.matches(input, None), "{p:?} on {input:?}");
        match want {
            None => assert!(!got, "{p:?} matched {input:?}: {caps:?}"),
            Some(groups) => {
                assert!(got, "{p:?} did not match {input:?}");
                let want: Vec<Vec<u8>> = groups.iter().map(|g| g.to_vec()).collect();
                assert_eq!(caps, want, "{p:?} on {input:?}");
            }
        }
    }
}

#[test]
fn possessive_disjoint_from_what_follows_is_greedy() {
    for p in [
        r"a*+b",
        r"a?+b",
        r"a{1,3}+b",
        r"(?>a+)b",
        r"\s*+;",
        r"(?>\s*)x",
    ] {
        assert!(rx(p).regex_is_exact(), "{p}");
    }
    check(
        r"a*+b",
        &[
            (b"aab", Some(&[b"aab"])),
            (b"b", Some(&[b"b"])),
            (b"aa", None),
        ],
    );
    check(
        r"a?+b",
        &[
            (b"ab", Some(&[b"ab"])),
            (b"aab", Some(&[b"ab"])),
            (b"b", Some(&[b"b"])),
        ],
    );
    check(
        r"a{1,3}+b",
        &[
            (b"aaab", Some(&[b"aaab"])),
            (b"aaaab", Some(&[b"aaab"])),
            (b"b", None),
        ],
    );
    check(r"(?>a+)b", &[(b"aab", Some(&[b"aab"])), (b"ac", None)]);
    check(
        r"\s*+;",
        &[(b"  ;", Some(&[b"  ;"])), (b" x;", Some(&[b";"]))],
    );
    check(r"(?>\s*)x", &[(b"  x", Some(&[b"  x"])), (b"  y", None)]);
}

#[test]
fn possessive_overlapping_runs_on_the_product_automaton() {
    for p in [r"a*+a", r"^(a*+)(a|b)", r"x\s*+$", r"=\s*+[^,;]+"] {
        assert!(!rx(p).regex_is_exact(), "{p}");
    }
    // The classic: the possessive run leaves nothing for the last `a`.
    check(r"a*+a", &[(b"aaa", None), (b"a", None), (b"", None)]);
    // Greedy would match "aa" with groups "a" and "a".
    check(
        r"^(a*+)(a|b)",
        &[
            (b"aa", None),
            (b"aab", Some(&[b"aab", b"aa", b"b"])),
            (b"b", Some(&[b"b", b"", b"b"])),
        ],
    );
    // After a run that may hold `\n`, `$` only holds at the end.
    check(
        r"x\s*+$",
        &[
            (b"x \n", Some(&[b"x \n"])),
            (b"x \ny", None),
            (b"x  ", Some(&[b"x  "])),
            (b"x \n\n", Some(&[b"x \n\n"])),
        ],
    );
    // `\s*+[C]+` = `\s*[C--\s][C]*`.
    check(
        r"=\s*+[^,;]+",
        &[
            (b"a= x", Some(&[b"= x"])),
            (b"a= ", None),
            (b"a=  ;", None),
            (b"a=\t\tv", Some(&[b"=\t\tv"])),
        ],
    );
    // CRS 3.3.4 942260's possessive part.
    check(
        r#"[^?\w\s=]++\s*?[@"]*?\s*?\w+\W+\w"#,
        &[
            (b"\"@a b", Some(&[b"\"@a b"])),
            (b"@@a b", Some(&[b"@@a b"])),
            (b"#a-b", Some(&[b"#a-b"])),
            (b"?a b", None),
        ],
    );
}

#[test]
fn possessive_forms_without_an_exact_evaluation_are_refused() {
    for p in [
        // Bounded and overlapping.
        r"a?+a",
        r"a{1,3}+a",
        // Not a single class.
        r"(?:ab)++c",
        r"(?>a|ab)c",
        r"(?>ab*)b",
        // An assertion other than `$`/`\z` may end the match right after the run.
        r"a\s*+\b",
    ] {
        let e = err(p);
        assert!(e.contains("backtracking"), "{p}: {e}");
    }
}

#[test]
fn lookaround_guards() {
    check(
        r#"(?<!&amp);|['"=]"#,
        &[
            (b"a;b", Some(&[b";"])),
            (b"&amp;", None),
            (b"&amp;x;", Some(&[b";"])),
            (b"\"", Some(&[b"\""])),
            (b"&amp;\"", Some(&[b"\""])),
        ],
    );
    check(
        r"<\?(?!xml)",
        &[
            (b"<?php", Some(&[b"<?"])),
            (b"<?xml", None),
            (b"<?", Some(&[b"<?"])),
            (b"<?xml<?x", Some(&[b"<?"])),
            (b"<?xm", Some(&[b"<?"])),
        ],
    );
    check(
        r"a(?=b)",
        &[(b"ab", Some(&[b"a"])), (b"ac", None), (b"a", None)],
    );
    check(
        r"a(?!b)",
        &[
            (b"ab", None),
            (b"ac", Some(&[b"a"])),
            (b"a", Some(&[b"a"])),
            (b"abab", None),
            (b"aba", Some(&[b"a"])),
        ],
    );
    check(
        r"(?<=a)b",
        &[(b"ab", Some(&[b"b"])), (b"cb", None), (b"b", None)],
    );
    check(
        r"(?<!a)b",
        &[
            (b"ab", None),
            (b"cb", Some(&[b"b"])),
            (b"b", Some(&[b"b"])),
            (b"abb", Some(&[b"b"])),
        ],
    );
    check(r"(?=ab)a", &[(b"ab", Some(&[b"a"])), (b"ac", None)]);
    check(r"ab(?<=b)", &[(b"ab", Some(&[b"ab"]))]);
    check(
        r"(?<!x)ab(?!y)",
        &[
            (b"xab", None),
            (b"aby", None),
            (b"abz", Some(&[b"ab"])),
            (b"xabyab", Some(&[b"ab"])),
        ],
    );
    // Top-level alternatives of different lengths in a lookbehind.
    check(
        r"(?i)(?<!&[ao]uml|&amp);",
        &[
            (b"&AUML;", None),
            (b"&Ouml;x;", Some(&[b";"])),
            (b"x&amp;;", Some(&[b";"])),
        ],
    );
}

#[test]
fn lookaround_guard_finds_overlapping_occurrences() {
    // The occurrence at 1 fails its guard; the one at 2 overlaps it.
    check(
        r"(?<!x)aa",
        &[
            (b"xaaa", Some(&[b"aa"])),
            (b"xaa", None),
            (b"aa", Some(&[b"aa"])),
        ],
    );
}

#[test]
fn lookaround_alternatives_keep_pcre_order_and_groups() {
    check(
        r"ab|(?<!x)a|a(c)",
        &[
            (b"ac", Some(&[b"a"])),
            (b"xac", Some(&[b"ac", b"c"])),
            (b"ab", Some(&[b"ab"])),
            (b"xab", Some(&[b"ab"])),
            (b"c", None),
        ],
    );
}

#[test]
fn lookaround_forms_without_an_exact_evaluation_are_refused() {
    for p in [
        // Unbounded lookbehind (PCRE refuses it too) and lookahead.
        r"(?<!a+)b",
        r"b(?!a*c)",
        // Not at the edge of a top-level alternative.
        r"a(?=b)c",
        r"(?:a(?!b))+",
        r"(a(?!b))",
        r"x(?:a|(?<!y)b)",
        // Around a variable-length item.
        r"(?<!x)a+",
        // Assertions, groups, lookarounds inside.
        r"(?<=\b)a",
        r"(?=(a))a",
        r"(?=a(?!b))a",
        // Quantified.
        r"a(?!b)*",
        // With nothing to guard.
        r"(?=x)",
    ] {
        let e = err(p);
        assert!(
            e.contains("lookaround") || e.contains("backtracking"),
            "{p}: {e}"
        );
    }
}

#[test]
fn backreferences_are_refused_outside_the_table() {
    for p in [r"(a)\1", r"(\w+)\s+\1", r"(?i:\b([\d\w]+)\b=\b\1\b)"] {
        let e = err(p);
        assert!(
            e.contains("backreference") && e.contains("backtracking"),
            "{p}: {e}"
        );
    }
    // One byte away from the table's pattern is not the table's pattern.
    let mut near = TABLE[0].pattern.to_string();
    near.push('x');
    assert!(err(&near).contains("backreference"));
}

/// CRS 3.3.4 942130 (the table's pattern).
#[test]
fn sql_tautology_table_entry() {
    let p = TABLE[0].pattern;
    assert!(!rx(p).regex_is_exact());
    check(
        p,
        &[
            (b"1=1", Some(&[b"1=1", b"1"])),
            (b"a=b", None),
            (b"x like x", Some(&[b"x like x", b"x"])),
            (b"1<>2", Some(&[b"1<>2", b"1"])),
            (b"a != a", None),
            (b"a!=b", Some(&[b"a!=b", b"a"])),
            (b"'1'='1'", Some(&[b"'1'='1", b"1"])),
            (b"  1 = 1", Some(&[b"  1 = 1", b"1"])),
            (b"a<=>a", Some(&[b"a<=>a", b"a"])),
            (b"a<=>b", None),
            (b"a<=b", Some(&[b"a<=b", b"a"])),
            (b"a<=a", None),
            (b"a>=a", None),
            (b"a^b", Some(&[b"a^b", b"a"])),
            (b"abc=ABC", Some(&[b"abc=ABC", b"abc"])),
            (b"a is not b", Some(&[b"a is not b", b"a"])),
            (b"a is not a", None),
            (b"a not like a", None),
            (b"a not likea", Some(&[b"a not likea", b"a"])),
            (b"a sounds like A", Some(&[b"a sounds like A", b"a"])),
            (b"a rlike a", Some(&[b"a rlike a", b"a"])),
            (b"a likea", None),
            (b"1=11", None),
            (b"11=1", None),
            (b"x=y 2=2", Some(&[b" 2=2", b"2"])),
            (b"(a)=(a)", Some(&[b"(a)=(a", b"a"])),
            (b"a=a_", None),
            (b"id=5&x=x", Some(&[b"x=x", b"x"])),
            (b"\xe9a=a", Some(&[b"a=a", b"a"])),
        ],
    );
}

#[test]
fn compiled_operators_can_be_shared_between_threads() {
    fn shared<T: Send + Sync + Clone>(_: &T) {}
    let r = rx(r"x\s*+$");
    shared(&r);
    let copy = r.clone();
    let handle = std::thread::spawn(move || copy.matches(b"x \n", None));
    assert_eq!(handle.join().ok(), Some(true));
    assert!(!r.matches(b"x \ny", None));
}
