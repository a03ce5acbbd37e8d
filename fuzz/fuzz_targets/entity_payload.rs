//! The entity payload decoder (`Entity::apply_payload`): snapshots and
//! deltas for every audience and both built-in types.
//!
//! Byte 0 picks the type (bit 0), the replica's audience (bits 1-2) and the
//! payload kind (bits 3-4); the rest is the payload. Checks: no panic; an
//! accepted snapshot leaves a replica whose properties verify and whose
//! re-encoded snapshot is accepted again and re-encodes identically.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::Arc;
use tessera::core::entity::{Audience, Entity, EntityTypeId, SyncKind, TypeRegistry};
use tessera::core::ids::EntityId;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, payload)) = data.split_first() else {
        return;
    };
    let reg = TypeRegistry::with_builtins();
    let ty = Arc::clone(reg.get(EntityTypeId(u16::from(sel & 1))).expect("builtin"));
    let aud = [
        Audience::Real,
        Audience::Ghost,
        Audience::OwnClient,
        Audience::OtherClients,
    ][usize::from(sel >> 1 & 3)];
    let kind = [
        SyncKind::Movement,
        SyncKind::Props,
        SyncKind::MovementAndProps,
        SyncKind::Snapshot,
    ][usize::from(sel >> 3 & 3)];
    let mut e = Entity::new_replica(EntityId(9), Arc::clone(&ty), aud);
    let ok = e.apply_payload(kind, payload).is_ok();
    e.props().verify();
    if ok && kind == SyncKind::Snapshot {
        let mut snap = Vec::new();
        e.encode_snapshot(aud, &mut snap);
        let mut f = Entity::new_replica(EntityId(9), ty, aud);
        f.apply_payload(SyncKind::Snapshot, &snap)
            .expect("a re-encoded snapshot applies");
        let mut snap2 = Vec::new();
        f.encode_snapshot(aud, &mut snap2);
        assert_eq!(snap, snap2);
    }
});
