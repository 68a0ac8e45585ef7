//! Sign-in sessions and their CSRF tokens, held in this process's memory
//! (a restart signs everyone out).
//!
//! - The session id is 32 bytes from the operating system's random source,
//!   sent once as an `HttpOnly; SameSite=Strict; Path=/console` cookie; the
//!   table keys sessions by the id's SHA-256, so the table never holds a
//!   usable cookie and lookups do not compare secrets byte by byte.
//! - Each session has its own CSRF token (32 random bytes), put in every
//!   form; a POST must carry it ([`Session::csrf_ok`], constant time), the
//!   synchronizer-token pattern of the OWASP CSRF prevention cheat sheet.
//! - A session ends after [`IDLE`] without a request or [`ABSOLUTE`] after
//!   sign-in, at sign-out, or when its operator's token is revoked (checked
//!   by the router at every request). At most [`MAX_SESSIONS`] live: the
//!   least recently used one is dropped for a new one.

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq;

/// The cookie's name.
pub const COOKIE: &str = "capsaga_console";
/// A session unused this long ends: 30 minutes.
pub const IDLE: Duration = Duration::from_secs(30 * 60);
/// A session ends this long after sign-in whatever its use: 12 hours.
pub const ABSOLUTE: Duration = Duration::from_secs(12 * 3600);
/// Most live sessions.
pub const MAX_SESSIONS: usize = 256;

/// A signed-in operator.
#[derive(Debug, Clone)]
pub struct Session {
    /// The operator's principal name.
    pub operator: String,
    /// The CSRF token of its forms (64 hex digits).
    pub csrf: String,
    created: Instant,
    last: Instant,
}

impl Session {
    /// Whether `presented` is this session's CSRF token (constant time).
    pub fn csrf_ok(&self, presented: &str) -> bool {
        let a = Sha256::digest(self.csrf.as_bytes());
        let b = Sha256::digest(presented.as_bytes());
        bool::from(a.ct_eq(&b))
    }
}

/// 32 random bytes as 64 hex digits.
///
/// # Errors
/// The operating system's random source failed.
pub fn random_hex() -> Result<String, getrandom::Error> {
    let mut b = [0u8; 32];
    getrandom::fill(&mut b)?;
    Ok(hex::encode(b))
}

fn key(id: &str) -> [u8; 32] {
    Sha256::digest(id.as_bytes()).into()
}

/// The live sessions.
#[derive(Debug, Default)]
pub struct Sessions {
    map: Mutex<HashMap<[u8; 32], Session>>,
}

impl Sessions {
    /// A new session for `operator`: its id (the cookie's value) and the
    /// session.
    ///
    /// # Errors
    /// The random source failed.
    pub fn create(&self, operator: &str) -> Result<(String, Session), getrandom::Error> {
        let id = random_hex()?;
        let now = Instant::now();
        let s = Session {
            operator: operator.to_string(),
            csrf: random_hex()?,
            created: now,
            last: now,
        };
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|_, s| live(s, now));
        if map.len() >= MAX_SESSIONS
            && let Some(oldest) = map.iter().min_by_key(|(_, s)| s.last).map(|(k, _)| *k)
        {
            map.remove(&oldest);
        }
        map.insert(key(&id), s.clone());
        Ok((id, s))
    }

    /// The live session of cookie value `id` (its idle clock restarted).
    pub fn get(&self, id: &str) -> Option<Session> {
        let now = Instant::now();
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        let k = key(id);
        match map.get_mut(&k) {
            Some(s) if live(s, now) => {
                s.last = now;
                Some(s.clone())
            }
            Some(_) => {
                map.remove(&k);
                None
            }
            None => None,
        }
    }

    /// The live session of cookie value `id`, its idle clock left as it
    /// is (an open event stream does not keep an unattended page signed
    /// in).
    pub fn peek(&self, id: &str) -> Option<Session> {
        let now = Instant::now();
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.get(&key(id)).filter(|s| live(s, now)).cloned()
    }

    /// End the session of cookie value `id`.
    pub fn remove(&self, id: &str) {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.remove(&key(id));
    }

    /// How many sessions are held.
    pub fn len(&self) -> usize {
        self.map.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn live(s: &Session, now: Instant) -> bool {
    now.duration_since(s.last) < IDLE && now.duration_since(s.created) < ABSOLUTE
}

/// The `Set-Cookie` value giving session `id`.
pub fn set_cookie(id: &str) -> String {
    format!(
        "{COOKIE}={id}; Path=/console; HttpOnly; SameSite=Strict; Max-Age={}",
        ABSOLUTE.as_secs()
    )
}

/// The `Set-Cookie` value ending the session cookie.
pub fn clear_cookie() -> String {
    format!("{COOKIE}=; Path=/console; HttpOnly; SameSite=Strict; Max-Age=0")
}

/// The session cookie's value among `Cookie` headers, when it is one this
/// module could have issued (64 lowercase hex digits).
pub fn cookie_value<'a>(headers: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    headers
        .into_iter()
        .flat_map(|h| h.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .filter(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v)
        .find(|v| v.len() == 64 && v.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_found_by_its_cookie_only() {
        let s = Sessions::default();
        let (id, sess) = s.create("token:alice").unwrap();
        assert_eq!(s.get(&id).unwrap().operator, "token:alice");
        assert!(s.get(&random_hex().unwrap()).is_none());
        assert!(sess.csrf_ok(&sess.csrf));
        assert!(!sess.csrf_ok(""));
        assert!(!sess.csrf_ok(&id), "the cookie is not the CSRF token");
        s.remove(&id);
        assert!(s.get(&id).is_none());
    }

    #[test]
    fn the_table_is_bounded() {
        let s = Sessions::default();
        let first = s.create("a").unwrap().0;
        for _ in 0..MAX_SESSIONS {
            s.create("b").unwrap();
        }
        assert_eq!(s.len(), MAX_SESSIONS);
        assert!(s.get(&first).is_none(), "the least recently used one went");
    }

    #[test]
    fn cookie_parsing_refuses_what_was_never_issued() {
        let good = "a".repeat(64);
        let h = format!("x=1; {COOKIE}={good}; y=2");
        assert_eq!(cookie_value([h.as_str()]), Some(good.as_str()));
        assert_eq!(cookie_value(["capsaga_console=../../etc"]), None);
        let upper = format!("{COOKIE}={}", "A".repeat(64));
        assert_eq!(cookie_value([upper.as_str()]), None);
        assert_eq!(cookie_value(["capsaga_console_x=1"]), None);
        let c = set_cookie(&good);
        assert!(c.contains("HttpOnly") && c.contains("SameSite=Strict"));
    }
}
