//! The space tree (seed 001, `space_cells`): one space's KD-tree of cells as a
//! replicated, versioned, sans-IO structure, the load model the balancer reads
//! and the balancing policy.
//!
//! - `tree.rs`: the arena, accessors, invariants ([`SpaceTree::validate`]),
//!   rkyv snapshot.
//! - `change.rs`: [`SpaceChange`] values and [`SpaceTree::apply`].
//! - `error.rs`: [`SpaceError`].
//! - `query.rs`: point lookup, cells meeting a rect, neighbours, leaf list.
//! - `load.rs`: [`LoadBook`], smoothed per-cell loads and per-axis sorted
//!   entity samples.
//! - `balance.rs`: the policy ([`decide`] and its parts).
//! - `initial.rs`: [`initial_tree`] and [`fitting_tree`], the starting cut every replica builds.
//! - `params.rs`: [`SpaceParams`], [`BalanceParams`].
//! - `service.rs`: [`SpaceService`], the balancer state machine (gather,
//!   decide, broadcast versioned changes, drive merges).
//! - `instances.rs`: space types and the instance directory of mono spaces
//!   ([`Instances`]: enter by id or type, heavy-load creation, reclaiming).
//!
//! The space service owns the authoritative tree, gathers loads, calls
//! [`decide`], applies and broadcasts the changes; every cell applies the same
//! changes to its replica (the seed's `space_cell_component`). A new cell gets
//! the snapshot. This module must not know about sockets, shards' queues,
//! entities' state or time: it is pure data and pure functions.

mod balance;
mod change;
mod error;
mod initial;
mod instances;
mod load;
mod params;
mod query;
mod service;
mod tree;

pub use balance::{
    decide, gainful_direction, least_loaded, pick_merge, pick_rebalance, pick_split,
    split_direction, split_gains, split_shares, Damping, RebalancePick,
};
pub use change::{ChangeOp, SpaceChange, SplitDirection};
pub use error::SpaceError;
pub use initial::{fitting_tree, initial_tree};
pub use instances::{
    EnterTarget, InstanceError, InstanceEvent, InstanceParams, Instances, Placement, SpaceKind,
    SpaceTypeConfig,
};
pub use load::{CellLoad, EntitySample, LoadBook, LoadError, ShardLoad};
pub use params::{BalanceParams, ParamError, SpaceParams};
pub use query::{rect_distance, share_edge, LeafInfo};
pub use service::{
    CellReport, LoadReport, ServiceCounters, ServiceError, ServiceParams, SpaceService,
};
pub use tree::{Node, NodeIx, NodeKind, SpaceTree, SIDE_TOLERANCE_M};
