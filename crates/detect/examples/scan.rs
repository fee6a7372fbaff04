//! Runs every detector on each argument and prints what it finds: a way to see how
//! the detectors read a value.
//!
//! ```text
//! cargo run -p detect --example scan -- "1' OR 1=1--" "<img src=x onerror=alert(1)>"
//! ```
//!
//! With `--hex`, it reads values from standard input instead, one per line, each
//! written in hexadecimal (so that any bytes, line breaks included, fit on a line),
//! and prints `N<TAB>class (rule)...` for each value N (from 0) a detector finds
//! something in, `N<TAB>confirm` when only SQL's `confirm` answers yes: for checking
//! many values at once.

use std::io::BufRead;

fn findings(value: &[u8]) -> Vec<String> {
    detect::Class::ALL
        .iter()
        .filter_map(|c| c.scan(value))
        .map(|f| {
            format!(
                "{} ({}, bytes {}..{})",
                f.class.name(),
                f.rule,
                f.at.start,
                f.at.end
            )
        })
        .collect()
}

fn unhex(line: &str) -> Option<Vec<u8>> {
    let t = line.trim().as_bytes();
    if !t.len().is_multiple_of(2) {
        return None;
    }
    t.chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).ok()?, 16).ok())
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--hex") {
        for (n, line) in std::io::stdin().lock().lines().enumerate() {
            let Ok(line) = line else { break };
            let Some(value) = unhex(&line) else {
                eprintln!("line {}: not hexadecimal", n + 1);
                std::process::exit(2);
            };
            let found = findings(&value);
            if !found.is_empty() {
                let fp = detect::libinjection::detect_sqli(&value)
                    .map(|f| format!(" [libinjection {}]", String::from_utf8_lossy(f.as_bytes())))
                    .unwrap_or_default();
                println!("{n}\t{}{fp}", found.join("; "));
            } else if detect::sql::confirm(&value) {
                println!("{n}\tconfirm");
            }
        }
        return;
    }
    for arg in args {
        let found = findings(arg.as_bytes());
        if found.is_empty() {
            println!("{arg:?}: nothing");
        } else {
            println!("{arg:?}: {}", found.join("; "));
        }
    }
}
