//! `/metrics` from the real binary, after requests passed, were refused and went
//! through a rate limit and a bandwidth class whose names need escaping, is valid
//! Prometheus text: `promtool check metrics` (Debian's `prometheus` package)
//! accepts it. It carries `palisade_build_info`, the standard `process_*` metrics,
//! the CPU time by mode (user, system) of the process, each worker and each kind of
//! thread, and the request summaries' counters.

mod common;

use common::*;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

const PROMTOOL: &str = "/usr/bin/promtool";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_exposition_passes_promtool() {
    if required(Path::new(PROMTOOL), "checking /metrics with promtool").is_none() {
        return;
    }
    let backend = Backend::start().await;
    let dir = TempDir::new("metrics-exposition");
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    let extra = format!(
        r#"
[[rate_limit]]
name = 'per "client" \ limit'
key = "client_ip"
rate = "1000/s"
burst = 1000

[[shape]]
name = 'class "a" \ b'
key = "client_ip"
rate = "10MB/s"
burst = "1MB"

[admin]
address = "{admin}"
"#
    );
    let config = basic_config(listen, backend.addr, &extra);
    let _p = Palisade::start(&dir, &config, listen);
    for path in ["/", "/a?x=1", "/missing"] {
        let r = get(listen, path, "").await;
        assert!(r.status > 0);
    }
    let text = send_raw(
        admin,
        b"GET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap()
    .text();
    let body = text.split_once("\r\n\r\n").map_or(&*text, |(_, b)| b);
    for series in [
        "palisade_build_info{version=\"",
        "process_cpu_seconds_total ",
        "process_resident_memory_bytes ",
        "process_open_fds ",
        "process_max_fds ",
        "process_start_time_seconds ",
        "process_virtual_memory_bytes ",
        "palisade_process_cpu_seconds_total{mode=\"system\"} ",
        "palisade_worker_cpu_seconds_total{worker=\"0\",mode=\"user\"} ",
        "palisade_worker_cpu_seconds_total{worker=\"0\",mode=\"system\"} ",
        "palisade_thread_cpu_seconds_total{thread=\"palisade-worker\",mode=\"user\"} ",
        "palisade_summaries_published_total ",
        "palisade_rate_limit_keys{limit=\"per \\\"client\\\" \\\\ limit\"}",
        "palisade_shaping_keys{class=\"class \\\"a\\\" \\\\ b\"}",
    ] {
        assert!(body.contains(series), "no {series} in {body}");
    }
    assert!(
        metric(admin, "palisade_summaries_published_total").await >= 3.0,
        "one summary per request"
    );
    let mut child = Command::new(PROMTOOL)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool runs");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // promtool's lint findings (naming advice) are reported with status 3;
    // status 1 is a text it cannot parse.
    assert!(
        out.status.success() || out.status.code() == Some(3),
        "promtool refused /metrics ({:?}): {said}\n{body}",
        out.status
    );
    assert!(!said.contains("error"), "promtool: {said}");
}
