//! The proxy's own HTTP/1.1 client, over hyper's client connection: plain TCP or
//! TLS (rustls), with the answer's body read up to a bound.
//!
//! - [`send`]: one request on a new connection, for `palisade diag` reading the
//!   admin listener.
//! - [`Connection`]: one connection kept open between requests, made again when the
//!   peer closed it or it failed, for the OTLP exporter.

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use std::sync::Arc;

/// Why a request got no answer.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The TCP connection could not be made.
    #[error("connecting to {target}: {source}")]
    Connect {
        /// `HOST:PORT`.
        target: String,
        /// The system's reason.
        source: std::io::Error,
    },
    /// The TLS handshake failed (a certificate refused, among others).
    #[error("TLS with {target}: {source}")]
    Tls {
        /// `HOST:PORT`.
        target: String,
        /// What rustls says.
        source: std::io::Error,
    },
    /// The host cannot be checked against a certificate (not a DNS name or an IP
    /// address).
    #[error("{host:?}: not a name a certificate can be checked against")]
    ServerName {
        /// The host.
        host: String,
    },
    /// The HTTP/1.1 exchange failed before an answer came.
    #[error("{target}: {source}")]
    Http {
        /// `HOST:PORT`.
        target: String,
        /// What hyper says.
        source: hyper::Error,
    },
}

/// Where a client connects: a host and port, plain or over TLS.
#[derive(Clone)]
pub struct Target {
    /// The host, without the brackets of an IPv6 address.
    host: String,
    port: u16,
    /// The TLS client and the name the server's certificate must carry.
    tls: Option<(tokio_rustls::TlsConnector, ServerName<'static>)>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

impl Target {
    /// `host:port` over plain TCP. An IPv6 address may come with its brackets.
    pub fn plain(host: &str, port: u16) -> Target {
        Target {
            host: unbracket(host).to_owned(),
            port,
            tls: None,
        }
    }

    /// `host:port` over TLS with `config`; SNI and the certificate's check use
    /// `host` (a DNS name or an IP address).
    pub fn tls(
        host: &str,
        port: u16,
        config: Arc<rustls::ClientConfig>,
    ) -> Result<Target, ClientError> {
        let host = unbracket(host);
        let name = ServerName::try_from(host.to_owned()).map_err(|_| ClientError::ServerName {
            host: host.to_owned(),
        })?;
        Ok(Target {
            host: host.to_owned(),
            port,
            tls: Some((tokio_rustls::TlsConnector::from(config), name)),
        })
    }

    /// `HOST:PORT` as a `Host` header writes it (IPv6 in brackets).
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// Whether the connection is TLS.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// A new connection: TCP, the TLS handshake if any, then HTTP/1.1. Its
    /// connection task runs on the current runtime.
    async fn connect<B>(&self) -> Result<SendRequest<B>, ClientError>
    where
        B: http_body::Body + Send + 'static,
        B::Data: Send,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let tcp = tokio::net::TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(|source| ClientError::Connect {
                target: self.authority(),
                source,
            })?;
        let _ = tcp.set_nodelay(true);
        let http = |source| ClientError::Http {
            target: self.authority(),
            source,
        };
        match &self.tls {
            None => {
                let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
                    .await
                    .map_err(http)?;
                tokio::spawn(conn);
                Ok(sender)
            }
            Some((connector, name)) => {
                let stream = connector
                    .connect(name.clone(), tcp)
                    .await
                    .map_err(|source| ClientError::Tls {
                        target: self.authority(),
                        source,
                    })?;
                let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                    .await
                    .map_err(http)?;
                tokio::spawn(conn);
                Ok(sender)
            }
        }
    }
}

/// `[::1]` as `::1`; other hosts as they are.
fn unbracket(host: &str) -> &str {
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

/// Reads an answer's body, at most `max_body` bytes.
async fn read_body(
    resp: http::Response<hyper::body::Incoming>,
    max_body: usize,
) -> (http::StatusCode, Result<Bytes, String>) {
    let status = resp.status();
    let body = http_body_util::Limited::new(resp.into_body(), max_body)
        .collect()
        .await
        .map(|b| b.to_bytes())
        .map_err(|e| e.to_string());
    (status, body)
}

/// Sends `req` to `target` on a new connection. Returns the status and the body
/// (at most `max_body` bytes, or why it could not be read), or why no answer came.
pub async fn send<B>(
    target: &Target,
    req: http::Request<B>,
    max_body: usize,
) -> Result<(http::StatusCode, Result<Bytes, String>), ClientError>
where
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut sender = target.connect::<B>().await?;
    let resp = sender
        .send_request(req)
        .await
        .map_err(|source| ClientError::Http {
            target: target.authority(),
            source,
        })?;
    Ok(read_body(resp, max_body).await)
}

/// One HTTP/1.1 connection to a target, kept open between requests and made
/// again when the peer closed it or it failed. Requests go one at a time.
#[derive(Debug)]
pub struct Connection {
    target: Target,
    sender: Option<SendRequest<Full<Bytes>>>,
    connects: u64,
}

impl Connection {
    /// No connection yet; the first request makes one.
    pub fn new(target: Target) -> Connection {
        Connection {
            target,
            sender: None,
            connects: 0,
        }
    }

    /// Where it connects.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// How many connections were made so far.
    pub fn connects(&self) -> u64 {
        self.connects
    }

    /// Closes the connection (after a timeout, its state is unknown); the next
    /// request makes a new one.
    pub fn close(&mut self) {
        self.sender = None;
    }

    /// Sends `req` on the kept connection, or on a new one when there is none or
    /// the kept one is closed. When the kept one fails before an answer comes (the
    /// peer closed it while idle), the request is sent once more on a new
    /// connection: the caller must accept that it may arrive twice. Returns the
    /// status and the body (at most `max_body` bytes, or why it could not be read;
    /// the connection is then closed), or why no answer came.
    pub async fn send(
        &mut self,
        req: http::Request<Full<Bytes>>,
        max_body: usize,
    ) -> Result<(http::StatusCode, Result<Bytes, String>), ClientError> {
        // Lets the connection's task see a close that came while idle.
        tokio::task::yield_now().await;
        let mut reused = self.sender.take().filter(|s| !s.is_closed());
        if let Some(s) = &mut reused
            && s.ready().await.is_err()
        {
            reused = None;
        }
        let again = reused.is_some().then(|| clone_request(&req));
        let first = match reused {
            Some(s) => Ok(s),
            None => self.open().await,
        };
        let mut sender = first?;
        let resp = match sender.send_request(req).await {
            Ok(resp) => resp,
            Err(_) if again.is_some() => {
                let req = again.expect("checked");
                sender = self.open().await?;
                sender
                    .send_request(req)
                    .await
                    .map_err(|source| ClientError::Http {
                        target: self.target.authority(),
                        source,
                    })?
            }
            Err(source) => {
                return Err(ClientError::Http {
                    target: self.target.authority(),
                    source,
                });
            }
        };
        let (status, body) = read_body(resp, max_body).await;
        // Kept only when the answer was read whole: a body left unread would block
        // the next request.
        if body.is_ok() {
            self.sender = Some(sender);
        }
        Ok((status, body))
    }

    async fn open(&mut self) -> Result<SendRequest<Full<Bytes>>, ClientError> {
        let s = self.target.connect().await?;
        self.connects += 1;
        Ok(s)
    }
}

/// A copy of a request with a body in memory, to send again.
fn clone_request(req: &http::Request<Full<Bytes>>) -> http::Request<Full<Bytes>> {
    let mut copy = http::Request::new(req.body().clone());
    *copy.method_mut() = req.method().clone();
    *copy.uri_mut() = req.uri().clone();
    *copy.version_mut() = req.version();
    *copy.headers_mut() = req.headers().clone();
    copy
}

/// The start of a refusal's body, for an error message.
pub fn body_start(body: &[u8]) -> String {
    String::from_utf8_lossy(&body[..body.len().min(200)])
        .trim()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A server on a loopback port answering `200 ok` to each request, counting the
    /// connections it accepted; `close_after` requests on one connection, it
    /// closes it.
    async fn server(close_after: usize) -> (std::net::SocketAddr, Arc<AtomicUsize>) {
        use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _};
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((s, _)) = l.accept().await {
                count.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(async move {
                    let mut r = tokio::io::BufReader::new(s);
                    for _ in 0..close_after {
                        let mut len = 0usize;
                        loop {
                            let mut line = String::new();
                            if r.read_line(&mut line).await.unwrap_or(0) == 0 {
                                return;
                            }
                            if let Some(v) =
                                line.to_ascii_lowercase().strip_prefix("content-length:")
                            {
                                len = v.trim().parse().unwrap();
                            }
                            if line == "\r\n" {
                                break;
                            }
                        }
                        let mut body = vec![0; len];
                        r.read_exact(&mut body).await.unwrap();
                        let _ = r
                            .get_mut()
                            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                            .await;
                    }
                });
            }
        });
        (addr, accepted)
    }

    fn post(body: &'static str) -> http::Request<Full<Bytes>> {
        http::Request::post("/v1/traces")
            .header(http::header::HOST, "test")
            .body(Full::new(Bytes::from_static(body.as_bytes())))
            .unwrap()
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_connection_is_kept_between_requests() {
        let (addr, accepted) = server(usize::MAX).await;
        let mut c = Connection::new(Target::plain("127.0.0.1", addr.port()));
        for _ in 0..5 {
            let (status, body) = c.send(post("{}"), 1024).await.unwrap();
            assert_eq!((status.as_u16(), &body.unwrap()[..]), (200, &b"ok"[..]));
        }
        assert_eq!(c.connects(), 1);
        assert_eq!(accepted.load(Ordering::Relaxed), 1);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_connection_the_peer_closed_is_made_again() {
        // The server closes each connection after one answer, without saying so.
        let (addr, accepted) = server(1).await;
        let mut c = Connection::new(Target::plain("[127.0.0.1]", addr.port()));
        for _ in 0..3 {
            let (status, _) = c.send(post("{}"), 1024).await.unwrap();
            assert_eq!(status.as_u16(), 200);
        }
        assert_eq!(c.connects(), 3);
        assert_eq!(accepted.load(Ordering::Relaxed), 3);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn no_listener_is_a_connect_error() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        drop(l);
        let mut c = Connection::new(Target::plain("127.0.0.1", port));
        let e = c.send(post("{}"), 1024).await.unwrap_err();
        assert!(matches!(e, ClientError::Connect { .. }), "{e}");
    }

    #[test]
    fn a_tls_target_needs_a_checkable_name() {
        let cfg = Arc::new(crate::tls::client::client_config(None).unwrap());
        assert!(Target::tls("collector.example", 4318, cfg.clone()).is_ok());
        let t = Target::tls("[::1]", 4318, cfg.clone()).unwrap();
        assert_eq!(t.authority(), "[::1]:4318");
        assert!(t.is_tls());
        assert!(matches!(
            Target::tls("bad name", 4318, cfg),
            Err(ClientError::ServerName { .. })
        ));
    }
}
