//! Operators (`@rx`, `@pm`, ...): compiled once, then run against each value.
//!
//! Semantics follow libmodsecurity (ModSecurity v3); each submodule documents its
//! operator and any known difference.

pub mod compare;
/// `@detectSQLi` and `@detectXSS`: libinjection, from the detectors crate.
pub use detect::libinjection as injection;
pub mod ip;
pub mod pm;
pub mod rx;
pub mod rx_set;
pub mod strings;
pub mod validate;
pub mod verify;

use seclang::FileSource;
use std::path::{Path, PathBuf};

use compare::Comparison;
use ip::IpSet;
use pm::Pm;
use rx::Rx;
use strings::Needle;
use validate::ByteRanges;
use verify::VerifyCc;

/// Values captured by a match, for `capture` (TX.0 to TX.9). Index 0 is the whole match.
pub type Captures = rxlinear::Captures;

/// Why an operator could not be compiled.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("@{operator}: {reason}")]
pub struct OperatorError {
    /// The operator name.
    pub operator: String,
    /// What is wrong.
    pub reason: String,
}

/// What an operator may need at compile time: files for `@pmFromFile` and
/// `@ipMatchFromFile`, resolved relative to the directory of the rule file.
pub struct CompileContext<'a> {
    /// Reads data files.
    pub source: &'a dyn FileSource,
    /// The directory of the rule file that uses the operator.
    pub base_dir: &'a Path,
}

/// A compiled operator.
#[derive(Debug, Clone)]
pub enum Operator {
    /// `@rx`: a PCRE-syntax regex, run by a linear-time engine (see [`rx`]).
    Rx(Rx),
    /// `@pm` (phrases in the argument) or `@pmFromFile` / `@pmf` (phrases in files):
    /// case-insensitive phrase match (see [`pm`]).
    Pm {
        /// The automaton.
        pm: Pm,
        /// Whether the phrases came from files (`@pmFromFile`).
        from_file: bool,
    },
    /// `@detectSQLi`: libinjection SQL injection detection; captures the fingerprint.
    DetectSqli,
    /// `@detectXSS`: libinjection XSS detection; captures the input.
    DetectXss,
    /// One of Palisade's semantic detectors (`@detectCmdInjection`,
    /// `@detectPathTraversal`, ...; see [`DETECTORS`]): captures the evidence (TX:0)
    /// and the grammar rule that matched (TX:1).
    Detect(detect::Class),
    /// `@confirmSqlSyntax`: SQL syntax in an injection context
    /// ([`detect::sql::confirm`]), the precision mode's test.
    ConfirmSqlSyntax,
    /// `@eq`, `@ge`, `@gt`, `@le`, `@lt` with the argument read as an integer.
    Compare(Comparison, i32),
    /// `@streq`: the input equals the argument.
    StrEq(Vec<u8>),
    /// `@contains`: the argument occurs in the input.
    Contains(Needle),
    /// `@containsWord`: the argument occurs in the input as a word.
    ContainsWord(Vec<u8>),
    /// `@beginsWith`: the input starts with the argument.
    BeginsWith(Vec<u8>),
    /// `@endsWith`: the input ends with the argument.
    EndsWith(Vec<u8>),
    /// `@within`: the input occurs in the argument.
    Within(Vec<u8>),
    /// `@strmatch`: the argument occurs in the input (a literal, not a pattern).
    StrMatch(Needle),
    /// `@ipMatch` (addresses in the argument) or `@ipMatchFromFile` / `@ipMatchF`.
    IpMatch {
        /// The networks.
        set: IpSet,
        /// Whether the networks came from files (`@ipMatchFromFile`).
        from_file: bool,
    },
    /// `@validateByteRange`: matches when the input has a byte outside the ranges.
    ValidateByteRange(ByteRanges),
    /// `@validateUrlEncoding`: matches when the input has an invalid `%` encoding.
    ValidateUrlEncoding,
    /// `@validateUtf8Encoding`: matches when the input is not valid UTF-8.
    ValidateUtf8Encoding,
    /// `@verifyCC`: a regex finds candidates that must pass the Luhn check.
    VerifyCc(VerifyCc),
    /// `@unconditionalMatch`: always matches.
    UnconditionalMatch,
    /// `@noMatch`: never matches.
    NoMatch,
}

/// The operator names of the semantic detectors (lower case, as compiled), and
/// their classes. Each is documented in `docs/detection/`.
pub const DETECTORS: [(&str, &str, detect::Class); 12] = [
    ("detectsqlcontext", "detectSqlContext", detect::Class::Sql),
    ("detectxsscontext", "detectXssContext", detect::Class::Xss),
    (
        "detectcmdinjection",
        "detectCmdInjection",
        detect::Class::Cmd,
    ),
    (
        "detectpathtraversal",
        "detectPathTraversal",
        detect::Class::Traversal,
    ),
    (
        "detecttemplateinjection",
        "detectTemplateInjection",
        detect::Class::Template,
    ),
    (
        "detectnosqlinjection",
        "detectNoSqlInjection",
        detect::Class::NoSql,
    ),
    (
        "detectldapinjection",
        "detectLdapInjection",
        detect::Class::Ldap,
    ),
    ("detectxxe", "detectXxe", detect::Class::Xxe),
    ("detectssrf", "detectSsrf", detect::Class::Ssrf),
    ("detectjndi", "detectJndi", detect::Class::Jndi),
    (
        "detectcrlfinjection",
        "detectCrlfInjection",
        detect::Class::Crlf,
    ),
    (
        "detectserialized",
        "detectSerialized",
        detect::Class::Serialized,
    ),
];

/// Operators that need I/O at request time and are run by the engine itself.
const ENGINE_OPERATORS: [&str; 2] = ["rbl", "geolookup"];

/// Operators of ModSecurity that Palisade does not implement.
const UNSUPPORTED: [(&str, &str); 10] = [
    ("inspectfile", "running external programs is not supported"),
    ("fuzzyhash", "ssdeep fuzzy hashing is not supported"),
    ("verifycpf", "not implemented"),
    ("verifyssn", "not implemented"),
    ("verifysvnr", "not implemented"),
    ("validatedtd", "XML DTD validation is not supported"),
    ("validateschema", "XML schema validation is not supported"),
    (
        "validatehash",
        "not implemented (it is not supported by libmodsecurity either)",
    ),
    (
        "gsblookup",
        "Google Safe Browsing lookups are not supported",
    ),
    (
        "rsub",
        "not implemented (it is not supported by libmodsecurity either)",
    ),
];

/// Operators that use their argument as it stands, with nothing to compile. When such
/// an argument holds macros, the rule runs the operator on the expanded bytes
/// directly instead of compiling an [`Operator`] per evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlainOperator {
    /// `@eq`, `@ge`, `@gt`, `@le`, `@lt`.
    Compare(Comparison),
    /// `@streq`.
    StrEq,
    /// `@contains`.
    Contains,
    /// `@containsWord`.
    ContainsWord,
    /// `@beginsWith`.
    BeginsWith,
    /// `@endsWith`.
    EndsWith,
    /// `@within`.
    Within,
}

impl PlainOperator {
    /// The plain operator of that name (without `@`, case-insensitive), if it is one.
    pub fn from_name(name: &str) -> Option<PlainOperator> {
        let name = name.strip_prefix('@').unwrap_or(name);
        let table = [
            ("eq", PlainOperator::Compare(Comparison::Eq)),
            ("ge", PlainOperator::Compare(Comparison::Ge)),
            ("gt", PlainOperator::Compare(Comparison::Gt)),
            ("le", PlainOperator::Compare(Comparison::Le)),
            ("lt", PlainOperator::Compare(Comparison::Lt)),
            ("streq", PlainOperator::StrEq),
            ("contains", PlainOperator::Contains),
            ("containsword", PlainOperator::ContainsWord),
            ("beginswith", PlainOperator::BeginsWith),
            ("endswith", PlainOperator::EndsWith),
            ("within", PlainOperator::Within),
        ];
        table
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, op)| *op)
    }

    /// Whether the operator matches `input` with `argument`, exactly as the compiled
    /// [`Operator`] of the same name and argument would.
    pub fn matches(self, argument: &[u8], input: &[u8]) -> bool {
        match self {
            PlainOperator::Compare(cmp) => cmp.holds(input, compare::parse_int(argument)),
            PlainOperator::StrEq => input == argument,
            PlainOperator::Contains => memchr::memmem::find(input, argument).is_some(),
            PlainOperator::ContainsWord => strings::contains_word(argument, input),
            PlainOperator::BeginsWith => input.starts_with(argument),
            PlainOperator::EndsWith => input.ends_with(argument),
            PlainOperator::Within => strings::within(argument, input),
        }
    }
}

impl Operator {
    /// Compiles an operator from its name (without `@`, case-insensitive) and argument.
    /// The argument has already had its macros expanded.
    pub fn compile(
        name: &str,
        argument: &str,
        ctx: &CompileContext<'_>,
    ) -> Result<Operator, OperatorError> {
        let lower = name.strip_prefix('@').unwrap_or(name).to_ascii_lowercase();
        let fail = |reason: String| OperatorError {
            operator: name.to_string(),
            reason,
        };
        let arg = argument.as_bytes();
        let no_argument = |op: Operator| {
            if argument.trim().is_empty() {
                Ok(op)
            } else {
                Err(fail(format!("takes no argument, got `{argument}`")))
            }
        };
        let integer = |cmp: Comparison| Ok(Operator::Compare(cmp, compare::parse_int(arg)));
        match lower.as_str() {
            "rx" => Rx::new(argument)
                .map(Operator::Rx)
                .map_err(|e| fail(e.to_string())),
            "pm" => Pm::new(pm::parse_inline(argument))
                .map(|pm| Operator::Pm {
                    pm,
                    from_file: false,
                })
                .map_err(|e| fail(e.to_string())),
            "pmfromfile" | "pmf" => {
                let mut phrases = Vec::new();
                for (_, content) in read_data_files(argument, ctx).map_err(fail)? {
                    phrases.extend(pm::data_file_lines(&content).map(<[u8]>::to_vec));
                }
                Pm::new(phrases)
                    .map(|pm| Operator::Pm {
                        pm,
                        from_file: true,
                    })
                    .map_err(|e| fail(e.to_string()))
            }
            "detectsqli" => no_argument(Operator::DetectSqli),
            "detectxss" => no_argument(Operator::DetectXss),
            "confirmsqlsyntax" => no_argument(Operator::ConfirmSqlSyntax),
            d if DETECTORS.iter().any(|(n, _, _)| *n == d) => {
                let class = DETECTORS
                    .iter()
                    .find(|(n, _, _)| *n == d)
                    .map(|(_, _, c)| *c)
                    .expect("listed");
                no_argument(Operator::Detect(class))
            }
            "eq" => integer(Comparison::Eq),
            "ge" => integer(Comparison::Ge),
            "gt" => integer(Comparison::Gt),
            "le" => integer(Comparison::Le),
            "lt" => integer(Comparison::Lt),
            "streq" => Ok(Operator::StrEq(arg.to_vec())),
            "contains" => Ok(Operator::Contains(Needle::new(arg))),
            "containsword" => Ok(Operator::ContainsWord(arg.to_vec())),
            "beginswith" => Ok(Operator::BeginsWith(arg.to_vec())),
            "endswith" => Ok(Operator::EndsWith(arg.to_vec())),
            "within" => Ok(Operator::Within(arg.to_vec())),
            "strmatch" => Ok(Operator::StrMatch(Needle::new(arg))),
            "ipmatch" => IpSet::parse(argument.split(','), "address list")
                .map(|set| Operator::IpMatch {
                    set,
                    from_file: false,
                })
                .map_err(|e| fail(e.to_string())),
            "ipmatchfromfile" | "ipmatchf" => {
                let mut set = ip::IpSetBuilder::default();
                for (path, content) in read_data_files(argument, ctx).map_err(fail)? {
                    set.add_list(&content, &path.display().to_string())
                        .map_err(fail)?;
                }
                Ok(Operator::IpMatch {
                    set: set.build(),
                    from_file: true,
                })
            }
            "validatebyterange" => ByteRanges::parse(argument)
                .map(Operator::ValidateByteRange)
                .map_err(fail),
            "validateurlencoding" => no_argument(Operator::ValidateUrlEncoding),
            "validateutf8encoding" => no_argument(Operator::ValidateUtf8Encoding),
            "verifycc" => VerifyCc::new(argument)
                .map(Operator::VerifyCc)
                .map_err(fail),
            "unconditionalmatch" => no_argument(Operator::UnconditionalMatch),
            "nomatch" => no_argument(Operator::NoMatch),
            other if ENGINE_OPERATORS.contains(&other) => Err(fail(
                "is run by the engine (it needs I/O at request time), not compiled as a \
                 plain operator"
                    .to_string(),
            )),
            other => match UNSUPPORTED.iter().find(|(n, _)| *n == other) {
                Some((_, why)) => Err(fail(format!("unsupported operator: {why}"))),
                None => Err(fail("unknown operator".to_string())),
            },
        }
    }

    /// Runs the operator on one value. When `captures` is given and the operator
    /// captures (`@rx` groups, `@pm` keyword), it is filled with up to 10 values.
    /// Operators that capture: `@rx` (whole match and groups), `@pm`/`@pmFromFile`
    /// (the phrase), `@detectSQLi` (the fingerprint), `@detectXSS` (the input),
    /// `@verifyCC` (the card number). Others leave `captures` alone, and so does a
    /// value that does not match.
    pub fn matches(&self, input: &[u8], captures: Option<&mut Captures>) -> bool {
        match self {
            Operator::Rx(rx) => rx.matches(input, captures),
            Operator::Pm { pm, .. } => pm.matches(input, captures),
            Operator::DetectSqli => match injection::detect_sqli(input) {
                Some(fp) => {
                    if let Some(out) = captures {
                        rx::fill_captures(out, std::iter::once(fp.as_bytes()));
                    }
                    true
                }
                None => false,
            },
            Operator::DetectXss => {
                let hit = injection::detect_xss(input);
                if hit && let Some(out) = captures {
                    rx::fill_captures(out, std::iter::once(input));
                }
                hit
            }
            Operator::Detect(class) => match class.scan(input) {
                Some(f) => {
                    if let Some(out) = captures {
                        let end = f.at.end.min(input.len());
                        let start = f.at.start.min(end);
                        rx::fill_captures(out, [&input[start..end], f.rule.as_bytes()].into_iter());
                    }
                    true
                }
                None => false,
            },
            Operator::ConfirmSqlSyntax => detect::sql::confirm(input),
            Operator::Compare(cmp, value) => cmp.holds(input, *value),
            Operator::Contains(n) | Operator::StrMatch(n) => n.found_in(input),
            Operator::StrEq(s) => PlainOperator::StrEq.matches(s, input),
            Operator::ContainsWord(s) => PlainOperator::ContainsWord.matches(s, input),
            Operator::BeginsWith(s) => PlainOperator::BeginsWith.matches(s, input),
            Operator::EndsWith(s) => PlainOperator::EndsWith.matches(s, input),
            Operator::Within(s) => PlainOperator::Within.matches(s, input),
            Operator::IpMatch { set, .. } => set.contains(input),
            Operator::ValidateByteRange(r) => r.violated_by(input),
            Operator::ValidateUrlEncoding => validate::invalid_url_encoding(input),
            Operator::ValidateUtf8Encoding => validate::invalid_utf8(input),
            Operator::VerifyCc(v) => v.matches(input, captures),
            Operator::UnconditionalMatch => true,
            Operator::NoMatch => false,
        }
    }

    /// The operator's canonical SecLang name, without `@` (aliases give the long
    /// name: `@pmf` is `pmFromFile`).
    pub fn name(&self) -> &'static str {
        match self {
            Operator::Rx(_) => "rx",
            Operator::Pm {
                from_file: false, ..
            } => "pm",
            Operator::Pm {
                from_file: true, ..
            } => "pmFromFile",
            Operator::DetectSqli => "detectSQLi",
            Operator::DetectXss => "detectXSS",
            Operator::Detect(class) => DETECTORS
                .iter()
                .find(|(_, _, c)| c == class)
                .map_or("detect", |(_, name, _)| name),
            Operator::ConfirmSqlSyntax => "confirmSqlSyntax",
            Operator::Compare(Comparison::Eq, _) => "eq",
            Operator::Compare(Comparison::Ge, _) => "ge",
            Operator::Compare(Comparison::Gt, _) => "gt",
            Operator::Compare(Comparison::Le, _) => "le",
            Operator::Compare(Comparison::Lt, _) => "lt",
            Operator::StrEq(_) => "streq",
            Operator::Contains(_) => "contains",
            Operator::ContainsWord(_) => "containsWord",
            Operator::BeginsWith(_) => "beginsWith",
            Operator::EndsWith(_) => "endsWith",
            Operator::Within(_) => "within",
            Operator::StrMatch(_) => "strmatch",
            Operator::IpMatch {
                from_file: false, ..
            } => "ipMatch",
            Operator::IpMatch {
                from_file: true, ..
            } => "ipMatchFromFile",
            Operator::ValidateByteRange(_) => "validateByteRange",
            Operator::ValidateUrlEncoding => "validateUrlEncoding",
            Operator::ValidateUtf8Encoding => "validateUtf8Encoding",
            Operator::VerifyCc(_) => "verifyCC",
            Operator::UnconditionalMatch => "unconditionalMatch",
            Operator::NoMatch => "noMatch",
        }
    }

    /// For `@rx`, the final pattern in `regex` syntax (after the PCRE translation),
    /// to be compiled with [`rx::builder`] settings, e.g. in a set
    /// ([`rx_set::RxSet`]). `None` for other operators.
    pub fn rx_pattern(&self) -> Option<&str> {
        match self {
            Operator::Rx(rx) => Some(rx.pattern()),
            _ => None,
        }
    }
}

/// Reads the data files named by a `@pmFromFile` / `@ipMatchFromFile` argument:
/// whitespace-separated names, relative ones resolved against `ctx.base_dir`.
fn read_data_files(
    argument: &str,
    ctx: &CompileContext<'_>,
) -> Result<Vec<(PathBuf, Vec<u8>)>, String> {
    let names: Vec<&str> = argument.split_ascii_whitespace().collect();
    if names.is_empty() {
        return Err("needs the name of a data file".to_string());
    }
    names
        .into_iter()
        .map(|name| {
            let lower = name.to_ascii_lowercase();
            if lower.starts_with("http://") || lower.starts_with("https://") {
                return Err(format!(
                    "`{name}`: remote data files are not supported (Palisade does not \
                     download at load time); save the file and name the local copy"
                ));
            }
            let path = ctx.base_dir.join(name);
            let content = ctx
                .source
                .read(&path)
                .map_err(|e| format!("cannot read data file {}: {e}", path.display()))?;
            Ok((path, content))
        })
        .collect()
}

#[cfg(test)]
mod tests;
