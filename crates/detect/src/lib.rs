//! Palisade's semantic attack detectors.
//!
//! Each detector reads a value the way the component under attack would (a shell, a
//! template engine, an LDAP filter parser, an XML parser, a URL fetcher, a log4j
//! lookup, a mail or HTTP header writer, a deserializer), and reports an attack only
//! when the value holds the *syntax* the attack needs there: a command in a command
//! position with an argument shape, an expression inside template delimiters, a filter
//! that closes the application's own and opens another. Words alone are never enough,
//! so prose that mentions `select`, `sleep` or `zsh` passes.
//!
//! Every detector:
//! - is linear in the length of its input (each byte is looked at a bounded number of
//!   times; no regex backtracking, no recursion deeper than a fixed bound);
//! - does no I/O and keeps no state between calls;
//! - documents its grammar in `docs/detection/` and in its module;
//! - returns a [`Finding`]: the class, the grammar rule that matched, and where.
//!
//! The SQL injection and XSS detectors of libinjection (as ModSecurity runs them) live
//! here too ([`libinjection`]), and the context-aware SQL and XSS detectors build on
//! them.

use std::ops::Range;

mod candidates;
pub mod cmdi;
pub mod crlf;
pub mod jndi;
pub mod ldap;
pub mod libinjection;
pub mod nosql;
pub mod serialized;
pub mod sql;
pub mod ssrf;
pub mod ssti;
pub mod testkit;
mod text;
pub mod traversal;
pub mod xss;
pub mod xxe;

/// The classes of attack the detectors recognise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Class {
    /// SQL injection.
    Sql,
    /// Cross-site scripting: markup or script that a browser would run.
    Xss,
    /// Shell command (or command-running code) injection.
    Cmd,
    /// Path traversal and local or remote file inclusion.
    Traversal,
    /// Server-side template injection.
    Template,
    /// NoSQL (MongoDB-style) operator injection.
    NoSql,
    /// LDAP filter injection.
    Ldap,
    /// XML external entities and XInclude.
    Xxe,
    /// Server-side request forgery: a URL to an internal address.
    Ssrf,
    /// JNDI lookups (Log4Shell).
    Jndi,
    /// CRLF injection into HTTP or mail headers, and protocol commands or log lines
    /// after a line break.
    Crlf,
    /// Serialized objects of Java, PHP, .NET or Python.
    Serialized,
}

impl Class {
    /// Every class.
    pub const ALL: [Class; 12] = [
        Class::Sql,
        Class::Xss,
        Class::Cmd,
        Class::Traversal,
        Class::Template,
        Class::NoSql,
        Class::Ldap,
        Class::Xxe,
        Class::Ssrf,
        Class::Jndi,
        Class::Crlf,
        Class::Serialized,
    ];

    /// A short lower-case name (`sql`, `cmd`, ...), used in logs and rule tags.
    pub fn name(self) -> &'static str {
        match self {
            Class::Sql => "sql",
            Class::Xss => "xss",
            Class::Cmd => "cmd",
            Class::Traversal => "traversal",
            Class::Template => "template",
            Class::NoSql => "nosql",
            Class::Ldap => "ldap",
            Class::Xxe => "xxe",
            Class::Ssrf => "ssrf",
            Class::Jndi => "jndi",
            Class::Crlf => "crlf",
            Class::Serialized => "serialized",
        }
    }

    /// The detector's necessary condition (see [`candidates`]), for the test that
    /// checks the candidates cover it.
    #[cfg(test)]
    fn may_match_for_tests(self, input: &[u8]) -> bool {
        match self {
            Class::Sql => sql::may_match(input),
            Class::Xss => xss::may_match(input),
            Class::Cmd => cmdi::may_match(input),
            Class::Traversal => traversal::may_match(input),
            Class::Template => ssti::may_match(input),
            Class::NoSql => nosql::may_match(input),
            Class::Ldap => ldap::may_match(input),
            Class::Xxe => xxe::may_match(input),
            Class::Ssrf => ssrf::may_match(input),
            Class::Jndi => jndi::may_match(input),
            Class::Crlf => crlf::may_match(input),
            Class::Serialized => serialized::may_match(input),
        }
    }

    /// The detector of this class.
    pub fn scan(self, input: &[u8]) -> Option<Finding> {
        match self {
            Class::Sql => sql::scan(input),
            Class::Xss => xss::scan(input),
            Class::Cmd => cmdi::scan(input),
            Class::Traversal => traversal::scan(input),
            Class::Template => ssti::scan(input),
            Class::NoSql => nosql::scan(input),
            Class::Ldap => ldap::scan(input),
            Class::Xxe => xxe::scan(input),
            Class::Ssrf => ssrf::scan(input),
            Class::Jndi => jndi::scan(input),
            Class::Crlf => crlf::scan(input),
            Class::Serialized => serialized::scan(input),
        }
    }
}

/// A set of classes (a bit per class).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClassSet(pub(crate) u16);

impl ClassSet {
    /// Whether `class` is in the set.
    pub fn contains(self, class: Class) -> bool {
        self.0 & (1 << class as u16) != 0
    }

    /// Adds `class`.
    pub fn insert(&mut self, class: Class) {
        self.0 |= 1 << class as u16;
    }

    /// Takes `class` out.
    pub fn remove(&mut self, class: Class) {
        self.0 &= !(1 << class as u16);
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

/// The classes whose detector might find something in `input`: a superset of the
/// classes whose cheap necessary condition holds (each detector's `scan` checks its
/// own first). A class not in the set would find nothing, so a value can be checked
/// once and scanned only for its candidates. (For [`sql::confirm`], the
/// [`Class::Sql`] bit answers.) See [`mod@candidates`] for how.
pub fn candidates(input: &[u8]) -> ClassSet {
    candidates::candidates(input)
}

/// What a detector found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The class of attack.
    pub class: Class,
    /// The grammar rule that matched, for logs (`"separator then command"`).
    pub rule: &'static str,
    /// Where in the input the evidence is.
    pub at: Range<usize>,
}

impl Finding {
    fn new(class: Class, rule: &'static str, at: Range<usize>) -> Finding {
        Finding { class, rule, at }
    }
}
