//! One HTTP/1.1 request over a new plain connection, for the proxy's own clients:
//! `palisade diag` reading the admin listener, and the OTLP exporter. It is hyper's
//! client connection, with the answer's body read up to a bound.

use bytes::Bytes;
use http_body_util::BodyExt as _;
use hyper_util::rt::TokioIo;

/// Sends `req` to `host:port` on a new connection. Returns the status and the
/// body (at most `max_body` bytes, or why it could not be read), or an error
/// naming what failed before an answer came.
pub async fn send<B>(
    host: &str,
    port: u16,
    req: http::Request<B>,
    max_body: usize,
) -> Result<(http::StatusCode, Result<Bytes, String>), String>
where
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let stream = tokio::net::TcpStream::connect((host, port))
        .await
        .map_err(|e| format!("connecting to {host}:{port}: {e}"))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
    let status = resp.status();
    let body = http_body_util::Limited::new(resp.into_body(), max_body)
        .collect()
        .await
        .map(|b| b.to_bytes())
        .map_err(|e| e.to_string());
    Ok((status, body))
}

/// The start of a refusal's body, for an error message.
pub fn body_start(body: &[u8]) -> String {
    String::from_utf8_lossy(&body[..body.len().min(200)])
        .trim()
        .to_owned()
}
