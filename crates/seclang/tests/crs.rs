//! Parses the OWASP Core Rule Set (v4.28 from the shared directory, and Debian's 3.3.4
//! when installed) and checks counts on the syntax tree.

use seclang::{Directive, DirectiveKind, FsSource, parse_file};
use std::path::{Path, PathBuf};
use std::time::Instant;

fn shared_crs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/crs")
}

/// The `*.conf` files of a directory, in lexical order.
fn conf_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "conf"))
        .collect();
    files.sort();
    files
}

fn parse_all(files: &[PathBuf]) -> Vec<(PathBuf, Vec<Directive>)> {
    files
        .iter()
        .map(|f| {
            let dirs = parse_file(&FsSource, f).unwrap_or_else(|e| panic!("{e}"));
            (f.clone(), dirs)
        })
        .collect()
}

#[derive(Debug, Default, PartialEq, Eq)]
struct Counts {
    /// `SecRule` and `SecAction` directives with an `id` action.
    with_id: usize,
    /// Rules without an id that follow a rule with a `chain` action.
    chained: usize,
    markers: usize,
    update_target_by_id: usize,
    /// Rules without an id that do not follow a `chain` (must stay 0).
    orphans: usize,
}

fn count(dirs: &[Directive]) -> Counts {
    let mut counts = Counts::default();
    let mut previous_chains = false;
    for d in dirs {
        let actions = match &d.kind {
            DirectiveKind::Rule(rule) => &rule.actions,
            DirectiveKind::Action(actions) => actions,
            DirectiveKind::Marker(_) => {
                counts.markers += 1;
                previous_chains = false;
                continue;
            }
            DirectiveKind::RuleUpdateTarget {
                selector: seclang::RuleSelector::Ids(_),
                ..
            } => {
                counts.update_target_by_id += 1;
                continue;
            }
            _ => continue,
        };
        let has = |name: &str| actions.iter().any(|a| a.name.eq_ignore_ascii_case(name));
        if has("id") {
            counts.with_id += 1;
        } else if previous_chains {
            counts.chained += 1;
        } else {
            counts.orphans += 1;
        }
        previous_chains = has("chain");
    }
    counts
}

#[test]
fn crs_v4_parses_with_expected_counts() {
    let crs = shared_crs();
    let setup = crs.join("crs-setup.conf.example");
    let mut files = vec![setup.clone()];
    files.extend(conf_files(&crs.join("rules")));
    assert!(files.len() > 20, "CRS rules not found in {}", crs.display());

    let started = Instant::now();
    let parsed = parse_all(&files);
    let elapsed = started.elapsed();
    println!("parsed {} CRS files in {elapsed:?}", files.len());

    let all: Vec<Directive> = parsed.iter().flat_map(|(_, d)| d.clone()).collect();
    let setup_counts = count(&parsed[0].1);
    let rules: Vec<Directive> = parsed[1..].iter().flat_map(|(_, d)| d.clone()).collect();
    let rules_counts = count(&rules);
    let total = count(&all);
    println!("crs-setup.conf.example: {setup_counts:?}");
    println!("rules/*.conf: {rules_counts:?}");

    // The numbers are those of rules/*.conf. crs-setup.conf.example adds one
    // uncommented rule with an id: SecAction 900990 (tx.crs_setup_version).
    assert_eq!(
        rules_counts,
        Counts {
            with_id: 629,
            chained: 73,
            markers: 30,
            update_target_by_id: 55,
            orphans: 0,
        }
    );
    assert_eq!(
        setup_counts,
        Counts {
            with_id: 1,
            ..Counts::default()
        }
    );
    assert_eq!(total.with_id, 630);
    // The 5 SecDefaultAction lines of crs-setup.conf.example.
    let defaults = parsed[0]
        .1
        .iter()
        .filter(|d| matches!(d.kind, DirectiveKind::DefaultAction(_)))
        .count();
    assert_eq!(defaults, 5);
}

#[test]
fn crs_v4_spans_point_at_directive_starts() {
    let file = shared_crs().join("rules/REQUEST-901-INITIALIZATION.conf");
    let text = std::fs::read_to_string(&file).expect("read 901");
    let lines: Vec<&str> = text.lines().collect();
    let dirs = parse_file(&FsSource, &file).unwrap_or_else(|e| panic!("{e}"));
    for d in &dirs {
        let line = lines[d.span.line as usize - 1];
        let column = d.span.column as usize - 1;
        assert!(line[column..].starts_with("Sec"), "{}: {line:?}", d.span);
    }
    assert_eq!(dirs[0].span.file.as_path(), file.as_path());
}

#[test]
fn crs_v4_whole_set_parses() {
    // How long it takes is a benchmark's question (`cargo bench -p engine`), not a
    // test's: the test only asks that every file parses.
    let crs = shared_crs();
    let mut files = vec![crs.join("crs-setup.conf.example")];
    files.extend(conf_files(&crs.join("rules")));
    let parsed = parse_all(&files);
    assert_eq!(parsed.len(), files.len());
}

#[test]
fn debian_crs_3_3_4_parses() {
    let rules = Path::new("/usr/share/modsecurity-crs/rules");
    let setup = Path::new("/etc/modsecurity/crs/crs-setup.conf");
    if !rules.is_dir() || !setup.is_file() {
        // A test that needs an outside data set fails without it, unless asked not to.
        assert!(
            std::env::var("PALISADE_ALLOW_SKIP").as_deref() == Ok("1"),
            "Debian's modsecurity-crs is not installed (apt-get install modsecurity-crs, \
             as .ci/run does) and PALISADE_ALLOW_SKIP=1 is not set"
        );
        println!("SKIPPED: Debian's modsecurity-crs is not installed");
        return;
    }
    let mut files = vec![setup.to_path_buf()];
    files.extend(conf_files(rules));
    let parsed = parse_all(&files);
    let all: Vec<Directive> = parsed.into_iter().flat_map(|(_, d)| d).collect();
    let counts = count(&all);
    println!("Debian CRS 3.3.4: {counts:?}");
    assert_eq!(counts.orphans, 0);
    assert!(counts.with_id > 500, "{counts:?}");
}
