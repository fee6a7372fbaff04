//! Turning the request as received into the values rules inspect.

use super::limits::{NO_FILES_MSG, Shortfall};
use super::{RequestData, State};
use crate::actions::BodyProcessor;
use crate::body::{self, LimitHit, Limits};
use crate::config::EngineConfig;

/// Decodes `%XX` escapes only (not `+`), as ModSecurity v3 does for REQUEST_URI and
/// REQUEST_FILENAME. Invalid escapes are kept as they are.
pub(crate) fn uri_decode(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        if input[i] == b'%' && i + 2 < input.len() {
            let h = hex(input[i + 1]);
            let l = hex(input[i + 2]);
            if let (Some(h), Some(l)) = (h, l) {
                out.push(h << 4 | l);
                i += 3;
                continue;
            }
        }
        out.push(input[i]);
        i += 1;
    }
    out
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

pub(crate) fn set_request_line(
    req: &mut RequestData,
    separator: u8,
    max_args: usize,
    method: &[u8],
    raw_uri: &[u8],
    protocol: &[u8],
) {
    req.method = method.to_vec();
    req.uri_raw = raw_uri.to_vec();
    req.protocol = protocol.to_vec();
    let mut line = Vec::with_capacity(method.len() + raw_uri.len() + protocol.len() + 2);
    line.extend_from_slice(method);
    line.push(b' ');
    line.extend_from_slice(raw_uri);
    if !protocol.is_empty() {
        line.push(b' ');
        line.extend_from_slice(protocol);
    }
    req.line = line;

    // The fragment is kept only in REQUEST_URI_RAW and REQUEST_LINE.
    let no_fragment = match memchr::memchr(b'#', raw_uri) {
        Some(p) => &raw_uri[..p],
        None => raw_uri,
    };
    let (path, query) = match memchr::memchr(b'?', no_fragment) {
        Some(p) => (&no_fragment[..p], &no_fragment[p + 1..]),
        None => (no_fragment, &b""[..]),
    };
    req.query = query.to_vec();
    req.uri = uri_decode(no_fragment);
    // For an absolute URI (`http://host/path`), the file name is the path part.
    let path = strip_authority(path);
    req.filename = uri_decode(path);
    req.basename = match req.filename.iter().rposition(|&b| b == b'/' || b == b'\\') {
        Some(p) if p + 1 < req.filename.len() => req.filename[p + 1..].to_vec(),
        Some(_) => Vec::new(),
        None => req.filename.clone(),
    };
    if !query.is_empty() {
        let parsed = body::urlencoded::parse_bounded(query, separator, max_args);
        req.args_get = parsed.args;
        req.urlencoded_error |= parsed.invalid_encoding;
        req.query_args_dropped = parsed.limit_hit.is_some();
    }
}

fn strip_authority(path: &[u8]) -> &[u8] {
    let lower_starts = |p: &[u8]| path.len() >= p.len() && path[..p.len()].eq_ignore_ascii_case(p);
    let rest = if lower_starts(b"http://") {
        &path[7..]
    } else if lower_starts(b"https://") {
        &path[8..]
    } else {
        return path;
    };
    match memchr::memchr(b'/', rest) {
        Some(p) => &rest[p..],
        None => b"",
    }
}

pub(crate) fn add_request_header(req: &mut RequestData, name: &[u8], value: &[u8]) {
    req.headers.push((name.to_vec(), value.to_vec()));
    if name.eq_ignore_ascii_case(b"cookie") {
        parse_cookies(&mut req.cookies, value);
    } else if name.eq_ignore_ascii_case(b"content-type") {
        req.content_type = value.to_vec();
    } else if name.eq_ignore_ascii_case(b"host") {
        let host = match value.iter().rposition(|&b| b == b':') {
            // Keep IPv6 literals like [::1] whole.
            Some(p) if !value.contains(&b']') || value[..p].ends_with(b"]") => &value[..p],
            _ => value,
        };
        req.server_name = host.to_vec();
    }
}

/// Splits a Cookie header into name/value pairs the way ModSecurity v3 does: at `;`,
/// leading spaces removed, at the first `=`; no decoding.
fn parse_cookies(out: &mut Vec<(Vec<u8>, Vec<u8>)>, value: &[u8]) {
    for piece in value.split(|&b| b == b';') {
        let start = piece
            .iter()
            .position(|&b| b != b' ' && b != b'\t')
            .unwrap_or(piece.len());
        let piece = &piece[start..];
        if piece.is_empty() {
            continue;
        }
        match memchr::memchr(b'=', piece) {
            Some(p) => out.push((piece[..p].to_vec(), piece[p + 1..].to_vec())),
            None => out.push((piece.to_vec(), Vec::new())),
        }
    }
}

/// The processor ModSecurity v3 picks from the Content-Type by itself (XML and JSON
/// need `ctl:requestBodyProcessor`): the value must start with the media type (in any
/// letter case), as in ModSecurity v2 and v3.
pub(crate) fn processor_for(content_type: &[u8]) -> Option<BodyProcessor> {
    let ct = content_type.to_ascii_lowercase();
    if ct.starts_with(b"multipart/form-data") {
        Some(BodyProcessor::Multipart)
    } else if ct.starts_with(b"application/x-www-form-urlencoded") {
        Some(BodyProcessor::UrlEncoded)
    } else {
        None
    }
}

pub(crate) fn process_body(req: &mut RequestData, state: &State, cfg: &EngineConfig) {
    if let Some(p) = state.body_processor {
        req.processor = Some(p);
    }
    // SecArgumentsLimit counts every argument, so the body gets what the query string
    // left over.
    let limits = Limits {
        max_args: cfg.arguments_limit.saturating_sub(req.args_get.len()),
        json_depth: cfg.json_depth_limit,
        multipart_parts: cfg.arguments_limit.max(cfg.upload_file_limit),
        max_files: 0,
    };
    req.body_set = true;
    // A body that went over SecRequestBodyNoFilesLimit while it was appended holds
    // only the part within it (ProcessPartial): that part is still parsed and
    // inspected below, and REQBODY_ERROR already says the rest was not.
    let body_args_limit = |hit: Option<LimitHit>| {
        matches!(hit, Some(LimitHit::Arguments)).then(|| {
            format!(
                "Arguments over SecArgumentsLimit ({}): the request body's arguments after \
                 the first {} were not parsed.",
                cfg.arguments_limit, limits.max_args
            )
        })
    };
    match req.processor {
        Some(BodyProcessor::UrlEncoded) => {
            let parsed =
                body::urlencoded::parse_bounded(&req.body, cfg.argument_separator, limits.max_args);
            req.args_post = parsed.args;
            req.urlencoded_error |= parsed.invalid_encoding;
            if let Some(msg) = body_args_limit(parsed.limit_hit) {
                req.note_shortfall(Shortfall::Arguments, msg);
            }
        }
        Some(BodyProcessor::Json) if !req.body.is_empty() => {
            // Arguments found before an error stay, as in ModSecurity v3.
            let parsed = body::json::parse_partial(&req.body, &limits);
            req.args_post = parsed.args;
            req.processor_error = parsed.error.map(|e| e.to_string());
            // The parse error (REQBODY_ERROR) carries ModSecurity's message; the
            // shortfall names the limit for the built-in check's log line.
            let hit = match parsed.limit_hit {
                Some(LimitHit::Arguments) => Some(Shortfall::Arguments),
                Some(LimitHit::JsonDepth) => Some(Shortfall::JsonDepth),
                _ => None,
            };
            if let Some(hit) = hit {
                req.shortfall.get_or_insert(hit);
            }
        }
        // An empty body is an XML error too ("document is empty"), as in ModSecurity
        // v3; a document that is not well formed still exposes the text parsed
        // before the error.
        Some(BodyProcessor::Xml) => match body::xml::parse_partial(&req.body) {
            Ok(doc) => req.xml = Some(doc),
            Err((e, partial)) => {
                req.xml = partial;
                req.processor_error = Some(e.to_string());
            }
        },
        Some(BodyProcessor::Multipart) => {
            let mut mp = body::multipart::parse(&req.body, &req.content_type, &limits);
            // ModSecurity v3 adds a multipart body's arguments and files only once the
            // parse reached the final boundary: when it did not (final boundary
            // missing, a fatal error) ARGS_POST and FILES stay empty (MULTIPART_NAME,
            // MULTIPART_FILENAME and MULTIPART_PART_HEADERS keep what was read); an
            // error in a part's headers sets REQBODY_ERROR but keeps the parts. A part
            // limit is Palisade's own check: the parts within it are kept and inspected,
            // and the limit check reports the rest.
            if !mp.completed && mp.limit_hit != Some(LimitHit::MultipartParts) {
                mp.args.clear();
                mp.files.clear();
            }
            req.args_post = std::mem::take(&mut mp.args);
            req.processor_error = mp.reqbody_error_msg();
            match mp.limit_hit {
                Some(LimitHit::MultipartParts) => {
                    req.shortfall.get_or_insert(Shortfall::MultipartParts);
                }
                hit => {
                    if let Some(msg) = body_args_limit(hit) {
                        req.note_shortfall(Shortfall::Arguments, msg);
                    }
                }
            }
            if mp.no_files_bytes > cfg.request_body_no_files_limit {
                req.inbound_data_error = true;
                req.note_shortfall(Shortfall::NoFilesLimit, NO_FILES_MSG.to_owned());
            }
            req.multipart = Some(mp);
        }
        Some(BodyProcessor::Json) | None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_line_parts() {
        let mut r = RequestData::default();
        set_request_line(
            &mut r,
            b'&',
            100,
            b"GET",
            b"/a%20b/c.php?x=1&y=%27#frag",
            b"HTTP/1.1",
        );
        assert_eq!(r.uri, b"/a b/c.php?x=1&y='");
        assert_eq!(r.filename, b"/a b/c.php");
        assert_eq!(r.basename, b"c.php");
        assert_eq!(r.query, b"x=1&y=%27");
        assert_eq!(r.line, b"GET /a%20b/c.php?x=1&y=%27#frag HTTP/1.1");
        assert_eq!(r.args_get.len(), 2);
        let mut r = RequestData::default();
        set_request_line(
            &mut r,
            b'&',
            100,
            b"GET",
            b"http://example.com/x/y?z",
            b"HTTP/1.1",
        );
        assert_eq!(r.filename, b"/x/y");
    }

    #[test]
    fn cookies() {
        let mut out = Vec::new();
        parse_cookies(&mut out, b"a=1; b=2;c; d=x=y");
        assert_eq!(
            out,
            vec![
                (b"a".to_vec(), b"1".to_vec()),
                (b"b".to_vec(), b"2".to_vec()),
                (b"c".to_vec(), b"".to_vec()),
                (b"d".to_vec(), b"x=y".to_vec())
            ]
        );
    }

    #[test]
    fn decode() {
        assert_eq!(uri_decode(b"%41%zz%4"), b"A%zz%4");
        assert_eq!(uri_decode(b"a+b"), b"a+b");
    }
}
