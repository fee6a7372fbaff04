//! `palisade check` refuses whatever `palisade run` refuses: each configuration
//! below makes `run` exit with an error before it serves, and `check` must exit
//! with an error too, naming the same thing. A good configuration passes both.

mod common;

use common::*;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One refusal: the configuration's extra text and a phrase both errors contain.
struct Refusal {
    name: &'static str,
    extra: String,
    phrase: &'static str,
}

/// Runs `palisade ARGS --config CFG`; `None` when it was still running after
/// `limit` (then it is killed).
fn run_bounded(args: &[&str], cfg: &Path, limit: Duration) -> Option<(bool, String)> {
    let mut child = Command::new(palisade_bin())
        .args(args)
        .arg("--config")
        .arg(cfg)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let out = child.wait_with_output().unwrap();
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            return Some((status.success(), text));
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn refusals(dir: &TempDir) -> Vec<Refusal> {
    let d = dir.0.display();
    std::fs::write(dir.path("a-file"), "not a directory").unwrap();
    std::fs::write(dir.path("blank-token"), "  \n").unwrap();
    let admin = loopback(free_port());
    vec![
        Refusal {
            name: "admin token file missing",
            extra: format!("[admin]\naddress = \"{admin}\"\ntoken_file = \"{d}/no-such-token\"\n"),
            phrase: "no-such-token",
        },
        Refusal {
            name: "admin token file blank",
            extra: format!("[admin]\naddress = \"{admin}\"\ntoken_file = \"{d}/blank-token\"\n"),
            phrase: "blank-token",
        },
        Refusal {
            name: "error log in a missing directory",
            extra: "[logs]\nerror_log = \"/nonexistent-palisade-dir/error.log\"\n".into(),
            phrase: "nonexistent-palisade-dir",
        },
        Refusal {
            name: "access log under a regular file",
            extra: format!("[logs]\naccess_log = \"{d}/a-file/access.log\"\n"),
            phrase: "a-file",
        },
        Refusal {
            name: "SecAuditLog in a missing directory",
            extra: "[[rules]]\ninline = \"SecAuditEngine On\\nSecAuditLog /nonexistent-palisade-dir/audit.log\"\n".into(),
            phrase: "nonexistent-palisade-dir",
        },
        Refusal {
            name: "SecDebugLog in a missing directory",
            extra: "[[rules]]\ninline = \"SecDebugLog /nonexistent-palisade-dir/debug.log\\nSecDebugLogLevel 1\"\n".into(),
            phrase: "nonexistent-palisade-dir",
        },
        Refusal {
            name: "store path under a regular file",
            extra: format!("[store]\npath = \"{d}/a-file/store\"\n"),
            phrase: "a-file",
        },
        Refusal {
            name: "store host id with @",
            extra: format!("[store]\npath = \"{d}/store\"\nhost_id = \"a@b\"\n"),
            phrase: "host_id",
        },
        Refusal {
            name: "sync address that is not redis://",
            extra: format!("[store]\npath = \"{d}/store\"\n[sync]\nredis = \"http://127.0.0.1:1\"\n"),
            phrase: "sync.redis",
        },
        Refusal {
            name: "sync stream without a name",
            extra: format!(
                "[store]\npath = \"{d}/store\"\n[sync]\nredis = \"redis://127.0.0.1:1\"\nstream = \"\"\n"
            ),
            phrase: "stream",
        },
        Refusal {
            name: "TLS certificate missing",
            extra: format!(
                "[[listener]]\naddress = \"{}\"\ntls = {{ cert = \"{d}/no-cert.pem\", key = \"{d}/no-key.pem\" }}\n",
                loopback(free_port())
            ),
            phrase: "no-cert.pem",
        },
        Refusal {
            name: "access list file missing",
            extra: format!("[access]\ndeny_files = [\"{d}/no-such-list\"]\n"),
            phrase: "no-such-list",
        },
        Refusal {
            name: "rate limit with a bad rate",
            extra: "[[rate_limit]]\nname = \"r\"\nkey = \"client_ip\"\nrate = \"often\"\n".into(),
            phrase: "often",
        },
    ]
}

#[test]
fn check_refuses_what_run_refuses() {
    let dir = TempDir::new("check-run");
    let backend = loopback(free_port());
    let mut failures = Vec::new();
    for r in refusals(&dir) {
        let listen = loopback(free_port());
        let mut extra = r.extra.clone();
        if !extra.contains("[store]") {
            extra.push_str(&format!(
                "[store]\npath = \"{}\"\n",
                dir.path("store").display()
            ));
        }
        let cfg = dir.path("palisade.toml");
        std::fs::write(&cfg, basic_config(listen, backend, &extra)).unwrap();
        match run_bounded(&["run"], &cfg, Duration::from_secs(60)) {
            None => failures.push(format!("{}: run started serving", r.name)),
            Some((true, _)) => failures.push(format!("{}: run exited 0", r.name)),
            Some((false, text)) if !text.contains(r.phrase) => failures.push(format!(
                "{}: run's error does not name {:?}: {text}",
                r.name, r.phrase
            )),
            Some((false, _)) => {}
        }
        match run_bounded(&["check"], &cfg, Duration::from_secs(60)) {
            None => failures.push(format!("{}: check did not finish", r.name)),
            Some((true, text)) => failures.push(format!("{}: check accepted it: {text}", r.name)),
            Some((false, text)) if !text.contains(r.phrase) => failures.push(format!(
                "{}: check's error does not name {:?}: {text}",
                r.name, r.phrase
            )),
            Some((false, _)) => {}
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_good_configuration_passes_check_and_runs() {
    let dir = TempDir::new("check-run-good");
    std::fs::write(dir.path("token"), "s3cret\n").unwrap();
    let listen = loopback(free_port());
    let extra = format!(
        "[admin]\naddress = \"{}\"\ntoken_file = \"{}\"\n[logs]\nerror_log = \"{}\"\naccess_log = \"{}\"\n[store]\npath = \"{}\"\n",
        loopback(free_port()),
        dir.path("token").display(),
        dir.path("logs-error.log").display(),
        dir.path("logs-access.log").display(),
        dir.path("new/store").display()
    );
    let cfg = dir.path("palisade.toml");
    std::fs::write(&cfg, basic_config(listen, loopback(free_port()), &extra)).unwrap();
    let (ok, text) = run_bounded(&["check"], &cfg, Duration::from_secs(60)).unwrap();
    assert!(ok, "{text}");
    assert!(
        !dir.path("logs-error.log").exists() && !dir.path("new").exists(),
        "check created files"
    );
    assert!(
        run_bounded(&["run"], &cfg, Duration::from_secs(3)).is_none(),
        "run did not keep serving"
    );
}

/// Runs `palisade check --config CFG`: its exit code and standard error.
fn check_output(cfg: &Path) -> (Option<i32>, String) {
    let out = Command::new(palisade_bin())
        .args(["check", "--config"])
        .arg(cfg)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A configuration in `dir` whose rules are the file `rules.conf` holding `rules`,
/// with `extra` after it.
fn with_rule_file(dir: &TempDir, rules: &str, extra: &str) -> std::path::PathBuf {
    std::fs::write(dir.path("rules.conf"), rules).unwrap();
    let cfg = dir.path("palisade.toml");
    let text = basic_config(
        loopback(free_port()),
        loopback(free_port()),
        &format!(
            "[[rules]]\nfile = \"{}\"\n[store]\npath = \"{}\"\n{extra}",
            dir.path("rules.conf").display(),
            dir.path("store").display()
        ),
    );
    std::fs::write(&cfg, text).unwrap();
    cfg
}

/// `check` reports every error of a rule file, each with its file and line, not
/// only the first; `run` still refuses to start, naming the first and the count.
#[test]
fn check_reports_every_error_of_the_rules() {
    let dir = TempDir::new("check-every-error");
    let cfg = with_rule_file(
        &dir,
        "SecRuleEngine On\n\
         SecRule ARGS \"@rx a\" \"id:1,phase:2,deny,t:nosuchtransform\"\n\
         SecRule ARGS \"@rx b\" \"id:2,phase:2,deny\"\n\
         SecNoSuchDirective on\n\
         SecRule ARGS \"@rx c\" \"id:3,phase:2,deny\"\n\
         SecRule ARGS \"@nosuchoperator c\" \"id:4,phase:2,deny\"\n",
        "",
    );
    let (code, err) = check_output(&cfg);
    assert_eq!(code, Some(1), "{err}");
    let file = dir.path("rules.conf").display().to_string();
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 4, "{err}");
    assert!(
        lines[0].starts_with(&format!("palisade: {file}:2:1: [id 1] "))
            && lines[0].contains("nosuchtransform"),
        "{err}"
    );
    assert_eq!(
        lines[1],
        format!("palisade: {file}:4:1: unknown directive \"SecNoSuchDirective\"")
    );
    assert!(
        lines[2].starts_with(&format!("palisade: {file}:6:1: [id 4] "))
            && lines[2].contains("nosuchoperator"),
        "{err}"
    );
    assert_eq!(
        lines[3],
        format!(
            "palisade: configuration file {} test failed: 3 error(s)",
            cfg.display()
        )
    );

    // `run` refuses to start: the first error and how many others.
    let (ok, text) = run_bounded(&["run"], &cfg, Duration::from_secs(60)).expect("run exits");
    assert!(!ok);
    assert!(text.contains(&format!("{file}:2:1: [id 1]")), "{text}");
    assert!(text.contains("and 2 more error(s)"), "{text}");
}

/// At most 50 errors are printed; the others are counted.
#[test]
fn check_bounds_the_errors_it_prints() {
    let dir = TempDir::new("check-bound");
    let rules: String = (1..=60)
        .map(|i| format!("SecRule ARGS \"@rx a\" \"id:{i},phase:2,deny,t:bad{i}\"\n"))
        .collect();
    let cfg = with_rule_file(&dir, &rules, "");
    let (code, err) = check_output(&cfg);
    assert_eq!(code, Some(1), "{err}");
    let file = dir.path("rules.conf").display().to_string();
    let reported: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with(&format!("palisade: {file}:")))
        .collect();
    assert_eq!(reported.len(), 50, "{err}");
    for (i, line) in reported.iter().enumerate() {
        assert!(
            line.starts_with(&format!("palisade: {file}:{}:1: [id {}]", i + 1, i + 1)),
            "{line}"
        );
    }
    assert!(err.contains("palisade: and 10 more error(s)\n"), "{err}");
    assert!(err.contains("test failed: 60 error(s)"), "{err}");
}

/// Errors of the rules and refusals of the configuration are reported together.
#[test]
fn check_reports_rule_and_configuration_errors_together() {
    let dir = TempDir::new("check-together");
    let extra = format!(
        "[logs]\naccess_log = \"/nonexistent-palisade-dir/access.log\"\n\
         [admin]\naddress = \"{}\"\ntoken_file = \"{}\"\n\
         [access]\ndeny_files = [\"{}\"]\n",
        loopback(free_port()),
        dir.path("no-such-token").display(),
        dir.path("no-such-list").display()
    );
    let cfg = with_rule_file(&dir, "SecBogus 1\n", &extra);
    let (code, err) = check_output(&cfg);
    assert_eq!(code, Some(1), "{err}");
    for phrase in [
        "rules.conf:1:1: unknown directive",
        "no-such-list",
        "no-such-token",
        "nonexistent-palisade-dir",
        "test failed: 4 error(s)",
    ] {
        assert!(err.contains(phrase), "{phrase} missing: {err}");
    }
}
