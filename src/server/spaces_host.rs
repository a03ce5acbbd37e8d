//! The host side of spaces (`spaces.rs`): session requests to the
//! directory, its answers back to sessions and proxies, and the space
//! traffic between shards.
//!
//! # A space change, end to end
//! 1. The client sends EnterSpace; its session (on the proxy's shard P)
//!    marks the change under way and the host sends [`SpaceMsg::Enter`]
//!    to shard 0 (with the space the player is counted in, and the way
//!    back to the world).
//! 2. Shard 0 places it ([`HostSpaces::run_directory`]): a refusal goes
//!    back as an `ErrorCode`; a placement (space, type, cell, arrival
//!    point) too, after any instance creation it caused was numbered and
//!    broadcast.
//! 3. On P the session counts the player there and the proxy sends the
//!    real a Space input (`relay`), in order with the client's inputs; at
//!    the real, `Cell::transfer` moves it to the destination cell through
//!    the migration path and the `DOWN_SPACE` notice reaches the session
//!    (SpaceChanged to the client) after the old space's last batch.
//!
//! A disconnect sends [`SpaceMsg::Left`] for the space the player is
//! counted in (not the world). Must not touch sockets or cells' internals.

use crate::core::geom::Vec3;
use crate::core::ids::{EntityId, ShardId, SpaceId};
use crate::core::time::Time;
use crate::game::relay::GameInput;
use crate::server::balance::WORLD_SPACE;
use crate::shard::{MetricSink, Outbox};
use crate::wire::client::ErrorCode;
use crate::wire::{Body, Envelope};

use super::host::CellHost;
use super::spaces::{SpaceMsg, Target, KIND_SPACES};

impl CellHost {
    /// Takes a spaces envelope; false if `env` is of another kind.
    pub(super) fn space_envelope(&mut self, now: Time, env: &Envelope) -> bool {
        if env.kind() != KIND_SPACES {
            return false;
        }
        let msg = env
            .access::<SpaceMsg>(KIND_SPACES)
            .ok()
            .and_then(|a| rkyv::deserialize::<SpaceMsg, rkyv::rancor::Error>(a).ok());
        match msg {
            Some(m @ (SpaceMsg::Enter { .. } | SpaceMsg::Left { .. })) => {
                self.spaces.requests.push(m)
            }
            Some(SpaceMsg::Placed { entity, result }) => self.spaces.answers.push((entity, result)),
            Some(SpaceMsg::Directory(events)) => {
                self.spaces.receive(events);
                self.spaces.apply(now, &mut self.cells);
            }
            None => self.spaces.counters.dropped += 1,
        }
        true
    }

    fn send_directory(&mut self, msg: SpaceMsg) {
        if self.ctx.shard.index == 0 {
            self.spaces.requests.push(msg);
        } else {
            let zero = ShardId {
                node: self.ctx.shard.node,
                index: 0,
            };
            self.spaces.outgoing.push((zero, msg));
        }
    }

    /// A session asked for a space (`space` id, or `type_id`).
    pub(super) fn request_space(&mut self, entity: EntityId, space: u32, type_id: u32) {
        let Some(travel) = self.session_of(entity).map(|s| *s.travel()) else {
            return;
        };
        let msg = SpaceMsg::Enter {
            entity,
            reply_to: self.ctx.shard.index,
            from: travel.counted,
            by_type: space == 0,
            id: if space == 0 { type_id } else { space },
            world_exit: travel.world_exit.map(|p| (p.x, p.z)),
        };
        self.send_directory(msg);
    }

    /// A player counted in `space` left the game.
    pub(super) fn space_left(&mut self, space: SpaceId) {
        if space != WORLD_SPACE {
            self.send_directory(SpaceMsg::Left { space });
        }
    }

    /// Once per tick, after the clients were read: the directory (shard
    /// 0), the answers to this shard's sessions, the traffic out.
    pub(super) fn spaces_step(&mut self, now: Time, out: &mut Outbox) {
        if self.ctx.shard.index == 0 {
            let tree = &self.tree;
            self.spaces
                .run_directory(now, &|x, z| tree.cell_at(Vec3::ground(x, z)));
            self.spaces.apply(now, &mut self.cells);
        }
        for (entity, result) in std::mem::take(&mut self.spaces.answers) {
            self.space_answer(now, entity, result);
        }
        for (dest, msg) in self.spaces.outgoing.drain(..) {
            let sent = Body::encode(&msg)
                .ok()
                .is_some_and(|b| out.send(dest, KIND_SPACES, b).is_ok());
            if !sent {
                self.spaces.counters.dropped += 1;
            }
        }
    }

    fn space_answer(&mut self, now: Time, entity: EntityId, result: Result<Target, u16>) {
        let Some(session) = self.session_of_mut(entity) else {
            // Gone meanwhile: the directory counted it in the new space.
            if let Ok(t) = result {
                self.space_left(t.space);
            }
            return;
        };
        match result {
            Ok(t) => {
                session.space_placed(t.space);
                let input = GameInput::Space {
                    seq: 0,
                    space: t.space.0,
                    type_id: t.type_id,
                    cell: t.cell.0,
                    pos: Vec3::ground(t.x, t.z),
                };
                let data = input.to_payload();
                if let Some(p) = self.proxies.get_mut(&entity) {
                    p.send_input(now, data);
                    if p.list() {
                        self.busy_proxies.push(entity);
                    }
                }
            }
            Err(code) => {
                let code = ErrorCode::from_code(code).unwrap_or(ErrorCode::SpaceNotAllowed);
                session.space_refused(code, code.rule());
            }
        }
    }

    /// After the tick: destroyed instance cells dropped once empty, parked
    /// messages whose cell arrived delivered next tick.
    pub(super) fn spaces_after_tick(&mut self, now: Time) {
        self.spaces.drop_retired(now, &mut self.cells);
        for item in self.spaces.unpark() {
            self.requeue(item);
        }
    }

    /// The spaces' metrics.
    pub(super) fn export_space_metrics(&self, sink: &mut MetricSink) {
        let c = self.spaces.counters();
        sink.gauge(
            "spaces_instances_live",
            "mono-space instances live (the directory, shard 0)",
            c.instances_live,
        );
        sink.gauge(
            "spaces_cells_hosted",
            "instance cells hosted here",
            c.cells_hosted,
        );
        sink.counter(
            "spaces_transfers",
            "reals moved to another space here",
            self.game.counters().transfers,
        );
        sink.counter(
            "spaces_instances_created",
            "instances created (shard 0)",
            c.instances_created,
        );
        sink.counter(
            "spaces_instances_reclaimed",
            "empty instances reclaimed (shard 0)",
            c.instances_reclaimed,
        );
        sink.counter(
            "spaces_enters",
            "players placed in a space (shard 0)",
            c.space_enters,
        );
        sink.counter(
            "spaces_refused",
            "space requests refused (shard 0)",
            c.space_refused,
        );
        sink.counter("spaces_dropped", "space messages dropped", c.dropped);
    }
}
