//! A provided buffer ring for multishot receives: the buffers the kernel
//! picks from when a receive completes, registered with one io_uring as
//! one buffer group.
//!
//! Shared by the client port's io_uring backend (`gateway_uring`) and
//! loadgen's io_uring bot loop. Owns the ring's mapping and the buffers;
//! knows nothing of sockets or of what the bytes mean.
//!
//! # Use
//! Receives name the group (`opcode::RecvMulti::new(fd, bgid)`); a
//! completion's flags carry the buffer it filled
//! (`io_uring::cqueue::buffer_select`). Read it with [`BufRing::bytes`],
//! then [`BufRing::give_back`] it: a buffer not given back is lost to the
//! ring until it is dropped.
//!
//! # Lifetime
//! The kernel writes into the buffers until the io_uring is gone: drop the
//! io_uring first (its owner holds both; `gateway_uring::UringIo` and
//! loadgen's loop drop the ring by hand before the buffers).

use io_uring::types::BufRingEntry;
use io_uring::IoUring;
use std::io;
use std::sync::atomic::{AtomicU16, Ordering};

/// Why the buffer ring could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("{feature}: {source}")]
pub struct BufRingError {
    /// What was refused.
    pub feature: &'static str,
    /// What the kernel said.
    #[source]
    pub source: io::Error,
}

/// Provided buffers the kernel picks from for multishot receives.
#[derive(Debug)]
pub struct BufRing {
    base: *mut BufRingEntry,
    map_bytes: usize,
    entries: u16,
    buf_bytes: usize,
    bufs: Box<[u8]>,
    tail: u16,
}

impl BufRing {
    /// Maps a ring of `entries` buffers of `buf_bytes` each (page aligned),
    /// fills it with every buffer and registers it with `ring` as group
    /// `bgid`.
    ///
    /// # Panics
    /// If `entries` is not a power of two (the kernel's rule; callers
    /// validate their config) or `buf_bytes` is 0 or above `u32::MAX`.
    ///
    /// # Errors
    /// If the mapping or the registration is refused (Linux < 5.19, or
    /// io_uring blocked).
    pub fn new(
        ring: &IoUring,
        entries: u16,
        buf_bytes: usize,
        bgid: u16,
    ) -> Result<BufRing, BufRingError> {
        assert!(entries.is_power_of_two(), "a buffer ring of 2^k entries");
        assert!(
            buf_bytes > 0 && u32::try_from(buf_bytes).is_ok(),
            "a buffer of 1 to u32::MAX bytes"
        );
        let map_bytes = usize::from(entries) * std::mem::size_of::<BufRingEntry>();
        // SAFETY: an anonymous private mapping with no address hint; the
        // result is checked against MAP_FAILED before use.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(BufRingError {
                feature: "the provided buffer ring's memory",
                source: io::Error::last_os_error(),
            });
        }
        let mut br = BufRing {
            base: base.cast(),
            map_bytes,
            entries,
            buf_bytes,
            bufs: vec![0u8; usize::from(entries) * buf_bytes].into_boxed_slice(),
            tail: 0,
        };
        for bid in 0..entries {
            br.give_back(bid);
        }
        // SAFETY: `base` is a page-aligned mapping of `entries` entries that
        // lives as long as `br`, which its owner drops after the ring (see
        // the module doc); every entry points into `bufs`, which lives as
        // long.
        unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(base as u64, entries, bgid, 0)
        }
        .map_err(|source| BufRingError {
            feature: "a provided buffer ring (register_buf_ring)",
            source,
        })?;
        Ok(br)
    }

    /// The bytes of buffer `bid` a completion of `n` bytes filled.
    pub fn bytes(&self, bid: u16, n: usize) -> &[u8] {
        let at = usize::from(bid) * self.buf_bytes;
        &self.bufs[at..at + n.min(self.buf_bytes)]
    }

    /// The ring's buffers.
    pub fn entries(&self) -> u16 {
        self.entries
    }

    /// Puts buffer `bid` back at the ring's tail and publishes the tail.
    pub fn give_back(&mut self, bid: u16) {
        assert!(bid < self.entries, "buffer {bid} of {}", self.entries);
        let idx = usize::from(self.tail & (self.entries - 1));
        let addr = self.bufs.as_ptr() as u64 + u64::from(bid) * self.buf_bytes as u64;
        // SAFETY: `idx` < entries, inside the mapping; the kernel reads an
        // entry only below the published tail, and this one is at the tail.
        let e = unsafe { &mut *self.base.add(idx) };
        e.set_addr(addr);
        // `new` checked that a buffer's size fits.
        e.set_len(self.buf_bytes as u32);
        e.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
        // SAFETY: the tail is the u16 `resv` field of entry 0 of the mapping
        // (`BufRingEntry::tail`), 2-byte aligned; the kernel reads it
        // concurrently, hence the atomic release store after the entry.
        unsafe {
            let tail = BufRingEntry::tail(self.base) as *const AtomicU16;
            (*tail).store(self.tail, Ordering::Release);
        }
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: `base` and `map_bytes` are the mapping made in `new`; the
        // ring that used it is gone (see the module doc).
        unsafe { libc::munmap(self.base.cast(), self.map_bytes) };
    }
}
