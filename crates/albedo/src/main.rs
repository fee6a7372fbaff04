//! `albedo`: an albedo-compatible HTTP test backend.
//!
//! ```text
//! albedo --bind 127.0.0.1:0 [--record requests.jsonl] [--debug]
//! ```
//!
//! The first line on standard output is `listening on IP:PORT`, with the real port when
//! port 0 was asked for, so scripts can start it on a free port and read the address back.

use std::io::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// Command-line arguments.
#[derive(Debug, Parser)]
#[command(
    name = "albedo",
    version,
    about = "HTTP reflector and black hole for WAF tests (albedo-compatible)"
)]
struct Args {
    /// Address to listen on: IP:PORT, or just IP together with --port. Port 0 picks a free
    /// port.
    #[arg(short, long, default_value = "127.0.0.1:8080")]
    bind: String,
    /// Port to listen on; overrides the port in --bind (albedo's own flag).
    #[arg(short, long)]
    port: Option<u16>,
    /// Append one JSON line per received request to this file.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// Log every request to standard error.
    #[arg(long)]
    debug: bool,
}

/// Turns `--bind` and `--port` into one socket address.
fn listen_addr(bind: &str, port: Option<u16>) -> Result<SocketAddr, String> {
    let addr = if let Ok(addr) = bind.parse::<SocketAddr>() {
        addr
    } else if let Ok(ip) = bind.parse::<IpAddr>() {
        SocketAddr::new(ip, 8080)
    } else {
        return Err(format!(
            "--bind {bind:?} is neither IP:PORT nor an IP address"
        ));
    };
    Ok(match port {
        Some(port) => SocketAddr::new(addr.ip(), port),
        None => addr,
    })
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let addr = match listen_addr(&args.bind, args.port) {
        Ok(addr) => addr,
        Err(message) => {
            eprintln!("albedo: {message}");
            return ExitCode::from(2);
        }
    };
    let options = albedo::Options {
        record: args.record,
        debug: args.debug,
    };
    let server = match albedo::Albedo::bind(addr, &options).await {
        Ok(server) => server,
        Err(e) => {
            eprintln!("albedo: {e}");
            return ExitCode::FAILURE;
        }
    };
    let local = match server.local_addr() {
        Ok(local) => local,
        Err(e) => {
            eprintln!("albedo: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut stdout = std::io::stdout().lock();
    if writeln!(stdout, "listening on {local}")
        .and_then(|()| stdout.flush())
        .is_err()
    {
        eprintln!("albedo: cannot write to standard output");
        return ExitCode::FAILURE;
    }
    drop(stdout);
    server.serve().await;
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bind_forms() {
        assert_eq!(
            listen_addr("127.0.0.1:0", None).unwrap(),
            "127.0.0.1:0".parse().unwrap()
        );
        assert_eq!(
            listen_addr("127.0.0.1", None).unwrap(),
            "127.0.0.1:8080".parse().unwrap()
        );
        assert_eq!(
            listen_addr("0.0.0.0", Some(80)).unwrap(),
            "0.0.0.0:80".parse().unwrap()
        );
        assert_eq!(
            listen_addr("[::1]:9", Some(10)).unwrap(),
            "[::1]:10".parse().unwrap()
        );
        assert!(listen_addr("localhost:80", None).is_err());
    }
}
