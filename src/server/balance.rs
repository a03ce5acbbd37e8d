//! The server side of balancing: load measurement on every shard, the space
//! service on shard 0, and versioned tree changes applied on every shard.
//!
//! - **Measure** (every shard): the host stamps its own work with the
//!   clock its driver injects ([`HostBalance::set_cost_clock`]: the
//!   runtime's `MonotonicClock` in the server; none, so no work measured,
//!   until one is given; this module reads no clock itself):
//!   each entity's logic through the nested-depth [`LoadRecorder`], each
//!   cell's tick, and the whole `on_tick` (the shard's busy time).
//! - **Report** (every `balance.gather_period_ms`): a [`BalanceMsg::Report`]
//!   to shard 0 (shard 0 feeds its own directly): busy time in cores, each
//!   cell's load (its tick plus its reals' entity work) with its reals'
//!   positions and loads (at most `report_samples_max`), and the tree
//!   version it measured under.
//! - **Decide** (shard 0): the [`SpaceService`] runs a round and its changes
//!   are applied locally and broadcast, in order, as one
//!   [`BalanceMsg::Changes`] per destination (mesh queues are FIFO per pair).
//! - **Apply** (every shard): in version order; a split whose new cell is
//!   ours creates it; a finished merge retires the cell (kept ticking until
//!   empty so stragglers are forwarded, its shard remembered for routing).
//!   Messages for a cell a split has not created here yet are parked until
//!   the change arrives (another shard may apply it first).
//!
//! The host (`host.rs`) only calls into this module at a few points. Owns no
//! cells; must not touch sockets or executors.

use crate::config::Config;
use crate::core::cell::{Cell, Counters as CellCounters};
use crate::core::entity::TypeRegistry;
use crate::core::geom::Vec3;
use crate::core::ids::{CellId, EntityId, ShardId, SpaceId};
use crate::core::load::{CostClock, LoadRecorder, WorkClock};
use crate::core::space::{
    CellReport, ChangeOp, EntitySample, LoadReport, ServiceCounters, SpaceChange, SpaceService,
    SpaceTree,
};
use crate::core::time::Time;
use crate::server::cell_factory::CellFactory;
use crate::server::host::Routed;
use crate::shard::{Outbox, ShardContext};
use crate::wire::{Body, Envelope};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// The envelope kind of a [`BalanceMsg`].
pub const KIND_BALANCE: u16 = 2;

/// The one union space the server runs.
pub const WORLD_SPACE: SpaceId = SpaceId(1);

/// Most messages parked for cells not created yet.
const PARKED_MAX: usize = 65_536;

/// How long a retired cell is kept at most (then dropped even if not empty).
const RETIRED_KEEP: Duration = Duration::from_secs(10);

/// One entity sample on the wire.
#[derive(Clone, Copy, Debug, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct WireSample {
    /// The entity.
    pub entity: EntityId,
    /// Position x.
    pub x: f64,
    /// Position z.
    pub z: f64,
    /// Load over the period, cores.
    pub load: f64,
}

/// One cell's report on the wire.
#[derive(Clone, Debug, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct WireCell {
    /// The cell.
    pub cell: CellId,
    /// Load over the period, cores.
    pub load: f64,
    /// Reals held.
    pub reals: u32,
    /// Samples of its reals.
    pub samples: Vec<WireSample>,
}

/// Balancing traffic between shards.
#[derive(Clone, Debug, PartialEq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub enum BalanceMsg {
    /// A shard's periodic load report (to shard 0).
    Report {
        /// The reporting shard.
        shard: ShardId,
        /// Tree version it measured under.
        version: u64,
        /// Busy time over the period, cores.
        busy: f64,
        /// Its cells.
        cells: Vec<WireCell>,
    },
    /// Tree changes to apply in order (from shard 0).
    Changes(Vec<SpaceChange>),
}

/// One leaf for plots and the admin view.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct LeafSnapshot {
    /// Cell id.
    pub cell: u32,
    /// Shard index.
    pub shard: u16,
    /// Rect.
    pub min_x: f64,
    /// Rect.
    pub min_z: f64,
    /// Rect.
    pub max_x: f64,
    /// Rect.
    pub max_z: f64,
    /// Being merged away.
    pub merging: bool,
    /// Last known load, cores (smoothed on shard 0, own cells elsewhere).
    pub load: f64,
    /// Reals at the last report (0 when unknown).
    pub reals: u32,
}

/// The tree as leaves, at one version.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TreeSnapshot {
    /// Tree version.
    pub version: u64,
    /// Every leaf.
    pub leaves: Vec<LeafSnapshot>,
}

/// A bounded history of tree snapshots, shared with whoever plots them
/// (the embedded server, loadgen): shard 0 pushes one per balancing period.
#[derive(Clone, Debug, Default)]
pub struct SnapshotLog {
    /// `(time, snapshot)`, oldest first.
    pub entries: std::collections::VecDeque<(Time, TreeSnapshot)>,
    /// Most entries kept (older ones are dropped). 0 = the default, 4096.
    pub max: usize,
}

/// Where shard 0 publishes its snapshots.
pub type SnapshotSink = Arc<std::sync::Mutex<SnapshotLog>>;

/// What balancing did on this shard.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BalanceCounters {
    /// Changes applied to this shard's tree.
    pub applied: u64,
    /// Changes refused by the tree (a bug or a lost message).
    pub refused: u64,
    /// Reports sent or fed.
    pub reports: u64,
    /// Cells created by splits here.
    pub cells_created: u64,
    /// Retired cells dropped here.
    pub cells_dropped: u64,
    /// Messages parked for a cell not created yet.
    pub parked: u64,
    /// Parked messages dropped (bound reached).
    pub parked_dropped: u64,
    /// Balance envelopes that failed to decode.
    pub bad: u64,
}

/// Balancing state of one shard (see the module doc).
pub struct HostBalance {
    enabled: bool,
    ctx: ShardContext,
    period: Duration,
    next_report: Time,
    period_start: Time,
    clock: Box<dyn CostClock + Send>,
    recorder: LoadRecorder,
    cell_ns: BTreeMap<CellId, u64>,
    busy_ns: u64,
    samples_max: usize,
    own: BTreeMap<CellId, (f64, u32)>,
    service: Option<SpaceService>,
    received: Vec<SpaceChange>,
    reports_in: Vec<LoadReport>,
    parked: Vec<Routed>,
    retired: BTreeMap<CellId, (ShardId, Time)>,
    cells: CellFactory,
    crowd: Option<(Vec3, f64)>,
    counters: BalanceCounters,
    /// The counters of this shard's cells dropped after a merge.
    dropped_cells: CellCounters,
    sink: Option<SnapshotSink>,
    /// Shard 0's decisions since the viewer last took them, at most
    /// `decisions_max` (`admin.viewer_events_max`; 0 with the admin
    /// endpoint off: none kept).
    decisions: Vec<(Time, SpaceChange)>,
    decisions_max: usize,
}

impl std::fmt::Debug for HostBalance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostBalance")
            .field("enabled", &self.enabled)
            .field("counters", &self.counters)
            .finish()
    }
}

impl HostBalance {
    /// This shard's balancing state; shard 0 also runs the service over
    /// `tree`.
    ///
    /// # Panics
    /// If the validated config's service params are refused (a bug).
    pub fn new(
        config: &Config,
        ctx: ShardContext,
        tree: &SpaceTree,
        types: Arc<TypeRegistry>,
    ) -> Self {
        let b = &config.balance;
        // The simulator's balancer takes the same params (`SimBalance::new`).
        let p = b.balancer();
        let service = (ctx.shard.index == 0).then(|| {
            let shards: Vec<ShardId> = ctx.all_shards().collect();
            let mut s = SpaceService::new(p.service, &shards).expect("validated config");
            s.add_union_space(WORLD_SPACE, tree.clone())
                .expect("a fresh service");
            s.set_frozen(!p.enabled);
            s
        });
        let period = Duration::from_millis(p.service.gather_period_ms);
        HostBalance {
            enabled: p.enabled,
            ctx,
            period,
            next_report: Time::ZERO + period,
            period_start: Time::ZERO,
            clock: Box::new(WorkClock::new()),
            recorder: LoadRecorder::new(p.service.balance.entity_samples_max),
            cell_ns: BTreeMap::new(),
            busy_ns: 0,
            samples_max: p.report_samples_max,
            own: BTreeMap::new(),
            service,
            received: Vec::new(),
            reports_in: Vec::new(),
            parked: Vec::new(),
            retired: BTreeMap::new(),
            cells: CellFactory::new(config, types),
            crowd: (b.npc_crowd_radius_m > 0.0).then(|| {
                (
                    Vec3::ground(b.npc_crowd_x_m, b.npc_crowd_z_m),
                    b.npc_crowd_radius_m,
                )
            }),
            counters: BalanceCounters::default(),
            dropped_cells: CellCounters::default(),
            sink: None,
            decisions: Vec::new(),
            decisions_max: if config.admin.enabled {
                config.admin.viewer_events_max as usize
            } else {
                0
            },
        }
    }

    /// Publishes a snapshot of the tree into `sink` every period (shard 0
    /// only; other shards ignore it).
    pub fn set_snapshot_sink(&mut self, sink: SnapshotSink) {
        self.sink = Some(sink);
    }

    fn publish(&self, now: Time, tree: &SpaceTree) {
        let Some(sink) = &self.sink else { return };
        if self.service.is_none() {
            return;
        }
        let snap = self.snapshot(tree);
        if let Ok(mut log) = sink.lock() {
            let max = if log.max == 0 { 4096 } else { log.max };
            while log.entries.len() >= max {
                log.entries.pop_front();
            }
            log.entries.push_back((now, snap));
        }
    }

    /// Stamps work with `clock` from now on (the driver's: the server's
    /// runtime gives a monotonic one).
    pub fn set_cost_clock(&mut self, clock: Box<dyn CostClock + Send>) {
        self.clock = clock;
    }

    /// The current load stamp.
    pub fn stamp(&self) -> u64 {
        self.clock.stamp()
    }

    /// Charges the work of `e` since `started` (one outermost call).
    pub fn entity_done(&mut self, e: EntityId, started: u64) {
        if self.recorder.begin(e, started).is_ok() {
            self.recorder.end(e, self.clock.stamp());
        }
    }

    /// Charges the tick of cell `c` since `started`.
    pub fn cell_done(&mut self, c: CellId, started: u64) {
        let ns = self.clock.stamp().saturating_sub(started);
        *self.cell_ns.entry(c).or_insert(0) += ns;
    }

    /// Counters.
    pub fn counters(&self) -> BalanceCounters {
        self.counters
    }

    /// The service's counters (shard 0 only).
    pub fn service_counters(&self) -> Option<ServiceCounters> {
        self.service.as_ref().map(SpaceService::counters)
    }

    /// NPC demo knob: the heading an NPC at `pos` walks in (towards the
    /// crowd's centre when outside its radius; else unchanged).
    pub fn npc_heading(&self, pos: Vec3, heading: f64) -> f64 {
        match self.crowd {
            Some((c, r)) if pos.dist_xz(c) > r => (c.z - pos.z).atan2(c.x - pos.x),
            _ => heading,
        }
    }

    /// The shard of a cell merged away recently (for routing stragglers).
    pub fn retired_shard(&self, c: CellId) -> Option<ShardId> {
        self.retired.get(&c).map(|r| r.0)
    }

    /// Takes a balance envelope; false if `env` is of another kind.
    pub fn handle_envelope(&mut self, now: Time, env: &Envelope) -> bool {
        if env.kind() != KIND_BALANCE {
            return false;
        }
        let msg = env
            .access::<BalanceMsg>(KIND_BALANCE)
            .ok()
            .and_then(|a| rkyv::deserialize::<BalanceMsg, rkyv::rancor::Error>(a).ok());
        match msg {
            Some(BalanceMsg::Changes(c)) => self.received.extend(c),
            Some(BalanceMsg::Report {
                shard,
                version,
                busy,
                cells,
            }) => self.reports_in.push(from_wire(shard, version, busy, cells)),
            None => self.counters.bad += 1,
        }
        let _ = now;
        true
    }

    /// True when `c` may be a cell a split has not created here yet (its id
    /// is past the tree's next id): its messages are parked.
    pub fn awaits(&self, c: CellId, tree: &SpaceTree) -> bool {
        c >= tree.next_cell_id()
    }

    /// Parks `item` until the split creating its cell is applied.
    pub fn park(&mut self, item: Routed) {
        if self.parked.len() >= PARKED_MAX {
            self.counters.parked_dropped += 1;
            return;
        }
        self.counters.parked += 1;
        self.parked.push(item);
    }

    /// Parked messages whose cell now exists in `tree` (the rest stay).
    pub fn unpark(&mut self, tree: &SpaceTree) -> Vec<Routed> {
        if self.parked.is_empty() {
            return Vec::new();
        }
        let next = tree.next_cell_id();
        let (ready, wait): (Vec<Routed>, Vec<Routed>) =
            self.parked.drain(..).partition(|r| match r.to {
                crate::core::cell::Dest::Cell(c) => c < next,
                crate::core::cell::Dest::Proxy(_) => true,
            });
        self.parked = wait;
        ready
    }

    /// End of `on_tick`: busy time since `tick_start`, changes in order,
    /// then a report and (shard 0) a round when due, broadcast via `out`.
    pub fn after_tick(
        &mut self,
        now: Time,
        tick_start: u64,
        tree: &mut SpaceTree,
        cells: &mut BTreeMap<CellId, Cell>,
        out: &mut Outbox,
    ) {
        self.apply_received(now, tree, cells);
        self.drop_retired(now, cells);
        if !self.enabled {
            return;
        }
        if now >= self.next_report {
            self.report(now, tree, cells, out);
            self.publish(now, tree);
        }
        if let Some(mut s) = self.service.take() {
            for r in self.reports_in.drain(..) {
                let _ = s.handle_load_report(now, &r);
            }
            s.handle_timeout(now);
            let mut changes = Vec::new();
            while let Some((_, c)) = s.poll_change() {
                changes.push(c);
            }
            self.service = Some(s);
            let room = self.decisions_max - self.decisions.len().min(self.decisions_max);
            self.decisions
                .extend(changes.iter().take(room).map(|c| (now, *c)));
            if !changes.is_empty() {
                self.broadcast(&changes, out);
                self.received.extend(changes);
                self.apply_received(now, tree, cells);
            }
        }
        self.busy_ns += self.clock.stamp().saturating_sub(tick_start);
    }

    /// At stop: applies the changes that arrived in the last inbox, so every
    /// shard ends on the same tree.
    pub fn on_stop(&mut self, now: Time, tree: &mut SpaceTree, cells: &mut BTreeMap<CellId, Cell>) {
        self.apply_received(now, tree, cells);
    }

    fn broadcast(&mut self, changes: &[SpaceChange], out: &mut Outbox) {
        let Ok(body) = Body::encode(&BalanceMsg::Changes(changes.to_vec())) else {
            self.counters.bad += 1;
            return;
        };
        for s in self.ctx.all_shards().filter(|s| *s != self.ctx.shard) {
            if out.send(s, KIND_BALANCE, body.clone()).is_err() {
                self.counters.bad += 1;
            }
        }
    }

    fn apply_received(
        &mut self,
        now: Time,
        tree: &mut SpaceTree,
        cells: &mut BTreeMap<CellId, Cell>,
    ) {
        self.received.sort_by_key(|c| c.version);
        let mut i = 0;
        while i < self.received.len() {
            let c = self.received[i];
            if c.version < tree.version() {
                i += 1; // a duplicate: already applied
                continue;
            }
            if c.version > tree.version() {
                break; // a gap: wait for the missing change
            }
            let retiring = match c.op {
                ChangeOp::FinishMerge { cell } => tree.shard_of(cell),
                _ => None,
            };
            if tree.apply(&c).is_err() {
                self.counters.refused += 1;
                i += 1;
                continue;
            }
            self.counters.applied += 1;
            self.after_apply(now, c.op, retiring, cells);
            i += 1;
        }
        self.received.drain(..i);
    }

    fn after_apply(
        &mut self,
        now: Time,
        op: ChangeOp,
        retiring: Option<ShardId>,
        cells: &mut BTreeMap<CellId, Cell>,
    ) {
        match op {
            ChangeOp::Split {
                new_cell,
                new_shard,
                ..
            } if new_shard == self.ctx.shard => {
                let cell = self.cells.build(new_cell).expect("validated cell params");
                cells.insert(new_cell, cell);
                self.counters.cells_created += 1;
            }
            ChangeOp::FinishMerge { cell } => {
                if let Some(s) = retiring {
                    self.retired.insert(cell, (s, now));
                }
            }
            _ => {}
        }
    }

    /// The balancer's decisions (shard 0) since the last call, oldest first.
    pub fn take_decisions(&mut self) -> std::vec::Drain<'_, (Time, SpaceChange)> {
        self.decisions.drain(..)
    }

    /// The load this shard last reported for its cell `c` (share of a core)
    /// and its reals then.
    pub fn own_load(&self, c: CellId) -> Option<(f64, u32)> {
        self.own.get(&c).copied()
    }

    /// The summed counters of the cells this shard dropped after merges.
    pub fn dropped_cell_counters(&self) -> &CellCounters {
        &self.dropped_cells
    }

    /// Drops retired cells of this shard once empty (or kept too long), and
    /// forgets old routing entries.
    fn drop_retired(&mut self, now: Time, cells: &mut BTreeMap<CellId, Cell>) {
        let me = self.ctx.shard;
        let mut dropped = 0;
        let gone = &mut self.dropped_cells;
        self.retired.retain(|c, (s, since)| {
            let old = now >= *since + RETIRED_KEEP;
            let empty = || {
                cells
                    .get(c)
                    .is_none_or(|cell| cell.is_empty() && cell.forwarding_entries() == 0)
            };
            if *s == me && (old || empty()) {
                if let Some(cell) = cells.remove(c) {
                    dropped += 1;
                    gone.absorb(cell.counters());
                }
            }
            !old
        });
        self.counters.cells_dropped += dropped;
    }

    fn report(
        &mut self,
        now: Time,
        tree: &SpaceTree,
        cells: &BTreeMap<CellId, Cell>,
        out: &mut Outbox,
    ) {
        let elapsed = now.saturating_since(self.period_start).as_nanos().max(1) as f64;
        self.period_start = now;
        self.next_report = now + self.period;
        let mut r = LoadReport {
            shard: self.ctx.shard,
            space: WORLD_SPACE,
            version: tree.version(),
            busy: std::mem::take(&mut self.busy_ns) as f64 / elapsed,
            cells: Vec::new(),
        };
        for (id, cell) in cells
            .iter()
            .filter(|(id, _)| tree.node_of_cell(**id).is_some())
        {
            let reals = cell.reals();
            let tick_ns = self.cell_ns.remove(id).unwrap_or(0) as f64;
            let share = tick_ns / elapsed / reals.len().max(1) as f64;
            let mut load = if reals.is_empty() {
                tick_ns / elapsed
            } else {
                0.0
            };
            let mut samples = Vec::with_capacity(reals.len().min(self.samples_max));
            for e in &reals {
                let l = self.recorder.take(*e) as f64 / elapsed + share;
                load += l;
                if samples.len() < self.samples_max {
                    let p = cell.view(*e).map_or(Vec3::ground(0.0, 0.0), |v| v.pos());
                    samples.push(EntitySample {
                        entity: *e,
                        x: p.x,
                        z: p.z,
                        load: l,
                        is_real: true,
                    });
                }
            }
            self.own.insert(*id, (load, reals.len() as u32));
            r.cells.push(CellReport {
                cell: *id,
                load,
                reals: reals.len() as u32,
                samples,
            });
        }
        self.cell_ns.clear();
        self.recorder.drain_period(|_, _| ());
        self.own.retain(|c, _| tree.node_of_cell(*c).is_some());
        self.counters.reports += 1;
        if self.service.is_some() {
            self.reports_in.push(r);
        } else if let Ok(body) = Body::encode(&to_wire(&r)) {
            let zero = ShardId {
                node: self.ctx.shard.node,
                index: 0,
            };
            if out.send(zero, KIND_BALANCE, body).is_err() {
                self.counters.bad += 1;
            }
        }
    }

    /// The tree's leaves with the loads this shard knows (all cells on
    /// shard 0, its own elsewhere).
    pub fn snapshot(&self, tree: &SpaceTree) -> TreeSnapshot {
        let book = self.service.as_ref().and_then(|s| s.loads(WORLD_SPACE));
        let leaves = tree
            .leaves()
            .map(|l| {
                let (load, reals) = match book.and_then(|b| b.get(l.cell)) {
                    Some(c) => (c.smoothed(), c.samples().len() as u32),
                    None => self.own.get(&l.cell).copied().unwrap_or((0.0, 0)),
                };
                LeafSnapshot {
                    cell: l.cell.0,
                    shard: l.shard.index,
                    min_x: l.rect.min_x,
                    min_z: l.rect.min_z,
                    max_x: l.rect.max_x,
                    max_z: l.rect.max_z,
                    merging: l.merging,
                    load,
                    reals,
                }
            })
            .collect();
        TreeSnapshot {
            version: tree.version(),
            leaves,
        }
    }
}

fn to_wire(r: &LoadReport) -> BalanceMsg {
    BalanceMsg::Report {
        shard: r.shard,
        version: r.version,
        busy: r.busy,
        cells: r
            .cells
            .iter()
            .map(|c| WireCell {
                cell: c.cell,
                load: c.load,
                reals: c.reals,
                samples: c
                    .samples
                    .iter()
                    .map(|s| WireSample {
                        entity: s.entity,
                        x: s.x,
                        z: s.z,
                        load: s.load,
                    })
                    .collect(),
            })
            .collect(),
    }
}

fn from_wire(shard: ShardId, version: u64, busy: f64, cells: Vec<WireCell>) -> LoadReport {
    LoadReport {
        shard,
        space: WORLD_SPACE,
        version,
        busy,
        cells: cells
            .into_iter()
            .map(|c| CellReport {
                cell: c.cell,
                load: c.load,
                reals: c.reals,
                samples: c
                    .samples
                    .into_iter()
                    .map(|s| EntitySample {
                        entity: s.entity,
                        x: s.x,
                        z: s.z,
                        load: s.load,
                        is_real: true,
                    })
                    .collect(),
            })
            .collect(),
    }
}
