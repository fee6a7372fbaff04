//! XML request bodies, for the `XML:/*` and `XML://@*` targets.
//!
//! ModSecurity v3 hands the body to libxml2 and evaluates XPath over the tree:
//! `XML:/*` yields the text content of the root element (all character data below
//! it, CDATA included, concatenated) and `XML://@*` every attribute value. This
//! processor checks well-formedness with `quick-xml` and collects:
//! - [`XmlDoc::content`]: the root element's whole text content, as `XML:/*` gives it;
//! - [`XmlDoc::texts`]: each run of character data (text, references and CDATA between
//!   two pieces of markup), in document order, skipping runs of only whitespace;
//! - [`XmlDoc::attributes`]: every attribute value, unescaped and whitespace-normalised
//!   as XML requires (namespace declarations are not attributes in XPath and are left
//!   out).
//!
//! Entities: the five predefined ones and character references are decoded. Nothing
//! external is ever loaded. Entities declared in an internal DTD subset are not
//! expanded: the reference stays in the text as written (`&name;`), which also rules
//! out entity-expansion bombs. A reference to an undeclared entity is a
//! well-formedness error unless the document names an external DTD (which is never
//! fetched), in which case it too stays as written.
//!
//! Input is taken as UTF-8 unless the XML declaration names another encoding, in
//! which case bytes are passed through unconverted.

use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};

/// What the XML processor exposes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct XmlDoc {
    /// Text content of every element, in document order (`XML:/*`).
    pub texts: Vec<Vec<u8>>,
    /// Every attribute value (`XML://@*`).
    pub attributes: Vec<Vec<u8>>,
    /// All character data inside the root element concatenated, whitespace included:
    /// the single value ModSecurity's `XML:/*` yields.
    pub content: Vec<u8>,
}

/// Why an XML body was refused (sets REQBODY_ERROR).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("XML parsing error: {0}")]
pub struct XmlError(pub String);

/// Parses an XML document. External entities are never resolved.
pub fn parse(input: &[u8]) -> Result<XmlDoc, XmlError> {
    let input = input.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(input);
    if let Some(at) = input
        .iter()
        .position(|&b| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r'))
    {
        return Err(fail(at, "invalid character"));
    }
    let mut reader = Reader::from_reader(input);
    reader.config_mut().check_end_names = true;
    reader.config_mut().check_comments = true;

    let mut doc = XmlDoc::default();
    let mut b = Builder::default();
    loop {
        let at = reader.buffer_position() as usize;
        let event = reader
            .read_event()
            .map_err(|e| fail(reader.error_position() as usize, &e.to_string()))?;
        match event {
            Event::Decl(decl) => {
                if at != 0 {
                    return Err(fail(
                        at,
                        "XML declaration allowed only at the start of the document",
                    ));
                }
                let utf8 = match decl.encoding() {
                    Some(Ok(enc)) => {
                        let enc = enc.to_ascii_lowercase();
                        matches!(enc.as_slice(), b"utf-8" | b"utf8" | b"us-ascii" | b"ascii")
                    }
                    _ => true,
                };
                if utf8 && std::str::from_utf8(input).is_err() {
                    return Err(fail(at, "input is not proper UTF-8"));
                }
                b.checked_utf8 = true;
            }
            Event::DocType(dt) => {
                if b.root_seen || b.dtd.is_some() {
                    return Err(fail(at, "misplaced DOCTYPE declaration"));
                }
                b.dtd = Some(Dtd::scan(&dt));
            }
            Event::Start(e) => {
                b.start_element(at, &e, &mut doc)?;
                b.depth += 1;
            }
            Event::Empty(e) => b.start_element(at, &e, &mut doc)?,
            Event::End(_) => {
                b.flush(&mut doc);
                b.depth = b.depth.saturating_sub(1);
            }
            Event::Text(t) => {
                let raw: &[u8] = &t;
                if b.depth == 0 {
                    if !raw.iter().all(u8::is_ascii_whitespace) {
                        return Err(fail(at, "content outside the root element"));
                    }
                    continue;
                }
                if memchr::memmem::find(raw, b"]]>").is_some() {
                    return Err(fail(at, "sequence ']]>' not allowed in content"));
                }
                b.text(raw, &mut doc);
            }
            Event::CData(c) => {
                if b.depth == 0 {
                    return Err(fail(at, "CDATA outside the root element"));
                }
                b.text(&c, &mut doc);
            }
            Event::GeneralRef(r) => {
                if b.depth == 0 {
                    return Err(fail(at, "reference outside the root element"));
                }
                let mut out = Vec::new();
                b.reference(at, &r, &mut out)?;
                b.run.extend_from_slice(&out);
                doc.content.extend_from_slice(&out);
            }
            Event::Comment(_) => b.flush(&mut doc),
            Event::PI(pi) => {
                if pi.target().eq_ignore_ascii_case(b"xml") {
                    return Err(fail(
                        at,
                        "XML declaration allowed only at the start of the document",
                    ));
                }
                b.flush(&mut doc);
            }
            Event::Eof => break,
        }
        if !b.checked_utf8 {
            // No declaration: the document is UTF-8 (XML's default).
            if std::str::from_utf8(input).is_err() {
                return Err(fail(0, "input is not proper UTF-8"));
            }
            b.checked_utf8 = true;
        }
    }
    if b.depth != 0 {
        return Err(fail(
            input.len(),
            "premature end of data: an element is not closed",
        ));
    }
    if !b.root_seen {
        return Err(fail(input.len(), "document is empty"));
    }
    Ok(doc)
}

fn fail(at: usize, what: &str) -> XmlError {
    XmlError(format!(
        "XML: Failed parsing document: {what} (at byte {at})"
    ))
}

/// What the internal DTD subset tells us.
#[derive(Default)]
struct Dtd {
    /// Names of the general entities it declares.
    entities: Vec<Vec<u8>>,
    /// Whether it names an external subset (which is never loaded).
    external: bool,
}

impl Dtd {
    fn scan(raw: &[u8]) -> Dtd {
        let mut dtd = Dtd::default();
        // `<!DOCTYPE root SYSTEM "uri" [...]>`: the external id comes before any `[`.
        let head = &raw[..memchr::memchr(b'[', raw).unwrap_or(raw.len())];
        dtd.external = head
            .split(u8::is_ascii_whitespace)
            .any(|w| w == b"SYSTEM" || w == b"PUBLIC");
        let mut rest = raw;
        while let Some(at) = memchr::memmem::find(rest, b"<!ENTITY") {
            rest = &rest[at + 8..];
            let decl = rest.trim_ascii_start();
            if decl.first() == Some(&b'%') {
                continue; // a parameter entity, not usable in content
            }
            let end = decl
                .iter()
                .position(u8::is_ascii_whitespace)
                .unwrap_or(decl.len());
            if end > 0 {
                dtd.entities.push(decl[..end].to_vec());
            }
        }
        dtd
    }
}

#[derive(Default)]
struct Builder {
    depth: usize,
    root_seen: bool,
    dtd: Option<Dtd>,
    checked_utf8: bool,
    /// The run of character data since the last markup.
    run: Vec<u8>,
}

impl Builder {
    fn start_element(
        &mut self,
        at: usize,
        e: &BytesStart<'_>,
        doc: &mut XmlDoc,
    ) -> Result<(), XmlError> {
        if self.depth == 0 {
            if self.root_seen {
                return Err(fail(at, "extra content at the end of the document"));
            }
            self.root_seen = true;
        }
        self.flush(doc);
        if !valid_name(e.name().as_ref()) {
            return Err(fail(at, "invalid element name"));
        }
        for attr in e.attributes() {
            let attr = attr.map_err(|err| fail(at, &err.to_string()))?;
            let key = attr.key.as_ref();
            if !valid_name(key) {
                return Err(fail(at, "invalid attribute name"));
            }
            if memchr::memchr(b'<', &attr.value).is_some() {
                return Err(fail(at, "'<' in attribute value"));
            }
            let mut value = Vec::with_capacity(attr.value.len());
            self.unescape_attr(at, &attr.value, &mut value)?;
            if key == b"xmlns" || key.starts_with(b"xmlns:") {
                continue;
            }
            doc.attributes.push(value);
        }
        Ok(())
    }

    /// Adds character data to the current run and to the root's content, with XML's
    /// line-end normalisation (CRLF and lone CR become LF).
    fn text(&mut self, raw: &[u8], doc: &mut XmlDoc) {
        let start = self.run.len();
        push_normalised_lines(raw, &mut self.run);
        doc.content.extend_from_slice(&self.run[start..]);
    }

    /// Ends the current run of character data, keeping it unless it is only whitespace.
    fn flush(&mut self, doc: &mut XmlDoc) {
        if !self.run.is_empty() {
            let run = std::mem::take(&mut self.run);
            if !run.iter().all(u8::is_ascii_whitespace) {
                doc.texts.push(run);
            }
        }
    }

    /// Appends what the reference `&name;` (given without `&` and `;`) stands for.
    fn reference(&self, at: usize, name: &[u8], out: &mut Vec<u8>) -> Result<(), XmlError> {
        if let Some(num) = name.strip_prefix(b"#") {
            let code = if let Some(hex) = num.strip_prefix(b"x") {
                parse_radix(hex, 16)
            } else {
                parse_radix(num, 10)
            };
            let ch = code.filter(|&c| is_xml_char(c)).and_then(char::from_u32);
            let Some(ch) = ch else {
                return Err(fail(at, "invalid character reference"));
            };
            let mut buf = [0u8; 4];
            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
            return Ok(());
        }
        let predefined: Option<u8> = match name {
            b"lt" => Some(b'<'),
            b"gt" => Some(b'>'),
            b"amp" => Some(b'&'),
            b"apos" => Some(b'\''),
            b"quot" => Some(b'"'),
            _ => None,
        };
        if let Some(c) = predefined {
            out.push(c);
            return Ok(());
        }
        if !valid_name(name) {
            return Err(fail(at, "invalid entity reference"));
        }
        let known = self
            .dtd
            .as_ref()
            .is_some_and(|d| d.external || d.entities.iter().any(|e| e == name));
        if !known {
            return Err(fail(at, "undefined entity"));
        }
        // Declared (or possibly declared externally): left unexpanded, as written.
        out.push(b'&');
        out.extend_from_slice(name);
        out.push(b';');
        Ok(())
    }

    /// Unescapes an attribute value and applies attribute-value normalisation
    /// (each literal tab, CR, LF or CRLF becomes one space).
    fn unescape_attr(&self, at: usize, raw: &[u8], out: &mut Vec<u8>) -> Result<(), XmlError> {
        let mut i = 0;
        while i < raw.len() {
            match raw[i] {
                b'&' => {
                    let Some(len) = memchr::memchr(b';', &raw[i + 1..]) else {
                        return Err(fail(at, "unterminated entity reference in attribute"));
                    };
                    self.reference(at, &raw[i + 1..i + 1 + len], out)?;
                    i += len + 2;
                }
                b'\r' => {
                    out.push(b' ');
                    i += if raw.get(i + 1) == Some(&b'\n') { 2 } else { 1 };
                }
                b'\t' | b'\n' => {
                    out.push(b' ');
                    i += 1;
                }
                c => {
                    out.push(c);
                    i += 1;
                }
            }
        }
        Ok(())
    }
}

fn push_normalised_lines(raw: &[u8], out: &mut Vec<u8>) {
    let mut rest = raw;
    while let Some(at) = memchr::memchr(b'\r', rest) {
        out.extend_from_slice(&rest[..at]);
        out.push(b'\n');
        rest = &rest[at + 1..];
        if rest.first() == Some(&b'\n') {
            rest = &rest[1..];
        }
    }
    out.extend_from_slice(rest);
}

fn parse_radix(digits: &[u8], radix: u32) -> Option<u32> {
    if digits.is_empty() || digits.len() > 8 {
        return None;
    }
    let mut v: u32 = 0;
    for &d in digits {
        v = v
            .checked_mul(radix)?
            .checked_add(char::from(d).to_digit(radix)?)?;
    }
    Some(v)
}

fn is_xml_char(c: u32) -> bool {
    matches!(c, 0x9 | 0xA | 0xD | 0x20..=0xD7FF | 0xE000..=0xFFFD | 0x1_0000..=0x10_FFFF)
}

/// A loose check of XML name syntax on bytes (non-ASCII bytes are accepted).
fn valid_name(name: &[u8]) -> bool {
    let Some((&first, rest)) = name.split_first() else {
        return false;
    };
    let start = |c: u8| c.is_ascii_alphabetic() || c == b'_' || c == b':' || c >= 0x80;
    start(first)
        && rest
            .iter()
            .all(|&c| start(c) || c.is_ascii_digit() || c == b'-' || c == b'.')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strs(v: &[Vec<u8>]) -> Vec<String> {
        v.iter()
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect()
    }

    #[test]
    fn texts_attributes_and_content() {
        let doc = parse(b"<?xml version=\"1.0\"?>\n<root a=\"1\">\n  <x b='two'>hello</x>\n  <y>wor<![CDATA[<ld>]]></y>\n</root>\n")
            .unwrap();
        assert_eq!(strs(&doc.texts), vec!["hello", "wor<ld>"]);
        assert_eq!(strs(&doc.attributes), vec!["1", "two"]);
        assert_eq!(
            String::from_utf8_lossy(&doc.content),
            "\n  hello\n  wor<ld>\n"
        );
    }

    #[test]
    fn crs_cases() {
        // 942362 test 34: an escaped quote in an attribute.
        let doc = parse(
            b"<?xml version=\"1.0\"?><root><a probe=\"1234 AS &quot;foobar&quot; FROM tablevar2=whatever\"></a></root>",
        )
        .unwrap();
        assert_eq!(
            strs(&doc.attributes),
            vec!["1234 AS \"foobar\" FROM tablevar2=whatever"]
        );
        assert!(doc.texts.is_empty());
        // 944120: the payload in element text several levels down.
        let doc = parse(b"<?xml version=\"1.0\"?><xml><l1><l2><l3><element attribute_name=\"attribute_value\">ProcessBuilder.evil.clonetransformer</element></l3></l2></l1></xml>").unwrap();
        assert_eq!(
            strs(&doc.texts),
            vec!["ProcessBuilder.evil.clonetransformer"]
        );
        assert_eq!(strs(&doc.attributes), vec!["attribute_value"]);
        // 931100 test: a value that only looks encoded.
        let doc = parse(b"<?xml version=\"1.0\" encoding=\"UTF-8\"?><catalog><tag>ftp%3A%2F%2F1.1.1.1</tag></catalog>")
            .unwrap();
        assert_eq!(strs(&doc.texts), vec!["ftp%3A%2F%2F1.1.1.1"]);
    }

    #[test]
    fn references_are_decoded() {
        let doc = parse(b"<r t=\"a&#x9;b&#65;\tc\r\nd\">&lt;x&gt; &amp; &#169;</r>").unwrap();
        assert_eq!(strs(&doc.texts), vec!["<x> & \u{a9}"]);
        assert_eq!(strs(&doc.attributes), vec!["a\tbA c d"]);
    }

    #[test]
    fn namespace_declarations_are_not_attributes() {
        let doc = parse(b"<s:r xmlns:s=\"urn:x\" xmlns=\"urn:y\" s:k=\"v\"/>").unwrap();
        assert_eq!(strs(&doc.attributes), vec!["v"]);
    }

    #[test]
    fn line_ends_are_normalised() {
        let doc = parse(b"<r>a\r\nb\rc</r>").unwrap();
        assert_eq!(strs(&doc.texts), vec!["a\nb\nc"]);
    }

    #[test]
    fn comments_split_runs_but_not_content() {
        let doc = parse(b"<r>ab<!-- c -->de<?pi x?>f</r>").unwrap();
        assert_eq!(strs(&doc.texts), vec!["ab", "de", "f"]);
        assert_eq!(doc.content, b"abdef");
    }

    #[test]
    fn malformed_documents_are_refused() {
        for bad in [
            &b"<a><b></a></b>"[..],
            b"<a>",
            b"</a>",
            b"",
            b"   ",
            b"text",
            b"<a></a><b></b>",
            b"<a></a>tail",
            b"<a x=1></a>",
            b"<a x=\"1\" x=\"2\"></a>",
            b"<a>&nope;</a>",
            b"<a>&#0;</a>",
            b"<a>&#xFFFFFFFFF;</a>",
            b"<a>x]]>y</a>",
            b"<a>\x01</a>",
            b"<a>\xff</a>",
            b"<a x=\"<\"/>",
            b"<1a/>",
            b"<a><!-- x -- y --></a>",
            b"<a/><?xml version=\"1.0\"?>",
            b"<a><![CDATA[x</a>",
            b"<a>&amp</a>",
        ] {
            assert!(
                parse(bad).is_err(),
                "accepted {:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let e = parse(b"<a></b>").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("XML parsing error: XML: Failed parsing document"),
            "{e}"
        );
    }

    #[test]
    fn internal_entities_stay_unexpanded() {
        let lol = b"<?xml version=\"1.0\"?><!DOCTYPE lolz [<!ENTITY lol \"lol\"><!ENTITY lol2 \"&lol;&lol;&lol;&lol;\">]><lolz>&lol2;</lolz>";
        let doc = parse(lol).unwrap();
        assert_eq!(strs(&doc.texts), vec!["&lol2;"]);
    }

    #[test]
    fn external_entities_are_never_loaded() {
        let xxe = b"<?xml version=\"1.0\"?><!DOCTYPE r [<!ENTITY xxe SYSTEM \"file:///etc/passwd\">]><r>&xxe;</r>";
        let doc = parse(xxe).unwrap();
        assert_eq!(strs(&doc.texts), vec!["&xxe;"]);
        let ext = b"<!DOCTYPE r SYSTEM \"http://example.com/r.dtd\"><r>&ent;</r>";
        assert_eq!(strs(&parse(ext).unwrap().texts), vec!["&ent;"]);
    }

    #[test]
    fn other_encodings_pass_bytes_through() {
        let doc = parse(b"<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><r>caf\xe9</r>").unwrap();
        assert_eq!(doc.texts, vec![b"caf\xe9".to_vec()]);
        assert!(parse(b"\xEF\xBB\xBF<r>x</r>").is_ok());
        assert!(parse(b"<?xml version=\"1.0\"?><r>caf\xe9</r>").is_err());
    }

    #[test]
    fn fuzz_mutations_never_panic() {
        use crate::body::fuzz::{XorShift, mutate};
        const PIECES: &[&[u8]] = &[
            b"<",
            b">",
            b"</",
            b"/>",
            b"&",
            b";",
            b"&amp;",
            b"&#",
            b"&#x",
            b"\"",
            b"'",
            b"=",
            b"<![CDATA[",
            b"]]>",
            b"<!--",
            b"-->",
            b"<?",
            b"?>",
            b"<!DOCTYPE r [<!ENTITY e \"x\">]>",
            b"\r",
            b"\xff",
            b" ",
        ];
        let seeds: [&[u8]; 2] = [
            b"<?xml version=\"1.0\"?><root a=\"1\" b='&quot;2&#65;'><x>t&lt;e<![CDATA[c]]>xt</x><!-- c --><y/></root>",
            b"<!DOCTYPE r [<!ENTITY e \"v\">]><r xmlns:p=\"u\" p:k=\"v\">&e;<?pi d?></r>",
        ];
        let mut rng = XorShift(0x2545_F491_4F6C_DD1D);
        for round in 0..4000 {
            let doc = mutate(&mut rng, seeds[round % seeds.len()], PIECES);
            if let Ok(out) = parse(&doc) {
                let text: usize = out.texts.iter().map(Vec::len).sum();
                assert!(text <= doc.len() && out.content.len() <= doc.len());
            }
        }
    }

    #[test]
    fn deep_nesting_is_fine() {
        let depth = 100_000;
        let mut doc = "<a>".repeat(depth).into_bytes();
        doc.extend_from_slice(b"x");
        doc.extend_from_slice("</a>".repeat(depth).as_bytes());
        assert_eq!(strs(&parse(&doc).unwrap().texts), vec!["x"]);
    }
}
