//! Routes: which pool serves a request (`[[route]]`: a host, a path prefix, a
//! pool), and the reverse proxy's [`Destination`] made of them.

use super::destination::{Destination, Peer, Refusal, RequestHeadView};
use super::{Pool, Upstreams};
use crate::config::Config;
use std::sync::Arc;

/// How a route (or a site, [`crate::sites`]) matches the request's host: any host,
/// one name (case-insensitive), or every subdomain of a name (`*.example.com`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HostMatch {
    Any,
    Exact(Vec<u8>),
    Suffix(Vec<u8>),
}

impl HostMatch {
    /// Reads a host as written in the configuration: `*` (or none) for any host,
    /// `*.example.com` for the subdomains of `example.com`, else an exact name.
    pub(crate) fn parse(host: Option<&str>) -> HostMatch {
        match host {
            None | Some("*") => HostMatch::Any,
            Some(h) => match h.strip_prefix('*') {
                Some(suffix) => HostMatch::Suffix(suffix.to_ascii_lowercase().into_bytes()),
                None => HostMatch::Exact(h.to_ascii_lowercase().into_bytes()),
            },
        }
    }

    /// Whether a request for `host` (the Host header's value without its port;
    /// `None` when the request has none) matches.
    pub(crate) fn matches(&self, host: Option<&[u8]>) -> bool {
        match (self, host) {
            (HostMatch::Any, _) => true,
            (HostMatch::Exact(h), Some(got)) => got.eq_ignore_ascii_case(h),
            (HostMatch::Suffix(s), Some(got)) => {
                got.len() > s.len() && got[got.len() - s.len()..].eq_ignore_ascii_case(s)
            }
            _ => false,
        }
    }
}

/// One `[[route]]`: the requests it matches, and the index of its pool.
pub(super) struct Route {
    host: HostMatch,
    path_prefix: Option<Vec<u8>>,
    pool: usize,
}

/// The routes of `cfg`, in order; without any, one that sends every request to
/// the first pool.
pub(super) fn routes(cfg: &Config) -> Vec<Route> {
    let mut routes: Vec<Route> = cfg
        .routes
        .iter()
        .map(|r| Route {
            host: HostMatch::parse(r.host.as_deref()),
            path_prefix: r.path_prefix.as_ref().map(|p| p.as_bytes().to_vec()),
            pool: cfg
                .upstreams
                .iter()
                .position(|u| u.name == r.upstream)
                .unwrap_or(0),
        })
        .collect();
    if routes.is_empty() {
        routes.push(Route {
            host: HostMatch::Any,
            path_prefix: None,
            pool: 0,
        });
    }
    routes
}

impl Upstreams {
    /// The pool for a request: the first route whose host and path prefix match.
    /// `host` is the Host header value (a port is ignored).
    pub fn route(&self, host: Option<&[u8]>, path: &[u8]) -> Option<&Arc<Pool>> {
        let host = host.map(strip_port);
        self.routes
            .iter()
            .find(|r| {
                r.host.matches(host) && r.path_prefix.as_ref().is_none_or(|p| path.starts_with(p))
            })
            .and_then(|r| self.pools.get(r.pool))
    }
}

/// The reverse proxy's destination: the first route whose host and path prefix
/// match the request ([`Upstreams::route`], on the path of the target sent
/// upstream) chooses the pool; 404 when none does.
impl Destination for Upstreams {
    fn choose(&self, head: &RequestHeadView<'_>) -> Result<Peer, Refusal> {
        let path = head
            .uri
            .path_and_query()
            .map_or(&b"/"[..], |p| p.as_str().as_bytes());
        match self.route(head.host, path) {
            Some(pool) => Ok(Peer::Pool(pool.clone())),
            None => Err(Refusal {
                status: 404,
                reason: "no route matches this host and path".into(),
                page: None,
            }),
        }
    }
}

/// A Host header's value without its port (`[::1]:80` gives `[::1]`).
pub(crate) fn strip_port(h: &[u8]) -> &[u8] {
    if h.first() == Some(&b'[') {
        return match memchr::memchr(b']', h) {
            Some(e) => &h[..=e],
            None => h,
        };
    }
    match memchr::memrchr(b':', h) {
        Some(c) if h[c + 1..].iter().all(u8::is_ascii_digit) => &h[..c],
        _ => h,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::registry::tests::upstreams;

    #[test]
    fn routes_by_host_and_prefix() {
        let u = upstreams(
            "[[route]]\nhost = \"api.example.com\"\nupstream = \"b\"\n[[route]]\nhost = \"*.example.com\"\npath_prefix = \"/static/\"\nupstream = \"c\"\n[[route]]\nupstream = \"a\"\n",
        );
        let name = |h: Option<&[u8]>, p: &[u8]| u.route(h, p).map(|p| p.name.clone());
        assert_eq!(name(Some(b"API.example.com:8080"), b"/x"), Some("b".into()));
        assert_eq!(
            name(Some(b"www.example.com"), b"/static/a.css"),
            Some("c".into())
        );
        assert_eq!(name(Some(b"www.example.com"), b"/"), Some("a".into()));
        assert_eq!(name(Some(b"example.com"), b"/static/x"), Some("a".into()));
        assert_eq!(name(None, b"/"), Some("a".into()));
    }

    #[test]
    fn no_match_without_catch_all() {
        let u = upstreams("[[route]]\nhost = \"only.example\"\nupstream = \"b\"\n");
        assert!(u.route(Some(b"other"), b"/").is_none());
        let u = upstreams("");
        assert_eq!(&*u.route(Some(b"other"), b"/").unwrap().name, "a");
    }

    #[test]
    fn ports_are_stripped() {
        assert_eq!(strip_port(b"a.b:80"), b"a.b");
        assert_eq!(strip_port(b"[::1]:80"), b"[::1]");
        assert_eq!(strip_port(b"a.b"), b"a.b");
    }

    /// The routes answer through the destination seam: the pool of the first
    /// route that matches, or a 404 refusal.
    #[test]
    fn the_routes_are_the_reverse_proxy_destination() {
        let u = upstreams("[[route]]\nhost = \"only.example\"\nupstream = \"b\"\n");
        let cfg = Config::parse(
            "[[listener]]\naddress = \"127.0.0.1:1\"\n[[upstream]]\nname = \"a\"\nservers = [\"127.0.0.1:2\"]\n",
            std::path::Path::new("/x.toml"),
        )
        .unwrap();
        let waf = crate::waf::Waf::load(&cfg.rules, &cfg.path, &cfg.server, None).unwrap();
        let site = crate::sites::SiteRef::select(Arc::new(waf), None, b"/a");
        let uri = http::Uri::from_static("/a");
        let head = |host: &'static [u8]| RequestHeadView {
            method: &http::Method::GET,
            target: b"/a",
            uri: &uri,
            host: Some(host),
            site: &site,
            client: "192.0.2.1:5000".parse().unwrap(),
            user: None,
            accept: None,
        };
        let destination: &dyn Destination = &u;
        match destination.choose(&head(b"only.example:8080")) {
            Ok(peer) => assert_eq!(&*peer.name(), "b"),
            Err(refused) => panic!("refused: {refused:?}"),
        }
        let refused = destination.choose(&head(b"other.example")).unwrap_err();
        assert_eq!(refused.status, 404);
        assert_eq!(refused.reason, "no route matches this host and path");
    }
}
