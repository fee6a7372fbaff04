//! Header lines as the proxy sends them upstream: names and values as received,
//! in order, and the test a value must pass to be sent.

use bytes::Bytes;

/// The header lines sent upstream, in order: each name as the client sent it
/// (lower-case for the lines the proxy adds), each value as sent. No hash map is
/// built: the upstream connection writes the lines as they are, and the few
/// lookups the proxy makes (Host, Upgrade, a balancing key) scan a dozen lines.
#[derive(Debug, Clone, Default)]
pub struct HeaderLines(Vec<(Bytes, Bytes)>);

impl HeaderLines {
    /// No lines yet, with room for `n`.
    pub fn with_capacity(n: usize) -> HeaderLines {
        HeaderLines(Vec::with_capacity(n))
    }

    /// Adds a line. The name must be a token and the value a valid field value
    /// (see [`valid_value`]); the callers check them.
    pub fn push(&mut self, name: Bytes, value: Bytes) {
        self.0.push((name, value));
    }

    /// Every value of the lines named `name` (ASCII case ignored), in order.
    pub fn get_all<'a>(&'a self, name: &'a [u8]) -> impl DoubleEndedIterator<Item = &'a Bytes> {
        self.0
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    /// The first value named `name`.
    pub fn get(&self, name: &[u8]) -> Option<&Bytes> {
        self.0
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    /// Whether a line is named `name`.
    pub fn contains(&self, name: &[u8]) -> bool {
        self.get(name).is_some()
    }

    /// Removes every line named `name`.
    pub fn remove(&mut self, name: &[u8]) {
        self.0.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
    }

    /// The lines, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&Bytes, &Bytes)> {
        self.0.iter().map(|(n, v)| (n, v))
    }

    /// Number of lines.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there is no line.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Whether `v` can be sent as a field value: no control byte other than tab (the
/// rule `http::HeaderValue` applies).
pub fn valid_value(v: &[u8]) -> bool {
    v.iter().all(|&b| VALUE[usize::from(b)])
}

/// Which bytes a field value may hold (a look-up per byte).
static VALUE: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = i == 0x09 || (i >= 0x20 && i != 0x7f);
        i += 1;
    }
    t
};
