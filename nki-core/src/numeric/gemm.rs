//! Strided single-precision GEMM for `nc_matmul`.

/// A strided matrix operand: `elem(i, j) = data[offset + i * rs + j * cs]`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Mat {
    pub offset: isize,
    pub rs: isize,
    pub cs: isize,
}

/// `c = a · b + beta · c` with `a: m×k`, `b: k×n`, `c: m×n` (f32 accumulation).
///
/// The caller guarantees every addressed element lies inside its slice (the
/// emulator bounds-checks views before calling).
#[allow(clippy::too_many_arguments)]
pub(crate) fn sgemm(m: usize, k: usize, n: usize, a: &[f32], am: Mat, b: &[f32], bm: Mat, c: &mut [f32], cm: Mat, beta: f32) {
    if m == 0 || n == 0 {
        return;
    }
    debug_assert!(in_bounds(a.len(), am, m, k) && in_bounds(b.len(), bm, k, n) && in_bounds(c.len(), cm, m, n));
    // SAFETY: the three operands are in bounds for the given shapes and strides
    // (checked by the emulator before the call), and `c` does not alias `a` or `b`
    // because it is borrowed mutably.
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            1.0,
            a.as_ptr().offset(am.offset),
            am.rs,
            am.cs,
            b.as_ptr().offset(bm.offset),
            bm.rs,
            bm.cs,
            beta,
            c.as_mut_ptr().offset(cm.offset),
            cm.rs,
            cm.cs,
        );
    }
}

fn in_bounds(len: usize, mat: Mat, rows: usize, cols: usize) -> bool {
    if rows == 0 || cols == 0 {
        return true;
    }
    let corners =
        [0, (rows as isize - 1) * mat.rs, (cols as isize - 1) * mat.cs, (rows as isize - 1) * mat.rs + (cols as isize - 1) * mat.cs];
    corners.iter().all(|&c| mat.offset + c >= 0 && ((mat.offset + c) as usize) < len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transposed_a_matches_naive() {
        let (m, k, n) = (3, 4, 5);
        let a: Vec<f32> = (0..k * m).map(|i| i as f32 * 0.5).collect(); // stored k×m
        let b: Vec<f32> = (0..k * n).map(|i| (i % 7) as f32).collect();
        let mut c = vec![1.0f32; m * n];
        sgemm(
            m,
            k,
            n,
            &a,
            Mat { offset: 0, rs: 1, cs: m as isize },
            &b,
            Mat { offset: 0, rs: n as isize, cs: 1 },
            &mut c,
            Mat { offset: 0, rs: n as isize, cs: 1 },
            1.0,
        );
        for i in 0..m {
            for j in 0..n {
                let want: f32 = 1.0 + (0..k).map(|p| a[p * m + i] * b[p * n + j]).sum::<f32>();
                assert_eq!(c[i * n + j], want);
            }
        }
    }
}
