//! The small deterministic network shared by the cell tests
//! (`cell_protocol`, `cell_views`): a seeded SplitMix64 RNG and one FIFO
//! queue per ordered pair of nodes (shards, and one node for all proxies)
//! with random delays and rare spikes, so messages between two shards keep
//! their order and messages on different pairs do not.

#![allow(dead_code)]

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use tessera::core::cell::{CellMsg, Dest, Msg, Outgoing, Source};
use tessera::core::ids::{CellId, EntityId};
use tessera::core::time::Time;

/// SplitMix64: small, seeded, deterministic.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Node {
    Shard(u32),
    Proxies,
}

pub struct Packet {
    pub at: Time,
    pub from: Source,
    pub to: Dest,
    pub msg: Msg,
}

pub struct Net {
    pub shards: u32,
    pub queues: BTreeMap<(Node, Node), VecDeque<Packet>>,
    pub delay_us: (u64, u64),
    pub spike: (f64, u64),
}

impl Net {
    pub fn node_of_cell(&self, c: CellId) -> Node {
        Node::Shard(c.0 % self.shards)
    }

    pub fn node_of(&self, d: Dest) -> Node {
        match d {
            Dest::Cell(c) => self.node_of_cell(c),
            Dest::Proxy(_) => Node::Proxies,
        }
    }

    pub fn send(&mut self, rng: &mut Rng, now: Time, from: Source, o: Outgoing) {
        let from_node = match from {
            Source::Cell(c) => self.node_of_cell(c),
            Source::Proxy(_) | Source::Local => Node::Proxies,
        };
        let to_node = self.node_of(o.to);
        let (lo, hi) = self.delay_us;
        let mut d = lo + rng.below(hi - lo + 1);
        if rng.chance(self.spike.0) {
            d += self.spike.1;
        }
        let q = self.queues.entry((from_node, to_node)).or_default();
        let mut at = now + Duration::from_micros(d);
        if let Some(last) = q.back() {
            at = at.max(last.at); // FIFO per ordered pair
        }
        q.push_back(Packet {
            at,
            from,
            to: o.to,
            msg: o.msg,
        });
    }

    pub fn due(&mut self, now: Time) -> Vec<Packet> {
        let mut out = Vec::new();
        for q in self.queues.values_mut() {
            while q.front().is_some_and(|p| p.at <= now) {
                out.push(q.pop_front().expect("front"));
            }
        }
        out
    }

    pub fn onloads_in_flight(&self, e: EntityId) -> usize {
        self.queues
            .values()
            .flatten()
            .filter(|p| matches!(&p.msg, Msg::Cell(CellMsg::Onload(o)) if o.entity == e))
            .count()
    }

    pub fn is_empty(&self) -> bool {
        self.queues.values().all(|q| q.is_empty())
    }
}
