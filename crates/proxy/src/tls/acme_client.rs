//! The HTTP client the ACME protocol runs over: one HTTP/1.1 connection per
//! request (an order makes a few dozen), through the proxy's own hyper and rustls,
//! trusting `acme.ca_file` or the system's roots.

use bytes::Bytes;
use http_body_util::BodyExt as _;
use hyper_util::rt::TokioIo;
use instant_acme::{BodyWrapper, BytesResponse, Error, HttpClient};
use rustls::pki_types::ServerName;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;

/// Longest time one request to the CA may take, connection included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest response body read from the CA (certificate chains are a few KiB).
const MAX_BODY: usize = 1 << 20;

/// An [`HttpClient`] for `instant-acme`.
#[derive(Clone)]
pub(super) struct AcmeHttp {
    tls: tokio_rustls::TlsConnector,
}

impl AcmeHttp {
    /// A client trusting `roots` for the CA's HTTPS.
    pub(super) fn new(roots: Arc<rustls::RootCertStore>) -> Result<AcmeHttp, rustls::Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(AcmeHttp {
            tls: tokio_rustls::TlsConnector::from(Arc::new(cfg)),
        })
    }
}

fn other(e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::Other(Box::new(e))
}

async fn send(
    tls: tokio_rustls::TlsConnector,
    mut req: http::Request<BodyWrapper<Bytes>>,
) -> Result<BytesResponse, Error> {
    let uri = req.uri().clone();
    let https = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        _ => return Err(Error::Str("the ACME URL is neither https:// nor http://")),
    };
    let host = uri
        .host()
        .ok_or(Error::Str("the ACME URL has no host"))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let authority = uri
        .authority()
        .map(|a| a.as_str().to_owned())
        .unwrap_or_else(|| host.clone());
    *req.uri_mut() = uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .parse()
        .map_err(other)?;
    req.headers_mut().insert(
        http::header::HOST,
        http::HeaderValue::from_str(&authority).map_err(other)?,
    );
    let tcp = TcpStream::connect((host.as_str(), port))
        .await
        .map_err(other)?;
    let _ = tcp.set_nodelay(true);
    let response = if https {
        let name = ServerName::try_from(host).map_err(other)?;
        let stream = tls.connect(name, tcp).await.map_err(other)?;
        exchange(TokioIo::new(stream), req).await?
    } else {
        exchange(TokioIo::new(tcp), req).await?
    };
    let (parts, body) = response.into_parts();
    let body = http_body_util::Limited::new(body, MAX_BODY)
        .collect()
        .await
        .map_err(Error::Other)?
        .to_bytes();
    Ok(BytesResponse {
        parts,
        body: Box::new(body),
    })
}

async fn exchange<IO>(
    io: IO,
    req: http::Request<BodyWrapper<Bytes>>,
) -> Result<http::Response<hyper::body::Incoming>, Error>
where
    IO: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(other)?;
    // Ends when the response has been read and the sender dropped.
    tokio::spawn(async move {
        let _ = conn.await;
    });
    sender.send_request(req).await.map_err(other)
}

impl HttpClient for AcmeHttp {
    fn request(
        &self,
        req: http::Request<BodyWrapper<Bytes>>,
    ) -> Pin<Box<dyn Future<Output = Result<BytesResponse, Error>> + Send>> {
        let tls = self.tls.clone();
        Box::pin(async move {
            tokio::time::timeout(REQUEST_TIMEOUT, send(tls, req))
                .await
                .map_err(|_| Error::Str("no answer from the ACME server within 30 s"))?
        })
    }
}
