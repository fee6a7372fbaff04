//! The forward proxy's [`Destination`]: the request names where it goes.
//!
//! On a listener with `mode = "forward"`, a request carries its destination in
//! its target: `http://host[:port]/path` (absolute-form) for plain HTTP, or
//! `host:port` (authority-form) for a `CONNECT` tunnel. Every spelling of the
//! host is normalised by the `domains` crate before anything is decided, so the
//! `[forward]` deny and allow lists see one canonical name (or IP address) and
//! the proxy connects to exactly what the lists were asked about.
//!
//! - Absolute-form `http://`: refused (403) when the Host header names another
//!   host than the URI, when the deny list holds the host or a parent domain of
//!   it, or when an allow list is set and does not; otherwise the request goes
//!   to a pool of that one server ([`Peer::Pool`]), kept in a bounded cache so
//!   that keep-alive connections, name resolution and timeouts are the pools'.
//! - `CONNECT host:port`: the port must be in `connect_ports` (else 403), the
//!   host passes the same lists; the answer is a [`Peer::Tunnel`] whose
//!   [`TunnelTarget`] the exchange connects to, and whose
//!   [`TunnelTarget::check_sni`] the front end asks about the ClientHello.
//! - `GET /proxy.pac`: the PAC file ([`super::pac`]) that points browsers at
//!   the proxy, answered by the proxy itself ([`Peer::Local`]).
//! - `https://` absolute URIs (a client must use `CONNECT`) and other
//!   origin-form requests: 400.

use super::blockpage;
use super::names::NameCache;
use super::pac::{self, PacSettings};
use super::policy::{Policy, PolicyRefusal};
use crate::config::{ForwardSection, UpstreamConfig};
use crate::upstream::{
    AddressCheck, Destination, Env, LocalAnswer, Peer, Pool, Refusal, RequestHeadView,
};
use domains::{Host, SuffixSet, canonical_ip, normalize_host_port, normalize_name};
use http::Method;
use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;

/// The name logs and metrics give the forward proxy's peers.
pub const FORWARD_PEER: &str = "forward";

/// How long connecting a tunnel to one address may take.
const TUNNEL_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why the forward proxy's destination could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ForwardSetupError {
    /// A domain-list file could not be loaded.
    #[error("{key}: {error}")]
    List {
        /// The key that names the file (`forward.deny`, `forward.allow`).
        key: &'static str,
        /// What loading it gave (names the file, the line and what is wrong, so
        /// it is not chained as a source as well).
        error: domains::LoadError,
    },
    /// A file of the users, groups and categories policy could not be used.
    #[error("{key}: {error}")]
    Policy {
        /// The key that names the file or value (`forward.htpasswd`,
        /// `forward.categories`, `forward.group "staff" deny`, ...).
        key: String,
        /// What is wrong (names the file and line where there is one).
        error: String,
    },
}

/// Why a tunnel could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum TunnelError {
    /// The destination's name has no address.
    #[error("cannot resolve {host}: {reason}")]
    Resolve {
        /// The destination.
        host: String,
        /// What the resolver said.
        reason: String,
    },
    /// No address of the destination accepted a connection in time.
    #[error("cannot connect to {target}: {reason}")]
    Connect {
        /// The destination (`host:port`).
        target: String,
        /// What the last attempt gave.
        reason: String,
    },
    /// Every address the destination's name resolved to is refused by a deny
    /// list or a blocked category (a name pointed at a refused address, as in
    /// DNS rebinding).
    #[error("every address of {host} is refused: {reason}")]
    AddressRefused {
        /// The destination.
        host: String,
        /// Why the last address was refused.
        reason: String,
    },
}

impl TunnelError {
    /// The status the client is answered with: 403 for a refused address, 502
    /// otherwise.
    pub fn status(&self) -> u16 {
        match self {
            TunnelError::AddressRefused { .. } => 403,
            _ => 502,
        }
    }
}

/// The deny and allow lists of `[forward]`.
#[derive(Debug, Default)]
pub struct Lists {
    deny: SuffixSet,
    allow: Option<SuffixSet>,
}

impl Lists {
    /// Loads the list files of `cfg`.
    pub fn load(cfg: &ForwardSection) -> Result<Lists, ForwardSetupError> {
        let mut deny = SuffixSet::new();
        for f in &cfg.deny {
            deny.add_file(f, 1)
                .map_err(|error| ForwardSetupError::List {
                    key: "forward.deny",
                    error,
                })?;
        }
        deny.shrink_to_fit();
        let allow = match &cfg.allow {
            None => None,
            Some(files) => {
                let mut set = SuffixSet::new();
                for f in files {
                    set.add_file(f, 1)
                        .map_err(|error| ForwardSetupError::List {
                            key: "forward.allow",
                            error,
                        })?;
                }
                set.shrink_to_fit();
                Some(set)
            }
        };
        Ok(Lists { deny, allow })
    }

    /// Whether the deny list holds `host` (or a parent domain of it).
    pub fn denies(&self, host: &Host) -> bool {
        self.deny.contains(host)
    }

    /// Whether the allow list, when there is one, holds `host`.
    pub fn allows(&self, host: &Host) -> bool {
        self.allow.as_ref().is_none_or(|a| a.contains(host))
    }

    /// Whether the lists let a request reach `host`; the reason when they do not.
    pub fn check(&self, host: &Host) -> Result<(), String> {
        if self.deny.contains(host) {
            return Err(format!("destination {host} is on the forward.deny list"));
        }
        if let Some(allow) = &self.allow
            && !allow.contains(host)
        {
            return Err(format!(
                "destination {host} is not on the forward.allow list"
            ));
        }
        Ok(())
    }
}

/// The forward proxy's destination: see the module documentation.
pub struct ForwardDestination {
    lists: Arc<Lists>,
    policy: Arc<Policy>,
    connect_ports: Vec<u16>,
    refuse_fronting: bool,
    /// A pool per destination (`host:port`, normalised), bounded by
    /// `max_destinations`.
    pools: moka::sync::Cache<String, Arc<Pool>>,
    /// The addresses of the tunnels' destinations, kept for their TTL.
    names: NameCache,
    env: Env,
    /// The PAC file's settings (its proxy address taken from the request when
    /// `pac_proxy` is not set).
    pac: PacSettings,
    pac_proxy_fixed: bool,
}

impl std::fmt::Debug for ForwardDestination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ForwardDestination")
            .field("connect_ports", &self.connect_ports)
            .field("refuse_fronting", &self.refuse_fronting)
            .field("pools", &self.pools.entry_count())
            .finish()
    }
}

impl ForwardDestination {
    /// The destination of `cfg` (`[forward]`, its defaults when absent), with the
    /// resolver, metrics and event log the pools share.
    pub(crate) fn new(
        cfg: Option<&ForwardSection>,
        env: Env,
    ) -> Result<ForwardDestination, ForwardSetupError> {
        let default = ForwardSection::default();
        let cfg = cfg.unwrap_or(&default);
        Ok(ForwardDestination {
            lists: Arc::new(Lists::load(cfg)?),
            policy: Arc::new(Policy::load(cfg)?),
            connect_ports: cfg.connect_ports.clone(),
            refuse_fronting: cfg.refuse_fronting,
            pools: moka::sync::Cache::new(cfg.max_destinations as u64),
            names: NameCache::new(env.resolver.clone(), cfg.max_destinations as u64),
            env,
            pac: PacSettings {
                direct_suffixes: cfg.pac_direct.clone(),
                ..PacSettings::new(cfg.pac_proxy.clone().unwrap_or_default())
            },
            pac_proxy_fixed: cfg.pac_proxy.is_some(),
        })
    }

    /// The pool of the plain-HTTP server `host:port`, made when first asked for.
    fn pool(&self, host: &Host, port: u16) -> Result<Arc<Pool>, Refusal> {
        let key = format!("{host}:{port}");
        self.pools
            .try_get_with(key.clone(), || {
                let cfg = UpstreamConfig::plain(FORWARD_PEER, key.clone());
                let mut pool = Pool::new(&cfg, &self.env, &mut None, None)?;
                // The addresses the name resolves to pass the deny lists too
                // (those that hold for every user: the pool is shared).
                pool.set_address_check(address_check(&self.policy, &self.lists));
                Ok::<_, crate::upstream::UpstreamSetupError>(Arc::new(pool))
            })
            .map_err(|e| Refusal {
                status: 502,
                reason: Cow::Owned(format!("forward proxy: {e}")),
                page: None,
            })
    }

    /// How many destinations hold a pool now.
    pub fn destinations(&self) -> u64 {
        self.pools.run_pending_tasks();
        self.pools.entry_count()
    }

    /// The authenticator of `forward.htpasswd`, when a request of `method` to
    /// `target` must authenticate (every request but the PAC file's).
    pub fn authenticator_for(
        &self,
        method: &[u8],
        target: &[u8],
    ) -> Option<&Arc<super::auth::Authenticator>> {
        if matches!(method, b"GET" | b"HEAD") && target == b"/proxy.pac" {
            return None;
        }
        self.policy.authenticator()
    }

    fn choose_connect(&self, head: &RequestHeadView<'_>) -> Result<Peer, Refusal> {
        let target = head.target;
        let (host, port) = match normalize_host_port(target) {
            Ok((h, Some(p))) if p != 0 => (h, p),
            Ok(_) => return Err(bad("CONNECT target must be host:port")),
            Err(e) => return Err(bad(format!("CONNECT target: {e}"))),
        };
        if !self.connect_ports.contains(&port) {
            return Err(forbidden(format!(
                "CONNECT to port {port} refused: not in forward.connect_ports"
            )));
        }
        self.policy
            .check(&self.lists, &host, "", head.user)
            .map_err(|r| blocked(r, head.accept))?;
        Ok(Peer::Tunnel(Box::new(TunnelTarget {
            host,
            port,
            lists: self.lists.clone(),
            policy: Arc::clone(&self.policy),
            user: head.user.map(Arc::from),
            refuse_fronting: self.refuse_fronting,
            names: self.names.clone(),
        })))
    }

    /// The PAC file, for `GET /proxy.pac`: `pac_proxy`, or the Host header the
    /// client reached the proxy with.
    fn pac(&self, host: Option<&[u8]>) -> Result<Peer, Refusal> {
        let mut settings = self.pac.clone();
        if !self.pac_proxy_fixed {
            let host = host
                .and_then(|h| std::str::from_utf8(h).ok())
                .ok_or_else(|| bad("GET /proxy.pac needs a Host header (or forward.pac_proxy)"))?;
            settings.proxy = host.to_owned();
        }
        let script = pac::render(&settings).map_err(|e| bad(e.to_string()))?;
        Ok(Peer::Local(LocalAnswer {
            content_type: pac::PAC_CONTENT_TYPE,
            body: bytes::Bytes::from(script),
        }))
    }

    fn choose_http(&self, head: &RequestHeadView<'_>) -> Result<Peer, Refusal> {
        let target = head.target;
        if matches!(*head.method, Method::GET | Method::HEAD) && target == b"/proxy.pac" {
            return self.pac(head.host);
        }
        let scheme_end = target.len().min(8);
        let lower = target[..scheme_end].to_ascii_lowercase();
        if lower.starts_with(b"https://") {
            return Err(bad(
                "an https:// URI through the forward proxy needs CONNECT (a tunnel)",
            ));
        }
        if !lower.starts_with(b"http://") {
            return Err(bad(
                "a forward proxy request needs an absolute URI (http://host/path) or CONNECT",
            ));
        }
        let rest = &target[7..];
        let end = memchr::memchr3(b'/', b'?', b'#', rest).unwrap_or(rest.len());
        let authority = &rest[..end];
        // The userinfo (up to the last '@') is not part of where the request goes.
        let hostport = match memchr::memrchr(b'@', authority) {
            Some(at) => &authority[at + 1..],
            None => authority,
        };
        let (host, port) = match normalize_host_port(hostport) {
            Ok((h, p)) => (h, p.unwrap_or(80)),
            Err(e) => return Err(bad(format!("URI host: {e}"))),
        };
        if port == 0 {
            return Err(bad("URI port 0"));
        }
        if let Some(h) = head.host {
            match normalize_host_port(h) {
                Ok((named, named_port)) => {
                    if named != host || named_port.is_some_and(|p| p != port) {
                        return Err(forbidden(format!(
                            "the Host header names {named}, the URI {host}"
                        )));
                    }
                }
                Err(e) => return Err(bad(format!("Host header: {e}"))),
            }
        }
        let path = match std::str::from_utf8(&rest[end..]) {
            Ok(p) if p.starts_with('/') => p,
            _ => "/",
        };
        self.policy
            .check(&self.lists, &host, path, head.user)
            .map_err(|r| blocked(r, head.accept))?;
        Ok(Peer::Pool(self.pool(&host, port)?))
    }
}

impl Destination for ForwardDestination {
    fn choose(&self, head: &RequestHeadView<'_>) -> Result<Peer, Refusal> {
        if *head.method == Method::CONNECT {
            self.choose_connect(head)
        } else {
            self.choose_http(head)
        }
    }
}

fn bad(reason: impl Into<Cow<'static, str>>) -> Refusal {
    Refusal {
        status: 400,
        reason: reason.into(),
        page: None,
    }
}

fn forbidden(reason: impl Into<Cow<'static, str>>) -> Refusal {
    Refusal {
        status: 403,
        reason: reason.into(),
        page: None,
    }
}

/// A refusal of the policy: 403 with the block page (HTML when `accept`
/// lists `text/html`, plain text otherwise).
fn blocked(r: PolicyRefusal, accept: Option<&[u8]>) -> Refusal {
    let page = blockpage::block_response(accept, &r.block);
    Refusal {
        status: page.status.as_u16(),
        reason: r.reason.into(),
        page: Some(LocalAnswer {
            content_type: page.content_type,
            body: bytes::Bytes::from(page.body),
        }),
    }
}

/// Where a `CONNECT` tunnel goes: the normalised host and the port, with what
/// the ClientHello is checked against.
#[derive(Clone)]
pub struct TunnelTarget {
    /// The destination host, normalised.
    pub host: Host,
    /// The destination port (one of `connect_ports`).
    pub port: u16,
    lists: Arc<Lists>,
    policy: Arc<Policy>,
    /// The user the `CONNECT` authenticated as: the SNI and the addresses are
    /// checked against that user's groups.
    user: Option<Arc<str>>,
    refuse_fronting: bool,
    names: NameCache,
}

impl std::fmt::Debug for TunnelTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TunnelTarget")
            .field("host", &self.host)
            .field("port", &self.port)
            .finish()
    }
}

/// Why a tunnel's ClientHello is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SniRefusal {
    /// The SNI cannot be read as a host name.
    #[error("unreadable SNI {sni:?}: {reason}")]
    Unreadable {
        /// The SNI as sent (lossily decoded).
        sni: String,
        /// Why it cannot be normalised.
        reason: String,
    },
    /// The lists, the user's groups or a blocked category refuse the name the
    /// SNI gives.
    #[error("SNI {sni}: {reason}")]
    Listed {
        /// The SNI, normalised.
        sni: String,
        /// What the policy said.
        reason: String,
    },
    /// The SNI names another host than the `CONNECT` did.
    #[error("domain fronting: the ClientHello names {sni}, the CONNECT {authority}")]
    Fronting {
        /// The SNI, normalised.
        sni: String,
        /// The `CONNECT` host, normalised.
        authority: String,
    },
}

impl SniRefusal {
    /// The metrics outcome (`palisade_forward_tunnels_total{outcome}`).
    pub fn outcome(&self) -> &'static str {
        match self {
            SniRefusal::Fronting { .. } => "fronting",
            _ => "sni_refused",
        }
    }
}

impl TunnelTarget {
    /// `host:port` as the logs give it.
    pub fn authority(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// Connects to the destination: its addresses (an IP literal, or the name
    /// resolved with the proxy's resolver) tried as [`happy_eyeballs`] does.
    /// A resolved address that a deny list or a blocked category holds is not
    /// tried.
    pub async fn connect(&self) -> Result<(TcpStream, SocketAddr), TunnelError> {
        let addrs = match &self.host {
            Host::Ip(ip) => vec![SocketAddr::new(*ip, self.port)],
            Host::Name(name) => {
                let mut addrs = self
                    .names
                    .addresses(name, self.port)
                    .await
                    .map_err(|reason| TunnelError::Resolve {
                        host: name.clone(),
                        reason,
                    })?;
                let mut refused = None;
                addrs.retain(|a| {
                    let ip = Host::Ip(canonical_ip(a.ip()));
                    match self
                        .policy
                        .check_denied(&self.lists, &ip, "", self.user.as_deref())
                    {
                        Ok(()) => true,
                        Err(r) => {
                            refused = Some(r.reason);
                            false
                        }
                    }
                });
                if let (true, Some(reason)) = (addrs.is_empty(), refused) {
                    return Err(TunnelError::AddressRefused {
                        host: name.clone(),
                        reason,
                    });
                }
                addrs
            }
        };
        happy_eyeballs(addrs)
            .await
            .map_err(|reason| TunnelError::Connect {
                target: self.authority(),
                reason,
            })
    }

    /// The user the `CONNECT` authenticated as, if any.
    pub fn user(&self) -> Option<&Arc<str>> {
        self.user.as_ref()
    }

    /// Whether a request decrypted inside this tunnel may go on to `path`: the
    /// policy as for the `CONNECT`, now with the path (URL categories by path),
    /// refused with the block page as a plain HTTP request is.
    pub fn check_request(&self, path: &str, accept: Option<&[u8]>) -> Result<(), Refusal> {
        self.policy
            .check(&self.lists, &self.host, path, self.user.as_deref())
            .map_err(|r| blocked(r, accept))
    }

    /// The check of resolved addresses for the pools of inspected tunnels:
    /// the deny lists and blocked categories that hold for every user (a pool
    /// is shared by the users of its origin).
    pub(crate) fn address_check(&self) -> AddressCheck {
        address_check(&self.policy, &self.lists)
    }

    /// Whether a tunnel whose ClientHello names `sni` (the server name
    /// indication; `None` without one) may go on: the name passes the lists and,
    /// with `refuse_fronting`, is the host of the `CONNECT`.
    pub fn check_sni(&self, sni: Option<&[u8]>) -> Result<(), SniRefusal> {
        let Some(sni) = sni else {
            return Ok(());
        };
        let named = normalize_name(sni).map_err(|e| SniRefusal::Unreadable {
            sni: String::from_utf8_lossy(sni).into_owned(),
            reason: e.to_string(),
        })?;
        self.policy
            .check(&self.lists, &named, "", self.user.as_deref())
            .map_err(|r| SniRefusal::Listed {
                sni: named.to_string(),
                reason: r.reason,
            })?;
        if self.refuse_fronting && named != self.host {
            return Err(SniRefusal::Fronting {
                sni: named.to_string(),
                authority: self.host.to_string(),
            });
        }
        Ok(())
    }
}

/// The check of a pool's resolved addresses against `policy`'s deny lists and
/// blocked categories, for no user in particular.
fn address_check(policy: &Arc<Policy>, lists: &Arc<Lists>) -> AddressCheck {
    let (policy, lists) = (Arc::clone(policy), Arc::clone(lists));
    AddressCheck(Arc::new(move |addr: &SocketAddr| {
        policy
            .check_denied(&lists, &Host::Ip(canonical_ip(addr.ip())), "", None)
            .map_err(|r| r.reason)
    }))
}

/// How long a connection attempt has before the next address is tried beside
/// it (RFC 8305's Connection Attempt Delay).
const ATTEMPT_DELAY: Duration = Duration::from_millis(250);

/// Connects to the first of `addrs` that answers, in the manner of Happy
/// Eyeballs (RFC 8305): the addresses are taken alternately from each family,
/// in the resolver's order within a family; each attempt starts when the one
/// before it failed or after [`ATTEMPT_DELAY`], the first connection made wins
/// and the others are abandoned. Each attempt has [`TUNNEL_CONNECT_TIMEOUT`].
/// The error says what the last attempt gave.
pub async fn happy_eyeballs(addrs: Vec<SocketAddr>) -> Result<(TcpStream, SocketAddr), String> {
    let first_v6 = addrs.first().is_some_and(SocketAddr::is_ipv6);
    let (mut a, mut b): (Vec<_>, Vec<_>) = addrs.into_iter().partition(|x| x.is_ipv6() == first_v6);
    a.reverse();
    b.reverse();
    let mut order = Vec::with_capacity(a.len() + b.len());
    while let Some(x) = a.pop() {
        order.push(x);
        if let Some(y) = b.pop() {
            order.push(y);
        }
    }
    order.extend(b.into_iter().rev());
    let mut next = order.into_iter();
    let mut attempts = tokio::task::JoinSet::new();
    let mut last = String::from("no address");
    loop {
        match next.next() {
            Some(addr) => {
                attempts.spawn(async move {
                    let r = tokio::time::timeout(TUNNEL_CONNECT_TIMEOUT, TcpStream::connect(addr))
                        .await;
                    (addr, r)
                });
            }
            None if attempts.is_empty() => return Err(last),
            None => {}
        }
        let more = next.len() > 0;
        // Wait for an attempt to end; a failure starts the next at once, as does
        // the delay running out.
        tokio::select! {
            ended = attempts.join_next() => match ended {
                Some(Ok((addr, Ok(Ok(s))))) => {
                    let _ = s.set_nodelay(true);
                    return Ok((s, addr));
                }
                Some(Ok((addr, Ok(Err(e))))) => last = format!("{addr}: {e}"),
                Some(Ok((addr, Err(_)))) => last = format!("{addr}: timed out"),
                Some(Err(_)) | None => {}
            },
            () = tokio::time::sleep(ATTEMPT_DELAY), if more => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use std::io::Write;

    /// The forward destination of a configuration whose `[forward]` lists hold
    /// `deny` (and `allow`), with the files it reads.
    fn dest(
        deny: &str,
        allow: Option<&str>,
    ) -> (Arc<ForwardDestination>, Vec<tempfile::NamedTempFile>) {
        dest_with(deny, allow, "")
    }

    /// As [`dest`], with `extra` keys in `[forward]` (after the lists, so that
    /// it may end with `[[forward.group]]` tables).
    fn dest_with(
        deny: &str,
        allow: Option<&str>,
        extra: &str,
    ) -> (Arc<ForwardDestination>, Vec<tempfile::NamedTempFile>) {
        let mut d = tempfile::NamedTempFile::new().unwrap();
        d.write_all(deny.as_bytes()).unwrap();
        let mut text = format!(
            "[[listener]]\naddress = \"127.0.0.1:1\"\nmode = \"forward\"\n[forward]\ndeny = [{:?}]\n",
            d.path()
        );
        let mut keep = vec![d];
        if let Some(a) = allow {
            let mut f = tempfile::NamedTempFile::new().unwrap();
            f.write_all(a.as_bytes()).unwrap();
            text.push_str(&format!("allow = [{:?}]\n", f.path()));
            keep.push(f);
        }
        text.push_str(extra);
        let cfg = Config::parse(&text, std::path::Path::new("/x.toml")).unwrap();
        let metrics = Arc::new(crate::metrics::Metrics::new());
        let u = crate::upstream::Upstreams::build(&cfg, &metrics, None, None).unwrap();
        (u.forward().clone(), keep)
    }

    fn choose(
        d: &ForwardDestination,
        method: Method,
        target: &str,
        host: Option<&str>,
    ) -> Result<Peer, Refusal> {
        choose_as(d, method, target, host, None)
    }

    /// As [`choose`], for the authenticated `user`.
    fn choose_as(
        d: &ForwardDestination,
        method: Method,
        target: &str,
        host: Option<&str>,
        user: Option<&str>,
    ) -> Result<Peer, Refusal> {
        let cfg = Config::parse(
            "[[listener]]\naddress = \"127.0.0.1:1\"\nmode = \"forward\"\n",
            std::path::Path::new("/x.toml"),
        )
        .unwrap();
        let waf = crate::waf::Waf::load(&cfg.rules, &cfg.path, &cfg.server, None).unwrap();
        let site = crate::sites::SiteRef::select(Arc::new(waf), None, b"/");
        let uri = http::Uri::from_static("/");
        let head = RequestHeadView {
            method: &method,
            target: target.as_bytes(),
            uri: &uri,
            host: host.map(str::as_bytes),
            site: &site,
            client: "127.0.0.1:1".parse().unwrap(),
            user,
            accept: None,
        };
        d.choose(&head)
    }

    fn status(r: Result<Peer, Refusal>) -> u16 {
        match r {
            Ok(_) => 200,
            Err(r) => r.status,
        }
    }

    #[tokio::test]
    async fn absolute_form_checks() {
        let (d, _f) = dest("blocked.example\n10.0.0.1\n", None);
        let get = |t: &str, h: Option<&str>| status(choose(&d, Method::GET, t, h));
        assert_eq!(get("http://ok.example/x", Some("ok.example")), 200);
        assert_eq!(get("http://ok.example:8080/x", None), 200);
        assert_eq!(get("http://user@ok.example/x", Some("OK.example.")), 200);
        for t in [
            "http://blocked.example/",
            "http://BLOCKED.example./",
            "http://www.blocked.example/",
            "http://10.0.0.1/",
            "http://0x0a.0.0.1/",
            "http://167772161/",
            "http://[::ffff:10.0.0.1]/",
            "HTTP://Blocked.Example:80/",
            "http://ok.example@blocked.example/",
        ] {
            assert_eq!(get(t, None), 403, "{t}");
        }
        // The Host header names another host than the URI.
        assert_eq!(get("http://ok.example/", Some("blocked.example")), 403);
        assert_eq!(get("http://ok.example/", Some("ok.example:81")), 403);
        assert_eq!(get("https://ok.example/", None), 400);
        assert_eq!(get("/path", Some("ok.example")), 400);
        match choose(&d, Method::GET, "/proxy.pac", Some("proxy.corp:3128")) {
            Ok(Peer::Local(a)) => {
                assert_eq!(a.content_type, "application/x-ns-proxy-autoconfig");
                let js = String::from_utf8(a.body.to_vec()).unwrap();
                assert!(js.contains("PROXY proxy.corp:3128"), "{js}");
            }
            other => panic!("PAC expected: {other:?}"),
        }
        assert_eq!(get("/proxy.pac", Some("bad host\"")), 400);
        assert_eq!(get("/proxy.pac", None), 400);
        assert_eq!(get("http://a..b/", None), 400);
        assert_eq!(get("http://ok.example:0/", None), 400);
        assert_eq!(get("http://ok.example:99999/", None), 400);
        // One pool per destination, reused.
        let a = choose(&d, Method::GET, "http://ok.example/", None).unwrap();
        let b = choose(&d, Method::GET, "http://OK.EXAMPLE:80/y", None).unwrap();
        match (a, b) {
            (Peer::Pool(a), Peer::Pool(b)) => assert!(Arc::ptr_eq(&a, &b)),
            _ => panic!("pools expected"),
        }
    }

    #[tokio::test]
    async fn happy_eyeballs_takes_the_address_that_answers() {
        let good = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let good_addr = good.local_addr().unwrap();
        // A port nothing listens on: bound, then closed.
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap()
            .local_addr()
            .unwrap();
        let (_, addr) = happy_eyeballs(vec![closed, good_addr]).await.unwrap();
        assert_eq!(addr, good_addr);
        let err = happy_eyeballs(vec![closed]).await.unwrap_err();
        assert!(err.contains(&closed.to_string()), "{err}");
        assert_eq!(happy_eyeballs(Vec::new()).await.unwrap_err(), "no address");
    }

    #[tokio::test]
    async fn allow_list_and_connect() {
        let (d, _f) = dest("bad.example\n", Some("good.example\n"));
        let get = |t: &str| status(choose(&d, Method::GET, t, None));
        assert_eq!(get("http://good.example/"), 200);
        assert_eq!(get("http://sub.good.example/"), 200);
        assert_eq!(get("http://other.example/"), 403);
        let connect = |t: &str| status(choose(&d, Method::CONNECT, t, None));
        assert_eq!(connect("good.example:443"), 200);
        assert_eq!(connect("good.example:22"), 403);
        assert_eq!(connect("other.example:443"), 403);
        assert_eq!(connect("good.example"), 400);
        let Ok(Peer::Tunnel(t)) = choose(&d, Method::CONNECT, "Good.Example.:443", None) else {
            panic!("tunnel expected");
        };
        assert_eq!(t.authority(), "good.example:443");
        assert!(t.check_sni(Some(b"GOOD.example")).is_ok());
        assert!(t.check_sni(None).is_ok());
        assert_eq!(
            t.check_sni(Some(b"sub.good.example"))
                .unwrap_err()
                .outcome(),
            "fronting"
        );
        assert_eq!(
            t.check_sni(Some(b"other.example")).unwrap_err().outcome(),
            "sni_refused"
        );
        assert!(t.check_sni(Some(b"a..b")).is_err());
    }

    #[tokio::test]
    async fn sni_passes_the_users_groups_and_categories() {
        let dir = tempfile::tempdir().unwrap();
        let cats = dir.path().join("cats");
        std::fs::create_dir(&cats).unwrap();
        std::fs::write(cats.join("games.txt"), "games.example\n").unwrap();
        std::fs::write(cats.join("social.txt"), "social.example\n").unwrap();
        let hash = bcrypt::hash("pw", 4).unwrap();
        let users = dir.path().join("users");
        std::fs::write(&users, format!("alice:{hash}\nbob:{hash}\n")).unwrap();
        let groups = dir.path().join("groups");
        std::fs::write(&groups, "pupils: alice\n").unwrap();
        let extra = format!(
            "categories = {:?}\nblock_categories = [\"games\"]\nhtpasswd = {:?}\ngroups = {:?}\n[[forward.group]]\nname = \"pupils\"\nblock_categories = [\"social\"]\n",
            cats, users, groups
        );
        let (d, _f) = dest_with("", None, &extra);
        let tunnel =
            |user: Option<&str>| match choose_as(&d, Method::CONNECT, "ok.example:443", None, user)
            {
                Ok(Peer::Tunnel(t)) => t,
                other => panic!("tunnel expected: {other:?}"),
            };
        let alice = tunnel(Some("alice"));
        assert!(alice.check_sni(Some(b"ok.example")).is_ok());
        // A category blocked for everyone, behind another name's CONNECT.
        let e = alice.check_sni(Some(b"www.Games.example.")).unwrap_err();
        assert_eq!(e.outcome(), "sni_refused", "{e}");
        assert!(e.to_string().contains("games"), "{e}");
        // A category blocked for alice's group.
        let e = alice.check_sni(Some(b"social.example")).unwrap_err();
        assert_eq!(e.outcome(), "sni_refused", "{e}");
        assert!(e.to_string().contains("social"), "{e}");
        // bob is in no group: only the fronting check refuses the other name.
        let bob = tunnel(Some("bob"));
        assert_eq!(
            bob.check_sni(Some(b"social.example"))
                .unwrap_err()
                .outcome(),
            "fronting"
        );
    }

    #[tokio::test]
    async fn resolved_addresses_pass_the_deny_list() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let ports = format!("connect_ports = [{port}]");
        let target = format!("localhost:{port}");
        let tunnel = |d: &ForwardDestination| match choose(d, Method::CONNECT, &target, None) {
            Ok(Peer::Tunnel(t)) => t,
            other => panic!("tunnel expected: {other:?}"),
        };
        // localhost resolves to the loopback addresses: listed, it is refused.
        let (d, _f) = dest_with("127.0.0.1\n::1\n", None, &ports);
        let e = tunnel(&d).connect().await.unwrap_err();
        assert_eq!(e.status(), 403, "{e}");
        assert!(matches!(e, TunnelError::AddressRefused { .. }), "{e}");
        assert!(e.to_string().contains("forward.deny"), "{e}");
        // Not listed, the same name connects.
        let (d, _f) = dest_with("other.example\n", None, &ports);
        let (_, addr) = tunnel(&d).connect().await.unwrap();
        assert_eq!(addr.port(), port);
    }
}
