//! The `/reflect` specification: parsing and validation.

use base64::Engine as _;
use serde_json::Value;

/// A parsed and validated `/reflect` request body.
///
/// The JSON fields are `status`, `headers`, `body`, `encodedBody` and `logMessage`. Like
/// albedo (whose JSON decoder is Go's), key names match case-insensitively and unknown keys
/// are ignored. Should one field appear under keys that differ only in case, the key that
/// sorts last wins (albedo takes the last in document order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReflectSpec {
    /// The status to answer with; a missing or zero `status` means 200.
    pub status: u16,
    /// The headers to answer with, sorted by name (albedo's Go map has no order either).
    pub headers: Vec<(String, String)>,
    /// The response body: `body` if it is non-empty, else `encodedBody` decoded.
    pub body: Vec<u8>,
    /// A message for the backend's own log, if the spec carried one.
    pub log_message: Option<String>,
}

/// Why a `/reflect` specification was refused. Each is answered with `400 Bad Request`
/// and the error's text as the body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReflectError {
    /// The body is not JSON, or a field has the wrong type.
    #[error("Invalid JSON in request body: {0}")]
    InvalidJson(String),
    /// The status is outside 200..=599 (albedo allows 100..=599; a 1xx final response
    /// cannot be sent by this server, so it is refused here).
    #[error("Invalid status code: {0}")]
    InvalidStatus(i64),
    /// `encodedBody` is not valid standard base64.
    #[error("invalid base64 encoding of response body")]
    InvalidBase64,
}

impl ReflectSpec {
    /// Parses and validates a `/reflect` request body.
    pub fn parse(json: &[u8]) -> Result<Self, ReflectError> {
        let value: Value =
            serde_json::from_slice(json).map_err(|e| ReflectError::InvalidJson(e.to_string()))?;
        let Value::Object(map) = value else {
            return Err(ReflectError::InvalidJson(
                "the specification must be a JSON object".to_owned(),
            ));
        };

        let mut status: i64 = 0;
        let mut headers = Vec::new();
        let mut body = String::new();
        let mut encoded_body = String::new();
        let mut log_message = String::new();
        for (key, value) in &map {
            match key.to_ascii_lowercase().as_str() {
                "status" => status = int_field(key, value)?,
                "headers" => headers = headers_field(key, value)?,
                "body" => body = string_field(key, value)?,
                "encodedbody" => encoded_body = string_field(key, value)?,
                "logmessage" => log_message = string_field(key, value)?,
                _ => {}
            }
        }

        let status = match status {
            0 => 200,
            200..=599 => u16::try_from(status).map_err(|_| ReflectError::InvalidStatus(status))?,
            _ => return Err(ReflectError::InvalidStatus(status)),
        };
        let body = if !body.is_empty() {
            body.into_bytes()
        } else if !encoded_body.is_empty() {
            decode_base64(&encoded_body)?
        } else {
            Vec::new()
        };
        Ok(Self {
            status,
            headers,
            body,
            log_message: (!log_message.is_empty()).then_some(log_message),
        })
    }
}

/// Decodes standard base64 (with padding), ignoring line breaks the way Go's streaming
/// decoder does.
fn decode_base64(text: &str) -> Result<Vec<u8>, ReflectError> {
    let compact: Vec<u8> = text
        .bytes()
        .filter(|b| !matches!(b, b'\r' | b'\n'))
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(compact)
        .map_err(|_| ReflectError::InvalidBase64)
}

fn type_error(key: &str, want: &str) -> ReflectError {
    ReflectError::InvalidJson(format!("field {key:?} must be {want}"))
}

fn int_field(key: &str, value: &Value) -> Result<i64, ReflectError> {
    match value {
        Value::Null => Ok(0),
        Value::Number(n) => n.as_i64().ok_or_else(|| type_error(key, "an integer")),
        _ => Err(type_error(key, "an integer")),
    }
}

fn string_field(key: &str, value: &Value) -> Result<String, ReflectError> {
    match value {
        Value::Null => Ok(String::new()),
        Value::String(s) => Ok(s.clone()),
        _ => Err(type_error(key, "a string")),
    }
}

fn headers_field(key: &str, value: &Value) -> Result<Vec<(String, String)>, ReflectError> {
    match value {
        Value::Null => Ok(Vec::new()),
        Value::Object(map) => map
            .iter()
            .map(|(name, v)| match v {
                Value::String(s) => Ok((name.clone(), s.clone())),
                Value::Null => Ok((name.clone(), String::new())),
                _ => Err(type_error(key, "an object of strings")),
            })
            .collect(),
        _ => Err(type_error(key, "an object of strings")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_object_is_plain_200() {
        let spec = ReflectSpec::parse(b"{}").unwrap();
        assert_eq!(spec.status, 200);
        assert!(spec.headers.is_empty());
        assert!(spec.body.is_empty());
        assert_eq!(spec.log_message, None);
    }

    #[test]
    fn full_spec() {
        let spec = ReflectSpec::parse(
            br#"{"status": 418, "headers": {"X-A": "1", "Content-Type": "text/html"},
                 "body": "<p>hi</p>", "logMessage": "test 1"}"#,
        )
        .unwrap();
        assert_eq!(spec.status, 418);
        assert_eq!(
            spec.headers,
            vec![
                ("Content-Type".to_owned(), "text/html".to_owned()),
                ("X-A".to_owned(), "1".to_owned())
            ]
        );
        assert_eq!(spec.body, b"<p>hi</p>");
        assert_eq!(spec.log_message.as_deref(), Some("test 1"));
    }

    #[test]
    fn encoded_body_is_decoded() {
        let spec = ReflectSpec::parse(br#"{"encodedBody": "AAEC/w=="}"#).unwrap();
        assert_eq!(spec.body, vec![0, 1, 2, 255]);
        let spec = ReflectSpec::parse(br#"{"encodedBody": "aGVs\r\nbG8="}"#).unwrap();
        assert_eq!(spec.body, b"hello");
    }

    #[test]
    fn body_wins_over_encoded_body() {
        let spec = ReflectSpec::parse(br#"{"body": "plain", "encodedBody": "aGVsbG8="}"#).unwrap();
        assert_eq!(spec.body, b"plain");
        let spec = ReflectSpec::parse(br#"{"body": "", "encodedBody": "aGVsbG8="}"#).unwrap();
        assert_eq!(spec.body, b"hello");
    }

    #[test]
    fn keys_match_case_insensitively() {
        let spec =
            ReflectSpec::parse(br#"{"STATUS": 201, "Body": "x", "ENCODEDBODY": "eQ=="}"#).unwrap();
        assert_eq!(spec.status, 201);
        assert_eq!(spec.body, b"x");
    }

    #[test]
    fn bad_status_is_refused() {
        for (json, status) in [
            (&br#"{"status": 99}"#[..], 99),
            (br#"{"status": 600}"#, 600),
            (br#"{"status": -1}"#, -1),
            (br#"{"status": 101}"#, 101),
        ] {
            assert_eq!(
                ReflectSpec::parse(json),
                Err(ReflectError::InvalidStatus(status))
            );
        }
        assert_eq!(
            ReflectSpec::parse(br#"{"status": 599}"#).unwrap().status,
            599
        );
    }

    #[test]
    fn bad_json_is_refused() {
        for json in [
            &b"not json"[..],
            b"[1]",
            br#"{"status": "200"}"#,
            br#"{"status": 200.5}"#,
            br#"{"body": 3}"#,
            br#"{"headers": {"a": 1}}"#,
            br#"{"headers": ["a"]}"#,
        ] {
            assert!(
                matches!(ReflectSpec::parse(json), Err(ReflectError::InvalidJson(_))),
                "{}",
                String::from_utf8_lossy(json)
            );
        }
    }

    #[test]
    fn bad_base64_is_refused() {
        assert_eq!(
            ReflectSpec::parse(br#"{"encodedBody": "!!!"}"#),
            Err(ReflectError::InvalidBase64)
        );
    }

    #[test]
    fn nulls_are_zero_values() {
        let spec = ReflectSpec::parse(
            br#"{"status": null, "headers": null, "body": null, "encodedBody": null}"#,
        )
        .unwrap();
        assert_eq!(spec.status, 200);
        assert!(spec.body.is_empty());
    }
}
