//! A downstream body as it travels (real -> proxy -> gateway), and the
//! bounded pool its buffers come from and go back to.
//!
//! A [`DownBody`] is an owned buffer: each body has exactly one reader (its
//! client's session), so nothing is shared and nothing is reference
//! counted. A body made by [`DownPool::body`] keeps [`FRAME_ROOM`] spare
//! bytes in front of its kind byte: the gateway overwrites them and the
//! kind byte with the client frame's header and takes the whole buffer as
//! its output when that output is empty ([`DownBody::into_frame`]): no
//! copy of the payload between the cell and the connection's queue.
//!
//! The pool is bounded by the bytes it keeps (`server.down_pool_bytes_max`
//! for a shard's): a buffer given back past the bound is freed. On a
//! shard the host lends its pool to each cell for the cell's tick and the
//! sessions give back the buffers they are done with, so in steady state a
//! view batch costs no allocation. A cell without a lent pool (the
//! simulator's, or a flush outside its tick) has an empty one that keeps
//! nothing: each body is one allocation, as before.
//!
//! Owns the body's buffer and room and the pool's bound. Must not know any
//! payload's layout or the client frame's (only its length, checked by the
//! gateway at compile time).

use super::DownKind;

/// Spare bytes in front of a pooled body's kind byte. With the kind byte
/// they are the room for a ViewBatch frame's header (the frame header and
/// the tick: 16 bytes; the gateway asserts it at compile time).
pub const FRAME_ROOM: usize = 15;

/// Spare capacity a pooled body's buffer gets after its payload: a session
/// that takes the buffer as its output appends the tick's InputAck (16
/// bytes) there without a reallocation.
pub const TAIL_ROOM: usize = 64;

/// The body's bytes are `buf[start..]`: its kind byte and payload. A
/// pooled body has `start == FRAME_ROOM`; one from elsewhere has no room.
/// The room travels between shards too (15 bytes), so a body read off the
/// mesh can be framed in place like a local one.
#[derive(
    Clone, Debug, Default, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize,
)]
pub struct DownBody {
    buf: Vec<u8>,
    start: u32,
}

impl DownBody {
    /// `kind`'s byte followed by `payload` (one allocation, no room).
    pub fn with_kind(kind: DownKind, payload: &[u8]) -> DownBody {
        let mut buf = Vec::with_capacity(1 + payload.len());
        buf.push(kind.byte());
        buf.extend_from_slice(payload);
        DownBody { buf, start: 0 }
    }

    /// The spare bytes in front of the body.
    pub fn room(&self) -> usize {
        (self.start as usize).min(self.buf.len())
    }

    /// The whole buffer, room included (to give back to a pool).
    pub fn into_buffer(self) -> Vec<u8> {
        self.buf
    }

    /// The buffer with the room and the kind byte replaced by `head`, in
    /// place: `head` must be exactly that long (else the body is given
    /// back unchanged). The payload does not move.
    ///
    /// # Errors
    /// The body itself when `head` does not fit the room and kind byte.
    pub fn into_frame(mut self, head: &[u8]) -> Result<Vec<u8>, DownBody> {
        if self.is_empty() || self.room() + 1 != head.len() {
            return Err(self);
        }
        self.buf[..head.len()].copy_from_slice(head);
        Ok(self.buf)
    }
}

impl DownBody {
    /// Makes a view batch carry the input acknowledgement `ack` (see
    /// [`DownKind::ViewAcked`]): the kind byte becomes `ViewAcked` and
    /// `ack` follows the batch (in a pooled body, in its tail room: no
    /// reallocation). False, changing nothing, for a body of any other
    /// kind (one already carrying an acknowledgement included).
    pub fn carry_ack(&mut self, ack: u64) -> bool {
        let at = self.room();
        if self.buf.get(at) != Some(&DownKind::View.byte()) {
            return false;
        }
        self.buf[at] = DownKind::ViewAcked.byte();
        self.buf.extend_from_slice(&ack.to_le_bytes());
        true
    }

    /// The input acknowledgement a `ViewAcked` body carries, taken off it:
    /// the body is its view batch again (kind `View`, possibly empty).
    /// `None`, changing nothing, for a body of any other kind or too short
    /// to carry one.
    pub fn take_ack(&mut self) -> Option<u64> {
        let at = self.room();
        if self.buf.get(at) != Some(&DownKind::ViewAcked.byte()) {
            return None;
        }
        let (_, ack) = super::split_ack(&self.buf[at + 1..])?;
        self.buf.truncate(self.buf.len() - super::ACK_BYTES);
        self.buf[at] = DownKind::View.byte();
        Some(ack)
    }
}

impl std::ops::Deref for DownBody {
    type Target = [u8];

    /// The kind byte and the payload (a `start` past the end, which only a
    /// corrupt message could carry, reads as empty).
    fn deref(&self) -> &[u8] {
        &self.buf[self.room()..]
    }
}

impl From<Vec<u8>> for DownBody {
    /// `buf` as the body (kind byte first), no room, no copy.
    fn from(buf: Vec<u8>) -> DownBody {
        DownBody { buf, start: 0 }
    }
}

impl From<&[u8]> for DownBody {
    /// A copy of `body` (kind byte first), no room.
    fn from(body: &[u8]) -> DownBody {
        DownBody::from(body.to_vec())
    }
}

/// What a pool counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DownPoolCounters {
    /// Bodies made in a new buffer (the pool was empty): an allocation.
    pub made: u64,
    /// Bodies made in a buffer taken from the pool.
    pub reused: u64,
    /// Reused buffers that had to grow for their body (a reallocation).
    pub grown: u64,
    /// Buffers given back and kept.
    pub kept: u64,
    /// Buffers given back and freed: the pool was at its bound.
    pub freed: u64,
}

/// Spare body buffers, at most `bytes_max` bytes of capacity in all (see
/// the module doc).
#[derive(Clone, Debug, Default)]
pub struct DownPool {
    free: Vec<Vec<u8>>,
    held_bytes: usize,
    bytes_max: usize,
    counters: DownPoolCounters,
}

impl DownPool {
    /// An empty pool keeping at most `bytes_max` bytes of buffers (0:
    /// keeps nothing, every body is allocated).
    pub fn new(bytes_max: usize) -> DownPool {
        DownPool {
            bytes_max,
            ..DownPool::default()
        }
    }

    /// A body of `kind` and `payload`, with [`FRAME_ROOM`], in a pooled
    /// buffer if there is one.
    pub fn body(&mut self, kind: DownKind, payload: &[u8]) -> DownBody {
        self.made_of(&[kind.byte()], payload)
    }

    /// A copy of `body` (its kind byte first), with [`FRAME_ROOM`], in a
    /// pooled buffer if there is one.
    pub fn copy(&mut self, body: &[u8]) -> DownBody {
        self.made_of(&[], body)
    }

    fn made_of(&mut self, head: &[u8], rest: &[u8]) -> DownBody {
        let len = FRAME_ROOM + head.len() + rest.len() + TAIL_ROOM;
        let mut buf = match self.free.pop() {
            Some(mut b) => {
                self.held_bytes -= b.capacity();
                self.counters.reused += 1;
                b.clear();
                if b.capacity() < len {
                    self.counters.grown += 1;
                    b.reserve(len);
                }
                b
            }
            None => {
                self.counters.made += 1;
                Vec::with_capacity(len)
            }
        };
        buf.resize(FRAME_ROOM, 0);
        buf.extend_from_slice(head);
        buf.extend_from_slice(rest);
        DownBody {
            buf,
            start: FRAME_ROOM as u32,
        }
    }

    /// Takes `buf` back (emptied) if it fits the bound, else frees it.
    pub fn give(&mut self, mut buf: Vec<u8>) {
        let cap = buf.capacity();
        if cap == 0 {
            return;
        }
        if self.held_bytes + cap > self.bytes_max {
            self.counters.freed += 1;
            return;
        }
        buf.clear();
        self.held_bytes += cap;
        self.free.push(buf);
        self.counters.kept += 1;
    }

    /// Buffers kept.
    pub fn len(&self) -> usize {
        self.free.len()
    }

    /// True when no buffer is kept.
    pub fn is_empty(&self) -> bool {
        self.free.is_empty()
    }

    /// Bytes of capacity kept (at most the bound).
    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    /// The counters.
    pub fn counters(&self) -> &DownPoolCounters {
        &self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pooled_body_reads_as_kind_and_payload_and_frames_in_place() {
        let mut pool = DownPool::new(1 << 16);
        let body = pool.body(DownKind::View, b"abc");
        assert_eq!(&*body, &[DownKind::View.byte(), b'a', b'b', b'c'][..]);
        assert_eq!(body.room(), FRAME_ROOM);
        let payload_at = body.as_ptr().wrapping_add(1);
        let head = [7u8; FRAME_ROOM + 1];
        let short = body.clone().into_frame(&head[1..]).expect_err("too short");
        assert_eq!(short, body, "given back unchanged");
        let frame = body.into_frame(&head).expect("fits");
        assert_eq!(&frame[..FRAME_ROOM + 1], &head[..]);
        assert_eq!(&frame[FRAME_ROOM + 1..], b"abc");
        assert_eq!(frame[FRAME_ROOM + 1..].as_ptr(), payload_at, "no copy");
        let plain = DownBody::with_kind(DownKind::Reply, b"x");
        assert_eq!(plain.room(), 0);
        assert!(
            plain.into_frame(&head).is_err(),
            "no room: the caller copies"
        );
    }

    /// A view batch carries an acknowledgement in its tail room and gives
    /// it back whole; no other kind carries one, and a body carries at
    /// most one.
    #[test]
    fn a_view_batch_carries_an_ack_in_its_tail_room_and_gives_it_back() {
        let mut pool = DownPool::new(1 << 16);
        for batch in [&b"abc"[..], &[][..]] {
            let mut body = pool.body(DownKind::View, batch);
            let (ptr, cap) = (body.buf.as_ptr(), body.buf.capacity());
            assert!(body.carry_ack(0x0102_0304_0506_0708));
            assert_eq!(body[0], DownKind::ViewAcked.byte());
            assert_eq!(
                super::super::split_ack(&body[1..]),
                Some((batch, 0x0102_0304_0506_0708))
            );
            assert_eq!(
                (body.buf.as_ptr(), body.buf.capacity()),
                (ptr, cap),
                "no reallocation"
            );
            assert!(!body.carry_ack(9), "one acknowledgement a body");
            assert_eq!(body.take_ack(), Some(0x0102_0304_0506_0708));
            assert_eq!(
                &body[..],
                &[&[DownKind::View.byte()][..], batch].concat()[..]
            );
            assert_eq!(body.take_ack(), None, "taken once");
        }
        for kind in DownKind::ALL.into_iter().filter(|&k| k != DownKind::View) {
            let mut body = pool.body(kind, b"xyz");
            let before = body.clone();
            assert!(!body.carry_ack(5), "{kind:?} carries no acknowledgement");
            assert_eq!(body, before);
        }
        // Too short to hold one: not taken (a corrupt body stays as it came).
        let mut short = DownBody::with_kind(DownKind::ViewAcked, &[1, 2, 3]);
        assert_eq!(short.take_ack(), None);
        assert_eq!(short[0], DownKind::ViewAcked.byte());
    }

    #[test]
    fn buffers_are_reused_and_the_bound_frees_the_rest() {
        let mut pool = DownPool::new(4096);
        // Warm-up: three bodies in flight at once, all given back.
        let bodies: Vec<DownBody> = (0..3)
            .map(|_| pool.body(DownKind::View, &[1; 500]))
            .collect();
        assert_eq!(pool.counters().made, 3);
        for b in bodies {
            pool.give(b.into_buffer());
        }
        assert_eq!(pool.len(), 3);
        // Steady state: every body reuses a buffer, none is allocated.
        let ptrs: Vec<*const u8> = pool.free.iter().map(|b| b.as_ptr()).collect();
        for round in 0..100u8 {
            let bodies: Vec<DownBody> = (0..3)
                .map(|i| pool.body(DownKind::View, &[round ^ i; 400]))
                .collect();
            for b in &bodies {
                let buf = b.as_ptr().wrapping_sub(FRAME_ROOM);
                assert!(ptrs.contains(&buf), "a pooled buffer");
            }
            for b in bodies {
                pool.give(b.into_buffer());
            }
        }
        let c = *pool.counters();
        assert_eq!((c.made, c.reused, c.grown, c.freed), (3, 300, 0, 0));
        // The bound: 4096 bytes of capacity; big buffers are freed.
        pool.give(vec![0; 3000]);
        assert_eq!(pool.counters().freed, 1);
        assert!(pool.held_bytes() <= 4096);
        let none = DownPool::new(0);
        let mut none2 = none.clone();
        none2.give(vec![0; 10]);
        assert!(none2.is_empty(), "a pool bounded at 0 keeps nothing");
    }

    #[test]
    fn a_corrupt_start_reads_as_empty() {
        let b = DownBody {
            buf: vec![1, 2],
            start: 9,
        };
        assert!(b.is_empty());
        assert!(b.into_frame(&[0; 3]).is_err());
    }
}
