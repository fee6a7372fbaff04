//! The HTTP/2 front end (TLS with ALPN `h2`): hyper's server frames the streams, each
//! request goes through the same [`Exchange`] as HTTP/1 requests.

use crate::exchange::{
    ConnInfo, Exchange, ForwardParts, Reply, ReplyBody, Shared, upstream_headers,
};
use crate::logs::now_unix_micros;
use crate::metrics::Action;
use bytes::Bytes;
use http::header::HOST;
use http::{HeaderValue, Request, Response, Uri};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::sync::Arc;
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::watch;

/// A rule's `drop`: hyper resets the stream when the service fails.
#[derive(Debug, thiserror::Error)]
#[error("request dropped by rule")]
pub struct Dropped;

/// Serves HTTP/2 on one connection; on shutdown, sends GOAWAY and lets the open
/// streams finish.
pub async fn serve<IO>(
    shared: Arc<Shared>,
    conn: ConnInfo,
    io: IO,
    mut shutdown: watch::Receiver<bool>,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let header_limit = u32::try_from(shared.limits.header_bytes).unwrap_or(u32::MAX);
    let svc = service_fn(move |req| handle(shared.clone(), conn, req));
    let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    builder.max_header_list_size(header_limit);
    let c = builder.serve_connection(TokioIo::new(io), svc);
    tokio::pin!(c);
    tokio::select! {
        r = c.as_mut() => {
            if let Err(e) = r {
                tracing::debug!("h2 connection from {}: {e}", conn.peer);
            }
            return;
        }
        () = crate::server::stopped(&mut shutdown) => {}
    }
    c.as_mut().graceful_shutdown();
    let _ = c.await;
}

async fn handle(
    shared: Arc<Shared>,
    conn: ConnInfo,
    req: Request<Incoming>,
) -> Result<Response<ReplyBody>, Dropped> {
    let start = Instant::now();
    let start_us = now_unix_micros();
    let (parts, mut body) = req.into_parts();
    let target = parts.uri.path_and_query().map_or_else(
        || Bytes::from_static(b"/"),
        |p| Bytes::copy_from_slice(p.as_str().as_bytes()),
    );
    // HTTP/2 carries the host in :authority; rules expect a Host header.
    let authority: Option<HeaderValue> = parts
        .uri
        .authority()
        .and_then(|a| HeaderValue::from_str(a.as_str()).ok());
    let mut lines: Vec<(&[u8], &[u8])> = Vec::with_capacity(parts.headers.len() + 1);
    if !parts.headers.contains_key(HOST)
        && let Some(a) = &authority
    {
        lines.push((b"host", a.as_bytes()));
    }
    for (n, v) in &parts.headers {
        lines.push((n.as_str().as_bytes(), v.as_bytes()));
    }
    let head_bytes: usize = lines
        .iter()
        .map(|(n, v)| n.len() + v.len() + 4)
        .sum::<usize>()
        + target.len();
    let mut ex = Exchange::begin(
        &shared,
        conn,
        start,
        start_us,
        Bytes::copy_from_slice(parts.method.as_str().as_bytes()),
        target,
        Bytes::from_static(b"HTTP/2.0"),
        lines
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(b"host"))
            .map(|(_, v)| Bytes::copy_from_slice(v)),
        lines.iter().copied(),
        head_bytes,
    );
    if let Some(v) = ex.phase1() {
        return to_response_logged(ex.reply_verdict(v)).await;
    }
    loop {
        let frame = tokio::time::timeout(shared.server.client_body_timeout, body.frame()).await;
        match frame {
            Ok(None) => break,
            Ok(Some(Ok(f))) => {
                if let Ok(data) = f.into_data() {
                    ex.add_bytes_in(data.len() as u64);
                    if let Err(stop) = ex.body_chunk(data) {
                        return to_response_logged(ex.reply_body_stop(stop)).await;
                    }
                }
            }
            Ok(Some(Err(e))) => {
                let mut r = ex.reply_error(
                    400,
                    Action::BadRequest,
                    &format!("reading the request body: {e}"),
                );
                r.body.finish();
                return Err(Dropped);
            }
            Err(_) => {
                return to_response_logged(ex.reply_error(
                    408,
                    Action::BadRequest,
                    "request body not received within server.client_body_timeout",
                ))
                .await;
            }
        }
    }
    if let Some(v) = ex.phase2() {
        return to_response_logged(ex.reply_verdict(v)).await;
    }
    let headers = match upstream_headers(
        lines.iter().map(|(n, v)| (*n, Bytes::copy_from_slice(v))),
        &conn.peer_text,
        conn.tls,
    ) {
        Ok(h) => h,
        Err(why) => {
            return to_response_logged(ex.reply_error(400, Action::BadRequest, why)).await;
        }
    };
    let uri = parts
        .uri
        .path_and_query()
        .map_or_else(|| Uri::from_static("/"), |p| Uri::from(p.clone()));
    let reply = ex
        .forward(ForwardParts {
            method: parts.method,
            uri,
            headers,
        })
        .await;
    to_response_logged(reply).await
}

/// Waits until the request's error-log lines are written when
/// `logs.error_log_before_response` asks for it, then builds the response.
async fn to_response_logged(mut reply: Reply) -> Result<Response<ReplyBody>, Dropped> {
    reply.body.error_lines_written().await;
    to_response(reply)
}

fn to_response(mut reply: Reply) -> Result<Response<ReplyBody>, Dropped> {
    if reply.drop {
        reply.body.finish();
        return Err(Dropped);
    }
    let mut resp = Response::new(reply.body);
    *resp.status_mut() = reply.status;
    *resp.headers_mut() = reply.headers;
    Ok(resp)
}
