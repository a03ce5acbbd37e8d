//! A sans-IO test harness for the cell host: several [`CellHost`]s wired by
//! the shard contract's outboxes and inboxes over the runtime's mesh queues
//! and flush (lock-free queues, polled by hand; a driver, so it may import
//! `crate::runtime`: tests/tidy.rs names it),
//! each with a detached [`ClientPort`], and game clients driven by the
//! client library's [`ClientSession`]. Deterministic: no threads, no
//! sockets, time advanced by hand.
//!
//! [`Harness::attached`] gives the hosts ports as the runtime's socket loop
//! drives them, so a connection the app hands to another shard
//! (`ClientPort::hand_off`: a proxy following its real) moves there with its
//! unread input, taken up before that shard's next tick (the runtime's
//! pump between ticks), and its client carries on over it.
//!
//! Owns only test scaffolding; compiled for tests, and with the `harness`
//! feature for the bench crate's cost probe (`bench/src/cost.rs`).

use std::net::SocketAddr; // tidy: allow(std::net): an address value, no socket
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::client::{ClientSession, ClientSessionParams};
use crate::config::Config;
use crate::core::entity::TypeRegistry;
use crate::core::ids::ShardId;
use crate::core::load::CostClock;
use crate::core::time::Time;
use crate::runtime::mesh::{self, Queue};
use crate::runtime::tick_offset;
use crate::shard::inbox::InboxBuf;
use crate::shard::port::SlotState;
use crate::shard::{ClientPort, ConnId, Inbox, Outbox, PortParams, ShardApp, ShardContext};
use crossbeam_queue::ArrayQueue; // tidy: allow(crossbeam): the harness stands in for the runtime's mesh

use super::{CellHost, HostError};

/// The Unix time (s) the harness's world starts at (tickets minted for it
/// expire relative to this).
pub const HARNESS_UNIX_AT_START_S: u64 = 1_800_000_000;

/// One test client.
pub struct TestClient {
    /// The shard whose port it is connected to.
    pub shard: usize,
    /// Its connection there.
    pub conn: ConnId,
    /// The client library's session.
    pub session: ClientSession,
    /// Stop reading (a slow reader).
    pub paused: bool,
    /// The port closed it.
    pub closed: bool,
}

/// Hosts, ports, queues and clients (see the module doc).
pub struct Harness {
    /// One host per shard.
    pub hosts: Vec<CellHost>,
    /// One detached port per shard.
    pub ports: Vec<ClientPort>,
    inboxes: Vec<InboxBuf>,
    outboxes: Vec<Outbox>,
    /// Each shard's inbound queue (all sources share it here).
    queues: Vec<Queue>,
    dead: Vec<AtomicBool>,
    /// The clients.
    pub clients: Vec<TestClient>,
    /// Current time.
    pub now: Time,
    /// Each shard's tick offset within a step, as the runtime staggers
    /// them ([`tick_offset`]). Shards tick in offset order; a batch reaches
    /// a shard that ticks later in the same step, else the next step (so
    /// equal offsets model one grid for all shards: a tick per hop).
    pub offsets: Vec<std::time::Duration>,
    tick: std::time::Duration,
    registry: Arc<TypeRegistry>,
    /// Ports as the runtime's (hand-offs move connections), not detached.
    attached: bool,
    /// Wall time spent in the hosts' ticks (and their mesh flushes) since
    /// the harness was built: what the server's game path costs, without
    /// the test clients (`tests_cost`).
    pub host_busy: std::time::Duration,
    /// Called with `true` right before each host's tick and `false` right
    /// after it (the span `host_busy` times): how a test or the cost probe
    /// counts what the game path allocates. `None` by default.
    pub host_hook: Option<fn(bool)>,
    /// The runtime's clock, for `host_busy` only (game time is `now`).
    stopwatch: crate::runtime::MonotonicClock,
}

/// The small two-shard world of the gateway tests: 240 x 120 m, two cells
/// split at x = 120 (cell 0 on shard 0, cell 1 on shard 1), ghost radius
/// 30 m, AOI 15 m, avatars spawned at the centre (on the border), moves up
/// to 30 m/s.
pub fn test_config(extra: &[&str]) -> Config {
    let mut sets: Vec<String> = [
        "world.max_x_m=240.0",
        "world.max_z_m=120.0",
        "world.ghost_radius_m=30.0",
        "aoi.radius_m=15.0",
        "aoi.leave_radius_m=16.0",
        "server.initial_cells=2",
        "runtime.shards=2",
        "runtime.tick_ms=50",
        "gateway.spawn=\"center\"",
        "gateway.move_speed_max_mps=30.0",
        "gateway.listen_addr=\"127.0.0.1:0\"",
        "admin.enabled=false",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    sets.extend(extra.iter().map(|s| s.to_string()));
    Config::load(None, &sets).expect("valid test config")
}

impl Harness {
    /// Hosts for `config` (its `runtime.shards` shards, at least 1).
    pub fn new(config: &Config) -> Harness {
        Harness::try_new(config).expect("host")
    }

    /// As [`Harness::new`], with the hosts' refusal of `config` (a cell
    /// layout the world cannot hold, ...) returned instead of a panic: for
    /// callers that take the config from a user (the cost probe).
    ///
    /// # Errors
    /// The first host's [`HostError`].
    pub fn try_new(config: &Config) -> Result<Harness, HostError> {
        Harness::build(config, false)
    }

    /// Hosts for `config` whose ports are attached as the runtime's: a
    /// hand-off moves the connection to its shard (see the module doc).
    /// Closed connections keep their slots (no socket loop releases them).
    pub fn attached(config: &Config) -> Harness {
        Harness::build(config, true).expect("host")
    }

    fn build(config: &Config, attached: bool) -> Result<Harness, HostError> {
        let shards = config.runtime.shards.max(1);
        let tick = std::time::Duration::from_millis(config.runtime.tick_ms);
        let door = attached.then(|| Arc::new(super::door::Door::from_config(config)));
        let mut h = Harness {
            hosts: Vec::new(),
            ports: Vec::new(),
            inboxes: Vec::new(),
            outboxes: Vec::new(),
            queues: Vec::new(),
            dead: Vec::new(),
            clients: Vec::new(),
            now: Time::from_millis(1000),
            offsets: Vec::new(),
            tick,
            registry: Arc::new(TypeRegistry::with_builtins()),
            attached,
            host_busy: std::time::Duration::ZERO,
            host_hook: None,
            stopwatch: crate::runtime::MonotonicClock::new(),
        };
        for index in 0..shards {
            let ctx = ShardContext {
                shard: ShardId::local(index),
                shards,
                tick,
                unix_at_start_s: HARNESS_UNIX_AT_START_S,
            };
            // Attached, the hosts share one door as the embedded server's
            // do (a hand-over's parcel waits there for its new shard).
            let mut host = match &door {
                Some(d) => CellHost::with_door(config, ctx, d.clone()),
                None => CellHost::new(config, ctx),
            }?;
            host.set_cost_clock(Box::new(crate::runtime::MonotonicClock::new()));
            h.hosts.push(host);
            let params = PortParams::from_config(config);
            h.ports.push(if attached {
                ClientPort::attached(params)
            } else {
                ClientPort::detached(params)
            });
            h.inboxes.push(InboxBuf::default());
            h.outboxes
                .push(Outbox::new(ShardId::local(index), shards, 4096, 65536));
            h.queues.push(Arc::new(ArrayQueue::new(1024)));
            h.dead.push(AtomicBool::new(false));
            h.offsets.push(tick_offset(index, shards, tick));
        }
        Ok(h)
    }

    /// Connects a client to `shard` and queues its Hello and Login.
    pub fn connect(&mut self, shard: usize, name: &str) -> usize {
        self.connect_with(shard, name, None)
    }

    /// Connects a client to `shard` and queues its Hello and a Login with
    /// `token`.
    pub fn connect_with(&mut self, shard: usize, name: &str, token: Option<&[u8]>) -> usize {
        let peer: SocketAddr = "127.0.0.1:5000".parse().expect("addr");
        let conn = if self.attached {
            self.ports[shard]
                .io_open(peer)
                .expect("room for a connection")
        } else {
            self.ports[shard].inject_open(peer)
        };
        let mut session = ClientSession::new(ClientSessionParams::default(), self.registry.clone());
        session.connect(name, token).expect("connect");
        self.clients.push(TestClient {
            shard,
            conn,
            session,
            paused: false,
            closed: false,
        });
        self.clients.len() - 1
    }

    /// One tick: clients write, every shard ticks, clients read.
    pub fn step(&mut self) {
        for c in &mut self.clients {
            let out = c.session.transmit();
            if !out.is_empty() && !c.closed {
                let port = &mut self.ports[c.shard];
                let n = out.len().min(port.inbound_room(c.conn));
                port.inject_input(c.conn, &out[..n]);
                c.session.advance_transmit(n);
            }
        }
        let offsets = self.offsets.clone();
        let mut order: Vec<usize> = (0..self.hosts.len()).collect();
        order.sort_by_key(|&i| (offsets[i], i));
        // Shards of one offset tick together: none sees the others' batches
        // of this step.
        for group in order.chunk_by(|&a, &b| offsets[a] == offsets[b]) {
            group.iter().for_each(|&i| self.take_inbound(i));
            for &i in group {
                if let Some(hook) = self.host_hook {
                    hook(true);
                }
                let started = self.stopwatch.stamp();
                let inbox = Inbox::new(&mut self.inboxes[i]);
                self.hosts[i].on_tick(self.now, inbox, &mut self.outboxes[i], &mut self.ports[i]);
                mesh::flush(&mut self.outboxes[i], &self.queues, &self.dead);
                let ns = self.stopwatch.stamp().saturating_sub(started);
                if let Some(hook) = self.host_hook {
                    hook(false);
                }
                self.host_busy += std::time::Duration::from_nanos(ns);
                if self.attached {
                    self.carry_handoffs(i);
                }
            }
        }
        for c in &mut self.clients {
            if c.paused || c.closed {
                continue;
            }
            let bytes = self.ports[c.shard].take_output(c.conn);
            c.session.handle_bytes(self.now, &bytes, &mut ());
            if !self.ports[c.shard].is_open(c.conn) && c.session.transmit().is_empty() {
                c.closed = true;
                c.session.handle_eof(self.now);
            }
        }
        self.now = self.now + self.tick;
    }

    /// The socket loop's part of a hand-off after shard `i`'s tick: each
    /// connection it handed over is adopted by its destination's port with
    /// its unread input, and its client now talks to that shard.
    fn carry_handoffs(&mut self, i: usize) {
        let mut due = Vec::new();
        self.ports[i].io_take_due(&mut due);
        for index in due {
            if self.ports[i].io_state(index) != SlotState::HandingOff {
                continue;
            }
            let Some((to, note, input)) = self.ports[i].io_take_handoff(index) else {
                continue;
            };
            self.ports[i].io_handed_off(true);
            self.ports[i].io_release(index);
            let peer: SocketAddr = "127.0.0.1:5000".parse().expect("addr");
            let to = usize::from(to);
            let conn = self.ports[to]
                .io_adopt(peer, &input, note)
                .expect("room for the adopted connection");
            let client = self
                .clients
                .iter_mut()
                .find(|c| c.shard == i && c.conn.slot() == index && !c.closed);
            if let Some(c) = client {
                c.shard = to;
                c.conn = conn;
            }
        }
    }

    /// The time shard `i`'s tick of the step that just ran happened at
    /// (the step's time plus its offset): when its clients got what it
    /// wrote in that tick.
    pub fn tick_time(&self, i: usize) -> Time {
        let step = self.now.0.saturating_sub(self.tick.as_micros() as u64);
        Time(step + self.offsets[i].as_micros() as u64)
    }

    fn take_inbound(&mut self, i: usize) {
        while let Some(batch) = self.queues[i].pop() {
            self.inboxes[i].push_batch(batch);
        }
    }

    /// Runs `n` ticks.
    pub fn run(&mut self, n: usize) {
        for _ in 0..n {
            self.step();
        }
    }

    /// Reals and ghosts of `entity` over every cell of every shard.
    pub fn copies(&self, entity: crate::core::ids::EntityId) -> (usize, usize) {
        use crate::core::cell::Residency;
        let mut n = (0, 0);
        for h in &self.hosts {
            for c in h.cells() {
                match c.residency(entity) {
                    Some(Residency::Real { .. }) => n.0 += 1,
                    Some(Residency::Ghost { .. }) => n.1 += 1,
                    _ => {}
                }
            }
        }
        n
    }
}
