//! The command line: the `palisade` commands as clap parses them, the exit status
//! each ends with, the version it reports, and the shell completion scripts and
//! the manual page made from the same definition (`palisade completions SHELL`,
//! `palisade man`), so that they never fall behind the commands.

use clap::{CommandFactory, Parser, Subcommand};
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

/// `palisade -V`: the version and the git revision the binary was built from, the
/// one `/status` reports as `git_revision` ([`crate::admin::GIT_REVISION`], from
/// build.rs: `unknown` when built outside a git checkout without
/// `PALISADE_GIT_REVISION` set).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (revision ",
    env!("PALISADE_GIT_REVISION"),
    ")"
);

/// `palisade --version`: the version on the first line, then one `key: value` line
/// per fact of the build (`revision`, `profile`), for scripts.
pub const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    "\nrevision: ",
    env!("PALISADE_GIT_REVISION"),
    "\nprofile: ",
    env!("PALISADE_BUILD_PROFILE")
);

/// The exit statuses of `palisade`, the same for every command, so that a script
/// can tell a failure from a usage error and from a record that is not there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: done (`check`: the configuration and every rule loaded).
    Success,
    /// 1: failed, with the reason printed on standard error (`check`: every error
    /// found, at most [`crate::app::MAX_REPORTED_ERRORS`] of them, then a count of
    /// the others).
    Failure,
    /// 2: the command line is wrong (unknown command or option, missing or bad
    /// argument); clap prints the usage.
    Usage,
    /// 3: `ctx get` found no record, or `ctx del` had nothing to delete.
    NotFound,
}

impl Exit {
    /// The number the process exits with.
    pub fn code(self) -> u8 {
        match self {
            Exit::Success => 0,
            Exit::Failure => 1,
            Exit::Usage => 2,
            Exit::NotFound => 3,
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> ExitCode {
        ExitCode::from(e.code())
    }
}

/// The exit statuses as `--help` and the manual page give them.
pub const EXIT_STATUS_HELP: &str = "\
Exit status:
  0  success (check: the configuration and every rule loaded)
  1  failure, reason on standard error (check: every error found, at most 50,
     then how many more; tune --prove: the exclusion lets an attack through)
  2  usage error: unknown command or option, missing or bad argument
  3  not found: `ctx get` found no record, `ctx del` had nothing to delete";

/// A web application firewall that runs as a reverse proxy and speaks SecLang.
#[derive(Debug, Parser)]
#[command(
    name = "palisade",
    version = VERSION,
    long_version = LONG_VERSION,
    after_help = EXIT_STATUS_HELP
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The `palisade` commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve until SIGTERM or SIGINT, then drain in-flight requests and exit.
    Run {
        /// The TOML configuration file (see docs/config.md).
        #[arg(short, long, value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
        config: PathBuf,
    },
    /// Load the configuration and every rule, print a summary, and exit 1 with
    /// every error found (each `file:line: reason`, at most 50, then how many more).
    #[command(after_help = "\
Exit status: 0 when the configuration and every rule loaded; 1 with every error
found printed on standard error (at most 50, then how many more), followed by
`configuration file FILE test failed`; 2 for a usage error.")]
    Check {
        /// The TOML configuration file (see docs/config.md).
        #[arg(short, long, value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
        config: PathBuf,
    },
    /// Read and write persistent collections (IP, GLOBAL, SESSION, USER, RESOURCE)
    /// in the proxy's store, while it runs or not.
    #[command(after_help = "\
Exit status: 0 done; 1 error (bad collection or variable name, the store cannot be
opened); 2 usage error; 3 `get` found no record or `del` had nothing to delete.")]
    Ctx(crate::ctx::CtxArgs),
    /// Write one .tar.gz with what an incident needs: version, kernel and uptime,
    /// the configuration (secrets removed) and the hashes of it and of the rules,
    /// and from the running proxy's admin listener its status, metrics, slowest
    /// recent requests, top clients and rules, and optionally a CPU profile.
    #[command(after_help = "\
Exit status: 0 when the bundle was written (parts that could not be collected are
listed in its MANIFEST.txt and on standard error); 1 when the configuration cannot
be loaded or the bundle cannot be written; 2 for a usage error.")]
    Diag {
        /// The TOML configuration file of the proxy (see docs/config.md).
        #[arg(short, long, value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
        config: PathBuf,
        /// Where to write the bundle: a file, or an existing directory (default: the
        /// current directory, palisade-diag-HOST-TIME.tar.gz).
        #[arg(short, long, value_name = "PATH", value_hint = clap::ValueHint::AnyPath)]
        out: Option<PathBuf>,
        /// Also take a CPU profile of this many seconds (1 to 300) from the
        /// running proxy (profile.pb, pprof).
        #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..=300))]
        profile_seconds: Option<u64>,
    },
    /// From false positives to proven exclusions: read the audit log, group the
    /// rules' matches by site, rule, variable and path, rank the likely false
    /// positives, propose the narrowest exclusions, and prove them by replaying the
    /// recorded requests and an attack corpus through the rules (docs/tune.md).
    #[command(after_help = "\
Without --write it prints the report and writes nothing. With --write it adds the
proven exclusions to tune-before.conf, tune-after.conf (and tune-site-NAME.conf)
in the output directory; a reload (SIGHUP or POST /reload) applies them.

Exit status: 0 done; 1 error (configuration, audit log without the parts tune needs,
attack corpus), or with --prove an exclusion that lets an attack of the corpus
through; 2 usage error.")]
    Tune(TuneArgs),
    /// Print a completion script for SHELL on standard output.
    #[command(after_help = "\
Install, for example:
  bash: palisade completions bash > /etc/bash_completion.d/palisade
  zsh:  palisade completions zsh > \"${fpath[1]}/_palisade\"
  fish: palisade completions fish > ~/.config/fish/completions/palisade.fish")]
    Completions {
        /// The shell to complete for.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page palisade(1), in roff, on standard output: one page
    /// with every command and its options.
    #[command(
        visible_alias = "manpage",
        after_help = "\
View it with `palisade man | man -l -`; install it with
`palisade man > /usr/local/share/man/man1/palisade.1`."
    )]
    Man,
}

/// The options of `palisade tune`.
#[derive(Debug, clap::Args)]
pub struct TuneArgs {
    /// The TOML configuration file whose rules are tuned.
    #[arg(short, long, value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub config: PathBuf,
    /// The JSON audit log (SecAuditLogFormat JSON, SecAuditLogParts with B, C and
    /// H); default: the one the configuration writes.
    #[arg(long, value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub audit_log: Option<PathBuf>,
    /// An attack corpus (JSON lines: method, uri, headers, body or body_base64):
    /// no attack it holds that the rules block may pass with the exclusions.
    #[arg(long, value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub attacks: Option<PathBuf>,
    /// The directory of the tune files; default: that of the configuration's
    /// tune-before.conf entry, else the configuration's.
    #[arg(long, value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    pub out: Option<PathBuf>,
    /// Write the proven exclusions.
    #[arg(long)]
    pub write: bool,
    /// Propose only for matches sent by at least N distinct clients.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub min_clients: usize,
    /// Exclude on every path (SecRuleUpdateTargetById) a rule and variable seen on
    /// more than N path shapes; on fewer, per path.
    #[arg(long, value_name = "N", default_value_t = crate::tune::DEFAULT_MAX_PATHS)]
    pub max_paths: usize,
    /// The first rule id of tune's rules.
    #[arg(long, value_name = "ID", default_value_t = crate::tune::DEFAULT_FIRST_ID)]
    pub first_id: i64,
    /// The least rank (0 to 1) of a proposal.
    #[arg(long, value_name = "RANK", default_value_t = 0.5)]
    pub threshold: f64,
    /// Prove an exclusion file of your own (loaded after the rules) instead of
    /// proposing: exit 1 when it lets an attack of the corpus through.
    #[arg(long, value_name = "FILE", value_hint = clap::ValueHint::FilePath, conflicts_with = "write")]
    pub prove: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The clap definition of the whole command line (for completions, the manual
/// page and tests).
pub fn command() -> clap::Command {
    Cli::command()
}

/// Writes the completion script for `shell` to `out`.
pub fn write_completions(shell: clap_complete::Shell, out: &mut dyn Write) -> io::Result<()> {
    // Made in memory: clap_complete panics when its writer fails.
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command(), "palisade", &mut script);
    out.write_all(&script)?;
    out.flush()
}

/// The roff of one clap_mangen section without its `.SH` heading line.
fn section_body(render: impl FnOnce(&mut Vec<u8>) -> io::Result<()>) -> io::Result<String> {
    let mut buf = Vec::new();
    render(&mut buf)?;
    let text = String::from_utf8_lossy(&buf);
    Ok(text
        .lines()
        .filter(|l| !l.starts_with(".SH "))
        .map(|l| format!("{l}\n"))
        .collect())
}

/// Every command below `cmd`, depth first, in the order they are defined (clap's
/// own `help` left out).
fn commands(cmd: &clap::Command) -> Vec<&clap::Command> {
    let mut out = Vec::new();
    for sub in cmd.get_subcommands() {
        if sub.get_name() == "help" || sub.is_hide_set() {
            continue;
        }
        out.push(sub);
        out.extend(commands(sub));
    }
    out
}

/// The sections of the manual page after the commands, in roff.
const MAN_TAIL: &str = r#".SH "EXIT STATUS"
.TP
.B 0
Success (\fBcheck\fR: the configuration and every rule loaded).
.TP
.B 1
Failure; the reason is on standard error. \fBcheck\fR prints every error it
found, each as \fIfile\fR:\fIline\fR: \fIreason\fR, at most 50, then how many
more, and ends with "configuration file \fIFILE\fR test failed".
.TP
.B 2
Usage error: an unknown command or option, a missing or bad argument.
.TP
.B 3
Not found: \fBctx get\fR found no record, \fBctx del\fR had nothing to delete.
.SH ENVIRONMENT
.TP
.B PALISADE_STORE
The collection store's directory when the configuration has no \fB[store] path\fR.
Without either: \fI/var/lib/palisade/store\fR for root, else
\fI$XDG_STATE_HOME/palisade/store\fR or \fI~/.local/state/palisade/store\fR.
.TP
.B PALISADE_ADMIN_TOKEN
The admin API's bearer token when \fB[admin] token_file\fR is not set.
.TP
.B RUST_LOG
Overrides \fB[logs] level\fR for the operator log on standard error.
.SH SIGNALS
\fBrun\fR stops on SIGTERM or SIGINT, draining the requests in flight for
\fBserver.grace_period\fR; SIGHUP reloads the rules, access lists and upstreams,
all or none, and reopens the log files.
.SH "SEE ALSO"
The configuration reference, docs/config.md, and the README in the source
distribution.
.SH VERSION
"#;

/// Writes the manual page palisade(1) to `out`: clap_mangen's title, name,
/// synopsis, description and options of `palisade`, then a COMMANDS section with
/// a subsection per command (`palisade ctx get` included) holding its synopsis,
/// description and options, then the exit status, environment and signals.
pub fn write_man_page(out: &mut dyn Write) -> io::Result<()> {
    let mut cmd = command();
    cmd.build();
    let man = clap_mangen::Man::new(cmd.clone());
    let mut page = Vec::new();
    // Written here: clap_mangen leaves an empty date unquoted, which shifts the
    // source and manual into the wrong places.
    writeln!(
        page,
        ".TH palisade 1 \"\" \"palisade {}\" \"Palisade Manual\"",
        env!("CARGO_PKG_VERSION")
    )?;
    man.render_name_section(&mut page)?;
    man.render_synopsis_section(&mut page)?;
    man.render_description_section(&mut page)?;
    man.render_options_section(&mut page)?;
    writeln!(page, ".SH COMMANDS")?;
    for sub in commands(&cmd) {
        let name = sub.get_bin_name().unwrap_or_else(|| sub.get_name());
        writeln!(page, ".SS \"{name}\"")?;
        let man = clap_mangen::Man::new(sub.clone());
        page.extend(section_body(|b| man.render_synopsis_section(b))?.bytes());
        writeln!(page, ".PP")?;
        page.extend(section_body(|b| man.render_description_section(b))?.bytes());
        if sub.get_arguments().any(|a| !a.is_hide_set()) {
            page.extend(section_body(|b| man.render_options_section(b))?.bytes());
        }
        if sub.get_after_help().is_some() {
            writeln!(page, ".PP")?;
            page.extend(section_body(|b| man.render_extra_section(b))?.bytes());
        }
    }
    page.extend(MAN_TAIL.bytes());
    // The revision as `--version` gives it (clap_mangen's VERSION section would
    // run its lines together).
    writeln!(page, "palisade {VERSION}")?;
    // Each clap_mangen rendering starts with the same two-line string definition;
    // the page needs it once.
    let page = String::from_utf8_lossy(&page);
    let mut seen = std::collections::HashSet::new();
    for line in page.lines() {
        let preamble = line.starts_with(".ie \\n(.g .ds Aq") || line.starts_with(".el .ds Aq");
        if !preamble || seen.insert(line) {
            writeln!(out, "{line}")?;
        }
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        command().debug_assert();
    }

    #[test]
    fn exit_codes_are_distinct() {
        let all = [Exit::Success, Exit::Failure, Exit::Usage, Exit::NotFound];
        let codes: std::collections::BTreeSet<u8> = all.iter().map(|e| e.code()).collect();
        assert_eq!(codes.len(), all.len());
        // clap's own usage errors exit with the code documented for them.
        let e = command()
            .try_get_matches_from(["palisade", "no-such-command"])
            .unwrap_err();
        assert_eq!(e.exit_code(), i32::from(Exit::Usage.code()));
    }

    #[test]
    fn the_versions_name_the_revision() {
        assert!(VERSION.contains(" (revision "), "{VERSION}");
        let lines: Vec<&str> = LONG_VERSION.lines().collect();
        assert_eq!(lines[0], env!("CARGO_PKG_VERSION"));
        assert_eq!(
            lines[1],
            format!("revision: {}", crate::admin::GIT_REVISION)
        );
        assert!(lines[2].starts_with("profile: "), "{LONG_VERSION}");
    }

    #[test]
    fn the_manual_page_has_every_command() {
        let mut out = Vec::new();
        write_man_page(&mut out).unwrap();
        let page = String::from_utf8(out).unwrap();
        assert!(page.starts_with(".TH palisade 1 "), "{page}");
        for section in [
            ".SH NAME",
            ".SH SYNOPSIS",
            ".SH COMMANDS",
            ".SH \"EXIT STATUS\"",
        ] {
            assert!(page.contains(section), "{section} missing");
        }
        for sub in [
            "palisade run",
            "palisade check",
            "palisade ctx",
            "palisade ctx get",
            "palisade ctx import",
            "palisade completions",
            "palisade man",
            "palisade tune",
        ] {
            assert!(page.contains(&format!(".SS \"{sub}\"")), "{sub} missing");
        }
        // Exactly one title, and the commands' own section headings demoted.
        assert_eq!(page.matches(".TH ").count(), 1);
        assert_eq!(page.matches(".SH SYNOPSIS").count(), 1);
        assert!(page.contains("\\-\\-batch\\-lines"), "ctx import's options");
        assert!(!page.contains("palisade\\-help"));
    }

    #[test]
    fn completions_name_every_command() {
        for shell in [
            clap_complete::Shell::Bash,
            clap_complete::Shell::Zsh,
            clap_complete::Shell::Fish,
            clap_complete::Shell::Elvish,
            clap_complete::Shell::PowerShell,
        ] {
            let mut out = Vec::new();
            write_completions(shell, &mut out).unwrap();
            let script = String::from_utf8(out).unwrap();
            for sub in ["run", "check", "ctx", "tune", "completions", "man"] {
                assert!(script.contains(sub), "{shell}: {sub} missing");
            }
        }
    }
}
