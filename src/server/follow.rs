//! The proxy follows its real: a live client's connection, gateway session
//! and proxy move to the shard of its real's cell, so its inputs and views
//! take no cross-shard hop (ARCHITECTURE.md, "The proxy follows its real").
//!
//! # When
//! A proxy learns where its real is from the real's messages (the newest
//! epoch wins, `core::proxy`). Each tick, before the clients are read, the
//! host looks at the proxies whose real moved since the last tick: one
//! whose real's cell is on another shard of this node is *roaming* since
//! now (again since now if it went on to a third shard); one whose real is
//! back here is not. A roaming proxy is handed there at once, unless its
//! connection was handed over less than `gateway.proxy_follow_ms` ago: then
//! once that long has passed since that hand-over (hysteresis: a real
//! dancing on a shard border moves its connection at most once per
//! `proxy_follow_ms`). At once matters: the tick the proxy hears where its
//! real went (the new real's `RealMoved`, half a tick after the `Onload`
//! left) comes before the client's next move, so that move is read on the
//! real's shard and answered in the tick it is read; a proxy left behind
//! sends it across the mesh and gets the own update back a tick later
//! (issue 21's migration stall: a crossing to another shard's cell cost one
//! own-update gap a whole tick). The hand-over waits for the first tick the
//! connection is live, welcomed and not resyncing, no space change is under
//! way, and the port holds no unsent bytes for it (the hand-off would drop
//! them). A dropped connection (in its reconnect window) does not move.
//!
//! # How (the old shard)
//! In one step, at the start of a tick: the proxy's queued outputs are
//! routed from here, its ordered client data goes into the session; the
//! account's seat moves to the new shard ([`Door::move_seat`]), the session
//! and proxy (seqs, pending inputs and acks, speed limit, travel, unsent
//! frames, the proxy's view of the real, its downstream sequence buffer)
//! are left in the door as a [`Parcel`], the connection is handed over
//! (`ClientPort::hand_off`: the socket and its unread bytes), and this
//! shard notes where the proxy went. From then on it reads nothing from
//! that client and passes every message for the proxy on to its shard.
//!
//! # How (the new shard)
//! `PortEvent::Adopted` with a follow note: the parcel is taken from the
//! door and the connection carries on where it was, no Welcome, no resync;
//! a message for the proxy that arrived here first (while the door names
//! this shard as the parcel's destination) was held and is delivered now;
//! every other shard is told ([`ProxyAt`], in the host batch before its
//! items, the newest hand-over number wins). A parcel whose socket never
//! arrives (the hand-off queue was full) is taken back after
//! `gateway.handshake_timeout_ms` as a dropped connection (its avatar waits
//! for a reconnect).
//!
//! # Invariants
//! - Inputs: the proxy numbers them, wherever it is; those sent from the
//!   old shard and those from the new reach the real by different queues,
//!   and its sequence buffer applies them once, in order.
//! - Downstream: the real numbers it; what it sent to the old shard is
//!   passed on, and the proxy's sequence buffer delivers it in order, once
//!   (a gap waits, it is not skipped, unless it passes
//!   `proxy downstream_buffer_max`, counted).
//! - One proxy and at most one session per avatar on the node: the parcel
//!   is in the door (not in any shard) from the hand-off to the adoption; a
//!   login of its account meanwhile is told to retry.
//!
//! Owns the follow bookkeeping; must not touch sockets (only the port) or
//! cells.

use std::collections::BTreeMap;

use crate::core::cell::Dest;
use crate::core::ids::EntityId;
use crate::core::proxy::Proxy;
use crate::core::time::Time;
use crate::shard::{ClientPort, ConnId, MetricSink};

use super::clients::{Conn, Detached};
use super::gateway::{Session, SessionPhase};
use super::host::{entity_shard, list_new_proxy, CellHost, ProxyAt, Routed, WireSource};

/// The first byte of a follow note (a login's note starts with its hop
/// count, at most 2).
const NOTE_TAG: u8 = 0xF0;

/// A proxy on its way to another shard (held by the door).
#[derive(Debug)]
pub(crate) struct Parcel {
    pub(crate) session: Session,
    pub(crate) proxy: Proxy,
    pub(crate) account: String,
    /// This hand-over's number.
    pub(crate) moves: u64,
    /// The adopting shard.
    pub(crate) to: u16,
    pub(crate) sent_at: Time,
}

/// The host's follow state (see the module doc).
#[derive(Debug, Default)]
pub(crate) struct Follow {
    /// Proxies whose real moved since the last look.
    pub(crate) moved: Vec<EntityId>,
    /// Proxies whose real is on another shard: which, and since when.
    roaming: BTreeMap<EntityId, (u16, Time)>,
    /// When the proxies adopted here were handed over (their connection's
    /// last move): the next hand-over waits until `proxy_follow_ms` after.
    handed_at: BTreeMap<EntityId, Time>,
    due: Vec<(EntityId, u16)>,
    /// Messages for proxies on their way here, held until they arrive.
    parked: Vec<Routed>,
}

impl Follow {
    /// Proxies here whose real is on another shard.
    pub(crate) fn roaming(&self) -> usize {
        self.roaming.len()
    }
}

/// The note of a follow hand-off.
fn note(e: EntityId) -> Vec<u8> {
    let mut b = Vec::with_capacity(9);
    b.push(NOTE_TAG);
    b.extend_from_slice(&e.0.to_le_bytes());
    b
}

/// The avatar of a follow note, if `b` is one.
pub(super) fn decode_note(b: &[u8]) -> Option<EntityId> {
    match b {
        [NOTE_TAG, rest @ ..] => Some(EntityId(u64::from_le_bytes(rest.try_into().ok()?))),
        _ => None,
    }
}

impl CellHost {
    /// Whether this shard hosts `e`'s proxy.
    pub fn has_proxy(&self, e: EntityId) -> bool {
        self.proxies.contains_key(&e)
    }

    /// Proxies here whose real is on another shard (they may follow it).
    pub fn proxies_roaming(&self) -> usize {
        self.follow.roaming()
    }

    /// The follow metrics (`gateway_proxy_*`, `host_proxy_forwards`).
    pub(super) fn export_follow_metrics(&self, sink: &mut MetricSink) {
        sink.counter(
            "gateway_proxy_handoffs",
            "connections handed with their proxy to their real's shard",
            self.clients.counters.proxy_handoffs,
        );
        sink.counter(
            "gateway_proxy_adopted",
            "connections taken up with their proxy, following their real",
            self.clients.counters.proxy_adopted,
        );
        sink.counter(
            "gateway_proxy_lost",
            "proxy hand-overs whose connection never arrived (dropped)",
            self.clients.counters.proxy_lost,
        );
        sink.gauge(
            "gateway_proxies_roaming",
            "proxies here whose real is on another shard",
            self.follow.roaming() as u64,
        );
        sink.counter(
            "host_proxy_forwards",
            "messages for a proxy that followed its real, passed on to its shard",
            self.counters.proxy_forwards,
        );
    }

    /// Start of a tick: proxies whose real stayed on another shard long
    /// enough are handed there (see the module doc).
    pub(super) fn follow_reals(&mut self, now: Time, port: &mut ClientPort) {
        let Some(after) = self.clients.params.proxy_follow else {
            self.follow.moved.clear();
            return;
        };
        if !port.can_hand_off() {
            self.follow.moved.clear();
            return;
        }
        self.adopt_overdue(now);
        let me = self.ctx.shard;
        let mut moved = std::mem::take(&mut self.follow.moved);
        for e in moved.drain(..) {
            let there = self
                .proxies
                .get(&e)
                .and_then(|p| self.shard_of(Dest::Cell(p.real_at())));
            match there {
                Some(s) if s != me && s.node == me.node && s.index < self.ctx.shards => {
                    let r = self.follow.roaming.entry(e).or_insert((s.index, now));
                    if r.0 != s.index {
                        *r = (s.index, now);
                    }
                }
                _ => {
                    self.follow.roaming.remove(&e);
                }
            }
        }
        self.follow.moved = moved;
        let mut due = std::mem::take(&mut self.follow.due);
        let handed_at = &self.follow.handed_at;
        due.extend(
            self.follow
                .roaming
                .iter()
                .filter(|(e, _)| {
                    handed_at
                        .get(e)
                        .is_none_or(|&at| now.saturating_since(at) >= after)
                })
                .map(|(&e, &(s, _))| (e, s)),
        );
        for (e, to) in due.drain(..) {
            self.hand_proxy(now, port, e, to);
        }
        self.follow.due = due;
    }

    /// Hands `e`'s connection, session and proxy to shard `to`, if its
    /// connection can move now (else it is tried again next tick).
    fn hand_proxy(&mut self, now: Time, port: &mut ClientPort, e: EntityId, to: u16) {
        if !self.proxies.contains_key(&e) {
            self.follow.roaming.remove(&e);
            return;
        }
        let Some(&id) = self.clients.by_entity.get(&e) else {
            return; // dropped: waits here for its account
        };
        let Some(c) = self.clients.conns.get(&id) else {
            return;
        };
        let s = &c.session;
        let ready = s.phase() == SessionPhase::Live
            && !s.awaiting_resync()
            && !s.travel().pending
            && c.account.is_some()
            && port.is_open(id)
            && port.queued(id) == 0;
        if !ready {
            return;
        }
        let conn = self.clients.conns.remove(&id).expect("listed");
        self.clients.by_entity.remove(&e);
        self.follow.roaming.remove(&e);
        self.follow.handed_at.remove(&e);
        let mut proxy = self.proxies.remove(&e).expect("listed");
        while let Some(o) = proxy.poll_output() {
            self.route(WireSource::Proxy(e), o);
        }
        let mut session = conn.session;
        while let Some((_, data)) = proxy.poll_client() {
            let t = session.take_down(self.tick, data);
            self.down_pool.give(t.spare);
            let k = &mut self.clients.counters;
            k.bad_downstream += u64::from(!t.understood);
            k.views_in_place += u64::from(t.in_place);
        }
        let account = conn.account.expect("checked");
        let moves = self.clients.door.next_move();
        self.clients.door.move_seat(&account, e, to);
        self.proxy_at.insert(e, (to, moves));
        let parcel = Parcel {
            session,
            proxy,
            account,
            moves,
            to,
            sent_at: now,
        };
        self.clients.door.send_parcel(e, parcel);
        let handed = port.hand_off(id, to, note(e));
        assert!(handed.is_ok(), "an open connection can be handed off");
        self.clients.counters.proxy_handoffs += 1;
    }

    /// `PortEvent::Adopted` with a follow note for `e`: the connection
    /// carries on here with its session and proxy.
    pub(super) fn adopt_proxy(&mut self, port: &mut ClientPort, id: ConnId, e: EntityId) {
        let Some(p) = self.clients.door.take_parcel(e) else {
            // Taken back as overdue meanwhile: the client reconnects.
            self.clients.counters.proxy_lost += 1;
            port.close(id);
            return;
        };
        debug_assert_eq!(p.to, self.ctx.shard.index);
        self.follow.handed_at.insert(e, p.sent_at);
        self.install_proxy(e, p.proxy, p.moves);
        let c = Conn {
            session: p.session,
            entity: Some(e),
            account: Some(p.account),
        };
        let old = self.clients.conns.insert(id, c);
        assert!(old.is_none(), "an adopted connection has a fresh id");
        let old = self.clients.by_entity.insert(e, id);
        assert!(old.is_none(), "one connection per avatar");
        self.clients.counters.proxy_adopted += 1;
    }

    /// Parcels for this shard whose connection never came: their avatars
    /// wait for a reconnect here as after a drop.
    fn adopt_overdue(&mut self, now: Time) {
        let before = now - self.clients.params.handshake_timeout;
        let me = self.ctx.shard.index;
        for (e, p) in self.clients.door.overdue_parcels(me, before) {
            self.install_proxy(e, p.proxy, p.moves);
            self.clients.counters.proxy_lost += 1;
            let until = now + self.clients.params.reconnect_window;
            let d = Detached {
                session: p.session,
                account: p.account,
                until,
            };
            self.clients.detached.insert(e, d);
        }
    }

    /// Whether `e`'s proxy is on its way here (its parcel is in the door):
    /// a lock, taken only for a message that finds no proxy here.
    pub(super) fn proxy_incoming(&self, e: EntityId) -> bool {
        self.clients.door.parcel_to(e) == Some(self.ctx.shard.index)
    }

    /// Holds `item` (for a proxy on its way here) until the proxy arrives;
    /// at most `gateway.handoffs_max` x the proxy's downstream buffer are
    /// held (past it: orphaned, counted).
    pub(super) fn park_for_proxy(&mut self, item: Routed) {
        let max =
            self.clients.params.handoffs_max * super::host::proxy_params().downstream_buffer_max;
        if self.follow.parked.len() < max {
            self.follow.parked.push(item);
        } else {
            self.counters.orphaned += 1;
        }
    }

    /// `proxy` of `e` lives here now: every other shard is told.
    fn install_proxy(&mut self, e: EntityId, proxy: Proxy, moves: u64) {
        assert!(!self.proxies.contains_key(&e), "one proxy per avatar");
        list_new_proxy(&mut self.proxies, &mut self.busy_proxies, e, proxy);
        self.proxy_at.remove(&e);
        self.follow.moved.push(e);
        // What waited for it is delivered at the tick's next phase
        // boundary, in arrival order (the proxy orders it by seq).
        for item in std::mem::take(&mut self.follow.parked) {
            if item.to == Dest::Proxy(e) {
                self.local.push_back(item);
            } else {
                self.follow.parked.push(item);
            }
        }
        self.announce_proxy(ProxyAt {
            entity: e,
            shard: self.ctx.shard.index,
            moves,
        });
    }

    /// A proxy away from its id's shard ended here: the other shards
    /// forget where it was.
    pub(super) fn proxy_gone(&mut self, e: EntityId) {
        self.follow.roaming.remove(&e);
        self.follow.handed_at.remove(&e);
        if entity_shard(e) != self.ctx.shard.index {
            self.announce_proxy(ProxyAt {
                entity: e,
                shard: entity_shard(e),
                moves: self.clients.door.next_move(),
            });
        }
    }

    fn announce_proxy(&mut self, at: ProxyAt) {
        let me = usize::from(self.ctx.shard.index);
        for (i, lane) in self.lanes.iter_mut().enumerate() {
            if i != me {
                lane.proxies.push(at);
            }
        }
    }

    /// Another shard's notice: `at.entity`'s proxy is on `at.shard`.
    pub(super) fn proxy_moved(&mut self, at: ProxyAt) {
        if self.proxies.contains_key(&at.entity) {
            return; // adopted here after that hand-over
        }
        let newer = match self.proxy_at.get(&at.entity) {
            Some(&(_, m)) => at.moves > m,
            None => true,
        };
        if !newer {
            return;
        }
        if at.shard == entity_shard(at.entity) {
            self.proxy_at.remove(&at.entity);
        } else {
            self.proxy_at.insert(at.entity, (at.shard, at.moves));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_follow_note_round_trips_and_is_not_a_login_note() {
        let e = EntityId((1 << 48) | 77);
        assert_eq!(decode_note(&note(e)), Some(e));
        assert_eq!(decode_note(&[2, 3, b'a', b'n']), None, "a login's note");
        assert_eq!(decode_note(&note(e)[..8]), None, "cut");
        assert_eq!(decode_note(&[]), None);
    }
}
