//! An albedo-compatible HTTP backend for testing Palisade.
//!
//! [albedo](https://github.com/coreruleset/albedo) is the backend that the OWASP Core Rule
//! Set's regression tests expect behind the WAF under test. This crate answers the same way:
//!
//! - any method on any path gets `200 OK` with an empty body;
//! - `POST /reflect` (and `POST /reflect/...`) reads a JSON specification
//!   `{"status": int, "headers": {name: value}, "body": "text", "encodedBody": "base64"}`
//!   and answers with that status, those headers and that body (`body` wins over
//!   `encodedBody` when both are non-empty, as in albedo);
//! - `/capabilities` describes the endpoints as JSON (`?quiet=true` lists paths only).
//!
//! On top of albedo it can record every request it receives (one JSON line per request, see
//! [`Record`]) so that a proxy's integration tests can prove that a blocked request never
//! reached the backend.
//!
//! The server is a library first ([`Albedo`]) so tests can run it in-process; the `albedo`
//! binary is a thin command-line wrapper around it.

mod record;
mod reflect;
mod server;
mod sniff;

pub use record::{Record, read_records};
pub use reflect::{ReflectError, ReflectSpec};
pub use server::{Albedo, MAX_REQUEST_BODY, Options};
pub use sniff::sniff_content_type;

use std::net::SocketAddr;
use std::path::PathBuf;

/// Everything that can go wrong when starting or running the backend, or when reading a
/// record file back.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The listening socket could not be bound.
    #[error("cannot bind {addr}: {source}")]
    Bind {
        /// The address that was asked for.
        addr: SocketAddr,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// The address the listener is bound to could not be read back.
    #[error("cannot read the listening address: {0}")]
    LocalAddr(std::io::Error),
    /// The record file could not be opened, written or read.
    #[error("record file {path}: {source}")]
    RecordIo {
        /// The record file.
        path: PathBuf,
        /// The operating system's reason.
        source: std::io::Error,
    },
    /// A line of the record file is not a valid [`Record`].
    #[error("record file {path}, line {line}: {source}")]
    RecordParse {
        /// The record file.
        path: PathBuf,
        /// The 1-based line number.
        line: usize,
        /// What is wrong with the line.
        source: serde_json::Error,
    },
}
