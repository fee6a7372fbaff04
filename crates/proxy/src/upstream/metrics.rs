//! The upstream servers' metrics: whether each is in service and its requests in
//! flight.

use super::Upstreams;
use crate::metrics::{Collector, Exposition, escape_label};
use std::fmt::Write as _;

/// The state of one upstream server, for `/metrics`.
#[derive(Debug, Clone)]
pub struct UpstreamServerState {
    /// Its pool.
    pub pool: std::sync::Arc<str>,
    /// Its address as written in the configuration.
    pub server: std::sync::Arc<str>,
    /// In service (neither taken out by failures nor by the health checks).
    pub up: bool,
    /// Requests sent to it whose response is not over.
    pub in_flight: usize,
}

/// The state of every upstream server: `palisade_upstream_server_up` and
/// `palisade_upstream_server_in_flight`, labelled by pool and server.
impl Collector for Upstreams {
    fn collect(&self, out: &mut Exposition) {
        write(out.text_mut(), &self.server_states());
    }
}

fn write(out: &mut String, servers: &[UpstreamServerState]) {
    let esc = escape_label;
    type Value = fn(&UpstreamServerState) -> usize;
    let series: [(&str, &str, Value); 2] = [
        (
            "palisade_upstream_server_up",
            "1 when the upstream server is in service, 0 when failures or health checks took it out.",
            |s| usize::from(s.up),
        ),
        (
            "palisade_upstream_server_in_flight",
            "Requests sent to the upstream server whose response is not over.",
            |s| s.in_flight,
        ),
    ];
    for (name, help, value) in series {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} gauge");
        for s in servers {
            let _ = writeln!(
                out,
                "{name}{{pool=\"{}\",server=\"{}\"}} {}",
                esc(&s.pool),
                esc(&s.server),
                value(s)
            );
        }
    }
}
