//! The simulated world: shards hosting cells and proxies, clients driven by
//! bots, all over the simulated network, checked at every step.
//!
//! # Model
//!
//! - **Shards** `0..shards`: cell `c` lives on shard `c % shards`, the proxy
//!   of entity `e` on shard `e % shards` (the shard that "accepted" its
//!   client). A stalled shard neither receives (the network holds its
//!   messages, FIFO kept) nor ticks.
//! - **Cells** follow a [`SimLayout`] (a grid that can merge and split);
//!   every cell ticks every sim tick with the current layout.
//! - **Entities** `0..entities`, each with a client (a [`Bot`]), a proxy and
//!   one real. Each tick of phase one, every client steps its bot and sends
//!   the new position as an input to its proxy (client -> proxy -> the real's
//!   cell, forwarded as the real migrates).
//! - **Game logic**: each input is the server's own relay format
//!   (`crate::game::relay::GameInput`: a Move, a Teleport when the bot
//!   jumps, and a SetProp of `status` every few inputs, so sync traffic
//!   flows), applied at the real by the server's own [`Game`], with its
//!   deferral past a migration, its call results and its one InputAck per
//!   tick downstream; a script call run at a real changes `hp`.
//! - **Client views**: every avatar has an observer; each client feeds the
//!   view batches its proxy delivers into a `ClientView` and every broken
//!   rule is a violation (`world_view.rs`). In `CombatStorm`, reals also
//!   try combat hits on entities their observer sees.
//!
//! # One step (one tick)
//!
//! 1. scenario actions (merge, split, crowd moves); 2. clients send inputs (phase one);
//! 3. the network delivers everything due; 4. every cell on a running shard
//!    runs its inputs, the cell events feed the checker and the game, then
//!    the cells publish and 5. their events feed the checker and the game,
//!    until no cell has any left; 6. calls are issued (phase one); 7. every output is
//!    batched per ordered pair of endpoints and sent; 8. new stalls are drawn
//!    (phase one); 9. drained merging cells retire (grid), or a balancing
//!    round runs when due (tree); 10. residency is checked.
//!
//! Phase one lasts `ticks` ticks; phase two (`heal_ticks`) draws no faults
//! and no input (and, in tree mode, no layout change but finishing merges), so the world must
//! quiesce; then the convergence checks run
//! (`checker_converge.rs`).
//!
//! Owns every simulated component; the checker only reads them.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::core::cell::{Cell, CellMsg, CellParams, CellParamsError, Layout, Source};
use crate::core::entity::schema::{TypeRegistry, AVATAR};
use crate::core::entity::{Entity, Value};
use crate::core::geom::Vec3;
use crate::core::ids::{CellId, EntityId, ShardId};
use crate::core::proxy::{Proxy, ProxyError};
use crate::core::space::{initial_tree, SpaceParams};
use crate::core::time::Time;
use crate::core::view::ClientView;
use crate::game::Game;
use crate::sim::bots::Bot;
use crate::sim::checker::Checker;
use crate::sim::net::{Endpoint, Net};
use crate::sim::options::{OptionsError, SimOptions};
use crate::sim::report::{SimSummary, ViolationKind};
use crate::sim::rng::Rng;
use crate::sim::scenario::ScenarioPlan;
use crate::sim::trace::Trace;
use crate::sim::world_balance::{SimBalance, SimCost, WorldLayout};
use crate::sim::world_client::{ClientHook, DownstreamOrder};
use crate::sim::world_event::SimEvent;
use crate::sim::world_layout::SimLayout;
pub use crate::sim::world_params::WorldParams;
use crate::sim::world_replicas::{Replicas, RETIRED_DRAIN_MS};
use crate::sim::world_route::{Router, SimNet};

/// Why a world could not be built.
#[derive(Debug, thiserror::Error)]
pub enum WorldError {
    /// Bad simulation options.
    #[error(transparent)]
    Options(#[from] OptionsError),
    /// Bad cell parameters.
    #[error(transparent)]
    Cell(#[from] CellParamsError),
    /// Bad proxy parameters.
    #[error(transparent)]
    Proxy(#[from] ProxyError),
    /// Bad balancer parameters (`[balance]`).
    #[error("balance: {0}")]
    Balance(#[from] crate::core::space::ServiceError),
}

/// One simulated client: its bot and what it checks of its downstream.
pub(super) struct Client {
    pub(super) bot: Bot,
    pub(super) hook: Box<dyn ClientHook>,
    /// The client seq of its last input (as a client library numbers them).
    pub(super) seq: u64,
}

/// Counts the world keeps beyond the cells' own counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorldStats {
    /// Inputs sent by clients.
    pub inputs_sent: u64,
    /// Calls issued.
    pub calls_issued: u64,
    /// Shard stalls drawn.
    pub stalls: u64,
    /// Inputs and client data the game deferred to the next real (its
    /// `GameCounters::deferred`).
    pub deferred_effects: u64,
    /// Teleports requested.
    pub teleports: u64,
    /// Layout changes (merge, retire, split).
    pub layout_changes: u64,
    /// Tree mode: times a retired cell was seen holding a straggler real.
    pub retired_stragglers: u64,
    /// View batches delivered to clients and checked by their views.
    pub view_batches: u64,
    /// Combat hits started by bots (`try_hit` accepted).
    pub hits_tried: u64,
    /// Hits that landed (`HitLanded` at the attacker).
    pub hits_landed: u64,
    /// Hits that expired without feedback.
    pub hits_expired: u64,
}

/// The simulated world (see the module doc).
pub struct World {
    pub(super) options: SimOptions,
    pub(super) params: WorldParams,
    pub(super) plan: ScenarioPlan,
    pub(super) layout: WorldLayout,
    /// Tree mode: the balancer and its load measurement.
    pub(super) balance: Option<SimBalance>,
    /// Tree mode: the other shards' replicas of the tree, and messages
    /// parked for cells a replica does not know yet.
    pub(super) replicas: Replicas,
    /// Tree mode: retired cells still holding reals (stragglers), since when.
    pub(super) retired_holding: BTreeMap<CellId, Time>,
    /// The entity types every cell knows (the built-ins).
    pub(super) types: Arc<TypeRegistry>,
    /// Index of the avatar's `hp`, the property script calls change.
    pub(super) hp_index: usize,
    /// Index of the avatar's `status`, the property clients set.
    pub(super) status_index: u16,
    /// The game logic at the reals: the server's own (`crate::game`).
    pub(super) game: Game,
    /// The game's lost effects and bad inputs already reported.
    pub(super) game_faults_seen: u64,
    pub(super) cells: Vec<Cell>,
    pub(super) proxies: Vec<Proxy>,
    pub(super) clients: Vec<Client>,
    /// Per entity: its client's view, fed with the view batches delivered.
    pub(super) views: Vec<ClientView>,
    /// Per entity: the last view body its client got (kind byte first;
    /// for fault tests).
    pub(super) last_view_batch: Vec<Option<Arc<[u8]>>>,
    pub(super) net: SimNet,
    pub(super) router: Router,
    pub(super) rng: Rng,
    pub(super) bot_rng: Rng,
    pub(super) checker: Checker,
    pub(super) trace: Trace<SimEvent>,
    pub(super) tick: u64,
    /// Per entity: `Onload`s on the network (or in the backlog).
    pub(super) onloads_in_flight: Vec<u32>,
    /// Per cell: `Onload`s on their way to it.
    pub(super) onloads_to_cell: Vec<u32>,
    /// Per entity: the cell holding its real, as of the last check.
    pub(super) real_cell: Vec<Option<CellId>>,
    /// Per entity: the position last given to its real.
    pub(super) real_pos: Vec<Vec3>,
    /// Per entity: script-call changes waiting for the real to land (a
    /// call run in a drain after a teleport input moved the real away).
    pub(super) pending: Vec<u32>,
    /// Per entity: the highest input seq its real acknowledged (in a reply,
    /// or owed to ride a view batch), and the highest its client got.
    pub(super) acks: Vec<(u64, u64)>,
    /// Downstream messages to lose on the way to each client (tests that
    /// break the downstream on purpose, [`World::lose_downstream`]).
    pub(super) lose_down: Vec<u32>,
    /// Inputs to lose on their way from each proxy to its real (tests,
    /// [`World::lose_upstream`]).
    pub(super) lose_up: Vec<u32>,
    /// Per entity: its property counter (the ghost-visible state).
    pub(super) props: Vec<u64>,
    pub(super) stats: WorldStats,
    scratch_counts: Vec<u32>,
    pub(super) split_done: bool,
    /// Test faults: cells ticking with a corrupt replica of the layout
    /// (`world_faults.rs`). Empty in every real run.
    pub(super) layout_faults: Vec<(CellId, crate::sim::world_faults::LayoutFault)>,
}

/// The `hp` every avatar starts with (script calls count up from it;
/// combat damage of 1 per hit never kills in a run).
pub const HP_BASE: i64 = 1_000_000;

/// `cells = nx * nz` with `nx >= nz` and `nz` the largest divisor `<= sqrt`.
pub fn grid_dims(cells: u32) -> (u32, u32) {
    let mut nz = (f64::from(cells).sqrt() as u32).max(1);
    while cells % nz != 0 {
        nz -= 1;
    }
    (cells / nz, nz)
}

impl World {
    /// Builds the world `options` describe: layout, cells, entities with
    /// their reals, proxies and bots.
    ///
    /// # Errors
    /// Invalid options, cell or proxy parameters.
    pub fn new(options: &SimOptions, params: &WorldParams) -> Result<World, WorldError> {
        options.validate()?;
        let params = params.for_options(options);
        params.cell.validate()?;
        let (nx, nz) = grid_dims(options.cells);
        // Cells at least 4 ghost radii wide (the config rule): the world
        // grows rather than the radius shrinking.
        let side = (options.world_side_m / f64::from(nx)).max(4.0 * params.cell.ghost_radius_m);
        let grid = SimLayout::new(nx, nz, side);
        let mut rng = Rng::new(options.seed);
        let net = Net::new(options.net_params(), rng.fork())?;
        let mut plan_rng = rng.fork();
        let bot_rng = rng.fork();
        let plan = ScenarioPlan::new(options, &grid, &params.cell, &mut plan_rng);
        let (layout, balance) = if options.scenario.is_balanced() {
            let space = SpaceParams::for_ghost_radius(params.cell.ghost_radius_m);
            let tree =
                initial_tree(grid.world(), space, options.cells, options.shards).map_err(|e| {
                    OptionsError::Invalid {
                        field: "cells",
                        reason: format!("the space tree refuses the world: {e}"),
                    }
                })?;
            let b = SimBalance::new(&tree, options.shards, &params.balance, SimCost::default())?;
            (WorldLayout::Tree(tree), Some(b))
        } else {
            (WorldLayout::Grid(grid), None)
        };
        let types = Arc::new(TypeRegistry::with_builtins());
        let avatar = types.get(AVATAR).expect("built-in avatar");
        let hp_index = avatar.prop_index("hp").expect("avatars have hp");
        let status = avatar.prop_index("status").expect("avatars have status");
        let status_index = u16::try_from(status).expect("a small schema");
        let mut game = Game::new(&types);
        game.set_reporting(true);
        let cells = (0..layout.cell_count())
            .map(|c| {
                let views = params.views.clone();
                Cell::with_views(CellId(c), params.cell.clone(), views, types.clone())
            })
            .collect::<Result<Vec<_>, _>>()?;
        let n = options.entities as usize;
        let mut world = World {
            options: options.clone(),
            checker: Checker::new(options.seed, n, params.violations_max),
            trace: Trace::new(params.event_log_len_max),
            params,
            replicas: Replicas::new(&layout, options.shards),
            retired_holding: BTreeMap::new(),
            layout,
            balance,
            types,
            hp_index,
            status_index,
            game,
            game_faults_seen: 0,
            cells,
            proxies: Vec::with_capacity(n),
            clients: Vec::with_capacity(n),
            views: Vec::new(),
            last_view_batch: vec![None; n],
            net,
            router: Router::default(),
            rng,
            bot_rng,
            tick: 0,
            onloads_in_flight: vec![0; n],
            onloads_to_cell: Vec::new(),
            real_cell: vec![None; n],
            real_pos: Vec::with_capacity(n),
            pending: vec![0; n],
            acks: vec![(0, 0); n],
            lose_down: vec![0; n],
            lose_up: vec![0; n],
            props: vec![0; n],
            stats: WorldStats::default(),
            scratch_counts: Vec::new(),
            split_done: false,
            layout_faults: Vec::new(),
            plan,
        };
        world.onloads_to_cell = vec![0; world.cells.len()];
        world.views = crate::sim::world_view::new_views(&world, n);
        world.spawn_all()?;
        Ok(world)
    }

    fn spawn_all(&mut self) -> Result<(), WorldError> {
        let bots = std::mem::take(&mut self.plan.bots);
        for (i, bot) in bots.into_iter().enumerate() {
            let e = EntityId(i as u64);
            let pos = bot.pose.pos;
            let c = self.layout.cell_at(pos).expect("bots start in the world");
            let avatar = self.types.get(AVATAR).expect("built-in avatar").clone();
            let mut entity = Entity::new_real(e, avatar, pos, 0.0);
            entity
                .props_mut()
                .set(self.hp_index, self.hp_value(e))
                .expect("hp is an int");
            // Two factions, so combat bots have enemies (CombatStorm).
            let faction = entity.props().entity_type().prop_index("faction");
            let faction = faction.expect("avatars have a faction");
            entity
                .props_mut()
                .set(faction, Value::UInt(i as u64 % 2))
                .expect("faction is a uint");
            self.cells[c.0 as usize]
                .create_real(Time::ZERO, entity, true, 0)
                .expect("a fresh entity spawns");
            self.proxies
                .push(Proxy::new(e, c, 0, self.params.proxy.clone())?);
            self.clients.push(Client {
                bot,
                hook: Box::new(DownstreamOrder::default()),
                seq: 0,
            });
            self.real_cell[i] = Some(c);
            self.real_pos.push(pos);
            self.checker.on_real_cell(e, Some(c));
        }
        Ok(())
    }

    /// Replaces what entity `e`'s client does with the bytes its proxy
    /// delivers (observers plug in here).
    ///
    /// # Panics
    /// If `e` is not an entity of this world.
    pub fn set_client_hook(&mut self, e: EntityId, hook: Box<dyn ClientHook>) {
        self.clients[e.0 as usize].hook = hook;
    }

    /// The current tick.
    pub fn tick(&self) -> u64 {
        self.tick
    }

    /// The simulated time of the current tick.
    pub fn now(&self) -> Time {
        Time::from_millis(self.tick * self.options.tick_ms)
    }

    /// True while faults and inputs are injected (phase one).
    pub fn in_phase_one(&self) -> bool {
        self.tick < self.options.ticks
    }

    /// The cells, indexed by id (retired ones included).
    pub fn cells(&self) -> &[Cell] {
        &self.cells
    }

    /// Mutable cells, for tests that break an invariant on purpose.
    pub fn cells_mut(&mut self) -> &mut [Cell] {
        &mut self.cells
    }

    /// Sends `msg` to cell `to` as if `from` had sent it this tick (through
    /// the network, after everything already queued on that pair). For tests
    /// that break an invariant on purpose, to prove the checker notices.
    pub fn inject(&mut self, from: Source, to: CellId, msg: CellMsg) {
        let src = match from {
            Source::Cell(c) => Endpoint::Shard(self.cell_shard(c)),
            Source::Proxy(e) => Endpoint::Shard(self.proxy_shard(e)),
            Source::Local => Endpoint::Shard(self.cell_shard(to)),
        };
        self.route_to_cell(src, from, to, msg);
    }

    /// Sends `msg` to its entity's proxy as if a real had sent it from
    /// `from`'s shard this tick. For tests that break an invariant on
    /// purpose, to prove the checker notices.
    pub fn inject_proxy(&mut self, from: CellId, msg: crate::core::cell::ProxyMsg) {
        let e = match &msg {
            crate::core::cell::ProxyMsg::RealMoved { entity, .. }
            | crate::core::cell::ProxyMsg::Downstream { entity, .. } => *entity,
        };
        let src = Endpoint::Shard(self.cell_shard(from));
        let dst = Endpoint::Shard(self.proxy_shard(e));
        self.router
            .push(src, dst, crate::sim::world_route::Packet::Proxy(msg));
    }

    /// Loses the next `n` downstream messages (view batches, acks) on their
    /// way to `e`'s client, as a broken transport would. For tests that
    /// prove the checker notices.
    ///
    /// # Panics
    /// If `e` is not an entity of this world.
    pub fn lose_downstream(&mut self, e: EntityId, n: u32) {
        self.lose_down[e.0 as usize] += n;
    }

    /// Where the real of `e` was at the end of the last step (`None` while
    /// its `Onload` is in flight).
    pub fn real_cell(&self, e: EntityId) -> Option<CellId> {
        self.real_cell[e.0 as usize]
    }

    /// The layout.
    pub fn layout(&self) -> &WorldLayout {
        &self.layout
    }

    /// Tree mode: the balancer's counters.
    pub fn balance_stats(&self) -> Option<crate::sim::world_balance::BalanceStats> {
        self.balance.as_ref().map(|b| b.stats())
    }

    /// The checker.
    pub fn checker(&self) -> &Checker {
        &self.checker
    }

    /// The world's own counters.
    pub fn stats(&self) -> WorldStats {
        self.stats
    }

    /// The options the world runs (as validated).
    pub fn options(&self) -> &SimOptions {
        &self.options
    }

    /// The cell parameters in force (after [`WorldParams::for_options`]).
    pub fn cell_params(&self) -> &CellParams {
        &self.params.cell
    }

    /// The trace hash so far.
    pub fn trace_hash(&self) -> u64 {
        self.trace.hash()
    }

    /// The shard hosting cell `c`.
    pub fn cell_shard(&self, c: CellId) -> ShardId {
        if let Some(b) = &self.balance {
            return b.shard_of(c);
        }
        ShardId::local((c.0 % u32::from(self.options.shards)) as u16)
    }

    /// Whether cell `c` runs this step: its shard is not stalled, and a
    /// split's new cell runs once its shard has applied the split.
    fn cell_runs(&self, now: Time, c: CellId) -> bool {
        let shard = self.cell_shard(c);
        !self.net.is_stalled(Endpoint::Shard(shard), now)
            && self.replicas.knows(&self.layout, shard, c)
    }

    /// The shard hosting the proxy of `e`.
    pub fn proxy_shard(&self, e: EntityId) -> ShardId {
        ShardId::local((e.0 % u64::from(self.options.shards)) as u16)
    }

    /// The `hp` script calls give `e` now (its change counter).
    /// Offset by [`HP_BASE`] so the avatar is alive for combat.
    pub(super) fn hp_value(&self, e: EntityId) -> Value {
        Value::Int(HP_BASE + self.props[e.0 as usize] as i64)
    }

    /// Records `ev` in the trace (hash and log).
    pub(super) fn record(&mut self, ev: SimEvent) {
        self.trace.record(self.tick, ev);
    }

    /// Runs one tick (see the module doc).
    pub fn step(&mut self) {
        let now = self.now();
        let faulty = self.in_phase_one();
        self.scenario_actions();
        if faulty {
            self.clients_act(now);
        }
        self.deliver(now);
        // As the server's host does: every running cell runs its inputs,
        // the server's game applies them (the reals are all still here),
        // then every cell publishes (syncs, views, migrations) and the
        // game sees what that half reported.
        let running: Vec<usize> = (0..self.cells.len())
            .filter(|&c| self.cell_runs(now, CellId(c as u32)))
            .collect();
        for &c in &running {
            self.cells[c].run_inputs(now);
        }
        self.drain_events(now);
        for &c in &running {
            let shard = self.cell_shard(CellId(c as u32));
            let layout = self.replicas.layout(&self.layout, shard);
            let id = CellId(c as u32);
            match self.layout_fault(id) {
                None => self.cells[c].publish(now, layout),
                Some(fault) => {
                    let faulty = crate::sim::world_faults::FaultyLayout {
                        inner: layout,
                        cell: id,
                        fault,
                    };
                    self.cells[c].publish(now, &faulty);
                }
            }
            if let Some(b) = &mut self.balance {
                b.charge_cell(CellId(c as u32), self.cells[c].entity_count());
            }
        }
        self.drain_events(now);
        if faulty {
            self.issue_calls(now);
            self.issue_hits(now);
            self.drain_events(now);
        }
        self.collect_outputs();
        self.router.flush(now, &mut self.net);
        if faulty {
            self.draw_stalls(now);
        }
        self.retire_drained();
        if !faulty {
            // Layout changes stop with the faults (started merges finish):
            // phase two must quiesce.
            if let Some(b) = &mut self.balance {
                b.freeze();
            }
        }
        self.balance_round(now);
        self.check_residency();
        #[cfg(feature = "verify")]
        self.net.verify();
        self.tick += 1;
    }

    /// Runs both phases (stopping early after a step with a violation),
    /// then the convergence checks; returns the run's summary.
    pub fn run(&mut self) -> SimSummary {
        let total = self.options.ticks + self.options.heal_ticks;
        while self.tick < total && self.checker.total() == 0 {
            self.step();
        }
        self.finish()
    }

    /// Ends a run: the convergence checks (if nothing broke before), then
    /// context for the violations; returns the summary.
    pub fn finish(&mut self) -> SimSummary {
        if self.checker.total() == 0 {
            self.check_converged();
        }
        self.add_context();
        self.summary()
    }

    fn draw_stalls(&mut self, now: Time) {
        if self.options.stall_probability <= 0.0 {
            return;
        }
        for s in 0..self.options.shards {
            let shard = Endpoint::Shard(ShardId::local(s));
            if self.net.is_stalled(shard, now) || !self.rng.bool(self.options.stall_probability) {
                continue;
            }
            let ms = self.rng.range(1, self.options.stall_ms_max);
            let until = now + std::time::Duration::from_millis(ms);
            self.net.stall(shard, until);
            self.stats.stalls += 1;
            self.record(SimEvent::Stall { shard: s, until });
        }
    }

    fn check_residency(&mut self) {
        let mut reals = std::mem::take(&mut self.scratch_counts);
        reals.clear();
        reals.resize(self.real_cell.len(), 0);
        for slot in &mut self.real_cell {
            *slot = None;
        }
        for cell in &self.cells {
            for e in cell.reals() {
                reals[e.0 as usize] += 1;
                self.real_cell[e.0 as usize] = Some(cell.id());
            }
        }
        self.checker
            .check_reals(self.tick, &reals, &self.onloads_in_flight);
        self.scratch_counts = reals;
        self.check_retired();
    }

    /// A retired cell holds no real; in tree mode, a straggler (handed over
    /// by a shard that had not applied the merge yet) may pass through it
    /// for at most [`RETIRED_DRAIN_MS`].
    fn check_retired(&mut self) {
        let now = self.now();
        let grace = if self.replicas.is_active() {
            RETIRED_DRAIN_MS
        } else {
            0
        };
        for c in 0..self.cells.len() {
            let id = CellId(c as u32);
            if !self.layout.is_retired(id) || self.cells[c].reals().is_empty() {
                self.retired_holding.remove(&id);
                continue;
            }
            let since = *self.retired_holding.entry(id).or_insert_with(|| {
                self.stats.retired_stragglers += 1;
                now
            });
            if now.saturating_since(since).as_millis() as u64 >= grace {
                let d = format!("retired cell {id} holds reals {:?}", self.cells[c].reals());
                self.checker
                    .report(self.tick, ViolationKind::MergeNotDrained, None, d);
            }
        }
    }

    /// The run's summary so far.
    pub fn summary(&self) -> SimSummary {
        let mut s = SimSummary {
            seeds: 1,
            ticks: self.tick,
            violations: self.checker.total(),
            trace_hash: self.trace.hash(),
            ..SimSummary::default()
        };
        if s.violations > 0 {
            s.failed_seeds.push(self.options.seed);
        }
        let mut shard_work = vec![0u64; usize::from(self.options.shards)];
        for c in &self.cells {
            let k = c.counters();
            s.migrations += k.migrations_in;
            s.forwarded += k.forwards;
            s.max_reorder_buffer = s.max_reorder_buffer.max(k.reorder_buffered_max);
            s.max_cache_len = s.max_cache_len.max(k.sync_cache_len_max);
            s.ghosts_created += k.ghosts_created;
            s.ghost_syncs_applied += k.syncs_applied;
            s.view_bytes += k.view_bytes;
            s.view_updates += k.view_updates;
            s.view_detail_cut += k.view_detail_cut;
            s.view_details += k.view_details;
            s.view_visits += k.view_visits;
            s.view_quiet += k.view_quiet;
            let shard = usize::from(self.cell_shard(c.id()).index);
            if let Some(w) = shard_work.get_mut(shard) {
                *w += k.inputs_applied + k.syncs_built + k.syncs_applied;
            }
        }
        s.crossings = self.checker.crossings();
        let work_total: u64 = shard_work.iter().sum();
        if work_total > 0 {
            let mean = work_total as f64 / shard_work.len() as f64;
            let busiest = shard_work.iter().copied().max().unwrap_or(0);
            s.load_spread_max = busiest as f64 / mean;
        }
        if let Some(b) = &self.balance {
            let st = b.stats();
            s.splits = st.splits;
            s.merges = st.merges;
            s.rebalances = st.rebalances;
            s.boundary_reversals = st.reversals;
            s.boundary_reversals_max = st.reversals_max;
            let r = self.replicas.stats();
            s.replica_changes = r.changes_applied;
            s.parked_messages = r.parked;
            s.replica_lag_max = r.lag_versions_max;
            s.replica_lag_us_max = r.lag_us_max;
            s.retired_stragglers = self.stats.retired_stragglers;
        }
        let n = self.net.stats();
        s.messages_delivered = n.delivered;
        s.messages_rejected_full = n.rejected_full;
        s.max_in_flight = n.max_in_flight;
        s.max_delay_us = n.max_delay_us;
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_dims_factor_exactly_wide_side_first() {
        assert_eq!(grid_dims(1), (1, 1));
        assert_eq!(grid_dims(8), (4, 2));
        assert_eq!(grid_dims(16), (4, 4));
        assert_eq!(grid_dims(7), (7, 1));
        assert_eq!(grid_dims(12), (4, 3));
        for c in 1..200 {
            let (nx, nz) = grid_dims(c);
            assert_eq!(nx * nz, c);
            assert!(nx >= nz);
        }
    }

    #[test]
    fn a_small_world_runs_clean_and_replays() {
        let o = SimOptions::test_min();
        let p = WorldParams::default();
        let mut a = World::new(&o, &p).expect("world");
        let sa = a.run();
        assert_eq!(sa.violations, 0, "{:?}", a.checker().violations());
        let mut b = World::new(&o, &p).expect("world");
        assert_eq!(b.run().trace_hash, sa.trace_hash);
    }
}
