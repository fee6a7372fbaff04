//! Rule targets: which request, response or state values a rule inspects.
//!
//! A [`Target`] is compiled once from a SecLang variable (`ARGS:/^id_/`,
//! `!REQUEST_HEADERS:Referer`, `&TX:foo`). At run time the transaction resolves it to a
//! list of named values (see `crate::transaction`).

use regex::bytes::{Regex, RegexBuilder};

/// Every variable Palisade can inspect. Collections hold named values; the others hold
/// one value (or none).
#[allow(missing_docs)] // The variants are named after the SecLang variables they stand for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Var {
    Args,
    ArgsGet,
    ArgsPost,
    ArgsNames,
    ArgsGetNames,
    ArgsPostNames,
    ArgsCombinedSize,
    RequestHeaders,
    RequestHeadersNames,
    RequestCookies,
    RequestCookiesNames,
    RequestUri,
    RequestUriRaw,
    RequestFilename,
    RequestBasename,
    RequestLine,
    RequestMethod,
    RequestProtocol,
    QueryString,
    RequestBody,
    RequestBodyLength,
    ReqbodyError,
    ReqbodyErrorMsg,
    ReqbodyProcessor,
    ReqbodyProcessorError,
    ReqbodyProcessorErrorMsg,
    UrlencodedError,
    InboundDataError,
    OutboundDataError,
    FullRequest,
    FullRequestLength,
    Files,
    FilesNames,
    FilesSizes,
    FilesCombinedSize,
    FilesTmpNames,
    MultipartFilename,
    MultipartName,
    MultipartPartHeaders,
    MultipartStrictError,
    MultipartBoundaryQuoted,
    MultipartBoundaryWhitespace,
    MultipartDataBefore,
    MultipartDataAfter,
    MultipartHeaderFolding,
    MultipartLfLine,
    MultipartCrlfLfLines,
    MultipartMissingSemicolon,
    MultipartInvalidQuoting,
    MultipartInvalidPart,
    MultipartInvalidHeaderFolding,
    MultipartFileLimitExceeded,
    MultipartDuplicatePartHeader,
    MultipartUnmatchedBoundary,
    Inputs,
    InputsDecoded,
    Detections,
    Xml,
    Tx,
    Ip,
    Global,
    Session,
    User,
    Resource,
    Geo,
    ResponseHeaders,
    ResponseHeadersNames,
    ResponseBody,
    ResponseStatus,
    ResponseProtocol,
    ResponseContentType,
    ResponseContentLength,
    StatusLine,
    MatchedVar,
    MatchedVars,
    MatchedVarName,
    MatchedVarsNames,
    RemoteAddr,
    RemotePort,
    RemoteHost,
    RemoteUser,
    /// Palisade's own: the TCP peer's address, when the client's address came from
    /// a PROXY protocol header or a trusted proxy's header (REMOTE_ADDR otherwise).
    PeerAddr,
    /// Palisade's own: the TCP peer's port (REMOTE_PORT when the client is the peer).
    PeerPort,
    ServerName,
    ServerPort,
    ServerAddr,
    AuthType,
    PathInfo,
    UniqueId,
    Duration,
    HighestSeverity,
    Time,
    TimeDay,
    TimeEpoch,
    TimeHour,
    TimeMin,
    TimeMon,
    TimeSec,
    TimeWday,
    TimeYear,
    Env,
    Rule,
    Userid,
    Sessionid,
    WebserverErrorLog,
}

/// (SecLang name, variable, whether it is a collection that takes a key).
/// Name and collection flag by variant (the first name `TABLE` gives it), so `name` and
/// `is_collection` are an index rather than a search.
static BY_VAR: [(&str, bool); VAR_COUNT] = {
    let mut out = [("?", false); VAR_COUNT];
    let mut seen = [false; VAR_COUNT];
    let mut i = 0;
    while i < TABLE.len() {
        let (name, var, collection) = TABLE[i];
        let k = var as usize;
        if !seen[k] {
            seen[k] = true;
            out[k] = (name, collection);
        }
        i += 1;
    }
    out
};

/// One more than the largest variant's index.
const VAR_COUNT: usize = {
    let mut max = 0;
    let mut i = 0;
    while i < TABLE.len() {
        let k = TABLE[i].1 as usize;
        if k > max {
            max = k;
        }
        i += 1;
    }
    max + 1
};

const TABLE: &[(&str, Var, bool)] = &[
    ("ARGS", Var::Args, true),
    ("ARGS_GET", Var::ArgsGet, true),
    ("ARGS_POST", Var::ArgsPost, true),
    ("ARGS_NAMES", Var::ArgsNames, true),
    ("ARGS_GET_NAMES", Var::ArgsGetNames, true),
    ("ARGS_POST_NAMES", Var::ArgsPostNames, true),
    ("ARGS_COMBINED_SIZE", Var::ArgsCombinedSize, false),
    ("REQUEST_HEADERS", Var::RequestHeaders, true),
    ("REQUEST_HEADERS_NAMES", Var::RequestHeadersNames, true),
    ("REQUEST_COOKIES", Var::RequestCookies, true),
    ("REQUEST_COOKIES_NAMES", Var::RequestCookiesNames, true),
    ("REQUEST_URI", Var::RequestUri, false),
    ("REQUEST_URI_RAW", Var::RequestUriRaw, false),
    ("REQUEST_FILENAME", Var::RequestFilename, false),
    ("REQUEST_BASENAME", Var::RequestBasename, false),
    ("REQUEST_LINE", Var::RequestLine, false),
    ("REQUEST_METHOD", Var::RequestMethod, false),
    ("REQUEST_PROTOCOL", Var::RequestProtocol, false),
    ("QUERY_STRING", Var::QueryString, false),
    ("REQUEST_BODY", Var::RequestBody, false),
    ("REQUEST_BODY_LENGTH", Var::RequestBodyLength, false),
    ("REQBODY_ERROR", Var::ReqbodyError, false),
    ("REQBODY_ERROR_MSG", Var::ReqbodyErrorMsg, false),
    ("REQBODY_PROCESSOR", Var::ReqbodyProcessor, false),
    ("REQBODY_PROCESSOR_ERROR", Var::ReqbodyProcessorError, false),
    (
        "REQBODY_PROCESSOR_ERROR_MSG",
        Var::ReqbodyProcessorErrorMsg,
        false,
    ),
    ("URLENCODED_ERROR", Var::UrlencodedError, false),
    ("INBOUND_DATA_ERROR", Var::InboundDataError, false),
    ("OUTBOUND_DATA_ERROR", Var::OutboundDataError, false),
    ("FULL_REQUEST", Var::FullRequest, false),
    ("FULL_REQUEST_LENGTH", Var::FullRequestLength, false),
    ("FILES", Var::Files, true),
    ("FILES_NAMES", Var::FilesNames, true),
    ("FILES_SIZES", Var::FilesSizes, true),
    ("FILES_COMBINED_SIZE", Var::FilesCombinedSize, false),
    ("FILES_TMPNAMES", Var::FilesTmpNames, true),
    ("MULTIPART_FILENAME", Var::MultipartFilename, true),
    ("MULTIPART_NAME", Var::MultipartName, true),
    ("MULTIPART_PART_HEADERS", Var::MultipartPartHeaders, true),
    ("MULTIPART_STRICT_ERROR", Var::MultipartStrictError, false),
    (
        "MULTIPART_BOUNDARY_QUOTED",
        Var::MultipartBoundaryQuoted,
        false,
    ),
    (
        "MULTIPART_BOUNDARY_WHITESPACE",
        Var::MultipartBoundaryWhitespace,
        false,
    ),
    ("MULTIPART_DATA_BEFORE", Var::MultipartDataBefore, false),
    ("MULTIPART_DATA_AFTER", Var::MultipartDataAfter, false),
    (
        "MULTIPART_HEADER_FOLDING",
        Var::MultipartHeaderFolding,
        false,
    ),
    ("MULTIPART_LF_LINE", Var::MultipartLfLine, false),
    ("MULTIPART_CRLF_LF_LINES", Var::MultipartCrlfLfLines, false),
    (
        "MULTIPART_MISSING_SEMICOLON",
        Var::MultipartMissingSemicolon,
        false,
    ),
    (
        "MULTIPART_INVALID_QUOTING",
        Var::MultipartInvalidQuoting,
        false,
    ),
    ("MULTIPART_INVALID_PART", Var::MultipartInvalidPart, false),
    (
        "MULTIPART_INVALID_HEADER_FOLDING",
        Var::MultipartInvalidHeaderFolding,
        false,
    ),
    (
        "MULTIPART_FILE_LIMIT_EXCEEDED",
        Var::MultipartFileLimitExceeded,
        false,
    ),
    (
        "MULTIPART_DUPLICATE_PART_HEADER",
        Var::MultipartDuplicatePartHeader,
        false,
    ),
    (
        "MULTIPART_UNMATCHED_BOUNDARY",
        Var::MultipartUnmatchedBoundary,
        false,
    ),
    ("INPUTS", Var::Inputs, true),
    ("INPUTS_DECODED", Var::InputsDecoded, true),
    ("DETECTIONS", Var::Detections, true),
    ("XML", Var::Xml, true),
    ("TX", Var::Tx, true),
    ("IP", Var::Ip, true),
    ("GLOBAL", Var::Global, true),
    ("SESSION", Var::Session, true),
    ("USER", Var::User, true),
    ("RESOURCE", Var::Resource, true),
    ("GEO", Var::Geo, true),
    ("RESPONSE_HEADERS", Var::ResponseHeaders, true),
    ("RESPONSE_HEADERS_NAMES", Var::ResponseHeadersNames, true),
    ("RESPONSE_BODY", Var::ResponseBody, false),
    ("RESPONSE_STATUS", Var::ResponseStatus, false),
    ("RESPONSE_PROTOCOL", Var::ResponseProtocol, false),
    ("RESPONSE_CONTENT_TYPE", Var::ResponseContentType, false),
    ("RESPONSE_CONTENT_LENGTH", Var::ResponseContentLength, false),
    ("STATUS_LINE", Var::StatusLine, false),
    ("MATCHED_VAR", Var::MatchedVar, false),
    ("MATCHED_VARS", Var::MatchedVars, true),
    ("MATCHED_VAR_NAME", Var::MatchedVarName, false),
    ("MATCHED_VARS_NAMES", Var::MatchedVarsNames, true),
    ("REMOTE_ADDR", Var::RemoteAddr, false),
    ("REMOTE_PORT", Var::RemotePort, false),
    ("REMOTE_HOST", Var::RemoteHost, false),
    ("REMOTE_USER", Var::RemoteUser, false),
    ("PEER_ADDR", Var::PeerAddr, false),
    ("PEER_PORT", Var::PeerPort, false),
    ("SERVER_NAME", Var::ServerName, false),
    ("SERVER_PORT", Var::ServerPort, false),
    ("SERVER_ADDR", Var::ServerAddr, false),
    ("AUTH_TYPE", Var::AuthType, false),
    ("PATH_INFO", Var::PathInfo, false),
    ("UNIQUE_ID", Var::UniqueId, false),
    ("DURATION", Var::Duration, false),
    ("HIGHEST_SEVERITY", Var::HighestSeverity, false),
    ("TIME", Var::Time, false),
    ("TIME_DAY", Var::TimeDay, false),
    ("TIME_EPOCH", Var::TimeEpoch, false),
    ("TIME_HOUR", Var::TimeHour, false),
    ("TIME_MIN", Var::TimeMin, false),
    ("TIME_MON", Var::TimeMon, false),
    ("TIME_SEC", Var::TimeSec, false),
    ("TIME_WDAY", Var::TimeWday, false),
    ("TIME_YEAR", Var::TimeYear, false),
    ("ENV", Var::Env, true),
    ("RULE", Var::Rule, true),
    ("USERID", Var::Userid, false),
    ("SESSIONID", Var::Sessionid, false),
    ("WEBSERVER_ERROR_LOG", Var::WebserverErrorLog, false),
];

impl Var {
    /// Looks a variable up by its SecLang name (case-insensitive).
    pub fn from_name(name: &str) -> Option<Var> {
        TABLE
            .iter()
            .find(|(n, _, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v, _)| *v)
    }

    /// The SecLang name, upper-case.
    pub fn name(self) -> &'static str {
        BY_VAR.get(self as usize).map_or("?", |e| e.0)
    }

    /// True for collections, which hold named values and accept a `:key` selector.
    pub fn is_collection(self) -> bool {
        BY_VAR.get(self as usize).is_some_and(|e| e.1)
    }

    /// The persistent or transaction collection this variable names, if any.
    pub fn collection_name(self) -> Option<&'static str> {
        match self {
            Var::Tx => Some("TX"),
            Var::Ip => Some("IP"),
            Var::Global => Some("GLOBAL"),
            Var::Session => Some("SESSION"),
            Var::User => Some("USER"),
            Var::Resource => Some("RESOURCE"),
            _ => None,
        }
    }
}

/// How a target picks keys inside a collection.
#[derive(Debug, Clone)]
pub enum KeySelector {
    /// Every key.
    All,
    /// One key, compared case-insensitively (ModSecurity v3 compares collection keys
    /// without regard to case). Stored lower-case.
    Exact(Vec<u8>),
    /// Keys matching a regular expression, case-insensitive as in ModSecurity v3.
    Regex(Regex),
    /// Keys containing a literal, compared case-insensitively: a selector regex with
    /// no operators (`/__utm/`, `/paramcounter_.*/`), matched without the regex
    /// engine. Stored lower-case.
    Contains(Vec<u8>),
    /// Keys starting with a literal, compared case-insensitively: a selector regex
    /// `^` followed by a literal (`/^header_name_920450_/`). Stored lower-case.
    Prefix(Vec<u8>),
    /// An XPath expression for the XML variable: `/*` (element text) or `//@*`
    /// (attribute values).
    XPath(XPath),
}

/// The XPath forms Palisade evaluates on XML bodies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XPath {
    /// `/*`: the text of every element.
    Texts,
    /// `//@*`: every attribute value.
    Attributes,
}

impl KeySelector {
    /// True when `key` is selected.
    #[inline]
    pub fn matches(&self, key: &[u8]) -> bool {
        match self {
            KeySelector::All | KeySelector::XPath(_) => true,
            KeySelector::Exact(k) => k.eq_ignore_ascii_case(key),
            other => other.matches_pattern(key),
        }
    }

    #[inline(never)]
    fn matches_pattern(&self, key: &[u8]) -> bool {
        match self {
            KeySelector::Regex(r) => r.is_match(key),
            KeySelector::Contains(l) => {
                l.is_empty() || key.windows(l.len()).any(|w| w.eq_ignore_ascii_case(l))
            }
            KeySelector::Prefix(l) => key
                .get(..l.len())
                .is_some_and(|p| p.eq_ignore_ascii_case(l)),
            KeySelector::All | KeySelector::XPath(_) => true,
            KeySelector::Exact(k) => k.eq_ignore_ascii_case(key),
        }
    }
}

/// One compiled target of a rule.
#[derive(Debug, Clone)]
pub struct Target {
    /// The variable.
    pub var: Var,
    /// Which keys of a collection.
    pub selector: KeySelector,
    /// `&`: the rule sees the number of selected values instead of the values.
    pub count: bool,
    /// The selector as written, for logs (`ARGS:foo`).
    pub written: String,
}

/// An exclusion (`!ARGS:foo`, or a `ctl:ruleRemoveTargetById` target).
#[derive(Debug, Clone)]
pub struct Exclusion {
    /// The variable whose values are excluded.
    pub var: Var,
    /// Which keys.
    pub selector: KeySelector,
}

impl Exclusion {
    /// True when a value of `var` named `key` is excluded.
    pub fn excludes(&self, var: Var, key: &[u8]) -> bool {
        self.var == var && self.selector.matches(key)
    }
}

/// Compiles a selector for `var`. Errors name what is wrong.
pub fn compile_selector(
    var: Var,
    selector: Option<&seclang::Selector>,
) -> Result<KeySelector, String> {
    match selector {
        None => Ok(KeySelector::All),
        Some(_) if !var.is_collection() => {
            Err(format!("variable {} takes no selector", var.name()))
        }
        Some(seclang::Selector::Key(k)) if var == Var::Xml => match k.as_str() {
            "/*" => Ok(KeySelector::XPath(XPath::Texts)),
            "//@*" => Ok(KeySelector::XPath(XPath::Attributes)),
            other => Err(format!(
                "XPath expression {other:?} is not supported (only /* and //@*)"
            )),
        },
        Some(seclang::Selector::Key(k)) => {
            Ok(KeySelector::Exact(k.to_ascii_lowercase().into_bytes()))
        }
        Some(seclang::Selector::Regex(r)) => {
            let re = RegexBuilder::new(r)
                .unicode(false)
                .case_insensitive(true)
                .build()
                .map_err(|e| format!("bad selector regex /{r}/: {e}"))?;
            Ok(literal_selector(r).unwrap_or(KeySelector::Regex(re)))
        }
    }
}

/// The literal form of a selector regex that is a plain word, optionally anchored at
/// the start and optionally followed by `.*` (which can match nothing, so it does
/// not change which keys match). `None` for anything else.
fn literal_selector(pattern: &str) -> Option<KeySelector> {
    let (anchored, rest) = match pattern.strip_prefix('^') {
        Some(r) => (true, r),
        None => (false, pattern),
    };
    let word = rest.strip_suffix(".*").unwrap_or(rest);
    if word.is_empty()
        || !word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return None;
    }
    let lower = word.to_ascii_lowercase().into_bytes();
    Some(if anchored {
        KeySelector::Prefix(lower)
    } else {
        KeySelector::Contains(lower)
    })
}

/// Formats a variable as written, for logs: `ARGS`, `ARGS:foo`, `ARGS:/re/`.
pub fn written(def: &seclang::VariableDef) -> String {
    match &def.selector {
        None => def.name.clone(),
        Some(seclang::Selector::Key(k)) => format!("{}:{}", def.name, k),
        Some(seclang::Selector::Regex(r)) => format!("{}:/{}/", def.name, r),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for (name, var, _) in TABLE {
            assert_eq!(Var::from_name(name), Some(*var));
            assert_eq!(var.name(), *name);
        }
        assert_eq!(Var::from_name("args"), Some(Var::Args));
        assert_eq!(Var::from_name("NOPE"), None);
    }

    /// Literal selector regexes skip the regex engine and must match exactly the keys
    /// the regex does.
    #[test]
    fn literal_selectors_agree_with_their_regex() {
        // (pattern, whether it is matched as a literal)
        let patterns = [
            ("__utm", true),
            ("^header_name_920450_", true),
            ("paramcounter_.*", true),
            ("^rfi_parameter_.*", true),
            ("a-b", true),
            ("x", true),
            ("MULTIPART_HEADERS_CONTENT_TYPES_*", false),
            ("^a.b", false),
            ("foo$", false),
        ];
        let keys: [&[u8]; 14] = [
            b"",
            b"__utma",
            b"x__UTMz",
            b"_utm",
            b"header_name_920450_x-forwarded-host",
            b"HEADER_NAME_920450_",
            b"xheader_name_920450_",
            b"paramcounter_",
            b"PARAMCOUNTER_1",
            b"rfi_parameter_q",
            b"a-b",
            b"A-Bc",
            b"multipart_headers_content_types_x",
            b"aXb foo",
        ];
        for (p, literal) in patterns {
            let sel = compile_selector(Var::Tx, Some(&seclang::Selector::Regex(p.into())))
                .expect("compiles");
            let re = RegexBuilder::new(p)
                .unicode(false)
                .case_insensitive(true)
                .build()
                .expect("valid");
            let is_literal = matches!(sel, KeySelector::Contains(_) | KeySelector::Prefix(_));
            assert_eq!(is_literal, literal, "{p}");
            for k in keys {
                assert_eq!(sel.matches(k), re.is_match(k), "/{p}/ on {k:?}");
            }
        }
    }

    #[test]
    fn selectors() {
        let s = compile_selector(Var::Args, Some(&seclang::Selector::Key("Foo".into()))).unwrap();
        assert!(s.matches(b"fOO"));
        assert!(!s.matches(b"foo2"));
        let r =
            compile_selector(Var::Args, Some(&seclang::Selector::Regex("^id_".into()))).unwrap();
        assert!(r.matches(b"ID_x"));
        assert!(
            compile_selector(Var::RequestUri, Some(&seclang::Selector::Key("x".into()))).is_err()
        );
        assert!(compile_selector(Var::Xml, Some(&seclang::Selector::Key("/a/b".into()))).is_err());
    }
}
