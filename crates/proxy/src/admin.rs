//! The admin listener: `GET /metrics` (Prometheus text) and `GET /status` (JSON).

use crate::config::AdminConfig;
use crate::exchange::Shared;
use crate::logs::LogKind;
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

/// Facts about the build, fixed at compile time.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// `git rev-parse HEAD` at build time, or `unknown`.
pub const GIT_REVISION: &str = env!("PALISADE_GIT_REVISION");
/// Cargo's build profile (`debug` or `release`).
pub const BUILD_PROFILE: &str = env!("PALISADE_BUILD_PROFILE");

/// Serves the admin API until shutdown begins. Each connection lives at most
/// `cfg.timeout` (a client that sends its head slowly, or keeps the connection
/// open, is cut off then), and at most `cfg.connections` are open at once.
pub async fn serve(
    listener: TcpListener,
    cfg: AdminConfig,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(cfg.connections.max(1)));
    loop {
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => return,
            },
            () = crate::server::stopped(&mut shutdown) => return,
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
            () = crate::server::stopped(&mut shutdown) => return,
        };
        let shared = shared.clone();
        let limit = cfg.timeout;
        tokio::spawn(async move {
            let _permit = permit;
            let svc = service_fn(move |req| {
                let shared = shared.clone();
                async move { Ok::<_, Infallible>(route(&shared, &req)) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limit)
                .keep_alive(false)
                .serve_connection(TokioIo::new(stream), svc);
            let _ = tokio::time::timeout(limit, conn).await;
        });
    }
}

fn route(shared: &Shared, req: &Request<Incoming>) -> Response<Full<Bytes>> {
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
        _ => text(
            StatusCode::NOT_FOUND,
            "not found: try /metrics or /status\n".into(),
            "text/plain",
        ),
    }
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
    let drops = shared.logs.drops();
    let dropped = [
        ("error", drops.get(LogKind::Error)),
        ("access", drops.get(LogKind::Access)),
        ("audit", drops.get(LogKind::Audit)),
    ];
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
    shared.metrics.render(&dropped, &extra)
}

/// The `/status` document.
pub fn status_json(shared: &Shared) -> String {
    let waf = shared.waf();
    let doc = serde_json::json!({
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
        },
        "connections_open": shared.metrics.connections_open.load(Ordering::Relaxed),
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
