//! Resolving a rule's targets to the values it inspects.

use super::{RequestData, ResponseData, State, TxContext};
use crate::actions::CollectionKind;
use crate::macros::MacroContext;
use crate::rule::Rule;
use crate::variables::{KeySelector, Target, Var, XPath};
use std::borrow::Cow;

/// One value a rule inspects.
#[derive(Debug, Clone)]
pub(crate) struct Value<'a> {
    /// The variable it comes from.
    pub var: Var,
    /// Its key inside a collection (empty for single-valued variables).
    pub key: Cow<'a, [u8]>,
    /// The value.
    pub value: Cow<'a, [u8]>,
    /// A stable identity for the transformation cache, for request data that does not
    /// change during the transaction.
    pub id: Option<u32>,
}

impl Value<'_> {
    /// Appends the name ModSecurity shows for the value (`ARGS:foo` or
    /// `REQUEST_URI`) to `out`.
    pub fn write_name(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.var.name().as_bytes());
        if self.var.is_collection() {
            out.push(b':');
            out.extend_from_slice(&self.key);
        }
    }
}

/// Empties a vector of values and returns its allocation retyped for another borrow,
/// so one buffer serves every rule of a transaction.
#[inline]
pub(crate) fn recycle<'b>(mut values: Vec<Value<'_>>) -> Vec<Value<'b>> {
    // Collecting an empty in-place iterator keeps the allocation (same layout). The
    // `filter_map` is what retypes the borrow; `filter` could not. The values are
    // dropped first, in line, so that the collect has nothing left to walk.
    values.clear();
    #[allow(clippy::unnecessary_filter_map)]
    values.into_iter().filter_map(|_| None).collect()
}

/// Cache-identity codes of request data sources.
mod src {
    pub const SCALAR: u32 = 0;
    pub const ARGS_GET: u32 = 1;
    pub const ARGS_POST: u32 = 2;
    pub const HEADERS: u32 = 3;
    pub const COOKIES: u32 = 4;
    pub const ARGS_GET_NAMES: u32 = 5;
    pub const ARGS_POST_NAMES: u32 = 6;
    pub const HEADER_NAMES: u32 = 7;
    pub const COOKIE_NAMES: u32 = 8;
    pub const PART_HEADERS: u32 = 9;
    pub const FILES: u32 = 10;
    pub const XML_TEXT: u32 = 11;
    pub const XML_ATTR: u32 = 12;
    pub const RESP_HEADERS: u32 = 13;
    pub const INPUTS: u32 = 14;
}

fn id(source: u32, index: usize) -> Option<u32> {
    u32::try_from(index)
        .ok()
        .filter(|&i| i < (1 << 24))
        .map(|i| (source << 24) | i)
}

/// A read-only view of a transaction, for resolving targets and macros.
pub(crate) struct View<'a> {
    pub req: &'a RequestData,
    pub resp: &'a ResponseData,
    pub state: &'a State,
    pub ctx: &'a TxContext,
    pub rule: Option<&'a Rule>,
}

fn push_pairs<'a>(
    out: &mut Vec<Value<'a>>,
    var: Var,
    sel: &KeySelector,
    pairs: &'a [(Vec<u8>, Vec<u8>)],
    source: u32,
    names: bool,
) {
    for (i, (k, v)) in pairs.iter().enumerate() {
        if sel.matches(k) {
            out.push(Value {
                var,
                key: Cow::Borrowed(k),
                value: Cow::Borrowed(if names { k } else { v }),
                id: id(source, i),
            });
        }
    }
}

fn scalar<'a>(out: &mut Vec<Value<'a>>, var: Var, value: Cow<'a, [u8]>, cached: bool) {
    out.push(Value {
        var,
        key: Cow::Borrowed(b""),
        value,
        id: if cached {
            id(src::SCALAR, var as usize)
        } else {
            None
        },
    });
}

/// The user name of the first `Authorization` header when it is `Basic `
/// credentials (the part of the decoded value before its first `:`).
fn basic_user(headers: &[crate::body::Arg]) -> Option<Vec<u8>> {
    let (_, value) = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(b"authorization"))?;
    let encoded = value.strip_prefix(b"Basic ")?;
    let decoded = crate::transforms::Transform::Base64Decode.apply(encoded);
    let colon = memchr::memchr(b':', &decoded)?;
    Some(decoded[..colon].to_vec())
}

fn owned<'a>(out: &mut Vec<Value<'a>>, var: Var, value: String) {
    scalar(out, var, Cow::Owned(value.into_bytes()), false);
}

fn flag<'a>(out: &mut Vec<Value<'a>>, var: Var, set: bool) {
    scalar(
        out,
        var,
        Cow::Borrowed(if set { b"1" } else { b"0" }),
        false,
    );
}

impl<'a> View<'a> {
    /// True when REQUEST_BODY holds the raw body: after the body phase ran with body
    /// access on, for a body that is not empty (ModSecurity v3 leaves the variable
    /// unset for an empty body), of a processor `SecPalisadeRequestBodyVariable`
    /// exposes or under `ctl:forceRequestBodyVariable`.
    fn request_body_visible(&self) -> bool {
        use crate::actions::BodyProcessor as P;
        use crate::config::RequestBodyVariable as V;
        if !self.req.body_set || self.req.body.is_empty() {
            return false;
        }
        match self.state.request_body_variable {
            V::All => true,
            V::Urlencoded => {
                self.state.force_body_variable
                    || matches!(self.req.processor, Some(P::UrlEncoded) | Some(P::Json))
            }
        }
    }

    /// Appends the values `target` selects (before exclusions).
    pub fn collect(&self, target: &Target, out: &mut Vec<Value<'a>>) {
        if target.count {
            let mut tmp = Vec::new();
            self.collect_values(target.var, &target.selector, &mut tmp);
            let n = tmp.len();
            out.push(Value {
                var: target.var,
                key: Cow::Borrowed(b""),
                value: Cow::Owned(n.to_string().into_bytes()),
                id: None,
            });
            return;
        }
        self.collect_values(target.var, &target.selector, out);
    }

    pub(crate) fn collect_values(&self, var: Var, sel: &KeySelector, out: &mut Vec<Value<'a>>) {
        let req = self.req;
        let resp = self.resp;
        match var {
            Var::Args => {
                push_pairs(out, var, sel, &req.args_get, src::ARGS_GET, false);
                push_pairs(out, var, sel, &req.args_post, src::ARGS_POST, false);
            }
            Var::ArgsGet => push_pairs(out, var, sel, &req.args_get, src::ARGS_GET, false),
            Var::ArgsPost => push_pairs(out, var, sel, &req.args_post, src::ARGS_POST, false),
            Var::ArgsNames => {
                push_pairs(out, var, sel, &req.args_get, src::ARGS_GET_NAMES, true);
                push_pairs(out, var, sel, &req.args_post, src::ARGS_POST_NAMES, true);
            }
            Var::ArgsGetNames => {
                push_pairs(out, var, sel, &req.args_get, src::ARGS_GET_NAMES, true)
            }
            Var::ArgsPostNames => {
                push_pairs(out, var, sel, &req.args_post, src::ARGS_POST_NAMES, true)
            }
            Var::ArgsCombinedSize => {
                let n: usize = req
                    .args_get
                    .iter()
                    .chain(&req.args_post)
                    .map(|(k, v)| k.len() + v.len())
                    .sum();
                owned(out, var, n.to_string());
            }
            Var::RequestHeaders => push_pairs(out, var, sel, &req.headers, src::HEADERS, false),
            Var::RequestHeadersNames => {
                push_pairs(out, var, sel, &req.headers, src::HEADER_NAMES, true)
            }
            Var::RequestCookies => push_pairs(out, var, sel, &req.cookies, src::COOKIES, false),
            Var::RequestCookiesNames => {
                push_pairs(out, var, sel, &req.cookies, src::COOKIE_NAMES, true)
            }
            Var::RequestUri => scalar(out, var, Cow::Borrowed(&req.uri), true),
            Var::RequestUriRaw => scalar(out, var, Cow::Borrowed(&req.uri_raw), true),
            Var::RequestFilename => scalar(out, var, Cow::Borrowed(&req.filename), true),
            Var::RequestBasename => scalar(out, var, Cow::Borrowed(&req.basename), true),
            Var::RequestLine => scalar(out, var, Cow::Borrowed(&req.line), true),
            Var::RequestMethod => scalar(out, var, Cow::Borrowed(&req.method), true),
            Var::RequestProtocol => scalar(out, var, Cow::Borrowed(&req.protocol), true),
            Var::QueryString => scalar(out, var, Cow::Borrowed(&req.query), true),
            Var::RequestBody => {
                // ModSecurity v3 fills REQUEST_BODY with the raw body whatever the
                // processor (multipart, XML, JSON, URL-encoded or none) once the body
                // phase runs with body access on, and leaves it unset when the body is
                // empty. `SecPalisadeRequestBodyVariable Processor` gives v2's documented
                // behaviour instead: only URL-encoded and JSON bodies, or
                // `ctl:forceRequestBodyVariable`.
                if self.request_body_visible() {
                    scalar(out, var, Cow::Borrowed(&req.body), true);
                }
            }
            Var::RequestBodyLength => owned(out, var, req.body.len().to_string()),
            // REQBODY_ERROR also says when a limit cut the body short (arguments
            // over SecArgumentsLimit, a body over SecRequestBodyNoFilesLimit);
            // REQBODY_PROCESSOR_ERROR only when the processor failed. A processor's
            // message comes first, as in ModSecurity v3.
            Var::ReqbodyError => flag(out, var, req.reqbody_error_msg().is_some()),
            Var::ReqbodyProcessorError => flag(out, var, req.processor_error.is_some()),
            Var::ReqbodyErrorMsg => scalar(
                out,
                var,
                Cow::Borrowed(req.reqbody_error_msg().unwrap_or("").as_bytes()),
                false,
            ),
            Var::ReqbodyProcessorErrorMsg => scalar(
                out,
                var,
                Cow::Borrowed(req.processor_error.as_deref().unwrap_or("").as_bytes()),
                false,
            ),
            Var::ReqbodyProcessor => {
                let p = self.state.body_processor.or(req.processor);
                scalar(
                    out,
                    var,
                    Cow::Borrowed(p.map(|p| p.name()).unwrap_or("").as_bytes()),
                    false,
                )
            }
            Var::UrlencodedError => flag(out, var, req.urlencoded_error),
            Var::InboundDataError => flag(out, var, req.inbound_data_error),
            Var::OutboundDataError => flag(out, var, resp.outbound_data_error),
            Var::FullRequest => {
                let mut full = req.line.clone();
                full.extend_from_slice(b"\n");
                for (k, v) in &req.headers {
                    full.extend_from_slice(k);
                    full.extend_from_slice(b": ");
                    full.extend_from_slice(v);
                    full.push(b'\n');
                }
                full.push(b'\n');
                full.extend_from_slice(&req.body);
                scalar(out, var, Cow::Owned(full), false);
            }
            Var::FullRequestLength => {
                let n = req.line.len()
                    + 1
                    + req
                        .headers
                        .iter()
                        .map(|(k, v)| k.len() + v.len() + 3)
                        .sum::<usize>()
                    + 1
                    + req.body.len();
                owned(out, var, n.to_string());
            }
            Var::Files | Var::FilesNames | Var::FilesSizes | Var::FilesTmpNames => {
                if let Some(mp) = &req.multipart {
                    for (i, f) in mp.files.iter().enumerate() {
                        if !sel.matches(&f.name) {
                            continue;
                        }
                        let value: Cow<'a, [u8]> = match var {
                            Var::Files => Cow::Borrowed(&f.filename),
                            Var::FilesNames => Cow::Borrowed(&f.name),
                            Var::FilesSizes => Cow::Owned(f.size.to_string().into_bytes()),
                            _ => Cow::Borrowed(b""),
                        };
                        let cached = matches!(var, Var::Files);
                        out.push(Value {
                            var,
                            key: Cow::Borrowed(&f.name),
                            value,
                            id: if cached { id(src::FILES, i) } else { None },
                        });
                    }
                }
            }
            Var::FilesCombinedSize => {
                let n: usize = req
                    .multipart
                    .as_ref()
                    .map(|m| m.files.iter().map(|f| f.size).sum())
                    .unwrap_or(0);
                owned(out, var, n.to_string());
            }
            Var::MultipartName | Var::MultipartFilename => {
                if let Some(mp) = &req.multipart {
                    let list = if var == Var::MultipartName {
                        &mp.names
                    } else {
                        &mp.filenames
                    };
                    for v in list {
                        if sel.matches(v) {
                            out.push(Value {
                                var,
                                key: Cow::Borrowed(v),
                                value: Cow::Borrowed(v),
                                id: None,
                            });
                        }
                    }
                }
            }
            Var::MultipartPartHeaders => {
                if let Some(mp) = &req.multipart {
                    push_pairs(out, var, sel, &mp.part_headers, src::PART_HEADERS, false);
                }
            }
            Var::MultipartStrictError
            | Var::MultipartBoundaryQuoted
            | Var::MultipartBoundaryWhitespace
            | Var::MultipartDataBefore
            | Var::MultipartDataAfter
            | Var::MultipartHeaderFolding
            | Var::MultipartLfLine
            | Var::MultipartCrlfLfLines
            | Var::MultipartMissingSemicolon
            | Var::MultipartInvalidQuoting
            | Var::MultipartInvalidPart
            | Var::MultipartInvalidHeaderFolding
            | Var::MultipartFileLimitExceeded
            | Var::MultipartDuplicatePartHeader => {
                let set = req.multipart.as_ref().is_some_and(|mp| {
                    let f = &mp.flags;
                    match var {
                        Var::MultipartStrictError => mp.strict_error(),
                        Var::MultipartBoundaryQuoted => f.boundary_quoted,
                        Var::MultipartBoundaryWhitespace => f.boundary_whitespace,
                        Var::MultipartDataBefore => f.data_before,
                        Var::MultipartDataAfter => f.data_after,
                        Var::MultipartHeaderFolding => f.header_folding,
                        Var::MultipartLfLine => f.lf_line,
                        Var::MultipartCrlfLfLines => f.crlf_lf_lines,
                        Var::MultipartMissingSemicolon => f.missing_semicolon,
                        Var::MultipartInvalidQuoting => f.invalid_quoting,
                        Var::MultipartInvalidPart => f.invalid_part,
                        Var::MultipartInvalidHeaderFolding => f.invalid_header_folding,
                        Var::MultipartDuplicatePartHeader => f.duplicate_part_header,
                        _ => f.file_limit_exceeded,
                    }
                });
                flag(out, var, set);
            }
            Var::Inputs | Var::InputsDecoded => {
                let decoded = var == Var::InputsDecoded;
                for (i, e) in req.inputs.entries().iter().enumerate() {
                    if (e.source == crate::inputs::Source::Decoded) == decoded
                        && sel.matches(&e.name)
                    {
                        out.push(Value {
                            var,
                            key: Cow::Borrowed(&e.name),
                            value: Cow::Borrowed(&e.value),
                            id: id(src::INPUTS, i),
                        });
                    }
                }
            }
            Var::Detections => {
                // Stage 4, detect: for each check the selector names, every input
                // (parsed or decoded) the detector finds something in; the value is
                // the input's lineage.
                for (key, check) in crate::inputs::CHECKS {
                    if !sel.matches(key.as_bytes()) {
                        continue;
                    }
                    for (i, e) in req.inputs.entries().iter().enumerate() {
                        if req.inputs.detects(i, *check) {
                            out.push(Value {
                                var,
                                key: Cow::Borrowed(key.as_bytes()),
                                value: Cow::Borrowed(&e.name),
                                id: None,
                            });
                        }
                    }
                }
            }
            Var::MultipartUnmatchedBoundary => {
                // ModSecurity v3 sets 1 or 2 (see the multipart processor).
                let v = req
                    .multipart
                    .as_ref()
                    .map(|m| m.unmatched_boundary_value)
                    .unwrap_or(0);
                owned(out, var, v.to_string());
            }
            Var::Xml => {
                if let Some(doc) = &req.xml {
                    match sel {
                        KeySelector::XPath(XPath::Attributes) => {
                            for (i, v) in doc.attributes.iter().enumerate() {
                                out.push(Value {
                                    var,
                                    key: Cow::Borrowed(b"//@*"),
                                    value: Cow::Borrowed(v),
                                    id: id(src::XML_ATTR, i),
                                });
                            }
                        }
                        // `/*` selects the root element; its value is all of its text,
                        // as in ModSecurity v3.
                        _ => out.push(Value {
                            var,
                            key: Cow::Borrowed(b"/*"),
                            value: Cow::Borrowed(&doc.content),
                            id: id(src::XML_TEXT, 0),
                        }),
                    }
                }
            }
            Var::Tx => {
                if let KeySelector::Exact(k) = sel {
                    // TX keys are stored lower-case, like exact selectors.
                    if let Some((k, v)) = self.state.tx.get_key_value(k) {
                        out.push(Value {
                            var,
                            key: Cow::Borrowed(k),
                            value: Cow::Borrowed(v),
                            id: None,
                        });
                    }
                    return;
                }
                let start = out.len();
                for (k, v) in &self.state.tx {
                    if sel.matches(k) {
                        out.push(Value {
                            var,
                            key: Cow::Borrowed(k),
                            value: Cow::Borrowed(v),
                            id: None,
                        });
                    }
                }
                // In key order, whatever the map's order.
                out[start..].sort_unstable_by(|a, b| a.key.cmp(&b.key));
            }
            Var::Ip | Var::Global | Var::Session | Var::User | Var::Resource => {
                let kind = CollectionKind::from_name(var.name()).unwrap_or(CollectionKind::Ip);
                if let Some(p) = &self.state.persistent[kind.index()] {
                    let now = self.ctx.now_unix_micros / 1_000_000;
                    let mut keys: Vec<_> = p
                        .values
                        .iter()
                        .filter(|(k, v)| sel.matches(k) && v.expires_at.is_none_or(|t| t > now))
                        .collect();
                    keys.sort_by(|a, b| a.0.cmp(b.0));
                    for (k, v) in keys {
                        out.push(Value {
                            var,
                            key: Cow::Borrowed(k),
                            value: v.value.as_read(),
                            id: None,
                        });
                    }
                }
            }
            Var::Geo => {
                for (k, v) in &self.state.geo {
                    if sel.matches(k.as_bytes()) {
                        out.push(Value {
                            var,
                            key: Cow::Borrowed(k.as_bytes()),
                            value: Cow::Borrowed(v.as_bytes()),
                            id: None,
                        });
                    }
                }
            }
            Var::ResponseHeaders => {
                push_pairs(out, var, sel, &resp.headers, src::RESP_HEADERS, false)
            }
            Var::ResponseHeadersNames => {
                push_pairs(out, var, sel, &resp.headers, src::RESP_HEADERS + 1, true)
            }
            Var::ResponseBody => {
                // Read from phase 4 on, when the body no longer changes.
                if self.state.phases_done >= 3 {
                    scalar(out, var, Cow::Borrowed(&resp.body), true);
                }
            }
            Var::ResponseStatus => {
                if resp.status != 0 {
                    owned(out, var, resp.status.to_string());
                }
            }
            Var::ResponseProtocol => scalar(out, var, Cow::Borrowed(&resp.protocol), false),
            Var::ResponseContentType => {
                if let Some((_, v)) = resp
                    .headers
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(b"content-type"))
                {
                    scalar(out, var, Cow::Borrowed(v), false);
                }
            }
            Var::ResponseContentLength => {
                if let Some((_, v)) = resp
                    .headers
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(b"content-length"))
                {
                    scalar(out, var, Cow::Borrowed(v), false);
                }
            }
            Var::StatusLine => {
                if resp.status != 0 {
                    let mut l = resp.protocol.clone();
                    l.extend_from_slice(format!(" {}", resp.status).as_bytes());
                    scalar(out, var, Cow::Owned(l), false);
                }
            }
            Var::MatchedVar => scalar(out, var, Cow::Borrowed(&self.state.matched_var), false),
            Var::MatchedVarName => {
                scalar(out, var, Cow::Borrowed(&self.state.matched_var_name), false)
            }
            Var::MatchedVars | Var::MatchedVarsNames => {
                for (k, v) in self.state.matched_vars.iter() {
                    if sel.matches(k) {
                        let value = if var == Var::MatchedVars { v } else { k };
                        out.push(Value {
                            var,
                            key: Cow::Borrowed(k),
                            value: Cow::Borrowed(value),
                            id: None,
                        });
                    }
                }
            }
            Var::RemoteAddr | Var::RemoteHost => owned(out, var, self.ctx.client_ip.to_string()),
            Var::RemotePort => owned(out, var, self.ctx.client_port.to_string()),
            Var::PeerAddr => {
                let ip = self.ctx.peer.map_or(self.ctx.client_ip, |p| p.ip());
                owned(out, var, ip.to_string());
            }
            Var::PeerPort => {
                let port = self.ctx.peer.map_or(self.ctx.client_port, |p| p.port());
                owned(out, var, port.to_string());
            }
            Var::ServerAddr => owned(out, var, self.ctx.server_ip.to_string()),
            Var::ServerPort => owned(out, var, self.ctx.server_port.to_string()),
            Var::ServerName => scalar(out, var, Cow::Borrowed(&req.server_name), false),
            Var::AuthType => {
                if let Some((_, v)) = req
                    .headers
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(b"authorization"))
                {
                    let scheme = v.split(|&b| b == b' ').next().unwrap_or(b"");
                    scalar(out, var, Cow::Borrowed(scheme), false);
                }
            }
            Var::RemoteUser => {
                if let Some(user) = &req.remote_user {
                    scalar(out, var, Cow::Borrowed(user), false);
                } else if let Some(user) = basic_user(&req.headers) {
                    // As libmodsecurity: the user name of an `Authorization:
                    // Basic` header, as the client sent it (not verified).
                    scalar(out, var, Cow::Owned(user), false);
                }
            }
            Var::PathInfo | Var::Userid | Var::Sessionid | Var::WebserverErrorLog => {}
            Var::UniqueId => scalar(
                out,
                var,
                Cow::Borrowed(self.ctx.unique_id.as_bytes()),
                false,
            ),
            Var::Duration => {
                let now = self
                    .ctx
                    .clock
                    .as_ref()
                    .map(|c| c.now_unix_micros())
                    .unwrap_or(self.ctx.now_unix_micros);
                owned(
                    out,
                    var,
                    (now - self.ctx.now_unix_micros).max(0).to_string(),
                );
            }
            Var::HighestSeverity => owned(out, var, self.state.highest_severity.to_string()),
            Var::Time
            | Var::TimeDay
            | Var::TimeEpoch
            | Var::TimeHour
            | Var::TimeMin
            | Var::TimeMon
            | Var::TimeSec
            | Var::TimeWday
            | Var::TimeYear => owned(out, var, self.time_value(var)),
            Var::Env => {
                for (k, v) in &self.state.env {
                    if sel.matches(k) {
                        out.push(Value {
                            var,
                            key: Cow::Owned(k.clone()),
                            value: Cow::Owned(v.clone()),
                            id: None,
                        });
                    }
                }
            }
            Var::Rule => {
                if let Some(rule) = self.rule {
                    for key in [
                        "id", "rev", "severity", "logdata", "msg", "ver", "maturity", "accuracy",
                        "phase",
                    ] {
                        if sel.matches(key.as_bytes())
                            && let Some(v) = self.rule_field(rule, key)
                        {
                            out.push(Value {
                                var,
                                key: Cow::Borrowed(key.as_bytes()),
                                value: Cow::Owned(v),
                                id: None,
                            });
                        }
                    }
                }
            }
        }
    }

    /// Appends every value of `var` that any target of it could select, whatever the
    /// selector or the body-variable flags: a superset, for the prefilter.
    pub(crate) fn collect_superset(&self, var: Var, out: &mut Vec<Value<'a>>) {
        match var {
            Var::Xml => {
                self.collect_values(var, &KeySelector::XPath(XPath::Texts), out);
                self.collect_values(var, &KeySelector::XPath(XPath::Attributes), out);
            }
            Var::RequestBody => {
                if self.req.body_set {
                    scalar(out, var, Cow::Borrowed(&self.req.body), true);
                }
            }
            _ => self.collect_values(var, &KeySelector::All, out),
        }
    }

    fn rule_field(&self, rule: &Rule, key: &str) -> Option<Vec<u8>> {
        Some(match key {
            "id" => rule.chain_id?.to_string().into_bytes(),
            "rev" => rule.meta.rev.clone()?.into_bytes(),
            "severity" => rule.meta.severity?.to_string().into_bytes(),
            "msg" => rule.meta.msg.as_ref()?.text().as_bytes().to_vec(),
            "logdata" => rule.meta.logdata.as_ref()?.text().as_bytes().to_vec(),
            "ver" => rule.meta.ver.clone()?.into_bytes(),
            "maturity" => rule.meta.maturity?.to_string().into_bytes(),
            "accuracy" => rule.meta.accuracy?.to_string().into_bytes(),
            "phase" => rule.phase.to_string().into_bytes(),
            _ => return None,
        })
    }

    /// TIME variables, in UTC (ModSecurity uses the server's local time zone).
    fn time_value(&self, var: Var) -> String {
        let secs = self.ctx.now_unix_micros.div_euclid(1_000_000);
        let t = crate::civil::UtcTime::from_unix(secs);
        let (h, m, s) = (t.hour, t.minute, t.second);
        match var {
            Var::TimeEpoch => secs.to_string(),
            Var::TimeDay => format!("{:02}", t.day),
            Var::TimeHour => format!("{h:02}"),
            Var::TimeMin => format!("{m:02}"),
            Var::TimeSec => format!("{s:02}"),
            Var::TimeMon => format!("{:02}", t.month - 1),
            Var::TimeWday => t.weekday.to_string(),
            Var::TimeYear => t.year.to_string(),
            _ => format!("{h:02}:{m:02}:{s:02}"),
        }
    }
}

impl MacroContext for View<'_> {
    fn lookup(&self, var: Var, key: Option<&[u8]>) -> Option<Cow<'_, [u8]>> {
        // Macro keys are lower-cased when parsed, as TX keys are when stored.
        match (var, key) {
            (Var::Tx, Some(k)) => return self.state.tx.get(k).map(|v| Cow::Borrowed(&v[..])),
            (Var::MatchedVar, _) => return Some(Cow::Borrowed(&self.state.matched_var)),
            (Var::MatchedVarName, _) => {
                return Some(Cow::Borrowed(&self.state.matched_var_name));
            }
            _ => {}
        }
        let sel = match key {
            Some(k) if var.is_collection() => KeySelector::Exact(k.to_vec()),
            _ => KeySelector::All,
        };
        let mut out = Vec::new();
        self.collect_values(var, &sel, &mut out);
        out.into_iter().next().map(|v| v.value)
    }
}

#[cfg(test)]
mod tests {
    use super::{Value, recycle};
    use crate::variables::Var;
    use std::borrow::Cow;

    #[test]
    fn recycling_keeps_the_buffer() {
        let owned = b"value".to_vec();
        let mut v: Vec<Value<'_>> = Vec::with_capacity(40);
        v.push(Value {
            var: Var::Args,
            key: Cow::Borrowed(b"k"),
            value: Cow::Borrowed(&owned),
            id: None,
        });
        let ptr = v.as_ptr() as usize;
        let back: Vec<Value<'static>> = recycle(v);
        assert!(back.is_empty());
        assert_eq!(back.capacity(), 40);
        assert_eq!(back.as_ptr() as usize, ptr);
    }
}
