//! Property values and their typed, audience-filtered encoding.
//!
//! Owns [`Value`] and [`Key`], type checking against a [`PropType`], default
//! values, per-audience filtering (record fields an audience may not see are
//! left at their default) and the wire form of a value. The wire form carries
//! no type tags: the receiver knows the schema and its own audience, so a
//! record is just its visible fields in order.

use super::codec::{put_f64, put_ivar, put_str, put_uvar, DecodeError, Reader};
use super::flags::Audience;
use super::schema::{ElemType, EntityType, KeyType, PropType, RecordId, ScalarType};
use std::collections::BTreeMap;

/// A map key.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum Key {
    /// Integer key.
    Int(i64),
    /// String key.
    Str(String),
}

/// A property value (or container element, or record field).
#[derive(Clone, PartialEq, Debug)]
pub enum Value {
    /// Signed integer.
    Int(i64),
    /// Unsigned integer.
    UInt(u64),
    /// Float.
    Float(f64),
    /// Bool.
    Bool(bool),
    /// String.
    Str(String),
    /// Record: one scalar per field, in field order.
    Record(Vec<Value>),
    /// Array of elements.
    Array(Vec<Value>),
    /// Ordered map.
    Map(BTreeMap<Key, Value>),
}

/// Why a value does not fit its type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TypeError {
    /// The shape does not match the declared type.
    #[error("value does not match the declared type")]
    Mismatch,
    /// A string or container above its limit.
    #[error("length {len} exceeds limit {max}")]
    TooLong {
        /// The length.
        len: usize,
        /// The limit.
        max: usize,
    },
}

/// The default of a scalar type.
pub fn scalar_default(ty: ScalarType) -> Value {
    match ty {
        ScalarType::Int => Value::Int(0),
        ScalarType::UInt => Value::UInt(0),
        ScalarType::Float => Value::Float(0.0),
        ScalarType::Bool => Value::Bool(false),
        ScalarType::Str => Value::Str(String::new()),
    }
}

/// The default value of a type (zero, empty, or a record of defaults).
pub fn default_of(et: &EntityType, ty: PropType) -> Value {
    match ty {
        PropType::Scalar(s) => scalar_default(s),
        PropType::Record(r) => Value::Record(
            et.record(r)
                .fields
                .iter()
                .map(|f| scalar_default(f.ty))
                .collect(),
        ),
        PropType::Array(_) => Value::Array(Vec::new()),
        PropType::Map(..) => Value::Map(BTreeMap::new()),
    }
}

fn check_len(len: usize, max: usize) -> Result<(), TypeError> {
    if len > max {
        Err(TypeError::TooLong { len, max })
    } else {
        Ok(())
    }
}

/// Checks a scalar against its type.
///
/// # Errors
/// [`TypeError`] on a shape mismatch or an over-long string.
pub fn check_scalar(et: &EntityType, ty: ScalarType, v: &Value) -> Result<(), TypeError> {
    match (ty, v) {
        (ScalarType::Int, Value::Int(_))
        | (ScalarType::UInt, Value::UInt(_))
        | (ScalarType::Float, Value::Float(_))
        | (ScalarType::Bool, Value::Bool(_)) => Ok(()),
        (ScalarType::Str, Value::Str(s)) => check_len(s.len(), et.limits().str_len_max),
        _ => Err(TypeError::Mismatch),
    }
}

/// Checks a map key against its type.
///
/// # Errors
/// [`TypeError`] on a mismatch or an over-long string.
pub fn check_key(et: &EntityType, ty: KeyType, k: &Key) -> Result<(), TypeError> {
    match (ty, k) {
        (KeyType::Int, Key::Int(_)) => Ok(()),
        (KeyType::Str, Key::Str(s)) => check_len(s.len(), et.limits().str_len_max),
        _ => Err(TypeError::Mismatch),
    }
}

/// Checks a whole value against its type, including limits.
///
/// # Errors
/// [`TypeError`] on a mismatch or an over-long string or container.
pub fn check(et: &EntityType, ty: PropType, v: &Value) -> Result<(), TypeError> {
    match (ty, v) {
        (PropType::Scalar(s), v) => check_scalar(et, s, v),
        (PropType::Record(r), Value::Record(fields)) => {
            let def = et.record(r);
            if fields.len() != def.fields.len() {
                return Err(TypeError::Mismatch);
            }
            def.fields
                .iter()
                .zip(fields)
                .try_for_each(|(f, v)| check_scalar(et, f.ty, v))
        }
        (PropType::Array(e), Value::Array(items)) => {
            check_len(items.len(), et.limits().container_len_max)?;
            items.iter().try_for_each(|v| check(et, e.into(), v))
        }
        (PropType::Map(k, e), Value::Map(items)) => {
            check_len(items.len(), et.limits().container_len_max)?;
            items.iter().try_for_each(|(key, v)| {
                check_key(et, k, key)?;
                check(et, e.into(), v)
            })
        }
        _ => Err(TypeError::Mismatch),
    }
}

/// A copy of `v` as `aud` sees it: invisible record fields at their defaults.
/// (Whole-property visibility is the caller's business.)
pub fn filtered(et: &EntityType, ty: PropType, v: &Value, aud: Audience) -> Value {
    match (ty, v) {
        (PropType::Record(r), Value::Record(fields)) => {
            let def = et.record(r);
            Value::Record(
                def.fields
                    .iter()
                    .zip(fields)
                    .map(|(f, v)| {
                        if f.flags.visible_to(aud) {
                            v.clone()
                        } else {
                            scalar_default(f.ty)
                        }
                    })
                    .collect(),
            )
        }
        (PropType::Array(e), Value::Array(items)) => Value::Array(
            items
                .iter()
                .map(|v| filtered(et, e.into(), v, aud))
                .collect(),
        ),
        (PropType::Map(_, e), Value::Map(items)) => Value::Map(
            items
                .iter()
                .map(|(k, v)| (k.clone(), filtered(et, e.into(), v, aud)))
                .collect(),
        ),
        _ => v.clone(),
    }
}

/// Appends a scalar. The value must already match its type (checked on set).
pub fn encode_scalar(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Int(i) => put_ivar(out, *i),
        Value::UInt(u) => put_uvar(out, *u),
        Value::Float(f) => put_f64(out, *f),
        Value::Bool(b) => out.push(u8::from(*b)),
        Value::Str(s) => put_str(out, s),
        _ => debug_assert!(false, "not a scalar: {v:?}"),
    }
}

/// Appends a map key.
pub fn encode_key(out: &mut Vec<u8>, k: &Key) {
    match k {
        Key::Int(i) => put_ivar(out, *i),
        Key::Str(s) => put_str(out, s),
    }
}

/// Appends `v` as `aud` sees it.
pub fn encode(out: &mut Vec<u8>, et: &EntityType, ty: PropType, v: &Value, aud: Audience) {
    match (ty, v) {
        (PropType::Record(r), Value::Record(fields)) => encode_record(out, et, r, fields, aud),
        (PropType::Array(e), Value::Array(items)) => {
            put_uvar(out, items.len() as u64);
            for item in items {
                encode(out, et, e.into(), item, aud);
            }
        }
        (PropType::Map(_, e), Value::Map(items)) => {
            put_uvar(out, items.len() as u64);
            for (k, item) in items {
                encode_key(out, k);
                encode(out, et, e.into(), item, aud);
            }
        }
        (_, v) => encode_scalar(out, v),
    }
}

fn encode_record(out: &mut Vec<u8>, et: &EntityType, r: RecordId, fields: &[Value], aud: Audience) {
    for (f, v) in et.record(r).fields.iter().zip(fields) {
        if f.flags.visible_to(aud) {
            encode_scalar(out, v);
        }
    }
}

/// Reads a scalar of type `ty`.
///
/// # Errors
/// Any [`DecodeError`] the bytes cause.
pub fn decode_scalar(
    r: &mut Reader<'_>,
    et: &EntityType,
    ty: ScalarType,
) -> Result<Value, DecodeError> {
    Ok(match ty {
        ScalarType::Int => Value::Int(r.ivar()?),
        ScalarType::UInt => Value::UInt(r.uvar()?),
        ScalarType::Float => Value::Float(r.f64()?),
        ScalarType::Bool => Value::Bool(r.bool()?),
        ScalarType::Str => Value::Str(r.str(et.limits().str_len_max)?.to_owned()),
    })
}

/// Reads a map key of type `ty`.
///
/// # Errors
/// Any [`DecodeError`] the bytes cause.
pub fn decode_key(r: &mut Reader<'_>, et: &EntityType, ty: KeyType) -> Result<Key, DecodeError> {
    Ok(match ty {
        KeyType::Int => Key::Int(r.ivar()?),
        KeyType::Str => Key::Str(r.str(et.limits().str_len_max)?.to_owned()),
    })
}

/// Reads a value of type `ty` encoded for `aud`.
///
/// # Errors
/// Any [`DecodeError`]; map keys must be strictly increasing.
pub fn decode(
    r: &mut Reader<'_>,
    et: &EntityType,
    ty: PropType,
    aud: Audience,
) -> Result<Value, DecodeError> {
    match ty {
        PropType::Scalar(s) => decode_scalar(r, et, s),
        PropType::Record(rec) => decode_record(r, et, rec, aud),
        PropType::Array(e) => {
            let n = r.len(et.limits().container_len_max)?;
            let mut items = Vec::with_capacity(n.min(r.remaining()));
            for _ in 0..n {
                items.push(decode(r, et, e.into(), aud)?);
            }
            Ok(Value::Array(items))
        }
        PropType::Map(k, e) => decode_map(r, et, k, e, aud),
    }
}

/// Appends the default of `ty` as `aud` sees it (what [`encode`] writes
/// for [`default_of`]), without building it.
pub fn encode_default(out: &mut Vec<u8>, et: &EntityType, ty: PropType, aud: Audience) {
    match ty {
        PropType::Scalar(ScalarType::Float) => put_f64(out, 0.0),
        PropType::Scalar(_) | PropType::Array(_) | PropType::Map(..) => out.push(0),
        PropType::Record(r) => {
            for f in et
                .record(r)
                .fields
                .iter()
                .filter(|f| f.flags.visible_to(aud))
            {
                match f.ty {
                    ScalarType::Float => put_f64(out, 0.0),
                    _ => out.push(0),
                }
            }
        }
    }
}

/// Steps over a scalar of type `ty` (no allocation).
///
/// # Errors
/// Any [`DecodeError`] the bytes cause.
pub fn skip_scalar(r: &mut Reader<'_>, et: &EntityType, ty: ScalarType) -> Result<(), DecodeError> {
    match ty {
        ScalarType::Int => r.ivar().map(drop),
        ScalarType::UInt => r.uvar().map(drop),
        ScalarType::Float => r.f64().map(drop),
        ScalarType::Bool => r.bool().map(drop),
        ScalarType::Str => r.str(et.limits().str_len_max).map(drop),
    }
}

/// Steps over a map key of type `ty` (no allocation).
///
/// # Errors
/// Any [`DecodeError`] the bytes cause.
pub fn skip_key(r: &mut Reader<'_>, et: &EntityType, ty: KeyType) -> Result<(), DecodeError> {
    match ty {
        KeyType::Int => r.ivar().map(drop),
        KeyType::Str => r.str(et.limits().str_len_max).map(drop),
    }
}

/// Steps over a value of type `ty` encoded for `aud` without building it
/// (the observer's level-of-detail filter; map key order is not checked).
///
/// # Errors
/// Any [`DecodeError`] the bytes cause.
pub fn skip(
    r: &mut Reader<'_>,
    et: &EntityType,
    ty: PropType,
    aud: Audience,
) -> Result<(), DecodeError> {
    match ty {
        PropType::Scalar(s) => skip_scalar(r, et, s),
        PropType::Record(rec) => {
            for f in &et.record(rec).fields {
                if f.flags.visible_to(aud) {
                    skip_scalar(r, et, f.ty)?;
                }
            }
            Ok(())
        }
        PropType::Array(e) => {
            let n = r.len(et.limits().container_len_max)?;
            (0..n).try_for_each(|_| skip(r, et, e.into(), aud))
        }
        PropType::Map(k, e) => {
            let n = r.len(et.limits().container_len_max)?;
            (0..n).try_for_each(|_| {
                skip_key(r, et, k)?;
                skip(r, et, e.into(), aud)
            })
        }
    }
}

fn decode_record(
    r: &mut Reader<'_>,
    et: &EntityType,
    rec: RecordId,
    aud: Audience,
) -> Result<Value, DecodeError> {
    let def = et.record(rec);
    let mut fields = Vec::with_capacity(def.fields.len());
    for f in &def.fields {
        fields.push(if f.flags.visible_to(aud) {
            decode_scalar(r, et, f.ty)?
        } else {
            scalar_default(f.ty)
        });
    }
    Ok(Value::Record(fields))
}

fn decode_map(
    r: &mut Reader<'_>,
    et: &EntityType,
    k: KeyType,
    e: ElemType,
    aud: Audience,
) -> Result<Value, DecodeError> {
    let n = r.len(et.limits().container_len_max)?;
    let mut items = BTreeMap::new();
    for _ in 0..n {
        let key = decode_key(r, et, k)?;
        if items.last_key_value().is_some_and(|(last, _)| *last >= key) {
            return Err(DecodeError::BadKey);
        }
        let v = decode(r, et, e.into(), aud)?;
        items.insert(key, v);
    }
    Ok(Value::Map(items))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::entity::schema::{TypeRegistry, AVATAR};

    #[test]
    fn record_fields_are_filtered_per_audience() {
        let reg = TypeRegistry::with_builtins();
        let et = reg.get(AVATAR).expect("avatar");
        let buffs = et
            .prop(et.prop_index("buffs").expect("buffs"))
            .expect("def")
            .ty;
        let v = Value::Array(vec![Value::Record(vec![
            Value::UInt(7),
            Value::Int(2),
            Value::UInt(900),
        ])]);
        check(et, buffs, &v).expect("valid");
        for aud in [Audience::Ghost, Audience::OwnClient, Audience::OtherClients] {
            let mut buf = Vec::new();
            encode(&mut buf, et, buffs, &v, aud);
            let mut r = Reader::new(&buf);
            let got = decode(&mut r, et, buffs, aud).expect("decode");
            r.finish().expect("no trailing");
            assert_eq!(got, filtered(et, buffs, &v, aud), "{aud:?}");
        }
        let others = filtered(et, buffs, &v, Audience::OtherClients);
        assert_eq!(
            others,
            Value::Array(vec![Value::Record(vec![
                Value::UInt(7),
                Value::Int(2),
                Value::UInt(0)
            ])])
        );
    }

    #[test]
    fn skip_steps_over_what_encode_wrote_and_defaults_match() {
        let reg = TypeRegistry::with_builtins();
        let et = reg.get(AVATAR).expect("avatar");
        let buff = Value::Record(vec![Value::UInt(7), Value::Int(-2), Value::UInt(900)]);
        let mut inv = BTreeMap::new();
        inv.insert(Key::Int(3), Value::UInt(4));
        inv.insert(Key::Int(9), Value::UInt(1));
        for p in et.props() {
            let v = match p.name.as_str() {
                "name" | "status" => Value::Str("bob".into()),
                "buffs" => Value::Array(vec![buff.clone(), buff.clone()]),
                "inventory" => Value::Map(inv.clone()),
                "hp" | "max_hp" => Value::Int(-70),
                _ => Value::UInt(300),
            };
            check(et, p.ty, &v).expect("valid");
            for aud in [Audience::Ghost, Audience::OwnClient, Audience::OtherClients] {
                let mut buf = Vec::new();
                encode(&mut buf, et, p.ty, &v, aud);
                buf.push(0xee);
                let mut r = Reader::new(&buf);
                skip(&mut r, et, p.ty, aud).expect("skips");
                assert_eq!(r.remaining(), 1, "{} for {aud:?}", p.name);
                let (mut a, mut b) = (Vec::new(), Vec::new());
                encode(&mut a, et, p.ty, &default_of(et, p.ty), aud);
                encode_default(&mut b, et, p.ty, aud);
                assert_eq!(a, b, "default of {}", p.name);
            }
        }
        let float = PropType::Scalar(ScalarType::Float);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        encode(&mut a, et, float, &default_of(et, float), Audience::Real);
        encode_default(&mut b, et, float, Audience::Real);
        assert_eq!(a, b);
        assert_eq!(
            skip(
                &mut Reader::new(&[2, b'a']),
                et,
                et.props()[0].ty,
                Audience::OtherClients
            ),
            Err(DecodeError::Truncated)
        );
    }

    #[test]
    fn type_check_catches_shape_and_limits() {
        let reg = TypeRegistry::with_builtins();
        let et = reg.get(AVATAR).expect("avatar");
        let name = PropType::Scalar(ScalarType::Str);
        assert_eq!(check(et, name, &Value::Int(1)), Err(TypeError::Mismatch));
        let long = Value::Str("x".repeat(et.limits().str_len_max + 1));
        assert!(matches!(
            check(et, name, &long),
            Err(TypeError::TooLong { .. })
        ));
    }

    #[test]
    fn unordered_map_keys_are_rejected() {
        let reg = TypeRegistry::with_builtins();
        let et = reg.get(AVATAR).expect("avatar");
        let ty = PropType::Map(KeyType::Int, ElemType::Scalar(ScalarType::UInt));
        // two entries: key 5 then key 3
        let bytes = [2, 10, 1, 6, 1];
        assert_eq!(
            decode(&mut Reader::new(&bytes), et, ty, Audience::OwnClient),
            Err(DecodeError::BadKey)
        );
    }
}
