//! CPU profiles on demand: `GET /debug/profile?seconds=N&format=svg|pprof` on the
//! admin listener samples every thread of the process for N seconds (`SIGPROF`
//! at [`FREQUENCY`] Hz, through the `pprof` crate) and answers a flame graph (SVG,
//! drawn by `inferno`) or a pprof profile (protobuf, for `go tool pprof` and
//! other pprof readers).
//!
//! Nothing samples while no profile runs: the timer and its signal handler are
//! set up when a profile starts and removed when it ends. One profile runs at a
//! time, process-wide (the profiler is process-global); a second request while
//! one runs is refused with [`ProfileError::Busy`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Samples per second of CPU time, per thread. A prime, so that sampling does not
/// fall in step with periodic work.
pub const FREQUENCY: i32 = 99;

/// The longest profile, in seconds.
pub const MAX_SECONDS: u64 = 300;

/// The profile's default length, in seconds.
pub const DEFAULT_SECONDS: u64 = 10;

/// Shared libraries whose frames are left out of the samples (the C library's
/// and the vDSO's frames have no unwind information the sampler can use).
const BLOCKLIST: [&str; 4] = ["libc", "libgcc", "pthread", "vdso"];

/// Whether a profile runs now.
static RUNNING: AtomicBool = AtomicBool::new(false);

/// The form of a profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// A flame graph, as SVG.
    Svg,
    /// A pprof profile (`perftools.profiles.Profile`, protobuf).
    Pprof,
}

impl Format {
    /// The format a `format=` query value names.
    pub fn parse(s: &str) -> Option<Format> {
        match s {
            "svg" | "flamegraph" => Some(Format::Svg),
            "pprof" | "proto" => Some(Format::Pprof),
            _ => None,
        }
    }

    /// The media type of the answer.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Svg => "image/svg+xml",
            Format::Pprof => "application/octet-stream",
        }
    }
}

/// What a profile request asks for: `seconds` and `format` from its query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProfileRequest {
    /// How long to sample.
    pub seconds: u64,
    /// The form of the answer.
    pub format: Format,
}

impl ProfileRequest {
    /// Reads `seconds=N` (1 to [`MAX_SECONDS`], default [`DEFAULT_SECONDS`]) and
    /// `format=svg|pprof` (default svg) from a query string.
    pub fn from_query(query: Option<&str>) -> Result<ProfileRequest, ProfileError> {
        let mut req = ProfileRequest {
            seconds: DEFAULT_SECONDS,
            format: Format::Svg,
        };
        for pair in query
            .unwrap_or_default()
            .split('&')
            .filter(|p| !p.is_empty())
        {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            match k {
                "seconds" => {
                    req.seconds = v
                        .parse()
                        .ok()
                        .filter(|s| (1..=MAX_SECONDS).contains(s))
                        .ok_or_else(|| {
                            ProfileError::BadRequest(format!(
                                "seconds={v}: expected 1 to {MAX_SECONDS}"
                            ))
                        })?;
                }
                "format" => {
                    req.format = Format::parse(v).ok_or_else(|| {
                        ProfileError::BadRequest(format!("format={v}: expected svg or pprof"))
                    })?;
                }
                _ => {
                    return Err(ProfileError::BadRequest(format!(
                        "{k}: unknown parameter (seconds, format)"
                    )));
                }
            }
        }
        Ok(req)
    }
}

/// Why a profile could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// The query asked for something this endpoint does not do.
    #[error("{0}")]
    BadRequest(String),
    /// Another profile runs now.
    #[error("a profile is already running; try again when it ends")]
    Busy,
    /// The sampler could not start, or its report could not be written.
    #[error("profiler: {0}")]
    Profiler(String),
}

/// Clears [`RUNNING`] when the profile ends, however it ends.
struct Running;

impl Running {
    fn claim() -> Result<Running, ProfileError> {
        RUNNING
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| Running)
            .map_err(|_| ProfileError::Busy)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        RUNNING.store(false, Ordering::Release);
    }
}

/// Whether a profile runs now (`/status`).
pub fn running() -> bool {
    RUNNING.load(Ordering::Acquire)
}

/// Samples the process for `req.seconds` and writes the profile in
/// `req.format`. Waits without holding a thread; the report is written on a
/// blocking thread.
pub async fn take(req: ProfileRequest) -> Result<Vec<u8>, ProfileError> {
    let running = Running::claim()?;
    let guard = pprof::ProfilerGuardBuilder::default()
        .frequency(FREQUENCY)
        .blocklist(&BLOCKLIST)
        .build()
        .map_err(|e| ProfileError::Profiler(e.to_string()))?;
    tokio::time::sleep(Duration::from_secs(req.seconds)).await;
    let out = tokio::task::spawn_blocking(move || {
        let report = guard
            .report()
            .build()
            .map_err(|e| ProfileError::Profiler(e.to_string()))?;
        // The sampler stops when its guard goes, before the report is written out.
        drop(guard);
        write(&report, req)
    })
    .await
    .map_err(|e| ProfileError::Profiler(format!("writing the report failed: {e}")))?;
    drop(running);
    out
}

/// Writes `report` in the requested format.
fn write(report: &pprof::Report, req: ProfileRequest) -> Result<Vec<u8>, ProfileError> {
    match req.format {
        Format::Svg if report.data.is_empty() => Ok(no_samples_svg(req.seconds).into_bytes()),
        Format::Svg => {
            let mut out = Vec::new();
            let mut options = pprof::flamegraph::Options::default();
            options.title = format!("palisade: CPU, {} s at {FREQUENCY} Hz", req.seconds);
            report
                .flamegraph_with_options(&mut out, &mut options)
                .map_err(|e| ProfileError::Profiler(e.to_string()))?;
            Ok(out)
        }
        Format::Pprof => {
            use pprof::protos::Message;
            let profile = report
                .pprof()
                .map_err(|e| ProfileError::Profiler(e.to_string()))?;
            Ok(profile.encode_to_vec())
        }
    }
}

/// The SVG answered when no thread used the CPU during the profile.
fn no_samples_svg(seconds: u64) -> String {
    format!(
        "<?xml version=\"1.0\" standalone=\"no\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"600\" height=\"40\"><text x=\"10\" y=\"25\">palisade: no CPU samples in {seconds} s (the process was idle)</text></svg>\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_parse_or_say_what_is_wrong() {
        assert_eq!(
            ProfileRequest::from_query(None).unwrap(),
            ProfileRequest {
                seconds: DEFAULT_SECONDS,
                format: Format::Svg
            }
        );
        assert_eq!(
            ProfileRequest::from_query(Some("seconds=3&format=pprof")).unwrap(),
            ProfileRequest {
                seconds: 3,
                format: Format::Pprof
            }
        );
        for (q, want) in [
            ("seconds=0", "seconds=0"),
            ("seconds=301", "seconds=301"),
            ("seconds=x", "seconds=x"),
            ("format=png", "format=png"),
            ("every=1", "every: unknown"),
        ] {
            let err = ProfileRequest::from_query(Some(q)).unwrap_err().to_string();
            assert!(err.contains(want), "{q}: {err}");
        }
    }

    #[test]
    fn one_profile_at_a_time() {
        let first = Running::claim().unwrap();
        assert!(running());
        assert!(matches!(Running::claim(), Err(ProfileError::Busy)));
        drop(first);
        assert!(!running());
        drop(Running::claim().unwrap());
    }
}
