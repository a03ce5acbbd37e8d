//! The directory's side of [`HostSpaces`] (shard 0): placing requests,
//! the round (heavy-load creation, reclaiming), numbering the instance
//! events for the replicas. See `spaces.rs` for the model.

use crate::core::ids::{CellId, EntityId, ShardId, SpaceId};
use crate::core::space::{
    EnterTarget, InstanceError, InstanceEvent, Instances, Placement, ShardLoad,
};
use crate::core::time::Time;
use crate::server::balance::WORLD_SPACE;

use super::spaces::{DirEvent, HostSpaces, SpaceMsg, Target};

impl HostSpaces {
    /// Shard 0: places every request, runs a round when due, and numbers
    /// the directory's events (applied here, broadcast to the others).
    /// `arrival` is where the world's tree puts a point (for the way back).
    pub fn run_directory(&mut self, now: Time, arrival: &dyn Fn(f64, f64) -> CellId) {
        let Some(mut d) = self.directory.take() else {
            self.requests.clear();
            return;
        };
        let mut loads = self.shard_loads();
        let mut events = Vec::new();
        for req in std::mem::take(&mut self.requests) {
            match req {
                SpaceMsg::Enter {
                    entity,
                    reply_to,
                    from,
                    by_type,
                    id,
                    world_exit,
                } => {
                    let target = if by_type {
                        EnterTarget::Type(id)
                    } else {
                        EnterTarget::Id(SpaceId(id))
                    };
                    let result = self.place(&mut d, now, from, target, world_exit, &loads, arrival);
                    let to = ShardId {
                        node: self.ctx.shard.node,
                        index: reply_to,
                    };
                    self.answer(to, entity, result);
                    self.take_events(&mut d, &mut loads, &mut events);
                }
                SpaceMsg::Left { space } => {
                    let _ = d.leave(now, space);
                }
                _ => {}
            }
        }
        if now >= self.next_round {
            self.next_round = now + self.round;
            d.handle_timeout(now, &loads);
        }
        self.take_events(&mut d, &mut loads, &mut events);
        self.directory = Some(d);
        if !events.is_empty() {
            for s in self.ctx.all_shards().filter(|s| *s != self.ctx.shard) {
                self.outgoing.push((s, SpaceMsg::Directory(events.clone())));
            }
            self.received.extend(events);
        }
    }

    /// Numbers the directory's new events into `events`; a creation
    /// counts on its shard's load at once (so one tick's instances spread).
    fn take_events(
        &mut self,
        d: &mut Instances,
        loads: &mut [ShardLoad],
        events: &mut Vec<DirEvent>,
    ) {
        while let Some(ev) = d.poll_event() {
            let e = self.number(ev);
            if let Some(l) = loads.iter_mut().find(|l| l.shard == e.shard) {
                l.load += if e.created { 1.0 } else { -1.0 };
            }
            events.push(e);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn place(
        &mut self,
        d: &mut Instances,
        now: Time,
        from: SpaceId,
        target: EnterTarget,
        world_exit: Option<(f64, f64)>,
        loads: &[ShardLoad],
        arrival: &dyn Fn(f64, f64) -> CellId,
    ) -> Result<Target, u16> {
        use crate::wire::client::ErrorCode as C;
        let p: Placement = d.enter(now, target, loads).map_err(|e| {
            self.counters.space_refused += 1;
            match e {
                InstanceError::UnknownType(_) | InstanceError::DuplicateType(_) => {
                    C::UnknownSpaceType
                }
                InstanceError::UnknownSpace(_) => C::UnknownSpace,
                InstanceError::Full(_)
                | InstanceError::InstanceFull(_)
                | InstanceError::NoShard => C::SpaceFull,
            }
            .code()
        })?;
        if p.space == from {
            let _ = d.leave(now, p.space);
            self.counters.space_refused += 1;
            return Err(C::SpaceNotAllowed.code());
        }
        let _ = d.leave(now, from);
        self.counters.space_enters += 1;
        let type_id = d.type_of(p.space).unwrap_or(0);
        let (x, z, cell) = if p.space == WORLD_SPACE {
            let c = self.bounds.center();
            let (x, z) = world_exit.unwrap_or((c.x, c.z));
            (x, z, arrival(x, z))
        } else {
            let c = self.bounds.center();
            (c.x, c.z, p.cell)
        };
        Ok(Target {
            space: p.space,
            type_id,
            cell,
            x,
            z,
        })
    }

    fn answer(&mut self, to: ShardId, entity: EntityId, result: Result<Target, u16>) {
        if to == self.ctx.shard {
            self.answers.push((entity, result));
        } else {
            self.outgoing
                .push((to, SpaceMsg::Placed { entity, result }));
        }
    }

    fn number(&mut self, ev: InstanceEvent) -> DirEvent {
        let version = self.next_version;
        self.next_version += 1;
        match ev {
            InstanceEvent::Created {
                space,
                type_id,
                cell,
                shard,
            } => {
                self.counters.instances_created += 1;
                DirEvent {
                    version,
                    created: true,
                    space,
                    type_id,
                    cell,
                    shard,
                }
            }
            InstanceEvent::Destroyed { space, cell, shard } => {
                self.counters.instances_reclaimed += 1;
                DirEvent {
                    version,
                    created: false,
                    space,
                    type_id: 0,
                    cell,
                    shard,
                }
            }
        }
    }

    /// Shard loads for placing instances: instance cells hosted by each
    /// shard (spreads them round-robin-like).
    fn shard_loads(&self) -> Vec<ShardLoad> {
        self.ctx
            .all_shards()
            .map(|s| ShardLoad {
                shard: s,
                load: self.known.values().filter(|k| k.shard == s).count() as f64,
            })
            .collect()
    }
}
