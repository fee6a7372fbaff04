//! Records the git revision and build profile, for `/status` and `palisade --version`
//! (`PALISADE_GIT_REVISION`, `PALISADE_BUILD_PROFILE`).
//!
//! The revision is `PALISADE_GIT_REVISION` from the environment when it is set (a
//! package built from a source archive, without `.git`), else `git rev-parse HEAD`,
//! else `unknown`: a build outside a git checkout still builds, and says so.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (!s.is_empty()).then_some(s)
}

fn main() {
    println!("cargo:rerun-if-env-changed=PALISADE_GIT_REVISION");
    let given = std::env::var("PALISADE_GIT_REVISION")
        .ok()
        .map(|r| r.trim().to_owned())
        .filter(|r| !r.is_empty() && !r.contains(char::is_whitespace));
    let rev = given
        .or_else(|| git(&["rev-parse", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=PALISADE_GIT_REVISION={rev}");
    let profile = std::env::var("PROFILE").unwrap_or_else(|_| "unknown".to_owned());
    println!("cargo:rustc-env=PALISADE_BUILD_PROFILE={profile}");
    println!("cargo:rerun-if-changed=build.rs");
    // Rebuild when HEAD moves: HEAD itself, and the branch it points to.
    if let Some(head) = git(&["rev-parse", "--git-path", "HEAD"]) {
        println!("cargo:rerun-if-changed={head}");
    }
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"])
        && let Some(path) = git(&["rev-parse", "--git-path", &branch])
    {
        println!("cargo:rerun-if-changed={path}");
    }
}
