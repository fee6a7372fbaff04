//! What a persistent record is: its key (application, collection, key), its
//! variables, and the built-in fields every record carries.

use super::CollectionError;
use crate::actions::CollectionKind;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashMap;

/// The longest encoded key a store must accept: LMDB's default key size. Longer
/// keys are stored under a digest (see [`RecordKey::encode`]).
pub const MAX_KEY_BYTES: usize = 511;

/// Most members one multi-valued variable keeps; adding one more evicts the member
/// added longest ago.
pub const SET_MEMBER_LIMIT: usize = 1024;

/// The application namespace used when the rules set no `SecWebAppId`.
pub const DEFAULT_APP: &str = "default";

/// Identifies one persistent record: the application namespace (`SecWebAppId`), the
/// collection (IP, GLOBAL, SESSION, USER, RESOURCE) and the key `initcol`, `setsid`
/// or `setuid` gave.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RecordKey {
    /// `SecWebAppId`, [`DEFAULT_APP`] when unset.
    pub app: String,
    /// The collection; never TX.
    pub collection: CollectionKind,
    /// The key, as the rule expanded it.
    pub key: Vec<u8>,
}

impl RecordKey {
    /// A key for `collection`; TX is refused (it is not persistent), and so is an
    /// application name holding a NUL byte (the encoding's separator).
    pub fn new(
        app: &str,
        collection: CollectionKind,
        key: impl Into<Vec<u8>>,
    ) -> Result<Self, CollectionError> {
        if collection == CollectionKind::Tx {
            return Err(CollectionError::NotPersistent("TX".into()));
        }
        if app.is_empty() || app.contains('\0') {
            return Err(CollectionError::BadApp(app.to_string()));
        }
        Ok(RecordKey {
            app: app.to_string(),
            collection,
            key: key.into(),
        })
    }

    /// A key from a collection name (`ip`, `GLOBAL`, ...), as the CLI and admin API
    /// take it: an unknown or non-persistent name is an error naming it.
    pub fn parse(
        app: &str,
        collection: &str,
        key: impl Into<Vec<u8>>,
    ) -> Result<Self, CollectionError> {
        let kind = CollectionKind::from_name(collection)
            .ok_or_else(|| CollectionError::UnknownCollection(collection.to_string()))?;
        Self::new(app, kind, key)
    }

    /// The bytes a store keys the record by: `app NUL COLLECTION NUL key`. When that
    /// would exceed [`MAX_KEY_BYTES`], the key part is replaced by `#sha256:` and the
    /// hex digest of the key, so long keys (a long session cookie) still get a record
    /// of their own instead of being refused or cut, and two long keys never share
    /// one. A key that itself starts with `#sha256:` and fits is stored as is; the
    /// NUL separators keep it apart from any digest of another application or
    /// collection.
    pub fn encode(&self) -> Vec<u8> {
        let head = self.app.len() + self.collection.name().len() + 2;
        let mut out = Vec::with_capacity(head + self.key.len().min(MAX_KEY_BYTES));
        out.extend_from_slice(self.app.as_bytes());
        out.push(0);
        out.extend_from_slice(self.collection.name().as_bytes());
        out.push(0);
        if head + self.key.len() <= MAX_KEY_BYTES {
            out.extend_from_slice(&self.key);
        } else {
            out.extend_from_slice(b"#sha256:");
            for b in Sha256::digest(&self.key) {
                out.extend_from_slice(format!("{b:02x}").as_bytes());
            }
        }
        out
    }

    /// Reads an encoded key back. A digest key decodes to the `#sha256:` form (the
    /// original key is not kept).
    pub fn decode(bytes: &[u8]) -> Result<Self, CollectionError> {
        let bad =
            || CollectionError::Corrupt(format!("record key {:?}", String::from_utf8_lossy(bytes)));
        let mut parts = bytes.splitn(3, |b| *b == 0);
        let app = std::str::from_utf8(parts.next().ok_or_else(bad)?).map_err(|_| bad())?;
        let coll = std::str::from_utf8(parts.next().ok_or_else(bad)?).map_err(|_| bad())?;
        let key = parts.next().ok_or_else(bad)?;
        Self::parse(app, coll, key.to_vec()).map_err(|_| bad())
    }

    /// The prefix every encoded key of `app` and `collection` starts with, to list
    /// one collection.
    pub fn prefix(app: &str, collection: CollectionKind) -> Vec<u8> {
        let mut out = Vec::with_capacity(app.len() + 10);
        out.extend_from_slice(app.as_bytes());
        out.push(0);
        out.extend_from_slice(collection.name().as_bytes());
        out.push(0);
        out
    }
}

/// A variable's value: plain bytes, or a set of members (a multi-valued variable,
/// filled by `addmember` and tested by `@memberOf`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum VarValue {
    /// A plain value (numbers are kept as their decimal text, as in ModSecurity).
    Scalar(#[serde(with = "bytes_text")] Vec<u8>),
    /// Members, each with the Unix time it was last added.
    Set(#[serde(with = "set_text")] HashMap<Vec<u8>, i64>),
}

impl VarValue {
    /// What a rule reads: the value, or for a set the number of members.
    pub fn as_read(&self) -> std::borrow::Cow<'_, [u8]> {
        match self {
            VarValue::Scalar(v) => std::borrow::Cow::Borrowed(v),
            VarValue::Set(m) => std::borrow::Cow::Owned(m.len().to_string().into_bytes()),
        }
    }
}

/// One variable of a record, with its expiry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredVar {
    /// The value.
    pub value: VarValue,
    /// Unix time in seconds from which the variable is gone (`expirevar`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
}

impl StoredVar {
    /// A plain value without expiry.
    pub fn scalar(value: impl Into<Vec<u8>>) -> Self {
        StoredVar {
            value: VarValue::Scalar(value.into()),
            expires_at: None,
        }
    }

    /// True while the variable has not expired at `now`.
    pub fn is_live(&self, now: i64) -> bool {
        self.expires_at.is_none_or(|t| t > now)
    }
}

/// A persistent record as the store holds it: its variables (names lower-case) and
/// the fields ModSecurity keeps for every record.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct StoredRecord {
    /// Variables by lower-case name.
    #[serde(with = "vars_text")]
    pub vars: HashMap<Vec<u8>, StoredVar>,
    /// CREATE_TIME: Unix time the record was created.
    pub create_time: i64,
    /// LAST_UPDATE_TIME: Unix time of the last write.
    pub last_update_time: i64,
    /// UPDATE_COUNTER: how many transactions wrote to it.
    pub update_counter: u64,
    /// TIMEOUT: seconds without a write after which the whole record is gone
    /// (`SecCollectionTimeout`, or `setvar:ip.timeout=N`).
    pub timeout: i64,
}

impl StoredRecord {
    /// Unix time from which the whole record is gone.
    pub fn expires_at(&self) -> i64 {
        self.last_update_time.saturating_add(self.timeout)
    }

    /// The record as a transaction at `now` sees it: `None` when the whole record
    /// has expired, else without its expired variables.
    pub fn live(mut self, now: i64) -> Option<Self> {
        if self.expires_at() <= now {
            return None;
        }
        self.vars.retain(|_, v| v.is_live(now));
        Some(self)
    }

    /// UPDATE_RATE: writes per minute over the record's life (ModSecurity v2's
    /// definition); `None` in the record's first second.
    pub fn update_rate(&self, now: i64) -> Option<u64> {
        let age = now - self.create_time;
        (age > 0).then(|| self.update_counter.saturating_mul(60) / age as u64)
    }
}

/// Names of the built-in fields a rule can read from every loaded record, in the
/// lower case the engine keeps variable names in.
pub const BUILT_IN_FIELDS: [&str; 7] = [
    "key",
    "timeout",
    "create_time",
    "last_update_time",
    "update_counter",
    "is_new",
    "update_rate",
];

// Byte strings in JSON (export/import, the admin API, the sync stream): UTF-8 text
// as is; anything else as `base64:` text. A text value that itself starts with
// `base64:` is encoded too, so decoding is unambiguous.
mod bytes_text {
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    const TAG: &str = "base64:";

    /// Bytes as JSON text: UTF-8 as is, anything else (or text starting with the
    /// tag) as `base64:` and its encoding.
    pub fn to_text(v: &[u8]) -> String {
        match std::str::from_utf8(v) {
            Ok(s) if !s.starts_with(TAG) => s.to_string(),
            _ => format!(
                "{TAG}{}",
                base64::engine::general_purpose::STANDARD.encode(v)
            ),
        }
    }

    /// The reverse of [`to_text`].
    pub fn from_text(s: &str) -> Result<Vec<u8>, String> {
        match s.strip_prefix(TAG) {
            Some(b) => base64::engine::general_purpose::STANDARD
                .decode(b)
                .map_err(|e| format!("bad base64 value: {e}")),
            None => Ok(s.as_bytes().to_vec()),
        }
    }

    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&to_text(v))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = String::deserialize(d)?;
        from_text(&s).map_err(serde::de::Error::custom)
    }
}

mod set_text {
    use super::bytes_text::{from_text, to_text};
    use serde::{Deserialize, Deserializer, Serializer};
    use std::collections::{BTreeMap, HashMap};

    #[derive(serde::Serialize, Deserialize)]
    struct Members {
        members: BTreeMap<String, i64>,
    }

    pub fn serialize<S: Serializer>(v: &HashMap<Vec<u8>, i64>, s: S) -> Result<S::Ok, S::Error> {
        use serde::Serialize;
        Members {
            members: v.iter().map(|(k, t)| (to_text(k), *t)).collect(),
        }
        .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<HashMap<Vec<u8>, i64>, D::Error> {
        let m = Members::deserialize(d)?;
        m.members
            .into_iter()
            .map(|(k, t)| from_text(&k).map(|k| (k, t)))
            .collect::<Result<_, _>>()
            .map_err(serde::de::Error::custom)
    }
}

mod vars_text {
    use super::StoredVar;
    use super::bytes_text::{from_text, to_text};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::collections::{BTreeMap, HashMap};

    pub fn serialize<S: Serializer>(
        v: &HashMap<Vec<u8>, StoredVar>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        let sorted: BTreeMap<String, &StoredVar> = v.iter().map(|(k, x)| (to_text(k), x)).collect();
        sorted.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<HashMap<Vec<u8>, StoredVar>, D::Error> {
        let m = BTreeMap::<String, StoredVar>::deserialize(d)?;
        m.into_iter()
            .map(|(k, v)| from_text(&k).map(|k| (k, v)))
            .collect::<Result<_, _>>()
            .map_err(serde::de::Error::custom)
    }
}

pub use bytes_text::{from_text as bytes_from_text, to_text as bytes_to_text};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_encode_and_decode() {
        let k = RecordKey::new("shop", CollectionKind::Ip, b"192.0.2.1".to_vec()).unwrap();
        assert_eq!(k.encode(), b"shop\x00IP\x00192.0.2.1");
        assert_eq!(RecordKey::decode(&k.encode()).unwrap(), k);
        assert!(
            k.encode()
                .starts_with(&RecordKey::prefix("shop", CollectionKind::Ip))
        );
        assert!(RecordKey::new("a", CollectionKind::Tx, b"x".to_vec()).is_err());
        assert!(matches!(
            RecordKey::parse("a", "IPS", b"x".to_vec()),
            Err(CollectionError::UnknownCollection(_))
        ));
    }

    #[test]
    fn long_keys_are_digested_and_stay_distinct() {
        let long_a = vec![b'a'; 600];
        let mut long_b = long_a.clone();
        long_b[599] = b'b';
        let a = RecordKey::new("default", CollectionKind::Session, long_a)
            .unwrap()
            .encode();
        let b = RecordKey::new("default", CollectionKind::Session, long_b)
            .unwrap()
            .encode();
        assert!(a.len() <= MAX_KEY_BYTES && b.len() <= MAX_KEY_BYTES);
        assert_ne!(a, b);
        assert!(a.ends_with(&a[a.len() - 64..]));
        assert!(String::from_utf8_lossy(&a).contains("#sha256:"));
        // The longest key that fits is kept as is.
        let head = "default".len() + "SESSION".len() + 2;
        let fits = vec![b'k'; MAX_KEY_BYTES - head];
        let e = RecordKey::new("default", CollectionKind::Session, fits.clone())
            .unwrap()
            .encode();
        assert!(e.ends_with(&fits));
        assert_eq!(e.len(), MAX_KEY_BYTES);
    }

    #[test]
    fn records_expire_whole_and_per_variable() {
        let mut r = StoredRecord {
            create_time: 100,
            last_update_time: 100,
            update_counter: 3,
            timeout: 60,
            ..Default::default()
        };
        r.vars.insert(b"a".to_vec(), StoredVar::scalar("1"));
        r.vars.insert(
            b"b".to_vec(),
            StoredVar {
                value: VarValue::Scalar(b"2".to_vec()),
                expires_at: Some(130),
            },
        );
        let seen = r.clone().live(120).unwrap();
        assert_eq!(seen.vars.len(), 2);
        let seen = r.clone().live(130).unwrap();
        assert_eq!(seen.vars.len(), 1);
        assert!(r.clone().live(160).is_none());
        assert_eq!(r.update_rate(130), Some(6));
        assert_eq!(r.update_rate(100), None);
    }

    #[test]
    fn records_round_trip_through_json() {
        let mut r = StoredRecord {
            create_time: 1,
            last_update_time: 2,
            update_counter: 3,
            timeout: 4,
            ..Default::default()
        };
        r.vars.insert(b"text".to_vec(), StoredVar::scalar("plain"));
        r.vars
            .insert(b"bin".to_vec(), StoredVar::scalar(vec![0xff, 0]));
        r.vars
            .insert(b"tricky".to_vec(), StoredVar::scalar("base64:AA"));
        r.vars.insert(
            b"tokens".to_vec(),
            StoredVar {
                value: VarValue::Set([(b"t1".to_vec(), 5), (vec![0xfe], 6)].into()),
                expires_at: Some(9),
            },
        );
        let j = serde_json::to_string(&r).unwrap();
        assert!(j.contains("\"plain\""), "{j}");
        let back: StoredRecord = serde_json::from_str(&j).unwrap();
        assert_eq!(back, r);
    }
}
