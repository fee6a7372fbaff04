//! Sites (`[[site]]`): virtual hosts, or routes by path, with a policy of their own
//! over the rules of `[[rules]]`, which are compiled once and shared.
//!
//! Each site is an [`engine::Policy`] bound to the one base rule set (its own
//! rules as a small overlay, its exclusions as removal sets, its engine mode,
//! paranoia level and limits), with the hosts and path prefix that select it and
//! the proxy's own limit (`request_body_bytes`). A request is given to the first
//! site, in configuration order, whose hosts and path prefix match it, as
//! `[[route]]`s are matched ([`crate::upstream::HostMatch`]); a request of no site
//! gets the global policy, the site `default`. The sites live in the [`Waf`]
//! snapshot, beside the rules they are bound to, and a reload swaps them together.

use crate::config::{DEFAULT_SITE, RuleSource, SiteSection};
use crate::upstream::HostMatch;
use crate::waf::Waf;
use engine::{Policy, PolicyBuilder, PolicyLimits, Ruleset};
use std::path::Path;
use std::sync::{Arc, OnceLock};

/// One site: what selects it and its policy.
#[derive(Debug)]
pub struct Site {
    name: Arc<str>,
    hosts: Vec<HostMatch>,
    path_prefix: Option<Vec<u8>>,
    /// The policy; `None` for the default site of a configuration without
    /// `[[site]]` (its transactions are plain ones on the base).
    policy: Option<Arc<Policy>>,
    /// `limits.request_body_bytes` for the site, when it sets it.
    request_body_bytes: Option<usize>,
    /// Whether the site's policy cannot act on any request (no rule, no setting
    /// that acts alone): no transaction is made then.
    pub(crate) empty: bool,
    /// The site's metrics, found by name on the first request.
    counters: OnceLock<Arc<crate::metrics::SiteCounters>>,
}

impl Site {
    /// The site's name (`default` for requests of no site).
    pub fn name(&self) -> &Arc<str> {
        &self.name
    }

    /// The site's policy (none for the default site without `[[site]]`).
    pub fn policy(&self) -> Option<&Arc<Policy>> {
        self.policy.as_ref()
    }

    /// The largest request body the proxy takes for this site.
    pub fn request_body_bytes(&self, global: usize) -> usize {
        self.request_body_bytes.unwrap_or(global)
    }

    /// Whether the site sets its own `limits.request_body_bytes`.
    pub fn own_request_body_bytes(&self) -> bool {
        self.request_body_bytes.is_some()
    }

    /// The site's metrics.
    pub fn counters(&self, metrics: &crate::metrics::Metrics) -> &crate::metrics::SiteCounters {
        self.counters
            .get_or_init(|| metrics.site_counters(&self.name))
    }

    fn matches(&self, host: Option<&[u8]>, path: &[u8]) -> bool {
        (self.hosts.is_empty() || self.hosts.iter().any(|h| h.matches(host)))
            && self
                .path_prefix
                .as_ref()
                .is_none_or(|p| path.starts_with(p))
    }
}

/// Every site of a configuration, in order, and the default site last.
#[derive(Debug)]
pub struct Sites {
    list: Vec<Site>,
}

impl Sites {
    /// No `[[site]]`: every request is the default site's, on the plain base.
    pub fn none(base_empty: bool) -> Sites {
        Sites {
            list: vec![Site {
                name: DEFAULT_SITE.into(),
                hosts: Vec::new(),
                path_prefix: None,
                policy: None,
                request_body_bytes: None,
                empty: base_empty,
                counters: OnceLock::new(),
            }],
        }
    }

    /// One policy for every request, under the default site's name (the
    /// `[shadow]` rule set: [`crate::shadow`]).
    pub fn single(policy: Arc<Policy>, empty: bool) -> Sites {
        Sites {
            list: vec![Site {
                name: DEFAULT_SITE.into(),
                hosts: Vec::new(),
                path_prefix: None,
                policy: Some(policy),
                request_body_bytes: None,
                empty,
                counters: OnceLock::new(),
            }],
        }
    }

    /// Compiles the sites of `sections` over `base` (each site's rules once, into
    /// its overlay). `config_path` names inline rules (`CONFIG#site.NAME.rulesN`)
    /// and anchors their `Include`s. `cannot_act` tells whether a policy can act on
    /// no request. Errors name the site.
    pub fn compile(
        base: &Arc<Ruleset>,
        sections: &[SiteSection],
        config_path: &Path,
        cannot_act: impl Fn(&Policy) -> bool,
    ) -> Result<Sites, String> {
        let mut list = Vec::with_capacity(sections.len() + 1);
        for s in sections {
            let policy = Arc::new(build_policy(base, s, config_path)?);
            list.push(Site {
                name: s.name.as_str().into(),
                hosts: s.hosts.iter().map(|h| HostMatch::parse(Some(h))).collect(),
                path_prefix: s.path_prefix.as_ref().map(|p| p.as_bytes().to_vec()),
                empty: cannot_act(&policy),
                policy: Some(policy),
                request_body_bytes: s.limits.request_body_bytes,
                counters: OnceLock::new(),
            });
        }
        // The default site: the global policy, as a policy too, so that its
        // transactions are labelled like the others'.
        let default = Arc::new(
            PolicyBuilder::new(base, DEFAULT_SITE, Arc::new(seclang::FsSource))
                .build()
                .map_err(|e| format!("site \"default\": {e}"))?,
        );
        list.push(Site {
            name: DEFAULT_SITE.into(),
            hosts: Vec::new(),
            path_prefix: None,
            empty: cannot_act(&default),
            policy: Some(default),
            request_body_bytes: None,
            counters: OnceLock::new(),
        });
        Ok(Sites { list })
    }

    /// Whether the configuration has `[[site]]`s.
    pub fn configured(&self) -> bool {
        self.list.len() > 1
    }

    /// The sites in order, the default site last.
    pub fn iter(&self) -> impl Iterator<Item = &Site> {
        self.list.iter()
    }

    /// The index of the site of a request for `host` (the Host header's value,
    /// port included or not) and the request target `uri`: the first whose hosts
    /// and path prefix match, else the default site.
    pub fn select(&self, host: Option<&[u8]>, uri: &[u8]) -> usize {
        let last = self.list.len() - 1;
        if last == 0 {
            return 0;
        }
        let host = host.map(crate::upstream::strip_port);
        let path = request_path(uri);
        self.list[..last]
            .iter()
            .position(|s| s.matches(host, path))
            .unwrap_or(last)
    }

    /// The site at `index` (as [`Sites::select`] gives it; the default site for
    /// any other).
    pub fn get(&self, index: usize) -> &Site {
        self.list
            .get(index)
            .unwrap_or(&self.list[self.list.len() - 1])
    }

    /// The default site's index.
    pub fn default_index(&self) -> usize {
        self.list.len() - 1
    }
}

/// The path of a request target without its query: origin-form as sent, or the
/// path of an absolute-form target (`http://host/path`).
fn request_path(uri: &[u8]) -> &[u8] {
    let path = crate::keyed::path_of(uri);
    let lower = |p: &[u8], s: &[u8]| p.len() >= s.len() && p[..s.len()].eq_ignore_ascii_case(s);
    let rest = if lower(path, b"http://") {
        &path[7..]
    } else if lower(path, b"https://") {
        &path[8..]
    } else {
        return path;
    };
    match memchr::memchr(b'/', rest) {
        Some(i) => &rest[i..],
        None => b"/",
    }
}

/// The policy of one `[[site]]`.
fn build_policy(
    base: &Arc<Ruleset>,
    s: &SiteSection,
    config_path: &Path,
) -> Result<Policy, String> {
    let name = &s.name;
    let err = |e: engine::PolicyError| format!("site {name:?}: {e}");
    let mut b = PolicyBuilder::new(base, name, Arc::new(seclang::FsSource));
    for (i, src) in s.rules.iter().enumerate() {
        add_source(&mut b, src, config_path, name, i).map_err(err)?;
    }
    if let Some(m) = s.engine_mode() {
        b.rule_engine(m);
    }
    if let Some(l) = s.paranoia_level {
        b.paranoia_level(l, s.detection_paranoia_level)
            .map_err(err)?;
    }
    b.limits(PolicyLimits {
        request_body_limit: s.limits.request_body_limit,
        request_body_no_files_limit: s.limits.request_body_no_files_limit,
        arguments_limit: s.limits.arguments_limit,
        json_depth_limit: s.limits.json_depth_limit,
    })
    .map_err(err)?;
    b.build().map_err(err)
}

fn add_source(
    b: &mut PolicyBuilder,
    src: &RuleSource,
    config_path: &Path,
    name: &str,
    i: usize,
) -> Result<(), engine::PolicyError> {
    if let Some(file) = &src.file {
        b.add_file(file)?;
    } else if let Some(text) = &src.inline {
        let label = format!("{}#site.{name}.rules{}", config_path.display(), i + 1);
        b.add_text(text, &label)?;
    }
    Ok(())
}

/// A request's site: the rules snapshot it was chosen in, and its index there.
/// Held by the request's record, so that a reload meanwhile changes nothing for it.
#[derive(Debug, Clone)]
pub struct SiteRef {
    waf: Arc<Waf>,
    index: usize,
}

impl SiteRef {
    /// The site of a request for `host` and `uri` in the rules `waf`.
    pub fn select(waf: Arc<Waf>, host: Option<&[u8]>, uri: &[u8]) -> SiteRef {
        let index = waf.sites().select(host, uri);
        SiteRef { waf, index }
    }

    /// The rules snapshot.
    pub fn waf(&self) -> &Arc<Waf> {
        &self.waf
    }

    /// The site's index in it.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The site.
    pub fn site(&self) -> &Site {
        self.waf.sites().get(self.index)
    }

    /// The site's name.
    pub fn name(&self) -> &str {
        self.site().name()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_of_request_targets() {
        assert_eq!(request_path(b"/a/b?x=1"), b"/a/b");
        assert_eq!(request_path(b"http://h.example/up/x?y"), b"/up/x");
        assert_eq!(request_path(b"HTTPS://h.example"), b"/");
        assert_eq!(request_path(b"*"), b"*");
    }
}
