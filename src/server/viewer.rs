//! What the cell host shows the live viewer (`shard::view_sink`, published
//! by `runtime::viewer`; docs/viewer.md): its world cells with their loads
//! and counts, their entities (sampled evenly above
//! `admin.viewer_entities_max` per cell), and the events since the last
//! publish: migrations out of its cells and, on shard 0, the balancer's
//! decisions.
//!
//! Events are noted as they happen into a buffer of at most
//! `admin.viewer_events_max` (the excess is counted, not kept); nothing is
//! noted with the admin endpoint off. Noting a migration is one match on an
//! output the cell made anyway and one push into a reused vector.
//!
//! Runs on: the shard's thread. Owns: the pending events and the type-name
//! cache.

use super::balance::WORLD_SPACE;
use super::host::CellHost;
use crate::config::Config;
use crate::core::cell::{Cell, CellMsg, Dest, Msg, Outgoing, Residency};
use crate::core::entity::{EntityTypeId, TypeRegistry};
use crate::core::ids::CellId;
use crate::core::space::{ChangeOp, SpaceChange};
use crate::core::time::Time;
use crate::shard::{BalanceOp, CellView, EntityView, ViewEvent, ViewSink};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The host's viewer state.
#[derive(Debug)]
pub(super) struct HostViewer {
    on: bool,
    events: Vec<ViewEvent>,
    events_max: usize,
    /// Events not kept (the buffer was full).
    pub(super) dropped: u64,
    types: Arc<TypeRegistry>,
    names: BTreeMap<EntityTypeId, Arc<str>>,
}

fn ms(t: Time) -> u64 {
    t.0 / 1_000
}

/// The viewer's form of a balancer decision.
pub(super) fn decision_event(at: Time, c: &SpaceChange) -> ViewEvent {
    let (op, cell, new_cell, new_shard, pos) = match c.op {
        ChangeOp::Split {
            cell,
            new_cell,
            new_shard,
            ..
        } => (
            BalanceOp::Split,
            Some(cell.0),
            Some(new_cell.0),
            Some(new_shard.index),
            None,
        ),
        ChangeOp::Rebalance { at, .. } => (BalanceOp::Rebalance, None, None, None, Some(at)),
        ChangeOp::StartMerge { cell } => (BalanceOp::MergeStart, Some(cell.0), None, None, None),
        ChangeOp::FinishMerge { cell } => (BalanceOp::Merge, Some(cell.0), None, None, None),
    };
    ViewEvent::Balance {
        t_ms: ms(at),
        op,
        cell,
        new_cell,
        new_shard,
        at: pos,
        version: c.version + 1,
    }
}

impl HostViewer {
    pub(super) fn new(config: &Config, types: Arc<TypeRegistry>) -> HostViewer {
        let on = config.admin.enabled;
        let events_max = if on {
            config.admin.viewer_events_max as usize
        } else {
            0
        };
        HostViewer {
            on,
            events: Vec::with_capacity(events_max),
            events_max,
            dropped: 0,
            types,
            names: BTreeMap::new(),
        }
    }

    fn push(&mut self, e: ViewEvent) {
        if self.events.len() < self.events_max {
            self.events.push(e);
        } else if self.on {
            self.dropped += 1;
        }
    }

    /// Notes the migrations among `cell`'s outputs.
    pub(super) fn note_outputs(&mut self, now: Time, cell: &Cell, outs: &[Outgoing]) {
        if !self.on {
            return;
        }
        for o in outs {
            if let (Dest::Cell(to), Msg::Cell(CellMsg::Onload(load))) = (o.to, &o.msg) {
                let pos = cell.view(load.entity).map(|v| v.pos());
                self.push(ViewEvent::Migration {
                    t_ms: ms(now),
                    entity: load.entity.0,
                    from_cell: cell.id().0,
                    to_cell: to.0,
                    x: pos.map_or(0.0, |p| p.x),
                    z: pos.map_or(0.0, |p| p.z),
                });
            }
        }
    }

    fn name(&mut self, t: EntityTypeId) -> Arc<str> {
        let types = &self.types;
        self.names
            .entry(t)
            .or_insert_with(|| {
                types
                    .get(t)
                    .map_or_else(|| Arc::from("unknown"), |ty| Arc::from(ty.name()))
            })
            .clone()
    }
}

impl CellHost {
    /// Fills the viewer's sink: this shard's world cells, their entities
    /// (sampled above the sink's cap), the events noted since last time.
    pub(super) fn fill_view(&mut self, sink: &mut ViewSink) {
        for (at, c) in self.balance.take_decisions() {
            self.viewer.push(decision_event(at, &c));
        }
        for e in self.viewer.events.drain(..) {
            sink.event(e);
        }
        let me = self.ctx.shard;
        let max = sink.entities_max().max(1);
        for leaf in self.tree.leaves().filter(|l| l.shard == me) {
            let Some(cell) = self.cells.get(&leaf.cell) else {
                continue;
            };
            let total = cell.entity_count();
            let stride = total.div_ceil(max).max(1);
            let mut reals = 0u32;
            for (i, (id, v)) in cell.entities().enumerate() {
                let real = matches!(v.residency, Residency::Real { .. });
                reals += u32::from(real);
                if i % stride != 0 {
                    continue;
                }
                let core = v.entity.core();
                let real_at = match v.residency {
                    Residency::Ghost { real_at, .. } => Some(real_at.0),
                    _ => None,
                };
                let e = EntityView {
                    id: id.0,
                    cell: leaf.cell.0,
                    kind: self.viewer.name(core.type_id),
                    x: core.pos.x,
                    z: core.pos.z,
                    yaw: core.yaw,
                    real,
                    version: v.version,
                    real_at,
                    haunts: (0, 0),
                };
                let haunts = cell.haunts(id).unwrap_or(&[]);
                sink.entity(e, haunts.iter().map(|h| h.cell.0));
            }
            let r = leaf.rect;
            sink.cell(CellView {
                id: leaf.cell.0,
                space: WORLD_SPACE.0,
                rect: [r.min_x, r.min_z, r.max_x, r.max_z],
                shard: me.index,
                node: me.node.0,
                load: self.balance.own_load(leaf.cell).map_or(0.0, |l| l.0),
                reals,
                ghosts: u32::try_from(total).unwrap_or(u32::MAX) - reals,
                merging: leaf.merging,
            });
        }
    }

    /// The cell `id`'s outputs in `outs` are about to be routed.
    pub(super) fn note_outputs(&mut self, now: Time, id: CellId, outs: &[Outgoing]) {
        if let Some(cell) = self.cells.get(&id) {
            self.viewer.note_outputs(now, cell, outs);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ids::ShardId;
    use crate::core::space::SplitDirection;

    #[test]
    fn events_beyond_the_bound_are_counted_not_kept() {
        let types = Arc::new(TypeRegistry::with_builtins());
        let config = Config::load(None, &["admin.viewer_events_max=16".into()]).expect("valid");
        let mut v = HostViewer::new(&config, types.clone());
        let merge = SpaceChange {
            version: 1,
            op: ChangeOp::StartMerge { cell: CellId(1) },
        };
        for _ in 0..20 {
            v.push(decision_event(Time::ZERO, &merge));
        }
        assert_eq!((v.events.len(), v.dropped), (16, 4));
        let off = Config::load(None, &["admin.enabled=false".into()]).expect("valid");
        let mut v = HostViewer::new(&off, types);
        v.push(decision_event(Time::ZERO, &merge));
        assert_eq!(
            (v.events.len(), v.dropped),
            (0, 0),
            "nothing noted when off"
        );
    }

    #[test]
    fn decisions_become_timeline_events() {
        let split = SpaceChange {
            version: 4,
            op: ChangeOp::Split {
                cell: CellId(2),
                direction: SplitDirection::MaxX,
                new_cell: CellId(9),
                new_shard: ShardId::local(1),
            },
        };
        let e = decision_event(Time(3_000_000), &split);
        let json = serde_json::to_value(&e).expect("json");
        assert_eq!(json["kind"], "balance");
        assert_eq!(json["op"], "split");
        assert_eq!(json["cell"], 2);
        assert_eq!(json["new_cell"], 9);
        assert_eq!(json["new_shard"], 1);
        assert_eq!(json["version"], 5);
        assert_eq!(json["t_ms"], 3_000);
        let merge = SpaceChange {
            version: 5,
            op: ChangeOp::FinishMerge { cell: CellId(9) },
        };
        assert_eq!(
            serde_json::to_value(decision_event(Time::ZERO, &merge)).expect("json")["op"],
            "merge"
        );
    }
}
