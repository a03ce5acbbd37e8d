//! The door of a node: which shard serves each account, and which tickets
//! were used, for every shard at once.
//!
//! Connections are spread over the shards by the kernel (SO_REUSEPORT), so
//! two logins of one account, or a ticket and its replay, may land on two
//! shards. [`Door`] is the one account table and the one replay table of
//! the node, shared by every shard's gateway (`server::clients`):
//!
//! - a login claims its account ([`Door::claim`]): a new account gets a
//!   seat (the shard and the avatar's entity); an account that has one is
//!   served where its avatar's proxy is (the proxy's shard is part of the
//!   entity id and never changes), so a login that landed on another shard
//!   hands its connection there (`ClientPort::hand_off`), where the usual
//!   takeover runs;
//! - an avatar's removal releases its seat ([`Door::release`], only if the
//!   seat is still that avatar's);
//! - a ticket is used once ([`Door::use_ticket`]);
//! - a proxy that follows its real to another shard (`server::follow`)
//!   moves its account's seat there ([`Door::move_seat`]) and leaves its
//!   session and proxy here as a *parcel* until the destination adopts the
//!   connection ([`Door::send_parcel`], [`Door::take_parcel`]): the socket
//!   travels through the runtime's hand-off queue, the state through this
//!   table, both node-local like the connection itself.
//!
//! # Why a lock
//! Both tables are behind a `Mutex`, taken only at a login, an avatar's
//! removal and a ticket's use, each a `BTreeMap` lookup and insert: never
//! on the tick's per-message paths (inputs, views, the mesh), which stay
//! lock-free. Logins are rare against ticks (a login storm of 1,000 a
//! second is one lock every millisecond, each held for about a
//! microsecond), and a lock makes the answer immediate: asking an owner
//! shard over the mesh instead would keep every login waiting a tick or
//! two and add a pending state (and its timeout) to the gateway.
//!
//! # Limits
//! At most `gateway.accounts_max` seats (a new account past it is refused:
//! `server-full`) and `gateway.replay_table_max` tickets (`TicketError::TableFull`).
//!
//! At most `gateway.handoffs_max` parcels per shard wait (each is a
//! hand-off in that shard's queue; one whose socket never arrived is taken
//! back after `gateway.handshake_timeout_ms` as a dropped connection).
//!
//! Owns the tables; it holds parcels but must not look into sessions,
//! sockets or cells.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::config::Config;
use crate::core::ids::EntityId;
use crate::core::time::Time;

use super::follow::Parcel;

use super::gateway::{ReplayTable, TicketError};

/// Where an account's avatar is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seat {
    /// The shard of its proxy (and of its client connection).
    pub shard: u16,
    /// The avatar.
    pub entity: EntityId,
}

/// What a login's claim found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    /// The account had no seat; it has the one asked for now.
    New,
    /// The account is seated: its avatar is served there.
    Held(Seat),
    /// No seat left (`gateway.accounts_max`).
    Full,
}

/// The node's account and replay tables (see the module doc).
#[derive(Debug)]
pub struct Door {
    accounts: Mutex<BTreeMap<String, Seat>>,
    accounts_max: usize,
    replay: Mutex<ReplayTable>,
    /// Proxies on their way to another shard, by avatar.
    parcels: Mutex<BTreeMap<EntityId, Parcel>>,
    /// `parcels.len()`, read without the lock by every tick's sweep.
    parcels_waiting: AtomicUsize,
    /// The last proxy hand-over number given (newest wins, `ProxyAt`).
    moves: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A shard that panicked holding the lock stops the runtime; the table
    // itself is never left half-changed (each change is one map call).
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Door {
    /// Empty tables of at most `accounts_max` seats and `replay_max` tickets.
    pub fn new(accounts_max: usize, replay_max: usize) -> Door {
        Door {
            accounts: Mutex::new(BTreeMap::new()),
            accounts_max,
            replay: Mutex::new(ReplayTable::new(replay_max)),
            parcels: Mutex::new(BTreeMap::new()),
            parcels_waiting: AtomicUsize::new(0),
            moves: AtomicU64::new(0),
        }
    }

    /// The tables `[gateway]` bounds.
    pub fn from_config(config: &Config) -> Door {
        let g = &config.gateway;
        Door::new(g.accounts_max as usize, g.replay_table_max as usize)
    }

    /// Seats `account` at `seat` unless it is seated already (see [`Claim`]).
    pub fn claim(&self, account: &str, seat: Seat) -> Claim {
        let mut t = lock(&self.accounts);
        if let Some(&held) = t.get(account) {
            return Claim::Held(held);
        }
        if t.len() >= self.accounts_max {
            return Claim::Full;
        }
        t.insert(account.to_owned(), seat);
        Claim::New
    }

    /// Frees `account`'s seat if it is `entity`'s; true if it was.
    pub fn release(&self, account: &str, entity: EntityId) -> bool {
        let mut t = lock(&self.accounts);
        if t.get(account).is_some_and(|s| s.entity == entity) {
            t.remove(account);
            return true;
        }
        false
    }

    /// Moves `account`'s seat to `shard` if it is `entity`'s; true if it
    /// was (its proxy follows its real there).
    pub fn move_seat(&self, account: &str, entity: EntityId, shard: u16) -> bool {
        let mut t = lock(&self.accounts);
        match t.get_mut(account) {
            Some(s) if s.entity == entity => {
                s.shard = shard;
                true
            }
            _ => false,
        }
    }

    /// A new proxy hand-over number, above every one given before on this
    /// node.
    pub fn next_move(&self) -> u64 {
        self.moves.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Leaves `entity`'s session and proxy for the shard that adopts its
    /// connection.
    pub(super) fn send_parcel(&self, entity: EntityId, parcel: Parcel) {
        let mut t = lock(&self.parcels);
        let old = t.insert(entity, parcel);
        assert!(old.is_none(), "one parcel per avatar at a time");
        self.parcels_waiting.store(t.len(), Ordering::Release);
    }

    /// Takes `entity`'s parcel (the adopting shard).
    pub(super) fn take_parcel(&self, entity: EntityId) -> Option<Parcel> {
        let mut t = lock(&self.parcels);
        let p = t.remove(&entity);
        self.parcels_waiting.store(t.len(), Ordering::Release);
        p
    }

    /// The shard `entity`'s parcel is addressed to, if one waits (no lock
    /// when none does).
    pub(super) fn parcel_to(&self, entity: EntityId) -> Option<u16> {
        if self.parcels_waiting.load(Ordering::Acquire) == 0 {
            return None;
        }
        lock(&self.parcels).get(&entity).map(|p| p.to)
    }

    /// Takes the parcels for shard `to` sent before `before` (their socket
    /// never arrived: its hand-off failed); no lock when none waits.
    pub(super) fn overdue_parcels(&self, to: u16, before: Time) -> Vec<(EntityId, Parcel)> {
        if self.parcels_waiting.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        let mut t = lock(&self.parcels);
        let overdue: Vec<EntityId> = t
            .iter()
            .filter(|(_, p)| p.to == to && p.sent_at < before)
            .map(|(&e, _)| e)
            .collect();
        let taken = overdue
            .into_iter()
            .filter_map(|e| t.remove(&e).map(|p| (e, p)))
            .collect();
        self.parcels_waiting.store(t.len(), Ordering::Release);
        taken
    }

    /// The seat of `account`, if any.
    pub fn seat(&self, account: &str) -> Option<Seat> {
        lock(&self.accounts).get(account).copied()
    }

    /// Seated accounts.
    pub fn accounts(&self) -> usize {
        lock(&self.accounts).len()
    }

    /// Records a ticket's first use on any shard (see
    /// [`ReplayTable::use_once`]).
    ///
    /// # Errors
    /// `Replayed` if it was used, `TableFull` if there is no room.
    pub fn use_ticket(
        &self,
        mac: [u8; 32],
        expires_unix_s: u64,
        now_unix_s: u64,
    ) -> Result<(), TicketError> {
        lock(&self.replay).use_once(mac, expires_unix_s, now_unix_s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seat(shard: u16, e: u64) -> Seat {
        Seat {
            shard,
            entity: EntityId(e),
        }
    }

    #[test]
    fn an_account_is_seated_once_and_released_only_by_its_avatar() {
        let door = Door::new(2, 4);
        assert_eq!(door.claim("ann", seat(0, 1)), Claim::New);
        assert_eq!(door.claim("ann", seat(1, 2)), Claim::Held(seat(0, 1)));
        assert!(!door.release("ann", EntityId(2)), "not its avatar");
        assert_eq!(door.seat("ann"), Some(seat(0, 1)));
        assert_eq!(door.claim("bob", seat(1, 3)), Claim::New);
        assert_eq!(door.claim("cy", seat(1, 4)), Claim::Full);
        assert!(door.release("ann", EntityId(1)));
        assert_eq!(door.accounts(), 1);
        assert_eq!(door.claim("cy", seat(1, 4)), Claim::New);
    }

    #[test]
    fn a_ticket_is_used_once_on_the_node() {
        let door = std::sync::Arc::new(Door::new(1, 4));
        let other = door.clone();
        door.use_ticket([7; 32], 100, 50).expect("first use");
        // Another shard's gateway is another thread.
        let replay = std::thread::spawn(move || other.use_ticket([7; 32], 100, 51)) // tidy: allow(std::thread) tidy: allow(thread::spawn)
            .join()
            .expect("thread");
        assert_eq!(replay, Err(TicketError::Replayed));
    }
}
