//! The world's moving parts: clients sending inputs, delivery, routing of
//! outputs, the game logic run at reals, calls, and layout changes.
//!
//! # The game logic is the server's
//!
//! Clients send the server's relay inputs ([`GameInput`]); every cell event
//! goes to the checker, then to the server's own [`Game`] (the same calls in
//! the same order as `server::host`: after `run_inputs`, after `publish`,
//! each cell's events then its flush). What the game did comes back as
//! [`GameEffect`]s: positions applied (the checker learns where the real
//! should be) and downstream sent (acks counted, to be matched at the
//! client). An effect the game lost or an input it could not read is a
//! violation (`InputLost`).
//!
//! Script calls (issued by the world, not clients) change `hp` at the real;
//! one run after a teleport input moved the real away in the same drain
//! waits for it to land ([`CellEvent::BecameReal`]).
//!
//! Owns nothing beyond the `impl World` steps.

use std::sync::Arc;

use crate::core::cell::{
    Call, CallKind, CellEvent, CellMsg, Dest, Layout, Msg, Residency, Source, ToReal, ToRealBody,
};
use crate::core::combat::CombatEvent;
use crate::core::entity::{value, Audience, Value};
use crate::core::geom::Vec3;
use crate::core::ids::{CellId, EntityId, ShardId};
use crate::core::space::ChangeOp;
use crate::core::time::Time;
use crate::game::relay::{decode_down, Down};
use crate::game::{GameEffect, GameInput};
use crate::sim::bots::Behaviour;
use crate::sim::net::Endpoint;
use crate::sim::report::ViolationKind;
use crate::sim::world::World;
use crate::sim::world_balance::WorldLayout;
use crate::sim::world_event::SimEvent;
use crate::sim::world_replicas::Parked;
use crate::sim::world_route::Packet;

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
            let (pos, yaw) = (step.pose.pos, step.pose.yaw as f32);
            let seq = self.clients[i].seq + 1;
            // One input per tick: a jump, else every few inputs a property
            // change (the next move catches the position up), else a move.
            if step.teleported {
                self.send_input(e, &GameInput::Teleport { seq, pos });
            } else if seq % self.plan.change_every_inputs == 0 {
                self.set_status(e, seq);
            } else {
                self.send_input(e, &GameInput::Move { seq, pos, yaw });
            }
            self.stats.teleports += u64::from(step.teleported);
        }
    }

    /// Client `e` sets its own `status` (a client-settable property) with
    /// client seq `seq`.
    fn set_status(&mut self, e: EntityId, seq: u64) {
        let avatar = self
            .types
            .get(crate::core::entity::AVATAR)
            .expect("built-in");
        let prop = self.status_index;
        let def = avatar.prop(usize::from(prop)).expect("status");
        let mut value = Vec::new();
        let v = Value::Str(format!("s{seq}"));
        value::encode(&mut value, avatar, def.ty, &v, Audience::OwnClient);
        let input = GameInput::SetProp {
            seq,
            prop,
            value: &value,
        };
        self.send_input(e, &input);
    }

    fn send_input(&mut self, e: EntityId, input: &GameInput<'_>) {
        let i = e.0 as usize;
        self.clients[i].seq = input.seq();
        let to = Endpoint::Shard(self.proxy_shard(e));
        let data = input.to_payload();
        let p = Packet::Input { entity: e, data };
        self.router.push(Endpoint::Client(i as u32), to, p);
        self.stats.inputs_sent += 1;
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
                let got = &mut self.acks[entity.0 as usize].1;
                match decode_down(&data) {
                    Ok(Down::ViewBatch(_)) => self.feed_view(entity, &data),
                    Ok(Down::ViewAcked { ack, .. }) => {
                        *got = (*got).max(ack);
                        self.feed_view(entity, &data);
                    }
                    Ok(Down::Reply(r)) => *got = (*got).max(r.ack().unwrap_or(0)),
                    _ => {} // hit outcomes: not checked here
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

    /// Drains every cell's events (again and again: the game's effects may
    /// raise more) into the checker and the game, as the server's host
    /// does: each cell's events, then the game's flush for that cell.
    pub(super) fn drain_events(&mut self, now: Time) {
        loop {
            let mut any = false;
            for c in 0..self.cells.len() {
                let id = CellId(c as u32);
                let shard = self.cell_shard(id);
                while let Some(ev) = self.cells[c].poll_event() {
                    any = true;
                    self.on_cell_event(id, &ev);
                    let layout = self.replicas.layout(&self.layout, shard);
                    self.game.handle(now, &mut self.cells[c], layout, &ev);
                    self.take_game_effects();
                    self.record(SimEvent::Cell {
                        cell: id,
                        event: ev,
                    });
                }
                self.game.flush(now, &mut self.cells[c]);
                self.take_game_effects();
            }
            if !any {
                break;
            }
        }
        let c = self.game.counters();
        self.stats.deferred_effects = c.deferred;
        let faults = c.lost + c.bad_inputs;
        if faults > self.game_faults_seen {
            let d = format!(
                "the game lost {} effects and read {} bad inputs",
                c.lost, c.bad_inputs
            );
            self.game_faults_seen = faults;
            self.checker
                .report(self.tick, ViolationKind::InputLost, None, d);
        }
    }

    /// What the game did: where reals were put, and acks sent.
    fn take_game_effects(&mut self) {
        while let Some(effect) = self.game.poll_effect() {
            match effect {
                GameEffect::Moved { entity, pos } => {
                    self.real_pos[entity.0 as usize] = pos;
                    let under = self.layout.cell_at(pos);
                    self.checker.on_real_cell(entity, under);
                }
                GameEffect::Sent { entity, data } => {
                    if let Ok(Down::Reply(r)) = decode_down(&data) {
                        let given = &mut self.acks[entity.0 as usize].0;
                        *given = (*given).max(r.ack().unwrap_or(0));
                    }
                }
                GameEffect::Acked { entity, seq } => {
                    let given = &mut self.acks[entity.0 as usize].0;
                    *given = (*given).max(seq);
                }
            }
        }
    }

    fn on_cell_event(&mut self, cell: CellId, ev: &CellEvent) {
        self.checker.on_event(self.tick, cell, ev);
        match ev {
            CellEvent::InputApplied { entity, .. } => {
                if let Some(b) = &mut self.balance {
                    b.charge_entity(*entity, false);
                }
            }
            CellEvent::CallRun { entity, data, .. } if data.first() == Some(&SCRIPT_CALL) => {
                if let Some(b) = &mut self.balance {
                    b.charge_entity(*entity, true);
                }
                self.pending[entity.0 as usize] += 1;
                self.script_changes(cell, *entity);
            }
            CellEvent::BecameReal { entity, .. } => self.script_changes(cell, *entity),
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
    }

    /// Applies `e`'s waiting script-call changes if its real is at `cell`.
    fn script_changes(&mut self, cell: CellId, e: EntityId) {
        let i = e.0 as usize;
        let is_real = matches!(
            self.cells[i_cell(cell)].residency(e),
            Some(Residency::Real { .. })
        );
        if !is_real || self.pending[i] == 0 {
            return;
        }
        self.props[i] += u64::from(std::mem::take(&mut self.pending[i]));
        let hp = self.hp_value(e);
        self.cells[i_cell(cell)]
            .real_mut(e)
            .expect("real here")
            .props_mut()
            .set(self.hp_index, hp)
            .expect("hp is an int");
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
            let mut data = [SCRIPT_CALL; 9];
            data[1..].copy_from_slice(&id.to_le_bytes());
            let body = ToRealBody::Call(Call {
                kind: CallKind::Game,
                id,
                data: Arc::from(&data[..]),
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
                // Shared from here on (the simulated network may hold it;
                // the last view batch is kept for tests).
                let p = Packet::Down {
                    entity: e,
                    seq,
                    data: Arc::from(&*data),
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

/// First byte of the world's script calls (the game's own game calls
/// start with `relay::DEFER_INPUT` or `DEFER_DOWN`).
pub const SCRIPT_CALL: u8 = 0;

fn dist2(a: Vec3, b: Vec3) -> f64 {
    (a.x - b.x).powi(2) + (a.z - b.z).powi(2)
}

fn i_cell(c: CellId) -> usize {
    c.0 as usize
}
