//! Dashboard sessions: a random id (the cookie) and a CSRF token each, from the
//! operating system's CSPRNG, kept in a bounded table with an expiry. A session
//! belongs to the admin token it was opened with: once a reload replaces the
//! token, the session no longer counts.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq as _;

/// How long a session lasts from its login.
pub const SESSION_TTL: Duration = Duration::from_secs(8 * 3600);

/// The most sessions open at once; a new login past it ends the oldest.
pub const MAX_SESSIONS: usize = 64;

/// `n` random bytes from the CSPRNG, as lowercase hex; `None` when the operating
/// system could not give them.
pub fn random_hex(n: usize) -> Option<String> {
    let mut buf = vec![0u8; n];
    getrandom::fill(&mut buf).ok()?;
    Some(buf.iter().map(|b| format!("{b:02x}")).collect())
}

fn digest(s: &str) -> [u8; 32] {
    use sha2::Digest as _;
    sha2::Sha256::digest(s.as_bytes()).into()
}

/// One open session.
#[derive(Debug, Clone)]
pub struct Session {
    /// The CSRF token its forms and state-changing requests must carry.
    pub csrf: String,
    /// The admin token's fingerprint at login.
    token: [u8; 32],
    expires: Instant,
    opened: Instant,
}

impl Session {
    /// True when `given` is this session's CSRF token (compared in constant time).
    pub fn csrf_matches(&self, given: &str) -> bool {
        given.len() == self.csrf.len() && bool::from(given.as_bytes().ct_eq(self.csrf.as_bytes()))
    }
}

/// The open sessions, keyed by the SHA-256 of their id (the id itself is not kept).
#[derive(Debug, Default)]
pub struct Sessions {
    table: Mutex<HashMap<[u8; 32], Session>>,
}

impl Sessions {
    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], Session>> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Opens a session for the admin token with fingerprint `token`: its id (for
    /// the cookie) and the session. `None` when no random bytes could be had.
    pub fn open(&self, token: [u8; 32]) -> Option<(String, Session)> {
        let id = random_hex(32)?;
        let now = Instant::now();
        let session = Session {
            csrf: random_hex(32)?,
            token,
            expires: now + SESSION_TTL,
            opened: now,
        };
        let mut t = self.table();
        t.retain(|_, s| s.expires > now);
        while t.len() >= MAX_SESSIONS {
            let Some(oldest) = t.iter().min_by_key(|(_, s)| s.opened).map(|(k, _)| *k) else {
                break;
            };
            t.remove(&oldest);
        }
        t.insert(digest(&id), session.clone());
        Some((id, session))
    }

    /// The session with id `id`, when it is open, unexpired and of the admin token
    /// with fingerprint `token`.
    pub fn get(&self, id: &str, token: &[u8; 32]) -> Option<Session> {
        let key = digest(id);
        let mut t = self.table();
        let s = t.get(&key)?;
        if s.expires <= Instant::now() || !bool::from(s.token.ct_eq(token)) {
            t.remove(&key);
            return None;
        }
        Some(s.clone())
    }

    /// Ends the session with id `id`.
    pub fn close(&self, id: &str) {
        self.table().remove(&digest(id));
    }

    /// How many sessions are open (expired ones included until the next login).
    pub fn len(&self) -> usize {
        self.table().len()
    }

    /// True when no session is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions() {
        let s = Sessions::default();
        let (id, sess) = s.open([1; 32]).unwrap();
        assert_eq!(id.len(), 64);
        assert!(s.get(&id, &[1; 32]).is_some());
        assert!(s.get("nope", &[1; 32]).is_none());
        assert!(sess.csrf_matches(&sess.csrf));
        assert!(!sess.csrf_matches("x"));
        // Another admin token: the session is gone.
        assert!(s.get(&id, &[2; 32]).is_none());
        assert!(s.get(&id, &[1; 32]).is_none());
        let (id2, _) = s.open([1; 32]).unwrap();
        s.close(&id2);
        assert!(s.get(&id2, &[1; 32]).is_none());
        for _ in 0..(MAX_SESSIONS + 5) {
            s.open([1; 32]).unwrap();
        }
        assert!(s.len() <= MAX_SESSIONS);
    }
}
