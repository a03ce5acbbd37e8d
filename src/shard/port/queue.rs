//! [`ByteQueue`]: one connection's inbound or outbound bytes, compacted in
//! place (no allocation per message once warm; a whole buffer handed over
//! to an empty queue is swapped in, not copied).
//!
//! Owns the bytes only; the bounds are enforced by the port.

/// A byte queue: `data[start..]` is pending.
#[derive(Debug, Default)]
pub(super) struct ByteQueue {
    data: Vec<u8>,
    start: usize,
}

/// Buffers above this capacity are released when their slot is freed.
const KEEP_CAPACITY_BYTES: usize = 16 * 1024;

impl ByteQueue {
    pub(super) fn pending(&self) -> &[u8] {
        &self.data[self.start..]
    }

    pub(super) fn len(&self) -> usize {
        self.data.len() - self.start
    }

    pub(super) fn push(&mut self, bytes: &[u8]) {
        if self.start > 0 && self.data.len() + bytes.len() > self.data.capacity() {
            self.data.drain(..self.start);
            self.start = 0;
        }
        self.data.extend_from_slice(bytes);
    }

    /// Takes `bytes`' contents, leaving it empty: an empty queue swaps
    /// buffers with it (no copy; `bytes` gets the queue's spare
    /// allocation back), else they are appended.
    pub(super) fn push_from(&mut self, bytes: &mut Vec<u8>) {
        if self.len() == 0 {
            self.data.clear();
            self.start = 0;
            std::mem::swap(&mut self.data, bytes);
        } else {
            self.push(bytes);
            bytes.clear();
        }
    }

    pub(super) fn advance(&mut self, n: usize) {
        self.start += n.min(self.len());
        if self.start == self.data.len() {
            self.data.clear();
            self.start = 0;
        }
    }

    pub(super) fn reset(&mut self) {
        if self.data.capacity() > KEEP_CAPACITY_BYTES {
            self.data = Vec::new();
        }
        self.data.clear();
        self.start = 0;
    }
}
