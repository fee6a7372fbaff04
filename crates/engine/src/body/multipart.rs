//! `multipart/form-data` bodies, with ModSecurity's strictness flags.
//!
//! This follows libmodsecurity v3's multipart parser closely, because CRS and the
//! `MULTIPART_*` rules depend on exactly when it sets each flag:
//!
//! - The boundary comes from the Content-Type: `multipart/form-data`, then only
//!   whitespace and at most one `;` before the (case-sensitive) word `boundary`.
//!   No `;` sets MULTIPART_MISSING_SEMICOLON; whitespace around `=` sets
//!   MULTIPART_BOUNDARY_WHITESPACE; a quoted value sets MULTIPART_BOUNDARY_QUOTED.
//!   Anything else malformed is a fatal error with v3's message.
//! - The body is read line by line in pieces of at most 4096 bytes. A piece that starts
//!   a line and begins with `--boundary` must be followed by nothing, `--`, and CRLF
//!   or LF, else it is a fatal error; a line that begins with `--` but not with the
//!   boundary, or that holds `--boundary` further in, sets
//!   MULTIPART_UNMATCHED_BOUNDARY to 1, and each boundary after the first sets it to 2
//!   (v3's recommended rule tests `@eq 1`).
//! - Lines before the first boundary set MULTIPART_DATA_BEFORE; bytes after the final
//!   boundary set MULTIPART_DATA_AFTER. A header line or boundary ended by a bare LF
//!   sets MULTIPART_LF_LINE (and a boundary right after a bare-LF line does too); with
//!   CRLF lines as well, MULTIPART_CRLF_LF_LINES.
//! - Part headers: a line starting with whitespace continues the previous header
//!   (MULTIPART_HEADER_FOLDING; other than space or tab, also
//!   MULTIPART_INVALID_HEADER_FOLDING). Header names must be bytes 33 to 126. Header
//!   errors and Content-Disposition errors do not stop the parser, as in v3: they
//!   record the error (REQBODY_ERROR) and the part stays in its header section, so
//!   following lines are read as headers too.
//! - Content-Disposition must be `form-data` with `name=` and optionally `filename=`
//!   and `filename*=` parameters, quoted or as tokens; single quotes set
//!   MULTIPART_INVALID_QUOTING. A part ending without a name is dropped and sets
//!   MULTIPART_INVALID_PART, as does a boundary where part data should begin.
//! - A part with a non-empty filename is a file; otherwise it is an argument whose
//!   value is the part content without the line break before the next boundary.
//!
//! Where this parser knowingly differs from v3:
//! - Argument values keep their inner line breaks (v3 drops each line break inside a
//!   non-file part's value, a bug).
//! - Part header lines never keep a trailing CR (as ModSecurity 3.0.9 did).
//! - When the body ends without its final boundary, or a fatal error stops the
//!   parser, the parts completed so far are still reported here, with
//!   [`Multipart::completed`] false; the engine then drops them, as v3 reports none
//!   (except after a part limit, Palisade's own, where the parts within it stay).
//! - An empty boundary is an error (v3 silently skips such a body), an unterminated
//!   quoted Content-Disposition value is refused, and a folded header stops growing
//!   once it is over the line limit.
//! - [`Limits::multipart_parts`] bounds the number of parts (a fatal error past it)
//!   and [`Limits::max_args`] the number of arguments (extra ones are dropped).
//!
//! Every step looks at each byte a bounded number of times, so the time is linear in
//! the body, and the output is bounded by the body and the limits.

use std::collections::HashMap;
use std::ops::Range;

use memchr::memmem;

use super::{Arg, LimitHit, Limits};

/// v3's line buffer size: the longest piece of a line it reads at once, and the
/// longest part header line it accepts.
const BUF: usize = 4096;

/// Headers a part may have before lookups go through a hash map.
const INDEX_AFTER: usize = 16;

/// Bytes of MULTIPART_PART_HEADERS output allowed beyond 16 per body byte. Each
/// header line is stored with its part's name, so many short header lines under a long
/// name could otherwise turn a small body into a very large list.
const HEADER_BUDGET_BASE: usize = 4 << 20;

/// One uploaded file (a part with a `filename`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FilePart {
    /// The form field name (FILES_NAMES).
    pub name: Vec<u8>,
    /// The file name the client sent (FILES).
    pub filename: Vec<u8>,
    /// The size of the part's content in bytes (FILES_SIZES).
    pub size: usize,
    /// Where the file's content lies in the body (`body[content]`, FILES_TMP_CONTENT).
    pub content: Range<usize>,
    /// The part's Content-Type header value, if it had one.
    pub content_type: Option<Vec<u8>>,
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
    /// MULTIPART_DUPLICATE_PART_HEADER (Palisade's own): a part repeated one of the
    /// headers that decide how it is read (Content-Disposition, Content-Type,
    /// Content-Transfer-Encoding), so that a parser keeping the first and one keeping
    /// the last would read it differently. Also a parse error.
    pub duplicate_part_header: bool,
    /// MULTIPART_UNMATCHED_BOUNDARY: true when ModSecurity v3 would give it the value
    /// 1 (see [`Multipart::unmatched_boundary_value`] for its full value).
    pub unmatched_boundary: bool,
    /// A parse error was met ([`Multipart::error`] is set; REQBODY_ERROR).
    pub error: bool,
}

impl MultipartFlags {
    /// MULTIPART_STRICT_ERROR: any of the flags above, or a parse error.
    ///
    /// As in ModSecurity, MULTIPART_UNMATCHED_BOUNDARY is not part of it, and
    /// MULTIPART_CRLF_LF_LINES is covered by MULTIPART_LF_LINE.
    pub fn strict_error(&self) -> bool {
        self.error
            || self.boundary_quoted
            || self.boundary_whitespace
            || self.data_before
            || self.data_after
            || self.header_folding
            || self.lf_line
            || self.missing_semicolon
            || self.invalid_quoting
            || self.invalid_part
            || self.invalid_header_folding
            || self.file_limit_exceeded
            || self.duplicate_part_header
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
    ///
    /// Holds ModSecurity's message (`Multipart: ...`); REQBODY_ERROR_MSG is
    /// `Multipart parsing error: ` followed by it (see [`Multipart::reqbody_error_msg`]).
    /// When several errors occur, the last one is kept, as in ModSecurity.
    pub error: Option<String>,
    /// Every `name` parameter of every Content-Disposition, valid part or not
    /// (MULTIPART_NAME).
    pub names: Vec<Vec<u8>>,
    /// Every `filename` parameter of every Content-Disposition (MULTIPART_FILENAME).
    pub filenames: Vec<Vec<u8>>,
    /// MULTIPART_UNMATCHED_BOUNDARY as ModSecurity v3 sets it: 0, 1 for a line that
    /// looks like a boundary but is not ours, 2 once a later boundary matched. The
    /// last one set wins.
    pub unmatched_boundary_value: u8,
    /// The boundary taken from the Content-Type (empty if there was none).
    pub boundary: Vec<u8>,
    /// Which limit cut the body short, if one did.
    pub limit_hit: Option<LimitHit>,
    /// Bytes of the body that are not file content: every part header line and the
    /// content of every non-file part, as ModSecurity counts them for
    /// `SecRequestBodyNoFilesLimit`.
    pub no_files_bytes: usize,
    /// Whether the parse reached the final boundary. ModSecurity v3 adds the parts to
    /// ARGS and FILES only then: an error in a part's headers does not stop the parse
    /// (REQBODY_ERROR is set, the parts are kept), a missing final boundary or a fatal
    /// error does (no part is kept).
    pub completed: bool,
}

impl Multipart {
    /// REQBODY_ERROR_MSG for this body, if it had an error.
    pub fn reqbody_error_msg(&self) -> Option<String> {
        self.error
            .as_ref()
            .map(|e| format!("Multipart parsing error: {e}"))
    }

    /// MULTIPART_STRICT_ERROR (the flags' [`MultipartFlags::strict_error`]).
    pub fn strict_error(&self) -> bool {
        self.flags.strict_error()
    }
}

/// Parses a multipart body; `content_type` is the request's Content-Type value,
/// which carries the boundary.
pub fn parse(body: &[u8], content_type: &[u8], limits: &Limits) -> Multipart {
    let mut out = Multipart::default();
    match read_boundary(content_type, &mut out.flags) {
        Ok(boundary) => {
            out.boundary = boundary;
            // An empty body is no error (ModSecurity v3 reports a missing final
            // boundary only once it has seen data).
            if !body.is_empty() {
                let crlf_line = Parser::new(body, limits, &mut out).run();
                out.flags.crlf_lf_lines = out.flags.lf_line && crlf_line;
            }
        }
        Err(msg) => out.error = Some(msg.to_owned()),
    }
    out.flags.unmatched_boundary = out.unmatched_boundary_value == 1;
    out.flags.error = out.error.is_some();
    out
}

/// C's `isspace` in the C locale.
fn is_c_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// How many times `boundary` followed (anywhere later) by `=` occurs, ignoring case.
fn count_boundary_params(s: &[u8]) -> usize {
    let lower = s.to_ascii_lowercase();
    let Some(last_eq) = memchr::memrchr(b'=', &lower) else {
        return 0;
    };
    let mut count = 0;
    let mut from = 0;
    while let Some(at) = memmem::find(&lower[from..], b"boundary") {
        let end = from + at + 8;
        if last_eq >= end {
            count += 1;
        }
        from = end;
    }
    count
}

/// The boundary characters RFC 2046 allows (a space, but not as the last one).
fn boundary_chars_valid(b: &[u8]) -> bool {
    b.iter().enumerate().all(|(i, &c)| {
        c.is_ascii_alphanumeric()
            || (c == b' ' && i + 1 < b.len())
            || matches!(
                c,
                b'\'' | b'(' | b')' | b'+' | b'_' | b',' | b'-' | b'.' | b'/' | b':' | b'=' | b'?'
            )
    })
}

/// Takes the boundary out of the Content-Type value as v3's multipart init does.
fn read_boundary(ct: &[u8], flags: &mut MultipartFlags) -> Result<Vec<u8>, &'static str> {
    if ct.is_empty() {
        return Err("Multipart: Content-Type header not available.");
    }
    if ct.len() > 1024 {
        return Err("Multipart: Invalid boundary in C-T (length).");
    }
    if ct.len() < 19 || !ct[..19].eq_ignore_ascii_case(b"multipart/form-data") {
        return Err("Multipart: Invalid MIME type.");
    }
    if count_boundary_params(ct) > 1 {
        return Err("Multipart: Multiple boundary parameters in C-T.");
    }
    let Some(at) = memmem::find(&ct[19..], b"boundary").map(|i| i + 19) else {
        return Err(if count_boundary_params(ct) > 0 {
            "Multipart: Invalid boundary in C-T (case sensitivity)."
        } else {
            "Multipart: Boundary not found in C-T."
        });
    };
    let mut seen_semicolon = false;
    for &c in &ct[19..at] {
        if is_c_space(c) {
            continue;
        }
        if c == b';' && !seen_semicolon {
            seen_semicolon = true;
        } else {
            return Err("Multipart: Invalid boundary in C-T (malformed).");
        }
    }
    if !seen_semicolon {
        flags.missing_semicolon = true;
    }
    let Some(eq) = memchr::memchr(b'=', &ct[at + 8..]).map(|i| i + at + 8) else {
        return Err("Multipart: Invalid boundary in C-T (malformed).");
    };
    for &c in &ct[at + 8..eq] {
        if is_c_space(c) {
            flags.boundary_whitespace = true;
        } else {
            return Err("Multipart: Invalid boundary in C-T (parameter name).");
        }
    }
    let value = &ct[eq + 1..];
    if value.first().is_some_and(|&c| is_c_space(c)) {
        flags.boundary_whitespace = true;
    }
    let mut boundary = if value.len() >= 2 && value[0] == b'"' && value[value.len() - 1] == b'"' {
        let inner = &value[1..value.len() - 1];
        if inner.is_empty() {
            return Err("Multipart: Invalid boundary in C-T (empty).");
        }
        flags.boundary_quoted = true;
        inner.to_vec()
    } else {
        if value.first() == Some(&b'"') || (value.len() >= 2 && value[value.len() - 1] == b'"') {
            return Err("Multipart: Invalid boundary in C-T (quote).");
        }
        if value.is_empty() {
            return Err("Multipart: Invalid boundary in C-T (empty).");
        }
        value.to_vec()
    };
    if count_boundary_params(&boundary) != 0 {
        return Err("Multipart: Invalid boundary in C-T (content).");
    }
    // Some frameworks add `; charset=...` after the boundary; v3 tolerates that.
    if !boundary_chars_valid(&boundary)
        && let Some(semi) = memchr::memchr(b';', &boundary)
    {
        boundary.truncate(semi);
    }
    if !boundary_chars_valid(&boundary) {
        return Err("Multipart: Invalid boundary in C-T (characters).");
    }
    if boundary.is_empty() {
        return Err("Multipart: Invalid boundary in C-T (empty).");
    }
    Ok(boundary)
}

/// The headers that decide how a part is read: as a field or a file, under which
/// name, in which charset and transfer encoding. A part that repeats one of them, or
/// folds its Content-Disposition, can be read more than one way.
const DECIDING_HEADERS: [&[u8]; 3] = [
    b"Content-Disposition",
    b"Content-Type",
    b"Content-Transfer-Encoding",
];

fn is_deciding_header(name: &[u8]) -> bool {
    DECIDING_HEADERS
        .iter()
        .any(|h| h.eq_ignore_ascii_case(name))
}

/// One part header as sent.
struct Header {
    name: Vec<u8>,
    value: Vec<u8>,
    /// The value's length before its first folded continuation, if it was folded: a
    /// parser that does not unfold reads only `value[..len]`.
    unfolded_len: Option<usize>,
}

/// Another reading of a part's Content-Disposition (a repeated or folded one), kept
/// so that the part's content is inspected the way each reading presents it.
#[derive(Clone, PartialEq, Eq)]
struct Reading {
    name: Vec<u8>,
    filename: Vec<u8>,
}

/// The part being read.
#[derive(Default)]
struct Part {
    name: Vec<u8>,
    filename: Vec<u8>,
    /// The `filename*` parameter, percent-decoded, when it names another file than
    /// `filename` (RFC 6266 lets it take precedence).
    filename_star: Vec<u8>,
    is_file: bool,
    /// Header names and values in the order sent, repeated ones included (lookups
    /// find the first; names compare without case).
    headers: Vec<Header>,
    /// Lower-cased header names to the index in `headers` of their first occurrence,
    /// built once a part has many headers so that duplicate checks stay linear
    /// overall.
    index: Option<HashMap<Vec<u8>, usize>>,
    /// Completed header lines (MULTIPART_PART_HEADERS), without line ends.
    header_lines: Vec<Vec<u8>>,
    /// The header line being built (it may still be folded).
    last_line: Vec<u8>,
    /// Index in `headers` of the header a folded line continues.
    last_header: Option<usize>,
    /// Readings of the part other than the first Content-Disposition's.
    readings: Vec<Reading>,
    /// Reading data (true) or headers (false).
    in_data: bool,
    /// Where the content starts and ends in the body.
    data: Option<Range<usize>>,
}

impl Part {
    fn header(&self, name: &[u8]) -> Option<&Vec<u8>> {
        let at = match &self.index {
            Some(index) => index.get(&name.to_ascii_lowercase()).copied(),
            None => self
                .headers
                .iter()
                .position(|h| h.name.eq_ignore_ascii_case(name)),
        };
        at.map(|i| &self.headers[i].value)
    }

    fn add_header(&mut self, name: &[u8], value: Vec<u8>) {
        let at = self.headers.len();
        self.headers.push(Header {
            name: name.to_vec(),
            value,
            unfolded_len: None,
        });
        if let Some(index) = &mut self.index {
            index.entry(name.to_ascii_lowercase()).or_insert(at);
        } else if self.headers.len() >= INDEX_AFTER {
            let mut index = HashMap::new();
            for (i, h) in self.headers.iter().enumerate() {
                index.entry(h.name.to_ascii_lowercase()).or_insert(i);
            }
            self.index = Some(index);
        }
        self.last_header = Some(at);
    }

    /// Every value a parser could take for the part's Content-Disposition other than
    /// the first header's unfolded value: repeated headers (true), and the first line
    /// alone of a folded one (false).
    fn other_dispositions(&self) -> Vec<(Vec<u8>, bool)> {
        let mut out = Vec::new();
        let mut first = true;
        for h in &self.headers {
            if !h.name.eq_ignore_ascii_case(b"Content-Disposition") {
                continue;
            }
            if !first {
                out.push((h.value.clone(), true));
            }
            first = false;
            if let Some(len) = h.unfolded_len {
                out.push((h.value[..len].to_vec(), false));
            }
        }
        out
    }

    fn finish_line(&mut self) {
        if !self.last_line.is_empty() {
            self.header_lines.push(std::mem::take(&mut self.last_line));
        }
    }
}

struct Parser<'a, 'o> {
    body: &'a [u8],
    limits: &'a Limits,
    out: &'o mut Multipart,
    /// `--` followed by the boundary.
    delimiter: Vec<u8>,
    finder: memmem::Finder<'static>,
    part: Option<Part>,
    /// Whether data was read since the current part's headers ended (or it began).
    data_read: bool,
    boundaries: usize,
    complete: bool,
    fatal: bool,
    /// Whether a header line or boundary ended with CRLF.
    crlf_line: bool,
    parts: usize,
    files_with_data: usize,
    header_bytes: usize,
    header_budget: usize,
}

impl<'a, 'o> Parser<'a, 'o> {
    fn new(body: &'a [u8], limits: &'a Limits, out: &'o mut Multipart) -> Self {
        let mut delimiter = b"--".to_vec();
        delimiter.extend_from_slice(&out.boundary);
        let finder = memmem::Finder::new(&delimiter).into_owned();
        Parser {
            body,
            limits,
            out,
            delimiter,
            finder,
            part: None,
            data_read: false,
            boundaries: 0,
            complete: false,
            fatal: false,
            crlf_line: false,
            parts: 0,
            files_with_data: 0,
            header_bytes: 0,
            header_budget: HEADER_BUDGET_BASE.saturating_add(body.len().saturating_mul(16)),
        }
    }

    fn error(&mut self, msg: impl Into<String>) {
        self.out.error = Some(msg.into());
    }

    fn fatal(&mut self, msg: impl Into<String>) {
        self.error(msg);
        self.fatal = true;
    }

    /// Parses the whole body; returns whether a CRLF-ended line was seen.
    fn run(mut self) -> bool {
        self.lines();
        self.out.completed = self.complete;
        self.crlf_line
    }

    fn lines(&mut self) {
        let body = self.body;
        if body.is_empty() {
            return;
        }
        let mut pos = 0;
        let mut starts_line = true;
        // Whether the last piece ended with a bare LF (v3's CRLF state 2).
        let mut bare_lf_before = false;
        while pos < body.len() {
            let window = &body[pos..body.len().min(pos + BUF)];
            let (end, full) = match memchr::memchr(b'\n', window) {
                Some(i) => (pos + i + 1, i + 1 == BUF),
                None if window.len() < BUF => break, // an unterminated last line
                // v3 never lets a CR be the last byte of a full buffer.
                None if window[BUF - 1] == b'\r' => (pos + BUF - 1, true),
                None => (pos + BUF, true),
            };
            self.piece(pos, end, full, starts_line, bare_lf_before);
            if self.fatal {
                return;
            }
            let ends_line = body[end - 1] == b'\n';
            bare_lf_before = ends_line && !(end >= 2 && body[end - 2] == b'\r');
            starts_line = ends_line;
            pos = end;
            if self.complete {
                if pos < body.len() {
                    self.out.flags.data_after = true;
                }
                return;
            }
        }
        // The body ended without a line end; only the final boundary may be left over.
        if self.boundaries == 0 {
            self.error("Multipart: No boundaries found in payload.");
            return;
        }
        let tail = &body[pos..];
        if starts_line
            && tail.len() == self.delimiter.len() + 2
            && tail.starts_with(&self.delimiter)
            && tail.ends_with(b"--")
        {
            if bare_lf_before {
                self.out.flags.lf_line = true;
            }
            if !self.data_read {
                self.out.flags.invalid_part = true;
            }
            self.boundary(true);
            self.complete = true;
        } else {
            self.error("Multipart: Final boundary missing.");
        }
    }

    /// Handles one piece of a line, `body[start..end]`.
    fn piece(
        &mut self,
        start: usize,
        end: usize,
        full: bool,
        starts_line: bool,
        bare_lf_before: bool,
    ) {
        let body = self.body;
        let chunk = &body[start..end];
        let blen = self.out.boundary.len();
        let mut was_boundary = false;
        // v3 works on C strings: a NUL byte ends the text it compares.
        let text = if starts_line && chunk.starts_with(b"--") {
            &chunk[..memchr::memchr(0, chunk).unwrap_or(chunk.len())]
        } else {
            &[]
        };
        if text.len() > 3 {
            if text.len() >= blen + 2 && text.starts_with(&self.delimiter) {
                if bare_lf_before {
                    self.out.flags.lf_line = true;
                }
                if !self.data_read && self.boundaries > 0 {
                    // Our boundary where part data should begin.
                    self.out.flags.invalid_part = true;
                } else {
                    if self.boundaries > 0 {
                        self.out.unmatched_boundary_value = 2;
                    }
                    let mut rest = &chunk[blen + 2..];
                    let last = rest.starts_with(b"--");
                    if last {
                        rest = &rest[2..];
                    }
                    match rest {
                        b"\n" => self.out.flags.lf_line = true,
                        b"\r\n" => self.crlf_line = true,
                        _ => {
                            let line = String::from_utf8_lossy(trim_line_end(chunk)).into_owned();
                            return self.fatal(format!("Multipart: Invalid boundary: {line}"));
                        }
                    }
                    self.boundary(last);
                    if self.fatal {
                        return;
                    }
                    self.complete = last;
                    self.boundaries += 1;
                    was_boundary = true;
                }
            } else {
                let b = &self.out.boundary;
                if self.out.flags.boundary_quoted
                    && text.len() >= blen + 3
                    && text[2] == b'"'
                    && text[3..].starts_with(b)
                {
                    return self.fatal("Multipart: Invalid boundary (quotes).");
                }
                let spaces = text[2..].iter().take_while(|&&c| is_c_space(c)).count();
                if spaces > 0 && text[2 + spaces..].starts_with(b) {
                    return self.fatal("Multipart: Invalid boundary (whitespace).");
                }
                self.out.unmatched_boundary_value = 1;
            }
        } else if starts_line && self.finder.find(chunk).is_some() {
            self.out.unmatched_boundary_value = 1;
        }
        if was_boundary {
            return;
        }
        match self.part.as_ref().map(|p| p.in_data) {
            None => self.out.flags.data_before = true,
            Some(false) if full => {
                self.fatal(format!("Multipart: Part header line over {BUF} bytes long"));
            }
            Some(false) => self.header_line(chunk),
            Some(true) => self.data(start, end),
        }
    }

    /// Closes the current part, and starts a new one unless this was the final boundary.
    fn boundary(&mut self, last: bool) {
        if let Some(mut part) = self.part.take() {
            part.last_header = None;
            for line in part.header_lines.drain(..) {
                self.header_bytes = self
                    .header_bytes
                    .saturating_add(part.name.len() + line.len());
                if self.header_bytes > self.header_budget {
                    self.out.limit_hit = Some(LimitHit::MultipartParts);
                    return self.fatal("Multipart: Too much part header data.");
                }
                self.out.part_headers.push((part.name.clone(), line));
            }
            if part.name.is_empty() {
                self.out.flags.invalid_part = true;
            } else {
                self.emit(part);
            }
        }
        if !last {
            self.parts += 1;
            if self.parts > self.limits.multipart_parts {
                self.out.limit_hit = Some(LimitHit::MultipartParts);
                return self.fatal(format!(
                    "Multipart: Too many parts (limit {}).",
                    self.limits.multipart_parts
                ));
            }
            self.part = Some(Part::default());
            self.data_read = false;
        }
    }

    /// Adds a completed part to ARGS or FILES: as its first Content-Disposition reads
    /// it, and also as every other reading does (a repeated or folded
    /// Content-Disposition, a `filename*` naming another file), so that content some
    /// parser takes for a field is inspected as one.
    fn emit(&mut self, part: Part) {
        let content = part.data.clone().unwrap_or(0..0);
        let content_type = part.header(b"Content-Type").cloned();
        let mut readings = vec![Reading {
            name: part.name,
            filename: if part.is_file {
                part.filename
            } else {
                Vec::new()
            },
        }];
        if !part.filename_star.is_empty() {
            readings.push(Reading {
                name: readings[0].name.clone(),
                filename: part.filename_star,
            });
        }
        for r in part.readings {
            if !readings.contains(&r) {
                readings.push(r);
            }
        }
        for (i, r) in readings.into_iter().enumerate() {
            // Extra readings count against the part limit as parts do, and a file
            // reading with content against the file limit as a file does (the first
            // reading's was counted when its content began).
            if self.out.args.len() + self.out.files.len() >= self.limits.multipart_parts {
                self.out.limit_hit = Some(LimitHit::MultipartParts);
                let msg = format!(
                    "Multipart: Too many parts (limit {}).",
                    self.limits.multipart_parts
                );
                return self.error(msg);
            }
            if r.filename.is_empty() {
                self.out.no_files_bytes = self.out.no_files_bytes.saturating_add(content.len());
                if self.out.args.len() < self.limits.max_args {
                    self.out
                        .args
                        .push((r.name, self.body[content.clone()].to_vec()));
                } else {
                    self.out.limit_hit = Some(LimitHit::Arguments);
                }
            } else {
                if i > 0 && !content.is_empty() {
                    self.count_file_with_data();
                }
                self.out.files.push(FilePart {
                    name: r.name,
                    filename: r.filename,
                    size: content.len(),
                    content: content.clone(),
                    content_type: content_type.clone(),
                });
            }
        }
    }

    /// A line of part content, `body[start..end]`. The line end is held back: it
    /// belongs to the content only if more content follows.
    fn data(&mut self, start: usize, end: usize) {
        self.data_read = true;
        let body = self.body;
        let held = if body[end - 1] != b'\n' {
            0
        } else if end - start >= 2 && body[end - 2] == b'\r' {
            2
        } else {
            1
        };
        let Some(part) = self.part.as_mut() else {
            return;
        };
        let first = part.data.is_none();
        let from = part.data.as_ref().map_or(start, |d| d.start);
        part.data = Some(from..end - held);
        if first && part.is_file {
            self.count_file_with_data();
        }
    }

    /// Counts a file that has content against `SecUploadFileLimit`; past it, sets
    /// MULTIPART_FILE_LIMIT_EXCEEDED and the error (once).
    fn count_file_with_data(&mut self) {
        if self.limits.max_files == 0 {
            return;
        }
        if self.files_with_data < self.limits.max_files {
            self.files_with_data += 1;
        } else if !self.out.flags.file_limit_exceeded {
            self.out.flags.file_limit_exceeded = true;
            self.out.limit_hit = Some(LimitHit::Files);
            let msg = format!(
                "Multipart: Upload file limit exceeded {}. Use SecUploadFileLimit to change the limit.",
                self.limits.max_files
            );
            self.error(msg);
        }
    }

    /// A line of the part's header section (always ends with LF here).
    fn header_line(&mut self, chunk: &[u8]) {
        self.out.no_files_bytes = self.out.no_files_bytes.saturating_add(chunk.len());
        if memchr::memchr(0, chunk).is_some() {
            return self.error("Multipart: Nul byte in part headers.");
        }
        let len = chunk.len();
        let line_len = if len > 1 && chunk[len - 2] == b'\r' {
            self.crlf_line = true;
            len - 2
        } else {
            self.out.flags.lf_line = true;
            len.saturating_sub(1)
        };
        if chunk == b"\r\n" || chunk == b"\n" {
            return self.end_of_headers();
        }
        let Some(part) = self.part.as_mut() else {
            return;
        };
        if is_c_space(chunk[0]) {
            // A folded continuation of the previous header.
            self.out.flags.header_folding = true;
            let indent = chunk.iter().take_while(|&&c| is_c_space(c)).count();
            if chunk[..indent].iter().any(|&c| c != b' ' && c != b'\t') {
                self.out.flags.invalid_header_folding = true;
            }
            let Some(idx) = part.last_header else {
                return self.error("Multipart: Invalid part header (folding error).");
            };
            let more = trim_line_end(&chunk[indent..]);
            let h = &mut part.headers[idx];
            h.unfolded_len.get_or_insert(h.value.len());
            if h.value.len() <= BUF {
                h.value.push(b' ');
                h.value.extend_from_slice(more);
            }
            let too_long = h.value.len() > BUF;
            let mut line = h.name.clone();
            line.extend_from_slice(b": ");
            line.extend_from_slice(&h.value);
            part.last_line = line;
            if too_long {
                return self.error("Multipart: Part header too long.");
            }
            return;
        }
        part.finish_line();
        let Some(colon) = memchr::memchr(b':', chunk) else {
            let line = String::from_utf8_lossy(&chunk[..line_len]).into_owned();
            return self.error(format!(
                "Multipart: Invalid part header (colon missing): {line}"
            ));
        };
        if colon == 0 {
            return self.error("Multipart: Invalid part header (header name missing).");
        }
        let name = &chunk[..colon];
        if name.iter().any(|&c| !(33..=126).contains(&c)) {
            return self.error("Multipart: Invalid part header (contains invalid character).");
        }
        let value_start = colon
            + 1
            + chunk[colon + 1..]
                .iter()
                .take_while(|&&c| c == b' ' || c == b'\t')
                .count();
        let value = trim_line_end(&chunk[value_start..]).to_vec();
        // ModSecurity v3 keeps only the first of a repeated header. A repeated header
        // that decides how the part is read is an error here: an application that
        // keeps the last one reads the part differently (a file here, a field there).
        // Every repeated line stays in MULTIPART_PART_HEADERS, and every reading of a
        // repeated Content-Disposition is inspected (see `emit`).
        let repeated = part.header(name).is_some() && is_deciding_header(name);
        part.add_header(name, value);
        part.last_line = chunk[..line_len].to_vec();
        if repeated {
            self.out.flags.duplicate_part_header = true;
            let name = String::from_utf8_lossy(name).into_owned();
            self.error(format!("Multipart: Duplicate part header: {name}."));
        }
    }

    /// The empty line after a part's headers: check Content-Disposition.
    fn end_of_headers(&mut self) {
        let Some(mut part) = self.part.take() else {
            return;
        };
        part.finish_line();
        let result = match part.header(b"Content-Disposition").cloned() {
            None => Err("Multipart: Part missing Content-Disposition header.".to_owned()),
            Some(cd) => match self.content_disposition(&mut part, &cd) {
                Err(rc) => Err(format!(
                    "Multipart: Invalid Content-Disposition header ({rc}): {}",
                    String::from_utf8_lossy(&cd)
                )),
                Ok(()) if part.name.is_empty() => {
                    Err("Multipart: Content-Disposition header missing name field.".to_owned())
                }
                Ok(())
                    if !part.filename.is_empty() && memmem::find(&cd, b"filename=").is_none() =>
                {
                    Err("Multipart: Invalid Content-Disposition header (filename).".to_owned())
                }
                Ok(()) => Ok(()),
            },
        };
        match result {
            Err(msg) => self.error(msg),
            Ok(()) => {
                part.is_file = !part.filename.is_empty();
                self.other_readings(&mut part);
                part.in_data = true;
                part.last_header = None;
                self.data_read = false;
            }
        }
        self.part = Some(part);
    }

    /// Reads the part's other Content-Disposition values (see
    /// [`Part::other_dispositions`]) into its readings. The first line of a folded
    /// one that a parser could take for a different field or file makes the part
    /// ambiguous, an error; a repeated one already is.
    fn other_readings(&mut self, part: &mut Part) {
        let first = Reading {
            name: part.name.clone(),
            filename: part.filename.clone(),
        };
        for (cd, repeated) in part.other_dispositions() {
            let mut other = Part::default();
            if self.content_disposition(&mut other, &cd).is_err() || other.name.is_empty() {
                continue;
            }
            let reading = Reading {
                name: other.name,
                filename: other.filename,
            };
            if reading == first {
                continue;
            }
            if !repeated {
                self.error("Multipart: Folded Content-Disposition header reads two ways.");
            }
            part.readings.push(reading);
        }
    }

    /// Parses a Content-Disposition value into the part, with v3's error codes.
    fn content_disposition(&mut self, part: &mut Part, s: &[u8]) -> Result<(), i32> {
        let n = s.len();
        let skip_ws = |mut p: usize| {
            while p < n && (s[p] == b' ' || s[p] == b'\t') {
                p += 1;
            }
            p
        };
        if !s.starts_with(b"form-data") {
            return Err(-1);
        }
        let mut p = skip_ws(9);
        if p == n {
            return Ok(());
        }
        if s[p] != b';' {
            return Err(-2);
        }
        p += 1;
        let mut filename_star: Vec<u8> = Vec::new();
        while p < n {
            p = skip_ws(p);
            if p == n {
                return Err(-3);
            }
            let start = p;
            while p < n && !matches!(s[p], b'=' | b'\t' | b' ') {
                p += 1;
            }
            if p == n {
                return Err(-4);
            }
            let param = &s[start..p];
            p = skip_ws(p);
            if p == n {
                return Err(-5);
            }
            if s[p] != b'=' {
                return Err(-13);
            }
            p = skip_ws(p + 1);
            if p == n {
                return Err(-6);
            }
            let mut quote = 0u8;
            let value: Vec<u8>;
            if param == b"filename*" {
                // charset'[language]'percent-encoded-name
                let charset = p;
                while p < n && (s[p].is_ascii_alphanumeric() || b"!#$%&+-^_`{}~".contains(&s[p])) {
                    p += 1;
                }
                if p == n || s[p] != b'\'' || p == charset {
                    return Err(-16);
                }
                p += 1;
                while p < n && s[p] != b'\'' {
                    p += 1;
                }
                if p == n {
                    return Err(-17);
                }
                p += 1;
                let name_start = p;
                while p < n && s[p] != b';' {
                    if s[p] == b'%' {
                        let hex = |i: usize| s.get(i).is_some_and(u8::is_ascii_hexdigit);
                        if !hex(p + 1) || !hex(p + 2) {
                            return Err(-18);
                        }
                        p += 3;
                    } else if s[p].is_ascii_alphanumeric() || b"!#$&+-.^_`~".contains(&s[p]) {
                        p += 1;
                    } else {
                        return Err(-19);
                    }
                }
                value = s[name_start..p].to_vec();
            } else if s[p] == b'"' || s[p] == b'\'' {
                quote = s[p];
                if quote == b'\'' {
                    self.out.flags.invalid_quoting = true;
                }
                p += 1;
                if p == n {
                    return Err(-7);
                }
                let mut v = Vec::new();
                loop {
                    if p == n {
                        // No closing quote.
                        return Err(-7);
                    }
                    if s[p] == b'\\' {
                        if p + 1 == n {
                            return Err(-8);
                        }
                        // Only the quote and the backslash can be escaped.
                        if s[p + 1] == quote || s[p + 1] == b'\\' {
                            p += 1;
                        }
                    } else if s[p] == quote {
                        break;
                    }
                    v.push(s[p]);
                    p += 1;
                }
                p += 1;
                value = v;
            } else {
                let start = p;
                while p < n && is_token_char(s[p]) {
                    p += 1;
                }
                value = s[start..p].to_vec();
            }
            match param {
                b"name" => {
                    self.check_quotes(&value, quote);
                    self.out.names.push(value.clone());
                    if !part.name.is_empty() {
                        return Err(-14);
                    }
                    part.name = value;
                }
                b"filename" => {
                    self.check_quotes(&value, quote);
                    self.out.filenames.push(value.clone());
                    if !part.filename.is_empty() {
                        return Err(-15);
                    }
                    part.filename = value;
                }
                b"filename*" => {
                    if !filename_star.is_empty() {
                        return Err(-20);
                    }
                    filename_star = value;
                }
                _ => return Err(-11),
            }
            if p < n {
                p = skip_ws(p);
                if p < n {
                    if s[p] != b';' {
                        if matches!(s[p - 1], b'\'' | b'"') {
                            self.out.flags.invalid_quoting = true;
                        }
                        return Err(-12);
                    }
                    p += 1;
                }
            }
        }
        if !filename_star.is_empty() && part.filename.is_empty() {
            return Err(-21);
        }
        let star = percent_decode(&filename_star);
        if !star.is_empty() && star != part.filename {
            // An application that follows RFC 6266 stores the file under this name:
            // it is a filename the rules must see too.
            self.out.filenames.push(star.clone());
            part.filename_star = star;
        }
        Ok(())
    }

    /// A single quote inside a name or filename that was not double-quoted.
    fn check_quotes(&mut self, value: &[u8], quote: u8) {
        if quote != b'"' && value.contains(&b'\'') {
            self.out.flags.invalid_quoting = true;
        }
    }
}

/// RFC 2045 token characters.
fn is_token_char(c: u8) -> bool {
    c > 32
        && c < 127
        && !matches!(
            c,
            b'(' | b')'
                | b'<'
                | b'>'
                | b'@'
                | b','
                | b';'
                | b':'
                | b'\\'
                | b'"'
                | b'/'
                | b'['
                | b']'
                | b'?'
                | b'='
        )
}

/// Decodes `%XX` escapes (a `filename*` value was checked to hold only valid ones;
/// unlike a form value, `+` stays a `+`).
fn percent_decode(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        let pair = match (s[i], s.get(i + 1), s.get(i + 2)) {
            (b'%', Some(&hi), Some(&lo)) => crate::transforms::hex_pair(hi, lo),
            _ => None,
        };
        match pair {
            Some(byte) => {
                out.push(byte);
                i += 3;
            }
            None => {
                out.push(s[i]);
                i += 1;
            }
        }
    }
    out
}

/// Drops trailing CR and LF bytes.
fn trim_line_end(s: &[u8]) -> &[u8] {
    let keep = s
        .iter()
        .rposition(|&c| c != b'\r' && c != b'\n')
        .map_or(0, |i| i + 1);
    &s[..keep]
}

#[cfg(test)]
mod tests;
