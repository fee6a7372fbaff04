//! NoSQL (MongoDB-style) operator injection.
//!
//! # Grammar
//!
//! The detector reads a raw body or query string, an argument name or an argument
//! value, and looks for query operators where the application expects plain
//! values:
//!
//! ```text
//! operator  := json-key | bracket | path-segment
//! json-key  := '"' "$" name '"' ws ":" ws operand
//! bracket   := "[" "$" name "]" ( "=" operand-until-& )?
//! path      := "." "$" name        (an argument name such as json.password.$ne)
//! ```
//!
//! An operator is an attack when it can only serve to widen a match:
//!
//! - `$where`, `$function`, `$accumulator`, `$eval`: they run JavaScript, always an
//!   attack (also as `$where:` or `$where(` in JavaScript source);
//! - `$ne`, `$gt`, `$gte`, `$lt`, `$lte`, `$eq`: when the operand is `null`, empty,
//!   `true`, `false`, `{}`, `[]`, `undefined`, `0`, `-1` or a number used against a
//!   text field (`$ne` with an unquoted number), or when no operand is given
//!   (`[$ne]` alone: `$ne`, `$gt`, `$gte` only); in JSON, only at the top of the
//!   value or on a credential field: `{"age":{"$gte":18}}`,
//!   `{"status":{"$ne":"deleted"}}` and `{"price":{"$gt":0}}` are filters, not
//!   attacks;
//! - `$nin` and `$in` with an empty list or a list of empty strings;
//! - `$regex` matching everything (`.*`, `.+`, `^`, an empty pattern);
//! - `$exists`, `$not`, `$or`, `$and`, `$nor`, `$expr`, `$ne`, `$nin`, `$regex`,
//!   `$type`, `$size`, `$all`, `$elemMatch` given in a form or query name (bracket
//!   syntax): forms do not carry query structure;
//! - any operator but equality on a field that proves who someone is (`password`,
//!   `pin`, `token`, `user`, `login`, `email`, ...: `CREDENTIAL_FIELDS`): `$ne`,
//!   `$nin`, `$in`, `$regex`, `$not`, `$gt`/`$gte`/`$lt`/`$lte`, `$exists`, in JSON
//!   (`{"pwd":{"$ne":"x"}}`) or in a form (`user[$in][]=admin`);
//! - `$lt`/`$lte` with a string bound above every name (`"~"`, `"zzzzzz"`);
//! - `$nor` (everything but what it names), `$exists: true` in a value that holds an
//!   `$or` (an always-true branch), and, as JSON keys, the aggregation stages that
//!   read other collections or write (`$lookup`, `$unionWith`, `$graphLookup`,
//!   `$out`, `$merge`).
//!
//! In an argument name without its value (`json.age.$gte`, as a JSON body's
//! arguments are named), only the operators that run JavaScript count: the operand
//! is not there to judge.
//!
//! JavaScript injection into a `$where` clause or a server-side `eval`:
//! `'; return true; var x='`, `0; return true`, `' || '1'=='1`, `'||1==1//` (a
//! comparison, then a comment that drops the rest of the clause), `'||Object.keys(this)
//! .length>0||'` (the document itself after `||`), `this.password.match(` (and
//! `this.username`, `this.passwd`, `this.pass`, as whole field names), `'; sleep(`
//! and `'; while(`, `db.<name>.find(` (and `.findOne(`, `.drop(`, `.insert(`,
//! `.remove(`, `.update(`, `.count(`), `db.getCollection(`, a method of the MongoDB
//! shell's `db` itself (`db.getCollectionNames()`, `db.dropDatabase()`).
//!
//! Linear: each `$` is looked at once, and each operand read up to a bounded length.

use crate::text::{find_ci, is_space, starts_with_ci};
use crate::{Class, Finding};

/// Operators that run JavaScript.
const JS_OPERATORS: &[&str] = &["where", "function", "accumulator", "eval"];

/// Comparison operators, attacks with an always-true operand.
const COMPARE: &[&str] = &["ne", "gt", "gte", "lt", "lte", "eq"];

/// Operators forms never carry.
const STRUCTURE: &[&str] = &[
    "exists",
    "not",
    "or",
    "and",
    "nor",
    "expr",
    "regex",
    "nin",
    "in",
    "ne",
    "type",
    "size",
    "all",
    "elemmatch",
];

/// A necessary condition for [`scan`], cheap to check: without it `scan` finds
/// nothing (it checks it first), so a value that fails it need not be scanned.
pub(crate) fn may_match(input: &[u8]) -> bool {
    input.iter().any(|c| matches!(c, b'$' | b'\'' | b'"'))
        || find_ci(input, 0, b"db.").is_some()
        || find_ci(input, 0, b"this.").is_some()
        || (input.first().is_some_and(u8::is_ascii_digit) && find_ci(input, 0, b"return").is_some())
}

/// Scans `input` for a NoSQL operator injection.
pub fn scan(input: &[u8]) -> Option<Finding> {
    if !may_match(input) {
        return None;
    }
    let mut braces = Braces::default();
    let mut from = 0;
    while let Some(rel) = memchr::memchr(b'$', &input[from..]) {
        let at = from + rel;
        from = at + 1;
        let name_end = at
            + 1
            + input[at + 1..]
                .iter()
                .take(16)
                .take_while(|c| c.is_ascii_alphabetic())
                .count();
        let name = &input[at + 1..name_end];
        if name.is_empty() {
            continue;
        }
        let before = at.checked_sub(1).map(|i| input[i]);
        let after = input.get(name_end).copied();
        // `$where: '...'` and `$where('...')` in JavaScript source.
        let lower_name = name.to_ascii_lowercase();
        if JS_OPERATORS.contains(&std::str::from_utf8(&lower_name).unwrap_or("")) {
            let k = crate::text::skip_space(input, name_end);
            if matches!(input.get(k), Some(b':' | b'('))
                && !before.is_some_and(|b| b.is_ascii_alphanumeric())
            {
                return Some(Finding::new(
                    Class::NoSql,
                    "operator that runs JavaScript",
                    at..name_end,
                ));
            }
        }
        let context = match (before, after) {
            (Some(b'"'), Some(b'"')) | (Some(b'\''), Some(b'\'')) => Context::JsonKey,
            (Some(b'['), Some(b']')) => Context::Bracket,
            (Some(b'.'), None) | (None, None) => Context::Name,
            (None, Some(b'[' | b'=' | b'.')) => Context::Name,
            _ => continue,
        };
        let lower = name.to_ascii_lowercase();
        let op = std::str::from_utf8(&lower).unwrap_or("");
        let finding = |rule| Some(Finding::new(Class::NoSql, rule, at..name_end));
        if JS_OPERATORS.contains(&op) {
            return finding("operator that runs JavaScript");
        }
        // An argument name (`json.age.$gte`) shows no operand: only the operators
        // that are attacks whatever their operand count there.
        if context == Context::Name {
            continue;
        }
        let operand = operand(input, name_end + 1, context);
        // In JSON, an always-true comparison is an attack at the top of a value (the
        // application takes the whole value as a query) or on a field that checks
        // who someone is; `{"deleted":{"$ne":true}}` is a filter.
        if matches!(op, "lt" | "lte") && above_every_name(operand) {
            return finding("upper bound above every value");
        }
        if op == "nor" && context != Context::Name {
            return finding("negated query (matches all but what it names)");
        }
        if PIPELINE_STAGES.contains(&op) && context == Context::JsonKey {
            return finding("aggregation stage that reads or writes other collections");
        }
        if op == "exists"
            && operand.is_some_and(|o| o.trim_ascii() == b"true")
            && memchr::memmem::find(input, b"$or").is_some()
        {
            return finding("always-true branch of an $or");
        }
        // A field that proves who someone is takes a value, not a query: any
        // operator there (other than equality) widens a login check.
        if CREDENTIAL_OPERATORS.contains(&op) {
            let field = match context {
                Context::JsonKey => enclosing_field(input, at, &mut braces),
                Context::Bracket => bracket_field(input, at),
                Context::Name => None,
            };
            if field.is_some_and(credential_field) {
                return finding("query operator on a credential field");
            }
        }
        // `$ne: null`, `$ne: ""`, `$gt: ""`, `$ne: -1`: operands no real value has,
        // whatever the field: the comparison exists only to match every document.
        if matches!(op, "ne" | "gt") && sentinel(operand) {
            return finding("comparison with an operand no value has");
        }
        if COMPARE.contains(&op)
            && always_true(operand, op)
            && (context != Context::JsonKey
                || enclosing_field(input, at, &mut braces).is_none_or(credential_field))
        {
            return finding("comparison operator with an always-true operand");
        }
        if matches!(op, "nin" | "in") && empty_list(operand) {
            return finding("list operator with an empty list");
        }
        if op == "regex" && operand.is_some_and(matches_everything) {
            return finding("regex operator that matches everything");
        }
        // Forms and query strings do not carry query structure: `user[$ne]=x`.
        if context == Context::Bracket && STRUCTURE.contains(&op) && op != "in" {
            return finding("query operator in a form field name");
        }
    }
    js_injection(input)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Context {
    JsonKey,
    Bracket,
    Name,
}

/// Operators that widen a match, when applied to a credential field.
const CREDENTIAL_OPERATORS: &[&str] = &[
    "ne", "nin", "in", "regex", "not", "gt", "gte", "lt", "lte", "exists", "where", "expr",
];

/// Aggregation stages that read other collections or write: a client never needs
/// to send them.
const PIPELINE_STAGES: &[&str] = &["lookup", "unionwith", "graphlookup", "out", "merge"];

/// The field name before a bracketed operator: `user` in `user[$ne]=`, `password` in
/// `creds[password][$ne]=`.
fn bracket_field(s: &[u8], dollar: usize) -> Option<&[u8]> {
    let open = dollar.checked_sub(1)?;
    let end = if open > 0 && s[open - 1] == b']' {
        open - 1
    } else {
        open
    };
    let start = s[..end]
        .iter()
        .rev()
        .take(64)
        .position(|c| matches!(c, b'&' | b'?' | b'[' | b']' | b'\n'))
        .map_or(end.saturating_sub(64), |p| end - p);
    let name = &s[start..end];
    (!name.is_empty()).then_some(name)
}

/// Fields whose value proves who someone is: an always-true comparison there
/// bypasses a login.
const CREDENTIAL_FIELDS: &[&str] = &[
    "password",
    "passwd",
    "pass",
    "pwd",
    "passphrase",
    "secret",
    "token",
    "apikey",
    "api_key",
    "key",
    "pin",
    "otp",
    "code",
    "username",
    "user",
    "login",
    "email",
    "mail",
    "uid",
    "userid",
    "user_id",
    "account",
    "session",
    "hash",
    "auth",
];

fn credential_field(name: &[u8]) -> bool {
    crate::text::one_of(name, CREDENTIAL_FIELDS)
}

/// For a JSON key at `at` (its `$`), the key of the object that holds it, when there
/// is one: `{"password": {"$ne": ...}}` gives `password`; a top-level `{"$ne": 1}`
/// gives none.
fn enclosing_field<'s>(s: &'s [u8], at: usize, braces: &mut Braces) -> Option<&'s [u8]> {
    // Back over the key's opening quote, white space, and the object's `{`.
    let mut k = at.checked_sub(1)?;
    loop {
        k = k.checked_sub(1)?;
        match s[k] {
            c if is_space(c) => {}
            b'{' => break,
            // Another member before this one: `{"$gt": 1, "$lt": 5}`.
            b',' => return enclosing_after_members(s, k, braces),
            _ => return None,
        }
    }
    field_before_colon(s, k)
}

/// The field of an object whose earlier members end at `comma`: the nearest `{` back
/// (members hold no nested objects in the shapes that matter here), then its key.
fn enclosing_after_members<'s>(s: &'s [u8], comma: usize, braces: &mut Braces) -> Option<&'s [u8]> {
    let open = braces.last_before(s, comma)?;
    if s[open] != b'{' {
        return None;
    }
    field_before_colon(s, open)
}

/// The last `{` or `}` before a position, for positions asked in increasing order:
/// each byte is read once however many operators a value holds.
#[derive(Debug, Default)]
struct Braces {
    scanned: usize,
    last: Option<usize>,
}

impl Braces {
    fn last_before(&mut self, s: &[u8], pos: usize) -> Option<usize> {
        if pos < self.scanned {
            // Not in order (it does not happen with operators read left to right):
            // a bounded look back.
            let from = pos.saturating_sub(256);
            return s[from..pos]
                .iter()
                .rposition(|&c| c == b'{' || c == b'}')
                .map(|p| from + p);
        }
        if let Some(p) = s[self.scanned..pos]
            .iter()
            .rposition(|&c| c == b'{' || c == b'}')
        {
            self.last = Some(self.scanned + p);
        }
        self.scanned = pos;
        self.last
    }
}

/// The quoted key before `: {` that ends just before `brace`.
fn field_before_colon(s: &[u8], brace: usize) -> Option<&[u8]> {
    let mut k = brace;
    loop {
        k = k.checked_sub(1)?;
        if !is_space(s[k]) {
            break;
        }
    }
    if s[k] != b':' {
        return None;
    }
    loop {
        k = k.checked_sub(1)?;
        if !is_space(s[k]) {
            break;
        }
    }
    if s[k] != b'"' {
        return None;
    }
    let end = k;
    let start = s[..end]
        .iter()
        .take(end)
        .rev()
        .take(64)
        .position(|&c| c == b'"')
        .map(|p| end - p - 1)?;
    Some(&s[start + 1..end])
}

/// The operand after an operator: for a JSON key, the value after `:`; for a bracket
/// name, what follows `]=` up to `&`; none for a bare name.
fn operand(input: &[u8], after_name: usize, context: Context) -> Option<&[u8]> {
    match context {
        Context::JsonKey => {
            let mut k = after_name;
            while k < input.len() && (is_space(input[k]) || input[k] == b':') {
                k += 1;
            }
            let rest = input.get(k..)?;
            if rest.is_empty() {
                return None;
            }
            // A string, or up to the next `,` or `}`.
            if rest[0] == b'"' {
                let end = rest[1..].iter().take(256).position(|&c| c == b'"')?;
                return Some(&rest[..end + 2]);
            }
            let end = rest
                .iter()
                .take(256)
                .position(|&c| matches!(c, b',' | b'}'))
                .unwrap_or(rest.len().min(256));
            Some(rest[..end].trim_ascii())
        }
        Context::Bracket => {
            let rest = input.get(after_name..)?;
            let rest = rest.strip_prefix(b"=")?;
            let end = rest
                .iter()
                .take(256)
                .position(|&c| c == b'&')
                .unwrap_or(rest.len().min(256));
            Some(&rest[..end])
        }
        Context::Name => None,
    }
}

/// A string bound above every name (`"~"`, `"zzzzzz"`): `$lt` with it lets every
/// value through, whatever the field.
fn above_every_name(operand: Option<&[u8]>) -> bool {
    let Some(o) = operand.map(<[u8]>::trim_ascii) else {
        return false;
    };
    let Some(v) = o.strip_prefix(b"\"").and_then(|x| x.strip_suffix(b"\"")) else {
        return false;
    };
    !v.is_empty()
        && (v.iter().all(|&c| c == b'~')
            || (v.len() >= 3 && v.iter().all(|c| matches!(c, b'z' | b'Z' | b'~'))))
}

/// Whether a comparison with this operand matches (almost) everything.
fn always_true(operand: Option<&[u8]>, op: &str) -> bool {
    let Some(o) = operand else {
        // A bare `$ne` name or `[$ne]` without a value: the value comes separately;
        // only the inequality operators make sense that way.
        return matches!(op, "ne" | "gt" | "gte");
    };
    let o = o.trim_ascii();
    let unquoted = o
        .strip_prefix(b"\"")
        .and_then(|x| x.strip_suffix(b"\""))
        .unwrap_or(o);
    match unquoted {
        b"" | b"null" | b"true" | b"false" | b"{}" | b"[]" | b"undefined" | b"0" | b"-1" => true,
        _ => {
            op == "ne" && unquoted.iter().all(|c| c.is_ascii_digit() || *c == b'-') && o == unquoted
        }
    }
}

/// `null`, an empty string or `-1`: what a bypass compares against so that every
/// document differs from it (`$ne`) or sorts above it (`$gt`).
fn sentinel(operand: Option<&[u8]>) -> bool {
    operand.is_some_and(|o| matches!(o.trim_ascii(), b"null" | b"\"\"" | b"-1"))
}

fn empty_list(operand: Option<&[u8]>) -> bool {
    let Some(o) = operand else { return false };
    let inner: Vec<u8> = o
        .iter()
        .copied()
        .filter(|c| !is_space(*c) && *c != b'"')
        .collect();
    matches!(&inner[..], b"[]" | b"[,]" | b"")
}

fn matches_everything(o: &[u8]) -> bool {
    let unquoted = o.trim_ascii();
    let unquoted = unquoted
        .strip_prefix(b"\"")
        .and_then(|x| x.strip_suffix(b"\""))
        .unwrap_or(unquoted);
    matches!(
        unquoted,
        b".*" | b".+" | b"^" | b"" | b"^.*" | b"^.*$" | b".*$" | b"/.*/"
    )
}

/// Methods of the MongoDB shell's `db` that list, read, drop or run.
const DB_METHODS: &[&str] = &[
    "getcollectionnames",
    "getcollectioninfos",
    "getcollection",
    "dropdatabase",
    "getsiblingdb",
    "getmongo",
    "getname",
    "getusers",
    "createuser",
    "dropuser",
    "eval",
    "admincommand",
    "runcommand",
    "serverstatus",
    "currentop",
    "killop",
    "shutdownserver",
    "fsynclock",
    "version",
    "stats",
];

/// JavaScript that breaks out of a string in a `$where` clause or an `eval`.
fn js_injection(s: &[u8]) -> Option<Finding> {
    let found = |rule, at: usize| Some(Finding::new(Class::NoSql, rule, at..s.len()));
    for pat in [
        &b"this.password"[..],
        b"this.username",
        b"this.passwd",
        b"this.pass",
    ] {
        // The field name whole (`this.passenger` is another field).
        if let Some(at) = find_ci(s, 0, pat)
            && !s
                .get(at + pat.len())
                .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
        {
            return found("where clause reads a document field", at);
        }
    }
    // Blind extraction of a field, a character at a time, joined to the clause by
    // a quote: `';this.secret.match(/^a/);'`, `'+this.token.startsWith('x')+'`.
    for q in [b'\'', b'"'] {
        let mut from = 0;
        while let Some(rel) = memchr::memchr(q, &s[from..]) {
            let at = from + rel;
            from = at + 1;
            let k = crate::text::skip_space(s, at + 1);
            if !matches!(s.get(k), Some(b';' | b'+' | b'|' | b'&')) {
                continue;
            }
            let mut m = k;
            while m < s.len() && matches!(s[m], b';' | b'+' | b'|' | b'&') && m < k + 2 {
                m += 1;
            }
            let m = crate::text::skip_space(s, m);
            if !starts_with_ci(s, m, b"this.") {
                continue;
            }
            let name_end = m
                + 5
                + s[m + 5..]
                    .iter()
                    .take(64)
                    .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
                    .count();
            if [&b".match("[..], b".startswith(", b".charat(", b".indexof("]
                .iter()
                .any(|call| starts_with_ci(s, name_end, call))
            {
                return found("quote, then a probe of a document field", at);
            }
        }
    }
    if let Some(at) = find_ci(s, 0, b"db.getcollection") {
        return found("database call", at);
    }
    // A number that ends the clause, then a statement: `0; return true`.
    let lead = s.iter().take_while(|c| c.is_ascii_digit()).count();
    if lead > 0 {
        let k = crate::text::skip_space(s, lead);
        if s.get(k) == Some(&b';')
            && starts_with_ci(s, crate::text::skip_space(s, k + 1), b"return")
        {
            return found("number, then JavaScript statements", 0);
        }
    }
    // `db.users.find(`
    let mut from = 0;
    while let Some(at) = find_ci(s, from, b"db.") {
        from = at + 1;
        if at > 0 && s[at - 1].is_ascii_alphanumeric() {
            continue;
        }
        let name_end = at
            + 3
            + s[at + 3..]
                .iter()
                .take(64)
                .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
                .count();
        // A method of the MongoDB shell's database object: `db.getCollectionNames()`,
        // `db.dropDatabase()` (Go's `db.QueryContext(` is another `db`).
        if s.get(name_end) == Some(&b'(') && crate::text::one_of(&s[at + 3..name_end], DB_METHODS) {
            return found("database call", at);
        }
        for call in [
            &b".find("[..],
            b".findone(",
            b".drop(",
            b".insert(",
            b".remove(",
            b".update(",
            b".count(",
        ] {
            if starts_with_ci(s, name_end, call) {
                return found("database call", at);
            }
        }
    }
    // A quote, then `;`, then `return`, `sleep(` or a `||` tautology.
    for q in [b'\'', b'"'] {
        let mut from = 0;
        while let Some(rel) = memchr::memchr(q, &s[from..]) {
            let at = from + rel;
            from = at + 1;
            let mut k = at + 1;
            while k < s.len() && is_space(s[k]) {
                k += 1;
            }
            if starts_with_ci(s, k, b";") {
                let mut m = k + 1;
                while m < s.len() && is_space(s[m]) {
                    m += 1;
                }
                let returns_value = starts_with_ci(s, m, b"return") && {
                    let mut r = m + 6;
                    while r < s.len() && is_space(s[r]) {
                        r += 1;
                    }
                    [&b"true"[..], b"1", b"'", b"\"", b"this", b"!", b"(", b"db."]
                        .iter()
                        .any(|v| starts_with_ci(s, r, v))
                };
                if returns_value
                    || starts_with_ci(s, m, b"sleep(")
                    || starts_with_ci(s, m, b"while(")
                    || starts_with_ci(s, m, b"while (")
                {
                    return found("quote, then JavaScript statements", at);
                }
            }
            if starts_with_ci(s, k, b"||") || starts_with_ci(s, k, b"&&") {
                let rest = &s[k + 2..s.len().min(k + 64)];
                // The document itself in the expression: `'||Object.keys(this).length>0||'`.
                if find_ci(rest, 0, b"this").is_some_and(|t| {
                    !rest
                        .get(t + 4)
                        .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
                        && (t == 0 || !rest[t - 1].is_ascii_alphanumeric())
                }) {
                    return found("quote, then JavaScript over the document", at);
                }
                if let Some(eq) = find_ci(rest, 0, b"==")
                    && (find_ci(rest, 0, b"this.").is_some()
                        || rest.iter().filter(|&&c| c == q).count() >= 2
                        || find_ci(&rest[eq..], 0, b"//").is_some()
                        || find_ci(&rest[eq..], 0, b"<!--").is_some())
                {
                    return found("quote, then a JavaScript tautology", at);
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(s: &str) -> bool {
        scan(s.as_bytes()).is_some()
    }

    #[test]
    fn injections() {
        for s in [
            r#"{"username":"admin","password":{"$ne":null}}"#,
            r#"{"username":{"$gt":""},"password":{"$gt":""}}"#,
            r#"{"$where":"sleep(5000)"}"#,
            "username[$ne]=x&password[$ne]=x",
            "password[$regex]=.*",
            "user[$exists]=true",
            "login[$nin][]=",
            "json.password.$where",
            r#"{"password":{"$regex":".*"}}"#,
            "' || '1'=='1",
            "'; return true; var x='",
            "' && this.password.match(/.*/)//",
            "db.users.find()",
            r#"{"name":{"$in":[]}}"#,
            r#"{"pin":{"$ne":1}}"#,
            r#"{"$ne": null}"#,
            r#"{"user": "x", "password": {"$gt": "", "$lt": "z"}}"#,
            "a[$where]=1",
            "true, $where: '1 == 1'",
            "'||1==1//",
            "user[$in][]=guest&user[$in][]=admin",
            "creds[password][$ne]=x",
            r#"{"name":"alice","pwd":{"$ne":"x"}}"#,
            r#"{"login":{"$regex":"^v"}}"#,
            r#"{"$or":[{"name":"test"},{"name":{"$exists":true}}]}"#,
            r#"{"$nor": [{"pass": "x"}]}"#,
            r#"[{"$lookup":{"from":"users","localField":"a","foreignField":"a","as":"x"}}]"#,
            r#"{"name": {"$lt": "zzzzzz"}}"#,
            r#"{"password":{"$not":{"$eq":"x"}}}"#,
            "0;return true",
            "884; return true",
            "\"||Object.keys(this).length>0||\"",
            "db.getCollectionNames()",
            "\" && 1==1 <!--",
            r#"{"role": {"$ne": -1}}"#,
            r#"[{"$match": {"name": {"$ne": null}}}]"#,
            r#"{"name": {"$gt": ""}}"#,
            "';this.secret.match(/^2/);'",
            "'+this.otp.startsWith('4')+'",
        ] {
            assert!(hit(s), "missed: {s}");
        }
    }

    #[test]
    fn benign() {
        for s in [
            r#"{"age":{"$gte":18}}"#,
            r#"{"status":{"$ne":"deleted"}}"#,
            r#"{"filter":{"deleted":{"$ne":true}},"page":1}"#,
            r#"{"price":{"$gt":0}}"#,
            r#"{"price":{"$lt":100,"$gt":10}}"#,
            r#"{"tags":{"$in":["a","b"]}}"#,
            "filters[age][$gte]=18",
            "json.age.$gte",
            "json.status.$ne",
            "It costs $5 or $10",
            "The $where clause is documented",
            "I'd say 'yes'; return it later",
            "x == y",
            "$HOME/bin",
            "filters[status][$in][]=new&filters[status][$in][]=open",
            "see db.example.com (or this one) for 2; returns",
            "rows, err := db.QueryContext(ctx, \"SELECT id FROM t\")",
            r#"{"last_name":{"$regex":"^Smi","$options":"i"}}"#,
            r#"{"filter":{"$or":[{"status":"new"},{"vip":true}],"deleted_at":{"$exists":false}}}"#,
            r#"{"pipeline":[{"$match":{"status":"paid"}},{"$group":{"_id":"$country","total":{"$sum":"$amount"}}}]}"#,
            r#"{"price":{"$lt":100,"$gt":10}}"#,
            "Rock 'n' roll || x == y // comment",
            "const greeting = 'Hello ' + this.name + '!';",
            "if (s === '') return this.value.match(/x/);",
            r#"{"count":{"$gt":1}}"#,
        ] {
            assert!(!hit(s), "false positive: {s}: {:?}", scan(s.as_bytes()));
        }
    }
}
