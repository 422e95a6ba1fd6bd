//! The block transposes behind the emulator's transposing copies: 16 × 16
//! where the CPU has AVX-512 (a block's rows are whole cache lines, so each
//! line is read or written once), else 8 × 8.

/// `dst[d0 + i·ds + l] = src[s0 + l·ss + i]` for `i, l` in `0..8`: the block of
/// eight rows of eight cells at `s0` (rows `ss` apart) transposed into the block
/// at `d0` (rows `ds` apart). With AVX, eight row loads, 24 shuffles and eight
/// row stores; else cell by cell. `false`, nothing written, when either block
/// reaches past its slice.
pub(crate) fn block8(src: &[f32], s0: usize, ss: usize, dst: &mut [f32], d0: usize, ds: usize) -> bool {
    let end = |start: usize, stride: usize| stride.checked_mul(7).and_then(|r| r.checked_add(start)).and_then(|r| r.checked_add(8));
    match (end(s0, ss), end(d0, ds)) {
        (Some(se), Some(de)) if se <= src.len() && de <= dst.len() => {}
        _ => return false,
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: AVX is present and both blocks lie inside their slices (checked above).
        unsafe { x86::block8(src.as_ptr().add(s0), ss, dst.as_mut_ptr().add(d0), ds) };
        return true;
    }
    for i in 0..8 {
        for l in 0..8 {
            dst[d0 + i * ds + l] = src[s0 + l * ss + i];
        }
    }
    true
}

/// Whether [`block16`] copies blocks on this CPU (it has AVX-512): when not,
/// a caller copies a square of sixteen by [`block8`]s.
fn has_block16() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("avx512f");
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// [`block8`] for a 16 × 16 block: `dst[d0 + i·ds + l] = src[s0 + l·ss + i]`
/// for `i, l` in `0..16`, with sixteen row loads, 64 shuffles and sixteen row
/// stores. `false`, nothing written, without AVX-512 ([`has_block16`]) or when
/// either block reaches past its slice.
pub(crate) fn block16(src: &[f32], s0: usize, ss: usize, dst: &mut [f32], d0: usize, ds: usize) -> bool {
    let end = |start: usize, stride: usize| stride.checked_mul(15).and_then(|r| r.checked_add(start)).and_then(|r| r.checked_add(16));
    match (end(s0, ss), end(d0, ds)) {
        (Some(se), Some(de)) if se <= src.len() && de <= dst.len() && has_block16() => {}
        _ => return false,
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: AVX-512F is present and both blocks lie inside their slices (checked above).
    unsafe {
        x86_512::block16(src.as_ptr().add(s0), ss, dst.as_mut_ptr().add(d0), ds)
    };
    true
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::{
        _mm256_loadu_ps, _mm256_permute2f128_ps, _mm256_setzero_ps, _mm256_shuffle_ps, _mm256_storeu_ps, _mm256_unpackhi_ps,
        _mm256_unpacklo_ps,
    };

    /// [`super::block8`] on raw pointers.
    ///
    /// # Safety
    /// AVX is present; eight rows of eight cells from `src` (`ss` apart) are
    /// readable and from `dst` (`ds` apart) writable, not overlapping.
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn block8(src: *const f32, ss: usize, dst: *mut f32, ds: usize) {
        // SAFETY: the rows are inside the caller's blocks.
        unsafe {
            // A loop, not `array::from_fn`: a closure would be compiled
            // without AVX and call each load out of line.
            let mut r = [_mm256_setzero_ps(); 8];
            for (l, r) in r.iter_mut().enumerate() {
                *r = _mm256_loadu_ps(src.add(l * ss));
            }
            // Pairs of rows interleaved, then quadruples, then the 128-bit halves swapped.
            let t0 = _mm256_unpacklo_ps(r[0], r[1]);
            let t1 = _mm256_unpackhi_ps(r[0], r[1]);
            let t2 = _mm256_unpacklo_ps(r[2], r[3]);
            let t3 = _mm256_unpackhi_ps(r[2], r[3]);
            let t4 = _mm256_unpacklo_ps(r[4], r[5]);
            let t5 = _mm256_unpackhi_ps(r[4], r[5]);
            let t6 = _mm256_unpacklo_ps(r[6], r[7]);
            let t7 = _mm256_unpackhi_ps(r[6], r[7]);
            let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
            let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
            let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
            let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
            let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
            let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
            let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
            let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
            let rows = [
                _mm256_permute2f128_ps::<0x20>(u0, u4),
                _mm256_permute2f128_ps::<0x20>(u1, u5),
                _mm256_permute2f128_ps::<0x20>(u2, u6),
                _mm256_permute2f128_ps::<0x20>(u3, u7),
                _mm256_permute2f128_ps::<0x31>(u0, u4),
                _mm256_permute2f128_ps::<0x31>(u1, u5),
                _mm256_permute2f128_ps::<0x31>(u2, u6),
                _mm256_permute2f128_ps::<0x31>(u3, u7),
            ];
            for (i, row) in rows.into_iter().enumerate() {
                _mm256_storeu_ps(dst.add(i * ds), row);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86_512 {
    use std::arch::x86_64::{
        _mm512_castpd_ps, _mm512_castps_pd, _mm512_loadu_ps, _mm512_setzero_ps, _mm512_shuffle_f32x4, _mm512_storeu_ps, _mm512_unpackhi_pd,
        _mm512_unpackhi_ps, _mm512_unpacklo_pd, _mm512_unpacklo_ps,
    };

    /// [`super::block16`] on raw pointers.
    ///
    /// # Safety
    /// AVX-512F is present; sixteen rows of sixteen cells from `src` (`ss`
    /// apart) are readable and from `dst` (`ds` apart) writable, not overlapping.
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn block16(src: *const f32, ss: usize, dst: *mut f32, ds: usize) {
        // Within each 128-bit lane: pairs of rows interleaved (`t`), then
        // quadruples (`u[4g + m]` holds, in lane `L`, column `4L + m` of rows
        // `4g..4g + 4`); then whole lanes are gathered across registers.
        // SAFETY: the rows are inside the caller's blocks.
        unsafe {
            let mut r = [_mm512_setzero_ps(); 16];
            for (l, r) in r.iter_mut().enumerate() {
                *r = _mm512_loadu_ps(src.add(l * ss));
            }
            let mut t = [_mm512_setzero_ps(); 16];
            for i in 0..8 {
                t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
                t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
            }
            let mut u = [_mm512_setzero_ps(); 16];
            for g in 0..4 {
                let (a, b, c, d) = (
                    _mm512_castps_pd(t[4 * g]),
                    _mm512_castps_pd(t[4 * g + 2]),
                    _mm512_castps_pd(t[4 * g + 1]),
                    _mm512_castps_pd(t[4 * g + 3]),
                );
                u[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
                u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
                u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(c, d));
                u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(c, d));
            }
            // Output row `4L + m` is lane `L` of `u[m]`, `u[4 + m]`, `u[8 + m]`, `u[12 + m]`.
            for m in 0..4 {
                let x_lo = _mm512_shuffle_f32x4::<0x44>(u[m], u[4 + m]);
                let x_hi = _mm512_shuffle_f32x4::<0xEE>(u[m], u[4 + m]);
                let y_lo = _mm512_shuffle_f32x4::<0x44>(u[8 + m], u[12 + m]);
                let y_hi = _mm512_shuffle_f32x4::<0xEE>(u[8 + m], u[12 + m]);
                _mm512_storeu_ps(dst.add(m * ds), _mm512_shuffle_f32x4::<0x88>(x_lo, y_lo));
                _mm512_storeu_ps(dst.add((4 + m) * ds), _mm512_shuffle_f32x4::<0xDD>(x_lo, y_lo));
                _mm512_storeu_ps(dst.add((8 + m) * ds), _mm512_shuffle_f32x4::<0x88>(x_hi, y_hi));
                _mm512_storeu_ps(dst.add((12 + m) * ds), _mm512_shuffle_f32x4::<0xDD>(x_hi, y_hi));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every cell lands where the definition puts it, between padded rows.
    #[test]
    fn blocks_transpose_cell_by_cell() {
        let (ss, ds) = (11, 13);
        let src: Vec<f32> = (0..3 + 7 * ss + 8).map(|v| v as f32).collect();
        let mut dst = vec![-1.0; 5 + 7 * ds + 8];
        assert!(block8(&src, 3, ss, &mut dst, 5, ds));
        for i in 0..8 {
            for l in 0..8 {
                assert_eq!(dst[5 + i * ds + l], src[3 + l * ss + i], "row {i}, cell {l}");
            }
        }
        // The padding between the destination's rows is untouched.
        assert!((0..dst.len()).filter(|&c| c < 5 || (c - 5) % ds >= 8).all(|c| dst[c] == -1.0));
        // A block reaching past a slice is refused, nothing written.
        let mut short = vec![0.0; 7 * ds + 7];
        assert!(!block8(&src, 3, ss, &mut short, 0, ds));
        assert!(short.iter().all(|&v| v == 0.0));
    }

    /// The 16 × 16 block lands cell by cell where the definition puts it, on a
    /// CPU with AVX-512; without it nothing is written.
    #[test]
    fn sixteen_blocks_transpose_cell_by_cell() {
        let (ss, ds) = (19, 21);
        let src: Vec<f32> = (0..2 + 15 * ss + 16).map(|v| v as f32).collect();
        let mut dst = vec![-1.0; 3 + 15 * ds + 16];
        let done = block16(&src, 2, ss, &mut dst, 3, ds);
        assert_eq!(done, has_block16());
        if done {
            for i in 0..16 {
                for l in 0..16 {
                    assert_eq!(dst[3 + i * ds + l], src[2 + l * ss + i], "row {i}, cell {l}");
                }
            }
        }
        assert!((0..dst.len()).filter(|&c| !done || c < 3 || (c - 3) % ds >= 16).all(|c| dst[c] == -1.0));
        let mut short = vec![0.0; 15 * ds + 15];
        assert!(!block16(&src, 2, ss, &mut short, 0, ds));
        assert!(short.iter().all(|&v| v == 0.0));
    }
}
