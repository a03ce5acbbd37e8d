//! Entities, properties and versioned sync messages (sans-IO).
//!
//! Owns the entity and property model and everything a real, a ghost or an
//! observer needs to keep a property view in step; it owns no cell, AOI or
//! network state and must not touch them.
//!
//! - [`flags`]: who sees a property ([`SyncFlags`], the BigWorld table) and
//!   who a payload is for ([`Audience`]).
//! - [`schema`]: entity types, property and record definitions, limits, the
//!   [`TypeRegistry`] with the built-in `Avatar` and `Npc`.
//! - [`value`], [`ops`], [`codec`]: values, container operations, bytes.
//! - [`store`]: [`PropertyStore`], the source of truth on a real (dirty
//!   marking, per-audience op logs) or a replica on a ghost or client view.
//! - [`state`]: [`Entity`] = core fields + properties + movement; payloads.
//! - [`sync`]: [`SyncMsg`] and the real's [`SyncEmitter`] (one version per
//!   change set, each audience encoded once).
//! - [`reorder`]: the ghost's [`ReorderBuffer`] (version order, gaps, resync).
//! - [`cache`]: [`SyncCache`], recent messages that travel with the real.
//! - [`detail`]: levels of detail on delta bytes ([`detail::filter_delta`]).
//! - [`tracker`]: [`ObserverTracker`], consecutive delivery per observer.

pub mod cache;
pub mod codec;
pub mod detail;
pub mod flags;
pub mod ops;
pub mod reorder;
pub mod schema;
pub mod state;
pub mod store;
pub mod sync;
pub mod tracker;
pub mod value;

pub use cache::{CacheHead, Fill, RunBounds, SyncCache, SyncCacheParams};
pub use codec::DecodeError;
pub use flags::{Audience, SyncFlags};
pub use ops::{ArrayOp, MapOp, OpError};
pub use reorder::{Offered, ReorderBuffer, ReorderParams, ResyncRequest};
pub use schema::{
    Detail, EntityType, EntityTypeBuilder, EntityTypeId, PropLimits, PropType, SchemaError,
    TypeRegistry, AVATAR, NPC,
};
pub use state::{Entity, EntityCore};
pub use store::{PropError, PropertyStore};
pub use sync::{ChangeSet, SyncEmitter, SyncKind, SyncMsg, MOVEMENT_BYTES};
pub use tracker::{CatchUp, Delivery, ObserverTracker, TrackerFull, TrackerParams};
pub use value::{Key, Value};
