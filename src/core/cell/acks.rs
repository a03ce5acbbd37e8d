//! Input acknowledgements owed to a real's client, carried by its view
//! batches.
//!
//! The game acknowledges the inputs it processed at a real (the highest
//! client seq). Sent as a downstream message of its own, every moving
//! client would cost a second message a tick through the proxy and the
//! gateway, beside its view batch. Instead the real keeps the
//! acknowledgement it owes ([`RealPart::ack_due`]) and the next body sent
//! to its client that is a view batch carries it (`Cell::send_or_hand_back`,
//! [`DownBody::carry_ack`]); a flush with nothing else to send makes an
//! empty batch for it (`views.rs`, `flush_counted`), so an owed
//! acknowledgement leaves with the observer's next flush, at most one
//! update period later. A client sees the same frames: PROTOCOL.md's
//! InputAck "with nothing else to send waits for" the next batch anyway.
//! A real whose client has no observer here is owed nothing: the game then
//! sends the acknowledgement in a reply of its own, as before.
//!
//! Owns the owing and the taking back; must not build any downstream body
//! (the view flush and the game do).
//!
//! [`RealPart::ack_due`]: super::table::RealPart::ack_due
//! [`DownBody::carry_ack`]: crate::core::down::DownBody::carry_ack

use super::machine::Cell;
use super::table::{EntityTable, Part};
use crate::core::ids::EntityId;

impl Cell {
    /// Owes `entity`'s client the acknowledgement of client seq `seq` (or
    /// a later one already owed): it rides the client's next view batch.
    /// False, owing nothing, when `entity` is not real here, has no client,
    /// or its client has no observer here (no view batch would carry it):
    /// the caller sends the acknowledgement itself.
    pub fn owe_ack(&mut self, entity: EntityId, seq: u64) -> bool {
        let Some(r) = self.entities.get_mut(entity).and_then(|e| e.real_mut()) else {
            return false;
        };
        if !r.has_proxy
            || self
                .views
                .watch_mut_hinted(entity, &mut r.watch_hint)
                .is_none()
        {
            return false;
        }
        r.ack_due = r.ack_due.max(seq);
        true
    }

    /// Takes back what `entity`'s real owes its client (0: nothing, or not
    /// real here): for a caller that sends the acknowledgement in a
    /// message of its own this tick (the game's reply with call results),
    /// so the view batch does not send it again.
    pub fn take_owed_ack(&mut self, entity: EntityId) -> u64 {
        // Looked through `&` first: most reals owe nothing by then.
        if !owes_ack(&self.entities, entity, u32::MAX) {
            return 0;
        }
        self.entities
            .get_mut(entity)
            .and_then(|e| e.real_mut())
            .map_or(0, |r| std::mem::take(&mut r.ack_due))
    }

    /// Checks that every owed acknowledgement can leave: its real has a
    /// client and an observer here, whose flushes carry it.
    ///
    /// # Panics
    /// On a real that owes an acknowledgement no flush here would send.
    pub(super) fn verify_acks(&self) {
        for e in self.entities.iter() {
            let Part::Real(r) = &e.part else {
                continue;
            };
            assert!(
                r.ack_due == 0 || (r.has_proxy && self.views.watch(e.id).is_some()),
                "{} owes its client ack {} and no view batch will carry it",
                e.id,
                r.ack_due
            );
        }
    }
}

/// True when real `owner` (the entity table's slab index `hint` tried
/// first) owes its client an input acknowledgement.
pub(super) fn owes_ack(entities: &EntityTable, owner: EntityId, mut hint: u32) -> bool {
    (entities.get_hinted(owner, &mut hint))
        .and_then(|e| e.real())
        .is_some_and(|r| r.ack_due > 0)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{avatar, params, types};
    use super::super::{Cell, Outgoing};
    use crate::core::cell::msg::{Msg, ProxyMsg};
    use crate::core::down::DownKind;
    use crate::core::ids::{CellId, EntityId};
    use crate::core::time::Time;

    const ME: EntityId = EntityId(1);

    fn cell(proxied: bool) -> Cell {
        let mut cell = Cell::new(CellId(0), params(), types()).expect("params");
        cell.create_real(Time::ZERO, avatar(ME, 10.0, 10.0), proxied, 1)
            .expect("created");
        cell
    }

    /// The bodies the cell sent `ME`'s client, in order.
    fn sent(cell: &mut Cell) -> Vec<Vec<u8>> {
        std::iter::from_fn(|| cell.poll_output())
            .filter_map(|o: Outgoing| match o.msg {
                Msg::Proxy(ProxyMsg::Downstream { entity, data, .. }) if entity == ME => {
                    Some(data.to_vec())
                }
                _ => None,
            })
            .collect()
    }

    /// Flushes the views until a batch leaves (the first flush is the
    /// client's full view; later ones come at its phase).
    fn flush_until_sent(cell: &mut Cell) -> Vec<Vec<u8>> {
        for _ in 0..8 {
            cell.run_views();
            let out = sent(cell);
            if !out.is_empty() {
                return out;
            }
        }
        Vec::new()
    }

    /// An owed acknowledgement leaves with the next view batch, in the
    /// same message; a flush with nothing else to send still carries it
    /// (an empty batch); once carried, nothing is owed.
    #[test]
    fn an_owed_ack_rides_the_next_view_batch() {
        let mut c = cell(true);
        let first = flush_until_sent(&mut c);
        assert!(
            first.iter().all(|b| b[0] == DownKind::View.byte()),
            "owed nothing yet"
        );
        assert!(c.owe_ack(ME, 7));
        assert!(c.owe_ack(ME, 5), "a lower seq keeps the higher owed");
        let out = flush_until_sent(&mut c);
        assert_eq!(out.len(), 1, "one message: the batch with the ack");
        let (kind, payload) = crate::core::down::split(&out[0]).expect("kind");
        assert_eq!(kind, DownKind::ViewAcked);
        let (batch, ack) = crate::core::down::split_ack(payload).expect("ack");
        assert_eq!(ack, 7);
        assert!(batch.is_empty(), "nothing else changed: an empty batch");
        assert_eq!(c.counters().acks_carried, 1);
        assert_eq!(c.take_owed_ack(ME), 0, "carried: nothing owed");
        c.verify();
        // Taken back by a caller that sends it itself: the batch does not.
        assert!(c.owe_ack(ME, 9));
        assert_eq!(c.take_owed_ack(ME), 9);
        for _ in 0..8 {
            c.run_views();
        }
        assert!(sent(&mut c)
            .iter()
            .all(|b| b[0] != DownKind::ViewAcked.byte()));
    }

    /// Nothing is owed to a real without a client, or to an entity not
    /// real here: the caller sends its acknowledgement itself.
    #[test]
    fn an_ack_is_owed_only_where_a_view_batch_will_carry_it() {
        let mut c = cell(false);
        assert!(!c.owe_ack(ME, 3), "no client");
        assert!(!c.owe_ack(EntityId(99), 3), "not here");
        assert_eq!(c.take_owed_ack(EntityId(99)), 0);
    }

    /// The check fires for a real that owes an acknowledgement its client
    /// would never get (no observer to carry it).
    #[test]
    fn the_check_fires_for_an_ack_no_batch_would_carry() {
        let mut c = cell(false);
        c.verify();
        c.entities
            .get_mut(ME)
            .and_then(|e| e.real_mut())
            .expect("real")
            .ack_due = 4;
        let fired = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| c.verify()));
        assert!(fired.is_err(), "an ack owed without an observer is caught");
    }
}
