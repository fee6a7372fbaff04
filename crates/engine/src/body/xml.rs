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
//! Entities: the five predefined ones and character references are decoded. General
//! entities declared in the internal DTD subset are expanded for inspection, as an
//! application whose parser expands them reads the document: in content, the
//! replacement text is parsed as content (its elements, attributes and text count
//! like the document's own); in attribute values, it is unescaped and normalised.
//! Parameter entities declared in the internal subset are expanded there, so the
//! declarations they carry count too. Expansion is bounded: all the replacement text
//! expanded for one document may add up to at most [`ENTITY_EXPANSION_LIMIT`] bytes,
//! entities may nest at most [`ENTITY_NESTING_LIMIT`] deep, and an entity may not
//! refer to itself; going over is a parse error (REQBODY_ERROR), which defeats
//! entity-expansion bombs.
//!
//! Nothing external is ever loaded: a reference to an external entity (`SYSTEM` or
//! `PUBLIC`) stays in the text as written (`&name;`). A reference to an undeclared
//! entity is a well-formedness error unless the document names an external DTD or
//! refers to an external parameter entity (neither is fetched), in which case it too
//! stays as written.
//!
//! Input is taken as UTF-8 unless the XML declaration names another encoding, in
//! which case bytes are passed through unconverted.

use std::collections::HashMap;

use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};

/// Most bytes of entity replacement text expanded for one document (each expansion
/// counts its replacement text, so nested expansions count at every level).
pub const ENTITY_EXPANSION_LIMIT: usize = 1 << 20;

/// Deepest nesting of entity references within entity replacement text.
pub const ENTITY_NESTING_LIMIT: usize = 16;

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

fn new_reader(input: &[u8]) -> Reader<&[u8]> {
    let mut reader = Reader::from_reader(input);
    reader.config_mut().check_end_names = true;
    reader.config_mut().check_comments = true;
    reader
}

/// Parses an XML document. External entities are never resolved.
pub fn parse(input: &[u8]) -> Result<XmlDoc, XmlError> {
    parse_partial(input).map_err(|(e, _)| e)
}

/// As [`parse`], but a document that is not well formed also gives what was parsed
/// before the error (the text and attributes up to it), as libxml2 leaves its partial
/// tree to ModSecurity v3, whose `XML:/*` then still yields that text: `None` when no
/// root element had started.
pub fn parse_partial(input: &[u8]) -> Result<XmlDoc, (XmlError, Option<XmlDoc>)> {
    let input = input.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(input);
    let mut doc = XmlDoc::default();
    let mut b = Builder::default();
    // A byte XML never allows is an error wherever it is; the text before it is
    // still parsed (libxml2 stops there).
    let invalid = input
        .iter()
        .position(|&b| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r'));
    let parsed = parse_into(&input[..invalid.unwrap_or(input.len())], &mut doc, &mut b);
    let error = match (invalid, parsed) {
        (Some(at), _) => fail(at, "invalid character"),
        (None, Ok(())) => return Ok(doc),
        (None, Err(e)) => e,
    };
    b.flush(&mut doc);
    Err((error, b.root_seen.then_some(doc)))
}

fn parse_into(input: &[u8], doc: &mut XmlDoc, b: &mut Builder) -> Result<(), XmlError> {
    // The DOCTYPE declaration is read here, not by quick-xml (whose reader does not
    // honour quoted `>` in it): the reader sees the prolog before it, then the rest
    // of the document after it.
    let mut doctype = prolog_doctype(input);
    let mut base = 0;
    let mut reader = new_reader(&input[..doctype.unwrap_or(input.len())]);

    loop {
        let at = base + reader.buffer_position() as usize;
        let event = reader
            .read_event()
            .map_err(|e| fail(base + reader.error_position() as usize, &e.to_string()))?;
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
            Event::DocType(_) => return Err(fail(at, "misplaced DOCTYPE declaration")),
            Event::Start(e) => {
                b.start_element(at, &e, doc)?;
                b.depth += 1;
            }
            Event::Empty(e) => b.start_element(at, &e, doc)?,
            Event::End(_) => {
                b.flush(doc);
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
                b.text(raw, doc);
            }
            Event::CData(c) => {
                if b.depth == 0 {
                    return Err(fail(at, "CDATA outside the root element"));
                }
                b.text(&c, doc);
            }
            Event::GeneralRef(r) => {
                if b.depth == 0 {
                    return Err(fail(at, "reference outside the root element"));
                }
                b.content_ref(at, &r, doc)?;
            }
            Event::Comment(_) => b.flush(doc),
            Event::PI(pi) => {
                if pi.target().eq_ignore_ascii_case(b"xml") {
                    return Err(fail(
                        at,
                        "XML declaration allowed only at the start of the document",
                    ));
                }
                b.flush(doc);
            }
            Event::Eof => match doctype.take() {
                Some(start) => {
                    let (dtd, end) = Dtd::read(input, start, &mut b.expansion)?;
                    b.dtd = Some(dtd);
                    base = end;
                    reader = new_reader(&input[end..]);
                }
                None => break,
            },
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
    Ok(())
}

fn fail(at: usize, what: &str) -> XmlError {
    XmlError(format!(
        "XML: Failed parsing document: {what} (at byte {at})"
    ))
}

/// Where the DOCTYPE declaration starts, if the prolog (whitespace, the XML
/// declaration, comments and processing instructions) is followed by one.
fn prolog_doctype(input: &[u8]) -> Option<usize> {
    let mut i = 0;
    loop {
        while input.get(i).is_some_and(u8::is_ascii_whitespace) {
            i += 1;
        }
        let rest = &input[i..];
        if rest.starts_with(b"<!DOCTYPE") {
            return Some(i);
        }
        let close: &[u8] = if rest.starts_with(b"<?") {
            b"?>"
        } else if rest.starts_with(b"<!--") {
            b"-->"
        } else {
            return None;
        };
        i += 2 + memchr::memmem::find(&rest[2..], close)? + close.len();
    }
}

/// Where the quoted literal starting at `text[at]` ends (just after its closing
/// quote).
fn skip_quoted(text: &[u8], at: usize) -> Option<usize> {
    let quote = text[at];
    memchr::memchr(quote, &text[at + 1..]).map(|len| at + len + 2)
}

/// The bookkeeping that bounds entity expansion.
#[derive(Default)]
struct Expansion {
    /// Bytes of replacement text expanded so far.
    bytes: usize,
    /// The entities being expanded, innermost last (`%name` for parameter entities).
    open: Vec<Vec<u8>>,
}

impl Expansion {
    /// Starts expanding `name`, whose replacement text is `len` bytes long.
    fn enter(&mut self, name: Vec<u8>, len: usize) -> Result<(), String> {
        let shown = String::from_utf8_lossy(&name).into_owned();
        if self.open.contains(&name) {
            return Err(format!("entity '{shown}' refers to itself"));
        }
        if self.open.len() >= ENTITY_NESTING_LIMIT {
            return Err(format!(
                "entities nested more than {ENTITY_NESTING_LIMIT} deep at '{shown}'"
            ));
        }
        self.bytes = self.bytes.saturating_add(len);
        if self.bytes > ENTITY_EXPANSION_LIMIT {
            return Err(format!(
                "entity expansion over {ENTITY_EXPANSION_LIMIT} bytes at '{shown}'"
            ));
        }
        self.open.push(name);
        Ok(())
    }

    fn leave(&mut self) {
        self.open.pop();
    }
}

/// A declared entity.
enum Entity {
    /// Declared with a literal value: its replacement text (character references
    /// already decoded; general entity references kept for expansion on use).
    Internal(Vec<u8>),
    /// Declared `SYSTEM` or `PUBLIC`: never loaded.
    External,
}

/// What the DOCTYPE declaration tells us.
#[derive(Default)]
struct Dtd {
    /// General entities, by name (the first declaration of a name counts).
    general: HashMap<Vec<u8>, Entity>,
    /// Parameter entities, by name.
    params: HashMap<Vec<u8>, Entity>,
    /// Whether declarations may come from outside (an external subset or external
    /// parameter entity, never loaded), so an undeclared entity is not an error.
    external: bool,
}

impl Dtd {
    /// Reads the DOCTYPE declaration at `input[start..]` (which begins with
    /// `<!DOCTYPE`); returns it and where it ends (just after its `>`).
    fn read(input: &[u8], start: usize, exp: &mut Expansion) -> Result<(Dtd, usize), XmlError> {
        let mut dtd = Dtd::default();
        let mut head = Vec::new();
        let mut i = start + b"<!DOCTYPE".len();
        loop {
            let Some(&c) = input.get(i) else {
                return Err(fail(start, "unterminated DOCTYPE declaration"));
            };
            match c {
                b'"' | b'\'' => {
                    i = skip_quoted(input, i)
                        .ok_or_else(|| fail(i, "unterminated literal in DOCTYPE"))?;
                    head.push(b' ');
                }
                b'[' | b'>' => break,
                c => {
                    head.push(c);
                    i += 1;
                }
            }
        }
        // `<!DOCTYPE root SYSTEM "uri" [...]>`: the external id comes before any `[`.
        dtd.external = head
            .split(u8::is_ascii_whitespace)
            .any(|w| w == b"SYSTEM" || w == b"PUBLIC");
        if input[i] == b'[' {
            i = dtd.subset(input, i + 1, None, exp)?;
            while input.get(i).is_some_and(u8::is_ascii_whitespace) {
                i += 1;
            }
            if input.get(i) != Some(&b'>') {
                return Err(fail(i, "expected '>' after the internal DTD subset"));
            }
        }
        Ok((dtd, i + 1))
    }

    /// Reads markup declarations from `text[i..]`: the internal subset (`origin` is
    /// `None`; it ends at `]`, whose following index is returned) or the replacement
    /// text of a parameter entity referenced in it (`origin` is where that reference
    /// is in the document, for messages).
    fn subset(
        &mut self,
        text: &[u8],
        mut i: usize,
        origin: Option<usize>,
        exp: &mut Expansion,
    ) -> Result<usize, XmlError> {
        loop {
            while text.get(i).is_some_and(u8::is_ascii_whitespace) {
                i += 1;
            }
            let pos = origin.unwrap_or(i);
            let rest = &text[i..];
            let Some(&c) = rest.first() else {
                return match origin {
                    None => Err(fail(pos, "unterminated internal DTD subset")),
                    Some(_) => Ok(i),
                };
            };
            if c == b']' && origin.is_none() {
                return Ok(i + 1);
            }
            if c == b'%' {
                let Some(len) = memchr::memchr(b';', rest) else {
                    return Err(fail(pos, "unterminated parameter entity reference"));
                };
                let name = &rest[1..len];
                i += len + 1;
                match self.params.get(name) {
                    Some(Entity::Internal(value)) => {
                        let mut key = b"%".to_vec();
                        key.extend_from_slice(name);
                        exp.enter(key, value.len()).map_err(|m| fail(pos, &m))?;
                        let value = value.clone();
                        self.subset(&value, 0, Some(pos), exp)?;
                        exp.leave();
                    }
                    // Never loaded: what it declares stays unknown.
                    Some(Entity::External) => self.external = true,
                    None if self.external => {}
                    None => return Err(fail(pos, "undefined parameter entity")),
                }
                continue;
            }
            let close: &[u8] = if rest.starts_with(b"<!--") {
                b"-->"
            } else if rest.starts_with(b"<?") {
                b"?>"
            } else if rest.starts_with(b"<!") {
                let end = decl_end(rest).ok_or_else(|| fail(pos, "unterminated declaration"))?;
                let decl = &rest[2..end];
                if let Some(body) = decl.strip_prefix(b"ENTITY") {
                    self.entity(body).map_err(|m| fail(pos, m))?;
                }
                i += end + 1;
                continue;
            } else {
                return Err(fail(pos, "unexpected content in the internal DTD subset"));
            };
            let Some(len) = memchr::memmem::find(&rest[2..], close) else {
                return Err(fail(pos, "unterminated comment or processing instruction"));
            };
            i += 2 + len + close.len();
        }
    }

    /// Records an `<!ENTITY ...>` declaration, given what follows `ENTITY`.
    fn entity(&mut self, body: &[u8]) -> Result<(), &'static str> {
        const BAD: &str = "malformed ENTITY declaration";
        if !body.first().is_some_and(u8::is_ascii_whitespace) {
            return Err(BAD);
        }
        let mut rest = body.trim_ascii_start();
        let param = rest.first() == Some(&b'%');
        if param {
            rest = rest[1..].trim_ascii_start();
        }
        let end = rest
            .iter()
            .position(u8::is_ascii_whitespace)
            .unwrap_or(rest.len());
        let name = &rest[..end];
        if !valid_name(name) {
            return Err(BAD);
        }
        let def = rest[end..].trim_ascii_start();
        let entity = match def.first() {
            Some(b'"' | b'\'') => {
                let close = skip_quoted(def, 0).ok_or(BAD)?;
                Entity::Internal(entity_value(&def[1..close - 1])?)
            }
            _ if def.starts_with(b"SYSTEM") || def.starts_with(b"PUBLIC") => Entity::External,
            _ => return Err(BAD),
        };
        let table = if param {
            &mut self.params
        } else {
            &mut self.general
        };
        table.entry(name.to_vec()).or_insert(entity);
        Ok(())
    }
}

/// Where the markup declaration at the start of `text` (`<!...`) ends: the index of
/// its closing `>`, quoted literals skipped.
fn decl_end(text: &[u8]) -> Option<usize> {
    let mut i = 2;
    loop {
        match *text.get(i)? {
            b'"' | b'\'' => i = skip_quoted(text, i)?,
            b'>' => return Some(i),
            _ => i += 1,
        }
    }
}

/// An entity's replacement text from its literal value: character references are
/// decoded now, general entity references are kept (they are expanded where the
/// entity is used), and parameter entity references are not allowed (the internal
/// subset may not use them inside a declaration).
fn entity_value(literal: &[u8]) -> Result<Vec<u8>, &'static str> {
    let mut out = Vec::with_capacity(literal.len());
    let mut i = 0;
    while i < literal.len() {
        match literal[i] {
            b'%' => return Err("parameter entity reference inside an entity value"),
            b'&' if literal.get(i + 1) == Some(&b'#') => {
                let len = memchr::memchr(b';', &literal[i..]).ok_or("bad character reference")?;
                char_ref(&literal[i + 2..i + len], &mut out)
                    .ok_or("invalid character reference")?;
                i += len + 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(out)
}

/// Appends the character that the reference `&#...;` (given without `&#` and `;`)
/// stands for; `None` when it is not a valid XML character.
fn char_ref(num: &[u8], out: &mut Vec<u8>) -> Option<()> {
    let code = if let Some(hex) = num.strip_prefix(b"x") {
        parse_radix(hex, 16)
    } else {
        parse_radix(num, 10)
    };
    let ch = code.filter(|&c| is_xml_char(c)).and_then(char::from_u32)?;
    let mut buf = [0u8; 4];
    out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
    Some(())
}

/// What a reference stands for.
enum Resolved {
    /// These bytes, as they are.
    Text(Vec<u8>),
    /// The replacement text of an internal entity, to be expanded; the entity is
    /// entered in [`Expansion`] and must be left when done.
    Entity(Vec<u8>),
}

#[derive(Default)]
struct Builder {
    depth: usize,
    root_seen: bool,
    dtd: Option<Dtd>,
    checked_utf8: bool,
    /// The run of character data since the last markup.
    run: Vec<u8>,
    expansion: Expansion,
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

    /// What the reference `&name;` (given without `&` and `;`) stands for.
    fn resolve(&mut self, at: usize, name: &[u8]) -> Result<Resolved, XmlError> {
        if let Some(num) = name.strip_prefix(b"#") {
            let mut out = Vec::with_capacity(4);
            char_ref(num, &mut out).ok_or_else(|| fail(at, "invalid character reference"))?;
            return Ok(Resolved::Text(out));
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
            return Ok(Resolved::Text(vec![c]));
        }
        if !valid_name(name) {
            return Err(fail(at, "invalid entity reference"));
        }
        let dtd = self.dtd.as_ref();
        match dtd.and_then(|d| d.general.get(name)) {
            Some(Entity::Internal(value)) => {
                self.expansion
                    .enter(name.to_vec(), value.len())
                    .map_err(|m| fail(at, &m))?;
                Ok(Resolved::Entity(value.clone()))
            }
            // External (never loaded), or perhaps declared outside: left as written.
            Some(Entity::External) => Ok(Resolved::Text(as_written(name))),
            None if dtd.is_some_and(|d| d.external) => Ok(Resolved::Text(as_written(name))),
            None => Err(fail(at, "undefined entity")),
        }
    }

    /// A reference in content: its text joins the current run, or the entity's
    /// replacement text is parsed as content in place.
    fn content_ref(&mut self, at: usize, name: &[u8], doc: &mut XmlDoc) -> Result<(), XmlError> {
        match self.resolve(at, name)? {
            Resolved::Text(bytes) => {
                self.run.extend_from_slice(&bytes);
                doc.content.extend_from_slice(&bytes);
            }
            Resolved::Entity(value) => {
                self.expand_content(at, name, &value, doc)?;
                self.expansion.leave();
            }
        }
        Ok(())
    }

    /// Parses an entity's replacement text as content of the current element: it
    /// must hold balanced elements, and no declarations.
    fn expand_content(
        &mut self,
        at: usize,
        name: &[u8],
        value: &[u8],
        doc: &mut XmlDoc,
    ) -> Result<(), XmlError> {
        let shown = String::from_utf8_lossy(name).into_owned();
        let bad = |what: &str| fail(at, &format!("in entity '{shown}': {what}"));
        let mut reader = new_reader(value);
        let base = self.depth;
        loop {
            match reader.read_event().map_err(|e| bad(&e.to_string()))? {
                Event::Start(e) => {
                    self.start_element(at, &e, doc)?;
                    self.depth += 1;
                }
                Event::Empty(e) => self.start_element(at, &e, doc)?,
                Event::End(_) => {
                    if self.depth == base {
                        return Err(bad("end tag without its start tag"));
                    }
                    self.flush(doc);
                    self.depth -= 1;
                }
                Event::Text(t) => {
                    if memchr::memmem::find(&t, b"]]>").is_some() {
                        return Err(bad("sequence ']]>' not allowed in content"));
                    }
                    self.text(&t, doc);
                }
                Event::CData(c) => self.text(&c, doc),
                Event::GeneralRef(r) => self.content_ref(at, &r, doc)?,
                Event::Comment(_) => self.flush(doc),
                Event::PI(pi) => {
                    if pi.target().eq_ignore_ascii_case(b"xml") {
                        return Err(bad("XML declaration inside an entity"));
                    }
                    self.flush(doc);
                }
                Event::Decl(_) | Event::DocType(_) => {
                    return Err(bad("declaration inside an entity"));
                }
                Event::Eof => break,
            }
        }
        if self.depth != base {
            return Err(bad("an element is not closed"));
        }
        Ok(())
    }

    /// Unescapes an attribute value and applies attribute-value normalisation
    /// (each literal tab, CR, LF or CRLF becomes one space). An internal entity's replacement text is unescaped and normalised in turn;
    /// it may not hold `<`.
    fn unescape_attr(&mut self, at: usize, raw: &[u8], out: &mut Vec<u8>) -> Result<(), XmlError> {
        let mut i = 0;
        while i < raw.len() {
            match raw[i] {
                b'&' => {
                    let Some(len) = memchr::memchr(b';', &raw[i + 1..]) else {
                        return Err(fail(at, "unterminated entity reference in attribute"));
                    };
                    match self.resolve(at, &raw[i + 1..i + 1 + len])? {
                        Resolved::Text(bytes) => out.extend_from_slice(&bytes),
                        Resolved::Entity(value) => {
                            if memchr::memchr(b'<', &value).is_some() {
                                return Err(fail(at, "'<' in attribute value (through an entity)"));
                            }
                            self.unescape_attr(at, &value, out)?;
                            self.expansion.leave();
                        }
                    }
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

/// `&name;`, for a reference that is kept as written.
fn as_written(name: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(name.len() + 2);
    out.push(b'&');
    out.extend_from_slice(name);
    out.push(b';');
    out
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
    fn internal_entities_are_expanded() {
        // An injection declared as an entity reaches XML:/* as the application reads it.
        let doc = parse(b"<!DOCTYPE r [<!ENTITY q \"1' OR '1'='1\">]><r>&q;</r>").unwrap();
        assert_eq!(doc.content, b"1' OR '1'='1");
        assert_eq!(strs(&doc.texts), vec!["1' OR '1'='1"]);
        // Nested references, character references decoded at declaration, and a
        // quoted '>' in the declaration.
        let doc = parse(
            b"<?xml version=\"1.0\"?><!DOCTYPE lolz [<!ENTITY lol \"l&#111;l>\"><!ENTITY lol2 '&lol;&lol;'>]><lolz>a&lol2;b</lolz>",
        )
        .unwrap();
        assert_eq!(strs(&doc.texts), vec!["alol>lol>b"]);
        // Markup in the replacement text is parsed as content: its elements split
        // text runs and its attributes count.
        let doc =
            parse(b"<!DOCTYPE r [<!ENTITY e \"<b k='v&#38;#39;1'>in</b>tail\">]><r>x&e;y</r>")
                .unwrap();
        assert_eq!(strs(&doc.texts), vec!["x", "in", "taily"]);
        assert_eq!(strs(&doc.attributes), vec!["v'1"]);
        assert_eq!(doc.content, b"xintaily");
        // In an attribute value, expanded and normalised.
        let doc = parse(b"<!DOCTYPE r [<!ENTITY a \"x\ty &amp; z\">]><r k=\"[&a;]\"/>").unwrap();
        assert_eq!(strs(&doc.attributes), vec!["[x y & z]"]);
    }

    #[test]
    fn parameter_entities_in_the_internal_subset_declare_entities() {
        let doc =
            parse(b"<!DOCTYPE r [<!ENTITY % p \"<!ENTITY q 'union select'>\"> %p; ]><r>&q;</r>")
                .unwrap();
        assert_eq!(doc.content, b"union select");
        // An external parameter entity is never loaded: what it might declare stays
        // as written.
        let doc = parse(
            b"<!DOCTYPE r [<!ENTITY % x SYSTEM \"http://example.com/x.dtd\"> %x; ]><r>&q;</r>",
        )
        .unwrap();
        assert_eq!(doc.content, b"&q;");
        assert!(parse(b"<!DOCTYPE r [ %nope; ]><r/>").is_err());
    }

    #[test]
    fn entity_expansion_is_bounded() {
        // Billion laughs: ten levels of ten references.
        let mut dtd = String::from("<!ENTITY l0 \"lol\">");
        for n in 1..10 {
            let refs = format!("&l{};", n - 1).repeat(10);
            dtd.push_str(&format!("<!ENTITY l{n} \"{refs}\">"));
        }
        let bomb = format!("<!DOCTYPE r [{dtd}]><r>&l9;</r>");
        let e = parse(bomb.as_bytes()).unwrap_err();
        assert!(e.0.contains("entity expansion over"), "{e}");
        // One large entity used many times.
        let big = "a".repeat(60_000);
        let refs = "&big;".repeat(100);
        let quadratic = format!("<!DOCTYPE r [<!ENTITY big \"{big}\">]><r>{refs}</r>");
        let e = parse(quadratic.as_bytes()).unwrap_err();
        assert!(e.0.contains("entity expansion over"), "{e}");
        // The same in an attribute value.
        let quadratic = format!("<!DOCTYPE r [<!ENTITY big \"{big}\">]><r k=\"{refs}\"/>");
        assert!(parse(quadratic.as_bytes()).is_err());
        // A loop, directly or through another entity, and nesting too deep.
        let e =
            parse(b"<!DOCTYPE r [<!ENTITY a \"&b;\"><!ENTITY b \"&a;\">]><r>&a;</r>").unwrap_err();
        assert!(e.0.contains("refers to itself"), "{e}");
        let e = parse(b"<!DOCTYPE r [<!ENTITY % p \"%p;\"> %p; ]><r/>").unwrap_err();
        assert!(e.0.contains("parameter entity reference inside"), "{e}");
        let mut dtd = String::from("<!ENTITY e0 \"x\">");
        for n in 1..=ENTITY_NESTING_LIMIT {
            dtd.push_str(&format!("<!ENTITY e{n} \"&e{};\">", n - 1));
        }
        let deep = format!("<!DOCTYPE r [{dtd}]><r>&e{ENTITY_NESTING_LIMIT};</r>");
        let e = parse(deep.as_bytes()).unwrap_err();
        assert!(e.0.contains("nested more than"), "{e}");
        let ok = format!("<!DOCTYPE r [{dtd}]><r>&e{};</r>", ENTITY_NESTING_LIMIT - 1);
        assert_eq!(parse(ok.as_bytes()).unwrap().content, b"x");
    }

    #[test]
    fn malformed_entities_and_doctypes_are_refused() {
        for bad in [
            // Unbalanced markup in the replacement text.
            &b"<!DOCTYPE r [<!ENTITY e \"<b>\">]><r>&e;</r>"[..],
            b"<!DOCTYPE r [<!ENTITY e \"</r>\">]><r>&e;</r>",
            // '<' reaching an attribute value through an entity.
            b"<!DOCTYPE r [<!ENTITY e \"&#60;\">]><r k=\"&e;\"/>",
            // A declaration inside an entity.
            b"<!DOCTYPE r [<!ENTITY e \"<?xml version='1.0'?>\">]><r>&e;</r>",
            // Unterminated pieces of the DOCTYPE.
            b"<!DOCTYPE r [<!ENTITY e \"x>]><r/>",
            b"<!DOCTYPE r [<!ENTITY e \"x\">",
            b"<!DOCTYPE r [<!ENTITY \"x\">]><r/>",
            b"<!DOCTYPE r [junk]><r/>",
            b"<!DOCTYPE r [<!ENTITY e \"x\">] junk><r/>",
            // A second DOCTYPE, or one after the root.
            b"<!DOCTYPE r><!DOCTYPE r><r/>",
            b"<r/><!DOCTYPE r>",
        ] {
            assert!(
                parse(bad).is_err(),
                "accepted {:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn the_doctype_ends_where_a_conforming_parser_ends_it() {
        // A quoted '<' must not make the DOCTYPE swallow the root element: the
        // payload in the real root element is seen (the trailing markup is an error).
        let doc = b"<!DOCTYPE r [<!ENTITY a \"<\">]><r>1' OR '1'='1</r>><r>benign</r>";
        assert!(parse(doc).is_err());
        let doc = parse(b"<!DOCTYPE r [<!ENTITY a \"<\">]><r>1' OR '1'='1</r>").unwrap();
        assert_eq!(doc.content, b"1' OR '1'='1");
        // Comments and processing instructions before and inside the DOCTYPE.
        let doc = parse(
            b"<?xml version=\"1.0\"?><!-- c --><?pi x?>\n<!DOCTYPE r [<!-- ]> --><?p ]>?><!ELEMENT r ANY><!ATTLIST r k CDATA \">\">]>\n<r>&#65;</r>",
        )
        .unwrap();
        assert_eq!(doc.content, b"A");
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
                let bound = doc.len() + ENTITY_EXPANSION_LIMIT;
                assert!(text <= bound && out.content.len() <= bound);
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
