//! The destination seam: where a request goes, chosen from its head.
//!
//! A [`Destination`] reads a request's head ([`RequestHeadView`]: method, target,
//! Host, site, client) and answers with the [`Peer`] the request is sent to, or a
//! [`Refusal`] the client is answered with instead. The exchange
//! ([`crate::exchange::Exchange::forward`]) knows only this trait. The reverse
//! proxy's destination is [`super::Upstreams`]: the configured routes choose a
//! pool, whose servers are tried in its balancing order with health, failover and
//! retries (`routes.rs`, [`super::Upstreams::route`]).

use super::{Pool, UpstreamError, UpstreamRequest, UpstreamResponse, UpstreamTiming};
use http::{Method, Uri};
use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::Arc;

/// Chooses where a request is sent, from its head alone (the body has not been
/// read, or is not looked at).
pub trait Destination: Send + Sync {
    /// The peer that serves the request whose head is `head`, or why none does.
    fn choose(&self, head: &RequestHeadView<'_>) -> Result<Peer, Refusal>;
}

/// What a [`Destination`] is chosen from: a request's head, borrowed.
#[derive(Debug, Clone, Copy)]
pub struct RequestHeadView<'a> {
    /// The method.
    pub method: &'a Method,
    /// The request target as the client sent it (origin, absolute, authority or
    /// asterisk form).
    pub target: &'a [u8],
    /// The target sent upstream: origin-form (or `*`, or authority-form for
    /// CONNECT).
    pub uri: &'a Uri,
    /// The Host header's value as sent (a port included); `None` without one.
    pub host: Option<&'a [u8]>,
    /// The request's site (`[[site]]`, or `default`).
    pub site: &'a crate::sites::SiteRef,
    /// The client, as every client-keyed feature sees it (behind trusted proxies,
    /// the address they name).
    pub client: SocketAddr,
    /// The user the forward proxy authenticated (`Proxy-Authorization`);
    /// `None` without one.
    pub user: Option<&'a str>,
    /// The request's `Accept` value, for the form of a block page.
    pub accept: Option<&'a [u8]>,
}

/// Where a request is sent.
#[derive(Debug)]
pub enum Peer {
    /// A configured pool (`[[upstream]]`): its servers are tried in its balancing
    /// order, with failover and retries ([`Pool::send`]).
    Pool(Arc<Pool>),
    /// A `CONNECT` tunnel of a forward-proxy listener: the exchange connects to
    /// the target and the front end joins the client to it.
    Tunnel(Box<crate::forward::TunnelTarget>),
    /// An answer the proxy gives itself (the forward proxy's PAC file): no
    /// upstream is asked.
    Local(LocalAnswer),
}

/// An answer the proxy gives itself, with status 200 (or a refusal's page).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalAnswer {
    /// Its media type.
    pub content_type: &'static str,
    /// Its body.
    pub body: bytes::Bytes,
}

impl Peer {
    /// The name logs and metrics give the peer: the pool's name (`forward` for
    /// a tunnel).
    pub fn name(&self) -> Arc<str> {
        match self {
            Peer::Pool(pool) => pool.name.clone(),
            Peer::Tunnel(_) | Peer::Local(_) => {
                Arc::from(crate::forward::destination::FORWARD_PEER)
            }
        }
    }

    /// Sends a request to the peer and waits for the response head.
    pub async fn send(
        &self,
        req: UpstreamRequest,
        timing: &mut UpstreamTiming,
    ) -> Result<UpstreamResponse, UpstreamError> {
        match self {
            Peer::Pool(pool) => pool.send(req, timing).await,
            Peer::Tunnel(t) => Err(UpstreamError::Protocol {
                server: t.authority(),
                reason: "a tunnel carries no request".into(),
            }),
            Peer::Local(_) => Err(UpstreamError::Protocol {
                server: crate::forward::destination::FORWARD_PEER.into(),
                reason: "a local answer is not sent anywhere".into(),
            }),
        }
    }
}

/// Why a request has no destination: the status and the reason (for the error
/// log and the client) it is answered with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The status to answer (404 when no route matches).
    pub status: u16,
    /// What is wrong.
    pub reason: Cow<'static, str>,
    /// The answer's content type and body in place of the plain-text one (the
    /// forward proxy's block page); `None` for the plain-text answer.
    pub page: Option<LocalAnswer>,
}
