//! Request body processors: URLENCODED, MULTIPART, JSON and XML.
//!
//! Each processor turns a buffered body into the values the rule variables expose
//! (ARGS_POST, FILES, MULTIPART_*, XML, ...). All of them are bounded by [`Limits`].

pub mod json;
pub mod multipart;
pub mod urlencoded;
pub mod xml;

/// The reproducible generator and mutator of the fuzz-style tests (shared with the
/// detectors crate).
#[cfg(test)]
pub(crate) use detect::testkit as fuzz;

/// Bounds that every body processor honours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most arguments a processor produces (`SecArgumentsLimit`); extra ones are
    /// dropped and the processor reports [`LimitHit::Arguments`]. The engine passes
    /// what is left of the transaction's budget (ARGS already holds the query string).
    pub max_args: usize,
    /// Deepest nesting of a JSON document (`SecRequestBodyJsonDepthLimit`).
    pub json_depth: usize,
    /// Most parts of a multipart body; one more is a fatal multipart error.
    pub multipart_parts: usize,
    /// Most file parts with content in a multipart body (`SecUploadFileLimit`);
    /// 0 means no limit. ModSecurity v3 applies its limit only when it stores
    /// uploaded files, so the default is 0; going over sets
    /// MULTIPART_FILE_LIMIT_EXCEEDED.
    pub max_files: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_args: 1000,
            json_depth: 10_000,
            multipart_parts: 1000,
            max_files: 0,
        }
    }
}

/// Which bound a body processor ran into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitHit {
    /// More arguments than [`Limits::max_args`].
    Arguments,
    /// Deeper JSON nesting than [`Limits::json_depth`].
    JsonDepth,
    /// More multipart parts than [`Limits::multipart_parts`].
    MultipartParts,
    /// More uploaded files than [`Limits::max_files`].
    Files,
}

/// A name/value pair produced by a body processor, in document order.
pub type Arg = (Vec<u8>, Vec<u8>);
