//! The listener, the connection loop and the request handler.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;

use crate::Error;
use crate::record::{Record, Recorder};
use crate::reflect::ReflectSpec;
use crate::sniff::sniff_content_type;

/// The largest request body the backend reads; a larger one is answered with 413.
pub const MAX_REQUEST_BODY: usize = 64 * 1024 * 1024;

/// How the backend behaves beyond albedo's fixed endpoints.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Append one JSON line per received request (see [`crate::Record`]) to this file.
    pub record: Option<PathBuf>,
    /// Log each request (method, target, answer) to standard error.
    pub debug: bool,
}

#[derive(Debug)]
struct State {
    recorder: Option<Recorder>,
    debug: bool,
}

/// A bound, not yet serving, albedo-compatible backend.
#[derive(Debug)]
pub struct Albedo {
    listener: TcpListener,
    state: Arc<State>,
}

impl Albedo {
    /// Binds the listening socket (port 0 picks a free port) and opens the record file,
    /// if one is configured.
    pub async fn bind(addr: SocketAddr, options: &Options) -> Result<Self, Error> {
        let recorder = options.record.as_deref().map(Recorder::open).transpose()?;
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| Error::Bind { addr, source })?;
        Ok(Self {
            listener,
            state: Arc::new(State {
                recorder,
                debug: options.debug,
            }),
        })
    }

    /// The address the backend listens on (with the real port when port 0 was asked for).
    pub fn local_addr(&self) -> Result<SocketAddr, Error> {
        self.listener.local_addr().map_err(Error::LocalAddr)
    }

    /// Serves connections until the process ends.
    pub async fn serve(self) {
        self.serve_until(std::future::pending()).await;
    }

    /// Serves connections until `shutdown` completes, then stops accepting. Connections
    /// already accepted keep running on the runtime until their client closes them.
    pub async fn serve_until<F: Future<Output = ()>>(self, shutdown: F) {
        tokio::pin!(shutdown);
        loop {
            let accepted = tokio::select! {
                () = &mut shutdown => return,
                accepted = self.listener.accept() => accepted,
            };
            let stream = match accepted {
                Ok((stream, _peer)) => stream,
                Err(e) => {
                    // Errors here concern one connection (reset before accept) or are
                    // transient (out of file descriptors); neither should stop the server.
                    eprintln!("albedo: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let state = Arc::clone(&self.state);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let state = Arc::clone(&state);
                    async move { Ok::<_, Infallible>(handle(&state, request).await) }
                });
                let mut builder = auto::Builder::new(TokioExecutor::new());
                builder.http1().timer(TokioTimer::new());
                // A client that misbehaves only loses its own connection.
                let _ = builder
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    }
}

/// Reads the whole request, records it, and answers it.
async fn handle(state: &State, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let (parts, body) = request.into_parts();
    let body = match Limited::new(body, MAX_REQUEST_BODY).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
            return text(StatusCode::PAYLOAD_TOO_LARGE, "request body too large");
        }
        Err(e) => {
            return text(
                StatusCode::BAD_REQUEST,
                &format!("cannot read request body: {e}"),
            );
        }
    };

    if let Some(recorder) = &state.recorder
        && let Err(e) = recorder.append(&Record::new(&parts, &body))
    {
        eprintln!("albedo: {e}");
        return text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "cannot record the request",
        );
    }

    let response = route(&parts.method, parts.uri.path(), parts.uri.query(), &body);
    if state.debug {
        eprintln!(
            "albedo: {} {} -> {}",
            parts.method,
            parts.uri,
            response.status().as_u16()
        );
    }
    response
}

/// Chooses the endpoint: albedo's routes, with everything else an empty 200.
fn route(method: &Method, path: &str, query: Option<&str>, body: &[u8]) -> Response<Full<Bytes>> {
    if *method == Method::POST && under(path, "/reflect") {
        reflect(body)
    } else if under(path, "/capabilities") {
        capabilities(query)
    } else {
        Response::new(Full::new(Bytes::new()))
    }
}

/// True for `prefix` itself and for anything below `prefix/`.
fn under(path: &str, prefix: &str) -> bool {
    path.strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

fn text(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(message.to_owned())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// Headers the server sets itself from the body it sends; reflecting them could
/// contradict the real framing.
fn is_framing_header(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "content-length" | "transfer-encoding" | "connection"
    )
}

/// Answers a `/reflect` request as its specification says.
fn reflect(body: &[u8]) -> Response<Full<Bytes>> {
    let spec = match ReflectSpec::parse(body) {
        Ok(spec) => spec,
        Err(e) => return text(StatusCode::BAD_REQUEST, &e.to_string()),
    };
    if let Some(message) = &spec.log_message {
        eprintln!("albedo: {message}");
    }
    let status = match StatusCode::from_u16(spec.status) {
        Ok(status) => status,
        Err(_) => {
            return text(
                StatusCode::BAD_REQUEST,
                &format!("Invalid status code: {}", spec.status),
            );
        }
    };
    let sniffed = (!spec.body.is_empty()).then(|| sniff_content_type(&spec.body));
    let mut response = Response::new(Full::new(Bytes::from(spec.body)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    for (name, value) in &spec.headers {
        // Like Go's server: drop headers with invalid names, turn line breaks in values
        // into spaces, and drop values that are still invalid.
        let Ok(name) = HeaderName::from_bytes(name.as_bytes()) else {
            continue;
        };
        if is_framing_header(&name) {
            continue;
        }
        let cleaned: Vec<u8> = value
            .bytes()
            .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b })
            .collect();
        let Ok(value) = HeaderValue::from_bytes(&cleaned) else {
            continue;
        };
        headers.append(name, value);
    }
    if let Some(sniffed) = sniffed
        && !headers.contains_key(CONTENT_TYPE)
    {
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(sniffed));
    }
    response
}

/// The `/capabilities` document: albedo's endpoint list, in albedo's JSON shape.
fn capabilities(query: Option<&str>) -> Response<Full<Bytes>> {
    let quiet = query.is_some_and(|q| q.split('&').any(|pair| pair == "quiet=true"));
    let endpoints = [
        (
            "/*",
            "any",
            "any",
            "Any path that is not another endpoint: 200 with an empty body.",
        ),
        (
            "/capabilities",
            "GET",
            "-",
            "This document. With quiet=true in the query, only the paths are listed.",
        ),
        (
            "/reflect",
            "POST",
            "application/json",
            "Answers with the status, headers and body of the JSON specification in the \
             request body: status (integer, 200 when absent), headers (object of strings), \
             body (string) or encodedBody (base64; used when body is empty), logMessage \
             (string written to the backend's log).",
        ),
    ];
    let list: Vec<serde_json::Value> = endpoints
        .iter()
        .map(|(path, methods, content_type, description)| {
            if quiet {
                serde_json::json!({ "path": path })
            } else {
                serde_json::json!({
                    "path": path,
                    "methods": [methods],
                    "contentType": content_type,
                    "description": description,
                })
            }
        })
        .collect();
    let document = serde_json::json!({ "endpoints": list }).to_string();
    let mut response = Response::new(Full::new(Bytes::from(document)));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn under_matches_subtrees_only() {
        assert!(under("/reflect", "/reflect"));
        assert!(under("/reflect/", "/reflect"));
        assert!(under("/reflect/x", "/reflect"));
        assert!(!under("/reflected", "/reflect"));
        assert!(!under("/", "/reflect"));
    }
}
