//! `@rbl` and `@geoLookup`: DNS block-list lookups through a resolver the server
//! provides, and GeoIP lookups in the MaxMind database `SecGeoLookupDb` names.
//!
//! The engine does no network I/O: a DNS block-list lookup is a call to the
//! [`RblResolver`] the server put in the transaction's
//! [`TxContext`](crate::TxContext), which answers from its cache or asks its
//! resolver. The engine forms the name to look up as ModSecurity v3 does, asks for
//! each name at most once per transaction, and stops asking after a number of
//! lookups per transaction ([`DEFAULT_RBL_LOOKUPS`]). A GeoIP lookup is local: the
//! database is read at load and kept in the rule set.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

/// How many DNS block-list names one transaction may look up, unless the server
/// sets another limit ([`Transaction::set_rbl_lookup_limit`](crate::Transaction::set_rbl_lookup_limit)).
pub const DEFAULT_RBL_LOOKUPS: usize = 8;

/// What a DNS block-list lookup found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RblAnswer {
    /// The name resolves: the input is listed. The first address answered.
    Listed(Ipv4Addr),
    /// The name does not exist (or has no address): not listed.
    NotListed,
    /// No answer could be had (timeout, server failure, no resolver reachable):
    /// the operator does not match, and the failure is reported.
    Failed(String),
}

/// Answers DNS block-list lookups for a transaction. The server implements it;
/// the engine calls it during rule evaluation, which is synchronous, so an
/// implementation answers from a cache or waits a bounded time.
pub trait RblResolver: Send + Sync + std::fmt::Debug {
    /// Looks up the A record of `name` (a fully formed name such as
    /// `4.3.2.1.zen.example.org`).
    fn lookup(&self, name: &str) -> RblAnswer;
}

/// A DNS block-list lookup that gave no answer, for the server to log and count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RblFailure {
    /// The resolver failed on `name`.
    Failed {
        /// The name looked up.
        name: String,
        /// Why, as the resolver said.
        reason: String,
    },
    /// The transaction reached its lookup limit: this name and any later one were
    /// not looked up (reported once per transaction).
    OverLimit {
        /// The first name not looked up.
        name: String,
        /// The limit.
        limit: usize,
    },
}

impl std::fmt::Display for RblFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RblFailure::Failed { name, reason } => {
                write!(f, "@rbl lookup of {name} failed: {reason}")
            }
            RblFailure::OverLimit { name, limit } => write!(
                f,
                "@rbl lookup of {name} skipped: the transaction made its {limit} lookups"
            ),
        }
    }
}

/// Why no name is formed for an input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RblNameError {
    /// The zone is an http:BL zone and no `SecHttpBlKey` is set.
    #[error("an http:BL zone needs an access key: set SecHttpBlKey")]
    MissingKey,
    /// The input cannot be part of a DNS name.
    #[error("{0:?} cannot be part of a DNS name")]
    NotAName(String),
}

/// True when `zone` is an http:BL zone, whose names carry an access key.
pub fn is_httpbl_zone(zone: &str) -> bool {
    zone.to_ascii_lowercase().contains("httpbl.org")
}

/// The name `@rbl zone` looks up for `input`, as ModSecurity v3 forms it: an IPv4
/// address `a.b.c.d` gives `d.c.b.a.zone` (with the http:BL access key in front,
/// `key.d.c.b.a.zone`, for an http:BL zone); any other input is taken as a domain
/// name and gives `input.zone`.
pub fn rbl_name(
    input: &[u8],
    zone: &str,
    httpbl_key: Option<&str>,
) -> Result<String, RblNameError> {
    let text = String::from_utf8_lossy(input);
    if let Ok(ip) = text.parse::<Ipv4Addr>() {
        let [a, b, c, d] = ip.octets();
        if is_httpbl_zone(zone) {
            let key = httpbl_key
                .filter(|k| !k.is_empty())
                .ok_or(RblNameError::MissingKey)?;
            return Ok(format!("{key}.{d}.{c}.{b}.{a}.{zone}"));
        }
        return Ok(format!("{d}.{c}.{b}.{a}.{zone}"));
    }
    let name = format!("{text}.{zone}");
    if valid_name(&name) {
        Ok(name)
    } else {
        Err(RblNameError::NotAName(text.into_owned()))
    }
}

/// A host name a resolver can be asked for: labels of letters, digits, `-` and
/// `_`, 1 to 63 bytes each, 253 bytes in all.
fn valid_name(name: &str) -> bool {
    let name = name.strip_suffix('.').unwrap_or(name);
    name.len() <= 253
        && name.split('.').all(|l| {
            (1..=63).contains(&l.len())
                && l.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// What the answer address says, for known providers (the debug log only: the
/// operator matches on any address).
pub fn rbl_detail(zone: &str, answer: Ipv4Addr) -> String {
    let [first, days, score, kind] = answer.octets();
    let zone = zone.to_ascii_lowercase();
    if zone.contains("httpbl.org") {
        if first != 127 {
            return format!("unexpected http:BL answer {answer}");
        }
        let what = match kind {
            0 => "search engine",
            1 => "suspicious",
            2 => "harvester",
            3 => "suspicious, harvester",
            4 => "comment spammer",
            5 => "suspicious, comment spammer",
            6 => "harvester, comment spammer",
            7 => "suspicious, harvester, comment spammer",
            _ => "unknown type",
        };
        return format!("http:BL: {what}, threat score {score}, last seen {days} days ago");
    }
    if zone.contains("spamhaus.org") {
        let list = match kind {
            2 | 3 => "SBL (spam sources)",
            4..=7 => "XBL (exploited hosts)",
            10 | 11 => "PBL (end-user ranges)",
            _ => "listed",
        };
        return format!("Spamhaus: {list}");
    }
    if zone.contains("uribl.com") {
        let list = match kind {
            2 => "black",
            4 => "grey",
            8 => "red",
            14 => "black, grey, red",
            255 => "query refused (the resolver is blocked)",
            _ => "white",
        };
        return format!("URIBL: {list}");
    }
    format!("answer {answer}")
}

/// A MaxMind database (`SecGeoLookupDb`), read into memory at load.
pub struct GeoDb {
    reader: maxminddb::Reader<Vec<u8>>,
}

impl std::fmt::Debug for GeoDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let m = self.reader.metadata();
        f.debug_struct("GeoDb")
            .field("database_type", &m.database_type)
            .field("node_count", &m.node_count)
            .finish()
    }
}

/// The GEO fields a lookup fills, in the order ModSecurity v3 sets them, with
/// the path of each in a GeoIP2 / GeoLite2 record.
const GEO_TEXT_FIELDS: [(&str, &[&str]); 5] = [
    ("COUNTRY_CODE", &["country", "iso_code"]),
    ("COUNTRY_NAME", &["country", "names", "en"]),
    ("COUNTRY_CONTINENT", &["continent", "names", "en"]),
    ("CITY", &["city", "names", "en"]),
    ("POSTAL_CODE", &["postal", "code"]),
];

/// The coordinates, printed with six decimals.
const GEO_NUMBER_FIELDS: [(&str, &[&str]); 2] = [
    ("LATITUDE", &["location", "latitude"]),
    ("LONGITUDE", &["location", "longitude"]),
];

impl GeoDb {
    /// Reads a MaxMind database from its bytes; an error says what is wrong.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<GeoDb, String> {
        let reader = maxminddb::Reader::from_source(bytes).map_err(|e| e.to_string())?;
        Ok(GeoDb { reader })
    }

    /// The database's type, as its metadata names it (`GeoLite2-City`).
    pub fn database_type(&self) -> &str {
        &self.reader.metadata().database_type
    }

    /// The GEO collection for `ip`: `None` when the database has no entry for
    /// it; otherwise the fields the entry has, keyed as ModSecurity names them.
    pub fn lookup(&self, ip: IpAddr) -> Result<Option<Vec<(&'static str, String)>>, String> {
        let found = self.reader.lookup(ip).map_err(|e| e.to_string())?;
        if !found.has_data() {
            return Ok(None);
        }
        let path = |p: &[&'static str]| -> Vec<maxminddb::PathElement<'static>> {
            p.iter().map(|k| maxminddb::PathElement::Key(k)).collect()
        };
        let mut out = Vec::new();
        // A field of another type than expected is left out, as a missing one.
        for (key, p) in GEO_TEXT_FIELDS {
            if let Ok(Some(v)) = found.decode_path::<String>(&path(p)) {
                out.push((key, v));
            }
        }
        for (key, p) in GEO_NUMBER_FIELDS {
            if let Ok(Some(v)) = found.decode_path::<f64>(&path(p)) {
                out.push((key, format!("{v:.6}")));
            }
        }
        Ok(Some(out))
    }
}

/// A transaction's lookups so far.
#[derive(Debug)]
pub(crate) struct TxLookups {
    /// Answers by name: a name is looked up once per transaction.
    answers: HashMap<String, bool>,
    /// Names looked up through the resolver.
    count: usize,
    /// The most names to look up.
    pub limit: usize,
    /// Failures not yet taken by the server.
    pub failures: Vec<RblFailure>,
    over_limit_noted: bool,
    /// The GEO fields of the last `@geoLookup` hit, waiting to replace GEO once
    /// the rule has looked at all its values.
    pub geo: Option<Vec<(&'static str, String)>>,
}

impl Default for TxLookups {
    fn default() -> Self {
        TxLookups {
            answers: HashMap::new(),
            count: 0,
            limit: DEFAULT_RBL_LOOKUPS,
            failures: Vec::new(),
            over_limit_noted: false,
            geo: None,
        }
    }
}

impl TxLookups {
    /// `@rbl zone` on `input`: true when the formed name resolves.
    pub fn rbl(
        &mut self,
        resolver: Option<&Arc<dyn RblResolver>>,
        zone: &str,
        httpbl_key: Option<&str>,
        input: &[u8],
    ) -> bool {
        let Some(resolver) = resolver else {
            // Loading the rule warned: no resolver, no match.
            return false;
        };
        let name = match rbl_name(input, zone, httpbl_key) {
            Ok(n) => n,
            Err(e) => {
                tracing::debug!("@rbl {zone}: no lookup: {e}");
                return false;
            }
        };
        if let Some(&listed) = self.answers.get(&name) {
            return listed;
        }
        if self.count >= self.limit {
            if !self.over_limit_noted {
                self.over_limit_noted = true;
                self.failures.push(RblFailure::OverLimit {
                    name,
                    limit: self.limit,
                });
            }
            return false;
        }
        self.count += 1;
        let listed = match resolver.lookup(&name) {
            RblAnswer::Listed(addr) => {
                tracing::debug!(
                    "@rbl lookup of {} succeeded: {}",
                    String::from_utf8_lossy(input),
                    rbl_detail(zone, addr)
                );
                true
            }
            RblAnswer::NotListed => {
                tracing::debug!("@rbl lookup of {name}: not listed");
                false
            }
            RblAnswer::Failed(reason) => {
                tracing::debug!("@rbl lookup of {name} failed: {reason}");
                self.failures.push(RblFailure::Failed {
                    name: name.clone(),
                    reason,
                });
                false
            }
        };
        self.answers.insert(name, listed);
        listed
    }

    /// `@geoLookup` on `input`: true when the database has an entry for the
    /// address, whose fields then wait in `self.geo`.
    pub fn geo(&mut self, db: Option<&GeoDb>, input: &[u8]) -> bool {
        let Some(db) = db else {
            return false;
        };
        let text = String::from_utf8_lossy(input);
        let Ok(ip) = text.parse::<IpAddr>() else {
            tracing::debug!("@geoLookup: {text:?} is not an IP address");
            return false;
        };
        match db.lookup(ip) {
            Ok(Some(fields)) => {
                self.geo = Some(fields);
                true
            }
            Ok(None) => false,
            Err(e) => {
                tracing::debug!("@geoLookup of {ip}: {e}");
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_as_modsecurity_forms_them() {
        assert_eq!(
            rbl_name(b"1.2.3.4", "zen.example.org", None).unwrap(),
            "4.3.2.1.zen.example.org"
        );
        assert_eq!(
            rbl_name(b"1.2.3.4", "dnsbl.httpbl.org", Some("abcdefghijkl")).unwrap(),
            "abcdefghijkl.4.3.2.1.dnsbl.httpbl.org"
        );
        assert_eq!(
            rbl_name(b"1.2.3.4", "dnsbl.httpbl.org", None),
            Err(RblNameError::MissingKey)
        );
        // Domain form, as for URI block lists; http:BL needs no key for it.
        assert_eq!(
            rbl_name(b"evil.example", "multi.uribl.example", None).unwrap(),
            "evil.example.multi.uribl.example"
        );
        assert_eq!(
            rbl_name(b"evil.example", "dnsbl.httpbl.org", None).unwrap(),
            "evil.example.dnsbl.httpbl.org"
        );
        // Not a name: never sent to a resolver.
        for bad in [&b"::1"[..], b"a b", b"", b"x..y", b"<script>"] {
            assert!(
                matches!(
                    rbl_name(bad, "zone.example", None),
                    Err(RblNameError::NotAName(_))
                ),
                "{bad:?}"
            );
        }
        assert!(rbl_name(&[b'a'; 64], "zone.example", None).is_err());
    }

    #[test]
    fn provider_details() {
        assert_eq!(
            rbl_detail("dnsbl.httpbl.org", Ipv4Addr::new(127, 3, 40, 1)),
            "http:BL: suspicious, threat score 40, last seen 3 days ago"
        );
        assert_eq!(
            rbl_detail("zen.spamhaus.org", Ipv4Addr::new(127, 0, 0, 4)),
            "Spamhaus: XBL (exploited hosts)"
        );
        assert_eq!(
            rbl_detail("multi.uribl.com", Ipv4Addr::new(127, 0, 0, 2)),
            "URIBL: black"
        );
        assert_eq!(
            rbl_detail("bl.example", Ipv4Addr::new(127, 0, 0, 9)),
            "answer 127.0.0.9"
        );
    }

    #[test]
    fn a_bad_database_is_an_error() {
        let e = GeoDb::from_bytes(b"not a maxmind database".to_vec()).unwrap_err();
        assert!(!e.is_empty());
    }
}
