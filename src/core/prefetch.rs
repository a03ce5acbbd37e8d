//! A software prefetch: asks the cache for a line the code will read soon.
//!
//! The hot walks of a tick (an observer's slots and their heads, the cells'
//! boxed caches, the AOI's member lists) read things scattered through
//! memory one after another; asking for them a few steps ahead lets the
//! misses overlap. The one place the tick's look-ahead needs `unsafe`. Owns
//! nothing; touches no state.

/// Starts fetching the cache line holding `p` (a no-op off x86-64).
///
/// Safe for any address: the pointer is only handed to the prefetch
/// instruction, never read through.
#[inline(always)]
pub fn line<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` needs SSE, which every x86-64 has (it is in the
    // target's baseline); a prefetch only warms the cache: it reads nothing
    // the program sees and cannot fault, whatever the address (unmapped ones
    // are dropped). Exercised by `any_address_is_harmless` below and by every
    // tick (the pull, the heads, the AOI lists: the `core` tests).
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    #[test]
    fn any_address_is_harmless() {
        let v = [1u64, 2, 3];
        super::line(v.as_ptr());
        super::line(v.as_ptr().wrapping_add(1 << 20));
        super::line(std::ptr::null::<u8>());
        super::line(usize::MAX as *const u8);
        assert_eq!(v, [1, 2, 3]);
    }
}
