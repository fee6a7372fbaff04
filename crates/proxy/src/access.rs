//! Client address allow and deny lists (`[access]`): loaded from the configuration
//! and its list files, replaced by a SIGHUP reload, and asked once per connection,
//! when it is accepted.
//!
//! The lists are [`engine::IpSet`]s, the sets `@ipMatchFromFile` uses:
//! sorted, merged address ranges, so a lookup is one binary search whatever the
//! number of entries (a million-entry list answers in well under a microsecond; see
//! BENCHMARKS.md).

use crate::config::AccessSection;
use engine::{IpSet, IpSetBuilder};
use std::net::IpAddr;

/// Why the access lists could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    /// A list file could not be read.
    #[error("access list {path}: {source}")]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// The system's reason.
        source: std::io::Error,
    },
    /// An entry is not an address or a network.
    #[error("access list {0}")]
    Entry(String),
}

/// The loaded lists.
#[derive(Debug)]
pub struct AccessList {
    allow: IpSet,
    deny: IpSet,
    default_allow: bool,
}

impl AccessList {
    /// Loads the inline entries and the list files of `cfg`.
    pub fn load(cfg: &AccessSection) -> Result<AccessList, AccessError> {
        let build = |inline: &[String], files: &[std::path::PathBuf], key: &str| {
            let mut b = IpSetBuilder::default();
            for (i, entry) in inline.iter().enumerate() {
                b.insert(entry.trim())
                    .map_err(|e| AccessError::Entry(format!("access.{key}[{i}] `{entry}`: {e}")))?;
            }
            for path in files {
                let content = std::fs::read(path).map_err(|source| AccessError::Read {
                    path: path.clone(),
                    source,
                })?;
                b.add_list(&content, &path.display().to_string())
                    .map_err(AccessError::Entry)?;
            }
            Ok::<IpSet, AccessError>(b.build())
        };
        Ok(AccessList {
            allow: build(&cfg.allow, &cfg.allow_files, "allow")?,
            deny: build(&cfg.deny, &cfg.deny_files, "deny")?,
            default_allow: cfg.default != "deny",
        })
    }

    /// Whether a client at `ip` may connect. An IPv4-mapped IPv6 address (a dual-stack
    /// listener's view of an IPv4 client) is looked up as IPv4.
    pub fn allows(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        if self.allow.contains_ip(ip) {
            return true;
        }
        if self.deny.contains_ip(ip) {
            return false;
        }
        self.default_allow
    }

    /// Networks in the allow and deny lists.
    pub fn len(&self) -> usize {
        self.allow.len() + self.deny.len()
    }

    /// True when both lists are empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of memory the lists take.
    pub fn heap_bytes(&self) -> usize {
        self.allow.heap_bytes() + self.deny.heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(allow: &[&str], deny: &[&str], default: &str) -> AccessSection {
        AccessSection {
            allow: allow.iter().map(|s| s.to_string()).collect(),
            allow_files: Vec::new(),
            deny: deny.iter().map(|s| s.to_string()).collect(),
            deny_files: Vec::new(),
            default: default.to_owned(),
        }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn allow_wins_over_deny_and_default_decides_the_rest() {
        let a = AccessList::load(&section(
            &["10.1.0.0/16"],
            &["10.0.0.0/8", "2001:db8::/32"],
            "allow",
        ))
        .unwrap();
        assert!(a.allows(ip("10.1.2.3")));
        assert!(!a.allows(ip("10.2.0.1")));
        assert!(!a.allows(ip("::ffff:10.2.0.1")), "IPv4-mapped is IPv4");
        assert!(!a.allows(ip("2001:db8::1")));
        assert!(a.allows(ip("192.0.2.1")));
        let strict = AccessList::load(&section(&["127.0.0.1"], &[], "deny")).unwrap();
        assert!(strict.allows(ip("127.0.0.1")));
        assert!(!strict.allows(ip("127.0.0.2")));
        assert_eq!(strict.len(), 1);
    }

    #[test]
    fn bad_entries_name_where() {
        let e = AccessList::load(&section(&[], &["10.0.0.0/8", "nope"], "allow")).unwrap_err();
        assert!(e.to_string().contains("access.deny[1] `nope`"), "{e}");
        let dir = std::env::temp_dir().join(format!("palisade-access-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("deny.txt");
        std::fs::write(&f, "# blocklist\n10.0.0.1\n\n10.0.0.300\n").unwrap();
        let mut s = section(&[], &[], "allow");
        s.deny_files.push(f.clone());
        let e = AccessList::load(&s).unwrap_err().to_string();
        assert!(
            e.contains(&format!("{}:4", f.display())) && e.contains("10.0.0.300"),
            "{e}"
        );
        s.deny_files[0] = dir.join("missing.txt");
        let e = AccessList::load(&s).unwrap_err().to_string();
        assert!(e.contains("missing.txt"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
