//! Signed login tickets: what a login service mints and the gateway checks.
//!
//! A ticket is ASCII text, carried as the Login token:
//!
//! ```text
//! t1.<account>.<expires_unix_s>.<nonce>.<mac>
//! ```
//!
//! - `account`: 1..=[`ACCOUNT_BYTES_MAX`] bytes of `[A-Za-z0-9_-]`;
//! - `expires_unix_s`: decimal seconds since the Unix epoch after which the
//!   ticket is refused;
//! - `nonce`: 16 hex digits, any value (makes two tickets of one account
//!   and second differ);
//! - `mac`: 64 lowercase hex digits, HMAC-SHA256 under the server's key of
//!   everything before the last `.`.
//!
//! Owns minting ([`mint`]), checking ([`TicketKey::verify`]) and the replay
//! table ([`ReplayTable`]: a ticket logs in once; its MAC is kept until it
//! expires, a bounded table). Must not touch sessions, sockets or clocks:
//! the Unix time is an argument.

use std::collections::{BTreeMap, BTreeSet};

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Longest account id, bytes.
pub const ACCOUNT_BYTES_MAX: usize = 64;
/// Shortest key accepted, bytes (HMAC-SHA256's output size).
pub const KEY_BYTES_MIN: usize = 32;
const PREFIX: &str = "t1";

type HmacSha256 = Hmac<Sha256>;

/// Why a ticket was refused (each is counted, `gateway_login_refused_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, thiserror::Error)]
pub enum TicketError {
    /// No token, or not of the ticket's shape.
    #[error("malformed ticket")]
    Malformed,
    /// The MAC does not match: not minted with the server's key.
    #[error("forged ticket")]
    Forged,
    /// Past its expiry.
    #[error("expired ticket")]
    Expired,
    /// Expires too far ahead (over `gateway.ticket_ttl_max_s`).
    #[error("ticket lifetime too long")]
    TooLong,
    /// Already used for a login.
    #[error("replayed ticket")]
    Replayed,
    /// The replay table is full of unexpired tickets.
    #[error("too many recent logins")]
    TableFull,
}

/// A key was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeyError {
    /// Not hex.
    #[error("the key is not hex: {0}")]
    NotHex(String),
    /// Too short.
    #[error("the key has {0} bytes, at least {KEY_BYTES_MIN} are needed")]
    TooShort(usize),
}

/// A ticket's checked contents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ticket {
    /// The account id.
    pub account: String,
    /// Unix seconds after which it is refused.
    pub expires_unix_s: u64,
}

/// The server's HMAC key.
#[derive(Clone)]
pub struct TicketKey {
    key: Vec<u8>,
}

impl std::fmt::Debug for TicketKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TicketKey(..)")
    }
}

impl TicketKey {
    /// A key from its hex text (whitespace around it ignored).
    ///
    /// # Errors
    /// Not hex, or fewer than [`KEY_BYTES_MIN`] bytes.
    pub fn from_hex(text: &str) -> Result<TicketKey, KeyError> {
        let key = hex::decode(text.trim()).map_err(|e| KeyError::NotHex(e.to_string()))?;
        if key.len() < KEY_BYTES_MIN {
            return Err(KeyError::TooShort(key.len()));
        }
        Ok(TicketKey { key })
    }

    /// The key as hex text (what a key file holds).
    pub fn to_hex(&self) -> String {
        hex::encode(&self.key)
    }

    fn mac(&self) -> HmacSha256 {
        HmacSha256::new_from_slice(&self.key).expect("HMAC takes any key length")
    }

    /// Checks `token` at `now_unix_s`: shape, MAC, expiry, lifetime at most
    /// `ttl_max_s`. Does not record it (see [`ReplayTable`]); returns the
    /// ticket and its MAC.
    ///
    /// # Errors
    /// The first rule broken, in that order.
    pub fn verify(
        &self,
        token: &[u8],
        now_unix_s: u64,
        ttl_max_s: u64,
    ) -> Result<(Ticket, [u8; 32]), TicketError> {
        let text = std::str::from_utf8(token).map_err(|_| TicketError::Malformed)?;
        let (signed, mac_hex) = text.rsplit_once('.').ok_or(TicketError::Malformed)?;
        let mut parts = signed.split('.');
        let (Some(PREFIX), Some(account), Some(expires), Some(nonce), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return Err(TicketError::Malformed);
        };
        if !valid_account(account)
            || nonce.len() != 16
            || !nonce.bytes().all(|b| b.is_ascii_hexdigit())
            || mac_hex.len() != 64
        {
            return Err(TicketError::Malformed);
        }
        let expires_unix_s: u64 = expires.parse().map_err(|_| TicketError::Malformed)?;
        let mut mac_bytes = [0u8; 32];
        hex::decode_to_slice(mac_hex, &mut mac_bytes).map_err(|_| TicketError::Malformed)?;
        let mut mac = self.mac();
        mac.update(signed.as_bytes());
        mac.verify_slice(&mac_bytes)
            .map_err(|_| TicketError::Forged)?;
        if expires_unix_s < now_unix_s {
            return Err(TicketError::Expired);
        }
        if expires_unix_s - now_unix_s > ttl_max_s {
            return Err(TicketError::TooLong);
        }
        let ticket = Ticket {
            account: account.to_owned(),
            expires_unix_s,
        };
        Ok((ticket, mac_bytes))
    }
}

/// True for an account id a ticket may carry.
pub fn valid_account(account: &str) -> bool {
    (1..=ACCOUNT_BYTES_MAX).contains(&account.len())
        && account
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Mints a ticket for `account` valid until `expires_unix_s`.
///
/// # Panics
/// If `account` is not [`valid_account`] (the caller checks what it mints).
pub fn mint(key: &TicketKey, account: &str, expires_unix_s: u64, nonce: u64) -> String {
    assert!(valid_account(account), "account id {account:?}");
    let signed = format!("{PREFIX}.{account}.{expires_unix_s}.{nonce:016x}");
    let mut mac = key.mac();
    mac.update(signed.as_bytes());
    let tag = mac.finalize().into_bytes();
    format!("{signed}.{}", hex::encode(tag))
}

/// The MACs of tickets that logged in, kept until they expire, so a ticket
/// logs in once.
///
/// # Limits
/// At most `max` unexpired tickets; when full, a new login is refused
/// ([`TicketError::TableFull`]) rather than forgetting a live ticket.
#[derive(Debug)]
pub struct ReplayTable {
    max: usize,
    by_mac: BTreeMap<[u8; 32], u64>,
    by_expiry: BTreeSet<(u64, [u8; 32])>,
}

impl ReplayTable {
    /// An empty table holding at most `max` tickets.
    pub fn new(max: usize) -> ReplayTable {
        ReplayTable {
            max,
            by_mac: BTreeMap::new(),
            by_expiry: BTreeSet::new(),
        }
    }

    /// Tickets remembered.
    pub fn len(&self) -> usize {
        self.by_mac.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.by_mac.is_empty()
    }

    /// Records a ticket's first use at `now_unix_s` (expired ones are
    /// forgotten first).
    ///
    /// # Errors
    /// `Replayed` if it was used, `TableFull` if there is no room.
    pub fn use_once(
        &mut self,
        mac: [u8; 32],
        expires_unix_s: u64,
        now_unix_s: u64,
    ) -> Result<(), TicketError> {
        while let Some(&(exp, m)) = self.by_expiry.first() {
            if exp >= now_unix_s {
                break;
            }
            self.by_expiry.pop_first();
            self.by_mac.remove(&m);
        }
        if self.by_mac.contains_key(&mac) {
            return Err(TicketError::Replayed);
        }
        if self.by_mac.len() >= self.max {
            return Err(TicketError::TableFull);
        }
        self.by_mac.insert(mac, expires_unix_s);
        self.by_expiry.insert((expires_unix_s, mac));
        debug_assert_eq!(self.by_mac.len(), self.by_expiry.len());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> TicketKey {
        TicketKey::from_hex(&"ab".repeat(32)).expect("key")
    }

    #[test]
    fn a_minted_ticket_verifies_and_names_its_account() {
        let t = mint(&key(), "ann-1", 1_000, 7);
        let (ticket, _) = key().verify(t.as_bytes(), 900, 300).expect("valid");
        assert_eq!(ticket.account, "ann-1");
        assert_eq!(ticket.expires_unix_s, 1_000);
    }

    #[test]
    fn each_rule_fires() {
        let k = key();
        let other = TicketKey::from_hex(&"cd".repeat(32)).expect("key");
        let t = mint(&k, "ann", 1_000, 7);
        assert_eq!(
            other.verify(t.as_bytes(), 900, 300),
            Err(TicketError::Forged)
        );
        let mut tampered = t.clone().into_bytes();
        tampered[3] = b'b';
        assert_eq!(k.verify(&tampered, 900, 300), Err(TicketError::Forged));
        assert_eq!(
            k.verify(t.as_bytes(), 1_001, 300),
            Err(TicketError::Expired)
        );
        assert_eq!(k.verify(t.as_bytes(), 600, 300), Err(TicketError::TooLong));
        for bad in [
            &b""[..],
            b"t1.ann.5",
            b"\xff\xfe",
            b"t1.a n.5.0000000000000000.00",
        ] {
            assert_eq!(k.verify(bad, 0, 300), Err(TicketError::Malformed));
        }
        assert!(matches!(
            TicketKey::from_hex("abcd"),
            Err(KeyError::TooShort(2))
        ));
        assert!(matches!(
            TicketKey::from_hex("zz"),
            Err(KeyError::NotHex(_))
        ));
    }

    #[test]
    fn the_replay_table_refuses_a_second_use_and_is_bounded() {
        let mut table = ReplayTable::new(2);
        table.use_once([1; 32], 100, 50).expect("first");
        assert_eq!(table.use_once([1; 32], 100, 60), Err(TicketError::Replayed));
        table.use_once([2; 32], 200, 60).expect("second");
        assert_eq!(
            table.use_once([3; 32], 200, 60),
            Err(TicketError::TableFull)
        );
        // Ticket 1 expired: forgotten, room again.
        table
            .use_once([3; 32], 200, 101)
            .expect("room after expiry");
        assert_eq!(table.len(), 2);
    }
}
