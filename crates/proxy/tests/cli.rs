//! The command line as a script sees it: completion scripts and the manual page
//! made from the real binary's definition, `--version` with the git revision, and
//! exit codes that tell a missing record from an error and from a usage error.

mod common;

use common::*;
use std::process::{Command, Output};

fn palisade(args: &[&str]) -> Output {
    Command::new(palisade_bin()).args(args).output().unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const COMMANDS: [&str; 5] = ["run", "check", "ctx", "completions", "man"];

#[test]
fn completions_name_every_command() {
    let out = palisade(&["completions", "bash"]);
    assert_eq!(out.status.code(), Some(0));
    let script = stdout(&out);
    assert!(script.contains("complete -F _palisade"), "{script}");
    for c in COMMANDS {
        assert!(script.contains(c), "bash: {c} missing");
    }
    // The script is valid bash.
    if let Ok(check) = Command::new("bash")
        .arg("-n")
        .stdin(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write as _;
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(script.as_bytes())?;
            child.wait()
        })
    {
        assert!(check.success(), "bash -n refused the script");
    }
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let out = palisade(&["completions", shell]);
        assert_eq!(out.status.code(), Some(0), "{shell}");
        let script = stdout(&out);
        for c in COMMANDS {
            assert!(script.contains(c), "{shell}: {c} missing");
        }
    }
    // An unknown shell is a usage error.
    assert_eq!(palisade(&["completions", "tcsh"]).status.code(), Some(2));
}

#[test]
fn the_manual_page_covers_every_command() {
    let out = palisade(&["man"]);
    assert_eq!(out.status.code(), Some(0));
    let page = stdout(&out);
    assert!(page.starts_with(".TH palisade 1 "), "{page}");
    for sub in [
        "palisade run",
        "palisade check",
        "palisade ctx get",
        "palisade ctx import",
        "palisade completions",
    ] {
        assert!(page.contains(&format!(".SS \"{sub}\"")), "{sub} missing");
    }
    assert!(page.contains(".SH \"EXIT STATUS\""));
    assert_eq!(stdout(&palisade(&["manpage"])), page, "the alias");
}

#[test]
fn version_names_the_git_revision() {
    let out = palisade(&["--version"]);
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    let revision = text
        .lines()
        .find_map(|l| l.strip_prefix("revision: "))
        .unwrap_or_else(|| panic!("no revision line: {text}"));
    assert!(
        revision == "unknown"
            || (revision.len() >= 7 && revision.bytes().all(|b| b.is_ascii_hexdigit())),
        "{revision}"
    );
    assert!(text.starts_with(&format!("palisade {}\n", env!("CARGO_PKG_VERSION"))));
    let short = stdout(&palisade(&["-V"]));
    assert_eq!(
        short.trim_end(),
        format!(
            "palisade {} (revision {revision})",
            env!("CARGO_PKG_VERSION")
        )
    );
}

#[test]
fn ctx_exit_codes_tell_not_found_from_errors() {
    let dir = TempDir::new("cli-ctx");
    let store = dir.path("store");
    let store = store.to_str().unwrap();
    let ctx = |args: &[&str]| {
        let mut all = vec!["ctx", "--store", store];
        all.extend_from_slice(args);
        palisade(&all)
    };
    let out = ctx(&["get", "IP", "192.0.2.1"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("no record"));
    let out = ctx(&["del", "IP", "192.0.2.1"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");

    let out = ctx(&["set", "IP", "192.0.2.1", "blocked", "1"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let out = ctx(&["get", "IP", "192.0.2.1"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(stdout(&out).contains("\"blocked\""));

    // An error (an unknown collection) and a usage error (a missing argument).
    let out = ctx(&["get", "NOSUCH", "k"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let out = ctx(&["get", "IP"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}
