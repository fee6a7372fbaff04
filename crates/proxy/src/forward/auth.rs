//! Users and groups of the forward proxy: `Proxy-Authorization: Basic` checked
//! against an htpasswd file, and group membership from an Apache-style group file.
//!
//! - [`Htpasswd`]: `user:hash` lines with bcrypt hashes (`$2y$`, `$2b$`, `$2a$`) only.
//!   Other kinds (Apache's MD5-crypt `$apr1$`, `{SHA}`, crypt(3) DES, SHA-crypt,
//!   plain text) are refused at load with the file and line: they are fast to
//!   brute-force from a leaked file.
//! - [`Groups`]: `group: user1 user2` lines, like Apache's `AuthGroupFile`; a group
//!   may span several lines.
//! - [`parse_proxy_authorization`]: the `Basic` credentials of a header value.
//! - [`Authenticator`]: verification with a bounded cache of good credentials, so
//!   that a browser sending the same header on every request costs one SHA-256 and
//!   a table look-up, not a bcrypt (50-100 ms by design) each time. A wrong password
//!   is never cached; an entry expires after its time to live, and an entry made
//!   for an older hash of the user never matches the new one.
//! - [`Authenticator::challenge`]: the `Proxy-Authenticate` value of a `407`.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine as _;
use sha2::{Digest, Sha256};
use thiserror::Error;

/// Errors reading an htpasswd or group file, each naming the file and, for the
/// content, the 1-based line.
#[derive(Debug, Error)]
pub enum AuthFileError {
    /// The file could not be read.
    #[error("{path}: cannot read: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A line is not UTF-8.
    #[error("{path}:{line}: not UTF-8")]
    NotUtf8 {
        /// The file.
        path: PathBuf,
        /// The line, from 1.
        line: usize,
    },
    /// A line lacks the `:` between name and value.
    #[error("{path}:{line}: expected `{expected}`")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The line, from 1.
        line: usize,
        /// The expected form, `user:hash` or `group: user...`.
        expected: &'static str,
    },
    /// A user or group name is empty or holds whitespace or control characters.
    #[error("{path}:{line}: invalid {what} name {name:?}")]
    BadName {
        /// The file.
        path: PathBuf,
        /// The line, from 1.
        line: usize,
        /// `"user"` or `"group"`.
        what: &'static str,
        /// The name as written.
        name: String,
    },
    /// An htpasswd entry with a hash other than bcrypt.
    #[error(
        "{path}:{line}: user {user:?} has a {kind} hash; only bcrypt ($2y$, $2b$, $2a$) is \
         accepted (re-create it with `htpasswd -B`)"
    )]
    UnsupportedHash {
        /// The file.
        path: PathBuf,
        /// The line, from 1.
        line: usize,
        /// The user.
        user: String,
        /// The kind of hash recognised, such as `"MD5-crypt ($apr1$)"`.
        kind: &'static str,
    },
    /// A bcrypt hash whose cost or length is wrong.
    #[error("{path}:{line}: user {user:?}: malformed bcrypt hash ({what})")]
    MalformedBcrypt {
        /// The file.
        path: PathBuf,
        /// The line, from 1.
        line: usize,
        /// The user.
        user: String,
        /// What is wrong with it.
        what: &'static str,
    },
    /// The same user on two lines.
    #[error("{path}:{line}: user {user:?} already defined on line {first}")]
    DuplicateUser {
        /// The file.
        path: PathBuf,
        /// The second line.
        line: usize,
        /// The first line.
        first: usize,
        /// The user.
        user: String,
    },
}

/// Lines of a file, 1-based, without their line ending; blank lines and `#`
/// comments left out.
fn content_lines<'a>(
    text: &'a [u8],
    path: &'a Path,
) -> impl Iterator<Item = Result<(usize, &'a str), AuthFileError>> + 'a {
    text.split(|&b| b == b'\n')
        .enumerate()
        .filter_map(move |(i, raw)| {
            let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
            let line = i + 1;
            match std::str::from_utf8(raw) {
                Err(_) => Some(Err(AuthFileError::NotUtf8 {
                    path: path.to_owned(),
                    line,
                })),
                Ok(s) if s.trim().is_empty() || s.trim_start().starts_with('#') => None,
                Ok(s) => Some(Ok((line, s))),
            }
        })
}

fn valid_name(name: &str) -> bool {
    !name.is_empty() && !name.chars().any(|c| c.is_whitespace() || c.is_control())
}

fn read_file(path: &Path) -> Result<Vec<u8>, AuthFileError> {
    std::fs::read(path).map_err(|source| AuthFileError::Read {
        path: path.to_owned(),
        source,
    })
}

/// The kind of a non-bcrypt htpasswd hash, for the error message.
fn hash_kind(hash: &str) -> &'static str {
    if hash.starts_with("$apr1$") {
        "MD5-crypt ($apr1$)"
    } else if hash.starts_with("$1$") {
        "MD5-crypt ($1$)"
    } else if hash.starts_with("{SHA}") {
        "SHA-1 ({SHA})"
    } else if hash.starts_with("$5$") {
        "SHA-256-crypt ($5$)"
    } else if hash.starts_with("$6$") {
        "SHA-512-crypt ($6$)"
    } else if hash.starts_with("$2x$") {
        "bcrypt $2x$ (a variant for an old bug)"
    } else if hash.starts_with('$') {
        "unknown ($...$)"
    } else if hash.len() == 13 {
        "crypt(3) DES or plain text"
    } else {
        "plain text or unknown"
    }
}

/// Checks the shape of a bcrypt hash: `$2y$NN$` and 53 characters of bcrypt's
/// base64 (22 of salt, 31 of hash), cost 4 to 31.
fn check_bcrypt(hash: &str) -> Result<(), &'static str> {
    let b = hash.as_bytes();
    if b.len() != 60 {
        return Err("not 60 characters long");
    }
    if b[6] != b'$' || !b[4].is_ascii_digit() || !b[5].is_ascii_digit() {
        return Err("no cost field");
    }
    let cost = (b[4] - b'0') * 10 + (b[5] - b'0');
    if !(4..=31).contains(&cost) {
        return Err("cost outside 4 to 31");
    }
    if !b[7..]
        .iter()
        .all(|&c| c.is_ascii_alphanumeric() || c == b'.' || c == b'/')
    {
        return Err("characters outside bcrypt's base64");
    }
    Ok(())
}

/// Users and their bcrypt hashes, from an htpasswd file.
#[derive(Clone, Default)]
pub struct Htpasswd {
    users: HashMap<String, String>,
}

impl fmt::Debug for Htpasswd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Hashes are secrets of a kind: names only.
        let mut users: Vec<&str> = self.users.keys().map(String::as_str).collect();
        users.sort_unstable();
        f.debug_struct("Htpasswd").field("users", &users).finish()
    }
}

impl Htpasswd {
    /// Reads and parses the htpasswd file at `path`.
    ///
    /// # Errors
    ///
    /// [`AuthFileError`] naming the file, and the line for its content.
    pub fn load(path: &Path) -> Result<Self, AuthFileError> {
        Self::parse(&read_file(path)?, path)
    }

    /// Parses htpasswd content; `path` names it in errors.
    ///
    /// # Errors
    ///
    /// [`AuthFileError`]: a line without `:`, a bad user name, a hash that is
    /// not bcrypt or not well formed, a user defined twice.
    pub fn parse(text: &[u8], path: &Path) -> Result<Self, AuthFileError> {
        let mut users = HashMap::new();
        let mut lines_of: HashMap<String, usize> = HashMap::new();
        for entry in content_lines(text, path) {
            let (line, s) = entry?;
            let (user, hash) = s.split_once(':').ok_or_else(|| AuthFileError::Syntax {
                path: path.to_owned(),
                line,
                expected: "user:hash",
            })?;
            if !valid_name(user) {
                return Err(AuthFileError::BadName {
                    path: path.to_owned(),
                    line,
                    what: "user",
                    name: user.to_owned(),
                });
            }
            let hash = hash.trim_end();
            if !(hash.starts_with("$2y$") || hash.starts_with("$2b$") || hash.starts_with("$2a$")) {
                return Err(AuthFileError::UnsupportedHash {
                    path: path.to_owned(),
                    line,
                    user: user.to_owned(),
                    kind: hash_kind(hash),
                });
            }
            check_bcrypt(hash).map_err(|what| AuthFileError::MalformedBcrypt {
                path: path.to_owned(),
                line,
                user: user.to_owned(),
                what,
            })?;
            if let Some(&first) = lines_of.get(user) {
                return Err(AuthFileError::DuplicateUser {
                    path: path.to_owned(),
                    line,
                    first,
                    user: user.to_owned(),
                });
            }
            lines_of.insert(user.to_owned(), line);
            users.insert(user.to_owned(), hash.to_owned());
        }
        Ok(Htpasswd { users })
    }

    /// The number of users.
    pub fn len(&self) -> usize {
        self.users.len()
    }

    /// Whether there is no user.
    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }

    /// Whether `user` has an entry.
    pub fn contains(&self, user: &str) -> bool {
        self.users.contains_key(user)
    }
}

/// Group membership from an Apache-style group file (`group: user1 user2`).
#[derive(Debug, Clone, Default)]
pub struct Groups {
    members: HashMap<String, BTreeSet<String>>,
    of_user: HashMap<String, BTreeSet<String>>,
}

impl Groups {
    /// Reads and parses the group file at `path`.
    ///
    /// # Errors
    ///
    /// [`AuthFileError`] naming the file, and the line for its content.
    pub fn load(path: &Path) -> Result<Self, AuthFileError> {
        Self::parse(&read_file(path)?, path)
    }

    /// Parses group-file content; `path` names it in errors. A group named on
    /// several lines has the members of all of them; a group may be empty.
    ///
    /// # Errors
    ///
    /// [`AuthFileError`]: a line without `:`, or an invalid group name.
    pub fn parse(text: &[u8], path: &Path) -> Result<Self, AuthFileError> {
        let mut groups = Groups::default();
        for entry in content_lines(text, path) {
            let (line, s) = entry?;
            let (group, users) = s.split_once(':').ok_or_else(|| AuthFileError::Syntax {
                path: path.to_owned(),
                line,
                expected: "group: user1 user2",
            })?;
            let group = group.trim();
            if !valid_name(group) {
                return Err(AuthFileError::BadName {
                    path: path.to_owned(),
                    line,
                    what: "group",
                    name: group.to_owned(),
                });
            }
            let members = groups.members.entry(group.to_owned()).or_default();
            for user in users.split_whitespace() {
                if user.chars().any(char::is_control) {
                    return Err(AuthFileError::BadName {
                        path: path.to_owned(),
                        line,
                        what: "user",
                        name: user.to_owned(),
                    });
                }
                members.insert(user.to_owned());
                groups
                    .of_user
                    .entry(user.to_owned())
                    .or_default()
                    .insert(group.to_owned());
            }
        }
        Ok(groups)
    }

    /// Whether `user` is a member of `group`.
    pub fn is_member(&self, user: &str, group: &str) -> bool {
        self.members.get(group).is_some_and(|m| m.contains(user))
    }

    /// The groups of `user`, in name order.
    pub fn groups_of(&self, user: &str) -> impl Iterator<Item = &str> {
        self.of_user
            .get(user)
            .into_iter()
            .flat_map(|g| g.iter().map(String::as_str))
    }

    /// The members of `group`, in name order (none for an unknown group).
    pub fn members(&self, group: &str) -> impl Iterator<Item = &str> {
        self.members
            .get(group)
            .into_iter()
            .flat_map(|m| m.iter().map(String::as_str))
    }
}

/// The longest `Proxy-Authorization` value looked at; longer ones are refused
/// before decoding.
pub const MAX_AUTHORIZATION_LEN: usize = 4096;

/// A `Proxy-Authorization` value that is not usable `Basic` credentials.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CredentialsError {
    /// The value is longer than [`MAX_AUTHORIZATION_LEN`].
    #[error("Proxy-Authorization longer than {MAX_AUTHORIZATION_LEN} bytes")]
    TooLong,
    /// Another scheme than `Basic` (its name, lossily decoded and cut to 32 bytes).
    #[error("Proxy-Authorization scheme {0:?} is not Basic")]
    NotBasic(String),
    /// No token after `Basic`.
    #[error("Proxy-Authorization Basic without credentials")]
    Missing,
    /// The token is not base64.
    #[error("Proxy-Authorization Basic credentials are not base64")]
    Base64,
    /// The decoded credentials are not UTF-8.
    #[error("Proxy-Authorization Basic credentials are not UTF-8")]
    NotUtf8,
    /// The decoded credentials have no `:`.
    #[error("Proxy-Authorization Basic credentials have no ':' between user and password")]
    NoColon,
}

/// A user name and password from `Proxy-Authorization: Basic`. Its `Debug`
/// leaves the password out.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The user name (before the first `:`).
    pub user: String,
    /// The password (after the first `:`; it may hold more colons).
    pub password: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .field("password", &"<redacted>")
            .finish()
    }
}

fn is_ows(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// Parses a `Proxy-Authorization` header value: `Basic` (any case), then
/// whitespace, then base64 (padding optional) of UTF-8 `user:password`, split at
/// the first `:` (RFC 7617).
///
/// # Errors
///
/// [`CredentialsError`] for every other shape.
pub fn parse_proxy_authorization(value: &[u8]) -> Result<Credentials, CredentialsError> {
    if value.len() > MAX_AUTHORIZATION_LEN {
        return Err(CredentialsError::TooLong);
    }
    let start = value
        .iter()
        .position(|&b| !is_ows(b))
        .unwrap_or(value.len());
    let end = value
        .iter()
        .rposition(|&b| !is_ows(b))
        .map_or(start, |i| i + 1);
    let value = &value[start..end.max(start)];
    let scheme_end = value.iter().position(|&b| is_ows(b)).unwrap_or(value.len());
    let (scheme, rest) = value.split_at(scheme_end);
    if !scheme.eq_ignore_ascii_case(b"basic") {
        let shown = &scheme[..scheme.len().min(32)];
        return Err(CredentialsError::NotBasic(
            String::from_utf8_lossy(shown).into_owned(),
        ));
    }
    let token_start = rest.iter().position(|&b| !is_ows(b)).unwrap_or(rest.len());
    let token = &rest[token_start..];
    if token.is_empty() {
        return Err(CredentialsError::Missing);
    }
    let engine = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
    );
    let decoded = engine.decode(token).map_err(|_| CredentialsError::Base64)?;
    let decoded = String::from_utf8(decoded).map_err(|_| CredentialsError::NotUtf8)?;
    let (user, password) = decoded.split_once(':').ok_or(CredentialsError::NoColon)?;
    Ok(Credentials {
        user: user.to_owned(),
        password: password.to_owned(),
    })
}

/// Why [`Authenticator::authenticate`] refused a request; each calls for a `407`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AuthFailure {
    /// The request had no `Proxy-Authorization` header.
    #[error("no Proxy-Authorization header")]
    Missing,
    /// The header is not usable `Basic` credentials.
    #[error(transparent)]
    Malformed(#[from] CredentialsError),
    /// The user is not in the htpasswd file.
    #[error("unknown user {0:?}")]
    UnknownUser(String),
    /// The password does not match the user's hash.
    #[error("wrong password for user {0:?}")]
    WrongPassword(String),
}

/// A user whose credentials were verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authenticated {
    /// The user name.
    pub user: String,
    /// Whether the verification came from the cache rather than bcrypt.
    pub cached: bool,
}

/// An invalid realm for the challenge.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("proxy authentication realm {0:?} holds control characters or is over 256 bytes")]
pub struct RealmError(pub String);

/// Settings of an [`Authenticator`]'s cache of good credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheSettings {
    /// The most credentials kept; the oldest entry goes first. 0 turns the cache off.
    pub capacity: usize,
    /// How long a verification stays good without another bcrypt.
    pub ttl: Duration,
}

impl Default for CacheSettings {
    fn default() -> Self {
        CacheSettings {
            capacity: 4096,
            ttl: Duration::from_secs(15 * 60),
        }
    }
}

/// Good verifications: SHA-256 digests of (user, password, hash) and when they
/// were made, evicted oldest first.
#[derive(Default)]
struct VerifiedCache {
    entries: HashMap<[u8; 32], Instant>,
    order: VecDeque<[u8; 32]>,
}

impl VerifiedCache {
    fn get(&mut self, key: &[u8; 32], ttl: Duration, now: Instant) -> bool {
        match self.entries.get(key) {
            Some(&at) if now.saturating_duration_since(at) < ttl => true,
            Some(_) => {
                self.entries.remove(key);
                false
            }
            None => false,
        }
    }

    fn insert(&mut self, key: [u8; 32], capacity: usize, now: Instant) {
        if capacity == 0 {
            return;
        }
        if self.entries.insert(key, now).is_none() {
            self.order.push_back(key);
        }
        while self.entries.len() > capacity {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            self.entries.remove(&old);
        }
        // `order` may also hold keys removed on expiry: drop those now and then.
        if self.order.len() > 2 * capacity {
            let entries = &self.entries;
            self.order.retain(|k| entries.contains_key(k));
        }
    }
}

/// Checks `Proxy-Authorization` against an htpasswd file, with a cache of good
/// credentials.
pub struct Authenticator {
    users: Htpasswd,
    realm: String,
    cache_settings: CacheSettings,
    cache: Mutex<VerifiedCache>,
    /// A hash to run bcrypt against for unknown users, so that they cost as
    /// much time as a wrong password (no user enumeration by timing).
    decoy_hash: Option<String>,
}

impl fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Authenticator")
            .field("users", &self.users)
            .field("realm", &self.realm)
            .field("cache_settings", &self.cache_settings)
            .finish_non_exhaustive()
    }
}

impl Authenticator {
    /// An authenticator for `users`, announcing `realm` in its challenge.
    ///
    /// # Errors
    ///
    /// [`RealmError`] for a realm with control characters or over 256 bytes.
    pub fn new(users: Htpasswd, realm: &str, cache: CacheSettings) -> Result<Self, RealmError> {
        if realm.len() > 256 || realm.chars().any(char::is_control) {
            return Err(RealmError(realm.to_owned()));
        }
        let decoy_hash = users.users.values().min().cloned();
        Ok(Authenticator {
            users,
            realm: realm.to_owned(),
            cache_settings: cache,
            cache: Mutex::new(VerifiedCache::default()),
            decoy_hash,
        })
    }

    /// The `Proxy-Authenticate` value of a `407 Proxy Authentication Required`:
    /// `Basic realm="..."` with `"` and `\` escaped, and `charset="UTF-8"`.
    pub fn challenge(&self) -> String {
        let mut out = String::with_capacity(self.realm.len() + 40);
        out.push_str("Basic realm=\"");
        for c in self.realm.chars() {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
        out.push_str("\", charset=\"UTF-8\"");
        out
    }

    /// Checks a request's `Proxy-Authorization` value (`None` without the header).
    ///
    /// A credential verified before (same user, password and hash, within the
    /// cache's time to live) is answered from the cache; otherwise bcrypt runs
    /// (taking tens of milliseconds: call it where blocking is fine, such as
    /// `spawn_blocking`), and only a success is cached.
    ///
    /// # Errors
    ///
    /// [`AuthFailure`]: no header, a malformed one, an unknown user or a wrong
    /// password.
    pub fn authenticate(&self, header: Option<&[u8]>) -> Result<Authenticated, AuthFailure> {
        let creds = parse_proxy_authorization(header.ok_or(AuthFailure::Missing)?)?;
        let Some(hash) = self.users.users.get(&creds.user) else {
            if let Some(decoy) = &self.decoy_hash {
                let _ = bcrypt::verify(creds.password.as_bytes(), decoy);
            }
            return Err(AuthFailure::UnknownUser(creds.user));
        };
        let key = cache_key(&creds, hash);
        let ttl = self.cache_settings.ttl;
        if self.lock_cache().get(&key, ttl, Instant::now()) {
            return Ok(Authenticated {
                user: creds.user,
                cached: true,
            });
        }
        // A hash that bcrypt cannot read (checked at load, so not expected) is a
        // failure like a wrong password.
        if bcrypt::verify(creds.password.as_bytes(), hash).unwrap_or(false) {
            self.lock_cache()
                .insert(key, self.cache_settings.capacity, Instant::now());
            Ok(Authenticated {
                user: creds.user,
                cached: false,
            })
        } else {
            Err(AuthFailure::WrongPassword(creds.user))
        }
    }

    /// [`Authenticator::authenticate`] without bcrypt: the answer when it needs
    /// none (no header, a malformed one, or credentials in the cache); `None`
    /// when bcrypt must run (an unknown user too, for its decoy bcrypt): then
    /// call `authenticate` where blocking is fine.
    pub fn authenticate_cached(
        &self,
        header: Option<&[u8]>,
    ) -> Option<Result<Authenticated, AuthFailure>> {
        let creds = match header.map(parse_proxy_authorization) {
            None => return Some(Err(AuthFailure::Missing)),
            Some(Err(e)) => return Some(Err(e.into())),
            Some(Ok(c)) => c,
        };
        let hash = self.users.users.get(&creds.user)?;
        let key = cache_key(&creds, hash);
        if self
            .lock_cache()
            .get(&key, self.cache_settings.ttl, Instant::now())
        {
            return Some(Ok(Authenticated {
                user: creds.user,
                cached: true,
            }));
        }
        None
    }

    /// The number of credentials in the cache (expired ones included until they
    /// are next looked up or evicted).
    pub fn cached_len(&self) -> usize {
        self.lock_cache().entries.len()
    }

    /// Empties the cache (after the htpasswd file changed, say).
    pub fn clear_cache(&self) {
        let mut cache = self.lock_cache();
        cache.entries.clear();
        cache.order.clear();
    }

    fn lock_cache(&self) -> std::sync::MutexGuard<'_, VerifiedCache> {
        // The cache holds no invariant a panic elsewhere could break.
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// SHA-256 over the user, password and hash, each with its length in front so
/// that no two triples give the same input.
fn cache_key(creds: &Credentials, hash: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"palisade proxy-auth cache v1\0");
    for part in [
        creds.user.as_bytes(),
        creds.password.as_bytes(),
        hash.as_bytes(),
    ] {
        h.update(u64::try_from(part.len()).unwrap_or(u64::MAX).to_be_bytes());
        h.update(part);
    }
    h.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::STANDARD;

    const COST: u32 = 4;

    fn header(user: &str, password: &str) -> Vec<u8> {
        format!("Basic {}", STANDARD.encode(format!("{user}:{password}"))).into_bytes()
    }

    fn htpasswd_text(entries: &[(&str, &str)]) -> String {
        let mut text = String::from("# users\n\n");
        for (user, password) in entries {
            let hash = bcrypt::hash(password, COST).unwrap();
            text.push_str(&format!("{user}:{hash}\r\n"));
        }
        text
    }

    fn path() -> &'static Path {
        Path::new("/etc/palisade/users.htpasswd")
    }

    #[test]
    fn parses_basic_credentials() {
        let c = parse_proxy_authorization(&header("alice", "pa:ss:wörd")).unwrap();
        assert_eq!(c.user, "alice");
        assert_eq!(c.password, "pa:ss:wörd");
        // Scheme in any case, extra whitespace, no padding.
        let c = parse_proxy_authorization(b"  bAsIc \t YWxpY2U6c2VjcmV0  ").unwrap();
        assert_eq!((c.user.as_str(), c.password.as_str()), ("alice", "secret"));
        let c = parse_proxy_authorization(b"Basic YTpi").unwrap();
        assert_eq!((c.user.as_str(), c.password.as_str()), ("a", "b"));
        let c = parse_proxy_authorization(b"Basic Og==").unwrap();
        assert_eq!((c.user.as_str(), c.password.as_str()), ("", ""));
        assert!(!format!("{c:?}").contains("secret"));
    }

    #[test]
    fn refuses_other_shapes() {
        use CredentialsError as E;
        assert_eq!(
            parse_proxy_authorization(b"Bearer abc"),
            Err(E::NotBasic("Bearer".into()))
        );
        assert_eq!(
            parse_proxy_authorization(b""),
            Err(E::NotBasic(String::new()))
        );
        assert_eq!(parse_proxy_authorization(b"Basic"), Err(E::Missing));
        assert_eq!(parse_proxy_authorization(b"Basic   "), Err(E::Missing));
        assert_eq!(
            parse_proxy_authorization(b"Basicx YTpi"),
            Err(E::NotBasic("Basicx".into()))
        );
        assert_eq!(parse_proxy_authorization(b"Basic !!!"), Err(E::Base64));
        assert_eq!(
            parse_proxy_authorization(b"Basic YTpi YTpi"),
            Err(E::Base64)
        );
        // "alice" without a colon; 0xff 0xfe is not UTF-8.
        assert_eq!(
            parse_proxy_authorization(b"Basic YWxpY2U="),
            Err(E::NoColon)
        );
        assert_eq!(parse_proxy_authorization(b"Basic //46"), Err(E::NotUtf8));
        let long = vec![b'A'; MAX_AUTHORIZATION_LEN + 1];
        assert_eq!(parse_proxy_authorization(&long), Err(E::TooLong));
        assert!(parse_proxy_authorization(&[0xff, 0x00, b' ', 0x80]).is_err());
    }

    #[test]
    fn loads_htpasswd_and_refuses_weak_hashes() {
        let text = htpasswd_text(&[("alice", "secret"), ("bob", "hunter2")]);
        let users = Htpasswd::parse(text.as_bytes(), path()).unwrap();
        assert_eq!(users.len(), 2);
        assert!(users.contains("alice") && users.contains("bob") && !users.contains("eve"));
        assert!(!format!("{users:?}").contains("$2"));

        for (line, kind) in [
            (
                "carol:$apr1$abcdefgh$0123456789abcdefghijkl",
                "MD5-crypt ($apr1$)",
            ),
            ("carol:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=", "SHA-1 ({SHA})"),
            ("carol:abJnggxhB/yWI", "crypt(3) DES or plain text"),
            ("carol:plaintext-password", "plain text or unknown"),
            ("carol:$6$salt$hash", "SHA-512-crypt ($6$)"),
        ] {
            let text = format!("{}{line}\n", htpasswd_text(&[("alice", "x")]));
            let err = Htpasswd::parse(text.as_bytes(), path()).unwrap_err();
            let AuthFileError::UnsupportedHash {
                line: n,
                kind: k,
                ref user,
                ..
            } = err
            else {
                panic!("{err:?}");
            };
            assert_eq!((n, k, user.as_str()), (4, kind, "carol"));
            let message = err.to_string();
            assert!(
                message.starts_with("/etc/palisade/users.htpasswd:4: user \"carol\""),
                "{message}"
            );
        }
    }

    #[test]
    fn htpasswd_errors_name_the_line() {
        let good = bcrypt::hash("x", COST).unwrap();
        let cases: Vec<(String, usize)> = vec![
            ("no colon here\n".into(), 1),
            (format!("a:{good}\n:{good}\n"), 2),
            (format!("a:{good}\na b:{good}\n"), 2),
            (format!("a:{good}\n\na:{good}\n"), 3),
            (format!("a:{}\n", &good[..59]), 1),
            (format!("a:$2y$99{}\n", &good[6..]), 1),
        ];
        for (text, line) in cases {
            let err = Htpasswd::parse(text.as_bytes(), path()).unwrap_err();
            assert!(
                err.to_string()
                    .starts_with(&format!("/etc/palisade/users.htpasswd:{line}:")),
                "{text:?}: {err}"
            );
        }
        let err = Htpasswd::parse(b"\n\xff\xfe:x\n", path()).unwrap_err();
        assert_eq!(err.to_string(), "/etc/palisade/users.htpasswd:2: not UTF-8");
        let missing = Path::new("/nonexistent/palisade-test.htpasswd");
        let err = Htpasswd::load(missing).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("/nonexistent/palisade-test.htpasswd: cannot read")
        );
    }

    #[test]
    fn groups_file() {
        let text = b"# groups\nstaff: alice bob\nstudents:carol\nstaff: dave\nempty:\n";
        let groups = Groups::parse(text, Path::new("groups")).unwrap();
        assert!(groups.is_member("alice", "staff"));
        assert!(groups.is_member("dave", "staff"));
        assert!(!groups.is_member("carol", "staff"));
        assert!(groups.is_member("carol", "students"));
        assert!(!groups.is_member("alice", "nobody"));
        assert_eq!(
            groups.members("staff").collect::<Vec<_>>(),
            ["alice", "bob", "dave"]
        );
        assert_eq!(groups.groups_of("alice").collect::<Vec<_>>(), ["staff"]);
        assert_eq!(groups.groups_of("eve").count(), 0);
        assert_eq!(groups.members("empty").count(), 0);

        let err = Groups::parse(b"staff alice\n", Path::new("groups")).unwrap_err();
        assert_eq!(err.to_string(), "groups:1: expected `group: user1 user2`");
        let err = Groups::parse(b"ok: a\n : alice\n", Path::new("groups")).unwrap_err();
        assert!(
            err.to_string().starts_with("groups:2: invalid group name"),
            "{err}"
        );
    }

    fn authenticator(capacity: usize) -> Authenticator {
        let text = htpasswd_text(&[("alice", "secret"), ("bob", "hunter2")]);
        let users = Htpasswd::parse(text.as_bytes(), path()).unwrap();
        let cache = CacheSettings {
            capacity,
            ttl: Duration::from_secs(60),
        };
        Authenticator::new(users, "School \"proxy\"", cache).unwrap()
    }

    #[test]
    fn verifies_and_caches_only_good_credentials() {
        let auth = authenticator(16);
        let good = header("alice", "secret");
        assert_eq!(
            auth.authenticate(Some(&good)),
            Ok(Authenticated {
                user: "alice".into(),
                cached: false
            })
        );
        assert_eq!(auth.cached_len(), 1);
        assert_eq!(
            auth.authenticate(Some(&good)),
            Ok(Authenticated {
                user: "alice".into(),
                cached: true
            })
        );
        // Wrong passwords are refused every time and never cached.
        for _ in 0..2 {
            assert_eq!(
                auth.authenticate(Some(&header("alice", "Secret"))),
                Err(AuthFailure::WrongPassword("alice".into()))
            );
        }
        assert_eq!(auth.cached_len(), 1);
        // Another user's password does not pass for alice.
        assert_eq!(
            auth.authenticate(Some(&header("alice", "hunter2"))),
            Err(AuthFailure::WrongPassword("alice".into()))
        );
        assert_eq!(
            auth.authenticate(Some(&header("eve", "secret"))),
            Err(AuthFailure::UnknownUser("eve".into()))
        );
        assert_eq!(auth.authenticate(None), Err(AuthFailure::Missing));
        assert_eq!(
            auth.authenticate(Some(b"Digest x")),
            Err(AuthFailure::Malformed(CredentialsError::NotBasic(
                "Digest".into()
            )))
        );
        auth.clear_cache();
        assert_eq!(auth.cached_len(), 0);
        assert!(!auth.authenticate(Some(&good)).unwrap().cached);
    }

    #[test]
    fn cache_is_bounded_and_expires() {
        let auth = authenticator(1);
        assert!(
            !auth
                .authenticate(Some(&header("alice", "secret")))
                .unwrap()
                .cached
        );
        assert!(
            !auth
                .authenticate(Some(&header("bob", "hunter2")))
                .unwrap()
                .cached
        );
        assert_eq!(auth.cached_len(), 1);
        // alice was evicted by bob.
        assert!(
            !auth
                .authenticate(Some(&header("alice", "secret")))
                .unwrap()
                .cached
        );
        assert!(
            auth.authenticate(Some(&header("alice", "secret")))
                .unwrap()
                .cached
        );

        let off = authenticator(0);
        assert!(
            !off.authenticate(Some(&header("alice", "secret")))
                .unwrap()
                .cached
        );
        assert!(
            !off.authenticate(Some(&header("alice", "secret")))
                .unwrap()
                .cached
        );
        assert_eq!(off.cached_len(), 0);

        let mut cache = VerifiedCache::default();
        let t0 = Instant::now();
        let ttl = Duration::from_secs(10);
        cache.insert([1; 32], 8, t0);
        assert!(cache.get(&[1; 32], ttl, t0 + Duration::from_secs(9)));
        assert!(!cache.get(&[1; 32], ttl, t0 + Duration::from_secs(10)));
        assert!(cache.entries.is_empty());
        // Re-inserting after expiry, many times, keeps the order queue bounded.
        for i in 0..100u8 {
            cache.insert([i % 3; 32], 2, t0);
        }
        assert!(cache.entries.len() <= 2);
        assert!(cache.order.len() <= 4);
    }

    #[test]
    fn cache_key_includes_the_hash() {
        let creds = Credentials {
            user: "alice".into(),
            password: "secret".into(),
        };
        assert_ne!(cache_key(&creds, "$2y$04$a"), cache_key(&creds, "$2y$04$b"));
        let shifted = Credentials {
            user: "alic".into(),
            password: "esecret".into(),
        };
        assert_ne!(cache_key(&creds, "h"), cache_key(&shifted, "h"));
    }

    #[test]
    fn all_three_bcrypt_prefixes_verify() {
        use bcrypt::Version;
        let parts = bcrypt::hash_with_result("s3cret", COST).unwrap();
        let mut text = String::new();
        for (user, version) in [
            ("y", Version::TwoY),
            ("b", Version::TwoB),
            ("a", Version::TwoA),
        ] {
            text.push_str(&format!("{user}:{}\n", parts.format_for_version(version)));
        }
        assert!(text.contains(":$2y$") && text.contains(":$2b$") && text.contains(":$2a$"));
        let users = Htpasswd::parse(text.as_bytes(), path()).unwrap();
        let auth = Authenticator::new(users, "r", CacheSettings::default()).unwrap();
        for user in ["y", "b", "a"] {
            assert!(
                auth.authenticate(Some(&header(user, "s3cret"))).is_ok(),
                "{user}"
            );
            assert!(
                auth.authenticate(Some(&header(user, "s3cre"))).is_err(),
                "{user}"
            );
        }
    }

    #[test]
    fn shared_between_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<Authenticator>();
        send_sync::<Groups>();
    }

    #[test]
    fn cached_answers_without_bcrypt() {
        let a = authenticator(8);
        assert_eq!(a.authenticate_cached(None), Some(Err(AuthFailure::Missing)));
        assert!(matches!(
            a.authenticate_cached(Some(b"Digest x")),
            Some(Err(AuthFailure::Malformed(_)))
        ));
        let good = header("alice", "secret");
        // Not verified yet, and an unknown user: bcrypt must run.
        assert_eq!(a.authenticate_cached(Some(&good)), None);
        assert_eq!(a.authenticate_cached(Some(&header("nobody", "x"))), None);
        assert!(a.authenticate(Some(&good)).is_ok());
        let hit = a.authenticate_cached(Some(&good)).unwrap().unwrap();
        assert_eq!(hit.user, "alice");
        assert!(hit.cached);
        assert_eq!(a.authenticate_cached(Some(&header("alice", "other"))), None);
    }

    #[test]
    fn challenge_escapes_the_realm() {
        let auth = authenticator(1);
        assert_eq!(
            auth.challenge(),
            "Basic realm=\"School \\\"proxy\\\"\", charset=\"UTF-8\""
        );
        assert!(
            Authenticator::new(Htpasswd::default(), "a\r\nb", CacheSettings::default()).is_err()
        );
    }
}
