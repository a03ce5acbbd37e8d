//! The socket side's calls into [`ClientPort`] (used by
//! `runtime::gateway_io` only): registering accepted connections,
//! appending what was read, taking what to write, the list of slots with
//! work, and releasing.
//!
//! Owns no state of its own; it must not touch sockets itself.

use super::{ClientPort, CloseReason, ConnId, SlotState};
use std::net::SocketAddr; // tidy: allow(std::net): an address value, no socket

impl ClientPort {
    /// Registers an accepted connection; `None` (counted as refused) at
    /// `connections_max`.
    pub(crate) fn io_open(&mut self, peer: SocketAddr) -> Option<ConnId> {
        debug_assert!(self.attached);
        let conn = self.open_slot(peer, true, None);
        if conn.is_none() {
            self.counters.closed[CloseReason::TooManyConnections.index()] += 1;
        }
        conn
    }

    /// Registers a connection handed over by another shard, with the input
    /// that shard had not consumed (at most `inbound_bytes_max`: the same
    /// bound on every shard); `None` at `connections_max` (counted as a
    /// failed hand-off).
    pub(crate) fn io_adopt(
        &mut self,
        peer: SocketAddr,
        input: &[u8],
        note: Vec<u8>,
    ) -> Option<ConnId> {
        debug_assert!(self.attached);
        let Some(conn) = self.open_slot(peer, true, Some(note)) else {
            self.counters.handoffs_failed += 1;
            return None;
        };
        let keep = input.len().min(self.p.inbound_bytes_max);
        let slot = &mut self.slots[conn.slot() as usize];
        slot.inbound.push(&input[..keep]);
        self.inbound_held += keep;
        self.counters.adopted += 1;
        Some(conn)
    }

    /// A slot handed off: its destination, note and unconsumed input; the
    /// slot is then done (the caller moves the socket, then releases it).
    pub(crate) fn io_take_handoff(&mut self, index: u32) -> Option<(u16, Vec<u8>, Vec<u8>)> {
        let slot = &mut self.slots[index as usize];
        let (to, note) = slot.handoff.take()?;
        debug_assert_eq!(slot.state, SlotState::HandingOff);
        let input = slot.inbound.pending().to_vec();
        self.inbound_held -= input.len();
        slot.inbound.reset();
        slot.state = SlotState::Done;
        Some((to, note, input))
    }

    /// Counts a hand-off as done (`moved`) or failed.
    pub(crate) fn io_handed_off(&mut self, moved: bool) {
        if moved {
            self.counters.handed_off += 1;
        } else {
            self.counters.handoffs_failed += 1;
        }
    }

    /// The slot's state, as the socket side must act on it.
    pub(crate) fn io_state(&self, index: u32) -> SlotState {
        self.slots[index as usize].state
    }

    /// Room for input: `min(read_batch_bytes, inbound room)`; 0 marks the
    /// reader paused (a consume wakes it).
    pub(crate) fn io_read_room(&mut self, index: u32) -> usize {
        let (max, batch) = (self.p.inbound_bytes_max, self.p.read_batch_bytes);
        let slot = &mut self.slots[index as usize];
        if slot.state != SlotState::Open {
            return 0;
        }
        let room = max.saturating_sub(slot.inbound.len()).min(batch);
        slot.read_paused = room == 0;
        room
    }

    /// Appends bytes read from the socket.
    pub(crate) fn io_received(&mut self, index: u32, bytes: &[u8]) {
        let slot = &mut self.slots[index as usize];
        debug_assert_eq!(slot.state, SlotState::Open);
        slot.inbound.push(bytes);
        debug_assert!(slot.inbound.len() <= self.p.inbound_bytes_max);
        self.inbound_held += bytes.len();
        self.counters.bytes_in += bytes.len() as u64;
    }

    /// The output waiting to be written.
    pub(crate) fn io_pending_output(&self, index: u32) -> &[u8] {
        self.slots[index as usize].outbound.pending()
    }

    /// Marks `n` queued bytes written.
    pub(crate) fn io_wrote(&mut self, index: u32, n: usize) {
        let slot = &mut self.slots[index as usize];
        let n = n.min(slot.outbound.len());
        slot.outbound.advance(n);
        self.outbound_held -= n;
        self.counters.bytes_out += n as u64;
        self.counters.writes += 1;
    }

    /// The peer went away or the socket failed (no-op unless open).
    pub(crate) fn io_failed(&mut self, index: u32, reason: CloseReason) {
        if self.slots[index as usize].state == SlotState::Open {
            self.shut(self.id(index), reason);
        }
    }

    /// Moves the slots that became due since the last call (first bytes
    /// queued, a paused reader given room, a close) into `out` (cleared
    /// first), each once, in the order they became due.
    pub(crate) fn io_take_due(&mut self, out: &mut Vec<u32>) {
        out.clear();
        std::mem::swap(out, &mut self.due);
        for &index in out.iter() {
            self.slots[index as usize].due = false;
        }
    }

    /// The socket loop is done with this slot (socket closed): whatever is
    /// still queued is dropped and the slot is freed once the app saw Closed.
    pub(crate) fn io_release(&mut self, index: u32) {
        let slot = &mut self.slots[index as usize];
        if slot.state == SlotState::Open {
            self.shut(self.id(index), CloseReason::IoError);
        }
        let slot = &mut self.slots[index as usize];
        self.outbound_held -= slot.outbound.len();
        slot.outbound.reset();
        slot.state = SlotState::Done;
        slot.io_held = false;
        self.try_free(index);
    }

    /// Closes every open connection as [`CloseReason::Shutdown`] (queued
    /// output lingers).
    pub(crate) fn shutdown_all(&mut self) {
        for index in 0..self.slots.len() as u32 {
            if self.slots[index as usize].state == SlotState::Open {
                self.shut(self.id(index), CloseReason::Shutdown);
            }
        }
    }

    /// Connections whose socket the socket side still holds.
    pub(crate) fn io_live(&self) -> usize {
        self.slots.iter().filter(|s| s.io_held).count()
    }

    /// Drops the events nobody will poll any more (after the app stopped),
    /// releasing their slots.
    pub(crate) fn discard_events(&mut self) {
        while self.poll_event().is_some() {}
    }

    /// Checks the whole structure (tests, `verify`).
    #[cfg(any(test, feature = "verify"))]
    pub fn verify(&self) {
        let used = self
            .slots
            .iter()
            .filter(|s| s.state != SlotState::Free)
            .count();
        assert_eq!(used, self.in_use, "slots in use");
        assert_eq!(used + self.free.len(), self.slots.len(), "free list");
        let open = self
            .slots
            .iter()
            .filter(|s| s.state == SlotState::Open)
            .count();
        assert_eq!(open, self.open, "open count");
        let inb: usize = self.slots.iter().map(|s| s.inbound.len()).sum();
        let outb: usize = self.slots.iter().map(|s| s.outbound.len()).sum();
        assert_eq!(inb, self.inbound_held, "inbound held");
        assert_eq!(outb, self.outbound_held, "outbound held");
        for s in &self.slots {
            assert!(s.inbound.len() <= self.p.inbound_bytes_max);
            assert!(s.outbound.len() <= self.p.send_queue_bytes_max);
            if !self.attached {
                assert!(!s.io_held);
            }
        }
        assert!(self.events.len() <= 2 * self.slots.len());
        let due = self.slots.iter().filter(|s| s.due).count();
        assert_eq!(due, self.due.len(), "due flags and list");
        assert!(self.due.len() <= self.slots.len());
    }
}
