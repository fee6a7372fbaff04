//! `multipart/form-data` bodies, with ModSecurity's strictness flags.

use super::{Arg, Limits};

/// One uploaded file (a part with a `filename`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FilePart {
    /// The form field name (FILES_NAMES).
    pub name: Vec<u8>,
    /// The file name the client sent (FILES).
    pub filename: Vec<u8>,
    /// The size of the part's content in bytes (FILES_SIZES).
    pub size: usize,
}

/// ModSecurity's multipart flags; each becomes a `MULTIPART_*` variable (1 or 0).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MultipartFlags {
    /// MULTIPART_BOUNDARY_QUOTED.
    pub boundary_quoted: bool,
    /// MULTIPART_BOUNDARY_WHITESPACE.
    pub boundary_whitespace: bool,
    /// MULTIPART_DATA_BEFORE.
    pub data_before: bool,
    /// MULTIPART_DATA_AFTER.
    pub data_after: bool,
    /// MULTIPART_HEADER_FOLDING.
    pub header_folding: bool,
    /// MULTIPART_LF_LINE.
    pub lf_line: bool,
    /// MULTIPART_CRLF_LF_LINES.
    pub crlf_lf_lines: bool,
    /// MULTIPART_MISSING_SEMICOLON.
    pub missing_semicolon: bool,
    /// MULTIPART_INVALID_QUOTING.
    pub invalid_quoting: bool,
    /// MULTIPART_INVALID_PART.
    pub invalid_part: bool,
    /// MULTIPART_INVALID_HEADER_FOLDING.
    pub invalid_header_folding: bool,
    /// MULTIPART_FILE_LIMIT_EXCEEDED.
    pub file_limit_exceeded: bool,
    /// MULTIPART_UNMATCHED_BOUNDARY.
    pub unmatched_boundary: bool,
}

impl MultipartFlags {
    /// MULTIPART_STRICT_ERROR: any of the flags above, or a parse error.
    pub fn strict_error(&self) -> bool {
        unimplemented!("multipart")
    }
}

/// Everything a multipart body yields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Multipart {
    /// Non-file fields (ARGS_POST).
    pub args: Vec<Arg>,
    /// File parts.
    pub files: Vec<FilePart>,
    /// Every header line of every part, keyed by the part's field name
    /// (MULTIPART_PART_HEADERS).
    pub part_headers: Vec<Arg>,
    /// The strictness flags.
    pub flags: MultipartFlags,
    /// A fatal parse error (REQBODY_ERROR / MULTIPART_... with REQBODY_ERROR_MSG).
    pub error: Option<String>,
}

/// Parses a multipart body; `content_type` is the request's Content-Type value,
/// which carries the boundary.
pub fn parse(body: &[u8], content_type: &[u8], limits: &Limits) -> Multipart {
    let _ = (body, content_type, limits);
    unimplemented!("multipart")
}
