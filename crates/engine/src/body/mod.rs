//! Request body processors: URLENCODED, MULTIPART, JSON and XML.
//!
//! Each processor turns a buffered body into the values the rule variables expose
//! (ARGS_POST, FILES, MULTIPART_*, XML, ...). All of them are bounded by [`Limits`].

pub mod json;
pub mod multipart;
pub mod urlencoded;
pub mod xml;

/// Bounds that every body processor honours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most arguments a processor produces (`SecArgumentsLimit`); extra ones are
    /// dropped and the processor reports [`LimitHit::Arguments`].
    pub max_args: usize,
    /// Deepest nesting of a JSON document (`SecRequestBodyJsonDepthLimit`).
    pub json_depth: usize,
    /// Most parts of a multipart body.
    pub multipart_parts: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_args: 1000, json_depth: 10_000, multipart_parts: 1000 }
    }
}

/// A name/value pair produced by a body processor, in document order.
pub type Arg = (Vec<u8>, Vec<u8>);
