//! The game logic of client inputs, run at the avatar's real.
//!
//! Owns [`Game`]: its driver (the server's host, the simulator's world)
//! hands it the cell between `Cell::run_inputs` and `Cell::publish` (so
//! what it applies goes out in this tick's syncs and views, before the
//! migration check), and once more after `publish` for what that half
//! reported; it takes the cell's events ([`Game::run`] drains them, or the
//! driver passes each to [`Game::handle`] and then calls [`Game::flush`])
//! and applies what clients asked (the relay formats are in `relay.rs`):
//!
//! - **Move**: the real walks there (a move older than the last applied
//!   input is stale: positions are absolute, the newer one wins).
//! - **Teleport** (not made by the gateway today; the simulator's bots
//!   jump): `Cell::teleport` under the driver's layout, a walk if the
//!   destination refuses (a merging cell); the real may leave at once, so
//!   what follows it in the tick is deferred (below).
//! - **Hit**: the target is the entity the real's observer shows under the
//!   handle; not shown -> CallResult `Refused(not-visible)` (counted);
//!   else the combat flow of `core::combat` (`Cell::try_hit`): refused ->
//!   CallResult naming the reason; accepted -> its combat seq goes to the
//!   gateway, and the outcome (`HitLanded`, `HitExpired`) follows later as
//!   a CallResult under that combat seq.
//! - **Space** (made by the gateway from shard 0's placement): the real
//!   moves to the given cell of another space (`Cell::transfer`); the
//!   notice (`DOWN_SPACE`) follows the old space's last batch.
//! - **SetProp**: applied if the property is client-settable
//!   (`PropDef::client_settable`) and the value decodes, -> `Applied`;
//!   else `Refused(prop-not-settable | bad-value)`.
//!
//! Each real's replies of one tick (call results, and the highest client
//! seq processed) leave as **one** typed downstream message
//! (`relay::Reply`), once per tick at most; the gateway encodes the
//! client's frames. An acknowledgement with no call result to go with it
//! (a Move's) sends no message: the real owes it to its client
//! (`Cell::owe_ack`) and the client's next view batch carries it, so a
//! moving client costs one downstream message a tick, not two; a real
//! whose client has no observer there gets its reply as before.
//!
//! A driver that checks the game (the simulator) turns on
//! [`Game::set_reporting`] and drains [`Game::poll_effect`]: every
//! position applied and every downstream message sent from a real.
//!
//! # Effects after the real left
//! An event can name an entity whose real is no longer here: an input
//! queued behind a space hop applied in the same run (`Cell::transfer`), or
//! any event of a host that runs the whole `Cell::tick` before the game,
//! where the tick's migration check may offload the real (the server and
//! the simulator both run the game between the two halves instead). The effect is then deferred to the new real: re-sent as a game
//! call (forwarded like any real-bound message, behind the `Onload`),
//! applied there when it runs. Client data the real can no longer send
//! (results, acks) travels the same way. The new real runs those calls
//! before the inputs it releases in the same tick (`Cell::run_inputs`), so
//! inputs keep their seq order across the migration; an input that still
//! comes after a later one is not acknowledged again
//! ([`GameCounters::overtaken_acks`]): acks never go back.
//!
//! Must not touch sockets, sessions, clocks or the routing of messages.

use rustc_hash::FxHashMap; // tidy: allow(HashMap): no random seed; lookups only, never iterated
use std::sync::Arc;

use crate::core::cell::{
    Call, CallKind, Cell, CellError, CellEvent, HitError, Layout, Residency, Source, ToReal,
    ToRealBody,
};
use crate::core::combat::CombatEvent;
use crate::core::down::DownBody;
use crate::core::entity::codec::Reader;
use crate::core::entity::{value, Audience, EntityTypeId, TypeRegistry, Value, AVATAR};
use crate::core::geom::Vec3;
use crate::core::ids::EntityId;
use crate::core::time::Time;
use crate::wire::client::{CallOutcome, RefuseReason};

use super::relay::{
    decode_input, hit_done, hit_started, reply_is_empty, reply_push_result, reply_set_ack,
    reply_start, space_down, tagged, GameInput, DEFER_DOWN, DEFER_INPUT, DOWN_RESYNCED,
};

/// What the game logic counts (exported as host metrics).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GameCounters {
    /// Client inputs applied at a real.
    pub inputs: u64,
    /// Moves older than the last applied input (position not taken).
    pub stale_moves: u64,
    /// Inputs processed after a later one (deferred past a migration and
    /// overtaken there): not acknowledged again, the later ack covers them.
    pub overtaken_acks: u64,
    /// Inputs or client data deferred to the next real (offloaded).
    pub deferred: u64,
    /// Inputs that did not decode or reached a non-avatar (dropped).
    pub bad_inputs: u64,
    /// Deferred effects for an entity with no real to forward to (lost).
    pub lost: u64,
    /// Calls refused at the real, by [`RefuseReason::code`].
    pub refused: [u64; 16],
    /// Properties set by clients.
    pub props_set: u64,
    /// Hits accepted into the combat flow.
    pub hits: u64,
    /// Reals moved to another space.
    pub transfers: u64,
    /// Teleports asked (a refused one walks there).
    pub teleports: u64,
}

/// What the game did, for a driver that checks it ([`Game::set_reporting`]).
#[derive(Clone, Debug, PartialEq)]
pub enum GameEffect {
    /// A Move or Teleport input put `entity`'s real at `pos` (a teleport:
    /// the real may have left this cell for the one under `pos`).
    Moved {
        /// The entity.
        entity: EntityId,
        /// Its new position.
        pos: Vec3,
    },
    /// Downstream `data` left `entity`'s real for its proxy.
    Sent {
        /// The entity.
        entity: EntityId,
        /// The payload (see `relay.rs`, downstream).
        data: Arc<[u8]>,
    },
    /// The acknowledgement of client seq `seq` was left to `entity`'s
    /// real, to ride its client's next view batch (`Cell::owe_ack`).
    Acked {
        /// The entity.
        entity: EntityId,
        /// The highest client seq processed.
        seq: u64,
    },
}

/// The client-input logic of one shard (see the module doc).
#[derive(Debug)]
pub struct Game {
    avatar: EntityTypeId,
    last_seq_prop: usize,
    counters: GameCounters,
    events: Vec<CellEvent>,
    /// This tick's reply per entity (`relay::reply_start`) and the
    /// highest client seq processed.
    frames: Vec<(EntityId, Vec<u8>, u64)>,
    /// Where each entity's frame is in `frames` (thousands of entities
    /// reply in one tick: a scan per input would be quadratic).
    frame_at: FxHashMap<EntityId, u32>, // tidy: allow(HashMap): no random seed; lookups only, never iterated
    /// Emptied frame buffers, reused (no allocation per tick once warm).
    pool: Vec<Vec<u8>>,
    /// Whether effects are kept for [`Game::poll_effect`].
    reporting: bool,
    effects: std::collections::VecDeque<GameEffect>,
}

impl Game {
    /// Game logic for the types of `registry` (its `Avatar` must have a
    /// `last_input_seq` property).
    ///
    /// # Panics
    /// If the registry has no such Avatar (the built-ins always do).
    pub fn new(registry: &TypeRegistry) -> Game {
        let avatar = registry.get(AVATAR).expect("built-in avatar");
        Game {
            avatar: avatar.id(),
            last_seq_prop: avatar
                .prop_index("last_input_seq")
                .expect("avatar has last_input_seq"),
            counters: GameCounters::default(),
            events: Vec::new(),
            frames: Vec::new(),
            frame_at: FxHashMap::default(), // tidy: allow(HashMap): see the field
            pool: Vec::new(),
            reporting: false,
            effects: std::collections::VecDeque::new(),
        }
    }

    /// Keeps every effect for [`Game::poll_effect`] from now on (a driver
    /// that does not drain them must leave this off: they would pile up).
    pub fn set_reporting(&mut self, on: bool) {
        self.reporting = on;
    }

    /// The oldest effect not taken yet (only while reporting).
    pub fn poll_effect(&mut self) -> Option<GameEffect> {
        self.effects.pop_front()
    }

    /// The counters.
    pub fn counters(&self) -> &GameCounters {
        &self.counters
    }

    /// Drains `cell`'s events (call right after each half of its tick)
    /// and applies the client logic ([`Game::handle`] each), then sends
    /// each real its tick's reply ([`Game::flush`]). `layout` is
    /// the driver's view of the space (what `publish` takes).
    pub fn run<L: Layout + ?Sized>(&mut self, now: Time, cell: &mut Cell, layout: &L) {
        let mut events = std::mem::take(&mut self.events);
        events.extend(std::iter::from_fn(|| cell.poll_event()));
        for ev in events.drain(..) {
            self.handle(now, cell, layout, &ev);
        }
        self.events = events;
        self.flush(now, cell);
    }

    /// Applies what one event of `cell` asks of the game (client inputs,
    /// deferred effects, hit outcomes); any other event is not the game's.
    /// Call [`Game::flush`] with the same cell once its events are done.
    pub fn handle<L: Layout + ?Sized>(
        &mut self,
        now: Time,
        cell: &mut Cell,
        layout: &L,
        ev: &CellEvent,
    ) {
        match ev {
            CellEvent::InputApplied { entity, data, .. } => {
                self.input(now, cell, layout, *entity, data)
            }
            CellEvent::CallRun { entity, data, .. } => match data.first() {
                Some(&DEFER_INPUT) => self.input(now, cell, layout, *entity, &data[1..]),
                Some(&DEFER_DOWN) => {
                    self.down(now, cell, *entity, DownBody::from(&data[1..]));
                }
                _ => {}
            },
            CellEvent::Combat { entity, event } => self.combat(now, cell, *entity, *event),
            _ => {}
        }
    }

    fn combat(&mut self, now: Time, cell: &mut Cell, entity: EntityId, event: CombatEvent) {
        let (seq, outcome) = match event {
            CombatEvent::HitLanded {
                seq, dealt, killed, ..
            } => (seq, CallOutcome::HitLanded { dealt, killed }),
            CombatEvent::HitExpired { seq, .. } => (seq, CallOutcome::HitExpired),
            _ => return,
        };
        self.down(now, cell, entity, hit_done(seq, outcome).into());
    }

    /// Applies one input at `entity`'s real here, or defers it.
    fn input<L: Layout + ?Sized>(
        &mut self,
        now: Time,
        cell: &mut Cell,
        layout: &L,
        entity: EntityId,
        data: &[u8],
    ) {
        if !is_real(cell, entity) {
            self.defer(now, cell, entity, tagged(DEFER_INPUT, data));
            return;
        }
        let Some(input) = decode_input(data) else {
            self.counters.bad_inputs += 1;
            return;
        };
        let Some(last) = self.last_seq(cell, entity) else {
            self.counters.bad_inputs += 1;
            return;
        };
        let seq = input.seq();
        self.counters.inputs += 1;
        match input {
            GameInput::Move { pos, yaw, .. } if seq > last => {
                cell.real_mut(entity).expect("real").set_movement(pos, yaw);
                self.moved(entity, pos);
            }
            GameInput::Teleport { .. } if seq > last => {} // applied last, below
            GameInput::Move { .. } | GameInput::Teleport { .. } => self.counters.stale_moves += 1,
            GameInput::Hit { target, damage, .. } => {
                self.hit(now, cell, entity, seq, target, damage)
            }
            GameInput::SetProp { prop, value, .. } => {
                let outcome = self.set_prop(cell, entity, prop, value);
                self.result(entity, seq, outcome);
            }
            GameInput::Space {
                space,
                type_id,
                cell: dest,
                pos,
                ..
            } => {
                let from = cell.real_mut(entity).expect("real").core().pos;
                let notice = space_down(space, type_id, pos, from);
                let dest = crate::core::ids::CellId(dest);
                match cell.transfer(now, entity, pos, dest, Some(notice.into())) {
                    Ok(()) => self.counters.transfers += 1,
                    Err(_) => self.counters.bad_inputs += 1,
                }
                return;
            }
            GameInput::Resync { .. } => {
                cell.restart_view(entity);
                self.down(now, cell, entity, vec![DOWN_RESYNCED].into());
                return;
            }
        }
        self.processed(cell, entity, seq, last);
        if let GameInput::Teleport { pos, .. } = input {
            if seq > last {
                // Last: the real may leave at once (what follows is deferred).
                self.teleport(now, cell, layout, entity, pos);
            }
        }
    }

    /// The last client seq applied at `e`'s real here; `None` if it is no
    /// avatar.
    fn last_seq(&self, cell: &mut Cell, e: EntityId) -> Option<u64> {
        let real = cell.real_mut(e).expect("real");
        if real.core().type_id != self.avatar {
            return None;
        }
        match real.props().get(self.last_seq_prop) {
            Some(Value::UInt(v)) => Some(*v),
            _ => Some(0),
        }
    }

    /// Records client seq `seq` as processed at `e`'s real (acked this
    /// tick), `last` being the highest processed before it. An input at or
    /// below `last` was deferred past a migration and overtaken there by
    /// later ones applied first: their ack (cumulative) has left or is on
    /// its way, and one for this input after it would go back, so it gets
    /// none (its result, if any, still goes).
    fn processed(&mut self, cell: &mut Cell, e: EntityId, seq: u64, last: u64) {
        if seq <= last {
            self.counters.overtaken_acks += 1;
            return;
        }
        let real = cell.real_mut(e).expect("real");
        let _ = real.props_mut().set(self.last_seq_prop, Value::UInt(seq));
        // The acknowledgement rides the client's next view batch where one
        // will carry it (no message of its own); else it goes in the reply.
        if cell.owe_ack(e, seq) {
            if self.reporting {
                self.effects.push_back(GameEffect::Acked { entity: e, seq });
            }
            return;
        }
        let f = self.frames_of(e);
        f.2 = f.2.max(seq);
    }

    fn teleport<L: Layout + ?Sized>(
        &mut self,
        now: Time,
        cell: &mut Cell,
        layout: &L,
        e: EntityId,
        pos: Vec3,
    ) {
        self.counters.teleports += 1;
        // A refused jump (into a merging cell) walks there instead.
        if cell.teleport(now, e, pos, layout).is_err() {
            let _ = cell.move_real(e, pos);
        }
        self.moved(e, pos);
    }

    fn moved(&mut self, entity: EntityId, pos: Vec3) {
        if self.reporting {
            self.effects.push_back(GameEffect::Moved { entity, pos });
        }
    }

    fn hit(&mut self, now: Time, cell: &mut Cell, e: EntityId, seq: u64, handle: u32, dmg: i64) {
        let target = cell
            .observer(e)
            .and_then(|o| o.entities().find(|&t| o.handle_of(t) == Some(handle)));
        let Some(target) = target else {
            self.result(e, seq, CallOutcome::Refused(RefuseReason::NotVisible));
            return;
        };
        match cell.try_hit(now, e, target, dmg) {
            Ok(combat_seq) => {
                self.counters.hits += 1;
                self.down(now, cell, e, hit_started(seq, combat_seq).into());
            }
            Err(HitError::Refused(r)) => {
                self.result(e, seq, CallOutcome::Refused(RefuseReason::from(&r)))
            }
            Err(HitError::NotReal(_)) => unreachable!("checked real"),
        }
    }

    fn set_prop(&mut self, cell: &mut Cell, e: EntityId, prop: u16, bytes: &[u8]) -> CallOutcome {
        let real = cell.real_mut(e).expect("real");
        let ty = real.props().entity_type().clone();
        let Some(def) = ty.prop(usize::from(prop)).filter(|d| d.client_settable) else {
            return CallOutcome::Refused(RefuseReason::PropNotSettable);
        };
        let mut r = Reader::new(bytes);
        let decoded = value::decode(&mut r, &ty, def.ty, Audience::OwnClient);
        let Ok(v) = decoded
            .map_err(|_| ())
            .and_then(|v| r.is_empty().then_some(v).ok_or(()))
        else {
            return CallOutcome::Refused(RefuseReason::BadValue);
        };
        match real.props_mut().set(usize::from(prop), v) {
            Ok(()) => {
                self.counters.props_set += 1;
                CallOutcome::Applied
            }
            Err(_) => CallOutcome::Refused(RefuseReason::BadValue),
        }
    }

    fn result(&mut self, entity: EntityId, seq: u64, outcome: CallOutcome) {
        if let CallOutcome::Refused(r) = outcome {
            let i = usize::from(r.code()).min(self.counters.refused.len() - 1);
            self.counters.refused[i] += 1;
        }
        reply_push_result(&mut self.frames_of(entity).1, seq, outcome);
    }

    fn frames_of(&mut self, entity: EntityId) -> &mut (EntityId, Vec<u8>, u64) {
        let next = self.frames.len() as u32;
        let i = *self.frame_at.entry(entity).or_insert(next) as usize;
        if i == self.frames.len() {
            let mut buf = self.pool.pop().unwrap_or_default();
            reply_start(&mut buf);
            self.frames.push((entity, buf, 0));
        }
        debug_assert_eq!(self.frames[i].0, entity, "frame index");
        &mut self.frames[i]
    }

    /// Sends each entity's reply of this tick (results, and the ack)
    /// from `cell`, the cell whose events were handled since the last
    /// flush.
    pub fn flush(&mut self, now: Time, cell: &mut Cell) {
        let mut frames = std::mem::take(&mut self.frames);
        self.frame_at.clear();
        for (entity, mut buf, mut acked) in frames.drain(..) {
            if !reply_is_empty(&buf) {
                // Call results: the reply carries what the real owes too,
                // so no batch acknowledges it again.
                acked = acked.max(cell.take_owed_ack(entity));
            }
            reply_set_ack(&mut buf, acked);
            if !reply_is_empty(&buf) {
                // In a buffer of the pool the host lent the cell.
                let data = cell.down_pool_mut().copy(&buf);
                self.down(now, cell, entity, data);
            }
            buf.clear();
            self.pool.push(buf);
        }
        self.frames = frames;
    }

    /// Sends client data from the real here, or defers it to the next real.
    fn down(&mut self, now: Time, cell: &mut Cell, entity: EntityId, data: DownBody) {
        let reported = self.reporting.then(|| Arc::<[u8]>::from(&*data));
        // One lookup of the entity: the send says whether it is real here.
        match cell.send_to_client_or_back(entity, data) {
            Err((CellError::NotReal(_), data)) => {
                self.defer(now, cell, entity, tagged(DEFER_DOWN, &data));
            }
            // Sent, or a real with no client: reported as sent either way
            // (what the real here did), the latter dropped.
            _ => {
                if let Some(data) = reported {
                    self.effects.push_back(GameEffect::Sent { entity, data });
                }
            }
        }
    }

    /// Re-sends `data` to `entity`'s real wherever it went, as a game call.
    fn defer(&mut self, now: Time, cell: &mut Cell, entity: EntityId, data: Arc<[u8]>) {
        let forwardable = match cell.residency(entity) {
            Some(Residency::Ghost { .. }) => true,
            Some(Residency::Gone { forward_to, .. }) => forward_to != cell.id(),
            _ => false,
        };
        if !forwardable {
            self.counters.lost += 1;
            return;
        }
        self.counters.deferred += 1;
        let body = ToRealBody::Call(Call {
            kind: CallKind::Game,
            id: 0,
            data,
        });
        let msg = ToReal {
            entity,
            hops: 0,
            body,
        };
        cell.handle(now, Source::Local, crate::core::cell::CellMsg::ToReal(msg));
    }
}

fn is_real(cell: &Cell, e: EntityId) -> bool {
    matches!(cell.residency(e), Some(Residency::Real { .. }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::cell::{CellParams, GridLayout};
    use crate::core::entity::Entity;
    use crate::core::ids::CellId;
    use crate::core::payload::Payload;
    use crate::game::relay::{decode_down, Down, GameInput};

    fn move_input(seq: u64, x: f64) -> Vec<u8> {
        let mut b = Vec::new();
        GameInput::Move {
            seq,
            pos: Vec3::ground(x, 10.0),
            yaw: 0.0,
        }
        .encode(&mut b);
        b
    }

    /// The acks the game gave out since the last call (in replies, or owed
    /// to ride view batches), in order.
    fn acks(game: &mut Game) -> Vec<u64> {
        std::iter::from_fn(|| game.poll_effect())
            .filter_map(|fx| match fx {
                GameEffect::Sent { data, .. } => match decode_down(&data) {
                    Ok(Down::Reply(r)) => r.ack(),
                    _ => None,
                },
                GameEffect::Acked { seq, .. } => Some(seq),
                GameEffect::Moved { .. } => None,
            })
            .collect()
    }

    /// An input deferred past a migration and run at the new real after
    /// later inputs applied there first is not acknowledged again: its ack
    /// would go back (the client saw 379's, then 377's: `tessera sim` seed
    /// 122, the teleport scenario). Its move is not taken either.
    #[test]
    fn an_overtaken_deferred_input_is_not_acked_again() {
        let types = Arc::new(TypeRegistry::with_builtins());
        let mut cell = Cell::new(CellId(0), CellParams::default(), types.clone()).expect("cell");
        let layout = GridLayout::new(1, 1, 1_000.0);
        let e = EntityId(7);
        let ty = types.get(AVATAR).expect("avatar").clone();
        let now = Time::from_millis(0);
        let avatar = Entity::new_real(e, ty, Vec3::ground(10.0, 10.0), 0.0);
        cell.create_real(now, avatar, true, 0).expect("real");
        let mut game = Game::new(&types);
        game.set_reporting(true);
        // A move to x = seq - 300, applied at the real here.
        let apply = |game: &mut Game, cell: &mut Cell, seq: u64| {
            let data = Payload::new(&move_input(seq, seq as f64 - 300.0));
            let ev = CellEvent::InputApplied {
                entity: e,
                seq,
                data,
            };
            game.handle(now, cell, &layout, &ev);
        };
        apply(&mut game, &mut cell, 378);
        apply(&mut game, &mut cell, 379);
        game.flush(now, &mut cell);
        // Owed to ride the next view batch, one after the other (it
        // carries the higher).
        assert_eq!(acks(&mut game), [378, 379]);
        // Input 377, deferred from the old real, runs here now.
        let data = tagged(DEFER_INPUT, &move_input(377, 0.0));
        game.handle(
            now,
            &mut cell,
            &layout,
            &CellEvent::CallRun {
                entity: e,
                id: 0,
                data,
            },
        );
        game.flush(now, &mut cell);
        assert_eq!(acks(&mut game), Vec::<u64>::new(), "no ack going back");
        assert_eq!(game.counters().overtaken_acks, 1);
        assert_eq!(game.counters().stale_moves, 1);
        let pos = cell.real_mut(e).expect("real").core().pos;
        assert_eq!(pos.x, 79.0, "the position of 379 kept");
        // The next input is acked as usual.
        apply(&mut game, &mut cell, 380);
        game.flush(now, &mut cell);
        assert_eq!(acks(&mut game), [380]);
    }
}
