//! An AVX-512 single-precision GEMM that reads its operands where they are.
//!
//! `nc_matmul`'s operands are tiles of at most 128 (stationary) by 128
//! (contraction) by 512 (moving) elements whose rows are already contiguous:
//! the stationary tile holds `a(i..i + MR, kk)` side by side in partition
//! `kk`, the moving tile holds `b(kk, j..j + 32)` side by side. A
//! general-purpose GEMM copies ("packs") both operands into panels before each
//! product, which at a contraction of 128 costs about a quarter of the product
//! itself. Here the microkernel broadcasts `a`'s elements and loads `b`'s rows
//! in place, so nothing is copied.
//!
//! Every element is the same computation as `matrixmultiply`'s kernels: one
//! fused multiply-add per contraction index in ascending order, starting from
//! +0, then the sum stored (`beta` 0) or added onto `c` in one rounding
//! (`beta` 1). The results are bit-identical to the packed path, which the
//! dispatcher in the parent module keeps for every other case.

use super::Mat;
use std::arch::x86_64::{__m512, __mmask16, _mm512_add_ps, _mm512_fmadd_ps, _mm512_mask_storeu_ps, _mm512_maskz_loadu_ps};
use std::arch::x86_64::{_mm512_set1_ps, _mm512_setzero_ps};

/// Vectors of 16 columns per microkernel tile.
const NV: usize = 2;
/// Columns per microkernel tile.
const NR: usize = 16 * NV;
/// Rows per microkernel tile: `MR × NV` accumulators plus the `NV` loaded
/// rows of `b` and a broadcast fit the 32 vector registers.
const MR: usize = 12;

/// Whether this CPU runs [`sgemm`] (AVX-512 Foundation, detected once).
pub(super) fn available() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
}

/// `c = a · b` (`tile.accumulate` false) or `c = c + a · b` (true) for
/// `a: m×k`, `b: k×n` with unit column stride, `c: m×n` with unit column
/// stride.
///
/// # Safety
/// The CPU supports AVX-512F ([`available`]); every element addressed by the
/// shapes and strides lies inside the allocations behind `a`, `b` and `c`; `c`
/// aliases neither operand; `b.cs == 1` and `c.cs == 1`.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn sgemm(m: usize, n: usize, tile: Tile) {
    let mut j = 0;
    while j < n {
        let cols = (n - j).min(NR);
        let masks: [__mmask16; NV] = std::array::from_fn(|v| {
            let lanes = cols.saturating_sub(16 * v).min(16);
            ((1u32 << lanes) - 1) as __mmask16
        });
        let mut i = 0;
        while i < m {
            let rows = (m - i).min(MR);
            // SAFETY: the tile's rows `i..i + rows` and columns `j..j + cols`
            // are inside the product's shape, which the caller vouches for.
            unsafe {
                match rows {
                    12 => tile.run::<12>(i, j, masks),
                    11 => tile.run::<11>(i, j, masks),
                    10 => tile.run::<10>(i, j, masks),
                    9 => tile.run::<9>(i, j, masks),
                    8 => tile.run::<8>(i, j, masks),
                    7 => tile.run::<7>(i, j, masks),
                    6 => tile.run::<6>(i, j, masks),
                    5 => tile.run::<5>(i, j, masks),
                    4 => tile.run::<4>(i, j, masks),
                    3 => tile.run::<3>(i, j, masks),
                    2 => tile.run::<2>(i, j, masks),
                    _ => tile.run::<1>(i, j, masks),
                }
            }
            i += rows;
        }
        j += cols;
    }
}

/// One product's contraction length and operands, shared by its microkernel
/// tiles; `accumulate` adds onto `c` instead of overwriting it.
pub(super) struct Tile {
    pub k: usize,
    pub a: *const f32,
    pub am: Mat,
    pub b: *const f32,
    pub bm: Mat,
    pub c: *mut f32,
    pub cm: Mat,
    pub accumulate: bool,
}

impl Tile {
    /// The `R × NR` block of `c` at row `i0`, column `j0` (columns beyond the
    /// product masked off in `masks`).
    ///
    /// # Safety
    /// As [`sgemm`], with the block inside the product's shape.
    #[inline(always)]
    unsafe fn run<const R: usize>(&self, i0: usize, j0: usize, masks: [__mmask16; NV]) {
        // SAFETY: masked-off lanes are neither loaded nor stored, and every
        // other address is an element of the product (the caller's contract).
        unsafe {
            let mut acc = [[_mm512_setzero_ps(); NV]; R];
            let a = self.a.offset(self.am.offset + i0 as isize * self.am.rs);
            let b = self.b.offset(self.bm.offset + j0 as isize);
            for kk in 0..self.k as isize {
                let row = b.offset(kk * self.bm.rs);
                let bv: [__m512; NV] = std::array::from_fn(|v| _mm512_maskz_loadu_ps(masks[v], row.add(16 * v)));
                let col = a.offset(kk * self.am.cs);
                for (r, acc) in acc.iter_mut().enumerate() {
                    let av = _mm512_set1_ps(*col.offset(r as isize * self.am.rs));
                    for v in 0..NV {
                        acc[v] = _mm512_fmadd_ps(av, bv[v], acc[v]);
                    }
                }
            }
            for (r, acc) in acc.iter().enumerate() {
                let out = self.c.offset(self.cm.offset + (i0 + r) as isize * self.cm.rs + j0 as isize);
                for v in 0..NV {
                    let mut x = acc[v];
                    if self.accumulate {
                        x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(masks[v], out.add(16 * v)));
                    }
                    _mm512_mask_storeu_ps(out.add(16 * v), masks[v], x);
                }
            }
        }
    }
}
