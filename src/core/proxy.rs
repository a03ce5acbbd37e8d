//! [`Proxy`]: a client's anchor, sans-IO.
//!
//! Runs on the shard that accepted the client's connection and never moves
//! while the real migrates. It knows where the real is (a cell and an
//! *epoch*, the real's migration count, bumped on every migration: the newest
//! epoch wins, like BigWorld's channel version), stamps client inputs with
//! consecutive sequence numbers and routes them to the real's cell, and
//! delivers downstream data from the real to the client in the real's own
//! sequence order across migrations.
//!
//! # Exactly once, in order
//!
//! Inputs are numbered 1, 2, 3... here. The real applies them through a
//! bounded sequence buffer whose expected number travels in the `Onload`;
//! inputs sent to a cell the real has left are forwarded by that cell. So
//! whatever the number of migrations, each input is applied once, in order
//! (only an overflow of `input_buffer_max` at the real can lose one, and it
//! is counted).
//!
//! Downstream bodies are owned buffers ([`DownBody`]) that pass through
//! the proxy without a copy: one in order goes straight to the client
//! queue, one ahead of a gap is held (at most `downstream_buffer_max`), so
//! a held body keeps only its own buffer.
//!
//! Owns only the proxy's routing and sequencing state; must not touch cells.

use std::collections::VecDeque;

use crate::core::cell::{
    CellMsg, Input, Outgoing, ProxyMsg, SeqBuffer, SeqPush, ToReal, ToRealBody,
};
use crate::core::down::DownBody;
use crate::core::ids::{CellId, EntityId};
use crate::core::payload::Payload;
use crate::core::time::Time;

/// Bounds of a proxy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxyParams {
    /// Downstream messages held ahead of a gap. Default 256.
    pub downstream_buffer_max: usize,
}

impl Default for ProxyParams {
    fn default() -> Self {
        ProxyParams {
            downstream_buffer_max: 256,
        }
    }
}

/// Why a proxy refused an input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProxyError {
    /// The message is about another entity.
    #[error("message for entity {got} reached the proxy of {expected}")]
    WrongEntity {
        /// This proxy's entity.
        expected: EntityId,
        /// The message's entity.
        got: EntityId,
    },
    /// A bound is zero.
    #[error("proxy parameter `{0}` must be > 0")]
    Invalid(&'static str),
}

/// What a proxy counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProxyCounters {
    /// Inputs stamped and sent.
    pub inputs_sent: u64,
    /// Location updates taken (newer epoch).
    pub moves: u64,
    /// Location updates ignored (not newer).
    pub stale_moves: u64,
    /// Downstream messages delivered to the client.
    pub downstream_delivered: u64,
    /// Downstream duplicates dropped.
    pub downstream_duplicates: u64,
    /// Downstream sequence numbers given up on (buffer overflow).
    pub downstream_skipped: u64,
}

/// One client's anchor.
#[derive(Debug)]
pub struct Proxy {
    entity: EntityId,
    real_at: CellId,
    epoch: u64,
    next_input: u64,
    params: ProxyParams,
    downstream: SeqBuffer<DownBody>,
    out: VecDeque<Outgoing>,
    client: VecDeque<(u64, DownBody)>,
    counters: ProxyCounters,
    /// On its host's list of proxies given work ([`Proxy::list`]).
    listed: bool,
}

impl Proxy {
    /// A proxy for `entity`, whose real is at `real_at` with `epoch`.
    ///
    /// # Errors
    /// `Invalid` if a bound is zero.
    pub fn new(
        entity: EntityId,
        real_at: CellId,
        epoch: u64,
        params: ProxyParams,
    ) -> Result<Proxy, ProxyError> {
        if params.downstream_buffer_max == 0 {
            return Err(ProxyError::Invalid("downstream_buffer_max"));
        }
        Ok(Proxy {
            entity,
            real_at,
            epoch,
            next_input: 1,
            params,
            downstream: SeqBuffer::new(1),
            out: VecDeque::new(),
            client: VecDeque::new(),
            counters: ProxyCounters::default(),
            listed: false,
        })
    }

    /// The entity.
    pub fn entity(&self) -> EntityId {
        self.entity
    }

    /// Where the real is, as far as known.
    pub fn real_at(&self) -> CellId {
        self.real_at
    }

    /// The real's epoch there.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The sequence number the next input will get.
    pub fn next_input(&self) -> u64 {
        self.next_input
    }

    /// The counters.
    pub fn counters(&self) -> &ProxyCounters {
        &self.counters
    }

    /// Stamps a client input with the next sequence number and routes it to
    /// the real's cell; returns the number.
    pub fn send_input(&mut self, _now: Time, data: Payload) -> u64 {
        let seq = self.next_input;
        self.next_input += 1;
        let msg = ToReal {
            entity: self.entity,
            hops: 0,
            body: ToRealBody::Input(Input { seq, data }),
        };
        self.out
            .push_back(Outgoing::cell(self.real_at, CellMsg::ToReal(msg)));
        self.counters.inputs_sent += 1;
        seq
    }

    /// The client left: sends a destroy to the real on the inputs' path
    /// (after every input sent so far, forwarded like them if the real
    /// moved). The proxy should be dropped after its output is drained.
    pub fn send_destroy(&mut self, _now: Time) {
        let msg = ToReal {
            entity: self.entity,
            hops: 0,
            body: ToRealBody::Destroy,
        };
        self.out
            .push_back(Outgoing::cell(self.real_at, CellMsg::ToReal(msg)));
    }

    /// Feeds a message from a cell.
    ///
    /// # Errors
    /// `WrongEntity` if it is about another entity (the message is ignored).
    pub fn handle(&mut self, _now: Time, msg: ProxyMsg) -> Result<(), ProxyError> {
        match msg {
            ProxyMsg::RealMoved {
                entity,
                cell,
                epoch,
            } => {
                self.check_entity(entity)?;
                self.learn(cell, epoch);
            }
            ProxyMsg::Downstream {
                entity,
                cell,
                epoch,
                seq,
                data,
            } => {
                self.check_entity(entity)?;
                self.learn(cell, epoch);
                self.downstream(seq, data);
            }
        }
        Ok(())
    }

    /// The next message to ship to a cell.
    pub fn poll_output(&mut self) -> Option<Outgoing> {
        self.out.pop_front()
    }

    /// True when nothing waits for [`Proxy::poll_output`].
    pub fn output_is_empty(&self) -> bool {
        self.out.is_empty()
    }

    /// Marks the proxy as on its host's list of proxies given work; true
    /// if it was not yet (the host lists it then: each proxy once, so the
    /// list needs no sort or dedup). Host bookkeeping only: nothing here
    /// reads it.
    pub fn list(&mut self) -> bool {
        !std::mem::replace(&mut self.listed, true)
    }

    /// Off its host's list (the host took its work).
    pub fn unlist(&mut self) {
        self.listed = false;
    }

    /// True when nothing waits for [`Proxy::poll_client`].
    pub fn client_is_empty(&self) -> bool {
        self.client.is_empty()
    }

    /// The next downstream message for the client, with its sequence number.
    pub fn poll_client(&mut self) -> Option<(u64, DownBody)> {
        self.client.pop_front()
    }

    fn check_entity(&self, got: EntityId) -> Result<(), ProxyError> {
        if got == self.entity {
            Ok(())
        } else {
            Err(ProxyError::WrongEntity {
                expected: self.entity,
                got,
            })
        }
    }

    fn learn(&mut self, cell: CellId, epoch: u64) {
        if epoch > self.epoch {
            self.real_at = cell;
            self.epoch = epoch;
            self.counters.moves += 1;
        } else if epoch < self.epoch || cell != self.real_at {
            self.counters.stale_moves += 1;
        }
    }

    fn downstream(&mut self, seq: u64, data: DownBody) {
        // In order with nothing held (the usual case): straight through.
        if self.downstream.pass_next(seq) {
            self.counters.downstream_delivered += 1;
            self.client.push_back((seq, data));
            return;
        }
        let max = self.params.downstream_buffer_max;
        match self.downstream.try_push(seq, data, max) {
            Ok(SeqPush::Held | SeqPush::Full) => {}
            Ok(SeqPush::Duplicate) => self.counters.downstream_duplicates += 1,
            Err(data) => {
                self.counters.downstream_skipped += self.downstream.skip_gap();
                let _ = self.downstream.push(seq, data, max.saturating_mul(2));
            }
        }
        while let Some(item) = self.downstream.pop_ready() {
            self.counters.downstream_delivered += 1;
            self.client.push_back(item);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::cell::{Dest, Msg};

    fn proxy() -> Proxy {
        Proxy::new(EntityId(7), CellId(1), 0, ProxyParams::default()).expect("proxy")
    }

    fn input_target(p: &mut Proxy) -> (Dest, u64) {
        let o = p.poll_output().expect("output");
        let Msg::Cell(CellMsg::ToReal(ToReal {
            body: ToRealBody::Input(i),
            ..
        })) = o.msg
        else {
            panic!("not an input: {o:?}");
        };
        (o.to, i.seq)
    }

    /// A host lists a proxy once until it takes its work (fails if `list`
    /// says yes twice, or `unlist` does not clear the mark).
    #[test]
    fn a_proxy_is_listed_once_until_unlisted() {
        let mut p = proxy();
        assert!(p.list(), "first mark");
        assert!(!p.list(), "already listed");
        p.unlist();
        assert!(p.list(), "listed again after its work was taken");
    }

    #[test]
    fn inputs_are_numbered_and_follow_the_newest_epoch() {
        let mut p = proxy();
        p.send_input(Time::ZERO, (&b"a"[..]).into());
        assert_eq!(input_target(&mut p), (Dest::Cell(CellId(1)), 1));
        let moved = |cell, epoch| ProxyMsg::RealMoved {
            entity: EntityId(7),
            cell: CellId(cell),
            epoch,
        };
        p.handle(Time::ZERO, moved(3, 2)).expect("ok");
        p.handle(Time::ZERO, moved(2, 1)).expect("stale is fine");
        p.send_input(Time::ZERO, (&b"b"[..]).into());
        assert_eq!(input_target(&mut p), (Dest::Cell(CellId(3)), 2));
        assert_eq!(p.counters().moves, 1);
        assert_eq!(p.counters().stale_moves, 1);
    }

    #[test]
    fn downstream_is_delivered_in_order_once() {
        let mut p = proxy();
        let down = |cell, epoch, seq: u64| ProxyMsg::Downstream {
            entity: EntityId(7),
            cell: CellId(cell),
            epoch,
            seq,
            data: DownBody::from(vec![seq as u8]),
        };
        for (c, e, s) in [(2, 1, 3), (1, 0, 1), (1, 0, 1), (2, 1, 4), (1, 0, 2)] {
            p.handle(Time::ZERO, down(c, e, s)).expect("ok");
        }
        let got: Vec<u64> = std::iter::from_fn(|| p.poll_client())
            .map(|(s, _)| s)
            .collect();
        assert_eq!(got, vec![1, 2, 3, 4]);
        assert_eq!(p.real_at(), CellId(2));
        assert_eq!(p.counters().downstream_duplicates, 1);
    }

    #[test]
    fn wrong_entity_is_an_error() {
        let mut p = proxy();
        let m = ProxyMsg::RealMoved {
            entity: EntityId(8),
            cell: CellId(1),
            epoch: 9,
        };
        assert!(matches!(
            p.handle(Time::ZERO, m),
            Err(ProxyError::WrongEntity { .. })
        ));
        assert_eq!(p.epoch(), 0);
    }
}
