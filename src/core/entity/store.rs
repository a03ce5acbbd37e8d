//! The property values of one entity, their dirty state, and their payloads.
//!
//! Owns [`PropertyStore`]: on a real it is the source of truth (set marks a
//! property dirty; a container op is validated, applied and logged once per
//! audience that can see it, already filtered and encoded); on a ghost or a
//! client view it is a replica for one [`Audience`], fed by
//! [`PropertyStore::apply_snapshot`] and [`PropertyStore::apply_delta`].
//! It does not know versions, movement or messages (see `state` and `sync`).
//!
//! # Wire forms
//!
//! Snapshot for audience `a`: `u8 n` (the number of properties visible to
//! `a`), then each visible value in index order.
//!
//! Delta for audience `a`: `u8 n`, then `n` entries `varint index, u8 mode`;
//! mode 0 is followed by the whole value, mode 1 by `varint k` and `k` logged
//! container ops (see `ops`). A container whose log for any audience would
//! pass [`PropLimits::op_log_bytes_max`](super::schema::PropLimits) is sent
//! whole instead, so logs stay bounded.

use super::codec::{put_uvar, DecodeError, Reader};
use super::flags::Audience;
use super::ops::{self, ArrayOp, MapOp, OpError};
#[cfg(test)]
use super::schema::PropLimits;
use super::schema::{EntityType, PropType};
use super::value::{self, default_of, TypeError, Value};
use std::sync::Arc;

/// Why a local property change was refused (nothing was changed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PropError {
    /// No property with this index.
    #[error("no property {0}")]
    UnknownProperty(usize),
    /// The store is a replica; only the real changes properties.
    #[error("replica is read-only")]
    ReadOnly,
    /// An array op on a non-array (or a map op on a non-map).
    #[error("operation does not match the property kind")]
    WrongKind,
    /// The value does not fit the property's type or limits.
    #[error(transparent)]
    Type(#[from] TypeError),
    /// The container op does not apply.
    #[error(transparent)]
    Op(#[from] OpError),
}

/// Logged ops of one container for one audience, already encoded.
#[derive(Clone, Debug, Default)]
struct OpLog {
    bytes: Vec<u8>,
    ops: u32,
}

pub(super) const MODE_WHOLE: u8 = 0;
pub(super) const MODE_OPS: u8 = 1;

/// The properties of one entity (source on a real, replica elsewhere).
#[derive(Clone, Debug)]
pub struct PropertyStore {
    ty: Arc<EntityType>,
    holds: Audience,
    values: Vec<Value>,
    /// Bit i: property i changed as a whole since the last flush.
    dirty_whole: u64,
    /// Bit i: container i has logged ops since the last flush.
    dirty_ops: u64,
    /// Per container slot, per remote audience.
    logs: Vec<[OpLog; 3]>,
}

impl PropertyStore {
    /// The source store of a real, every property at its default.
    pub fn new(ty: Arc<EntityType>) -> Self {
        Self::replica(ty, Audience::Real)
    }

    /// A replica for `holds` (all defaults until a snapshot arrives).
    /// `Audience::Real` makes a source instead.
    pub fn replica(ty: Arc<EntityType>, holds: Audience) -> Self {
        let values = ty.props().iter().map(|p| default_of(&ty, p.ty)).collect();
        let logs = vec![
            Default::default();
            if holds == Audience::Real {
                ty.containers()
            } else {
                0
            }
        ];
        PropertyStore {
            ty,
            holds,
            values,
            dirty_whole: 0,
            dirty_ops: 0,
            logs,
        }
    }

    /// The entity type.
    pub fn entity_type(&self) -> &Arc<EntityType> {
        &self.ty
    }

    /// Whose data this store holds (`Real` for the source).
    pub fn holds(&self) -> Audience {
        self.holds
    }

    /// One property's value.
    pub fn get(&self, index: usize) -> Option<&Value> {
        self.values.get(index)
    }

    /// All values in index order (properties this store cannot see are defaults).
    pub fn values(&self) -> &[Value] {
        &self.values
    }

    /// True if anything changed since the last [`PropertyStore::clear_dirty`].
    pub fn is_dirty(&self) -> bool {
        self.dirty_whole | self.dirty_ops != 0
    }

    /// True if anything a remote audience sees (ghosts, the own client,
    /// other clients) changed since the last [`PropertyStore::clear_dirty`]:
    /// a change to real-only properties alone is no change set. (Their
    /// dirty bits wait, harmlessly: no delta carries them, and the next
    /// change set clears them.)
    #[inline]
    pub fn is_dirty_remote(&self) -> bool {
        (self.dirty_whole | self.dirty_ops) & self.ty.remote_mask() != 0
    }

    fn writable(&self, index: usize) -> Result<PropType, PropError> {
        if self.holds != Audience::Real {
            return Err(PropError::ReadOnly);
        }
        self.ty
            .prop(index)
            .map(|p| p.ty)
            .ok_or(PropError::UnknownProperty(index))
    }

    /// Replaces a property's value and marks it dirty as a whole.
    ///
    /// # Errors
    /// [`PropError`]: unknown index, replica, or a value not fitting the type.
    pub fn set(&mut self, index: usize, v: Value) -> Result<(), PropError> {
        let ty = self.writable(index)?;
        value::check(&self.ty, ty, &v)?;
        self.values[index] = v;
        self.mark_whole(index);
        Ok(())
    }

    fn mark_whole(&mut self, index: usize) {
        self.dirty_whole |= 1 << index;
        self.dirty_ops &= !(1 << index);
        if let Some(slot) = self.ty.props()[index].container_slot {
            for log in &mut self.logs[usize::from(slot)] {
                log.bytes.clear();
                log.ops = 0;
            }
        }
    }

    /// Applies an array op and logs it for every audience that sees it.
    ///
    /// # Errors
    /// [`PropError`]: unknown index, replica, not an array, or the op does not
    /// apply (index range, type, limits). Nothing changes on error.
    pub fn array_op(&mut self, index: usize, op: ArrayOp) -> Result<(), PropError> {
        let PropType::Array(elem) = self.writable(index)? else {
            return Err(PropError::WrongKind);
        };
        let Value::Array(items) = &self.values[index] else {
            unreachable!("array property holds an array")
        };
        ops::validate_array(&self.ty, elem, items, &op)?;
        if let ArrayOp::Replace(v) = op {
            return self.set(index, Value::Array(v));
        }
        let ty = Arc::clone(&self.ty);
        let clear = op == ArrayOp::Clear;
        self.log(index, clear, |out, aud| {
            ops::encode_array_op(out, &ty, elem, &op, aud)
        });
        let Value::Array(items) = &mut self.values[index] else {
            unreachable!("array property holds an array")
        };
        ops::apply_array(&ty, elem, items, op);
        Ok(())
    }

    /// Applies a map op and logs it for every audience that sees it.
    ///
    /// # Errors
    /// As [`PropertyStore::array_op`], for maps (erasing a missing key fails).
    pub fn map_op(&mut self, index: usize, op: MapOp) -> Result<(), PropError> {
        let PropType::Map(key_ty, elem) = self.writable(index)? else {
            return Err(PropError::WrongKind);
        };
        let Value::Map(items) = &self.values[index] else {
            unreachable!("map property holds a map")
        };
        ops::validate_map(&self.ty, key_ty, elem, items, &op)?;
        if let MapOp::Replace(m) = op {
            return self.set(index, Value::Map(m));
        }
        let ty = Arc::clone(&self.ty);
        let clear = op == MapOp::Clear;
        self.log(index, clear, |out, aud| {
            ops::encode_map_op(out, &ty, elem, &op, aud)
        });
        let Value::Map(items) = &mut self.values[index] else {
            unreachable!("map property holds a map")
        };
        ops::apply_map(items, op);
        Ok(())
    }

    /// Logs one op (encoded by `enc` per audience). A clear makes earlier ops moot.
    fn log(&mut self, index: usize, clear: bool, enc: impl Fn(&mut Vec<u8>, Audience) -> bool) {
        if self.dirty_whole & 1 << index != 0 {
            return; // the whole value goes out anyway
        }
        let def = &self.ty.props()[index];
        let slot = usize::from(def.container_slot.expect("containers have a log slot"));
        let flags = def.flags;
        let max = self.ty.limits().op_log_bytes_max;
        let mut overflow = false;
        for (log, aud) in self.logs[slot].iter_mut().zip(Audience::REMOTE) {
            if !flags.visible_to(aud) {
                continue;
            }
            if clear {
                log.bytes.clear();
                log.ops = 0;
            }
            if enc(&mut log.bytes, aud) {
                log.ops += 1;
            }
            overflow |= log.bytes.len() > max;
        }
        if overflow {
            self.mark_whole(index);
        } else {
            self.dirty_ops |= 1 << index;
        }
    }

    /// Appends the full state as `aud` sees it.
    ///
    /// # Panics
    /// If this store cannot serve `aud` (e.g. a ghost asked for own-client data).
    pub fn encode_snapshot(&self, aud: Audience, out: &mut Vec<u8>) {
        self.encode_snapshot_except(aud, 0, out);
    }

    /// As [`PropertyStore::encode_snapshot`], with the properties in `omit`
    /// at their defaults (a client beyond their level of detail: same
    /// layout, the values it may not have yet left out).
    ///
    /// # Panics
    /// If this store cannot serve `aud`.
    pub fn encode_snapshot_except(&self, aud: Audience, omit: u64, out: &mut Vec<u8>) {
        assert!(
            aud.can_be_served_by(self.holds),
            "{:?} cannot serve {aud:?}",
            self.holds
        );
        let mask = self.ty.visible_mask(aud);
        out.push(mask.count_ones() as u8);
        for p in self.ty.props().iter().filter(|p| mask >> p.index & 1 != 0) {
            if omit >> p.index & 1 != 0 {
                value::encode_default(out, &self.ty, p.ty, aud);
            } else {
                value::encode(out, &self.ty, p.ty, &self.values[usize::from(p.index)], aud);
            }
        }
    }

    /// Appends a delta for `aud` that sets each property of `mask` it may
    /// see to its whole current value (a level-of-detail catch-up).
    ///
    /// # Panics
    /// If this store cannot serve `aud`.
    pub fn encode_whole(&self, aud: Audience, mask: u64, out: &mut Vec<u8>) {
        assert!(aud.can_be_served_by(self.holds), "cannot serve {aud:?}");
        let mask = mask & self.ty.visible_mask(aud);
        out.push(mask.count_ones() as u8);
        for p in self.ty.props().iter().filter(|p| mask >> p.index & 1 != 0) {
            put_uvar(out, u64::from(p.index));
            out.push(MODE_WHOLE);
            value::encode(out, &self.ty, p.ty, &self.values[usize::from(p.index)], aud);
        }
    }

    /// Appends the changes since the last flush as `aud` sees them. Returns
    /// false if there was nothing for `aud` (one byte, `n = 0`, is still written).
    ///
    /// # Panics
    /// If called on a replica or for `Audience::Real`.
    pub fn encode_delta(&self, aud: Audience, out: &mut Vec<u8>) -> bool {
        assert_eq!(self.holds, Audience::Real, "only the real encodes deltas");
        let k = aud.remote_index().expect("deltas go to remote audiences");
        let count_at = out.len();
        out.push(0);
        let mut count = 0u8;
        let mut bits = (self.dirty_whole | self.dirty_ops) & self.ty.visible_mask(aud);
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let def = &self.ty.props()[i];
            if self.dirty_whole >> i & 1 != 0 {
                put_uvar(out, i as u64);
                out.push(MODE_WHOLE);
                value::encode(out, &self.ty, def.ty, &self.values[i], aud);
            } else {
                let log =
                    &self.logs[usize::from(def.container_slot.expect("ops imply container"))][k];
                if log.ops == 0 {
                    continue;
                }
                put_uvar(out, i as u64);
                out.push(MODE_OPS);
                put_uvar(out, u64::from(log.ops));
                out.extend_from_slice(&log.bytes);
            }
            count += 1;
        }
        out[count_at] = count;
        count > 0
    }

    /// Forgets the changes (after every audience's delta was encoded).
    pub fn clear_dirty(&mut self) {
        let mut bits = self.dirty_ops;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let slot = self.ty.props()[i]
                .container_slot
                .expect("ops imply container");
            for log in &mut self.logs[usize::from(slot)] {
                log.bytes.clear();
                log.ops = 0;
            }
        }
        self.dirty_whole = 0;
        self.dirty_ops = 0;
    }

    /// Replaces every value with a snapshot encoded for [`PropertyStore::holds`].
    /// All-or-nothing: on error the store is unchanged.
    ///
    /// # Errors
    /// Any [`DecodeError`] the bytes cause.
    pub fn apply_snapshot(&mut self, r: &mut Reader<'_>) -> Result<(), DecodeError> {
        let mask = self.ty.visible_mask(self.holds);
        let n = r.u8()?;
        if u32::from(n) != mask.count_ones() {
            return Err(DecodeError::BadProperty(u64::from(n)));
        }
        let mut values = Vec::with_capacity(self.values.len());
        for p in self.ty.props() {
            values.push(if mask >> p.index & 1 != 0 {
                value::decode(r, &self.ty, p.ty, self.holds)?
            } else {
                default_of(&self.ty, p.ty)
            });
        }
        self.values = values;
        self.dirty_whole = 0;
        self.dirty_ops = 0;
        Ok(())
    }

    /// Applies a delta encoded for [`PropertyStore::holds`]. On error the store
    /// holds a valid but partly updated state: the caller must resync.
    ///
    /// # Errors
    /// Any [`DecodeError`] the bytes cause, including ops that do not apply.
    pub fn apply_delta(&mut self, r: &mut Reader<'_>) -> Result<(), DecodeError> {
        let mask = self.ty.visible_mask(self.holds);
        let n = r.u8()?;
        for _ in 0..n {
            let i = r.uvar()?;
            let def = usize::try_from(i)
                .ok()
                .filter(|&i| mask >> i.min(63) & 1 != 0 && i < 64);
            let Some(i) = def else {
                return Err(DecodeError::BadProperty(i));
            };
            let ty = self.ty.props()[i].ty;
            match r.u8()? {
                MODE_WHOLE => self.values[i] = value::decode(r, &self.ty, ty, self.holds)?,
                MODE_OPS => self.apply_ops(r, i, ty)?,
                t => return Err(DecodeError::BadTag(t)),
            }
        }
        Ok(())
    }

    fn apply_ops(&mut self, r: &mut Reader<'_>, i: usize, ty: PropType) -> Result<(), DecodeError> {
        let k = r.len(r.remaining())?;
        let et = &*self.ty;
        for _ in 0..k {
            match (ty, &mut self.values[i]) {
                (PropType::Array(elem), Value::Array(items)) => {
                    let op = ops::decode_array_op(r, et, elem, self.holds)?;
                    ops::validate_array(et, elem, items, &op)?;
                    ops::apply_array(et, elem, items, op);
                }
                (PropType::Map(key_ty, elem), Value::Map(items)) => {
                    let op = ops::decode_map_op(r, et, key_ty, elem, self.holds)?;
                    ops::validate_map(et, key_ty, elem, items, &op)?;
                    ops::apply_map(items, op);
                }
                _ => return Err(DecodeError::WrongType),
            }
        }
        Ok(())
    }

    /// The source's values as `aud` sees them (invisible properties and
    /// fields at their defaults): what a replica for `aud` must equal.
    pub fn filtered(&self, aud: Audience) -> Vec<Value> {
        self.ty
            .props()
            .iter()
            .zip(&self.values)
            .map(|(p, v)| {
                if p.flags.visible_to(aud) {
                    value::filtered(&self.ty, p.ty, v, aud)
                } else {
                    default_of(&self.ty, p.ty)
                }
            })
            .collect()
    }

    /// Checks every invariant (values fit their types, dirty state consistent).
    ///
    /// # Panics
    /// On any broken invariant.
    pub fn verify(&self) {
        assert_eq!(self.values.len(), self.ty.props().len());
        for (p, v) in self.ty.props().iter().zip(&self.values) {
            assert_eq!(
                value::check(&self.ty, p.ty, v),
                Ok(()),
                "property {}",
                p.name
            );
        }
        assert_eq!(self.dirty_whole & self.dirty_ops, 0);
        for p in self.ty.props() {
            let Some(slot) = p.container_slot else {
                continue;
            };
            if self.dirty_ops >> p.index & 1 == 0 && self.holds == Audience::Real {
                assert!(self.logs[usize::from(slot)]
                    .iter()
                    .all(|l| l.ops == 0 && l.bytes.is_empty()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::entity::schema::{avatar_type, TypeRegistry, AVATAR};

    fn buff(id: u64, stacks: i64, exp: u64) -> Value {
        Value::Record(vec![Value::UInt(id), Value::Int(stacks), Value::UInt(exp)])
    }

    fn round_trip(src: &PropertyStore, aud: Audience) -> PropertyStore {
        let mut dst = PropertyStore::replica(Arc::clone(src.entity_type()), aud);
        let mut buf = Vec::new();
        src.encode_snapshot(aud, &mut buf);
        let mut r = Reader::new(&buf);
        dst.apply_snapshot(&mut r).expect("snapshot");
        r.finish().expect("no trailing");
        dst
    }

    #[test]
    fn each_field_goes_only_to_its_audience() {
        // Seed 000's flaw: a record with an own-only field and a public field
        // inside a public container must reach each audience with exactly its
        // fields, not "the lowest common flag" nor nothing.
        let reg = TypeRegistry::with_builtins();
        let ty = Arc::clone(reg.get(AVATAR).expect("avatar"));
        let buffs = ty.prop_index("buffs").expect("buffs");
        let mut real = PropertyStore::new(Arc::clone(&ty));
        let mut ghost = round_trip(&real, Audience::Ghost);
        let mut other = round_trip(&real, Audience::OtherClients);
        real.array_op(buffs, ArrayOp::Push(buff(4, 1, 5000)))
            .expect("push");
        real.array_op(
            buffs,
            ArrayOp::SetField {
                index: 0,
                field: 2,
                value: Value::UInt(7000),
            },
        )
        .expect("set");
        let mut to_other = Vec::new();
        assert!(real.encode_delta(Audience::OtherClients, &mut to_other));
        let mut to_ghost = Vec::new();
        real.encode_delta(Audience::Ghost, &mut to_ghost);
        real.clear_dirty();
        other
            .apply_delta(&mut Reader::new(&to_other))
            .expect("other");
        ghost
            .apply_delta(&mut Reader::new(&to_ghost))
            .expect("ghost");
        assert_eq!(other.get(buffs), Some(&Value::Array(vec![buff(4, 1, 0)])));
        assert_eq!(
            ghost.get(buffs),
            Some(&Value::Array(vec![buff(4, 1, 7000)]))
        );
        // A change of only the hidden field sends nothing to other clients.
        real.array_op(
            buffs,
            ArrayOp::SetField {
                index: 0,
                field: 2,
                value: Value::UInt(9),
            },
        )
        .expect("set");
        let mut none = Vec::new();
        assert!(!real.encode_delta(Audience::OtherClients, &mut none));
        assert_eq!(none, vec![0]);
    }

    #[test]
    fn long_op_logs_fall_back_to_whole_values() {
        let limits = PropLimits {
            op_log_bytes_max: 8,
            ..PropLimits::default()
        };
        let mut reg = TypeRegistry::new();
        reg.register(avatar_type().limits(limits)).expect("type");
        let ty = Arc::clone(reg.get(AVATAR).expect("avatar"));
        let buffs = ty.prop_index("buffs").expect("buffs");
        let mut real = PropertyStore::new(Arc::clone(&ty));
        let mut own = round_trip(&real, Audience::OwnClient);
        for i in 0..5 {
            real.array_op(buffs, ArrayOp::Push(buff(i, 1, 1000)))
                .expect("push");
            real.verify();
        }
        assert_eq!(real.dirty_whole >> buffs & 1, 1);
        let mut delta = Vec::new();
        real.encode_delta(Audience::OwnClient, &mut delta);
        real.clear_dirty();
        own.apply_delta(&mut Reader::new(&delta)).expect("delta");
        assert_eq!(own.values(), &real.filtered(Audience::OwnClient)[..]);
    }

    #[test]
    fn replicas_are_read_only_and_errors_change_nothing() {
        let reg = TypeRegistry::with_builtins();
        let ty = Arc::clone(reg.get(AVATAR).expect("avatar"));
        let mut ghost = PropertyStore::replica(Arc::clone(&ty), Audience::Ghost);
        assert_eq!(
            ghost.set(0, Value::Str("x".into())),
            Err(PropError::ReadOnly)
        );
        let mut real = PropertyStore::new(ty);
        assert_eq!(
            real.set(99, Value::Int(1)),
            Err(PropError::UnknownProperty(99))
        );
        assert_eq!(real.array_op(0, ArrayOp::Pop), Err(PropError::WrongKind));
        let buffs = real.entity_type().prop_index("buffs").expect("buffs");
        assert!(matches!(
            real.array_op(buffs, ArrayOp::Pop),
            Err(PropError::Op(OpError::Index { .. }))
        ));
        assert!(!real.is_dirty());
    }
}
