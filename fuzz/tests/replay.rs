//! Replays every file under `seeds/<target>/` through its target's body, on stable
//! Rust and without libFuzzer: the seed corpus and the crash reproducers kept there
//! stay valid inputs, and the targets keep compiling and running.
//!
//! `FUZZ_REPLAY_DIR=<dir>` adds a directory laid out the same way (for instance a
//! corpus that `cargo fuzz run` grew under `corpus/`).

use std::fs;
use std::path::{Path, PathBuf};

/// The files of `dir/<target>/`, sorted, or nothing when it does not exist.
fn inputs(dir: &Path, target: &str) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir.join(target)) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

fn replay(dir: &Path, require_seeds: bool) -> usize {
    let mut total = 0;
    for target in palisade_fuzz::TARGETS {
        let files = inputs(dir, target.name);
        if require_seeds {
            assert!(
                !files.is_empty(),
                "target {} has no seeds under {}",
                target.name,
                dir.display()
            );
        }
        for file in &files {
            let data = fs::read(file).expect("a seed file is readable");
            let outcome = std::panic::catch_unwind(|| (target.run)(&data));
            assert!(
                outcome.is_ok(),
                "target {} failed on {}",
                target.name,
                file.display()
            );
        }
        total += files.len();
    }
    total
}

#[test]
fn every_seed_passes_its_target() {
    let seeds = Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds");
    let n = replay(&seeds, true);
    println!("replayed {n} seeds");
    if let Some(extra) = std::env::var_os("FUZZ_REPLAY_DIR") {
        let n = replay(Path::new(&extra), false);
        println!("replayed {n} inputs from {}", Path::new(&extra).display());
    }
}

#[test]
fn every_target_has_a_binary() {
    let bins = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz_targets");
    for target in palisade_fuzz::TARGETS {
        let bin = bins.join(format!("{}.rs", target.name));
        assert!(
            bin.is_file(),
            "no {} for target {}",
            bin.display(),
            target.name
        );
    }
}
