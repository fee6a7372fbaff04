//! The dashboard at `/dashboard` on the admin listener (`[admin] dashboard`,
//! on by default): one page, its script and style sheet, served from the binary,
//! and the data behind it, pushed as server-sent events.
//!
//! - `GET /dashboard`: the page, for a request with the admin token (an
//!   `Authorization: Bearer` header or a session cookie); otherwise the login
//!   page (401).
//! - `POST /dashboard/login`: the login form (the token, and the CSRF token of the
//!   login page's cookie); opens a session (cookie `palisade_session`, HttpOnly,
//!   SameSite=Strict) and redirects to the page.
//! - `POST /dashboard/logout`: ends the session (with the session's CSRF token).
//! - `GET /dashboard/api/snapshot`: the counters, histograms, top tables, health,
//!   the readiness to block of the DetectionOnly sites, as JSON.
//! - `GET /dashboard/events`: `text/event-stream`: a `snapshot` event about every
//!   500 ms and a `request` event per request joining the explorer.
//! - `GET /dashboard/api/tune`: `palisade tune`'s analysis of the configured audit
//!   log (proposals and their proof, as JSON; nothing written), one at a time, on
//!   a blocking thread; with the command that writes the proven exclusions.
//! - `GET /dashboard/app.js`, `GET /dashboard/app.css`: the assets.
//!
//! Every response carries a strict Content-Security-Policy (no inline script,
//! nothing from elsewhere), `X-Content-Type-Options: nosniff` and
//! `Cache-Control: no-store`. A POST must come from the dashboard's own origin
//! (`Sec-Fetch-Site: same-origin`, or an `Origin` equal to the listener's) and
//! carry a CSRF token; a GET changes nothing.

pub mod aggregate;
pub mod session;

use crate::admin::AdminToken;
use crate::exchange::Shared;
use aggregate::Aggregate;
use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::Incoming;
use session::{Session, Sessions};
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use subtle::ConstantTimeEq as _;
use tokio::sync::{Semaphore, mpsc, watch};

/// The page.
const INDEX_HTML: &str = include_str!("index.html");
/// The login page.
const LOGIN_HTML: &str = include_str!("login.html");
/// The page's script.
const APP_JS: &str = include_str!("app.js");
/// The pages' style sheet.
const APP_CSS: &str = include_str!("app.css");

/// The Content-Security-Policy of every dashboard response.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/// The session cookie.
pub const SESSION_COOKIE: &str = "palisade_session";
/// The login page's CSRF cookie.
pub const LOGIN_COOKIE: &str = "palisade_login";

/// The most event streams open at once (each also holds an admin connection).
pub const MAX_STREAMS: usize = 8;

/// How often the event stream sends a snapshot.
pub const SNAPSHOT_EVERY: Duration = Duration::from_millis(500);

/// The largest login or logout form read, in bytes.
const FORM_MAX: usize = 4096;

/// The body of an admin response: whole, or streamed (the event stream).
pub type Body = BoxBody<Bytes, Infallible>;

/// The dashboard: its aggregate of the summary stream, its sessions.
#[derive(Debug)]
pub struct Dashboard {
    /// What the aggregator task gathered.
    pub aggregate: Arc<Aggregate>,
    sessions: Sessions,
    streams: Arc<Semaphore>,
    shutdown: watch::Receiver<bool>,
    tune: TuneSource,
    /// One tuning analysis at a time.
    tuning: Arc<Semaphore>,
}

/// What the tuning panel analyses: the configuration file the proxy runs (read
/// again at each analysis, so that it sees the rules a reload put in force) and
/// the attack corpus (`[admin] tune_attacks`).
#[derive(Debug, Clone)]
pub struct TuneSource {
    /// The configuration file.
    pub config: std::path::PathBuf,
    /// The attack corpus, if configured.
    pub attacks: Option<std::path::PathBuf>,
}

/// Who a request is.
enum Auth {
    /// No valid credentials.
    Nobody,
    /// The bearer token.
    Bearer,
    /// A session cookie: the session and its id.
    Session(Session, String),
}

impl Dashboard {
    /// The dashboard, with its aggregator task subscribed to `shared`'s summaries
    /// until shutdown.
    pub fn start(
        shared: &Shared,
        shutdown: watch::Receiver<bool>,
        criterion: aggregate::ReadinessCriterion,
        tune: TuneSource,
    ) -> Arc<Dashboard> {
        let aggregate = Arc::new(Aggregate::new(criterion));
        let sub = shared.summaries.subscribe();
        let agg = aggregate.clone();
        let stop = shutdown.clone();
        tokio::spawn(async move { agg.run(sub, stop).await });
        Arc::new(Dashboard {
            aggregate,
            sessions: Sessions::default(),
            streams: Arc::new(Semaphore::new(MAX_STREAMS)),
            shutdown,
            tune,
            tuning: Arc::new(Semaphore::new(1)),
        })
    }

    /// True for the paths the dashboard answers.
    pub fn is_path(path: &str) -> bool {
        path == "/dashboard" || path.starts_with("/dashboard/")
    }

    /// True for the paths whose answer may take longer than `admin.timeout` (the
    /// tuning analysis, which loads the rules and replays requests): the admin
    /// listener keeps their connection open while they run.
    pub fn is_long(path: &str) -> bool {
        path == "/dashboard/api/tune"
    }

    /// Answers a dashboard request; the flag is true for an event stream (the
    /// connection then outlives `admin.timeout`).
    pub async fn handle(
        &self,
        shared: &Arc<Shared>,
        token: &AdminToken,
        req: Request<Incoming>,
    ) -> (Response<Body>, bool) {
        let mut streaming = false;
        let mut r = self.route(shared, token, req, &mut streaming).await;
        let h = r.headers_mut();
        h.insert("content-security-policy", HeaderValue::from_static(CSP));
        h.insert(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        );
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        // Not `no-referrer`: with it, browsers send `Origin: null` on the forms'
        // POSTs, and the same-origin check could not tell them from a sandboxed
        // cross-site frame.
        h.insert(
            header::REFERRER_POLICY,
            HeaderValue::from_static("same-origin"),
        );
        h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
        (r, streaming)
    }

    async fn route(
        &self,
        shared: &Arc<Shared>,
        token: &AdminToken,
        req: Request<Incoming>,
        streaming: &mut bool,
    ) -> Response<Body> {
        let path = req.uri().path().to_owned();
        let method = req.method().clone();
        let get = method == Method::GET || method == Method::HEAD;
        match path.as_str() {
            "/dashboard/app.js" if get => asset(APP_JS, "text/javascript; charset=utf-8"),
            "/dashboard/app.css" if get => asset(APP_CSS, "text/css; charset=utf-8"),
            "/dashboard/login" if method == Method::POST => self.login(token, req).await,
            "/dashboard/logout" if method == Method::POST => self.logout(token, req).await,
            "/dashboard" | "/dashboard/" if get => {
                if !token.is_set() {
                    return no_token();
                }
                match self.auth(token, &req) {
                    Auth::Nobody => self.login_page(StatusCode::UNAUTHORIZED, ""),
                    Auth::Bearer => page(INDEX_HTML.replace("{{csrf}}", "")),
                    Auth::Session(s, _) => page(INDEX_HTML.replace("{{csrf}}", &s.csrf)),
                }
            }
            "/dashboard/api/snapshot" | "/dashboard/events" if get => {
                if let Some(refused) = self.refuse_api(token, &req) {
                    return refused;
                }
                if path == "/dashboard/events" {
                    match self.events(shared) {
                        Some(r) => {
                            *streaming = true;
                            r
                        }
                        None => json(
                            StatusCode::SERVICE_UNAVAILABLE,
                            &serde_json::json!({"error": "too many event streams open"}),
                        ),
                    }
                } else {
                    let mut doc = self.snapshot(shared);
                    doc["recent"] = self
                        .aggregate
                        .recent_after(0)
                        .into_iter()
                        .map(|(_, v)| v)
                        .collect();
                    json(StatusCode::OK, &doc)
                }
            }
            "/dashboard/api/tune" if get => match self.refuse_api(token, &req) {
                Some(refused) => refused,
                None => self.tune().await,
            },
            "/dashboard"
            | "/dashboard/"
            | "/dashboard/app.js"
            | "/dashboard/app.css"
            | "/dashboard/api/snapshot"
            | "/dashboard/api/tune"
            | "/dashboard/events" => plain(StatusCode::METHOD_NOT_ALLOWED, "only GET\n"),
            "/dashboard/login" | "/dashboard/logout" => {
                plain(StatusCode::METHOD_NOT_ALLOWED, "only POST\n")
            }
            _ => plain(StatusCode::NOT_FOUND, "not found\n"),
        }
    }

    /// The refusal of an API request without credentials (403 without a token
    /// configured, 401 without the token or a session); `None`: go on.
    fn refuse_api<B>(&self, token: &AdminToken, req: &Request<B>) -> Option<Response<Body>> {
        if !token.is_set() {
            return Some(no_token());
        }
        matches!(self.auth(token, req), Auth::Nobody).then(|| {
            json(
                StatusCode::UNAUTHORIZED,
                &serde_json::json!({"error": "log in, or send Authorization: Bearer"}),
            )
        })
    }

    /// `palisade tune`'s analysis of the configured audit log, as JSON: the report
    /// and the command that writes the proven exclusions. 503 while another runs;
    /// 422 with the reason when it cannot be made (no audit log, records without
    /// the parts replay needs, rules that do not load).
    async fn tune(&self) -> Response<Body> {
        let Ok(permit) = self.tuning.clone().try_acquire_owned() else {
            return json(
                StatusCode::SERVICE_UNAVAILABLE,
                &serde_json::json!({"error": "an analysis is running; try again when it ends"}),
            );
        };
        let src = self.tune.clone();
        let done = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let opts = crate::tune::Options {
                attacks: src.attacks.clone(),
                ..Default::default()
            };
            crate::tune::analyse(&src.config, &opts).map(|r| (r, src))
        })
        .await;
        match done {
            Ok(Ok((report, src))) => match serde_json::to_value(&report) {
                Ok(mut doc) => {
                    let mut cmd = format!("palisade tune --config {}", shell_word(&src.config));
                    if let Some(a) = &src.attacks {
                        cmd += &format!(" --attacks {}", shell_word(a));
                    }
                    cmd += &format!(" --audit-log {} --write", shell_word(&report.audit_log));
                    doc["command"] = serde_json::json!(cmd);
                    json(StatusCode::OK, &doc)
                }
                Err(e) => json(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &serde_json::json!({"error": e.to_string()}),
                ),
            },
            Ok(Err(e)) => json(
                StatusCode::UNPROCESSABLE_ENTITY,
                &serde_json::json!({"error": e.to_string()}),
            ),
            Err(_) => json(
                StatusCode::INTERNAL_SERVER_ERROR,
                &serde_json::json!({"error": "the analysis failed"}),
            ),
        }
    }

    /// Who sent `req`.
    fn auth<B>(&self, token: &AdminToken, req: &Request<B>) -> Auth {
        if token.accepts(req.headers().get(header::AUTHORIZATION)) {
            return Auth::Bearer;
        }
        let Some(fp) = token.fingerprint() else {
            return Auth::Nobody;
        };
        match cookie(req, SESSION_COOKIE).and_then(|id| Some((self.sessions.get(&id, &fp)?, id))) {
            Some((s, id)) => Auth::Session(s, id),
            None => Auth::Nobody,
        }
    }

    /// The login page with a fresh CSRF cookie, and `message` (our own text).
    fn login_page(&self, status: StatusCode, message: &str) -> Response<Body> {
        let Some(csrf) = session::random_hex(32) else {
            return plain(StatusCode::INTERNAL_SERVER_ERROR, "no random bytes\n");
        };
        let mut r = page(
            LOGIN_HTML
                .replace("{{csrf}}", &csrf)
                .replace("{{message}}", message),
        );
        *r.status_mut() = status;
        set_cookie(&mut r, LOGIN_COOKIE, &csrf, 600);
        r
    }

    async fn login(&self, token: &AdminToken, req: Request<Incoming>) -> Response<Body> {
        if !token.is_set() {
            return no_token();
        }
        if !same_origin(&req) {
            return plain(StatusCode::FORBIDDEN, "cross-site request refused\n");
        }
        let login_cookie = cookie(&req, LOGIN_COOKIE);
        let form = match read_form(req).await {
            Ok(f) => f,
            Err(r) => return r,
        };
        let csrf = form_field(&form, "csrf").unwrap_or_default();
        match login_cookie {
            Some(c) if !csrf.is_empty() && ct_eq(&c, &csrf) => {}
            _ => {
                return self
                    .login_page(StatusCode::FORBIDDEN, "The login form expired: try again.");
            }
        }
        let given = form_field(&form, "token").unwrap_or_default();
        let Some(fp) = token
            .fingerprint()
            .filter(|_| token.accepts_secret(given.as_bytes()))
        else {
            // Slows down guessing; admin.connections bounds how many guess at once.
            tokio::time::sleep(Duration::from_millis(250)).await;
            return self.login_page(StatusCode::UNAUTHORIZED, "Wrong token.");
        };
        let Some((id, _)) = self.sessions.open(fp) else {
            return plain(StatusCode::INTERNAL_SERVER_ERROR, "no random bytes\n");
        };
        let mut r = redirect("/dashboard");
        set_cookie(&mut r, SESSION_COOKIE, &id, session::SESSION_TTL.as_secs());
        set_cookie(&mut r, LOGIN_COOKIE, "", 0);
        r
    }

    async fn logout(&self, token: &AdminToken, req: Request<Incoming>) -> Response<Body> {
        if !same_origin(&req) {
            return plain(StatusCode::FORBIDDEN, "cross-site request refused\n");
        }
        let Auth::Session(s, id) = self.auth(token, &req) else {
            return plain(StatusCode::FORBIDDEN, "no session\n");
        };
        let header_csrf = req
            .headers()
            .get("x-csrf-token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let given = match header_csrf {
            Some(c) => c,
            None => match read_form(req).await {
                Ok(f) => form_field(&f, "csrf").unwrap_or_default(),
                Err(r) => return r,
            },
        };
        if !s.csrf_matches(&given) {
            return plain(StatusCode::FORBIDDEN, "missing or wrong CSRF token\n");
        }
        self.sessions.close(&id);
        let mut r = redirect("/dashboard");
        set_cookie(&mut r, SESSION_COOKIE, "", 0);
        r
    }

    /// The counters, histograms and top tables, with the proxy's health.
    fn snapshot(&self, shared: &Shared) -> serde_json::Value {
        let mut doc = self.aggregate.snapshot();
        doc["health"] = health(shared);
        doc["readiness"] = readiness(&self.aggregate, shared);
        doc["rule_cost"] = rule_cost(shared);
        doc["shadow"] = shared.shadow.snapshot(shared.waf().shadow());
        doc
    }

    /// The event stream, or `None` when [`MAX_STREAMS`] are open.
    fn events(&self, shared: &Arc<Shared>) -> Option<Response<Body>> {
        let permit = self.streams.clone().try_acquire_owned().ok()?;
        let (tx, rx) = mpsc::channel::<Bytes>(16);
        let agg = self.aggregate.clone();
        let mut stop = self.shutdown.clone();
        let shared = shared.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let mut last = 0u64;
            let mut tick = tokio::time::interval(SNAPSHOT_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                let snapshot = tokio::select! {
                    _ = tick.tick() => true,
                    () = agg.new_recent.notified() => false,
                    () = crate::runtime::stopped(&mut stop) => return,
                };
                let mut out = Vec::new();
                for (seq, v) in agg.recent_after(last) {
                    last = seq;
                    out.push(sse("request", &v));
                }
                if snapshot {
                    let mut doc = agg.snapshot();
                    doc["health"] = health(&shared);
                    doc["readiness"] = readiness(&agg, &shared);
                    doc["rule_cost"] = rule_cost(&shared);
                    doc["shadow"] = shared.shadow.snapshot(shared.waf().shadow());
                    out.push(sse("snapshot", &doc));
                }
                for chunk in out {
                    match tokio::time::timeout(Duration::from_secs(30), tx.send(chunk)).await {
                        Ok(Ok(())) => {}
                        _ => return,
                    }
                }
            }
        });
        let mut r = Response::new(SseBody(rx).boxed());
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        Some(r)
    }
}

/// One server-sent event.
/// A path as one shell word: as it is when it holds only safe characters, else in
/// single quotes.
fn shell_word(p: &std::path::Path) -> String {
    let s = p.display().to_string();
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+,:@=".contains(&b))
    {
        s
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

fn sse(event: &str, data: &serde_json::Value) -> Bytes {
    // serde_json writes no line breaks outside strings, and escapes those inside.
    Bytes::from(format!("event: {event}\ndata: {data}\n\n"))
}

/// The event stream's body: the chunks its task sends.
struct SseBody(mpsc::Receiver<Bytes>);

impl http_body::Body for SseBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        self.0
            .poll_recv(cx)
            .map(|c| c.map(|b| Ok(http_body::Frame::data(b))))
    }
}

/// How many rules the dashboard's rule cost table lists.
const RULE_COST_ROWS: usize = 15;

/// The rules that took the most time in the sampled requests (`GET /top` lists
/// more).
fn rule_cost(shared: &Shared) -> serde_json::Value {
    serde_json::json!({
        "sample": shared.waf().rule_cost_sampler().rate(),
        "sampled_requests": shared.rule_costs.sampled(),
        "rules": shared.rule_costs.top(RULE_COST_ROWS),
    })
}

/// The readiness to block of the sites the rules in force run in DetectionOnly.
fn readiness(agg: &Aggregate, shared: &Shared) -> serde_json::Value {
    let sites = shared.waf().detection_only_sites();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    agg.readiness(&sites, now)
}

/// Upstream servers, the store, sync, the last reload and the rule set.
fn health(shared: &Shared) -> serde_json::Value {
    let upstreams: Vec<_> = shared
        .upstreams()
        .server_states()
        .into_iter()
        .map(|s| {
            serde_json::json!({
                "pool": &*s.pool,
                "server": &*s.server,
                "up": s.up,
                "in_flight": s.in_flight,
            })
        })
        .collect();
    let waf = shared.waf();
    serde_json::json!({
        "version": crate::admin::VERSION,
        "uptime_seconds": shared.started.elapsed().as_secs(),
        "connections_open": shared.metrics.connections_open.load(std::sync::atomic::Ordering::Relaxed),
        "rules": { "count": waf.rule_count(), "engine_mode": waf.engine_mode() },
        "upstreams": upstreams,
        "store": shared.store().map(|s| {
            let (size, used) = s.map_usage();
            serde_json::json!({ "stats": s.stats(), "map_used_bytes": used, "map_size_bytes": size })
        }),
        "sync": shared.sync().map(|s| s.stats()),
        "reload": shared.reloads.status(),
    })
}

/// True when a state-changing request comes from the dashboard's own origin:
/// `Sec-Fetch-Site`, when sent, must be `same-origin`, and `Origin`, when sent,
/// must be this listener's; a request with neither is refused.
fn same_origin<B>(req: &Request<B>) -> bool {
    let h = req.headers();
    let site = h.get("sec-fetch-site");
    if site.is_some_and(|s| s.as_bytes() != b"same-origin") {
        return false;
    }
    match h.get(header::ORIGIN) {
        Some(origin) => {
            let Some(host) = h.get(header::HOST).and_then(|v| v.to_str().ok()) else {
                return false;
            };
            origin.as_bytes() == format!("http://{host}").as_bytes()
        }
        None => site.is_some(),
    }
}

/// The value of cookie `name`.
fn cookie<B>(req: &Request<B>, name: &str) -> Option<String> {
    req.headers()
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|kv| {
            let (k, v) = kv.trim().split_once('=')?;
            (k == name).then(|| v.to_owned())
        })
}

/// Adds a `Set-Cookie` for `name` on `/dashboard` (HttpOnly, SameSite=Strict; the
/// admin listener has no TLS, so not Secure).
fn set_cookie(r: &mut Response<Body>, name: &str, value: &str, max_age: u64) {
    if let Ok(v) = HeaderValue::from_str(&format!(
        "{name}={value}; Path=/dashboard; Max-Age={max_age}; HttpOnly; SameSite=Strict"
    )) {
        r.headers_mut().append(header::SET_COOKIE, v);
    }
}

fn ct_eq(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// Reads an `application/x-www-form-urlencoded` body of at most [`FORM_MAX`] bytes.
async fn read_form(req: Request<Incoming>) -> Result<Vec<(String, String)>, Response<Body>> {
    let body = match Limited::new(req.into_body(), FORM_MAX).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return Err(plain(StatusCode::PAYLOAD_TOO_LARGE, "form too large\n")),
    };
    let text = String::from_utf8_lossy(&body);
    Ok(text
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (form_decode(k), form_decode(v))
        })
        .collect())
}

fn form_decode(s: &str) -> String {
    let s = s.replace('+', " ");
    percent_encoding::percent_decode_str(&s)
        .decode_utf8_lossy()
        .into_owned()
}

fn form_field(form: &[(String, String)], name: &str) -> Option<String> {
    form.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
}

fn full(body: impl Into<Bytes>) -> Body {
    Full::new(body.into()).boxed()
}

fn with_type(mut r: Response<Body>, ctype: &'static str) -> Response<Body> {
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(ctype));
    r
}

fn asset(body: &'static str, ctype: &'static str) -> Response<Body> {
    with_type(Response::new(full(body)), ctype)
}

fn page(html: String) -> Response<Body> {
    with_type(Response::new(full(html)), "text/html; charset=utf-8")
}

fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut r = with_type(Response::new(full(text)), "text/plain; charset=utf-8");
    *r.status_mut() = status;
    r
}

fn json(status: StatusCode, doc: &serde_json::Value) -> Response<Body> {
    let mut r = with_type(Response::new(full(format!("{doc}\n"))), "application/json");
    *r.status_mut() = status;
    r
}

fn redirect(to: &'static str) -> Response<Body> {
    let mut r = plain(StatusCode::SEE_OTHER, "");
    r.headers_mut()
        .insert(header::LOCATION, HeaderValue::from_static(to));
    r
}

fn no_token() -> Response<Body> {
    plain(
        StatusCode::FORBIDDEN,
        "the dashboard is off: no admin token is configured (set admin.token_file, or PALISADE_ADMIN_TOKEN in the environment)\n",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(headers: &[(&str, &str)]) -> Request<()> {
        let mut b = Request::builder().method("POST").uri("/dashboard/login");
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(()).unwrap()
    }

    #[test]
    fn origins() {
        let host = ("host", "127.0.0.1:9901");
        assert!(same_origin(&req(&[
            host,
            ("origin", "http://127.0.0.1:9901")
        ])));
        assert!(same_origin(&req(&[
            host,
            ("origin", "http://127.0.0.1:9901"),
            ("sec-fetch-site", "same-origin")
        ])));
        assert!(same_origin(&req(&[
            host,
            ("sec-fetch-site", "same-origin")
        ])));
        assert!(!same_origin(&req(&[
            host,
            ("origin", "http://evil.example")
        ])));
        assert!(!same_origin(&req(&[host, ("origin", "null")])));
        assert!(!same_origin(&req(&[
            host,
            ("origin", "http://127.0.0.1:9901"),
            ("sec-fetch-site", "cross-site")
        ])));
        assert!(!same_origin(&req(&[host])));
    }

    #[test]
    fn shell_words() {
        use std::path::Path;
        assert_eq!(
            shell_word(Path::new("/etc/palisade/p.toml")),
            "/etc/palisade/p.toml"
        );
        assert_eq!(shell_word(Path::new("/a b/c")), "'/a b/c'");
        assert_eq!(shell_word(Path::new("/it's")), "'/it'\\''s'");
        assert_eq!(shell_word(Path::new("/x;rm")), "'/x;rm'");
    }

    #[test]
    fn cookies_and_forms() {
        let r = req(&[("cookie", "a=1; palisade_session=abc ; b=2")]);
        assert_eq!(cookie(&r, SESSION_COOKIE).as_deref(), Some("abc"));
        assert_eq!(cookie(&r, "c"), None);
        assert_eq!(form_decode("a+b%3Dc"), "a b=c");
    }
}
