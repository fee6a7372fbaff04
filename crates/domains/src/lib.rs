//! Domain allow/deny lists and URL categories for Palisade's filtering forward proxy.
//!
//! * [`normalize`]: every spelling of a host a client can send (Host header, URI
//!   authority, `CONNECT` authority, TLS SNI) to one canonical [`Host`], or an error to
//!   refuse.
//! * [`set`]: [`SuffixSet`], millions of domains where a name matches itself or any
//!   parent domain in the set.
//! * [`categories`]: [`Categories`], category lists loaded from files (with optional URL
//!   path prefixes) into one suffix set.

pub mod categories;
pub mod normalize;
pub mod set;

pub use categories::{Categories, CategoryId, CategoryMatch, normalize_path};
pub use normalize::{
    Host, HostError, normalize_authority, normalize_host, normalize_host_port, normalize_name,
};
pub use set::{
    Entry, EntryError, EntryKind, LoadError, MAX_VALUE, Match, SetError, SuffixSet, Value,
    parse_entry,
};
