//! The sweep's row gather: the layout entries of one row within a radius of
//! a point whose flags pass a filter, compacted into a list (with their
//! squared distances when asked).
//!
//! Two kernels with the same results, bit for bit:
//!
//! - [`Kernel::Scalar`], on every target: the distances of the row first
//!   (a loop the compiler vectorises to the target's baseline, two `f64`
//!   lanes on x86-64), then a branch-free compaction, one entry at a time.
//! - [`Kernel::Avx2`], on x86-64 CPUs with AVX2, chosen once per index at
//!   run time ([`Kernel::detect`]): four entries a step, the distance, the
//!   radius test and the flag filter in four lanes, the survivors packed to
//!   the front of the lanes by a shuffle from a table (16 patterns) and
//!   stored as one vector each for the slots and the distances.
//!
//! Measured on the cost probe (callgrind, 1,000 clients, about 108 entries
//! a view's rescan and ten rescans a client-second): the scalar gather ran
//! about 21 instructions an entry (distances 5, compaction 16), the AVX2
//! one 9.2 with its call and the row's tail; the host's instructions per
//! client-second fell 335,969 -> 317,867 (-5.4 %), the same results.
//! Both compute `dx * dx + dz * dz` as two products and a sum, each
//! rounded (no fused multiply-add), so the distances and every test on them
//! agree exactly, which `kernels_agree` checks over random rows.
//!
//! Owns the two kernels and the choice between them; reads the layout's
//! columns it is given and writes only the output slices.

use super::types::FlagFilter;

/// Which gather a [`GridAoi`](super::GridAoi) runs (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kernel {
    /// One entry at a time (every target).
    Scalar,
    /// Four entries a step (x86-64 with AVX2, checked at run time).
    #[cfg(target_arch = "x86_64")]
    Avx2,
}

impl Kernel {
    /// The fastest kernel this CPU runs.
    pub(crate) fn detect() -> Kernel {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            return Kernel::Avx2;
        }
        Kernel::Scalar
    }
}

/// One row of the layout, cut to the span the rescan reads: positions,
/// entity slots and flags, all of one length.
#[derive(Clone, Copy, Debug)]
pub(super) struct Row<'a> {
    pub(super) sx: &'a [f64],
    pub(super) sz: &'a [f64],
    pub(super) slot: &'a [u32],
    pub(super) flags: &'a [u64],
}

/// The entries of `row` with `d2 <= r2` from `(px, pz)` whose flags pass
/// `filter` (`ALL`: it is [`FlagFilter::ACCEPT_ALL`]): their slots into
/// `out[..n]` and, when `D2`, their `d2` into `out_d2[..n]`, in row order;
/// returns `n`. Both outputs are scribbled on past `n` (up to the row's
/// length); `scratch` is the scalar kernel's row of distances.
///
/// # Panics
/// If an output (or `scratch`) is shorter than the row, or the row's
/// columns differ in length.
#[inline]
pub(super) fn gather_row<const D2: bool, const ALL: bool>(
    kernel: Kernel,
    (px, pz, r2): (f64, f64, f64),
    filter: FlagFilter,
    row: Row<'_>,
    out: &mut [u32],
    out_d2: &mut [f64],
    scratch: &mut [f64],
) -> usize {
    let len = row.sx.len();
    assert!(
        row.sz.len() == len && row.slot.len() == len && row.flags.len() == len,
        "a row's columns have one length"
    );
    assert!(
        out.len() >= len && (!D2 || out_d2.len() >= len),
        "the outputs hold the row"
    );
    debug_assert_eq!(ALL, filter == FlagFilter::ACCEPT_ALL);
    match kernel {
        Kernel::Scalar => {
            gather_scalar::<D2, ALL>((px, pz, r2), filter, row, out, out_d2, &mut scratch[..len])
        }
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `Avx2` is only ever `Kernel::detect`'s answer on a CPU
        // that has AVX2 (tests build it directly only after the same
        // check); the kernel's own memory accesses are in its comments.
        Kernel::Avx2 => unsafe { avx2::gather::<D2, ALL>((px, pz, r2), filter, row, out, out_d2) },
    }
}

/// `FlagFilter::accepts` without its branches (`f != 0` for `ALL`).
#[inline(always)]
fn passes<const ALL: bool>(f: u64, filter: FlagFilter) -> bool {
    if ALL {
        f != 0
    } else {
        (f & filter.forbid == 0) & (f & filter.need == filter.need) & (f & filter.any != 0)
    }
}

// Indexed loops over pre-cut slices vectorise where iterator zips did not.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
fn gather_scalar<const D2: bool, const ALL: bool>(
    (px, pz, r2): (f64, f64, f64),
    filter: FlagFilter,
    row: Row<'_>,
    out: &mut [u32],
    out_d2: &mut [f64],
    d2s: &mut [f64],
) -> usize {
    let len = d2s.len();
    // Dense distances first (indexed loop over equal lengths: it
    // vectorises), then a branch-free compaction.
    let (sx, sz) = (&row.sx[..len], &row.sz[..len]);
    for i in 0..len {
        let (dx, dz) = (px - sx[i], pz - sz[i]);
        d2s[i] = dx * dx + dz * dz;
    }
    let (ss, sf) = (&row.slot[..len], &row.flags[..len]);
    let out = &mut out[..len];
    let out_d2 = &mut out_d2[if D2 { 0..len } else { 0..0 }];
    let mut c = 0;
    for i in 0..len {
        let (d2, j, f) = (d2s[i], ss[i], sf[i]);
        // `c <= i` always; the `min` lets the compiler drop the bounds
        // check.
        out[c.min(i)] = j;
        if D2 {
            out_d2[c.min(i)] = d2;
        }
        c += ((d2 <= r2) & passes::<ALL>(f, filter)) as usize;
    }
    c
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{passes, FlagFilter, Row};
    use std::arch::x86_64::*;

    /// For each 4-bit mask, the `pshufb` pattern that moves the 32-bit
    /// lanes whose bit is set to the front, in order.
    const PACK32: [[u8; 16]; 16] = pack32();
    /// The same for four 64-bit lanes, as `vpermps` indices (two 32-bit
    /// halves each).
    const PACK64: [[u32; 8]; 16] = pack64();

    const fn pack32() -> [[u8; 16]; 16] {
        let mut t = [[0x80u8; 16]; 16];
        let mut m = 0;
        while m < 16 {
            let (mut k, mut lane) = (0, 0);
            while lane < 4 {
                if m & (1 << lane) != 0 {
                    let mut b = 0;
                    while b < 4 {
                        t[m][4 * k + b] = (4 * lane + b) as u8;
                        b += 1;
                    }
                    k += 1;
                }
                lane += 1;
            }
            m += 1;
        }
        t
    }

    const fn pack64() -> [[u32; 8]; 16] {
        let mut t = [[0u32; 8]; 16];
        let mut m = 0;
        while m < 16 {
            let (mut k, mut lane) = (0, 0);
            while lane < 4 {
                if m & (1 << lane) != 0 {
                    t[m][2 * k] = 2 * lane as u32;
                    t[m][2 * k + 1] = 2 * lane as u32 + 1;
                    k += 1;
                }
                lane += 1;
            }
            m += 1;
        }
        t
    }

    /// [`super::gather_row`]'s AVX2 kernel (its checks already made: every
    /// column and output holds the row's `len` entries).
    ///
    /// # Safety
    /// The CPU must have AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn gather<const D2: bool, const ALL: bool>(
        (px, pz, r2): (f64, f64, f64),
        filter: FlagFilter,
        row: Row<'_>,
        out: &mut [u32],
        out_d2: &mut [f64],
    ) -> usize {
        let len = row.sx.len();
        let (vpx, vpz, vr2) = (_mm256_set1_pd(px), _mm256_set1_pd(pz), _mm256_set1_pd(r2));
        let zero = _mm256_setzero_si256();
        let any = _mm256_set1_epi64x(filter.any as i64);
        let need = _mm256_set1_epi64x(filter.need as i64);
        let forbid = _mm256_set1_epi64x(filter.forbid as i64);
        let (mut c, mut i) = (0, 0);
        while i + 4 <= len {
            // SAFETY (every access of the step): `i + 4 <= len`, and every
            // column and output holds `len` entries (`gather_row`'s
            // asserts), so the loads read `[i, i + 4)` of the columns; the
            // stores write `[c, c + 4)` of the outputs, in bounds as `c <= i`
            // (at most one entry kept per entry read). Unaligned loads and
            // stores throughout.
            let x = _mm256_loadu_pd(row.sx.as_ptr().add(i));
            let z = _mm256_loadu_pd(row.sz.as_ptr().add(i));
            let (dx, dz) = (_mm256_sub_pd(vpx, x), _mm256_sub_pd(vpz, z));
            // Two rounded products and a rounded sum, as the scalar kernel.
            let d2 = _mm256_add_pd(_mm256_mul_pd(dx, dx), _mm256_mul_pd(dz, dz));
            let near = _mm256_movemask_pd(_mm256_cmp_pd::<_CMP_LE_OQ>(d2, vr2));
            let f = _mm256_loadu_si256(row.flags.as_ptr().add(i).cast());
            let ok = if ALL {
                _mm256_xor_si256(_mm256_cmpeq_epi64(f, zero), _mm256_set1_epi64x(-1))
            } else {
                let no_forbid = _mm256_cmpeq_epi64(_mm256_and_si256(f, forbid), zero);
                let has_need = _mm256_cmpeq_epi64(_mm256_and_si256(f, need), need);
                let no_any = _mm256_cmpeq_epi64(_mm256_and_si256(f, any), zero);
                _mm256_andnot_si256(no_any, _mm256_and_si256(no_forbid, has_need))
            };
            let pass = _mm256_movemask_pd(_mm256_castsi256_pd(ok));
            let m = (near & pass) as usize;
            let j = _mm_loadu_si128(row.slot.as_ptr().add(i).cast());
            let pattern = _mm_loadu_si128(PACK32[m].as_ptr().cast());
            _mm_storeu_si128(out.as_mut_ptr().add(c).cast(), _mm_shuffle_epi8(j, pattern));
            if D2 {
                let idx = _mm256_loadu_si256(PACK64[m].as_ptr().cast());
                let packed = _mm256_permutevar8x32_ps(_mm256_castpd_ps(d2), idx);
                _mm256_storeu_ps(out_d2.as_mut_ptr().add(c).cast(), packed);
            }
            c += m.count_ones() as usize;
            i += 4;
        }
        // The last entries (fewer than four), one at a time.
        while i < len {
            let (dx, dz) = (px - row.sx[i], pz - row.sz[i]);
            let d2 = dx * dx + dz * dz;
            out[c] = row.slot[i];
            if D2 {
                out_d2[c] = d2;
            }
            c += ((d2 <= r2) & passes::<ALL>(row.flags[i], filter)) as usize;
            i += 1;
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every kernel this CPU runs.
    fn kernels() -> Vec<Kernel> {
        let mut k = vec![Kernel::Scalar];
        if Kernel::detect() != Kernel::Scalar {
            k.push(Kernel::detect());
        }
        k
    }

    /// What a gather must return: the kept entries' slots and `d2`s.
    fn brute(p: (f64, f64, f64), filter: FlagFilter, row: Row<'_>) -> Vec<(u32, f64)> {
        (0..row.sx.len())
            .filter_map(|i| {
                let (dx, dz) = (p.0 - row.sx[i], p.1 - row.sz[i]);
                let d2 = dx * dx + dz * dz;
                (d2 <= p.2 && filter.accepts(row.flags[i])).then_some((row.slot[i], d2))
            })
            .collect()
    }

    fn run(k: Kernel, p: (f64, f64, f64), filter: FlagFilter, row: Row<'_>) -> Vec<(u32, f64)> {
        let len = row.sx.len();
        let (mut out, mut d2, mut scratch) = (vec![0; len], vec![0.0; len], vec![0.0; len]);
        let n = if filter == FlagFilter::ACCEPT_ALL {
            gather_row::<true, true>(k, p, filter, row, &mut out, &mut d2, &mut scratch)
        } else {
            gather_row::<true, false>(k, p, filter, row, &mut out, &mut d2, &mut scratch)
        };
        // Without the distances: the same slots.
        let mut bare = vec![0; len];
        let m = if filter == FlagFilter::ACCEPT_ALL {
            gather_row::<false, true>(k, p, filter, row, &mut bare, &mut [], &mut scratch)
        } else {
            gather_row::<false, false>(k, p, filter, row, &mut bare, &mut [], &mut scratch)
        };
        assert_eq!(
            (m, &bare[..m]),
            (n, &out[..n]),
            "{k:?}: D2 changes nothing else"
        );
        out[..n]
            .iter()
            .copied()
            .zip(d2[..n].iter().copied())
            .collect()
    }

    #[test]
    fn the_kept_are_within_the_radius_and_pass_the_filter() {
        // Lengths around the four-entry step; the rim exactly at `r2`.
        for len in 0..11 {
            let sx: Vec<f64> = (0..len).map(|i| i as f64).collect();
            let sz = vec![0.0; len];
            let slot: Vec<u32> = (0..len as u32).map(|i| 100 + i).collect();
            let flags: Vec<u64> = (0..len as u64).map(|i| i % 3).collect();
            let row = Row {
                sx: &sx,
                sz: &sz,
                slot: &slot,
                flags: &flags,
            };
            let only_two = FlagFilter {
                any: 2,
                need: 0,
                forbid: 0,
            };
            for k in kernels() {
                let p = (0.0, 0.0, 16.0);
                let want: Vec<u32> = (0..len.min(5) as u32).filter(|i| i % 3 != 0).collect();
                let got = run(k, p, FlagFilter::ACCEPT_ALL, row);
                assert_eq!(
                    got.iter().map(|x| x.0 - 100).collect::<Vec<_>>(),
                    want,
                    "{k:?}"
                );
                let twos: Vec<u32> = want.iter().copied().filter(|i| i % 3 == 2).collect();
                let got = run(k, p, only_two, row);
                assert_eq!(
                    got.iter().map(|x| x.0 - 100).collect::<Vec<_>>(),
                    twos,
                    "{k:?}"
                );
            }
        }
    }

    #[test]
    fn this_machine_runs_the_fast_kernel_when_it_has_one() {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            assert_eq!(Kernel::detect(), Kernel::Avx2);
        }
        assert!(kernels().contains(&Kernel::detect()));
    }

    fn filter() -> impl Strategy<Value = FlagFilter> {
        prop_oneof![
            Just(FlagFilter::ACCEPT_ALL),
            (0u64..8, 0u64..4, 0u64..4).prop_map(|(any, need, forbid)| FlagFilter {
                any,
                need,
                forbid,
            }),
        ]
    }

    proptest! {
        /// Every kernel returns exactly what the brute force does, the
        /// distances bit for bit.
        #[test]
        fn kernels_agree(
            cells in prop::collection::vec((-60.0f64..60.0, -60.0f64..60.0, 0u64..8), 0..40),
            (px, pz) in (-30.0f64..30.0, -30.0f64..30.0),
            r in 0.0f64..60.0,
            filter in filter(),
        ) {
            let sx: Vec<f64> = cells.iter().map(|c| c.0).collect();
            let sz: Vec<f64> = cells.iter().map(|c| c.1).collect();
            let flags: Vec<u64> = cells.iter().map(|c| c.2).collect();
            let slot: Vec<u32> = (0..cells.len() as u32).collect();
            let row = Row { sx: &sx, sz: &sz, slot: &slot, flags: &flags };
            let p = (px, pz, r * r);
            let want = brute(p, filter, row);
            for k in kernels() {
                let got = run(k, p, filter, row);
                prop_assert_eq!(got.len(), want.len());
                for (g, w) in got.iter().zip(&want) {
                    prop_assert_eq!(g.0, w.0);
                    prop_assert_eq!(g.1.to_bits(), w.1.to_bits());
                }
            }
        }
    }
}
