//! The 8 × 8 block transpose behind the emulator's transposing copies.

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
}
