//! `palisade diag --config FILE [--out PATH] [--profile-seconds N]`: one `.tar.gz`
//! with what an incident needs, taken from the configuration file and, when it
//! answers, from the running proxy's admin listener.
//!
//! The bundle (one folder, `palisade-diag-HOST-TIME/`):
//!
//! | file | what |
//! |---|---|
//! | `MANIFEST.txt` | what is in it, and what could not be collected and why |
//! | `version.txt` | this binary's version, git revision and build profile |
//! | `system.txt` | kernel, host uptime, host name, the time of capture |
//! | `config.toml` | the configuration, secrets removed |
//! | `hashes.txt` | SHA-256 of the configuration file and of each rule file |
//! | `status.json` | `/status`: rules in force, the last reload's result, logs, TLS, the running version |
//! | `metrics.txt` | `/metrics`: counters, phase histograms, store and sync, CPU by mode |
//! | `slow.json` | `/debug/slow`: the slowest recent requests with their phase times |
//! | `top.json` | `/top`: the heaviest clients, the routes, the costliest rules |
//! | `profile.pb` | with `--profile-seconds N`: a CPU profile of the next N seconds (pprof) |
//! | `incidents/NAME/...` | the last three incidents captured by `[incidents]`, their profiles included |
//!
//! What needs the admin token (`slow.json`, `top.json`, `profile.pb`) is taken
//! with the token of `admin.token_file` (or `PALISADE_ADMIN_TOKEN`). A part that
//! cannot be had is listed in `MANIFEST.txt` with the reason; the bundle is still
//! written.

use crate::config::Config;
use bytes::Bytes;
use http_body_util::Empty;
use sha2::Digest as _;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The longest answer read from one admin endpoint.
const MAX_ANSWER: usize = 64 << 20;

/// Longest wait for one admin request, besides the profile's own length.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How many of the last incidents captured (`[incidents]`) the bundle carries.
pub const INCIDENTS: usize = 3;

/// What replaces a secret in `config.toml`.
pub const REDACTED: &str = "[redacted]";

/// Why no bundle was written.
#[derive(Debug, thiserror::Error)]
pub enum DiagError {
    /// The configuration file could not be loaded.
    #[error("{0}")]
    Config(#[from] crate::config::ConfigError),
    /// The configuration file could not be read again as TOML (for `config.toml`).
    #[error("{path}: {reason}")]
    ConfigText {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The bundle could not be written.
    #[error("writing {path}: {source}")]
    Write {
        /// The bundle's path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// What `palisade diag` was asked for.
#[derive(Debug, Clone)]
pub struct DiagRequest {
    /// The configuration file of the proxy to diagnose.
    pub config: PathBuf,
    /// Where to write the bundle (a file, or an existing directory); absent: the
    /// current directory.
    pub out: Option<PathBuf>,
    /// Take a CPU profile of this many seconds from the running proxy.
    pub profile_seconds: Option<u64>,
}

/// What was written.
#[derive(Debug)]
pub struct Written {
    /// The bundle.
    pub path: PathBuf,
    /// Its files, in order.
    pub files: Vec<String>,
    /// The parts that could not be collected, with the reason.
    pub missing: Vec<(String, String)>,
}

/// Collects everything and writes the bundle.
pub fn write(req: &DiagRequest) -> Result<Written, DiagError> {
    let cfg = Config::load(&req.config)?;
    let text = std::fs::read_to_string(&req.config).map_err(|e| DiagError::ConfigText {
        path: req.config.clone(),
        reason: e.to_string(),
    })?;
    let now = crate::logs::rfc3339_micros(unix_micros());
    let host = rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned();
    let stamp: String = now
        .chars()
        .take(19)
        .filter(|c| c.is_ascii_alphanumeric())
        .collect();
    let name = format!("palisade-diag-{}-{stamp}", sanitize(&host));
    let path = match &req.out {
        Some(p) if p.is_dir() => p.join(format!("{name}.tar.gz")),
        Some(p) => p.clone(),
        None => PathBuf::from(format!("{name}.tar.gz")),
    };

    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    let mut missing: Vec<(String, String)> = Vec::new();
    files.push((
        "version.txt".into(),
        format!("{}\n", crate::cli::LONG_VERSION).into(),
    ));
    files.push(("system.txt".into(), system_text(&host, &now).into()));
    match redacted_config(&text) {
        Ok(t) => files.push(("config.toml".into(), t.into())),
        Err(e) => missing.push(("config.toml".into(), e)),
    }
    files.push(("hashes.txt".into(), hashes(&req.config, &text, &cfg).into()));
    if let Some(i) = &cfg.incidents {
        for dir in crate::diag::incident::kept(&i.dir)
            .into_iter()
            .take(INCIDENTS)
        {
            let Some(name) = dir.file_name().map(|n| n.to_string_lossy().into_owned()) else {
                continue;
            };
            for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let file = e.file_name().to_string_lossy().into_owned();
                match std::fs::read(e.path()) {
                    Ok(body) => files.push((format!("incidents/{name}/{file}"), body)),
                    Err(err) => missing.push((format!("incidents/{name}/{file}"), err.to_string())),
                }
            }
        }
    }

    match &cfg.admin {
        None => missing.push((
            "status.json, metrics.txt, slow.json, top.json".into(),
            "no [admin] listener in the configuration".into(),
        )),
        Some(admin) => {
            let token = token_text(admin);
            let mut asks: Vec<(&str, String, bool, Duration)> = vec![
                ("status.json", "/status".into(), false, REQUEST_TIMEOUT),
                ("metrics.txt", "/metrics".into(), false, REQUEST_TIMEOUT),
                ("slow.json", "/debug/slow".into(), true, REQUEST_TIMEOUT),
                ("top.json", "/top?n=100".into(), true, REQUEST_TIMEOUT),
            ];
            if let Some(s) = req.profile_seconds {
                asks.push((
                    "profile.pb",
                    format!("/debug/profile?seconds={s}&format=pprof"),
                    true,
                    REQUEST_TIMEOUT + Duration::from_secs(s),
                ));
            }
            for (file, target, needs_token, timeout) in asks {
                if needs_token && token.is_none() {
                    missing.push((
                        file.into(),
                        "no admin token (admin.token_file or PALISADE_ADMIN_TOKEN)".into(),
                    ));
                    continue;
                }
                let auth = if needs_token { token.as_deref() } else { None };
                match fetch(admin.address, &target, auth, timeout) {
                    Ok(body) => files.push((file.into(), body)),
                    Err(e) => missing.push((file.into(), format!("GET {target}: {e}"))),
                }
            }
        }
    }

    let mut manifest = format!(
        "palisade diag, {now}, from {}\n\nfiles:\n",
        req.config.display()
    );
    for (f, body) in &files {
        manifest.push_str(&format!("  {f} ({} bytes)\n", body.len()));
    }
    if !missing.is_empty() {
        manifest.push_str("\nnot collected:\n");
        for (f, why) in &missing {
            manifest.push_str(&format!("  {f}: {why}\n"));
        }
    }
    files.insert(0, ("MANIFEST.txt".into(), manifest.into()));
    write_archive(&path, &name, &files).map_err(|source| DiagError::Write {
        path: path.clone(),
        source,
    })?;
    Ok(Written {
        path,
        files: files.into_iter().map(|(f, _)| f).collect(),
        missing,
    })
}

fn unix_micros() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

/// Keeps letters, digits, `-` and `.` of a host name for a file name.
fn sanitize(s: &str) -> String {
    let out: String = s
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.'))
        .collect();
    if out.is_empty() { "host".into() } else { out }
}

/// Kernel, host uptime, host name and the time of capture.
fn system_text(host: &str, now: &str) -> String {
    let uts = rustix::system::uname();
    let uptime = std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|u| u.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "unknown".into());
    format!(
        "captured: {now}\nhost: {host}\nkernel: {} {} {}\nhost_uptime_seconds: {uptime}\n",
        uts.sysname().to_string_lossy(),
        uts.release().to_string_lossy(),
        uts.version().to_string_lossy(),
    )
}

/// Whether a configuration key holds a secret.
fn secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    (k.contains("password") || k.contains("secret") || k.ends_with("token"))
        && !k.ends_with("_file")
}

/// A URL's user information (`scheme://user:password@host`) replaced.
fn redact_url(s: &str) -> Option<String> {
    let (scheme, rest) = s.split_once("://")?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let at = rest[..end].rfind('@')?;
    Some(format!("{scheme}://{REDACTED}@{}", &rest[at + 1..]))
}

fn redact(v: &mut toml::Value) {
    match v {
        toml::Value::Table(t) => {
            for (k, v) in t.iter_mut() {
                if secret_key(k) && !matches!(v, toml::Value::Table(_) | toml::Value::Array(_)) {
                    *v = toml::Value::String(REDACTED.into());
                } else {
                    redact(v);
                }
            }
        }
        toml::Value::Array(a) => a.iter_mut().for_each(redact),
        toml::Value::String(s) => {
            if let Some(r) = redact_url(s) {
                *s = r;
            }
        }
        _ => {}
    }
}

/// The configuration with its secrets replaced by [`REDACTED`]: values of keys
/// naming a password, a secret or a token (not a token file), and the user
/// information of URLs.
pub fn redacted_config(text: &str) -> Result<String, String> {
    let mut v: toml::Value = toml::from_str(text).map_err(|e| e.to_string())?;
    redact(&mut v);
    toml::to_string(&v).map_err(|e| e.to_string())
}

/// SHA-256 of the configuration file and of each rule file it names.
fn hashes(path: &Path, text: &str, cfg: &Config) -> String {
    let hex = |b: &[u8]| -> String {
        sha2::Sha256::digest(b)
            .iter()
            .map(|x| format!("{x:02x}"))
            .collect()
    };
    let mut out = format!("{}  {}\n", hex(text.as_bytes()), path.display());
    let sections = std::iter::once(&cfg.rules).chain(cfg.sites.iter().map(|s| &s.rules));
    for rules in sections {
        for r in rules {
            let Some(file) = &r.file else { continue };
            for f in crate::waf::glob_or_file(file) {
                match std::fs::read(&f) {
                    Ok(b) => out.push_str(&format!("{}  {}\n", hex(&b), f.display())),
                    Err(e) => out.push_str(&format!("unreadable ({e})  {}\n", f.display())),
                }
            }
        }
    }
    out
}

/// The admin token's text, as the proxy reads it.
fn token_text(admin: &crate::config::AdminConfig) -> Option<String> {
    let t = match &admin.token_file {
        Some(p) => std::fs::read_to_string(p).ok()?,
        None => std::env::var(crate::admin::TOKEN_ENV).ok()?,
    };
    let t = t.trim();
    (!t.is_empty()).then(|| t.to_owned())
}

/// `GET target` on the admin listener; the body of a 200 answer.
fn fetch(
    addr: SocketAddr,
    target: &str,
    token: Option<&str>,
    timeout: Duration,
) -> Result<Vec<u8>, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        tokio::time::timeout(timeout, get(addr, target, token))
            .await
            .map_err(|_| format!("no answer within {} s", timeout.as_secs()))?
    })
}

async fn get(addr: SocketAddr, target: &str, token: Option<&str>) -> Result<Vec<u8>, String> {
    let mut req = http::Request::get(target).header(http::header::HOST, addr.to_string());
    if let Some(t) = token {
        req = req.header(http::header::AUTHORIZATION, format!("Bearer {t}"));
    }
    let req = req.body(Empty::<Bytes>::new()).map_err(|e| e.to_string())?;
    let target = crate::http_client::Target::plain(&addr.ip().to_string(), addr.port());
    let (status, body) = crate::http_client::send(&target, req, MAX_ANSWER)
        .await
        .map_err(|e| e.to_string())?;
    let body = body?;
    if !status.is_success() {
        return Err(format!(
            "{status}: {}",
            crate::http_client::body_start(&body)
        ));
    }
    Ok(body.to_vec())
}

/// Writes `files` under the folder `name` into a gzip-compressed tar at `path`.
fn write_archive(path: &Path, name: &str, files: &[(String, Vec<u8>)]) -> std::io::Result<()> {
    let tmp = path.with_extension("partial");
    let out = std::fs::File::create(&tmp)?;
    let gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    let mtime = u64::try_from(unix_micros() / 1_000_000).unwrap_or(0);
    for (file, body) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(body.len() as u64);
        h.set_mode(0o600);
        h.set_mtime(mtime);
        h.set_entry_type(tar::EntryType::Regular);
        tar.append_data(&mut h, format!("{name}/{file}"), &body[..])?;
    }
    let mut gz = tar.into_inner()?;
    gz.flush()?;
    gz.finish()?.sync_all()?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_removed_and_the_rest_kept() {
        let text = r#"
[[listener]]
address = "127.0.0.1:8080"

[sync]
redis_url = "redis://palisade:hunter2@10.0.0.5:6379/0"
password = "hunter3"

[admin]
token_file = "/etc/palisade/admin.token"
api_token = "hunter4"

[[rate_limit]]
key = "client_ip"
"#;
        let out = redacted_config(text).unwrap();
        for secret in ["hunter2", "hunter3", "hunter4"] {
            assert!(!out.contains(secret), "{secret} in {out}");
        }
        assert!(out.contains("redis://[redacted]@10.0.0.5:6379/0"), "{out}");
        assert!(out.contains("/etc/palisade/admin.token"), "{out}");
        assert!(out.contains("client_ip"), "{out}");
        assert!(out.contains("127.0.0.1:8080"), "{out}");
        assert!(redacted_config("[[listener]\n").is_err());
    }

    #[test]
    fn urls_without_user_information_stay() {
        assert_eq!(redact_url("https://example.com/a@b"), None);
        assert_eq!(redact_url("plain text"), None);
        assert_eq!(
            redact_url("rediss://u:p@h:1").as_deref(),
            Some("rediss://[redacted]@h:1")
        );
        assert_eq!(sanitize("web-01.example"), "web-01.example");
        assert_eq!(sanitize("/../"), "..");
        assert_eq!(sanitize("///"), "host");
    }
}
