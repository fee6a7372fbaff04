//! Building blocks of the filtering forward proxy (plain HTTP requests with an
//! absolute URI, and `CONNECT` tunnels), for school and company networks.
//!
//! Each file is one part, usable and tested on its own. On a listener with
//! `mode = "forward"` the exchange chooses its peer through [`destination`],
//! and the front ends run `CONNECT` tunnels (`front/connect.rs`): on the
//! connection itself over HTTP/1, on the request's stream over HTTP/2 (a
//! forward listener with `tls`).
//! - [`destination`]: where a request goes. Absolute-form `http://` requests
//!   and `CONNECT` targets normalised, checked against the `[forward]` deny and
//!   allow lists, a bounded cache of per-destination pools, the tunnel's
//!   connection and the check of its ClientHello's SNI (domain fronting).
//! - [`names`]: the addresses of the tunnels' destinations, kept for their TTL
//!   so that a tunnel does not cost a lookup.
//! - [`auth`]: who is asking. `Proxy-Authorization: Basic` checked against a
//!   bcrypt-only htpasswd file, with a bounded cache of good credentials so that
//!   only the first request of a user pays for bcrypt; Apache-style group files
//!   for policies by group; the `Proxy-Authenticate` challenge of a `407`.
//! - [`policy`]: who may go where. Users that must authenticate, groups with
//!   their own deny and allow lists and blocked categories, URL categories
//!   refused for everyone; decides in the order global deny, group deny,
//!   categories, allow lists, and names what refused for the block page.
//! - [`pac`]: how browsers find the proxy. The `FindProxyForURL` script (served as
//!   `application/x-ns-proxy-autoconfig`) that sends plain host names, listed
//!   domains and private networks `DIRECT` and the rest through the proxy.
//! - [`clienthello`]: where a tunnel goes. The SNI and ALPN of the TLS ClientHello
//!   a client sends first inside a `CONNECT` tunnel, read without consuming the
//!   bytes, which are then forwarded unchanged.
//! - [`inspect`]: TLS inspection of the tunnels the `inspect` lists name: the
//!   lists, the client-side TLS configuration and the origin pools.
//! - [`mint`]: TLS inspection. Leaf certificates for each host, signed by the
//!   operator's CA and kept in a bounded cache, as rustls `CertifiedKey`s.
//! - [`blockpage`]: what a refused client sees. An HTML page naming the host,
//!   the refusing category or rule and a reference id for browsers; a short
//!   plain-text `403` for other clients.

pub mod auth;
pub mod blockpage;
pub mod clienthello;
pub mod destination;
pub mod inspect;
pub mod mint;
pub mod names;
pub mod pac;
pub mod policy;

pub use destination::{ForwardDestination, ForwardSetupError, TunnelTarget};
