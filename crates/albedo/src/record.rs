//! Recording received requests, one JSON line each, and reading the record back.

use std::fs::{File, OpenOptions};
use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::Error;

/// One request as the backend received it: a line of the record file.
///
/// Header names are lowercase (hyper normalises them) and grouped by name in the order each
/// name first appeared; values that are not UTF-8 are recorded lossily. The body is
/// recorded exactly, in standard base64.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The request method, e.g. `GET`.
    pub method: String,
    /// The request target as received (path and query, or an absolute URI).
    pub uri: String,
    /// The path part of the target.
    pub path: String,
    /// The query part of the target, without the `?`, if there was one.
    pub query: Option<String>,
    /// The protocol version, e.g. `HTTP/1.1`.
    pub version: String,
    /// The header fields as (name, value) pairs.
    pub headers: Vec<(String, String)>,
    /// The request body in standard base64.
    pub body_base64: String,
}

impl Record {
    /// Builds the record of a request from its head and its complete body.
    pub fn new(parts: &hyper::http::request::Parts, body: &[u8]) -> Self {
        Self {
            method: parts.method.as_str().to_owned(),
            uri: parts.uri.to_string(),
            path: parts.uri.path().to_owned(),
            query: parts.uri.query().map(str::to_owned),
            version: format!("{:?}", parts.version),
            headers: parts
                .headers
                .iter()
                .map(|(name, value)| {
                    (
                        name.as_str().to_owned(),
                        String::from_utf8_lossy(value.as_bytes()).into_owned(),
                    )
                })
                .collect(),
            body_base64: base64::engine::general_purpose::STANDARD.encode(body),
        }
    }

    /// Returns the values of every header named `name` (case-insensitively), in order.
    pub fn header_values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.headers
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Decodes the recorded body. `None` means the record's base64 is corrupt.
    pub fn body(&self) -> Option<Vec<u8>> {
        base64::engine::general_purpose::STANDARD
            .decode(&self.body_base64)
            .ok()
    }
}

/// Appends records to a file. Each record is written with one `write` call while a lock is
/// held, and before the response is sent, so a reader that has seen the response also sees
/// the record.
#[derive(Debug)]
pub(crate) struct Recorder {
    path: PathBuf,
    file: Mutex<File>,
}

impl Recorder {
    /// Opens (creating if needed) `path` for appending.
    pub(crate) fn open(path: &Path) -> Result<Self, Error> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|source| Error::RecordIo {
                path: path.to_owned(),
                source,
            })?;
        Ok(Self {
            path: path.to_owned(),
            file: Mutex::new(file),
        })
    }

    /// Appends one record as a JSON line.
    pub(crate) fn append(&self, record: &Record) -> Result<(), Error> {
        let io_error = |source| Error::RecordIo {
            path: self.path.clone(),
            source,
        };
        let mut line = serde_json::to_vec(record).map_err(|e| io_error(e.into()))?;
        line.push(b'\n');
        // A poisoned lock only means another writer panicked mid-call; the file is still
        // usable because every line goes out in a single write.
        let mut file = self
            .file
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        file.write_all(&line).map_err(io_error)?;
        file.flush().map_err(io_error)
    }
}

/// Reads every record from a record file. A missing file means no request was recorded
/// and yields an empty list; blank lines are skipped.
pub fn read_records(path: &Path) -> Result<Vec<Record>, Error> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(Error::RecordIo {
                path: path.to_owned(),
                source,
            });
        }
    };
    let mut records = Vec::new();
    for (index, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|source| Error::RecordIo {
            path: path.to_owned(),
            source,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let record = serde_json::from_str(&line).map_err(|source| Error::RecordParse {
            path: path.to_owned(),
            line: index + 1,
            source,
        })?;
        records.push(record);
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(method: &str, uri: &str, headers: &[(&str, &[u8])]) -> hyper::http::request::Parts {
        let mut builder = hyper::Request::builder().method(method).uri(uri);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(()).unwrap().into_parts().0
    }

    #[test]
    fn record_fields() {
        let p = parts(
            "POST",
            "/a/b?x=1&y",
            &[("Host", b"localhost"), ("X-Two", b"1"), ("x-two", b"2\xFF")],
        );
        let record = Record::new(&p, b"\x00body");
        assert_eq!(record.method, "POST");
        assert_eq!(record.uri, "/a/b?x=1&y");
        assert_eq!(record.path, "/a/b");
        assert_eq!(record.query.as_deref(), Some("x=1&y"));
        assert_eq!(record.version, "HTTP/1.1");
        assert_eq!(
            record.header_values("X-TWO").collect::<Vec<_>>(),
            vec!["1", "2\u{FFFD}"]
        );
        assert_eq!(record.body().unwrap(), b"\x00body");
    }

    #[test]
    fn append_and_read_back() {
        let dir = std::env::temp_dir().join(format!("albedo-record-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("unit.jsonl");
        let _ = std::fs::remove_file(&path);

        assert!(read_records(&path).unwrap().is_empty());
        let recorder = Recorder::open(&path).unwrap();
        let first = Record::new(&parts("GET", "/", &[]), b"");
        let second = Record::new(&parts("PUT", "/x", &[("a", b"b")]), b"data");
        recorder.append(&first).unwrap();
        recorder.append(&second).unwrap();
        assert_eq!(read_records(&path).unwrap(), vec![first, second]);

        std::fs::write(&path, "{\"method\":1}\n").unwrap();
        let err = read_records(&path).unwrap_err();
        assert!(matches!(err, Error::RecordParse { line: 1, .. }), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
