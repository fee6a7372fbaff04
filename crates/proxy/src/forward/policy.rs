//! Who may go where: the forward proxy's users, groups and URL categories.
//!
//! [`Policy`] holds what `[forward]` says beyond the global deny and allow lists
//! ([`super::destination::Lists`]): the htpasswd users that must authenticate
//! ([`super::auth::Authenticator`]), the groups of the group file and their
//! `[[forward.group]]` rules, and the URL categories (`domains::Categories`) with
//! the ones refused for everyone. A destination is decided in this order:
//!
//! 1. the global deny list (`forward.deny`);
//! 2. the deny lists of the user's groups;
//! 3. the categories: `forward.block_categories`, and those of the user's groups;
//! 4. the allow lists: `forward.allow` and the allow lists of the user's groups
//!    (when a list is set, the destination must be on it).
//!
//! A refusal carries the [`BlockReason`] the block page ([`super::blockpage`])
//! shows, with a fresh reference id that the error log carries too.

use super::auth::{AuthFileError, Authenticator, CacheSettings, Groups, Htpasswd, RealmError};
use super::blockpage::{self, BlockReason};
use super::destination::{ForwardSetupError, Lists};
use crate::config::ForwardSection;
use domains::{Categories, CategoryId, Host, SuffixSet};
use std::sync::Arc;

/// The rules of one `[[forward.group]]`.
#[derive(Debug)]
struct GroupRule {
    name: String,
    block: Vec<CategoryId>,
    deny: Option<SuffixSet>,
    allow: Option<SuffixSet>,
}

/// The forward proxy's users, groups and categories: see the module
/// documentation.
#[derive(Debug, Default)]
pub struct Policy {
    auth: Option<Arc<Authenticator>>,
    groups: Groups,
    categories: Categories,
    block: Vec<CategoryId>,
    group_rules: Vec<GroupRule>,
}

/// A destination the policy refuses: the reason for the error log and the
/// block page's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyRefusal {
    /// What the error log says (the reference id included).
    pub reason: String,
    /// What the block page shows.
    pub block: BlockReason,
}

fn list_error(key: String) -> impl FnOnce(domains::LoadError) -> ForwardSetupError {
    move |error| ForwardSetupError::Policy {
        key,
        error: error.to_string(),
    }
}

fn auth_error(key: &str) -> impl FnOnce(AuthFileError) -> ForwardSetupError + '_ {
    move |error| ForwardSetupError::Policy {
        key: key.to_owned(),
        error: error.to_string(),
    }
}

fn load_set(
    files: &[std::path::PathBuf],
    key: &str,
) -> Result<Option<SuffixSet>, ForwardSetupError> {
    if files.is_empty() {
        return Ok(None);
    }
    let mut set = SuffixSet::new();
    for f in files {
        set.add_file(f, 1).map_err(list_error(key.to_owned()))?;
    }
    set.shrink_to_fit();
    Ok(Some(set))
}

impl Policy {
    /// Loads the files `cfg` names: htpasswd, groups, categories and the
    /// groups' lists.
    ///
    /// # Errors
    ///
    /// [`ForwardSetupError::Policy`] naming the key and, through the loader's
    /// message, the file and line.
    pub fn load(cfg: &ForwardSection) -> Result<Policy, ForwardSetupError> {
        let auth = match &cfg.htpasswd {
            None => None,
            Some(path) => {
                let users = Htpasswd::load(path).map_err(auth_error("forward.htpasswd"))?;
                let a = Authenticator::new(users, &cfg.realm, CacheSettings::default()).map_err(
                    |RealmError(r)| ForwardSetupError::Policy {
                        key: "forward.realm".into(),
                        error: format!("{r:?} holds control characters or is over 256 bytes"),
                    },
                )?;
                Some(Arc::new(a))
            }
        };
        let groups = match &cfg.groups {
            None => Groups::default(),
            Some(path) => Groups::load(path).map_err(auth_error("forward.groups"))?,
        };
        let categories = match &cfg.categories {
            None => Categories::new(),
            Some(dir) => {
                Categories::load_dir(dir).map_err(list_error("forward.categories".into()))?
            }
        };
        let ids = |key: &str, names: &[String]| -> Result<Vec<CategoryId>, ForwardSetupError> {
            names
                .iter()
                .map(|n| {
                    categories.id(n).ok_or_else(|| ForwardSetupError::Policy {
                        key: key.to_owned(),
                        error: format!("unknown category {n:?}"),
                    })
                })
                .collect()
        };
        let block = ids("forward.block_categories", &cfg.block_categories)?;
        let mut group_rules = Vec::with_capacity(cfg.groups_rules.len());
        for g in &cfg.groups_rules {
            let key = |what: &str| format!("forward.group {:?} {what}", g.name);
            group_rules.push(GroupRule {
                name: g.name.clone(),
                block: ids(&key("block_categories"), &g.block_categories)?,
                deny: load_set(&g.deny, &key("deny"))?,
                allow: load_set(&g.allow, &key("allow"))?,
            });
        }
        Ok(Policy {
            auth,
            groups,
            categories,
            block,
            group_rules,
        })
    }

    /// The authenticator, when `forward.htpasswd` is set.
    pub fn authenticator(&self) -> Option<&Arc<Authenticator>> {
        self.auth.as_ref()
    }

    /// The `[[forward.group]]` rules that apply to `user` (none without one).
    fn rules_of<'a>(&'a self, user: Option<&'a str>) -> impl Iterator<Item = &'a GroupRule> + 'a {
        self.group_rules
            .iter()
            .filter(move |g| user.is_some_and(|u| self.groups.is_member(u, &g.name)))
    }

    /// Decides whether `user` (`None` without authentication) may reach `host`
    /// at `path` (`""` for a `CONNECT`), in the order of the module
    /// documentation.
    ///
    /// # Errors
    ///
    /// [`PolicyRefusal`] naming the list or category that refused.
    pub fn check(
        &self,
        lists: &Lists,
        host: &Host,
        path: &str,
        user: Option<&str>,
    ) -> Result<(), PolicyRefusal> {
        self.check_denied(lists, host, path, user)?;
        if !lists.allows(host) {
            return refuse(
                host,
                user,
                blockpage::Refusal::Rule("forward.allow".into()),
                format!("destination {host} is not on the forward.allow list"),
            );
        }
        for g in self.rules_of(user) {
            if g.allow.as_ref().is_some_and(|a| !a.contains(host)) {
                return refuse(
                    host,
                    user,
                    blockpage::Refusal::Rule(format!("allow list of group {}", g.name)),
                    format!(
                        "destination {host} is not on the allow list of group {:?}",
                        g.name
                    ),
                );
            }
        }
        Ok(())
    }

    /// Steps 1 to 3 of the order: whether a deny list or a blocked category
    /// holds `host`. For the addresses a name resolved to, which an allow list
    /// of names cannot hold, only these apply.
    ///
    /// # Errors
    ///
    /// [`PolicyRefusal`] naming the list or category that refused.
    pub fn check_denied(
        &self,
        lists: &Lists,
        host: &Host,
        path: &str,
        user: Option<&str>,
    ) -> Result<(), PolicyRefusal> {
        if lists.denies(host) {
            return refuse(
                host,
                user,
                blockpage::Refusal::Rule("forward.deny".into()),
                format!("destination {host} is on the forward.deny list"),
            );
        }
        for g in self.rules_of(user) {
            if g.deny.as_ref().is_some_and(|d| d.contains(host)) {
                return refuse(
                    host,
                    user,
                    blockpage::Refusal::Rule(format!("deny list of group {}", g.name)),
                    format!(
                        "destination {host} is on the deny list of group {:?}",
                        g.name
                    ),
                );
            }
        }
        if !self.categories.names().is_empty() {
            let found = self.categories.lookup(host, path);
            let blocked = found.iter().find(|c| {
                self.block.contains(c) || self.rules_of(user).any(|g| g.block.contains(c))
            });
            if let Some(&c) = blocked {
                let name = self.categories.name(c).unwrap_or("?").to_owned();
                return refuse(
                    host,
                    user,
                    blockpage::Refusal::Category(name.clone()),
                    format!("destination {host} is in the blocked category {name:?}"),
                );
            }
        }
        Ok(())
    }
}

/// A refusal of `host` for `user`, with a fresh block reference.
fn refuse(
    host: &Host,
    user: Option<&str>,
    what: blockpage::Refusal,
    why: String,
) -> Result<(), PolicyRefusal> {
    let who = user.map_or(String::new(), |u| format!(" for user {u:?}"));
    let reference = blockpage::reference_id();
    Err(PolicyRefusal {
        reason: format!("{why}{who} (block reference {reference})"),
        block: BlockReason {
            host: host.to_string(),
            refusal: what,
            reference,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    fn write(dir: &std::path::Path, name: &str, text: &str) -> std::path::PathBuf {
        let p = dir.join(name);
        std::fs::File::create(&p)
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        p
    }

    #[test]
    fn order_of_decisions() {
        let dir = tempfile::tempdir().unwrap();
        let cats = dir.path().join("cats");
        std::fs::create_dir(&cats).unwrap();
        write(&cats, "games.txt", "games.example\nportal.example/games/\n");
        write(&cats, "social.txt", "social.example\n");
        let hash = bcrypt::hash("pw", 4).unwrap();
        let htpasswd = write(dir.path(), "users", &format!("alice:{hash}\nbob:{hash}\n"));
        let groups = write(dir.path(), "groups", "pupils: alice\n");
        let pupil_deny = write(dir.path(), "pdeny", "news.example\n");
        let mut cfg = ForwardSection {
            htpasswd: Some(htpasswd),
            groups: Some(groups),
            categories: Some(cats),
            block_categories: vec!["games".into()],
            ..ForwardSection::default()
        };
        cfg.groups_rules.push(crate::config::ForwardGroup {
            name: "pupils".into(),
            block_categories: vec!["social".into()],
            deny: vec![pupil_deny],
            allow: Vec::new(),
        });
        let policy = Policy::load(&cfg).unwrap();
        assert!(policy.authenticator().is_some());
        let lists = Lists::default();
        let host = |h: &str| domains::normalize_name(h.as_bytes()).unwrap();
        let check = |h: &str, path: &str, user: Option<&str>| {
            policy
                .check(&lists, &host(h), path, user)
                .map_err(|r| r.block.refusal)
        };
        let cat = |c: &str| Err(blockpage::Refusal::Category(c.into()));
        assert_eq!(check("www.games.example", "/", None), cat("games"));
        assert_eq!(
            check("portal.example", "/games/x", Some("bob")),
            cat("games")
        );
        assert_eq!(check("portal.example", "/news", Some("bob")), Ok(()));
        assert_eq!(check("portal.example", "", Some("bob")), Ok(()));
        assert_eq!(check("social.example", "/", Some("bob")), Ok(()));
        assert_eq!(check("social.example", "/", Some("alice")), cat("social"));
        assert_eq!(
            check("news.example", "/", Some("alice")),
            Err(blockpage::Refusal::Rule("deny list of group pupils".into()))
        );
        assert_eq!(check("news.example", "/", Some("bob")), Ok(()));
        let r = policy
            .check(&lists, &host("games.example"), "", None)
            .unwrap_err();
        assert!(r.reason.contains(&r.block.reference), "{}", r.reason);

        cfg.block_categories = vec!["nope".into()];
        assert!(
            Policy::load(&cfg)
                .unwrap_err()
                .to_string()
                .contains("forward.block_categories")
        );
    }
}
