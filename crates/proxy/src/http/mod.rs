//! HTTP as the proxy reads and writes it, below any request's policy: the HTTP/1
//! wire format ([`wire`]: request heads read from raw bytes, body framing), header
//! lines ([`headers`]), and the hop-by-hop header policy ([`hop`]).

pub mod headers;
pub mod hop;
pub mod wire;

pub use headers::{HeaderLines, valid_value};
pub use hop::strip_hop_by_hop;
