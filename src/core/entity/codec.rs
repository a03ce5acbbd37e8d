//! The compact byte encoding shared by snapshots, deltas and sync payloads.
//!
//! Owns the primitive writers (append to a caller's reused `Vec<u8>`) and the
//! [`Reader`] over untrusted bytes with its typed [`DecodeError`]. Integers are
//! LEB128 varints (signed ones zigzagged), floats are little-endian IEEE bits,
//! strings are a varint length then UTF-8. Nothing here knows about schemas.
//!
//! The reader never panics and never allocates more than the bytes it was
//! given can justify: every length is checked against the bytes left and a
//! caller-supplied maximum before anything is reserved.

use thiserror::Error;

/// Why bytes could not be decoded. Bytes come from other shards or hosts, so
/// every rule they can break has a variant; none of them is a panic.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// The input ended in the middle of a value.
    #[error("input truncated")]
    Truncated,
    /// A varint ran longer than 10 bytes or overflowed 64 bits.
    #[error("varint overflows 64 bits")]
    VarintOverflow,
    /// A bool byte other than 0 or 1.
    #[error("invalid bool byte {0}")]
    BadBool(u8),
    /// A string was not UTF-8.
    #[error("string is not UTF-8")]
    BadUtf8,
    /// A length above the configured maximum.
    #[error("length {len} exceeds limit {max}")]
    TooLong {
        /// The length read.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// An unknown tag (op, mode or kind byte).
    #[error("unknown tag {0}")]
    BadTag(u8),
    /// A property index not in the schema or not visible to this audience.
    #[error("property {0} unknown or not visible to this audience")]
    BadProperty(u64),
    /// A record field index out of range or not visible to this audience.
    #[error("field {0} unknown or not visible to this audience")]
    BadField(u64),
    /// A container index out of range (or a pop on an empty array).
    #[error("index {index} out of range for length {len}")]
    BadIndex {
        /// The index read.
        index: u64,
        /// The container's length.
        len: usize,
    },
    /// A map key missing for erase or field update, or keys not strictly increasing.
    #[error("map key missing or out of order")]
    BadKey,
    /// A container op on a non-container property (or the wrong kind).
    #[error("operation does not match the property type")]
    WrongType,
    /// The payload belongs to another entity type.
    #[error("entity type {got} does not match {want}")]
    WrongEntityType {
        /// The type in the payload.
        got: u64,
        /// The replica's type.
        want: u64,
    },
    /// Bytes left over after a complete payload.
    #[error("{0} trailing bytes")]
    Trailing(usize),
}

/// Appends `v` as an LEB128 varint.
#[inline]
pub fn put_uvar(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The zigzag form of a signed varint: small magnitudes, either sign, map
/// to small unsigned values.
#[inline]
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Appends `v` zigzag-encoded as a varint.
#[inline]
pub fn put_ivar(out: &mut Vec<u8>, v: i64) {
    put_uvar(out, zigzag(v));
}

/// Appends `v` as 8 little-endian bytes of its IEEE bits.
#[inline]
pub fn put_f64(out: &mut Vec<u8>, v: f64) {
    out.extend_from_slice(&v.to_bits().to_le_bytes());
}

/// Appends `v` as 4 little-endian bytes of its IEEE bits.
#[inline]
pub fn put_f32(out: &mut Vec<u8>, v: f32) {
    out.extend_from_slice(&v.to_bits().to_le_bytes());
}

/// Appends a varint length then the UTF-8 bytes.
#[inline]
pub fn put_str(out: &mut Vec<u8>, s: &str) {
    put_uvar(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// A cursor over untrusted bytes.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, pos: 0 }
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    /// True when every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// # Errors
    /// [`DecodeError::Trailing`] if bytes are left.
    pub fn finish(&self) -> Result<(), DecodeError> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(DecodeError::Trailing(n)),
        }
    }

    /// Reads `n` raw bytes.
    ///
    /// # Errors
    /// [`DecodeError::Truncated`].
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.remaining() < n {
            return Err(DecodeError::Truncated);
        }
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// Reads one byte.
    ///
    /// # Errors
    /// [`DecodeError::Truncated`].
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    /// Reads an LEB128 varint.
    ///
    /// # Errors
    /// [`DecodeError::Truncated`], [`DecodeError::VarintOverflow`].
    pub fn uvar(&mut self) -> Result<u64, DecodeError> {
        let mut v = 0u64;
        for i in 0..10 {
            let b = self.u8()?;
            let part = u64::from(b & 0x7f);
            if i == 9 && b > 1 {
                return Err(DecodeError::VarintOverflow);
            }
            v |= part << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(DecodeError::VarintOverflow)
    }

    /// Reads a zigzag varint.
    ///
    /// # Errors
    /// As [`Reader::uvar`].
    pub fn ivar(&mut self) -> Result<i64, DecodeError> {
        let u = self.uvar()?;
        Ok(((u >> 1) as i64) ^ -((u & 1) as i64))
    }

    /// Reads a varint that must be at most `max`.
    ///
    /// # Errors
    /// As [`Reader::uvar`], plus [`DecodeError::TooLong`].
    pub fn len(&mut self, max: usize) -> Result<usize, DecodeError> {
        let len = self.uvar()?;
        if len > max as u64 {
            return Err(DecodeError::TooLong {
                len,
                max: max as u64,
            });
        }
        Ok(len as usize)
    }

    /// Reads a bool byte (0 or 1).
    ///
    /// # Errors
    /// [`DecodeError::Truncated`], [`DecodeError::BadBool`].
    pub fn bool(&mut self) -> Result<bool, DecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(DecodeError::BadBool(b)),
        }
    }

    /// Reads 8 little-endian bytes as an `f64`.
    ///
    /// # Errors
    /// [`DecodeError::Truncated`].
    pub fn f64(&mut self) -> Result<f64, DecodeError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(f64::from_bits(u64::from_le_bytes(a)))
    }

    /// Reads 4 little-endian bytes as an `f32`.
    ///
    /// # Errors
    /// [`DecodeError::Truncated`].
    pub fn f32(&mut self) -> Result<f32, DecodeError> {
        let b = self.take(4)?;
        let mut a = [0u8; 4];
        a.copy_from_slice(b);
        Ok(f32::from_bits(u32::from_le_bytes(a)))
    }

    /// Reads a string of at most `max` bytes.
    ///
    /// # Errors
    /// [`DecodeError::TooLong`], [`DecodeError::Truncated`], [`DecodeError::BadUtf8`].
    pub fn str(&mut self, max: usize) -> Result<&'a str, DecodeError> {
        let n = self.len(max)?;
        let b = self.take(n)?;
        std::str::from_utf8(b).map_err(|_| DecodeError::BadUtf8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip() {
        let mut buf = Vec::new();
        let us = [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX];
        let is = [0, -1, 1, i64::MIN, i64::MAX, -300];
        for &u in &us {
            put_uvar(&mut buf, u);
        }
        for &i in &is {
            put_ivar(&mut buf, i);
        }
        put_f64(&mut buf, -2.5);
        put_f32(&mut buf, 1.25);
        put_str(&mut buf, "héllo");
        let mut r = Reader::new(&buf);
        for &u in &us {
            assert_eq!(r.uvar(), Ok(u));
        }
        for &i in &is {
            assert_eq!(r.ivar(), Ok(i));
        }
        assert_eq!(r.f64(), Ok(-2.5));
        assert_eq!(r.f32(), Ok(1.25));
        assert_eq!(r.str(16), Ok("héllo"));
        assert_eq!(r.finish(), Ok(()));
    }

    #[test]
    fn bad_input_is_an_error() {
        assert_eq!(Reader::new(&[0x80]).uvar(), Err(DecodeError::Truncated));
        assert_eq!(
            Reader::new(&[0xff; 11]).uvar(),
            Err(DecodeError::VarintOverflow)
        );
        let mut over = vec![0xff; 9];
        over.push(0x02);
        assert_eq!(Reader::new(&over).uvar(), Err(DecodeError::VarintOverflow));
        assert_eq!(Reader::new(&[2]).bool(), Err(DecodeError::BadBool(2)));
        assert_eq!(Reader::new(&[5, b'a']).str(16), Err(DecodeError::Truncated));
        assert!(matches!(
            Reader::new(&[50]).str(16),
            Err(DecodeError::TooLong { .. })
        ));
        assert_eq!(
            Reader::new(&[2, 0xff, 0xfe]).str(16),
            Err(DecodeError::BadUtf8)
        );
        assert_eq!(Reader::new(&[1, 2]).finish(), Err(DecodeError::Trailing(2)));
    }
}
