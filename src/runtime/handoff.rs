//! Client connections moving between the shards of one node.
//!
//! A login that lands on another shard than its account's avatar (whose
//! proxy cannot move: its shard is in the entity id) is served where the
//! avatar is: the receiving shard's application calls
//! [`crate::shard::ClientPort::hand_off`], its socket loop takes the socket out of
//! its epoll set or ring (io_uring: after the last completion of its
//! receive) and pushes it, with the bytes the application had not
//! consumed and the application's note, into the destination shard's queue
//! here; the destination's socket loop pops it at its next pump, registers
//! it and opens a port slot (`PortEvent::Adopted`).
//!
//! # Limits
//! One bounded lock-free queue per destination shard (crossbeam's
//! `ArrayQueue`, `gateway.handoffs_max`): a push to a full queue hands the
//! connection back and the sender closes it (counted as
//! `client_handoff_failed`). Hand-offs are rare (a login of an account that
//! is already on the node), and the tick path never touches these queues:
//! only a pump pops, with one atomic load when the queue is empty.
//!
//! # Ordering
//! FIFO per destination; a connection's bytes travel with it, so nothing it
//! sent is lost or reordered (the socket is read again only on the
//! destination).
//!
//! Owns the queues; it must not touch the port's slots or the application.

use crossbeam_queue::ArrayQueue;
use std::net::SocketAddr;

/// One connection on its way to another shard.
#[derive(Debug)]
pub(crate) struct Handoff {
    pub(crate) stream: mio::net::TcpStream,
    pub(crate) peer: SocketAddr,
    /// Received and not consumed by the sending shard's application.
    pub(crate) input: Vec<u8>,
    /// The sending application's note (see `PortEvent::Adopted`).
    pub(crate) note: Vec<u8>,
}

/// The hand-off queues of a node, one per destination shard.
#[derive(Debug)]
pub(crate) struct Handoffs {
    queues: Vec<ArrayQueue<Handoff>>,
}

impl Handoffs {
    /// Queues for `shards` shards, each holding at most `max`.
    pub(crate) fn new(shards: u16, max: usize) -> Handoffs {
        Handoffs {
            queues: (0..shards).map(|_| ArrayQueue::new(max.max(1))).collect(),
        }
    }

    /// Sends `h` to shard `to`.
    ///
    /// # Errors
    /// Gives `h` back if `to` is not a shard or its queue is full.
    pub(crate) fn push(&self, to: u16, h: Handoff) -> Result<(), Handoff> {
        match self.queues.get(usize::from(to)) {
            Some(q) => q.push(h),
            None => Err(h),
        }
    }

    /// The oldest connection waiting for shard `me`.
    pub(crate) fn pop(&self, me: u16) -> Option<Handoff> {
        self.queues.get(usize::from(me))?.pop()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn() -> Handoff {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        let s = std::net::TcpStream::connect(addr).expect("connect");
        Handoff {
            stream: mio::net::TcpStream::from_std(s),
            peer: addr,
            input: vec![1, 2],
            note: vec![3],
        }
    }

    #[test]
    fn a_full_queue_or_a_missing_shard_hands_the_connection_back() {
        let h = Handoffs::new(2, 1);
        h.push(1, conn()).expect("room");
        assert!(h.push(1, conn()).is_err(), "full");
        assert!(h.push(2, conn()).is_err(), "no shard 2");
        assert!(h.pop(0).is_none());
        let got = h.pop(1).expect("queued");
        assert_eq!((got.input, got.note), (vec![1, 2], vec![3]));
        assert!(h.pop(1).is_none());
    }
}
