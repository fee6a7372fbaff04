//! The admin listener: `GET /metrics` (Prometheus text) and `GET /status` (JSON),
//! open to whoever reaches the listener; `/ctx`, the persistent collections (the
//! operations of `palisade ctx` over HTTP), `GET /top` and `POST /reload` (the
//! reload SIGHUP does, answered with its outcome), which ask for a bearer token.
//!
//! `/dashboard` (on unless `admin.dashboard = false`) is the dashboard, behind the
//! same token (see [`crate::dashboard`]).
//!
//! `/ctx` endpoints (`COLL` is IP, GLOBAL, SESSION, USER or RESOURCE; `KEY` and
//! `VAR` are percent-encoded; `?app=` picks a `SecWebAppId`, `default` otherwise):
//! - `GET /ctx/COLL/KEY`: the record as a JSON line, 404 when there is none;
//! - `PUT /ctx/COLL/KEY/VAR[?ttl=SECONDS]`: sets the variable to the body;
//! - `DELETE /ctx/COLL/KEY/VAR`, `DELETE /ctx/COLL/KEY`: deletes a variable or the
//!   record;
//! - `GET /ctx/COLL[?limit=N]`: records of a collection, JSON lines;
//! - `GET /ctx/export[?collection=COLL]`: every record (of the app), JSON lines;
//! - `POST /ctx/import`: JSON lines in the body, all or nothing.
//!
//! Without a token configured (`admin.token_file`, or `PALISADE_ADMIN_TOKEN`) every
//! `/ctx`, `/top` and `/reload` request is refused with 403; with one, a request
//! without the right `Authorization: Bearer` is refused with 401 before its body is
//! read.

use crate::config::AdminConfig;
use crate::ctx::{self, CtxError};
use crate::dashboard::Dashboard;
use crate::exchange::Shared;
use crate::reload::{ReloadError, ReloadHandle};
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use store::StoreError;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

/// Facts about the build, fixed at compile time.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The git revision built: `PALISADE_GIT_REVISION` from the build's environment
/// when set, else `git rev-parse HEAD` at build time, else `unknown` (build.rs).
pub const GIT_REVISION: &str = env!("PALISADE_GIT_REVISION");
/// Cargo's build profile (`debug` or `release`).
pub const BUILD_PROFILE: &str = env!("PALISADE_BUILD_PROFILE");

/// Serves the admin API until shutdown begins. Each connection lives at most
/// `cfg.timeout` (a client that sends its head slowly, or keeps the connection
/// open, is cut off then), and at most `cfg.connections` are open at once. Each
/// request is checked against the token in force when it arrives (`token` is
/// replaced by a reload). `POST /reload` asks the main loop for a reload through
/// `reloads`.
pub async fn serve(
    listener: TcpListener,
    cfg: AdminConfig,
    token: TokenCell,
    shared: Arc<Shared>,
    reloads: ReloadHandle,
    mut shutdown: watch::Receiver<bool>,
    config_path: std::path::PathBuf,
) {
    let slots = Arc::new(Semaphore::new(cfg.connections.max(1)));
    // The dashboard's aggregator runs only when the dashboard is on.
    let dashboard = cfg.dashboard.then(|| {
        let criterion = crate::dashboard::aggregate::ReadinessCriterion {
            min_requests: cfg.readiness_min_requests,
            max_rate: cfg.readiness_max_rate,
        };
        let tune = crate::dashboard::TuneSource {
            config: config_path,
            attacks: cfg.tune_attacks.clone(),
        };
        Dashboard::start(&shared, shutdown.clone(), criterion, tune)
    });
    loop {
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => return,
            },
            () = crate::runtime::stopped(&mut shutdown) => return,
        };
        let (stream, _) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!("admin accept: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = crate::runtime::stopped(&mut shutdown) => return,
        };
        let shared = shared.clone();
        let limit = cfg.timeout;
        let token = token.clone();
        let reloads = reloads.clone();
        let max_body = cfg.max_body_bytes;
        let dashboard = dashboard.clone();
        tokio::spawn(async move {
            let _permit = permit;
            // While a reload (or a dashboard tuning analysis) this connection
            // asked for runs, the connection outlives `limit`; once it has ended,
            // the answer gets `limit` more.
            let reloading = Arc::new(AtomicU8::new(IDLE));
            let busy = reloading.clone();
            let svc = service_fn(move |req: Request<Incoming>| {
                let shared = shared.clone();
                let token = token.current();
                let reload = ReloadAccess {
                    handle: reloads.clone(),
                    running: reloading.clone(),
                };
                let dashboard = dashboard.clone();
                async move {
                    if let Some(d) = dashboard.filter(|_| Dashboard::is_path(req.uri().path())) {
                        // A tuning analysis outlives `limit` as a reload does.
                        let long = Dashboard::is_long(req.uri().path());
                        if long {
                            reload.running.store(RELOADING, Ordering::Relaxed);
                        }
                        let (r, streaming) = d.handle(&shared, &token, req).await;
                        if streaming {
                            reload.running.store(STREAMING, Ordering::Relaxed);
                        } else if long {
                            reload.running.store(RELOADED, Ordering::Relaxed);
                        }
                        return Ok::<_, Infallible>(r);
                    }
                    let r = route(&shared, &token, &reload, max_body, req).await;
                    Ok::<_, Infallible>(r.map(|b| b.boxed()))
                }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limit)
                .keep_alive(false)
                .serve_connection(TokioIo::new(stream), svc);
            tokio::pin!(conn);
            while tokio::time::timeout(limit, &mut conn).await.is_err() {
                match busy.load(Ordering::Relaxed) {
                    RELOADING | STREAMING => {}
                    RELOADED => busy.store(IDLE, Ordering::Relaxed),
                    _ => break,
                }
            }
        });
    }
}

/// Why the admin token could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The token file could not be read.
    #[error("admin.token_file {path}: {source}")]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// The system's reason.
        source: std::io::Error,
    },
    /// The token is empty once surrounding white space is removed.
    #[error("the admin token from {0} is empty")]
    Empty(String),
}

/// The bearer token `/ctx` asks for, kept as its SHA-256 digest so that checking
/// a candidate compares two 32-byte digests in constant time (neither the token's
/// bytes nor its length show in the time taken).
#[derive(Clone)]
pub struct AdminToken(Option<[u8; 32]>);

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "AdminToken(set)"
        } else {
            "AdminToken(none)"
        })
    }
}

/// The admin token in force, shared by the admin listener and the SIGHUP reload,
/// which replaces it when `admin.token_file` (or `PALISADE_ADMIN_TOKEN`) changed.
#[derive(Clone, Debug)]
pub struct TokenCell(Arc<std::sync::RwLock<AdminToken>>);

impl TokenCell {
    /// A cell holding `token`.
    pub fn new(token: AdminToken) -> TokenCell {
        TokenCell(Arc::new(std::sync::RwLock::new(token)))
    }

    /// The token in force.
    pub fn current(&self) -> AdminToken {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Puts `token` in force for the requests that arrive from now on.
    pub fn replace(&self, token: AdminToken) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = token;
    }
}

/// The environment variable holding the admin token when `admin.token_file` is
/// not set.
pub const TOKEN_ENV: &str = "PALISADE_ADMIN_TOKEN";

fn digest(token: &[u8]) -> [u8; 32] {
    use sha2::Digest as _;
    sha2::Sha256::digest(token).into()
}

impl AdminToken {
    /// No token: the `/ctx` endpoints are off.
    pub fn none() -> AdminToken {
        AdminToken(None)
    }

    /// A token given as text (surrounding white space removed).
    pub fn from_text(text: &str, from: &str) -> Result<AdminToken, TokenError> {
        let t = text.trim();
        if t.is_empty() {
            return Err(TokenError::Empty(from.to_owned()));
        }
        Ok(AdminToken(Some(digest(t.as_bytes()))))
    }

    /// The token from `admin.token_file`, else from `PALISADE_ADMIN_TOKEN`, else
    /// none.
    pub fn load(cfg: &AdminConfig) -> Result<AdminToken, TokenError> {
        if let Some(path) = &cfg.token_file {
            let text = std::fs::read_to_string(path).map_err(|source| TokenError::Read {
                path: path.clone(),
                source,
            })?;
            return Self::from_text(&text, &path.display().to_string());
        }
        match std::env::var(TOKEN_ENV) {
            Ok(t) => Self::from_text(&t, TOKEN_ENV),
            Err(_) => Ok(AdminToken::none()),
        }
    }

    /// True when a token is configured.
    pub fn is_set(&self) -> bool {
        self.0.is_some()
    }

    /// True when `authorization` is `Bearer <the token>`.
    pub fn accepts(&self, authorization: Option<&header::HeaderValue>) -> bool {
        authorization
            .map(|v| v.as_bytes())
            .and_then(|v| v.strip_prefix(b"Bearer "))
            .is_some_and(|given| self.accepts_secret(given))
    }

    /// True when `given` (surrounding white space removed) is the token.
    pub fn accepts_secret(&self, given: &[u8]) -> bool {
        use subtle::ConstantTimeEq as _;
        let Some(want) = &self.0 else {
            return false;
        };
        digest(given.trim_ascii()).ct_eq(want).into()
    }

    /// The token's SHA-256 digest (what dashboard sessions are tied to), when a
    /// token is set.
    pub fn fingerprint(&self) -> Option<[u8; 32]> {
        self.0
    }
}

/// A connection's reload state: none asked for (or its answer had its time).
const IDLE: u8 = 0;
/// A reload (or a CPU profile) this connection asked for runs.
const RELOADING: u8 = 1;
/// That reload has ended: its answer is being sent.
const RELOADED: u8 = 2;
/// The connection carries the dashboard's event stream, which ends when the
/// client goes or shutdown begins.
const STREAMING: u8 = 3;

/// What a connection needs to ask for a reload: the main loop's queue, and the
/// state that keeps the connection open past `admin.timeout` while its reload runs.
struct ReloadAccess {
    handle: ReloadHandle,
    running: Arc<AtomicU8>,
}

/// Marks the connection's reload as ended when its wait ends, answered or not.
struct Running<'a>(&'a AtomicU8);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.store(RELOADED, Ordering::Relaxed);
    }
}

async fn route(
    shared: &Arc<Shared>,
    token: &AdminToken,
    reloads: &ReloadAccess,
    max_body: usize,
    req: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let path = req.uri().path();
    if path == "/ctx" || path.starts_with("/ctx/") {
        return ctx_route(shared, token, max_body, req).await;
    }
    if path == "/reload" {
        return reload_route(token, reloads, &req).await;
    }
    if path == "/debug/profile" {
        return profile_route(token, reloads, &req).await;
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(
            StatusCode::METHOD_NOT_ALLOWED,
            "only GET\n".into(),
            "text/plain",
        );
    }
    match req.uri().path() {
        "/metrics" => text(
            StatusCode::OK,
            metrics_text(shared),
            "text/plain; version=0.0.4; charset=utf-8",
        ),
        "/status" => text(StatusCode::OK, status_json(shared), "application/json"),
        "/top" => refusal(token, &req).unwrap_or_else(|| top_json(shared, req.uri().query())),
        "/debug/slow" => refusal(token, &req).unwrap_or_else(|| {
            let mut body = serde_json::json!({
                "window_seconds": crate::diag::slow::WINDOW_SECS,
                "requests": shared.slow.slowest(),
            })
            .to_string();
            body.push('\n');
            text(StatusCode::OK, body, "application/json")
        }),
        _ => text(
            StatusCode::NOT_FOUND,
            "not found: try /metrics, /status, /top, /reload, /ctx, /debug/profile or /debug/slow\n"
                .into(),
            "text/plain",
        ),
    }
}

/// What a `/ctx` request asks for.
#[derive(Debug, PartialEq, Eq)]
enum CtxRequest {
    Get(String, Vec<u8>),
    Set(String, Vec<u8>, String),
    Delete(String, Vec<u8>, Option<String>),
    List(String),
    Export,
    Import,
}

fn decode(segment: &str) -> Vec<u8> {
    percent_encoding::percent_decode_str(segment).collect()
}

fn decode_text(segment: &str) -> Result<String, String> {
    String::from_utf8(decode(segment)).map_err(|_| format!("{segment:?} is not UTF-8 text"))
}

/// Reads the method and path of a `/ctx` request.
fn parse_ctx(method: &Method, path: &str) -> Result<CtxRequest, (StatusCode, String)> {
    let rest = path.strip_prefix("/ctx").unwrap_or(path);
    let parts: Vec<&str> = rest.split('/').skip(1).collect();
    let bad = |m: String| (StatusCode::BAD_REQUEST, m);
    let unknown = || {
        (
            StatusCode::NOT_FOUND,
            "not found: /ctx/COLLECTION[/KEY[/VARIABLE]], /ctx/export, /ctx/import".to_owned(),
        )
    };
    let text = |s: &str| decode_text(s).map_err(bad);
    match (method, parts.as_slice()) {
        (&Method::GET, ["export"]) => Ok(CtxRequest::Export),
        (&Method::POST, ["import"]) => Ok(CtxRequest::Import),
        (&Method::GET, [coll]) if !coll.is_empty() => Ok(CtxRequest::List(text(coll)?)),
        (&Method::GET, [coll, key]) => Ok(CtxRequest::Get(text(coll)?, decode(key))),
        (&Method::PUT, [coll, key, var]) => {
            Ok(CtxRequest::Set(text(coll)?, decode(key), text(var)?))
        }
        (&Method::DELETE, [coll, key]) => Ok(CtxRequest::Delete(text(coll)?, decode(key), None)),
        (&Method::DELETE, [coll, key, var]) => Ok(CtxRequest::Delete(
            text(coll)?,
            decode(key),
            Some(text(var)?),
        )),
        (_, ["export"] | ["import"] | [_] | [_, _] | [_, _, _]) => Err((
            StatusCode::METHOD_NOT_ALLOWED,
            format!("{method} is not allowed here"),
        )),
        _ => Err(unknown()),
    }
}

/// The value of `name` in a query string, percent-decoded.
fn query_param(query: Option<&str>, name: &str) -> Option<String> {
    query?.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (k == name).then(|| String::from_utf8_lossy(&decode(v)).into_owned())
    })
}

fn json_error(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    let mut body = serde_json::json!({ "error": message }).to_string();
    body.push('\n');
    text(status, body, "application/json")
}

/// The status for a failed context operation.
fn ctx_error_status(e: &CtxError) -> StatusCode {
    match e {
        CtxError::Collection(_) | CtxError::Variable(..) => StatusCode::BAD_REQUEST,
        CtxError::Store(StoreError::Import { .. } | StoreError::Collection(_)) => {
            StatusCode::BAD_REQUEST
        }
        CtxError::Store(StoreError::MapFull { .. }) => StatusCode::INSUFFICIENT_STORAGE,
        CtxError::Store(_) | CtxError::Output(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// Checks the bearer token of a request to `/ctx`, `/top` or `/reload` (endpoints
/// that change state or show client addresses): 403 when no token is configured, 401 without
/// the right one. `None`: the request may go on.
fn refusal<B>(token: &AdminToken, req: &Request<B>) -> Option<Response<Full<Bytes>>> {
    if !token.is_set() {
        return Some(json_error(
            StatusCode::FORBIDDEN,
            "the /ctx, /top and /reload endpoints are off: no admin token is configured (set admin.token_file, or PALISADE_ADMIN_TOKEN in the environment)",
        ));
    }
    if !token.accepts(req.headers().get(header::AUTHORIZATION)) {
        let mut r = json_error(
            StatusCode::UNAUTHORIZED,
            "a valid Authorization: Bearer token is required",
        );
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer"),
        );
        return Some(r);
    }
    None
}

/// `GET /top?by=requests|bytes_in|bytes_out|blocks&n=N` (default requests, 20; at
/// most 1000): the heaviest clients with their counts and error bounds, and every
/// route's totals (see [`crate::accounting`]).
fn top_json(shared: &Shared, query: Option<&str>) -> Response<Full<Bytes>> {
    use crate::accounting::Dimension;
    let by = match query_param(query, "by") {
        None => Dimension::Requests,
        Some(b) => match Dimension::parse(&b) {
            Some(d) => d,
            None => {
                return json_error(
                    StatusCode::BAD_REQUEST,
                    &format!("by={b}: expected requests, bytes_in, bytes_out or blocks"),
                );
            }
        },
    };
    let n = match query_param(query, "n").map(|v| v.parse::<usize>()) {
        None => 20,
        Some(Ok(n)) if (1..=1000).contains(&n) => n,
        Some(_) => return json_error(StatusCode::BAD_REQUEST, "n: expected 1 to 1000"),
    };
    let (clients, total) = shared.accounting.top(by, n);
    let routes: Vec<serde_json::Value> = shared
        .accounting
        .routes()
        .into_iter()
        .map(|(name, t)| {
            serde_json::json!({
                "route": name,
                "requests": t.requests,
                "bytes_in": t.bytes_in,
                "bytes_out": t.bytes_out,
                "blocks": t.blocks,
            })
        })
        .collect();
    let mut body = serde_json::json!({
        "by": by.name(),
        "total": total,
        "clients": clients,
        "routes": routes,
        "rule_cost": {
            "sample": shared.waf().rule_cost_sampler().rate(),
            "sampled_requests": shared.rule_costs.sampled(),
            "rules": shared.rule_costs.top(n),
        },
    })
    .to_string();
    body.push('\n');
    text(StatusCode::OK, body, "application/json")
}

/// `GET /debug/profile[?seconds=N][&format=svg|pprof]`: a CPU profile of the whole
/// process over the next N seconds (default 10, at most 300), as a flame graph or
/// a pprof profile ([`crate::diag::profile`]); behind the admin token, one at a
/// time (409 while another runs). The connection outlives `admin.timeout` while
/// the profile runs, as for a reload.
async fn profile_route<B>(
    token: &AdminToken,
    conn: &ReloadAccess,
    req: &Request<B>,
) -> Response<Full<Bytes>> {
    use crate::diag::profile::{Format, ProfileError, ProfileRequest};
    if let Some(refused) = refusal(token, req) {
        return refused;
    }
    if req.method() != Method::GET {
        return json_error(StatusCode::METHOD_NOT_ALLOWED, "only GET");
    }
    let asked = match ProfileRequest::from_query(req.uri().query()) {
        Ok(p) => p,
        Err(e) => return json_error(StatusCode::BAD_REQUEST, &e.to_string()),
    };
    conn.running.store(RELOADING, Ordering::Relaxed);
    let _long = Running(&conn.running);
    match crate::diag::profile::take(asked).await {
        Ok(body) => {
            let mut r = Response::new(Full::new(Bytes::from(body)));
            let h = r.headers_mut();
            h.insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static(asked.format.content_type()),
            );
            if asked.format == Format::Pprof {
                h.insert(
                    header::CONTENT_DISPOSITION,
                    header::HeaderValue::from_static("attachment; filename=\"palisade.pb\""),
                );
            }
            r
        }
        Err(e @ ProfileError::Busy) => json_error(StatusCode::CONFLICT, &e.to_string()),
        Err(e @ ProfileError::BadRequest(_)) => json_error(StatusCode::BAD_REQUEST, &e.to_string()),
        Err(e) => json_error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

/// `POST /reload`: the reload SIGHUP does, run by the main loop (one at a time, after
/// any already asked for), answered once it has ended, even past `admin.timeout`:
/// 200 with the outcome when the new configuration is in force, 422 with the error
/// when it failed and the configuration in force stayed (both JSON, as in
/// `/status`); 503 when the proxy is shutting down or reloads already queue.
async fn reload_route<B>(
    token: &AdminToken,
    reloads: &ReloadAccess,
    req: &Request<B>,
) -> Response<Full<Bytes>> {
    if let Some(refused) = refusal(token, req) {
        return refused;
    }
    if req.method() != Method::POST {
        let mut r = json_error(
            StatusCode::METHOD_NOT_ALLOWED,
            "POST /reload reloads the configuration",
        );
        r.headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static("POST"));
        return r;
    }
    reloads.running.store(RELOADING, Ordering::Relaxed);
    let _running = Running(&reloads.running);
    match reloads.handle.reload().await {
        Ok(outcome) => {
            let status = if outcome.is_ok() {
                StatusCode::OK
            } else {
                StatusCode::UNPROCESSABLE_ENTITY
            };
            let mut body = outcome.to_json().to_string();
            body.push('\n');
            text(status, body, "application/json")
        }
        Err(e @ (ReloadError::ShuttingDown | ReloadError::Busy(_))) => {
            json_error(StatusCode::SERVICE_UNAVAILABLE, &e.to_string())
        }
    }
}

async fn ctx_route(
    shared: &Arc<Shared>,
    token: &AdminToken,
    max_body: usize,
    req: Request<Incoming>,
) -> Response<Full<Bytes>> {
    if let Some(refused) = refusal(token, &req) {
        return refused;
    }
    let Some(store) = shared.store().cloned() else {
        return json_error(StatusCode::SERVICE_UNAVAILABLE, "no store is open");
    };
    let what = match parse_ctx(req.method(), req.uri().path()) {
        Ok(w) => w,
        Err((status, m)) => return json_error(status, &m),
    };
    let query = req.uri().query().map(str::to_owned);
    let app = query_param(query.as_deref(), "app")
        .unwrap_or_else(|| engine::collections::DEFAULT_APP.to_owned());
    let body = if matches!(what, CtxRequest::Set(..) | CtxRequest::Import) {
        use http_body_util::{BodyExt as _, Limited};
        match Limited::new(req.into_body(), max_body).collect().await {
            Ok(b) => b.to_bytes(),
            Err(e) => {
                return if e.is::<http_body_util::LengthLimitError>() {
                    json_error(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        &format!("the body is larger than admin.max_body_bytes ({max_body})"),
                    )
                } else {
                    json_error(StatusCode::BAD_REQUEST, &format!("reading the body: {e}"))
                };
            }
        }
    } else {
        Bytes::new()
    };
    let job = move || ctx_job(&store, &app, query.as_deref(), what, &body);
    match tokio::task::spawn_blocking(job).await {
        Ok(r) => r,
        Err(e) => json_error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    }
}

/// Carries out a `/ctx` request on the store (blocking: it may wait for a commit).
fn ctx_job(
    store: &store::Store,
    app: &str,
    query: Option<&str>,
    what: CtxRequest,
    body: &[u8],
) -> Response<Full<Bytes>> {
    let lines = |out: Vec<u8>| {
        let mut r = Response::new(Full::new(Bytes::from(out)));
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static("application/x-ndjson"),
        );
        r
    };
    let result: Result<Response<Full<Bytes>>, CtxError> = (|| match what {
        CtxRequest::Get(coll, key) => {
            let k = ctx::record_key(app, &coll, &key)?;
            Ok(match ctx::get(store, &k)? {
                Some(r) => lines(format!("{}\n", ctx::record_line(&k, &r)).into_bytes()),
                None => json_error(StatusCode::NOT_FOUND, "no such record"),
            })
        }
        CtxRequest::Set(coll, key, var) => {
            let k = ctx::record_key(app, &coll, &key)?;
            let ttl = match query_param(query, "ttl") {
                Some(t) => match t.parse::<u64>() {
                    Ok(n) => Some(n),
                    Err(_) => {
                        return Ok(json_error(
                            StatusCode::BAD_REQUEST,
                            &format!("ttl {t:?} is not a number of seconds"),
                        ));
                    }
                },
                None => None,
            };
            ctx::set(store, &k, &var, body, ttl)?;
            let mut doc = serde_json::json!({ "ok": true });
            if let Some(n) = ctx::long_key_note(&k) {
                doc["note"] = n.into();
            }
            Ok(text(StatusCode::OK, format!("{doc}\n"), "application/json"))
        }
        CtxRequest::Delete(coll, key, var) => {
            let k = ctx::record_key(app, &coll, &key)?;
            Ok(match ctx::delete(store, &k, var.as_deref())? {
                true => text(StatusCode::OK, "{\"ok\":true}\n".into(), "application/json"),
                false => json_error(StatusCode::NOT_FOUND, "nothing to delete"),
            })
        }
        CtxRequest::List(coll) => {
            let kind = ctx::collection(&coll)?;
            let limit = match query_param(query, "limit").map(|l| l.parse::<usize>()) {
                None => 1000,
                Some(Ok(n)) => n,
                Some(Err(_)) => {
                    return Ok(json_error(StatusCode::BAD_REQUEST, "limit is not a number"));
                }
            };
            let mut out = Vec::new();
            ctx::list(store, app, Some(kind), limit, &mut out)?;
            Ok(lines(out))
        }
        CtxRequest::Export => {
            let kind = query_param(query, "collection")
                .map(|c| ctx::collection(&c))
                .transpose()?;
            let mut out = Vec::new();
            store.export(&mut out, Some(app), kind)?;
            Ok(lines(out))
        }
        CtxRequest::Import => {
            let n = store.import(body)?;
            Ok(text(
                StatusCode::OK,
                format!("{{\"imported\":{n}}}\n"),
                "application/json",
            ))
        }
    })();
    result.unwrap_or_else(|e| json_error(ctx_error_status(&e), &e.to_string()))
}

fn text(status: StatusCode, body: String, ctype: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(ctype),
    );
    r
}

/// The `/metrics` text.
pub fn metrics_text(shared: &Shared) -> String {
    let extra = [
        (
            "palisade_rules_loaded",
            "Rules in the loaded rule set.",
            shared.waf().rule_count() as f64,
        ),
        (
            "palisade_process_uptime_seconds",
            "Seconds since the process started.",
            shared.started.elapsed().as_secs_f64(),
        ),
    ];
    let mut out = shared.metrics.render(&extra);
    shared.reloads.render(&mut out);
    shared.logs.stats().render(&mut out);
    shared.workers.render(&mut out);
    shared.slots.render(&mut out);
    crate::tls::sni::render_metrics(&mut out, &shared.tls_listeners());
    if let Some(acme) = shared.acme() {
        acme.render_metrics(&mut out);
    }
    let mut out = crate::metrics::Exposition::from_text(out);
    let policy = shared.policy();
    let upstreams = shared.upstreams();
    let mut collectors: Vec<&dyn crate::metrics::Collector> = vec![
        &*policy,
        &*upstreams,
        &shared.summaries,
        &shared.rule_costs,
        &shared.shadow,
        &crate::procstat::BuildInfo,
        &crate::procstat::ProcessCollector,
        &crate::procstat::ThreadCpuCollector,
        &shared.incidents,
    ];
    if let Some(store) = shared.store() {
        collectors.push(store);
    }
    if let Some(sync) = shared.sync() {
        collectors.push(sync);
    }
    if let Some(dns) = shared.dns() {
        collectors.push(&**dns);
    }
    for sink in shared.logs.line_sinks() {
        collectors.push(&**sink);
    }
    for c in collectors {
        c.collect(&mut out);
    }
    out.into_text()
}

/// The `/status` document.
pub fn status_json(shared: &Shared) -> String {
    let waf = shared.waf();
    let doc = serde_json::json!({
        "profile_running": crate::diag::profile::running(),
        "version": VERSION,
        "git_revision": GIT_REVISION,
        "build_profile": BUILD_PROFILE,
        "kernel_version": kernel_version(),
        "host_uptime_seconds": host_uptime(),
        "process_uptime_seconds": shared.started.elapsed().as_secs_f64(),
        "rules": {
            "count": waf.rule_count(),
            "per_phase": waf.rules_per_phase(),
            "sha256": waf.hash(),
            "engine_mode": waf.engine_mode(),
            "files": waf.files().iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
            "sites": waf.site_status(),
            "shadow": waf.shadow().map(|s| s.status()),
        },
        "connections_open": shared.metrics.connections_open.load(Ordering::Relaxed),
        "logs": shared.logs.stats().status(|k| shared.logs.enabled(k)),
        "reload": shared.reloads.status(),
        "tls": shared.tls_listeners().iter().map(|l| l.status()).collect::<Vec<_>>(),
        "acme": shared.acme().map(|a| a.status()),
    });
    let mut s = doc.to_string();
    s.push('\n');
    s
}

/// `/proc/sys/kernel/osrelease`, or `unknown`.
pub fn kernel_version() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "unknown".into())
}

/// Seconds since the host booted (`/proc/uptime`), if known.
pub fn host_uptime() -> Option<f64> {
    std::fs::read_to_string("/proc/uptime")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ctx_paths() {
        use CtxRequest::*;
        let p = |m: Method, path: &str| parse_ctx(&m, path);
        assert_eq!(
            p(Method::GET, "/ctx/IP/192.0.2.1"),
            Ok(Get("IP".into(), b"192.0.2.1".to_vec()))
        );
        assert_eq!(
            p(Method::PUT, "/ctx/ip/a%2Fb%20c/Score"),
            Ok(Set("ip".into(), b"a/b c".to_vec(), "Score".into()))
        );
        assert_eq!(
            p(Method::DELETE, "/ctx/ip/k"),
            Ok(Delete("ip".into(), b"k".to_vec(), None))
        );
        assert_eq!(p(Method::GET, "/ctx/export"), Ok(Export));
        assert_eq!(p(Method::POST, "/ctx/import"), Ok(Import));
        assert_eq!(p(Method::GET, "/ctx/GLOBAL"), Ok(List("GLOBAL".into())));
        assert_eq!(
            p(Method::POST, "/ctx/ip/k").unwrap_err().0,
            StatusCode::METHOD_NOT_ALLOWED
        );
        assert_eq!(
            p(Method::GET, "/ctx/a/b/c/d").unwrap_err().0,
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            query_param(Some("app=shop&ttl=60"), "ttl").as_deref(),
            Some("60")
        );
        assert_eq!(
            query_param(Some("app=a%20b"), "app").as_deref(),
            Some("a b")
        );
    }

    #[test]
    fn tokens() {
        let t = AdminToken::from_text(" s3cret\n", "test").unwrap();
        let hv = |s: &str| header::HeaderValue::from_str(s).unwrap();
        assert!(t.accepts(Some(&hv("Bearer s3cret"))));
        assert!(!t.accepts(Some(&hv("Bearer s3cre"))));
        assert!(!t.accepts(Some(&hv("Bearer s3cret2"))));
        assert!(!t.accepts(Some(&hv("Basic s3cret"))));
        assert!(!t.accepts(None));
        assert!(!AdminToken::none().accepts(Some(&hv("Bearer "))));
        assert!(AdminToken::from_text("  \n", "test").is_err());
    }
}
