//! Domain allow/deny lists and URL categories for Palisade's filtering forward proxy.
//!
//! * [`normalize`]: every spelling of a host a client can send (Host header, URI
//!   authority, `CONNECT` authority, TLS SNI) to one canonical [`Host`], or an error to
//!   refuse.
//! * [`set`]: [`SuffixSet`], millions of domains where a name matches itself or any
//!   parent domain in the set.
//! * [`categories`]: [`Categories`], category lists loaded from files (with optional URL
//!   path prefixes) into one suffix set.
//!
//! ```
//! use domains::{EntryKind, SuffixSet, normalize_host, normalize_name};
//!
//! let mut deny = SuffixSet::new();
//! deny.insert(&normalize_name("bücher.example")?, EntryKind::Domain, 1)?;
//! deny.insert(&normalize_name("127.0.0.1")?, EntryKind::Exact, 2)?;
//!
//! // Every spelling a client can send finds the entry.
//! for host in ["WWW.xn--bcher-kva.example.:443", "b%C3%BCcher.example", "0x7f.1", "[::ffff:127.0.0.1]"] {
//!     assert!(deny.contains(&normalize_host(host)?), "{host}");
//! }
//! // A sibling that only shares the suffix string does not.
//! assert!(!deny.contains(&normalize_host("xbücher.example")?));
//! // What cannot be normalised is an error to refuse, not a name to let through.
//! assert!(normalize_host("a..b.example").is_err());
//! assert!(normalize_host("xn--a.example").is_err());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod categories;
pub mod normalize;
pub mod set;

pub use categories::{Categories, CategoryId, CategoryMatch, normalize_path};
pub use normalize::{
    Host, HostError, canonical_ip, normalize_authority, normalize_host, normalize_host_port,
    normalize_name,
};
pub use set::{
    Entry, EntryError, EntryKind, LoadError, MAX_VALUE, Match, SetError, SuffixSet, Value,
    parse_entry,
};
