//! Container operations: the logged, replayable edits of arrays and maps.
//!
//! Owns [`ArrayOp`] and [`MapOp`], their validation against a container and
//! the schema, their application, and their wire form (a tag byte then
//! operands, element values filtered per audience). The source and every
//! replica apply operations through the same [`apply_array`] / [`apply_map`]
//! so both sides replay identically. It knows nothing of dirty tracking.

use super::codec::{put_uvar, DecodeError, Reader};
use super::flags::Audience;
use super::schema::{ElemType, EntityType, FieldDef, KeyType};
use super::value::{self, default_of, encode_key, encode_scalar, Key, TypeError, Value};
use std::collections::BTreeMap;

/// An edit of an array property.
#[derive(Clone, Debug, PartialEq)]
pub enum ArrayOp {
    /// Overwrite element `index` (BigWorld/seed "update": `mark_dirty(pos)`).
    Update {
        /// Element position.
        index: usize,
        /// New element.
        value: Value,
    },
    /// Append an element.
    Push(Value),
    /// Remove the last element.
    Pop,
    /// Insert before `index` (`index == len` appends).
    Insert {
        /// Position.
        index: usize,
        /// New element.
        value: Value,
    },
    /// Remove element `index`.
    Erase(usize),
    /// Remove all elements.
    Clear,
    /// Truncate or pad with default elements.
    Resize(usize),
    /// Replace the whole array (sent whole, never logged).
    Replace(Vec<Value>),
    /// Set one field of a record element (sent only to audiences that see the field).
    SetField {
        /// Element position.
        index: usize,
        /// Field position in the record.
        field: usize,
        /// New field value.
        value: Value,
    },
}

/// An edit of a map property.
#[derive(Clone, Debug, PartialEq)]
pub enum MapOp {
    /// Insert or overwrite `key`.
    Set {
        /// Key.
        key: Key,
        /// Element.
        value: Value,
    },
    /// Remove `key` (must exist).
    Erase(Key),
    /// Remove all entries.
    Clear,
    /// Replace the whole map (sent whole, never logged).
    Replace(BTreeMap<Key, Value>),
    /// Set one field of a record element.
    SetField {
        /// Key (must exist).
        key: Key,
        /// Field position in the record.
        field: usize,
        /// New field value.
        value: Value,
    },
}

/// Why an operation cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpError {
    /// Index out of range (or pop on empty).
    #[error("index {index} out of range for length {len}")]
    Index {
        /// Index given.
        index: usize,
        /// Container length.
        len: usize,
    },
    /// Key not present.
    #[error("no such key")]
    NoSuchKey,
    /// Field index out of range, or the element is not a record.
    #[error("no such field {0}")]
    NoSuchField(usize),
    /// A value of the wrong type or over a limit.
    #[error(transparent)]
    Type(#[from] TypeError),
}

impl From<OpError> for DecodeError {
    fn from(e: OpError) -> DecodeError {
        match e {
            OpError::Index { index, len } => DecodeError::BadIndex {
                index: index as u64,
                len,
            },
            OpError::NoSuchKey => DecodeError::BadKey,
            OpError::NoSuchField(f) => DecodeError::BadField(f as u64),
            OpError::Type(TypeError::TooLong { len, max }) => DecodeError::TooLong {
                len: len as u64,
                max: max as u64,
            },
            OpError::Type(TypeError::Mismatch) => DecodeError::WrongType,
        }
    }
}

fn field_type(et: &EntityType, elem: ElemType, field: usize) -> Result<&FieldDef, OpError> {
    match elem {
        ElemType::Record(r) => et
            .record(r)
            .fields
            .get(field)
            .ok_or(OpError::NoSuchField(field)),
        ElemType::Scalar(_) => Err(OpError::NoSuchField(field)),
    }
}

fn check_index(index: usize, len: usize) -> Result<(), OpError> {
    if index < len {
        Ok(())
    } else {
        Err(OpError::Index { index, len })
    }
}

fn check_grow(et: &EntityType, new_len: usize) -> Result<(), OpError> {
    let max = et.limits().container_len_max;
    if new_len > max {
        return Err(TypeError::TooLong { len: new_len, max }.into());
    }
    Ok(())
}

/// Checks that `op` applies to `items` and its values match `elem`.
///
/// # Errors
/// [`OpError`] naming the broken rule; nothing is changed.
pub fn validate_array(
    et: &EntityType,
    elem: ElemType,
    items: &[Value],
    op: &ArrayOp,
) -> Result<(), OpError> {
    let len = items.len();
    match op {
        ArrayOp::Update { index, value } => {
            check_index(*index, len)?;
            Ok(value::check(et, elem.into(), value)?)
        }
        ArrayOp::Push(value) => {
            check_grow(et, len + 1)?;
            Ok(value::check(et, elem.into(), value)?)
        }
        ArrayOp::Pop => check_index(0, len).map_err(|_| OpError::Index { index: 0, len }),
        ArrayOp::Insert { index, value } => {
            check_index(*index, len + 1)?;
            check_grow(et, len + 1)?;
            Ok(value::check(et, elem.into(), value)?)
        }
        ArrayOp::Erase(index) => check_index(*index, len),
        ArrayOp::Clear => Ok(()),
        ArrayOp::Resize(n) => check_grow(et, *n),
        ArrayOp::Replace(v) => {
            check_grow(et, v.len())?;
            v.iter()
                .try_for_each(|x| value::check(et, elem.into(), x).map_err(OpError::from))
        }
        ArrayOp::SetField {
            index,
            field,
            value,
        } => {
            check_index(*index, len)?;
            let f = field_type(et, elem, *field)?;
            Ok(value::check_scalar(et, f.ty, value)?)
        }
    }
}

/// Applies a validated op.
///
/// # Panics
/// If `op` was not validated against `items` (an internal bug).
pub fn apply_array(et: &EntityType, elem: ElemType, items: &mut Vec<Value>, op: ArrayOp) {
    match op {
        ArrayOp::Update { index, value } => items[index] = value,
        ArrayOp::Push(value) => items.push(value),
        ArrayOp::Pop => {
            items.pop();
        }
        ArrayOp::Insert { index, value } => items.insert(index, value),
        ArrayOp::Erase(index) => {
            items.remove(index);
        }
        ArrayOp::Clear => items.clear(),
        ArrayOp::Resize(n) => items.resize(n, default_of(et, elem.into())),
        ArrayOp::Replace(v) => *items = v,
        ArrayOp::SetField {
            index,
            field,
            value,
        } => set_field(&mut items[index], field, value),
    }
}

fn set_field(target: &mut Value, field: usize, value: Value) {
    match target {
        Value::Record(fields) => fields[field] = value,
        other => panic!("SetField on a non-record element {other:?}"),
    }
}

/// Checks that `op` applies to `items`.
///
/// # Errors
/// [`OpError`] naming the broken rule; nothing is changed.
pub fn validate_map(
    et: &EntityType,
    key_ty: KeyType,
    elem: ElemType,
    items: &BTreeMap<Key, Value>,
    op: &MapOp,
) -> Result<(), OpError> {
    match op {
        MapOp::Set { key, value } => {
            value::check_key(et, key_ty, key)?;
            if !items.contains_key(key) {
                check_grow(et, items.len() + 1)?;
            }
            Ok(value::check(et, elem.into(), value)?)
        }
        MapOp::Erase(key) => items
            .contains_key(key)
            .then_some(())
            .ok_or(OpError::NoSuchKey),
        MapOp::Clear => Ok(()),
        MapOp::Replace(m) => {
            check_grow(et, m.len())?;
            m.iter().try_for_each(|(k, v)| {
                value::check_key(et, key_ty, k)?;
                Ok(value::check(et, elem.into(), v)?)
            })
        }
        MapOp::SetField { key, field, value } => {
            items.get(key).ok_or(OpError::NoSuchKey)?;
            let f = field_type(et, elem, *field)?;
            Ok(value::check_scalar(et, f.ty, value)?)
        }
    }
}

/// Applies a validated op.
///
/// # Panics
/// If `op` was not validated against `items` (an internal bug).
pub fn apply_map(items: &mut BTreeMap<Key, Value>, op: MapOp) {
    match op {
        MapOp::Set { key, value } => {
            items.insert(key, value);
        }
        MapOp::Erase(key) => {
            items.remove(&key);
        }
        MapOp::Clear => items.clear(),
        MapOp::Replace(m) => *items = m,
        MapOp::SetField { key, field, value } => {
            let target = items.get_mut(&key).expect("validated key");
            set_field(target, field, value);
        }
    }
}

const A_UPDATE: u8 = 0;
const A_PUSH: u8 = 1;
const A_POP: u8 = 2;
const A_INSERT: u8 = 3;
const A_ERASE: u8 = 4;
const A_CLEAR: u8 = 5;
const A_RESIZE: u8 = 6;
const A_SET_FIELD: u8 = 7;
const M_SET: u8 = 0;
const M_ERASE: u8 = 1;
const M_CLEAR: u8 = 2;
const M_SET_FIELD: u8 = 3;

/// Appends `op` as `aud` sees it. Returns false (and appends nothing) when
/// the op carries nothing for `aud` (a field it cannot see).
///
/// # Panics
/// On `Replace`, which is sent whole and never logged.
pub fn encode_array_op(
    out: &mut Vec<u8>,
    et: &EntityType,
    elem: ElemType,
    op: &ArrayOp,
    aud: Audience,
) -> bool {
    let ty = elem.into();
    match op {
        ArrayOp::Update { index, value } => {
            out.push(A_UPDATE);
            put_uvar(out, *index as u64);
            value::encode(out, et, ty, value, aud);
        }
        ArrayOp::Push(value) => {
            out.push(A_PUSH);
            value::encode(out, et, ty, value, aud);
        }
        ArrayOp::Pop => out.push(A_POP),
        ArrayOp::Insert { index, value } => {
            out.push(A_INSERT);
            put_uvar(out, *index as u64);
            value::encode(out, et, ty, value, aud);
        }
        ArrayOp::Erase(index) => {
            out.push(A_ERASE);
            put_uvar(out, *index as u64);
        }
        ArrayOp::Clear => out.push(A_CLEAR),
        ArrayOp::Resize(n) => {
            out.push(A_RESIZE);
            put_uvar(out, *n as u64);
        }
        ArrayOp::Replace(_) => panic!("Replace is sent whole"),
        ArrayOp::SetField {
            index,
            field,
            value,
        } => {
            if !field_visible(et, elem, *field, aud) {
                return false;
            }
            out.push(A_SET_FIELD);
            put_uvar(out, *index as u64);
            put_uvar(out, *field as u64);
            encode_scalar(out, value);
        }
    }
    true
}

/// Appends `op` as `aud` sees it; see [`encode_array_op`].
///
/// # Panics
/// On `Replace`, which is sent whole and never logged.
pub fn encode_map_op(
    out: &mut Vec<u8>,
    et: &EntityType,
    elem: ElemType,
    op: &MapOp,
    aud: Audience,
) -> bool {
    match op {
        MapOp::Set { key, value } => {
            out.push(M_SET);
            encode_key(out, key);
            value::encode(out, et, elem.into(), value, aud);
        }
        MapOp::Erase(key) => {
            out.push(M_ERASE);
            encode_key(out, key);
        }
        MapOp::Clear => out.push(M_CLEAR),
        MapOp::Replace(_) => panic!("Replace is sent whole"),
        MapOp::SetField { key, field, value } => {
            if !field_visible(et, elem, *field, aud) {
                return false;
            }
            out.push(M_SET_FIELD);
            encode_key(out, key);
            put_uvar(out, *field as u64);
            encode_scalar(out, value);
        }
    }
    true
}

fn field_visible(et: &EntityType, elem: ElemType, field: usize, aud: Audience) -> bool {
    field_type(et, elem, field).is_ok_and(|f| f.flags.visible_to(aud))
}

fn decode_field(
    r: &mut Reader<'_>,
    et: &EntityType,
    elem: ElemType,
    aud: Audience,
) -> Result<(usize, Value), DecodeError> {
    let field = r.uvar()?;
    let f = usize::try_from(field)
        .ok()
        .and_then(|i| field_type(et, elem, i).ok().map(|f| (i, f)));
    match f {
        Some((i, f)) if f.flags.visible_to(aud) => Ok((i, value::decode_scalar(r, et, f.ty)?)),
        _ => Err(DecodeError::BadField(field)),
    }
}

fn index(r: &mut Reader<'_>) -> Result<usize, DecodeError> {
    let i = r.uvar()?;
    usize::try_from(i).map_err(|_| DecodeError::BadIndex { index: i, len: 0 })
}

fn skip_field(
    r: &mut Reader<'_>,
    et: &EntityType,
    elem: ElemType,
    aud: Audience,
) -> Result<(), DecodeError> {
    let field = r.uvar()?;
    let f = usize::try_from(field)
        .ok()
        .and_then(|i| field_type(et, elem, i).ok());
    match f {
        Some(f) if f.flags.visible_to(aud) => value::skip_scalar(r, et, f.ty),
        _ => Err(DecodeError::BadField(field)),
    }
}

/// Steps over one array op encoded for `aud` (no allocation; see
/// [`decode_array_op`]).
///
/// # Errors
/// Any [`DecodeError`] the bytes cause.
pub fn skip_array_op(
    r: &mut Reader<'_>,
    et: &EntityType,
    elem: ElemType,
    aud: Audience,
) -> Result<(), DecodeError> {
    let ty = elem.into();
    match r.u8()? {
        A_UPDATE | A_INSERT => {
            index(r)?;
            value::skip(r, et, ty, aud)
        }
        A_PUSH => value::skip(r, et, ty, aud),
        A_POP | A_CLEAR => Ok(()),
        A_ERASE => index(r).map(drop),
        A_RESIZE => r.len(et.limits().container_len_max).map(drop),
        A_SET_FIELD => {
            index(r)?;
            skip_field(r, et, elem, aud)
        }
        t => Err(DecodeError::BadTag(t)),
    }
}

/// Steps over one map op encoded for `aud` (no allocation; see
/// [`decode_map_op`]).
///
/// # Errors
/// Any [`DecodeError`] the bytes cause.
pub fn skip_map_op(
    r: &mut Reader<'_>,
    et: &EntityType,
    key_ty: KeyType,
    elem: ElemType,
    aud: Audience,
) -> Result<(), DecodeError> {
    match r.u8()? {
        M_SET => {
            value::skip_key(r, et, key_ty)?;
            value::skip(r, et, elem.into(), aud)
        }
        M_ERASE => value::skip_key(r, et, key_ty),
        M_CLEAR => Ok(()),
        M_SET_FIELD => {
            value::skip_key(r, et, key_ty)?;
            skip_field(r, et, elem, aud)
        }
        t => Err(DecodeError::BadTag(t)),
    }
}

/// Reads one array op encoded for `aud`.
///
/// # Errors
/// Any [`DecodeError`] the bytes cause (not yet checked against the array).
pub fn decode_array_op(
    r: &mut Reader<'_>,
    et: &EntityType,
    elem: ElemType,
    aud: Audience,
) -> Result<ArrayOp, DecodeError> {
    let ty = elem.into();
    Ok(match r.u8()? {
        A_UPDATE => ArrayOp::Update {
            index: index(r)?,
            value: value::decode(r, et, ty, aud)?,
        },
        A_PUSH => ArrayOp::Push(value::decode(r, et, ty, aud)?),
        A_POP => ArrayOp::Pop,
        A_INSERT => ArrayOp::Insert {
            index: index(r)?,
            value: value::decode(r, et, ty, aud)?,
        },
        A_ERASE => ArrayOp::Erase(index(r)?),
        A_CLEAR => ArrayOp::Clear,
        A_RESIZE => ArrayOp::Resize(r.len(et.limits().container_len_max)?),
        A_SET_FIELD => {
            let index = index(r)?;
            let (field, value) = decode_field(r, et, elem, aud)?;
            ArrayOp::SetField {
                index,
                field,
                value,
            }
        }
        t => return Err(DecodeError::BadTag(t)),
    })
}

/// Reads one map op encoded for `aud`.
///
/// # Errors
/// Any [`DecodeError`] the bytes cause (not yet checked against the map).
pub fn decode_map_op(
    r: &mut Reader<'_>,
    et: &EntityType,
    key_ty: KeyType,
    elem: ElemType,
    aud: Audience,
) -> Result<MapOp, DecodeError> {
    Ok(match r.u8()? {
        M_SET => MapOp::Set {
            key: value::decode_key(r, et, key_ty)?,
            value: value::decode(r, et, elem.into(), aud)?,
        },
        M_ERASE => MapOp::Erase(value::decode_key(r, et, key_ty)?),
        M_CLEAR => MapOp::Clear,
        M_SET_FIELD => {
            let key = value::decode_key(r, et, key_ty)?;
            let (field, value) = decode_field(r, et, elem, aud)?;
            MapOp::SetField { key, field, value }
        }
        t => return Err(DecodeError::BadTag(t)),
    })
}
