//! [`Payload`]: the bytes of one client input as it travels from the proxy
//! to its real (the input message, the real's sequence buffer, the applied
//! event), held inline when small.
//!
//! Every client input used to be one `Arc<[u8]>`: an allocation per input,
//! ten a client-second at the bench's move rate, more than half of what the
//! hosts' ticks allocated (`bench/README.md`, the cost probe's allocation
//! count). An input is small (a move is 37 bytes): up to [`INLINE_MAX`]
//! bytes it is kept in the payload itself, copied as it moves; only a larger
//! one (a property set with a long value) is shared behind an `Arc`.
//!
//! Owns only the bytes; knows nothing of what they encode.

use std::sync::Arc;

/// The most bytes a payload holds without an allocation (a move, a hit, a
/// teleport, a resync request all fit; the payload is 48 bytes).
pub const INLINE_MAX: usize = 46;

/// Bytes of one input: inline up to [`INLINE_MAX`], else shared. Compares,
/// prints and dereferences as its bytes, whichever way they are held.
#[derive(Clone, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct Payload(Repr);

#[derive(Clone, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
enum Repr {
    Inline { len: u8, bytes: [u8; INLINE_MAX] },
    Shared(Arc<[u8]>),
}

const _: () = assert!(INLINE_MAX <= u8::MAX as usize);
const _: () = assert!(
    std::mem::size_of::<Payload>() == 48,
    "a payload is 48 bytes"
);

impl Payload {
    /// A copy of `bytes` (no allocation up to [`INLINE_MAX`]).
    pub fn new(bytes: &[u8]) -> Payload {
        if bytes.len() <= INLINE_MAX {
            let mut inline = [0; INLINE_MAX];
            inline[..bytes.len()].copy_from_slice(bytes);
            Payload(Repr::Inline {
                len: bytes.len() as u8,
                bytes: inline,
            })
        } else {
            Payload(Repr::Shared(Arc::from(bytes)))
        }
    }

    /// True if the bytes are held inline (no allocation).
    pub fn is_inline(&self) -> bool {
        matches!(self.0, Repr::Inline { .. })
    }
}

impl std::ops::Deref for Payload {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Repr::Shared(b) => b,
        }
    }
}

impl From<&[u8]> for Payload {
    fn from(bytes: &[u8]) -> Payload {
        Payload::new(bytes)
    }
}

impl From<Vec<u8>> for Payload {
    fn from(bytes: Vec<u8>) -> Payload {
        if bytes.len() <= INLINE_MAX {
            Payload::new(&bytes)
        } else {
            Payload(Repr::Shared(Arc::from(bytes)))
        }
    }
}

impl From<Arc<[u8]>> for Payload {
    fn from(bytes: Arc<[u8]>) -> Payload {
        if bytes.len() <= INLINE_MAX {
            Payload::new(&bytes)
        } else {
            Payload(Repr::Shared(bytes))
        }
    }
}

impl PartialEq for Payload {
    fn eq(&self, other: &Payload) -> bool {
        **self == **other
    }
}

impl Eq for Payload {}

impl std::fmt::Debug for Payload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Payload").field(&&**self).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Small inputs are inline, larger ones shared; either way the bytes
    /// read back, compare and survive an rkyv round trip unchanged.
    #[test]
    fn holds_small_inline_and_large_shared() {
        let small = Payload::new(&[7; INLINE_MAX]);
        assert!(small.is_inline());
        let large = Payload::new(&[7; INLINE_MAX + 1]);
        assert!(!large.is_inline());
        assert_eq!(&*small, &[7; INLINE_MAX][..]);
        assert_eq!(large.len(), INLINE_MAX + 1);
        assert!(Payload::new(&[]).is_empty());
        let shared: Arc<[u8]> = Arc::from(&[1u8, 2, 3][..]);
        assert!(
            Payload::from(shared).is_inline(),
            "a small Arc is copied inline"
        );
        assert_eq!(Payload::from(vec![1, 2, 3]), Payload::new(&[1, 2, 3]));
        assert_eq!(format!("{:?}", Payload::new(&[1, 2])), "Payload([1, 2])");
    }

    proptest! {
        #[test]
        fn bytes_and_rkyv_round_trip(bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
            let p = Payload::new(&bytes);
            prop_assert_eq!(&*p, &bytes[..]);
            prop_assert_eq!(p.is_inline(), bytes.len() <= INLINE_MAX);
            let archived = rkyv::to_bytes::<rkyv::rancor::Error>(&p).expect("serialises");
            let back: Payload = rkyv::from_bytes::<Payload, rkyv::rancor::Error>(&archived).expect("deserialises");
            prop_assert_eq!(back, p);
        }
    }
}
