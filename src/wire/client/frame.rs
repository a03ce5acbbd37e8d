//! Framing: the streaming [`FrameDecoder`] over a read buffer, and the
//! helpers every message encoder and decoder shares.
//!
//! Owns the split of a byte stream into frames (`header + body`), the
//! body-size limit, and the exact-size parsing of fixed parts. It knows the
//! header layout, not what any message means (see `client_msg` and
//! `server_msg`).
//!
//! # Limits
//! The decoder refuses a frame whose header announces a body over
//! `body_bytes_max` as soon as the header is buffered
//! ([`DecodeError::FrameTooLarge`]), before any of the body arrives, and
//! then stays failed: after a framing error the next boundary is unknown,
//! so the connection must be closed. Once every complete frame has been
//! taken, at most `HEADER_BYTES + body_bytes_max - 1` bytes stay buffered.
//!
//! # Allocation
//! The buffer grows to the largest frame seen (plus one read) and is then
//! reused: no allocation per frame.

use super::error::DecodeError;
use super::layout::{FrameHeader, HEADER_BYTES};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// One frame, borrowed from the decoder's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    /// The message kind.
    pub kind: u16,
    /// The header flags (0 in version 1; message decoders check).
    pub flags: u16,
    /// The body (the header excluded).
    pub body: &'a [u8],
}

/// Splits a byte stream into frames (see the module doc).
#[derive(Clone, Debug)]
pub struct FrameDecoder {
    buf: Vec<u8>,
    start: usize,
    /// Length of `buf` before the open `read_buf` window.
    filled: usize,
    body_bytes_max: u32,
    failed: Option<DecodeError>,
    frames: u64,
    bytes: u64,
}

impl FrameDecoder {
    /// A decoder refusing bodies over `body_bytes_max` bytes.
    pub fn new(body_bytes_max: u32) -> Self {
        FrameDecoder {
            buf: Vec::new(),
            start: 0,
            filled: 0,
            body_bytes_max,
            failed: None,
            frames: 0,
            bytes: 0,
        }
    }

    /// Frames returned so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Bytes received so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Bytes buffered and not yet returned as a frame.
    pub fn buffered(&self) -> usize {
        self.filled - self.start
    }

    /// The framing error, once one happened.
    pub fn failed(&self) -> Option<&DecodeError> {
        self.failed.as_ref()
    }

    /// Moves the unread bytes to the front of the buffer.
    fn compact(&mut self) {
        self.buf.truncate(self.filled);
        if self.start > 0 {
            self.buf.copy_within(self.start.., 0);
            self.filled -= self.start;
            self.buf.truncate(self.filled);
            self.start = 0;
        }
    }

    /// Appends received bytes (copies them).
    pub fn push(&mut self, bytes: &[u8]) {
        self.compact();
        self.buf.extend_from_slice(bytes);
        self.filled = self.buf.len();
        self.bytes += bytes.len() as u64;
    }

    /// A window of `want` bytes to read into directly (a socket read);
    /// follow with [`FrameDecoder::commit`] of the bytes actually read.
    pub fn read_buf(&mut self, want: usize) -> &mut [u8] {
        self.compact();
        self.buf.resize(self.filled + want, 0);
        &mut self.buf[self.filled..]
    }

    /// Keeps the first `n` bytes of the last [`FrameDecoder::read_buf`].
    ///
    /// # Panics
    /// If `n` is larger than that window.
    pub fn commit(&mut self, n: usize) {
        assert!(self.filled + n <= self.buf.len(), "commit past the window");
        self.filled += n;
        self.buf.truncate(self.filled);
        self.bytes += n as u64;
    }

    /// The next complete frame, `None` until more bytes arrive.
    ///
    /// # Errors
    /// [`DecodeError::FrameTooLarge`], then the same error on every call.
    pub fn next_frame(&mut self) -> Result<Option<Frame<'_>>, DecodeError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let avail = &self.buf[self.start..self.filled];
        match split_frame(avail, self.body_bytes_max) {
            Ok(Some((f, used))) => {
                self.start += used;
                self.frames += 1;
                Ok(Some(f))
            }
            Ok(None) => Ok(None),
            Err(e) => {
                self.failed = Some(e.clone());
                Err(e)
            }
        }
    }
}

/// The first frame of `bytes` and the bytes it spans, `None` if `bytes`
/// holds no whole frame yet (stateless; [`FrameDecoder`] uses it).
///
/// # Errors
/// [`DecodeError::FrameTooLarge`] for a body over `body_bytes_max`.
pub fn split_frame(
    bytes: &[u8],
    body_bytes_max: u32,
) -> Result<Option<(Frame<'_>, usize)>, DecodeError> {
    let Ok((h, rest)) = FrameHeader::ref_from_prefix(bytes) else {
        return Ok(None);
    };
    let len = h.len.get();
    if len > body_bytes_max {
        return Err(DecodeError::FrameTooLarge {
            len,
            max: body_bytes_max,
        });
    }
    let len = len as usize;
    if rest.len() < len {
        return Ok(None);
    }
    let f = Frame {
        kind: h.kind.get(),
        flags: h.flags.get(),
        body: &rest[..len],
    };
    Ok(Some((f, HEADER_BYTES + len)))
}

/// Starts a frame of `kind` in `out`; returns where its header starts.
pub(crate) fn begin(out: &mut Vec<u8>, kind: u16) -> usize {
    let at = out.len();
    let h = FrameHeader {
        len: 0.into(),
        kind: kind.into(),
        flags: 0.into(),
    };
    out.extend_from_slice(h.as_bytes());
    at
}

/// Writes the body length of the frame started at `at`.
///
/// # Panics
/// If the body is over `u32::MAX` bytes.
pub(crate) fn end(out: &mut [u8], at: usize) {
    let len = out.len() - at - HEADER_BYTES;
    let len = u32::try_from(len).expect("frame body fits u32");
    out[at..at + 4].copy_from_slice(&len.to_le_bytes());
}

/// The header of a frame of `kind` with a body of `len` bytes (for a
/// vectored write of a shared body).
pub fn header_bytes(kind: u16, len: u32) -> [u8; HEADER_BYTES] {
    let h = FrameHeader {
        len: len.into(),
        kind: kind.into(),
        flags: 0.into(),
    };
    let mut b = [0; HEADER_BYTES];
    b.copy_from_slice(h.as_bytes());
    b
}

/// The fixed part `T` at the start of `body` and the bytes after it.
pub(crate) fn head<T: FromBytes + KnownLayout + Immutable + Copy>(
    kind: u16,
    body: &[u8],
) -> Result<(T, &[u8]), DecodeError> {
    match T::read_from_prefix(body) {
        Ok(x) => Ok(x),
        Err(_) => Err(DecodeError::Truncated {
            kind,
            len: body.len(),
            need: core::mem::size_of::<T>(),
        }),
    }
}

/// A body that is exactly `T`.
pub(crate) fn exact<T: FromBytes + KnownLayout + Immutable + Copy>(
    kind: u16,
    body: &[u8],
) -> Result<T, DecodeError> {
    let (t, rest) = head::<T>(kind, body)?;
    if !rest.is_empty() {
        return Err(DecodeError::Trailing {
            kind,
            extra: rest.len(),
        });
    }
    Ok(t)
}

/// Fails with [`DecodeError::Reserved`] unless `ok`.
pub(crate) fn reserved(kind: u16, ok: bool) -> Result<(), DecodeError> {
    if ok {
        Ok(())
    } else {
        Err(DecodeError::Reserved { kind })
    }
}

/// UTF-8 text of at most `max` bytes (`min` at least).
pub(crate) fn text<'a>(
    kind: u16,
    what: &'static str,
    b: &'a [u8],
    (min, max): (usize, usize),
) -> Result<&'a str, DecodeError> {
    if b.len() < min || b.len() > max {
        return Err(DecodeError::BadLength {
            what,
            len: b.len(),
            max,
        });
    }
    std::str::from_utf8(b).map_err(|_| DecodeError::BadUtf8 { kind })
}

/// Fails with [`DecodeError::BadFlags`] unless the frame's flags are 0.
pub(crate) fn no_flags(f: &Frame<'_>) -> Result<(), DecodeError> {
    if f.flags == 0 {
        Ok(())
    } else {
        Err(DecodeError::BadFlags {
            kind: f.kind,
            flags: f.flags,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u16, body: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let at = begin(&mut out, kind);
        out.extend_from_slice(body);
        end(&mut out, at);
        out
    }

    #[test]
    fn partial_and_several_frames_per_read() {
        let mut bytes = frame(7, b"abc");
        bytes.extend(frame(8, b""));
        bytes.extend(frame(9, &[1; 300]));
        let mut d = FrameDecoder::new(1024);
        d.push(&bytes[..5]);
        assert_eq!(d.next_frame(), Ok(None));
        d.push(&bytes[5..20]);
        let f = d.next_frame().expect("ok").expect("frame");
        assert_eq!((f.kind, f.body), (7, &b"abc"[..]));
        let f = d.next_frame().expect("ok").expect("frame");
        assert_eq!((f.kind, f.body.len()), (8, 0));
        assert_eq!(d.next_frame(), Ok(None));
        let rest = &bytes[20..];
        let w = d.read_buf(rest.len() + 10);
        w[..rest.len()].copy_from_slice(rest);
        d.commit(rest.len());
        let f = d.next_frame().expect("ok").expect("frame");
        assert_eq!((f.kind, f.body.len()), (9, 300));
        assert_eq!(d.next_frame(), Ok(None));
        assert_eq!((d.frames(), d.bytes(), d.buffered()), (3, 327, 0));
    }

    #[test]
    fn oversized_frames_poison_the_stream() {
        let mut d = FrameDecoder::new(16);
        d.push(&frame(1, &[0; 17])[..HEADER_BYTES]);
        let e = DecodeError::FrameTooLarge { len: 17, max: 16 };
        assert_eq!(d.next_frame(), Err(e.clone()));
        d.push(&frame(1, b"ok"));
        assert_eq!(d.next_frame(), Err(e.clone()));
        assert_eq!(d.failed(), Some(&e));
    }

    #[test]
    fn header_bytes_match_the_encoder() {
        let f = frame(0x8002, &[5; 12]);
        assert_eq!(header_bytes(0x8002, 12)[..], f[..HEADER_BYTES]);
    }
}
