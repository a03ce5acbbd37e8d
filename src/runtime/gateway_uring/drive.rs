//! Driving one io_uring connection: what a pump queues for it (sends,
//! receives, cancels) and what its completions do.
//!
//! Runs on the shard's thread, inside a pump; owns nothing of its own.

use super::{errno_reason, more, peer_of, shut_write, Conn, Socket, UringIo, CANCEL, RECV, SEND};
use crate::runtime::handoff::Handoff;
use crate::shard::port::{ClientPort, CloseReason, SlotState};
use io_uring::types::{Fd, Fixed};
use io_uring::{cqueue, opcode};
use std::time::Instant;

impl UringIo {
    /// Drives one connection as its port state asks (queues its operations
    /// for this pump's enter).
    pub(super) fn drive(&mut self, port: &mut ClientPort, index: u32, now: Instant) {
        let Some(Some(conn)) = self.conns.get_mut(index as usize) else {
            return;
        };
        if conn.ending {
            return; // waiting for its last completions
        }
        match port.io_state(index) {
            SlotState::Open => {
                self.flush(port, index);
                self.feed(port, index);
            }
            SlotState::Lingering => self.linger(port, index, now),
            SlotState::HandingOff | SlotState::Done | SlotState::Free => self.end(port, index),
        }
    }

    /// Open: moves spilled input into the port while there is room, and
    /// arms the receive once nothing waits in the spill.
    fn feed(&mut self, port: &mut ClientPort, index: u32) {
        let Some(Some(conn)) = self.conns.get_mut(index as usize) else {
            return;
        };
        while !conn.spill.is_empty() {
            let take = port.io_read_room(index).min(conn.spill.len());
            if take == 0 {
                return; // still paused: the next consume makes it due
            }
            port.io_received(index, &conn.spill[..take]);
            conn.spill.drain(..take);
        }
        if !conn.recv_armed && !conn.read_eof && port.io_read_room(index) > 0 {
            self.arm_recv(index);
        }
    }

    fn arm_recv(&mut self, index: u32) {
        let Some(socket) = self.socket(index) else {
            return;
        };
        let Some(Some(conn)) = self.conns.get_mut(index as usize) else {
            return;
        };
        conn.recv_armed = true;
        conn.recv_cancelled = false;
        let recv = match socket {
            Socket::Fixed(i) => opcode::RecvMulti::new(Fixed(i), super::BGID),
            Socket::Fd(fd) => opcode::RecvMulti::new(Fd(fd), super::BGID),
        };
        let e = recv.build().user_data(RECV | u64::from(index));
        // SAFETY: a receive refers only to the provided buffers, which live
        // until the ring is gone.
        unsafe { self.push(&e) };
    }

    /// Cancels the connection's receive (once).
    fn cancel_recv(&mut self, index: u32) {
        let Some(Some(conn)) = self.conns.get_mut(index as usize) else {
            return;
        };
        if !conn.recv_armed || conn.recv_cancelled {
            return;
        }
        conn.recv_cancelled = true;
        let e = opcode::AsyncCancel::new(RECV | u64::from(index))
            .build()
            .user_data(CANCEL | u64::from(index));
        // SAFETY: a cancel refers to no buffer.
        unsafe { self.push(&e) };
    }

    /// Sends everything queued, unless a send is in flight (its completion
    /// sends the rest).
    fn flush(&mut self, port: &mut ClientPort, index: u32) {
        let Some(socket) = self.socket(index) else {
            return;
        };
        let Some(Some(conn)) = self.conns.get_mut(index as usize) else {
            return;
        };
        let pending = port.io_pending_output(index);
        if conn.sending || pending.is_empty() {
            return;
        }
        conn.out.clear();
        conn.out.extend_from_slice(pending);
        conn.sending = true;
        let len = u32::try_from(conn.out.len()).unwrap_or(u32::MAX);
        let send = match socket {
            Socket::Fixed(i) => opcode::Send::new(Fixed(i), conn.out.as_ptr(), len),
            Socket::Fd(fd) => opcode::Send::new(Fd(fd), conn.out.as_ptr(), len),
        };
        let e = send
            .flags(libc::MSG_NOSIGNAL)
            .build()
            .user_data(SEND | u64::from(index));
        // SAFETY: `out` is neither written nor freed while `sending` (flush
        // returns above, `finish` waits for the completion, Drop leaks it if
        // the ring closes with the send in flight).
        unsafe { self.push(&e) };
    }

    /// Lingering: flush, shut the write side, drain input until EOF, all
    /// before the deadline.
    fn linger(&mut self, port: &mut ClientPort, index: u32, now: Instant) {
        let linger = self.linger;
        let Some(Some(conn)) = self.conns.get_mut(index as usize) else {
            return;
        };
        conn.spill.clear();
        if conn.linger_until.is_none() {
            conn.linger_until = Some(now + linger);
            self.lingering.push(index);
        }
        let until = conn.linger_until.unwrap_or(now);
        if now >= until || conn.read_eof {
            return self.end(port, index);
        }
        self.flush(port, index);
        let Some(Some(conn)) = self.conns.get_mut(index as usize) else {
            return;
        };
        if conn.sending || !port.io_pending_output(index).is_empty() {
            return; // the send's completion brings it back
        }
        if !conn.write_shut {
            conn.write_shut = true;
            if shut_write(&conn.stream).is_err() {
                return self.end(port, index);
            }
        }
        if !conn.recv_armed {
            self.arm_recv(index);
        }
    }

    /// The connection is over: cancels what is in flight; the socket closes
    /// (or moves) once the last completion is in.
    pub(super) fn end(&mut self, port: &mut ClientPort, index: u32) {
        let Some(Some(conn)) = self.conns.get_mut(index as usize) else {
            return;
        };
        conn.ending = true;
        let sending = conn.sending;
        if sending {
            let e = opcode::AsyncCancel::new(SEND | u64::from(index))
                .build()
                .user_data(CANCEL | u64::from(index));
            // SAFETY: a cancel refers to no buffer.
            unsafe { self.push(&e) };
        }
        self.cancel_recv(index);
        if self.conns[index as usize]
            .as_ref()
            .is_some_and(|c| !c.busy())
        {
            self.finish(port, index);
        }
    }

    /// Nothing of the connection is in flight any more: clears its file
    /// table entry, then closes its socket and releases the slot, or hands
    /// it over.
    pub(super) fn finish(&mut self, port: &mut ClientPort, index: u32) {
        let Some(conn) = self.conns[index as usize].take() else {
            return;
        };
        debug_assert!(!conn.busy());
        // Before the socket closes (the table's reference would keep it
        // open: no FIN) or moves, and before the slot can be reused.
        self.unregister_file(index);
        if port.io_state(index) == SlotState::HandingOff {
            return self.hand_over(port, index, conn);
        }
        drop(conn);
        port.io_release(index);
    }

    /// Moves a handed-off connection's socket and unread input (the port's,
    /// then the spill) to its destination shard's queue (a full queue: the
    /// socket is closed, counted), then frees the slot.
    fn hand_over(&mut self, port: &mut ClientPort, index: u32, conn: Conn) {
        let taken = port.io_take_handoff(index);
        let moved = match (taken, peer_of(&conn.stream)) {
            (Some((to, note, mut input)), Some(peer)) => {
                input.extend_from_slice(&conn.spill);
                let h = Handoff {
                    stream: mio::net::TcpStream::from_std(conn.stream),
                    peer,
                    input,
                    note,
                };
                self.handoffs.push(to, h).is_ok()
            }
            _ => false,
        };
        port.io_handed_off(moved);
        port.io_release(index);
    }

    /// A receive's completion: bytes to the port (or the spill), EOF, an
    /// error, or the end of the multishot receive.
    pub(super) fn received(&mut self, port: &mut ClientPort, index: u32, res: i32, flags: u32) {
        let bid = cqueue::buffer_select(flags);
        let Some(Some(conn)) = self.conns.get_mut(index as usize) else {
            debug_assert!(
                false,
                "a receive completed for a connection with none armed"
            );
            if let Some(bid) = bid {
                self.bufs.give_back(bid);
            }
            return;
        };
        if !more(flags) {
            conn.recv_armed = false;
            conn.recv_cancelled = false;
        }
        let state = port.io_state(index);
        if res > 0 {
            let n = res as usize;
            if let Some(bid) = bid {
                let bytes = self.bufs.bytes(bid, n);
                match state {
                    SlotState::Open if conn.spill.is_empty() => {
                        let mut rest = bytes;
                        while !rest.is_empty() {
                            let take = port.io_read_room(index).min(rest.len());
                            if take == 0 {
                                break; // paused: io_read_room marked it
                            }
                            port.io_received(index, &rest[..take]);
                            rest = &rest[take..];
                        }
                        conn.spill.extend_from_slice(rest);
                    }
                    SlotState::Open | SlotState::HandingOff => conn.spill.extend_from_slice(bytes),
                    _ => {} // lingering: read and discarded
                }
                self.bufs.give_back(bid);
            }
        } else {
            if res == 0 {
                conn.read_eof = true;
            }
            // A kernel that picked a buffer for an empty or failed receive
            // (current ones recycle it themselves and set no flag): back in
            // the ring, or the ring would shrink by one per such completion.
            if let Some(bid) = bid {
                self.bufs.give_back(bid);
            }
        }
        let (armed, spilled, ending) = (conn.recv_armed, !conn.spill.is_empty(), conn.ending);
        if ending {
            return;
        }
        if res == 0 || (res < 0 && res != -libc::ENOBUFS && res != -libc::ECANCELED) {
            let reason = match res {
                0 => CloseReason::PeerClosed,
                e => errno_reason(e),
            };
            port.io_failed(index, reason);
            return self.end(port, index);
        }
        if state == SlotState::Open && spilled {
            // Back-pressure: the port is full; the consume that makes room
            // makes the slot due (io_read_room marked the reader paused).
            debug_assert_eq!(port.io_read_room(index), 0);
            self.cancel_recv(index);
        } else if !armed {
            self.work.push(index); // out of buffers, or ended: re-armed next pump
        }
    }

    /// A send's completion: bytes written; the rest (and what the app queued
    /// meanwhile) goes in the next pump.
    pub(super) fn sent(&mut self, port: &mut ClientPort, index: u32, res: i32) {
        let Some(Some(conn)) = self.conns.get_mut(index as usize) else {
            debug_assert!(
                false,
                "a send completed for a connection with none in flight"
            );
            return;
        };
        conn.sending = false;
        if res > 0 {
            port.io_wrote(index, res as usize);
        }
        if conn.ending {
            return;
        }
        match res {
            n if n > 0 => {
                if !port.io_pending_output(index).is_empty()
                    || port.io_state(index) != SlotState::Open
                {
                    self.work.push(index);
                }
            }
            e if e == -libc::EAGAIN || e == -libc::EINTR || e == -libc::ECANCELED => {
                self.work.push(index);
            }
            0 => {
                port.io_failed(index, CloseReason::PeerClosed);
                self.end(port, index);
            }
            e => {
                port.io_failed(index, errno_reason(e));
                self.end(port, index);
            }
        }
    }
}
