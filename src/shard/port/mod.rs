//! [`ClientPort`]: the shard-local table of client connections, as bytes.
//!
//! The application never touches a socket. Each shard owns one port; the
//! runtime's batched socket loop (`runtime::gateway_io`) appends what it
//! reads to a connection's bounded inbound buffer and writes what the
//! application queued in its bounded send buffer; port calls that give the
//! loop work it cannot learn from the kernel (first bytes queued, a paused
//! reader given room, a close) put the slot on the *due* list. The application sees the port only during its
//! tick (`ShardApp::on_tick`): it polls [`PortEvent`]s, reads and consumes
//! input, queues output and closes connections. A *detached* port
//! ([`ClientPort::detached`]) has no sockets at all: a test feeds it by hand
//! with the `inject_*` calls and reads what would be written with
//! [`ClientPort::take_output`].
//!
//! # Bounds
//! - at most `connections_max` slots are in use (open, or closed but not yet
//!   released): the socket side refuses further connections;
//! - a connection's unconsumed input is at most `inbound_bytes_max`: the
//!   reader stops reading (TCP back-pressure) until the app consumes;
//! - a connection's send queue is at most `send_queue_bytes_max`: a send that
//!   would pass it queues nothing, fails with [`PortError::SendQueueFull`] and
//!   closes the connection at once as [`CloseReason::SlowReader`];
//! - events: at most two per slot (Opened or Adopted, Closed), since a slot
//!   is reused only after its Closed event was polled (a connection handed
//!   off has no Closed event: its slot is freed once the socket moved).
//!
//! # Hand-off
//! [`ClientPort::hand_off`] gives a connection to another shard of the
//! node (`runtime::handoff`): the socket side moves the socket and the
//! unconsumed input there, where it opens as `PortEvent::Adopted`.
//!
//! # Ids
//! A [`ConnId`] is a slot index (high 32 bits) and the slot's generation (low
//! 32 bits); a slot's generation changes when it is freed, so an id is never
//! reused while its connection is alive, and ConnId order is slot order.
//!
//! Owns connection state and buffers; it must not touch sockets, executors or
//! clocks (the socket side calls the `io_*` methods).

use std::collections::VecDeque;
use std::net::SocketAddr; // tidy: allow(std::net): an address value, no socket

mod io;
mod queue;
mod types;

pub use types::{CloseReason, ConnId, PortCounters, PortError, PortEvent, PortParams};

use queue::ByteQueue;

/// Where a slot is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SlotState {
    /// Unused.
    Free,
    /// Open: the app reads and sends.
    Open,
    /// Closed for the app; the queued output is still being written (at most
    /// `linger_ms`), nothing is read any more.
    Lingering,
    /// Closed: the socket side must close the socket at once.
    Done,
    /// Handed to another shard ([`ClientPort::hand_off`]): the socket side
    /// moves the socket and the unconsumed input there.
    HandingOff,
}

#[derive(Debug)]
struct Slot {
    generation: u32,
    state: SlotState,
    peer: Option<SocketAddr>,
    inbound: ByteQueue,
    outbound: ByteQueue,
    /// The socket side still holds this slot (always false when detached).
    io_held: bool,
    /// The Closed event is queued and not yet polled.
    close_pending: bool,
    /// The reader stopped at `inbound_bytes_max`.
    read_paused: bool,
    /// The slot is on the port's `due` list (the socket side has work).
    due: bool,
    /// While handing off: the destination shard and the note.
    handoff: Option<(u16, Vec<u8>)>,
}

impl Slot {
    fn new() -> Slot {
        Slot {
            generation: 0,
            state: SlotState::Free,
            peer: None,
            inbound: ByteQueue::default(),
            outbound: ByteQueue::default(),
            io_held: false,
            close_pending: false,
            read_paused: false,
            due: false,
            handoff: None,
        }
    }
}

/// The client connections of one shard; see the module doc.
#[derive(Debug)]
pub struct ClientPort {
    p: PortParams,
    /// Sockets are attached (false: a detached test port).
    attached: bool,
    slots: Vec<Slot>,
    /// Free slot indices (reused last-in first-out).
    free: Vec<u32>,
    in_use: usize,
    open: usize,
    events: VecDeque<PortEvent>,
    counters: PortCounters,
    inbound_held: usize,
    outbound_held: usize,
    /// Slots whose socket side has work it cannot learn from the kernel:
    /// first bytes queued, a paused reader given room, a close. Each slot at
    /// most once (its `due` flag), so at most `connections_max` entries.
    due: Vec<u32>,
}

impl ClientPort {
    /// Test/sans-IO drivers (no sockets): a detached port the test feeds by hand.
    pub fn detached(params: PortParams) -> ClientPort {
        ClientPort::new(params, false)
    }

    /// A port whose connections are driven by the runtime's socket loop.
    pub(crate) fn attached(params: PortParams) -> ClientPort {
        ClientPort::new(params, true)
    }

    fn new(p: PortParams, attached: bool) -> ClientPort {
        ClientPort {
            p,
            attached,
            slots: Vec::new(),
            free: Vec::new(),
            in_use: 0,
            open: 0,
            events: VecDeque::new(),
            counters: PortCounters::default(),
            inbound_held: 0,
            outbound_held: 0,
            due: Vec::new(),
        }
    }

    /// The port's bounds.
    pub fn params(&self) -> &PortParams {
        &self.p
    }

    /// The next event, oldest first.
    pub fn poll_event(&mut self) -> Option<PortEvent> {
        let ev = self.events.pop_front()?;
        if let PortEvent::Closed { conn, .. } = ev {
            let slot = &mut self.slots[conn.slot() as usize];
            debug_assert!(slot.close_pending && slot.generation == conn.generation());
            slot.close_pending = false;
            self.inbound_held -= slot.inbound.len();
            slot.inbound.reset();
            self.try_free(conn.slot());
        }
        Some(ev)
    }

    /// Connections with unconsumed input, in ConnId order.
    pub fn readable(&self) -> impl Iterator<Item = ConnId> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                !matches!(s.state, SlotState::Free | SlotState::HandingOff) && s.inbound.len() > 0
            })
            .map(|(i, s)| ConnId::new(i as u32, s.generation))
    }

    /// Bytes received from `conn` and not yet consumed (empty if none or unknown).
    pub fn input(&self, conn: ConnId) -> &[u8] {
        self.slot(conn).map_or(&[], |s| s.inbound.pending())
    }

    /// Marks the first `n` bytes of `input(conn)` consumed (at most all of them).
    pub fn consume(&mut self, conn: ConnId, n: usize) {
        let inbound_max = self.p.inbound_bytes_max;
        let Some(slot) = self.slot_mut(conn) else {
            return;
        };
        let n = n.min(slot.inbound.len());
        slot.inbound.advance(n);
        let resume = slot.read_paused && slot.inbound.len() < inbound_max;
        if resume {
            slot.read_paused = false;
        }
        self.inbound_held -= n;
        if resume {
            self.mark_due(conn.slot());
        }
    }

    /// Queues bytes for `conn` (copied into its bounded send buffer).
    ///
    /// # Errors
    /// [`PortError::Unknown`] if `conn` is not open; [`PortError::SendQueueFull`]
    /// if the queue would pass `send_queue_bytes_max` (the connection is then
    /// closed as [`CloseReason::SlowReader`]).
    pub fn send(&mut self, conn: ConnId, bytes: &[u8]) -> Result<(), PortError> {
        let queued = self.send_room(conn, bytes.len())?;
        if bytes.is_empty() {
            return Ok(());
        }
        let slot = self.slot_mut(conn).expect("checked by send_room");
        slot.outbound.push(bytes);
        self.sent(conn, queued, bytes.len());
        Ok(())
    }

    /// As [`ClientPort::send`] with the bytes of `buf`, which is left empty
    /// on success: a buffer sent to an empty queue becomes the queue (no
    /// copy) and `buf` gets the queue's spare allocation back. On an error
    /// `buf` is left as it was.
    ///
    /// # Errors
    /// As [`ClientPort::send`].
    pub fn send_buf(&mut self, conn: ConnId, buf: &mut Vec<u8>) -> Result<(), PortError> {
        let n = buf.len();
        let queued = self.send_room(conn, n)?;
        if n == 0 {
            return Ok(());
        }
        let slot = self.slot_mut(conn).expect("checked by send_room");
        slot.outbound.push_from(buf);
        debug_assert!(buf.is_empty());
        self.sent(conn, queued, n);
        Ok(())
    }

    /// The bytes queued for open `conn` if `n` more fit; else the error
    /// (a full queue closes it as a slow reader).
    fn send_room(&mut self, conn: ConnId, n: usize) -> Result<usize, PortError> {
        let max = self.p.send_queue_bytes_max;
        let queued = match self.slot(conn) {
            Some(s) if s.state == SlotState::Open => s.outbound.len(),
            _ => return Err(PortError::Unknown(conn)),
        };
        if queued + n > max {
            self.shut(conn, CloseReason::SlowReader);
            return Err(PortError::SendQueueFull { conn, queued });
        }
        Ok(queued)
    }

    /// Counts `n` bytes queued for `conn` (which held `queued`).
    fn sent(&mut self, conn: ConnId, queued: usize, n: usize) {
        self.outbound_held += n;
        if queued == 0 {
            self.mark_due(conn.slot());
        }
    }

    /// Bytes queued and not yet written.
    pub fn queued(&self, conn: ConnId) -> usize {
        self.slot(conn).map_or(0, |s| s.outbound.len())
    }

    /// Closes after the queued bytes are written (at most `linger_ms`);
    /// Closed{ClosedByApp} follows. Does nothing if `conn` is not open.
    pub fn close(&mut self, conn: ConnId) {
        if self.is_open(conn) {
            self.shut(conn, CloseReason::ClosedByApp);
        }
    }

    /// Hands `conn` to shard `to` of this node with `note`: the connection
    /// is over here at once (no Closed event: the caller forgot it), and
    /// the destination's application sees it as `PortEvent::Adopted` with
    /// the note and whatever input was not consumed here. Queued output is
    /// dropped. A detached port has no socket to move: the connection just
    /// ends (counted as a failed hand-off).
    ///
    /// # Errors
    /// [`PortError::Unknown`] if `conn` is not open.
    pub fn hand_off(&mut self, conn: ConnId, to: u16, note: Vec<u8>) -> Result<(), PortError> {
        if !self.is_open(conn) {
            return Err(PortError::Unknown(conn));
        }
        let index = conn.slot();
        let attached = self.attached;
        let slot = &mut self.slots[index as usize];
        self.outbound_held -= slot.outbound.len();
        slot.outbound.reset();
        self.open -= 1;
        if attached && slot.io_held {
            slot.state = SlotState::HandingOff;
            slot.handoff = Some((to, note));
            self.mark_due(index);
        } else {
            self.inbound_held -= slot.inbound.len();
            slot.inbound.reset();
            slot.state = SlotState::Done;
            self.counters.handoffs_failed += 1;
            self.try_free(index);
        }
        Ok(())
    }

    /// Whether [`ClientPort::hand_off`] can move a connection (false on a
    /// detached test port, which has no sockets: a hand-off ends it).
    pub fn can_hand_off(&self) -> bool {
        self.attached
    }

    /// Connections open for the application (closed ones excluded).
    pub fn open_connections(&self) -> usize {
        self.open
    }

    /// Slots in use: open connections plus closed ones not yet released
    /// (still flushing, or whose Closed event was not polled yet).
    pub fn slots_in_use(&self) -> usize {
        self.in_use
    }

    /// Whether `conn` is open.
    pub fn is_open(&self, conn: ConnId) -> bool {
        self.slot(conn).is_some_and(|s| s.state == SlotState::Open)
    }

    /// Input `conn` may still receive before its reader stops (0 if not open).
    pub fn inbound_room(&self, conn: ConnId) -> usize {
        match self.slot(conn) {
            Some(s) if s.state == SlotState::Open => {
                self.p.inbound_bytes_max.saturating_sub(s.inbound.len())
            }
            _ => 0,
        }
    }

    /// Cumulative counters.
    pub fn counters(&self) -> &PortCounters {
        &self.counters
    }

    /// Unconsumed input bytes over all connections.
    pub fn inbound_held(&self) -> usize {
        self.inbound_held
    }

    /// Queued output bytes over all connections.
    pub fn outbound_held(&self) -> usize {
        self.outbound_held
    }

    /// Opens a connection as if a client connected; queues Opened.
    ///
    /// # Panics
    /// If `connections_max` slots are in use (a test driver's mistake: the
    /// socket side refuses such connections instead).
    pub fn inject_open(&mut self, peer: SocketAddr) -> ConnId {
        self.open_slot(peer, false, None)
            .expect("inject_open: connections_max slots in use")
    }

    /// Appends input as if read from the socket.
    ///
    /// # Panics
    /// If `bytes` exceed [`ClientPort::inbound_room`] (the reader never reads
    /// more), unless the connection is not open (then nothing happens).
    pub fn inject_input(&mut self, conn: ConnId, bytes: &[u8]) {
        if !self.is_open(conn) {
            return;
        }
        assert!(
            bytes.len() <= self.inbound_room(conn),
            "inject_input: {} bytes exceed the inbound room of {conn:?}",
            bytes.len()
        );
        self.io_received(conn.slot(), bytes);
    }

    /// Closes as if the peer went away (or the socket failed): queued output
    /// is dropped, the unconsumed input stays readable until the Closed
    /// event is polled.
    pub fn inject_close(&mut self, conn: ConnId, reason: CloseReason) {
        if self.is_open(conn) {
            self.io_failed(conn.slot(), reason);
        }
    }

    /// Takes the queued output as if written to the socket (also after a
    /// close, while the connection lingers); a lingering connection whose
    /// queue is now empty is released.
    pub fn take_output(&mut self, conn: ConnId) -> Vec<u8> {
        let Some(slot) = self.slot(conn) else {
            return Vec::new();
        };
        let out = slot.outbound.pending().to_vec();
        self.io_wrote(conn.slot(), out.len());
        let slot = &mut self.slots[conn.slot() as usize];
        if slot.state == SlotState::Lingering && slot.outbound.len() == 0 {
            slot.state = SlotState::Done;
            self.try_free(conn.slot());
        }
        out
    }

    fn slot(&self, conn: ConnId) -> Option<&Slot> {
        self.slots
            .get(conn.slot() as usize)
            .filter(|s| s.generation == conn.generation() && s.state != SlotState::Free)
    }

    fn slot_mut(&mut self, conn: ConnId) -> Option<&mut Slot> {
        self.slots
            .get_mut(conn.slot() as usize)
            .filter(|s| s.generation == conn.generation() && s.state != SlotState::Free)
    }

    fn id(&self, slot: u32) -> ConnId {
        ConnId::new(slot, self.slots[slot as usize].generation)
    }

    /// Takes a slot for a new connection (adopted from another shard with
    /// `note`); `None` at `connections_max`.
    fn open_slot(&mut self, peer: SocketAddr, io: bool, note: Option<Vec<u8>>) -> Option<ConnId> {
        if self.in_use >= self.p.connections_max {
            return None;
        }
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot::new());
                u32::try_from(self.slots.len() - 1).expect("connections_max fits u32")
            }
        };
        let slot = &mut self.slots[index as usize];
        debug_assert_eq!(slot.state, SlotState::Free);
        slot.state = SlotState::Open;
        slot.peer = Some(peer);
        slot.io_held = io;
        slot.read_paused = false;
        self.in_use += 1;
        self.open += 1;
        self.counters.opened += 1;
        let conn = self.id(index);
        self.events.push_back(match note {
            None => PortEvent::Opened { conn, peer },
            Some(note) => PortEvent::Adopted { conn, peer, note },
        });
        Some(conn)
    }

    /// Closes an open connection for the app: Closed event, counters; output
    /// lingers only for app closes and shutdown.
    fn shut(&mut self, conn: ConnId, reason: CloseReason) {
        let index = conn.slot();
        let slot = &mut self.slots[index as usize];
        debug_assert_eq!(slot.state, SlotState::Open);
        let linger = matches!(reason, CloseReason::ClosedByApp | CloseReason::Shutdown);
        if !matches!(reason, CloseReason::PeerClosed | CloseReason::IoError) {
            // The app will not read any more; peer-side closes keep the input
            // readable until the Closed event is polled.
            self.inbound_held -= slot.inbound.len();
            slot.inbound.reset();
        }
        // Attached sockets always linger on a graceful close (FIN, then drain
        // the peer's input, so that the last bytes are not lost to a reset).
        if linger && (self.attached || slot.outbound.len() > 0) {
            slot.state = SlotState::Lingering;
        } else {
            self.outbound_held -= slot.outbound.len();
            slot.outbound.reset();
            slot.state = SlotState::Done;
        }
        slot.close_pending = true;
        self.mark_due(index);
        self.open -= 1;
        self.counters.closed[reason.index()] += 1;
        self.events.push_back(PortEvent::Closed { conn, reason });
    }

    /// Puts a slot on the socket side's work list (once; detached ports keep
    /// no list, nobody would take it).
    fn mark_due(&mut self, index: u32) {
        let slot = &mut self.slots[index as usize];
        if self.attached && slot.io_held && !slot.due {
            slot.due = true;
            self.due.push(index);
        }
    }

    /// Frees a slot once nobody refers to it any more.
    fn try_free(&mut self, index: u32) {
        let slot = &mut self.slots[index as usize];
        if slot.state != SlotState::Done || slot.io_held || slot.close_pending {
            return;
        }
        debug_assert_eq!(slot.inbound.len(), 0);
        debug_assert_eq!(slot.outbound.len(), 0);
        slot.state = SlotState::Free;
        slot.generation = slot.generation.wrapping_add(1);
        slot.peer = None;
        slot.inbound.reset();
        slot.outbound.reset();
        self.free.push(index);
        self.in_use -= 1;
    }
}

#[cfg(test)]
mod tests;
