//! Stand-ins for what a game server does besides its sockets, for the bare
//! servers: a working set of its own that every poll walks (game state
//! evicting the kernel's socket structures from the core's caches), and a
//! send buffer per client written every tick (each client's own data
//! instead of one hot buffer). Both off by default; they exist to find out
//! which of them makes the kernel's half of a send dearer (issue 21: the
//! same sends cost tessera's kernel part 1.2-1.7x the bare floor).
//!
//! Owns its memory only; no sockets.

use std::hint::black_box;

/// One cache line.
const LINE: usize = 64;
/// `u64`s per line.
const WORDS_PER_LINE: usize = LINE / std::mem::size_of::<u64>();

/// Memory the server walks every poll, one write per cache line.
#[derive(Debug, Default)]
pub struct WorkingSet {
    words: Vec<u64>,
}

impl WorkingSet {
    /// A working set of `bytes` (rounded down to whole lines; 0: none).
    pub fn new(bytes: usize) -> WorkingSet {
        WorkingSet {
            words: vec![0; bytes / LINE * WORDS_PER_LINE],
        }
    }

    /// Bytes walked per [`WorkingSet::walk`].
    pub fn bytes(&self) -> usize {
        self.words.len() * std::mem::size_of::<u64>()
    }

    /// Touches every line once (a read and a write), so each is in this
    /// core's caches afterwards, as a game's tick leaves its state.
    pub fn walk(&mut self) -> u64 {
        let mut sum = 0u64;
        for w in self.words.iter_mut().step_by(WORDS_PER_LINE) {
            *w = w.wrapping_add(1);
            sum = sum.wrapping_add(*w);
        }
        black_box(sum)
    }
}

/// A send buffer per client, rewritten every tick before it is sent.
#[derive(Debug, Default)]
pub struct OwnBuffers {
    bufs: Vec<Box<[u8]>>,
    len: usize,
}

impl OwnBuffers {
    /// `on`: each client gets its own buffer of `len` bytes; off: none
    /// (the server sends its one shared buffer).
    pub fn new(on: bool, len: usize) -> OwnBuffers {
        OwnBuffers {
            bufs: Vec::new(),
            len: if on { len } else { 0 },
        }
    }

    /// Whether clients have buffers of their own.
    pub fn on(&self) -> bool {
        self.len > 0
    }

    /// Client `i`'s buffer, filled with `tick`'s byte (allocated on first
    /// use; it stays at the same address for the server's life, so a send
    /// still in flight never points at freed memory).
    pub fn fill(&mut self, i: usize, tick: u64) -> &[u8] {
        debug_assert!(self.on());
        while self.bufs.len() <= i {
            self.bufs.push(vec![0u8; self.len].into_boxed_slice());
        }
        let b = &mut self.bufs[i];
        b.fill(tick as u8);
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_working_set_touches_every_line_each_walk() {
        let mut ws = WorkingSet::new(10 * LINE + 5);
        assert_eq!(ws.bytes(), 10 * LINE);
        assert_eq!(ws.walk(), 10);
        assert_eq!(ws.walk(), 20);
        assert_eq!(WorkingSet::new(0).walk(), 0);
    }

    #[test]
    fn own_buffers_are_per_client_and_stay_put() {
        let mut ob = OwnBuffers::new(true, 4);
        let first = ob.fill(3, 7).as_ptr();
        assert_eq!(ob.fill(3, 7), &[7, 7, 7, 7]);
        assert_eq!(ob.fill(0, 9), &[9; 4]);
        assert_eq!(
            ob.fill(3, 8).as_ptr(),
            first,
            "a client's buffer never moves"
        );
        assert!(!OwnBuffers::new(false, 4).on());
    }
}
