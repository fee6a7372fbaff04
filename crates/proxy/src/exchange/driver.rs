//! The phase order of one request, the same for every protocol: phase 1 on the
//! head, the body read within its limits and deadlines, phase 2, then the upstream
//! exchange with phases 3 and 4. A front end describes the request ([`Head`]),
//! gives its body through a [`BodySource`], and says after phase 2 how the request
//! travels upstream (a [`Plan`]); it then writes the [`Driven`] answer in its own
//! protocol.

use super::ConnInfo;
use super::decode::Coding;
use super::{BodyStop, Exchange, ForwardParts, Reply, Shared};
use crate::client_address::SourceTrust;
use crate::config::{EncodedBodyPolicy, ServerConfig};
use crate::metrics::Action;
use crate::ratelimit::{RateLimiter, Verdict};
use crate::shaping::Shaper;
use bytes::Bytes;
use http::HeaderValue;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A request head as a front end read it.
#[derive(Debug)]
pub struct Head<I> {
    /// When the request began to arrive (monotonic).
    pub start: Instant,
    /// The same moment in microseconds since the Unix epoch.
    pub start_us: i64,
    /// The method as sent.
    pub method: Bytes,
    /// The request target as sent.
    pub uri: Bytes,
    /// The protocol as sent (`HTTP/1.1`, `HTTP/2.0`).
    pub protocol: Bytes,
    /// The first Host header's value (HTTP/2: `:authority` when there is none).
    pub host: Option<Bytes>,
    /// Every header line, in order, as the engine must see them.
    pub headers: I,
    /// The head's size on the wire.
    pub head_bytes: usize,
    /// Whether a body follows, and its announced length when known.
    pub body: BodyPlan,
}

/// What the head says about the request body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyPlan {
    /// No body follows.
    None,
    /// A body of exactly this many bytes follows.
    Length(u64),
    /// A body of unknown length follows (chunked, or an HTTP/2 stream).
    Unknown,
}

/// One step of reading a request body.
#[derive(Debug)]
pub enum BodyRead {
    /// A piece of the body (decoded from its framing).
    Data(Bytes),
    /// The body is complete.
    End,
    /// The client went away or the stream failed; nobody is left to answer. The
    /// text says what happened, for the logs.
    Gone(String),
    /// The body's framing is broken: answer 400 and close.
    Malformed(String),
}

/// Where a request body comes from: the front end's connection or stream.
pub trait BodySource: Send {
    /// Called once before the first read: HTTP/1.1 sends `100 Continue` here when
    /// the client asked for it. `false` means the client is gone.
    fn start(&mut self) -> impl Future<Output = bool> + Send;

    /// The next piece of the body. Must be cancel-safe: the driver bounds each
    /// call with the body timeouts and drops it when one expires.
    fn read(&mut self) -> impl Future<Output = BodyRead> + Send;

    /// Bytes taken off the wire for the body so far, framing included.
    fn wire_bytes(&self) -> u64;
}

/// Why a request that passed phase 2 cannot be forwarded: answered with `status`
/// (400, or 501 for a transfer coding the proxy does not implement) and the
/// connection closed.
#[derive(Debug, Clone)]
pub struct Refusal {
    /// The status to answer.
    pub status: u16,
    /// What was wrong, for the error log.
    pub reason: String,
}

impl Refusal {
    /// A request that cannot be forwarded as it is: 400.
    pub fn bad_request(reason: impl Into<String>) -> Refusal {
        Refusal {
            status: 400,
            reason: reason.into(),
        }
    }

    /// A request that uses something the proxy does not implement: 501.
    pub fn not_implemented(reason: impl Into<String>) -> Refusal {
        Refusal {
            status: 501,
            reason: reason.into(),
        }
    }
}

/// After phase 2: the request as it goes upstream.
pub trait Plan: Fn() -> Result<ForwardParts, Refusal> + Sync {}
impl<F: Fn() -> Result<ForwardParts, Refusal> + Sync> Plan for F {}

/// The outcome of driving a request.
#[derive(Debug)]
pub struct Driven {
    /// The reply to send; `None` when the client went away (the record is then
    /// finished and nothing is to be sent).
    pub reply: Option<Reply>,
    /// Whether the whole request body was taken off the connection (otherwise an
    /// HTTP/1 connection cannot carry another request).
    pub body_read: bool,
    /// The reply is the plan's refusal (HTTP/1 answers an HTTP/0.9 request's
    /// refusal without a status line).
    pub refused: bool,
}

impl Driven {
    fn answer(reply: Reply, body_read: bool) -> Driven {
        Driven {
            reply: Some(reply),
            body_read,
            refused: false,
        }
    }
}

/// Runs one request through the phases: see the module documentation.
pub async fn drive<'h, I, B, P>(
    shared: &Arc<Shared>,
    conn: ConnInfo,
    head: Head<I>,
    body: &mut B,
    plan: &P,
) -> Driven
where
    I: Iterator<Item = (&'h [u8], &'h [u8])> + Clone,
    B: BodySource,
    P: Plan,
{
    // The rules, limits and access lists in force when the request began, read
    // as one snapshot (a reload swaps all of them at once).
    let in_force = shared.in_force();
    // The request's client: the connection's, or the one a trusted proxy names.
    // The limits, rate limits, shapes and client address in force when the
    // request began, to its end (a reload may swap in others meanwhile).
    let policy = &in_force.policy;
    let conn = conn.for_request(&policy.client_address, head.headers.clone());
    // The request's site, in the rules in force now: its policy, limits and name.
    let site = crate::sites::SiteRef::select(in_force.waf.clone(), head.host.as_deref(), &head.uri);
    // A trusted proxy's connection was let in whatever its clients: the [access]
    // lists are asked about each request's client.
    let denied = conn.trust == SourceTrust::Trusted
        && shared.has_access_lists()
        && !in_force
            .access
            .as_ref()
            .is_none_or(|a| a.allows(conn.client.ip()));
    // Rate limits whose key the request head gives: decided before the rules run.
    let limits = &policy.rate_limits;
    let uri = head.uri.clone();
    let arrived = head.start;
    // The request's header lines, for choosing a `[[shape]]` class at the end.
    let shape_headers = head.headers.clone();
    let has_body = head.body != BodyPlan::None;
    // A body under a content coding: decoded for the rules, or refused (before the
    // body is read) when the policy says so or the coding is not one the proxy
    // decodes.
    let (decode_as, refuse_coding) = match content_coding(head.headers.clone()) {
        Some(name) if has_body => match policy.limits.request_content_encoding {
            EncodedBodyPolicy::Pass => (None, None),
            EncodedBodyPolicy::Refuse => (None, Some((name, "it cannot be inspected"))),
            EncodedBodyPolicy::Decode => match Coding::of_values(
                head.headers
                    .clone()
                    .filter(|(n, _)| n.eq_ignore_ascii_case(b"content-encoding"))
                    .map(|(_, v)| v),
            ) {
                Some(c) => (Some(c), None),
                None => (
                    None,
                    Some((name, "Palisade decodes only one of gzip, deflate, br")),
                ),
            },
        },
        _ => (None, None),
    };
    let over = if limits.is_empty() {
        None
    } else {
        over_limit(
            limits,
            false,
            &conn,
            site.name(),
            &head.uri,
            head.headers.clone(),
            |_| None,
            head.start,
        )
    };
    let site_name: Arc<str> = site.site().name().clone();
    // A request sampled for the shadow rule set (one the rules will see): its
    // head, copied before the engine takes it; handed on once phases 1 and 2
    // decided.
    let mut sampled = if denied || over.is_some() {
        None
    } else {
        shared.shadow.sample(
            site.waf(),
            &head.method,
            &head.uri,
            &head.protocol,
            head.headers.clone(),
            &conn,
            &site_name,
            head.start_us,
        )
    };
    // A forward proxy's credentials, checked before the rules run.
    let proxy_authorization = if conn.forward {
        head.headers
            .clone()
            .find(|(n, _)| n.eq_ignore_ascii_case(b"proxy-authorization"))
            .map(|(_, v)| bytes::Bytes::copy_from_slice(v))
    } else {
        None
    };
    let forward = conn.forward;
    let mut ex = Exchange::begin(
        shared,
        site,
        conn,
        head.start,
        head.start_us,
        head.method,
        head.uri,
        head.protocol,
        head.host,
        head.headers,
        head.head_bytes,
    );
    if denied {
        shared
            .metrics
            .requests_denied
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let reply = ex.reply_error(
            403,
            Action::Deny,
            "client address refused by the [access] lists",
        );
        return Driven::answer(reply, !has_body);
    }
    if let Some((name, status, retry)) = over {
        return Driven::answer(ex.reply_rate_limited(name, status, retry), !has_body);
    }
    if forward {
        ex = match ex.authenticate_forward(proxy_authorization).await {
            Ok(ex) => ex,
            Err(reply) => return Driven::answer(reply, !has_body),
        };
    }
    if let Some(v) = ex.phase1().await {
        if let Some(head) = sampled.take() {
            shared
                .shadow
                .submit(head, ex.shadow_primary(Some(&v), false));
        }
        return Driven::answer(ex.reply_verdict(v), !has_body);
    }
    // Rate limits keyed by TX variables the rules set in phase 1.
    if limits.iter().any(|l| l.after_phase1())
        && let Some((name, status, retry)) = over_limit(
            limits,
            true,
            &conn,
            &site_name,
            &uri,
            std::iter::empty(),
            |n| ex.tx_var(n),
            arrived,
        )
    {
        return Driven::answer(ex.reply_rate_limited(name, status, retry), !has_body);
    }
    if let Some((coding, because)) = refuse_coding {
        // Refused before the body is read (or invited): the rules would see only
        // the encoded bytes.
        let why = format!(
            "request body under Content-Encoding {coding} refused: {because} \
             (limits.request_content_encoding)"
        );
        let mut reply = ex.reply_error(415, Action::BadRequest, &why);
        reply.headers.insert(
            http::header::ACCEPT_ENCODING,
            HeaderValue::from_static("identity"),
        );
        return Driven::answer(reply, false);
    }
    if let BodyPlan::Length(n) = head.body
        && n > ex.body_limit() as u64
    {
        // Announced too large: refuse before reading (or inviting) the body.
        return Driven::answer(ex.reply_body_stop(BodyStop::TooLarge), false);
    }
    if let Some(coding) = decode_as {
        ex.decode_request_body(coding);
    }
    if has_body {
        if !body.start().await {
            return gone(ex, "client closed the connection before the request body");
        }
        let mut clock = BodyClock::new(&shared.server);
        let mut counted = 0u64;
        loop {
            let step = clock.bound(body.read()).await;
            ex.add_bytes_in(body.wire_bytes() - counted);
            counted = body.wire_bytes();
            clock.received(counted);
            match step {
                Ok(BodyRead::Data(chunk)) => {
                    if let Err(stop) = ex.body_chunk(chunk) {
                        return Driven::answer(ex.reply_body_stop(stop), false);
                    }
                }
                Ok(BodyRead::End) => {
                    if let Err(stop) = ex.body_end() {
                        return Driven::answer(ex.reply_body_stop(stop), true);
                    }
                    break;
                }
                Ok(BodyRead::Gone(why)) => return gone(ex, &why),
                Ok(BodyRead::Malformed(why)) => {
                    let reply = ex.reply_error(
                        400,
                        Action::BadRequest,
                        &format!("bad request body: {why}"),
                    );
                    return Driven::answer(reply, false);
                }
                Err(late) => {
                    let reply = ex.reply_error(408, Action::BadRequest, late.reason());
                    return Driven::answer(reply, false);
                }
            }
        }
    }
    let phase2 = ex.phase2().await;
    if let Some(head) = sampled {
        shared
            .shadow
            .submit(head, ex.shadow_primary(phase2.as_ref(), true));
    }
    if let Some(v) = phase2 {
        return Driven::answer(ex.reply_verdict(v), true);
    }
    let parts = match plan() {
        Ok(p) => p,
        Err(Refusal { status, reason }) => {
            // 403: the front end refused what the request names (an HTTP/2
            // `:authority` fronting inside an inspected tunnel).
            let action = if status == 403 {
                Action::Deny
            } else {
                Action::BadRequest
            };
            let mut reply = ex.reply_error(status, action, &reason);
            reply.close = true;
            return Driven {
                reply: Some(reply),
                body_read: true,
                refused: true,
            };
        }
    };
    let mut reply = ex.forward(parts).await;
    let shapes = &policy.shapes;
    if !shapes.is_empty() && reply.body.is_forwarded() {
        // Chosen after phases 3 and 4, so any rule may set a `tx:` selector.
        let body = &mut reply.body;
        let pacer = Shaper::select(shapes, conn.client.ip(), &uri, shape_headers, |n| {
            body.tx_var(n)
        });
        if let Some(p) = pacer {
            reply.body.shape(p);
        }
    }
    Driven::answer(reply, true)
}

/// The first limit of `limits` (those read after phase 1 when `after_phase1`, the
/// others otherwise; those that apply to the request's site, named `site`) that
/// refuses this request: its name, status and retry delay.
/// A limit whose key the request does not have (no such header, cookie or TX
/// variable) does not apply. The request counts at `now`, when it began to arrive
/// (as nginx's `limit_req` counts at its event loop's cached time): a head that took
/// long to arrive counts earlier, which only makes the limit stricter, and reading the
/// clock again would cost more than the rest of the check.
#[allow(clippy::too_many_arguments)]
fn over_limit<'l, 'h, I>(
    limits: &'l [std::sync::Arc<RateLimiter>],
    after_phase1: bool,
    conn: &ConnInfo,
    site: &str,
    uri: &[u8],
    headers: I,
    mut tx: impl FnMut(&str) -> Option<Vec<u8>>,
    now: Instant,
) -> Option<(&'l str, u16, std::time::Duration)>
where
    I: Iterator<Item = (&'h [u8], &'h [u8])> + Clone,
{
    // The path is found only for the limits that read it.
    let mut path_of_uri: Option<&[u8]> = None;
    for limit in limits {
        if limit.after_phase1() != after_phase1 || !limit.applies_to_site(site) {
            continue;
        }
        let path = if limit.reads_path() {
            *path_of_uri.get_or_insert_with(|| crate::keyed::path_of(uri))
        } else {
            b""
        };
        if !limit.applies(path) {
            continue;
        }
        if let Some(Verdict::Limited {
            status,
            retry_after,
        }) = limit.check_request(conn.client.ip(), path, headers.clone(), &mut tx, now)
        {
            return Some((&limit.name, status, retry_after));
        }
    }
    None
}

/// The first content coding other than `identity` that a request's
/// `Content-Encoding` lines name, if any.
fn content_coding<'h>(mut headers: impl Iterator<Item = (&'h [u8], &'h [u8])>) -> Option<String> {
    headers.find_map(|(name, value)| {
        if !name.eq_ignore_ascii_case(b"content-encoding") {
            return None;
        }
        value
            .split(|&b| b == b',')
            .map(|c| c.trim_ascii())
            .find(|c| !c.is_empty() && !c.eq_ignore_ascii_case(b"identity"))
            .map(|c| String::from_utf8_lossy(c).into_owned())
    })
}

/// Records a request whose client went away, answering no one.
fn gone(ex: Exchange, why: &str) -> Driven {
    let mut reply = ex.reply_error(400, Action::BadRequest, why);
    reply.body.finish();
    Driven {
        reply: None,
        body_read: false,
        refused: false,
    }
}

/// Which body time limit ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Late {
    /// `server.client_body_timeout`: too long a pause between two reads.
    Pause,
    /// `server.client_body_deadline`: the whole body took too long.
    Total,
    /// `server.client_body_min_rate`: the body arrives too slowly on average.
    Rate,
}

impl Late {
    fn reason(self) -> &'static str {
        match self {
            Late::Pause => "request body not received within server.client_body_timeout",
            Late::Total => "request body not complete within server.client_body_deadline",
            Late::Rate => "request body slower than server.client_body_min_rate",
        }
    }
}

/// The time limits on a request body: the pause between reads, the whole body,
/// and the lowest average rate once the grace period is over (a client dripping a
/// byte every few seconds keeps within any pause limit, but not within this).
#[derive(Debug)]
struct BodyClock {
    start: Instant,
    pause: Duration,
    total: Duration,
    grace: Duration,
    min_rate: u64,
    received: u64,
}

impl BodyClock {
    fn new(cfg: &ServerConfig) -> BodyClock {
        BodyClock {
            start: Instant::now(),
            pause: cfg.client_body_timeout,
            total: cfg.client_body_deadline,
            grace: cfg.client_body_min_rate_grace,
            min_rate: cfg.client_body_min_rate,
            received: 0,
        }
    }

    /// Notes the body bytes received so far (framing included).
    fn received(&mut self, n: u64) {
        self.received = n;
    }

    /// The earliest limit from now, and which it is.
    fn next_limit(&self, now: Instant) -> (Instant, Late) {
        let mut limit = (now + self.pause, Late::Pause);
        let total = self.start + self.total;
        if total < limit.0 {
            limit = (total, Late::Total);
        }
        if self.min_rate > 0 {
            // At the lowest rate, the bytes received so far buy this much time
            // beyond the grace period.
            let bought = Duration::from_secs_f64(self.received as f64 / self.min_rate as f64);
            let rate = self.start + self.grace.saturating_add(bought);
            if rate < limit.0 {
                limit = (rate, Late::Rate);
            }
        }
        limit
    }

    /// Runs one read within the limits.
    async fn bound<F: Future>(&self, read: F) -> Result<F::Output, Late> {
        let (at, late) = self.next_limit(Instant::now());
        tokio::time::timeout_at(at.into(), read)
            .await
            .map_err(|_| late)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clock(pause: u64, total: u64, grace: u64, rate: u64) -> BodyClock {
        BodyClock {
            start: Instant::now(),
            pause: Duration::from_secs(pause),
            total: Duration::from_secs(total),
            grace: Duration::from_secs(grace),
            min_rate: rate,
            received: 0,
        }
    }

    #[test]
    fn the_earliest_limit_applies() {
        let c = clock(60, 300, 10, 500);
        let (at, late) = c.next_limit(c.start);
        assert_eq!(late, Late::Rate);
        assert_eq!(at - c.start, Duration::from_secs(10));

        // 5,000 bytes at 500 B/s buy ten more seconds.
        let mut c = clock(60, 300, 10, 500);
        c.received(5_000);
        assert_eq!(c.next_limit(c.start).0 - c.start, Duration::from_secs(20));

        // Fast enough: the pause limit is next; late in the body, the total one.
        c.received(10_000_000);
        assert_eq!(c.next_limit(c.start).1, Late::Pause);
        let late_now = c.start + Duration::from_secs(280);
        assert_eq!(
            c.next_limit(late_now),
            (c.start + Duration::from_secs(300), Late::Total)
        );

        // A rate of 0 switches the rate limit off.
        let c = clock(60, 300, 10, 0);
        assert_eq!(c.next_limit(c.start).1, Late::Pause);
    }
}
