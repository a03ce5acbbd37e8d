//! The simulated network: one bounded FIFO link per ordered pair of endpoints.
//!
//! # Model
//!
//! Every message gets a latency drawn from a [`LatencyModel`]: a uniform base
//! in `min_us..=max_us`, a fixed skew per ordered pair (drawn when the pair is
//! first used), and with probability `burst_probability` an extra burst delay.
//! The runtime's queues are FIFO per ordered pair, so the network keeps that:
//! a message's due time is `max(now + latency, due time of the previous
//! message on the same pair)`, and each pair is a queue whose head alone is
//! scheduled, so no later message can overtake an earlier one.
//!
//! A *stalled* endpoint receives nothing until its stall ends (messages to it
//! are held, FIFO kept) and the world skips its ticks ([`Net::is_stalled`]).
//!
//! # Contract
//!
//! - `send(now, ..)` with a non-decreasing `now`; `poll_delivery(now)` returns
//!   every message due by `now` in `(due time, global send sequence)` order.
//! - Each link holds at most `in_flight_per_pair_max` messages; a send beyond
//!   it hands the message back as [`SendError::Full`] so the caller counts it.
//!
//! Owns only messages in flight and its own RNG fork; never looks inside a
//! message, never reads a clock. Generic over the endpoint (`A`) so the same
//! network carries shard-to-shard and shard-to-client traffic ([`Endpoint`]).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::fmt;

use crate::core::ids::ShardId;
use crate::core::time::Time;
use crate::sim::options::OptionsError;
use crate::sim::rng::Rng;

/// How long messages take. All values in microseconds.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct LatencyModel {
    /// Smallest base latency.
    pub min_us: u64,
    /// Largest base latency (`>= min_us`).
    pub max_us: u64,
    /// Largest fixed extra latency of one ordered pair (0 = all pairs alike).
    pub pair_skew_us_max: u64,
    /// Chance in `[0, 1]` that one message gets a burst of extra delay.
    pub burst_probability: f64,
    /// Largest burst delay (drawn uniformly in `1..=burst_us_max`).
    pub burst_us_max: u64,
}

impl Default for LatencyModel {
    /// 0.2-2 ms like a busy host's queues, up to 0.5 ms skew per pair, and a
    /// 1% chance of up to 50 ms extra (a descheduled thread, a GC-like pause).
    fn default() -> Self {
        LatencyModel {
            min_us: 200,
            max_us: 2_000,
            pair_skew_us_max: 500,
            burst_probability: 0.01,
            burst_us_max: 50_000,
        }
    }
}

/// Upper bound on any configured latency component: one minute.
pub const LATENCY_US_LIMIT: u64 = 60_000_000;

impl LatencyModel {
    /// Checks the model.
    ///
    /// # Errors
    /// [`OptionsError::Invalid`] naming the field (`latency.min_us`, ...).
    pub fn validate(&self) -> Result<(), OptionsError> {
        let bad = |field, reason: String| Err(OptionsError::Invalid { field, reason });
        if self.min_us > self.max_us {
            return bad(
                "latency.min_us",
                format!("{} > max_us {}", self.min_us, self.max_us),
            );
        }
        for (field, v) in [
            ("latency.max_us", self.max_us),
            ("latency.pair_skew_us_max", self.pair_skew_us_max),
            ("latency.burst_us_max", self.burst_us_max),
        ] {
            if v > LATENCY_US_LIMIT {
                return bad(field, format!("{v} exceeds {LATENCY_US_LIMIT}"));
            }
        }
        let p = self.burst_probability;
        if !(0.0..=1.0).contains(&p) {
            return bad("latency.burst_probability", format!("{p} not in [0, 1]"));
        }
        if p > 0.0 && self.burst_us_max == 0 {
            return bad("latency.burst_us_max", "0 with bursts enabled".into());
        }
        Ok(())
    }

    /// One message's latency (without the pair skew); `true` if it burst.
    pub fn draw(&self, rng: &mut Rng) -> (u64, bool) {
        let base = rng.range(self.min_us, self.max_us);
        if self.burst_probability > 0.0 && rng.bool(self.burst_probability) {
            (base + rng.range(1, self.burst_us_max), true)
        } else {
            (base, false)
        }
    }
}

/// The network's limits and latency.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NetParams {
    /// Latency drawn per message.
    pub latency: LatencyModel,
    /// Most messages in flight on one ordered pair (the runtime's bounded
    /// per-pair queue).
    pub in_flight_per_pair_max: usize,
}

impl Default for NetParams {
    /// 4096 messages per ordered pair, like the runtime's shard queues.
    fn default() -> Self {
        NetParams {
            latency: LatencyModel::default(),
            in_flight_per_pair_max: 4_096,
        }
    }
}

impl NetParams {
    /// Checks the parameters.
    ///
    /// # Errors
    /// [`OptionsError::Invalid`] naming the field.
    pub fn validate(&self) -> Result<(), OptionsError> {
        self.latency.validate()?;
        if self.in_flight_per_pair_max == 0 {
            return Err(OptionsError::Invalid {
                field: "in_flight_per_pair_max",
                reason: "must be at least 1".into(),
            });
        }
        Ok(())
    }
}

/// A send the network refused; the message is handed back.
#[derive(thiserror::Error, PartialEq, Eq)]
pub enum SendError<M> {
    /// The ordered pair already holds `in_flight_per_pair_max` messages.
    #[error("link full: in_flight_per_pair_max reached")]
    Full(M),
}

impl<M> fmt::Debug for SendError<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::Full(_) => f.write_str("Full(..)"),
        }
    }
}

impl<M> SendError<M> {
    /// The refused message.
    pub fn into_inner(self) -> M {
        match self {
            SendError::Full(m) => m,
        }
    }
}

/// An endpoint of the simulated network: a shard, or a client attached to
/// its proxy's shard (clients are numbered by the world).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Endpoint {
    /// A shard (its cells, its proxy).
    Shard(ShardId),
    /// A simulated client connection.
    Client(u32),
}

/// A message handed to its destination.
#[derive(Clone, Debug, PartialEq)]
pub struct Delivery<A, M> {
    /// Sender.
    pub from: A,
    /// Receiver.
    pub to: A,
    /// Global send sequence number (unique, increasing in send order).
    pub seq: u64,
    /// When it was sent.
    pub sent_at: Time,
    /// When it is delivered (its due time, or the end of a stall).
    pub delivered_at: Time,
    /// The message.
    pub msg: M,
}

/// What the network has done so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct NetStats {
    /// Messages accepted by `send`.
    pub sent: u64,
    /// Messages handed out by `poll_delivery`.
    pub delivered: u64,
    /// Sends refused with [`SendError::Full`].
    pub rejected_full: u64,
    /// Messages that got a burst delay.
    pub bursts: u64,
    /// Messages delivered later than due because their receiver was stalled.
    pub held_by_stall: u64,
    /// Most messages in flight at once, all pairs.
    pub max_in_flight: u64,
    /// Most messages in flight at once on one pair.
    pub max_in_flight_pair: u64,
    /// Longest send-to-delivery time seen, microseconds.
    pub max_delay_us: u64,
}

struct InFlight<M> {
    seq: u64,
    sent_at: Time,
    due: Time,
    msg: M,
}

struct Link<A, M> {
    from: A,
    to: A,
    skew_us: u64,
    last_due: Time,
    queue: VecDeque<InFlight<M>>,
}

/// The scheduled head of one link: ordered by (time, seq).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Head {
    at: Time,
    seq: u64,
    link: u32,
}

/// A deterministic simulated network over endpoints `A` carrying `M`.
pub struct Net<A, M> {
    params: NetParams,
    rng: Rng,
    links: Vec<Link<A, M>>,
    link_of: BTreeMap<(A, A), u32>,
    heads: BinaryHeap<Reverse<Head>>,
    stalls: BTreeMap<A, Time>,
    next_seq: u64,
    in_flight: u64,
    stats: NetStats,
}

impl<A: Ord + Copy + fmt::Debug, M> Net<A, M> {
    /// An empty network drawing latencies from `rng` (give it a fork).
    ///
    /// # Errors
    /// [`OptionsError::Invalid`] if `params` do not validate.
    pub fn new(params: NetParams, rng: Rng) -> Result<Self, OptionsError> {
        params.validate()?;
        Ok(Net {
            params,
            rng,
            links: Vec::new(),
            link_of: BTreeMap::new(),
            heads: BinaryHeap::new(),
            stalls: BTreeMap::new(),
            next_seq: 0,
            in_flight: 0,
            stats: NetStats::default(),
        })
    }

    /// Sends `msg` from `from` to `to` at `now`.
    ///
    /// # Errors
    /// [`SendError::Full`] (with the message) if the link holds
    /// `in_flight_per_pair_max` messages; nothing is drawn from the RNG then.
    ///
    /// # Ordering
    /// Delivered after every earlier message on the same ordered pair.
    pub fn send(&mut self, now: Time, from: A, to: A, msg: M) -> Result<(), SendError<M>> {
        let link = self.link(from, to);
        let l = &self.links[link as usize];
        if l.queue.len() >= self.params.in_flight_per_pair_max {
            self.stats.rejected_full += 1;
            return Err(SendError::Full(msg));
        }
        let (latency_us, burst) = self.params.latency.draw(&mut self.rng);
        self.stats.bursts += u64::from(burst);
        let seq = self.next_seq;
        self.next_seq += 1;
        let stall_end = self.stall_end(to);
        let l = &mut self.links[link as usize];
        let drawn = Time(now.0.saturating_add(latency_us + l.skew_us));
        let due = drawn.max(l.last_due);
        l.last_due = due;
        let was_empty = l.queue.is_empty();
        l.queue.push_back(InFlight {
            seq,
            sent_at: now,
            due,
            msg,
        });
        let pair_len = l.queue.len() as u64;
        if was_empty {
            self.heads.push(Reverse(Head {
                at: due.max(stall_end),
                seq,
                link,
            }));
        }
        self.in_flight += 1;
        self.stats.sent += 1;
        self.stats.max_in_flight = self.stats.max_in_flight.max(self.in_flight);
        self.stats.max_in_flight_pair = self.stats.max_in_flight_pair.max(pair_len);
        Ok(())
    }

    /// The next message due by `now`, if any.
    ///
    /// # Ordering
    /// Non-decreasing delivery time; ties in send order; FIFO per ordered pair.
    pub fn poll_delivery(&mut self, now: Time) -> Option<Delivery<A, M>> {
        let Reverse(head) = *self.heads.peek()?;
        if head.at > now {
            return None;
        }
        self.heads.pop();
        let stall_end = self.stall_end(self.links[head.link as usize].to);
        let l = &mut self.links[head.link as usize];
        let m = l.queue.pop_front().expect("a scheduled link has a head");
        assert_eq!(m.seq, head.seq, "link head out of sync with its queue");
        debug_assert!(head.at >= m.due && head.at >= stall_end);
        if let Some(next) = l.queue.front() {
            let at = next.due.max(stall_end);
            debug_assert!(at >= head.at, "FIFO: next head due no earlier");
            let link = head.link;
            self.heads.push(Reverse(Head {
                at,
                seq: next.seq,
                link,
            }));
        }
        let (from, to) = (l.from, l.to);
        self.in_flight -= 1;
        self.stats.delivered += 1;
        self.stats.held_by_stall += u64::from(head.at > m.due);
        let delay_us = head.at.0 - m.sent_at.0;
        self.stats.max_delay_us = self.stats.max_delay_us.max(delay_us);
        Some(Delivery {
            from,
            to,
            seq: m.seq,
            sent_at: m.sent_at,
            delivered_at: head.at,
            msg: m.msg,
        })
    }

    /// When the next message becomes deliverable (stalls accounted for).
    pub fn next_delivery_time(&self) -> Option<Time> {
        self.heads.peek().map(|Reverse(h)| h.at)
    }

    /// Stalls `endpoint` until `until` (a stall is never shortened): messages
    /// to it are held, FIFO kept, until then. Call after draining deliveries
    /// due by the current time, or they are held too.
    pub fn stall(&mut self, endpoint: A, until: Time) {
        let end = self.stalls.entry(endpoint).or_insert(Time::ZERO);
        if until <= *end {
            return;
        }
        *end = until;
        // Re-key the scheduled heads of links into `endpoint`. Stalls are rare
        // and there is at most one head per link, so rebuilding is cheap.
        let mut heads = std::mem::take(&mut self.heads).into_vec();
        for Reverse(h) in &mut heads {
            if self.links[h.link as usize].to == endpoint {
                h.at = h.at.max(until);
            }
        }
        self.heads = BinaryHeap::from(heads);
    }

    /// True if `endpoint` is stalled at `now` (the world skips its tick).
    pub fn is_stalled(&self, endpoint: A, now: Time) -> bool {
        self.stall_end(endpoint) > now
    }

    /// Messages in flight, all links.
    pub fn in_flight(&self) -> u64 {
        self.in_flight
    }

    /// Messages in flight from `from` to `to`.
    pub fn in_flight_between(&self, from: A, to: A) -> usize {
        self.link_of
            .get(&(from, to))
            .map_or(0, |&l| self.links[l as usize].queue.len())
    }

    /// Counters so far.
    pub fn stats(&self) -> NetStats {
        self.stats
    }

    /// The parameters it was built with.
    pub fn params(&self) -> &NetParams {
        &self.params
    }

    /// Checks the whole structure, O(messages in flight): one head per
    /// non-empty link, FIFO due times, bounds, the in-flight count. The world
    /// calls it every step under the `verify` feature.
    ///
    /// # Panics
    /// On any broken invariant.
    pub fn verify(&self) {
        let mut scheduled = vec![false; self.links.len()];
        for Reverse(h) in self.heads.iter() {
            let l = &self.links[h.link as usize];
            assert!(!scheduled[h.link as usize], "two heads for one link");
            scheduled[h.link as usize] = true;
            let front = l.queue.front().expect("head of an empty link");
            assert_eq!(front.seq, h.seq);
            assert!(h.at >= front.due.max(self.stall_end(l.to)));
        }
        let mut total = 0u64;
        for (i, l) in self.links.iter().enumerate() {
            assert_eq!(scheduled[i], !l.queue.is_empty(), "link {i} schedule");
            assert!(l.queue.len() <= self.params.in_flight_per_pair_max);
            for (a, b) in l.queue.iter().zip(l.queue.iter().skip(1)) {
                assert!(a.due <= b.due && a.seq < b.seq, "link {i} FIFO");
            }
            total += l.queue.len() as u64;
        }
        assert_eq!(total, self.in_flight);
    }

    fn stall_end(&self, endpoint: A) -> Time {
        self.stalls.get(&endpoint).copied().unwrap_or(Time::ZERO)
    }

    fn link(&mut self, from: A, to: A) -> u32 {
        if let Some(&l) = self.link_of.get(&(from, to)) {
            return l;
        }
        let id = u32::try_from(self.links.len()).expect("fewer than 2^32 links");
        let skew_us = match self.params.latency.pair_skew_us_max {
            0 => 0,
            max => self.rng.range(0, max),
        };
        self.links.push(Link {
            from,
            to,
            skew_us,
            last_due: Time::ZERO,
            queue: VecDeque::new(),
        });
        self.link_of.insert((from, to), id);
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type TestNet = Net<u8, u32>;

    fn fixed(us: u64) -> NetParams {
        NetParams {
            latency: LatencyModel {
                min_us: us,
                max_us: us,
                pair_skew_us_max: 0,
                burst_probability: 0.0,
                burst_us_max: 0,
            },
            in_flight_per_pair_max: 4,
        }
    }

    fn drain(net: &mut TestNet, now: Time) -> Vec<(u8, u8, u32, Time)> {
        std::iter::from_fn(|| net.poll_delivery(now))
            .map(|d| (d.from, d.to, d.msg, d.delivered_at))
            .collect()
    }

    #[test]
    fn delivers_at_now_plus_latency_not_before() {
        let mut net = TestNet::new(fixed(100), Rng::new(1)).expect("valid");
        net.send(Time(10), 0, 1, 7).expect("room");
        assert_eq!(net.next_delivery_time(), Some(Time(110)));
        assert_eq!(net.poll_delivery(Time(109)), None);
        let d = net.poll_delivery(Time(110)).expect("due");
        assert_eq!(
            (d.from, d.to, d.msg, d.seq, d.sent_at),
            (0, 1, 7, 0, Time(10))
        );
        assert_eq!(net.poll_delivery(Time(1_000)), None);
        assert_eq!(net.stats().max_delay_us, 100);
        net.verify();
    }

    #[test]
    fn fifo_per_pair_even_when_a_later_send_draws_less_latency() {
        let params = NetParams {
            latency: LatencyModel {
                min_us: 0,
                max_us: 10_000,
                ..fixed(0).latency
            },
            in_flight_per_pair_max: 1_000,
        };
        let mut net = TestNet::new(params, Rng::new(3)).expect("valid");
        for i in 0..500 {
            net.send(Time(u64::from(i)), (i % 3) as u8, 9, i)
                .expect("room");
        }
        net.verify();
        let got = drain(&mut net, Time(1_000_000));
        assert_eq!(got.len(), 500);
        for from in 0..3u8 {
            let msgs: Vec<u32> = got.iter().filter(|d| d.0 == from).map(|d| d.2).collect();
            assert!(
                msgs.windows(2).all(|w| w[0] < w[1]),
                "pair {from} reordered"
            );
        }
        assert!(got.windows(2).all(|w| w[0].3 <= w[1].3), "time order");
    }

    #[test]
    fn full_link_hands_the_message_back_and_counts_it() {
        let mut net = TestNet::new(fixed(5), Rng::new(1)).expect("valid");
        for i in 0..4 {
            net.send(Time::ZERO, 0, 1, i).expect("room");
        }
        let err = net.send(Time::ZERO, 0, 1, 99).expect_err("full");
        assert_eq!(err, SendError::Full(99));
        assert_eq!(err.into_inner(), 99);
        net.send(Time::ZERO, 1, 0, 5)
            .expect("other direction has room");
        assert_eq!(net.stats().rejected_full, 1);
        assert_eq!(net.in_flight_between(0, 1), 4);
        assert_eq!(net.stats().max_in_flight_pair, 4);
        assert!(net.poll_delivery(Time(5)).is_some());
        net.send(Time(5), 0, 1, 100).expect("room again");
        net.verify();
    }

    #[test]
    fn stall_holds_messages_in_order_until_it_ends() {
        let mut net = TestNet::new(fixed(10), Rng::new(1)).expect("valid");
        net.send(Time(0), 0, 1, 1).expect("room");
        net.send(Time(0), 2, 1, 2).expect("room");
        net.send(Time(0), 0, 2, 3).expect("room");
        net.stall(1, Time(500));
        assert!(net.is_stalled(1, Time(499)) && !net.is_stalled(1, Time(500)));
        net.send(Time(20), 0, 1, 4).expect("room");
        net.verify();
        assert_eq!(drain(&mut net, Time(499)), vec![(0, 2, 3, Time(10))]);
        assert_eq!(net.next_delivery_time(), Some(Time(500)));
        let got = drain(&mut net, Time(500));
        assert_eq!(got.iter().map(|d| d.2).collect::<Vec<_>>(), vec![1, 2, 4]);
        assert!(got.iter().all(|d| d.3 == Time(500)));
        assert_eq!(net.stats().held_by_stall, 3);
        net.stall(1, Time(100)); // never shortens, never re-stalls the past
        assert!(!net.is_stalled(1, Time(500)));
    }

    #[test]
    fn bursts_and_skew_stay_within_the_model() {
        let latency = LatencyModel {
            min_us: 100,
            max_us: 200,
            pair_skew_us_max: 50,
            burst_probability: 0.2,
            burst_us_max: 1_000,
        };
        let params = NetParams {
            latency,
            in_flight_per_pair_max: 10_000,
        };
        let mut net = TestNet::new(params, Rng::new(8)).expect("valid");
        for i in 0..1_000 {
            net.send(Time::ZERO, 0, (i % 2) as u8 + 1, i).expect("room");
        }
        let got = drain(&mut net, Time(10_000));
        assert_eq!(got.len(), 1_000);
        assert!(got.iter().all(|d| d.3 >= Time(100) && d.3 <= Time(1_250)));
        let s = net.stats();
        assert!((100..300).contains(&s.bursts), "bursts = {}", s.bursts);
        assert!(s.max_delay_us > 250 && s.max_delay_us <= 1_250);
    }

    #[test]
    fn invalid_params_are_refused_by_name() {
        let mut p = fixed(1);
        p.in_flight_per_pair_max = 0;
        let err = TestNet::new(p, Rng::new(0)).err().expect("invalid");
        assert!(err.to_string().contains("in_flight_per_pair_max"), "{err}");
    }
}
