//! Unit tests of the spaces state (`spaces.rs`) without a runtime: the
//! directory on shard 0, its numbered events applied by a replica in
//! version order (whatever order they arrive in), instance cells created
//! on their shard and dropped once empty, parking of early messages.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::spaces::{is_instance_cell, HostSpaces, SpaceMsg, INSTANCE_CELL_BASE};
use crate::config::Config;
use crate::core::cell::Cell;
use crate::core::entity::TypeRegistry;
use crate::core::ids::{CellId, EntityId, ShardId, SpaceId};
use crate::core::time::Time;
use crate::server::balance::WORLD_SPACE;
use crate::shard::ShardContext;
use crate::wire::client::ErrorCode;

fn ctx(index: u16) -> ShardContext {
    ShardContext {
        shard: ShardId::local(index),
        shards: 2,
        tick: Duration::from_millis(50),
        unix_at_start_s: 0,
    }
}

fn host(index: u16) -> HostSpaces {
    let config = Config::load(
        None,
        &[
            "spaces.reclaim_empty_after_ms=1000".into(),
            "spaces.round_ms=100".into(),
        ],
    )
    .expect("config");
    HostSpaces::new(
        &config,
        ctx(index),
        CellId(0),
        Arc::new(TypeRegistry::with_builtins()),
    )
}

fn enter(e: u64, from: SpaceId, by_type: bool, id: u32) -> SpaceMsg {
    SpaceMsg::Enter {
        entity: EntityId(e),
        reply_to: super::host::entity_shard(EntityId(e)),
        from,
        by_type,
        id,
        world_exit: Some((7.0, 8.0)),
    }
}

#[test]
fn the_directory_places_numbers_and_the_replica_follows_in_order() {
    let mut zero = host(0);
    let mut one = host(1);
    let (mut cells0, mut cells1) = (BTreeMap::<CellId, Cell>::new(), BTreeMap::new());
    let arrival = |_: f64, _: f64| CellId(5);
    // Two dungeons (private: two instances), then a refusal.
    zero.requests.push(enter(1, WORLD_SPACE, true, 3));
    zero.requests.push(enter(2, WORLD_SPACE, true, 3));
    zero.requests.push(enter(3, WORLD_SPACE, true, 99));
    zero.run_directory(Time::ZERO, &arrival);
    zero.apply(Time::ZERO, &mut cells0);
    let answers: Vec<_> = std::mem::take(&mut zero.answers);
    assert_eq!(answers.len(), 3);
    let (a, b) = (answers[0].1.expect("placed"), answers[1].1.expect("placed"));
    assert_ne!(a.space, b.space);
    assert!(is_instance_cell(a.cell) && is_instance_cell(b.cell));
    assert_eq!(answers[2].1, Err(ErrorCode::UnknownSpaceType.code()));
    // Shard 1 learns both creations, in reverse order.
    let mut events: Vec<_> = zero
        .outgoing
        .drain(..)
        .filter_map(|(to, m)| match m {
            SpaceMsg::Directory(ev) if to == ShardId::local(1) => Some(ev),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(events.len(), 2);
    assert!(one.awaits(b.cell), "not known yet: parked");
    events.reverse();
    one.receive(vec![events[0]]);
    one.apply(Time::ZERO, &mut cells1);
    assert!(one.shard_of(b.cell).is_none(), "waits for version 1");
    one.receive(vec![events[1]]);
    one.apply(Time::ZERO, &mut cells1);
    assert_eq!(one.shard_of(a.cell), zero.shard_of(a.cell));
    assert_eq!(
        (cells0.len(), cells1.len()),
        (1, 1),
        "spread over the shards"
    );
    assert_ne!(zero.shard_of(a.cell), zero.shard_of(b.cell));
    assert!(!one.awaits(a.cell) && !one.awaits(CellId(3)));
    assert!(one.awaits(CellId(INSTANCE_CELL_BASE + 10)));
    // Both leave to the world; after the reclaim delay both are destroyed.
    let world = zero.requests.len();
    assert_eq!(world, 0);
    zero.requests.push(enter(1, a.space, true, 1));
    zero.requests.push(SpaceMsg::Left { space: b.space });
    zero.run_directory(Time::from_millis(100), &arrival);
    let back = zero.answers.pop().expect("answer").1.expect("placed");
    assert_eq!(
        (back.space, back.cell, back.x, back.z),
        (WORLD_SPACE, CellId(5), 7.0, 8.0)
    );
    zero.run_directory(Time::from_millis(1500), &arrival);
    zero.apply(Time::from_millis(1500), &mut cells0);
    zero.drop_retired(Time::from_millis(1500), &mut cells0);
    let c = zero.counters();
    assert_eq!(
        (c.instances_created, c.instances_reclaimed, c.instances_live),
        (2, 2, 0)
    );
    assert!(cells0.is_empty(), "the empty cell is dropped");
    assert_eq!(c.space_enters, 3);
    assert_eq!(c.space_refused, 1);
}
