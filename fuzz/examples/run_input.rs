//! Runs one fuzz target's body on input files, on stable Rust, and says how long
//! each took: for reproducing a crash or a slow input that the fuzzer reported.
//!
//! ```text
//! cargo run --release --example run_input -- TARGET FILE...
//! ```

use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(name) = args.next() else {
        eprintln!("usage: run_input TARGET FILE...");
        std::process::exit(2);
    };
    let Some(target) = palisade_fuzz::target(&name) else {
        let names: Vec<&str> = palisade_fuzz::TARGETS.iter().map(|t| t.name).collect();
        eprintln!(
            "run_input: no target {name:?} (targets: {})",
            names.join(", ")
        );
        std::process::exit(2);
    };
    for path in args {
        let data = match std::fs::read(&path) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("run_input: {path}: {e}");
                std::process::exit(1);
            }
        };
        let start = Instant::now();
        (target.run)(&data);
        println!("{path}: {} bytes, {:?}", data.len(), start.elapsed());
    }
}
