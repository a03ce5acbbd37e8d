//! The world's moving parts: clients sending inputs, delivery, routing of
//! outputs, the entity logic run at reals, calls, and layout changes.
//!
//! # Entity logic and the "effect after offload" gap
//!
//! A cell reports an applied input as [`CellEvent::InputApplied`] from
//! inside `tick`, but the same `tick` may then offload the real (the
//! migration check runs after the inputs). The effect (move, property
//! change, downstream ack) can then no longer be applied where the input
//! was: the world keeps it as a pending [`Effect`] and applies it when the
//! real lands ([`CellEvent::BecameReal`]). Positions are absolute, so a
//! later input's position wins; acks keep their order.
//!
//! Owns nothing beyond the `impl World` steps.

use std::sync::Arc;

use crate::core::cell::{
    Call, CallKind, CellEvent, CellMsg, Dest, Layout, Msg, Residency, Source, ToReal, ToRealBody,
};
use crate::core::combat::CombatEvent;
use crate::core::geom::Vec3;
use crate::core::ids::{CellId, EntityId, ShardId};
use crate::core::space::ChangeOp;
use crate::core::time::Time;
use crate::sim::bots::Behaviour;
use crate::sim::net::Endpoint;
use crate::sim::report::ViolationKind;
use crate::sim::world::{Effect, World};
use crate::sim::world_balance::WorldLayout;
use crate::sim::world_client::{decode_ack, encode_ack};
use crate::sim::world_event::SimEvent;
use crate::sim::world_replicas::Parked;
use crate::sim::world_route::Packet;

pub use crate::core::input::{decode_move, encode_move};

impl World {
    /// Every client steps its bot and sends its position to its proxy.
    pub(super) fn clients_act(&mut self, now: Time) {
        let world = self.layout.world();
        let t_s = now.as_micros() as f64 / 1e6;
        let dt_s = self.options.tick_ms as f64 / 1e3;
        for i in 0..self.clients.len() {
            let e = EntityId(i as u64);
            let step = self.clients[i]
                .bot
                .step(&mut self.bot_rng, &world, t_s, dt_s);
            let data = encode_move(step.pose.pos, step.teleported);
            let to = Endpoint::Shard(self.proxy_shard(e));
            self.router.push(
                Endpoint::Client(i as u32),
                to,
                Packet::Input { entity: e, data },
            );
            self.stats.inputs_sent += 1;
            self.stats.teleports += u64::from(step.teleported);
        }
    }

    /// Delivers everything due by `now`.
    pub(super) fn deliver(&mut self, now: Time) {
        while let Some(d) = self.net.poll_delivery(now) {
            let ev = SimEvent::Delivered {
                from: d.from,
                to: d.to,
                seq: d.seq,
                packets: d.msg.len() as u32,
            };
            self.record(ev);
            let to = d.to;
            let mut batch = d.msg;
            for p in batch.drain(..) {
                match (p, to) {
                    (Packet::Change { change, sent }, Endpoint::Shard(shard)) => {
                        let lag_us = now.saturating_since(sent).as_micros() as u64;
                        self.replicas
                            .apply(shard, &change, self.layout.version(), lag_us);
                        if let ChangeOp::StartMerge { cell } = change.op {
                            // Its shard learns of the merge only now: the
                            // reals it holds leave without crossing.
                            if self.cell_shard(cell) == shard {
                                for e in self.cells[i_cell(cell)].reals() {
                                    self.checker.excuse_migration(e);
                                }
                            }
                        }
                        self.unpark(now, shard);
                    }
                    (p, _) => self.dispatch(now, p),
                }
            }
            self.router.recycle(batch);
        }
    }

    /// Tree mode: `shard` applied a change; it handles the messages parked
    /// for the cells it now knows.
    fn unpark(&mut self, now: Time, shard: ShardId) {
        let mut ready = Vec::new();
        self.replicas.unpark(&self.layout, shard, &mut ready);
        for p in ready {
            self.handle_cell_msg(now, p.from, p.to, p.msg);
        }
    }

    fn handle_cell_msg(&mut self, now: Time, from: Source, to: CellId, msg: CellMsg) {
        if let CellMsg::Onload(o) = &msg {
            let e = o.entity;
            if o.layout_version < Layout::version(&self.layout) {
                // Decided under a replica that lagged the service's tree:
                // borders the checker's (current) layout no longer has.
                self.checker.excuse_migration(e);
            }
            self.onloads_in_flight[e.0 as usize] -= 1;
            self.onloads_to_cell[to.0 as usize] -= 1;
            let before = self.cells[to.0 as usize].residency(e);
            self.checker.on_onload(self.tick, to, e, before);
            let leaving = self.layout.is_merging(to) || self.layout.is_retired(to);
            if self.replicas.is_active() && leaving {
                // Handed to a merging cell by a shard that had not heard of
                // the merge, or still in flight when the merge finished: it
                // must leave again without crossing.
                self.checker.excuse_departure(e);
            }
        }
        self.cells[to.0 as usize].handle(now, from, msg);
    }

    fn dispatch(&mut self, now: Time, p: Packet) {
        match p {
            Packet::Cell { from, to, msg } => {
                let shard = self.cell_shard(to);
                if self.replicas.knows(&self.layout, shard, to) {
                    self.handle_cell_msg(now, from, to, msg);
                } else {
                    self.replicas.park(Parked {
                        shard,
                        from,
                        to,
                        msg,
                    });
                }
            }
            Packet::Change { .. } => unreachable!("changes go to shards"),
            Packet::Proxy(msg) => {
                let e = match &msg {
                    crate::core::cell::ProxyMsg::RealMoved { entity, .. }
                    | crate::core::cell::ProxyMsg::Downstream { entity, .. } => *entity,
                };
                if let Err(err) = self.proxies[e.0 as usize].handle(now, msg) {
                    let d = format!("proxy refused a message: {err}");
                    self.checker
                        .report(self.tick, ViolationKind::HarmfulDrop, Some(e), d);
                }
            }
            Packet::Input { entity, data } => {
                self.proxies[entity.0 as usize].send_input(now, data);
            }
            Packet::Down { entity, seq, data } => {
                let lose = &mut self.lose_down[entity.0 as usize];
                if *lose > 0 {
                    *lose -= 1;
                    return;
                }
                let tick = self.tick;
                if decode_ack(&data).is_some() {
                    self.acks[entity.0 as usize].1 += 1;
                } else {
                    self.feed_view(entity, &data);
                }
                if let Err(d) = self.clients[entity.0 as usize]
                    .hook
                    .on_downstream(tick, seq, &data)
                {
                    self.checker
                        .report(tick, ViolationKind::DownstreamBroken, Some(entity), d);
                }
            }
        }
    }

    /// Drains every cell's events (again and again: the logic's effects may
    /// raise more) into the checker and the entity logic.
    pub(super) fn drain_events(&mut self, now: Time) {
        let mut events = std::mem::take(&mut self.scratch_events);
        loop {
            events.clear();
            for cell in &mut self.cells {
                let id = cell.id();
                while let Some(ev) = cell.poll_event() {
                    events.push((id, ev));
                }
            }
            if events.is_empty() {
                break;
            }
            for (cell, ev) in events.drain(..) {
                self.on_cell_event(now, cell, ev);
            }
        }
        self.scratch_events = events;
    }

    fn on_cell_event(&mut self, now: Time, cell: CellId, ev: CellEvent) {
        self.checker.on_event(self.tick, cell, &ev);
        match &ev {
            CellEvent::InputApplied { entity, seq, data } => {
                if let Some(b) = &mut self.balance {
                    b.charge_entity(*entity, false);
                }
                let seq = *seq;
                let mut eff = Effect {
                    pos: decode_move(data),
                    change: seq % self.plan.change_every_inputs == 0,
                    acks: Vec::new(),
                };
                if seq % self.plan.downstream_every_inputs == 0 {
                    eff.acks.push(seq);
                }
                self.apply_effect(now, cell, *entity, eff);
            }
            CellEvent::CallRun { entity, .. } => {
                if let Some(b) = &mut self.balance {
                    b.charge_entity(*entity, true);
                }
                let eff = Effect {
                    change: true,
                    ..Effect::default()
                };
                self.apply_effect(now, cell, *entity, eff);
            }
            CellEvent::BecameReal { entity, .. } => {
                if let Some(eff) = self.pending[entity.0 as usize].take() {
                    self.apply_effect(now, cell, *entity, eff);
                }
            }
            CellEvent::Combat { event, .. } => match event {
                CombatEvent::HitLanded { .. } => self.stats.hits_landed += 1,
                CombatEvent::HitExpired { .. } => self.stats.hits_expired += 1,
                _ => {}
            },
            CellEvent::BecameGhost { entity, .. } => {
                if let Some(v) = self.cells[cell.0 as usize].view(*entity) {
                    self.checker.ghost_baseline(cell, *entity, v.version);
                }
            }
            _ => {}
        }
        self.record(SimEvent::Cell { cell, event: ev });
    }

    /// Applies `eff` to `e`'s real at `cell`, or keeps it pending if the
    /// real is no longer there.
    fn apply_effect(&mut self, now: Time, cell: CellId, e: EntityId, eff: Effect) {
        let i = e.0 as usize;
        let is_real = matches!(
            self.cells[i_cell(cell)].residency(e),
            Some(Residency::Real { .. })
        );
        if !is_real {
            let p = self.pending[i].get_or_insert_with(Effect::default);
            if let Some((pos, jump)) = eff.pos {
                let was_jump = p.pos.is_some_and(|(_, j)| j);
                p.pos = Some((pos, jump || was_jump));
            }
            p.change |= eff.change;
            p.acks.extend(eff.acks);
            self.stats.deferred_effects += 1;
            self.record(SimEvent::Deferred { entity: e, cell });
            return;
        }
        if eff.change {
            self.props[i] += 1;
            let hp = self.hp_value(e);
            self.cells[i_cell(cell)]
                .real_mut(e)
                .expect("real here")
                .props_mut()
                .set(self.hp_index, hp)
                .expect("hp is an int");
        }
        for ack in eff.acks {
            self.cells[i_cell(cell)]
                .send_to_client(e, Arc::from(&encode_ack(ack)[..]))
                .expect("real with a proxy");
            self.acks[i].0 += 1;
        }
        if let Some((pos, jump)) = eff.pos {
            self.real_pos[i] = pos;
            let shard = self.cell_shard(cell);
            let c = &mut self.cells[i_cell(cell)];
            // A refused jump (into a merging cell) walks there instead.
            let layout = self.replicas.layout(&self.layout, shard);
            let jumped = jump && c.teleport(now, e, pos, layout).is_ok();
            if !jumped {
                c.move_real(e, pos).expect("real here");
            }
            let under = self.layout.cell_at(pos);
            self.checker.on_real_cell(e, under);
        }
    }

    /// Each real (on a running shard) calls a random entity it knows of
    /// with probability `call_probability`.
    pub(super) fn issue_calls(&mut self, now: Time) {
        let p = self.plan.call_probability;
        let n = self.real_cell.len() as u64;
        if p <= 0.0 || n < 2 {
            return;
        }
        for a in 0..self.real_cell.len() {
            let Some(x) = self.real_cell[a] else { continue };
            if !self.rng.bool(p) {
                continue;
            }
            let stalled = self
                .net
                .is_stalled(Endpoint::Shard(self.cell_shard(x)), now);
            let b = EntityId(self.rng.below(n));
            let known = self.cells[i_cell(x)].residency(b).is_some();
            if stalled || !known || b.0 as usize == a {
                continue;
            }
            let id = self.checker.on_call_issued(b);
            self.stats.calls_issued += 1;
            let body = ToRealBody::Call(Call {
                kind: CallKind::Game,
                id,
                data: Arc::from(&id.to_le_bytes()[..]),
            });
            let msg = CellMsg::ToReal(ToReal {
                entity: b,
                hops: 0,
                body,
            });
            self.record(SimEvent::CallIssued {
                id,
                from: x,
                target: b,
            });
            self.cells[i_cell(x)].handle(now, Source::Local, msg);
        }
    }

    /// Each real (on a running shard) with an observer tries a hit, with
    /// probability `hit_probability`, on a random entity its observer sees.
    pub(super) fn issue_hits(&mut self, now: Time) {
        let p = self.plan.hit_probability;
        if p <= 0.0 {
            return;
        }
        for a in 0..self.real_cell.len() {
            let Some(x) = self.real_cell[a] else { continue };
            if !self.rng.bool(p) {
                continue;
            }
            let stalled = self
                .net
                .is_stalled(Endpoint::Shard(self.cell_shard(x)), now);
            let attacker = EntityId(a as u64);
            let cell = &self.cells[i_cell(x)];
            let Some(obs) = cell.observer(attacker) else {
                continue;
            };
            let seen = obs.entities().count() as u64;
            if stalled || seen == 0 {
                continue;
            }
            // The nearest seen entity (hits reach `hit_range_m` only); a
            // random one a quarter of the time, so refusals happen too.
            let target = if self.rng.bool(0.25) {
                let k = self.rng.below(seen) as usize;
                obs.entities().nth(k).expect("k < seen")
            } else {
                let me = cell.view(attacker).expect("real here").pos();
                let d2 = |t: &EntityId| cell.view(*t).map_or(f64::MAX, |v| dist2(me, v.pos()));
                (obs.entities())
                    .min_by(|a, b| d2(a).total_cmp(&d2(b)))
                    .expect("seen > 0")
            };
            if self.cells[i_cell(x)]
                .try_hit(now, attacker, target, 1)
                .is_ok()
            {
                self.stats.hits_tried += 1;
            }
        }
    }

    /// Batches every cell's and proxy's outputs into the router.
    pub(super) fn collect_outputs(&mut self) {
        for c in 0..self.cells.len() {
            let id = CellId(c as u32);
            let from = Endpoint::Shard(self.cell_shard(id));
            while let Some(o) = self.cells[c].poll_output() {
                match (o.to, o.msg) {
                    (Dest::Cell(to), Msg::Cell(msg)) => {
                        self.route_to_cell(from, Source::Cell(id), to, msg)
                    }
                    (Dest::Proxy(e), Msg::Proxy(msg)) => {
                        let to = Endpoint::Shard(self.proxy_shard(e));
                        self.router.push(from, to, Packet::Proxy(msg));
                    }
                    (to, msg) => panic!("{id} addressed {msg:?} to {to:?}"),
                }
            }
        }
        for i in 0..self.proxies.len() {
            let e = EntityId(i as u64);
            let from = Endpoint::Shard(self.proxy_shard(e));
            while let Some(o) = self.proxies[i].poll_output() {
                match (o.to, o.msg) {
                    (Dest::Cell(to), Msg::Cell(msg)) => {
                        self.route_to_cell(from, Source::Proxy(e), to, msg)
                    }
                    (to, msg) => panic!("proxy of {e} addressed {msg:?} to {to:?}"),
                }
            }
            while let Some((seq, data)) = self.proxies[i].poll_client() {
                let p = Packet::Down {
                    entity: e,
                    seq,
                    data,
                };
                self.router.push(from, Endpoint::Client(i as u32), p);
            }
        }
    }

    pub(super) fn route_to_cell(&mut self, from: Endpoint, src: Source, to: CellId, msg: CellMsg) {
        if let (Source::Proxy(e), CellMsg::ToReal(t)) = (src, &msg) {
            let lose = &mut self.lose_up[e.0 as usize];
            if *lose > 0 && matches!(t.body, crate::core::cell::ToRealBody::Input(_)) {
                *lose -= 1; // a test fault (`World::lose_upstream`)
                return;
            }
        }
        if let CellMsg::Onload(o) = &msg {
            self.onloads_in_flight[o.entity.0 as usize] += 1;
            self.onloads_to_cell[i_cell(to)] += 1;
        }
        let dst = Endpoint::Shard(self.cell_shard(to));
        self.router
            .push(from, dst, Packet::Cell { from: src, to, msg });
    }

    /// MergeDrain: start the merge, and split the slot out again later.
    /// Crowd and swing: move the crowd's spot when its time comes.
    pub(super) fn scenario_actions(&mut self) {
        self.crowd_actions();
        let Some(m) = self.plan.merge else { return };
        let WorldLayout::Grid(grid) = &mut self.layout else {
            return;
        };
        if self.tick == m.merge_at_tick && grid.begin_merge(m.cell, m.into).is_ok() {
            self.layout_changed("merge", m.cell);
        }
        let WorldLayout::Grid(grid) = &mut self.layout else {
            return;
        };
        let retired = grid.is_retired(m.cell);
        if self.tick >= m.split_at_tick && retired && !self.split_done {
            let slot = grid.home_slot(m.cell);
            let fresh = grid.split(m.into, slot).expect("retired slot splits");
            self.push_cell(fresh);
            self.split_done = true;
            self.layout_changed("split", fresh);
        }
    }

    fn crowd_actions(&mut self) {
        let Some(c) = self.plan.crowd else { return };
        if self.tick == 0 || self.tick % c.switch_every_ticks != 0 {
            return;
        }
        let spot = if (self.tick / c.switch_every_ticks) % 2 == 1 {
            c.b
        } else {
            c.a
        };
        for client in &mut self.clients {
            if let Behaviour::Hotspot { spot: s, .. } = &mut client.bot.behaviour {
                *s = spot;
            }
        }
    }

    fn push_cell(&mut self, fresh: CellId) {
        let (params, views) = (self.params.cell.clone(), self.params.views.clone());
        let cell = crate::core::cell::Cell::with_views(fresh, params, views, self.types.clone())
            .expect("valid params");
        assert_eq!(fresh.0 as usize, self.cells.len(), "fresh ids are dense");
        self.cells.push(cell);
        self.onloads_to_cell.push(0);
    }

    /// Grid mode: retires merging cells with no real and no `Onload` coming.
    pub(super) fn retire_drained(&mut self) {
        let WorldLayout::Grid(grid) = &mut self.layout else {
            return;
        };
        let mut retired = Vec::new();
        for c in 0..self.cells.len() {
            let id = CellId(c as u32);
            if !grid.is_merging(id) || self.onloads_to_cell[c] > 0 {
                continue;
            }
            if self.cells[c].reals().is_empty() {
                grid.retire(id).expect("merging");
                retired.push(id);
            }
        }
        for id in retired {
            self.layout_changed("retire", id);
        }
    }

    /// Tree mode: a gathering round when due, its changes applied in order.
    pub(super) fn balance_round(&mut self, now: Time) {
        let (Some(b), WorldLayout::Tree(tree)) = (&mut self.balance, &self.layout) else {
            return;
        };
        let cells = &self.cells;
        let changes = b.gather(now, tree, |c, out| {
            if let Some(cell) = cells.get(c.0 as usize) {
                for e in cell.reals() {
                    let pos = cell.view(e).expect("real").pos();
                    out.push((e, pos));
                }
            }
        });
        for change in changes {
            let (Some(b), WorldLayout::Tree(tree)) = (&mut self.balance, &mut self.layout) else {
                unreachable!("tree mode")
            };
            b.before_apply(tree, &change);
            tree.apply(&change)
                .expect("the service broadcasts legal changes");
            // Shard 0 applied it; the others hear of it over the network.
            if self.replicas.is_active() {
                let from = Endpoint::Shard(ShardId::local(0));
                for s in 1..self.options.shards {
                    let to = Endpoint::Shard(ShardId::local(s));
                    let p = Packet::Change { change, sent: now };
                    self.router.push(from, to, p);
                }
            }
            let (what, cell) = match change.op {
                ChangeOp::Split { new_cell, .. } => {
                    self.push_cell(new_cell);
                    ("split", new_cell)
                }
                ChangeOp::Rebalance { .. } => ("rebalance", CellId(u32::MAX)),
                ChangeOp::StartMerge { cell } => {
                    // Its reals leave without crossing: no flap.
                    for e in self.cells[i_cell(cell)].reals() {
                        self.checker.excuse_migration(e);
                    }
                    ("merge", cell)
                }
                ChangeOp::FinishMerge { cell } => ("retire", cell),
            };
            self.layout_changed(what, cell);
        }
    }

    pub(super) fn layout_changed(&mut self, what: &'static str, cell: CellId) {
        self.stats.layout_changes += 1;
        let version = self.layout.version();
        self.record(SimEvent::Layout {
            version,
            what,
            cell,
        });
        for i in 0..self.real_pos.len() {
            let under = self.layout.cell_at(self.real_pos[i]);
            self.checker.on_real_cell(EntityId(i as u64), under);
        }
    }
}

fn dist2(a: Vec3, b: Vec3) -> f64 {
    (a.x - b.x).powi(2) + (a.z - b.z).powi(2)
}

fn i_cell(c: CellId) -> usize {
    c.0 as usize
}
