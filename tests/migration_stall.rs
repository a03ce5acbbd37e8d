//! Issue 21, "the migration stall", at the level of cells and a proxy: one
//! avatar walks from cell 0 into cell 1 with a move every second tick (the
//! bots of README's main command: a move every 100 ms, 50 ms ticks), and
//! the test counts the ticks between the own updates its client receives.
//!
//! The fixture runs the cells and the proxy in the phases of the server's
//! host (`server/host.rs`): at a shard's tick, what reached it is delivered,
//! the proxy stamps the client's move, same-shard messages are delivered,
//! the shard's cells run their inputs, apply the moves (the game) and
//! publish, same-shard messages are delivered again (view batches reach the
//! proxy) and the client gets what the proxy released. A message to another
//! shard is read at that shard's next tick start, with the shards' ticks
//! offset as the runtime offsets them ([`tessera::runtime::tick_offset`]):
//! a shard that ticks later in the same period reads it in that period, one
//! that ticked already in the next.
//!
//! Checked: every move is applied once, in order, and gets exactly one own
//! update; all on one shard, the own stream keeps its spacing exactly
//! across the migration (the cells add no stall); across shards, it is at
//! most one tick late (the proxy stays on its shard, so the input and the
//! update each cross the mesh once per round trip).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tessera::core::aoi::AoiParams;
use tessera::core::cell::{
    Cell, CellEvent, CellParams, Dest, GridLayout, Msg, Outgoing, Source, ViewParams,
};
use tessera::core::down::{self, DownKind};
use tessera::core::entity::{Entity, TypeRegistry, AVATAR};
use tessera::core::geom::Vec3;
use tessera::core::ids::{CellId, EntityId};
use tessera::core::proxy::{Proxy, ProxyParams};
use tessera::core::time::Time;
use tessera::core::view::{BatchReader, ClientEvent};
use tessera::runtime::tick_offset;

const TICK: Duration = Duration::from_millis(50);
const AVATAR_ID: EntityId = EntityId(7);

/// A routed message, stamped with when it was sent (step, sender's offset).
struct Routed {
    sent: (u64, Duration),
    from: Source,
    to: Dest,
    msg: Msg,
}

/// Two cells, one proxy, shards as the fixture places them.
struct World {
    layout: GridLayout,
    cells: BTreeMap<CellId, Cell>,
    proxy: Proxy,
    /// Shard of each cell; the proxy is on shard 0.
    shard_of: BTreeMap<CellId, usize>,
    offsets: Vec<Duration>,
    /// Per shard: messages from other shards, in send order.
    inbound: Vec<Vec<Routed>>,
    /// Same-shard messages not delivered yet.
    local: Vec<Routed>,
    step: u64,
    now: Time,
    /// Client input sequence numbers applied, in order.
    applied: Vec<u64>,
    /// Steps in which the client received own updates, and how many.
    own: Vec<(u64, u64)>,
}

fn view_params(layout: &GridLayout) -> ViewParams {
    ViewParams {
        aoi: AoiParams {
            world: layout.world(),
            grid_cell_m: 25.0,
            ..AoiParams::default()
        },
        radius_m: 20.0,
        leave_radius_m: 22.0,
        ..ViewParams::default()
    }
}

fn cell_params() -> CellParams {
    CellParams {
        ghost_radius_m: 30.0,
        ghost_keep_margin_m: 10.0,
        migrate_margin_m: 8.0,
        // The server's default: a migration check every fourth tick.
        check_period_ms: 200,
        ..CellParams::default()
    }
}

impl World {
    /// Cell 0 on shard 0 with the avatar's proxy; cell 1 on `shard_of_1`;
    /// `shards` shards ticking at `offsets`.
    fn new(shard_of_1: usize, offsets: Vec<Duration>) -> World {
        let layout = GridLayout::new(2, 1, 100.0);
        let types = Arc::new(TypeRegistry::with_builtins());
        let vp = view_params(&layout);
        let cells: BTreeMap<CellId, Cell> = layout
            .cells()
            .map(|c| {
                let cell = Cell::with_views(c, cell_params(), vp.clone(), types.clone());
                (c, cell.expect("params"))
            })
            .collect();
        let mut w = World {
            layout,
            cells,
            proxy: Proxy::new(AVATAR_ID, CellId(0), 0, ProxyParams::default()).expect("proxy"),
            shard_of: BTreeMap::from([(CellId(0), 0), (CellId(1), shard_of_1)]),
            inbound: (0..offsets.len()).map(|_| Vec::new()).collect(),
            offsets,
            local: Vec::new(),
            step: 0,
            now: Time::from_millis(1000),
            applied: Vec::new(),
            own: Vec::new(),
        };
        let ty = types.get(AVATAR).expect("avatar").clone();
        let avatar = Entity::new_real(AVATAR_ID, ty, Vec3::ground(90.0, 50.0), 0.0);
        let now = w.now;
        let cell = w.cells.get_mut(&CellId(0)).expect("cell 0");
        cell.create_real(now, avatar, true, 0).expect("spawn");
        w.drain_cell(0, CellId(0));
        w
    }

    fn shard_of(&self, to: Dest) -> usize {
        match to {
            Dest::Cell(c) => self.shard_of[&c],
            Dest::Proxy(_) => 0,
        }
    }

    fn route(&mut self, shard: usize, from: Source, o: Outgoing) {
        let to_shard = self.shard_of(o.to);
        let r = Routed {
            sent: (self.step, self.offsets[shard]),
            from,
            to: o.to,
            msg: o.msg,
        };
        if to_shard == shard {
            self.local.push(r);
        } else {
            self.inbound[to_shard].push(r);
        }
    }

    fn drain_cell(&mut self, shard: usize, c: CellId) {
        let cell = self.cells.get_mut(&c).expect("cell");
        let outs: Vec<Outgoing> = std::iter::from_fn(|| cell.poll_output()).collect();
        for o in outs {
            self.route(shard, Source::Cell(c), o);
        }
    }

    fn drain_proxy(&mut self) {
        while let Some(o) = self.proxy.poll_output() {
            self.route(0, Source::Proxy(AVATAR_ID), o);
        }
        let mut own = 0;
        while let Some((_, body)) = self.proxy.poll_client() {
            let Ok((DownKind::View, batch)) = down::split(&body) else {
                panic!("not a view body");
            };
            for ev in BatchReader::new(batch) {
                let ev = ev.expect("a valid batch");
                own += u64::from(matches!(
                    ev,
                    ClientEvent::Own { .. } | ClientEvent::OwnMove { .. }
                ));
            }
        }
        if own > 0 {
            self.own.push((self.step, own));
        }
    }

    fn deliver(&mut self, r: Routed) {
        match (r.to, r.msg) {
            (Dest::Cell(c), Msg::Cell(m)) => self
                .cells
                .get_mut(&c)
                .expect("cell")
                .handle(self.now, r.from, m),
            (Dest::Proxy(_), Msg::Proxy(m)) => self.proxy.handle(self.now, m).expect("ours"),
            (to, msg) => panic!("mismatched message to {to:?}: {msg:?}"),
        }
    }

    fn deliver_local(&mut self) {
        for r in std::mem::take(&mut self.local) {
            self.deliver(r);
        }
    }

    /// One tick of `shard`; `mv` is the client's move read in it.
    fn tick_shard(&mut self, shard: usize, mv: Option<Vec3>) {
        let me = (self.step, self.offsets[shard]);
        let (ready, later): (Vec<Routed>, Vec<Routed>) = std::mem::take(&mut self.inbound[shard])
            .into_iter()
            .partition(|r| r.sent.0 < me.0 || (r.sent.0 == me.0 && r.sent.1 < me.1));
        self.inbound[shard] = later;
        self.deliver_local();
        ready.into_iter().for_each(|r| self.deliver(r));
        if let Some(p) = mv.filter(|_| shard == 0) {
            let mut data = p.x.to_le_bytes().to_vec();
            data.extend(p.z.to_le_bytes());
            self.proxy.send_input(self.now, data.into());
            self.drain_proxy();
        }
        self.deliver_local();
        let here: Vec<CellId> = (self.shard_of.iter())
            .filter(|(_, &s)| s == shard)
            .map(|(&c, _)| c)
            .collect();
        for &c in &here {
            let now = self.now;
            let cell = self.cells.get_mut(&c).expect("cell");
            cell.run_inputs(now);
            while let Some(ev) = cell.poll_event() {
                if let CellEvent::InputApplied { entity, seq, data } = ev {
                    let x = f64::from_le_bytes(data[..8].try_into().expect("x"));
                    let z = f64::from_le_bytes(data[8..16].try_into().expect("z"));
                    cell.move_real(entity, Vec3::ground(x, z)).expect("real");
                    self.applied.push(seq);
                }
            }
            cell.publish(now, &self.layout);
            while cell.poll_event().is_some() {}
            self.drain_cell(shard, c);
        }
        self.deliver_local();
        if shard == 0 {
            self.drain_proxy();
        }
    }

    /// One period: every shard ticks, in offset order.
    fn period(&mut self, mv: Option<Vec3>) {
        let mut order: Vec<usize> = (0..self.offsets.len()).collect();
        order.sort_by_key(|&s| (self.offsets[s], s));
        for s in order {
            self.tick_shard(s, mv);
        }
        self.step += 1;
        self.now = self.now + TICK;
    }

    fn real_at(&self) -> Vec<CellId> {
        (self.cells.iter())
            .filter(|(_, c)| c.reals().contains(&AVATAR_ID))
            .map(|(&id, _)| id)
            .collect()
    }
}

/// Walks the avatar from x = 90 to x = 120 (migrating at x > 108), 1 m
/// every second tick; returns the ticks between own updates after the
/// first move, and checks the inputs and the own stream.
fn walk(shard_of_1: usize, offsets: Vec<Duration>) -> Vec<u64> {
    let mut w = World::new(shard_of_1, offsets);
    w.period(None);
    w.period(None);
    let start = w.step;
    let mut x = 90.0;
    let mut moves = 0;
    while x < 120.0 || w.step < start + 2 * 30 + 6 {
        let mv = (x < 120.0 && (w.step - start) % 2 == 0).then(|| {
            x += 1.0;
            moves += 1;
            Vec3::ground(x, 50.0)
        });
        w.period(mv);
    }
    assert_eq!(w.real_at(), vec![CellId(1)], "the real migrated");
    let want: Vec<u64> = (1..=moves).collect();
    assert_eq!(w.applied, want, "every move applied once, in order");
    let own: Vec<(u64, u64)> = w.own.iter().copied().filter(|o| o.0 >= start).collect();
    assert!(
        own.iter().all(|o| o.1 == 1),
        "one own update per move, never two in a batch: {own:?}"
    );
    assert_eq!(own.len() as u64, moves, "an own update for every move");
    own.windows(2).map(|p| p[1].0 - p[0].0).collect()
}

#[test]
fn on_one_shard_the_own_stream_keeps_its_spacing_across_a_migration() {
    let gaps = walk(0, vec![Duration::ZERO]);
    assert!(gaps.iter().all(|&g| g == 2), "{gaps:?}");
}

#[test]
fn across_shards_the_own_stream_is_at_most_one_tick_late_after_a_migration() {
    let offsets = (0..2).map(|s| tick_offset(s, 2, TICK)).collect();
    let gaps = walk(1, offsets);
    assert_eq!(gaps.iter().max(), Some(&3), "{gaps:?}");
    assert_eq!(gaps.iter().filter(|&&g| g != 2).count(), 1, "{gaps:?}");
}

#[test]
fn on_one_tick_grid_for_all_shards_the_first_move_after_the_migration_was_two_ticks_late() {
    let gaps = walk(1, vec![Duration::ZERO; 2]);
    assert_eq!(gaps.iter().max(), Some(&4), "{gaps:?}");
}
