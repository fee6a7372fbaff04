//! A small MaxMind DB writer, for tests that need a GeoIP database: an IPv4
//! search tree with 24-bit records over a few networks, the data section, and the
//! metadata, as the MaxMind DB format (version 2.0) lays them out.

use std::net::Ipv4Addr;

/// A value of the data section.
#[derive(Debug, Clone)]
pub enum Val {
    /// UTF-8 string.
    Str(String),
    /// IEEE 754 double.
    Double(f64),
    /// Unsigned 16-bit integer.
    U16(u16),
    /// Unsigned 32-bit integer.
    U32(u32),
    /// Unsigned 64-bit integer.
    U64(u64),
    /// Map with string keys, in order.
    Map(Vec<(String, Val)>),
    /// Array.
    Array(Vec<Val>),
}

/// A map from `(key, value)` pairs.
pub fn map(pairs: Vec<(&str, Val)>) -> Val {
    Val::Map(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

/// A string value.
pub fn s(text: &str) -> Val {
    Val::Str(text.to_string())
}

/// Appends a control byte (and extended-type and size bytes) for a value of
/// format type `kind` and payload size `size`.
fn control(out: &mut Vec<u8>, kind: u8, size: usize) {
    let (size_bits, extra): (u8, Vec<u8>) = match size {
        0..=28 => (size as u8, Vec::new()),
        29..=284 => (29, vec![(size - 29) as u8]),
        285..=65_820 => (30, ((size - 285) as u16).to_be_bytes().to_vec()),
        _ => (31, ((size - 65_821) as u32).to_be_bytes()[1..].to_vec()),
    };
    if kind <= 7 {
        out.push((kind << 5) | size_bits);
    } else {
        out.push(size_bits);
        out.push(kind - 7);
    }
    out.extend_from_slice(&extra);
}

/// An unsigned integer in its shortest big-endian form.
fn uint(out: &mut Vec<u8>, kind: u8, v: u64) {
    let bytes = v.to_be_bytes();
    let skip = bytes.iter().take_while(|&&b| b == 0).count();
    control(out, kind, 8 - skip);
    out.extend_from_slice(&bytes[skip..]);
}

/// Encodes a value.
pub fn encode(out: &mut Vec<u8>, v: &Val) {
    match v {
        Val::Str(t) => {
            control(out, 2, t.len());
            out.extend_from_slice(t.as_bytes());
        }
        Val::Double(d) => {
            control(out, 3, 8);
            out.extend_from_slice(&d.to_be_bytes());
        }
        Val::U16(n) => uint(out, 5, u64::from(*n)),
        Val::U32(n) => uint(out, 6, u64::from(*n)),
        Val::U64(n) => uint(out, 9, *n),
        Val::Map(pairs) => {
            control(out, 7, pairs.len());
            for (k, v) in pairs {
                encode(out, &Val::Str(k.clone()));
                encode(out, v);
            }
        }
        Val::Array(items) => {
            control(out, 11, items.len());
            for v in items {
                encode(out, v);
            }
        }
    }
}

/// One record of the search tree.
#[derive(Debug, Clone, Copy)]
enum Rec {
    Empty,
    Node(usize),
    Data(usize),
}

/// Builds a database of type `database_type` in which each network (address,
/// prefix length) has the given record. Networks must not overlap.
pub fn build(database_type: &str, networks: &[(Ipv4Addr, u8, Val)]) -> Vec<u8> {
    let mut data = Vec::new();
    let mut nodes: Vec<[Rec; 2]> = vec![[Rec::Empty; 2]];
    for (addr, len, value) in networks {
        assert!((1..=32).contains(len), "prefix length {len}");
        let offset = data.len();
        encode(&mut data, value);
        let bits = u32::from(*addr);
        let mut node = 0;
        for i in 0..*len {
            let bit = ((bits >> (31 - i)) & 1) as usize;
            if i + 1 == *len {
                nodes[node][bit] = Rec::Data(offset);
                break;
            }
            node = match nodes[node][bit] {
                Rec::Node(n) => n,
                Rec::Empty => {
                    nodes.push([Rec::Empty; 2]);
                    let n = nodes.len() - 1;
                    nodes[node][bit] = Rec::Node(n);
                    n
                }
                Rec::Data(_) => panic!("overlapping networks"),
            };
        }
    }
    let count = nodes.len();
    let mut out = Vec::new();
    for pair in &nodes {
        for rec in pair {
            let v = match *rec {
                Rec::Empty => count,
                Rec::Node(n) => n,
                Rec::Data(off) => count + 16 + off,
            };
            assert!(v < 1 << 24, "record too large for 24 bits");
            out.extend_from_slice(&(v as u32).to_be_bytes()[1..]);
        }
    }
    out.extend_from_slice(&[0; 16]);
    out.extend_from_slice(&data);
    out.extend_from_slice(b"\xAB\xCD\xEFMaxMind.com");
    let metadata = map(vec![
        ("binary_format_major_version", Val::U16(2)),
        ("binary_format_minor_version", Val::U16(0)),
        ("build_epoch", Val::U64(1_700_000_000)),
        ("database_type", s(database_type)),
        (
            "description",
            map(vec![("en", s("Palisade test database"))]),
        ),
        ("ip_version", Val::U16(4)),
        ("languages", Val::Array(vec![s("en")])),
        ("node_count", Val::U32(count as u32)),
        ("record_size", Val::U16(24)),
    ]);
    encode(&mut out, &metadata);
    out
}

/// A GeoIP2-City-like record.
pub fn city(
    iso: &str,
    country: &str,
    continent: &str,
    city_name: &str,
    postal: &str,
    lat: f64,
    lon: f64,
) -> Val {
    map(vec![
        (
            "city",
            map(vec![("names", map(vec![("en", s(city_name))]))]),
        ),
        (
            "continent",
            map(vec![("names", map(vec![("en", s(continent))]))]),
        ),
        (
            "country",
            map(vec![
                ("iso_code", s(iso)),
                ("names", map(vec![("en", s(country))])),
            ]),
        ),
        (
            "location",
            map(vec![
                ("latitude", Val::Double(lat)),
                ("longitude", Val::Double(lon)),
            ]),
        ),
        ("postal", map(vec![("code", s(postal))])),
    ])
}
