//! `palisade`: a reverse proxy that runs ModSecurity rules (SecLang, OWASP CRS) on
//! every request before it reaches the upstream.
//!
//! `palisade run --config FILE` serves; `palisade check --config FILE` loads the
//! configuration and every rule and reports every error, like `nginx -t`;
//! `palisade ctx ...` reads and writes persistent collections; `palisade diag`
//! writes an incident bundle; `palisade tune` proposes and proves exclusions of
//! false positives; `palisade
//! completions SHELL` and `palisade man` print a completion script and the manual
//! page. The command line is [`proxy::cli`]; the work is done by [`proxy::app`].

use clap::Parser;
use proxy::cli::{Cli, Command, Exit};
use std::process::ExitCode;

/// The rule engine allocates many small, short-lived buffers per request; mimalloc
/// serves them with fewer instructions and better locality than the system allocator
/// (about 8% fewer instructions per CRS transaction, measured with callgrind).
/// The `system-allocator` feature leaves it out, for heap profilers that intercept
/// malloc.
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // A usage error exits 2 (Exit::Usage), --help and --version 0.
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run { config } => proxy::app::run(&config),
        Command::Check { config } => proxy::app::check(&config),
        Command::Ctx(args) => match proxy::app::ctx(args) {
            Ok(true) => Ok(()),
            Ok(false) => return Exit::NotFound.into(),
            Err(e) => Err(e),
        },
        Command::Diag {
            config,
            out,
            profile_seconds,
        } => proxy::app::diag(&proxy::diag::bundle::DiagRequest {
            config,
            out,
            profile_seconds,
        }),
        Command::Tune(args) => proxy::app::tune(&args),
        Command::Completions { shell } => printed(proxy::cli::write_completions(
            shell,
            &mut std::io::stdout().lock(),
        )),
        Command::Man => printed(proxy::cli::write_man_page(&mut std::io::stdout().lock())),
    };
    match result {
        Ok(()) => Exit::Success.into(),
        Err(e) => {
            // One line per error when several were found together (`check`).
            for line in format!("{e:#}").lines() {
                eprintln!("palisade: {line}");
            }
            Exit::Failure.into()
        }
    }
}

/// The result of printing to standard output; a reader that went away early
/// (`palisade man | head`) is not an error.
fn printed(r: std::io::Result<()>) -> anyhow::Result<()> {
    match r {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}
