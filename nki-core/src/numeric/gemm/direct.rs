//! A single-precision GEMM shaped for `nc_matmul`, on AVX-512 or on AVX2
//! with FMA.
//!
//! `nc_matmul`'s operands are tiles of at most 128 (stationary) by 128
//! (contraction) by 512 (moving) elements, rows a partition apart. Read where
//! they lie, a microkernel tile's `k` rows of either operand fall into a few
//! cache sets (and, for wide tiles, into as many pages) and evict each other,
//! and unless a tile happens to be aligned half the vector loads straddle two
//! lines. So the driver copies the product's `a` once into a dense block with
//! an odd number of cache lines per row, and one `k × NR` panel of `b` at a
//! time into an aligned buffer that every row tile then reads from L1.
//! `matrixmultiply` copies as much, but its AVX2 microkernel is an 8 × 8
//! outer product of permuted vectors, and its edge tiles go through a buffer;
//! here a 6 × 16 broadcast kernel keeps 12 accumulators busy and row edges
//! are spread over the tiles. On a Zen 3 core (96 GFLOP/s peak) that takes a
//! 128 × 128 × 512 product from 74-79 to 86-90 GFLOP/s, and keeps it there
//! when the operands' partitions are 16 KiB apart (where reading `a` in place
//! fell to 68).
//!
//! Every element is the same computation as `matrixmultiply`'s kernels (its
//! AVX-512 and its AVX2 + FMA ones alike): one fused multiply-add per
//! contraction index in ascending order, starting from +0, then the sum stored
//! (`beta` 0) or added onto `c` in one rounding (`beta` 1). The results are
//! bit-identical to the packed path, which the dispatcher in the parent module
//! keeps for every other case.
//!
//! One driver ([`Tile::product`]) serves both instruction sets ([`Isa`]); they
//! differ only in vector width and in how many rows of accumulators fit their
//! register files.

use super::{Mat, ONE_PASS_K};
use std::arch::x86_64::{__m256, __m256i, __m512, __mmask16, _mm256_add_ps, _mm256_cmpgt_epi32, _mm256_fmadd_ps};
use std::arch::x86_64::{_cvtu32_mask16, _mm512_storeu_ps};
use std::arch::x86_64::{_mm256_loadu_ps, _mm256_maskload_ps, _mm256_maskstore_ps, _mm256_set1_epi32, _mm256_set1_ps};
use std::arch::x86_64::{_mm256_setr_epi32, _mm256_setzero_ps, _mm256_storeu_ps, _mm512_add_ps, _mm512_fmadd_ps};
use std::arch::x86_64::{_mm512_loadu_ps, _mm512_mask_storeu_ps, _mm512_maskz_loadu_ps, _mm512_set1_ps, _mm512_setzero_ps};
use std::mem::MaybeUninit;

/// A microkernel: the instruction set and its tile shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kernel {
    /// 12 rows by 32 columns in 24 of AVX-512's 32 vector registers.
    Avx512,
    /// 6 rows by 16 columns in 12 of AVX2's 16 vector registers.
    Avx2Fma,
}

impl Kernel {
    /// Every kernel, widest first.
    #[cfg(test)]
    pub(super) const ALL: [Kernel; 2] = [Kernel::Avx512, Kernel::Avx2Fma];

    /// Whether this CPU runs the kernel (std caches the detection).
    pub(super) fn supported(self) -> bool {
        match self {
            Kernel::Avx512 => std::arch::is_x86_feature_detected!("avx512f"),
            Kernel::Avx2Fma => std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma"),
        }
    }

    /// The widest kernel this CPU runs, if any.
    pub(super) fn detect() -> Option<Kernel> {
        [Kernel::Avx512, Kernel::Avx2Fma].into_iter().find(|k| k.supported())
    }

    /// The instruction set and the tile of accumulators, as a benchmark names them.
    pub(super) fn describe(self) -> &'static str {
        match self {
            Kernel::Avx512 => "AVX-512, 12 x 32 tiles",
            Kernel::Avx2Fma => "AVX2 + FMA, 6 x 16 tiles",
        }
    }

    /// `c = a · b` (`tile.accumulate` false) or `c = c + a · b` (true) for
    /// `a: m×k`, `b: k×n` with unit column stride, `c: m×n` with unit column
    /// stride.
    ///
    /// # Safety
    /// The CPU runs the kernel ([`Kernel::supported`]); every element
    /// addressed by the shapes and strides lies inside the allocations behind
    /// `a`, `b` and `c`; `c` aliases neither operand; `b.cs == 1` and
    /// `c.cs == 1`.
    pub(super) unsafe fn sgemm(self, m: usize, n: usize, tile: &Tile) {
        // SAFETY: as this function's contract.
        unsafe { self.columns(n, tile, &PackedA::new(m, tile.k, tile.a, tile.am)) }
    }

    /// [`Kernel::sgemm`] with `a` already copied into `a` (whose rows are the
    /// product's; `tile.a` is not read): how the column parts of a split
    /// product share one copy.
    ///
    /// # Safety
    /// As [`Kernel::sgemm`], with `a` made from an `a` of `tile.k` columns.
    pub(super) unsafe fn columns(self, n: usize, tile: &Tile, a: &PackedA) {
        debug_assert_eq!(a.k, tile.k);
        // SAFETY: as this function's contract, which includes the features
        // the kernel's instructions need.
        unsafe {
            match self {
                Kernel::Avx512 => avx512(n, tile, a),
                Kernel::Avx2Fma => avx2_fma(n, tile, a),
            }
        }
    }
}

/// [`Tile::product`] compiled for AVX-512F.
///
/// # Safety
/// As [`Kernel::sgemm`] for [`Kernel::Avx512`].
#[target_feature(enable = "avx512f")]
unsafe fn avx512(n: usize, tile: &Tile, a: &PackedA) {
    // SAFETY: as this function's contract.
    unsafe { tile.product::<Avx512, 12, 2>(n, a) }
}

/// [`Tile::product`] compiled for AVX2 and FMA.
///
/// # Safety
/// As [`Kernel::sgemm`] for [`Kernel::Avx2Fma`].
#[target_feature(enable = "avx2,fma")]
unsafe fn avx2_fma(n: usize, tile: &Tile, a: &PackedA) {
    // SAFETY: as this function's contract.
    unsafe { tile.product::<Avx2Fma, 6, 2>(n, a) }
}

/// The vector operations a microkernel needs, on vectors of `LANES` f32.
///
/// Every method is `unsafe` for the same reason: the CPU must have the
/// instruction set, and pointers must address `LANES` readable (writable)
/// elements, or those whose lanes the mask keeps.
trait Isa {
    /// A vector of `LANES` f32.
    type V: Copy;
    /// Which lanes of a vector a masked load or store touches.
    type Mask: Copy;
    /// Lanes per vector.
    const LANES: usize;
    /// The mask of the first `lanes` lanes (0 to `LANES`).
    unsafe fn mask(lanes: usize) -> Self::Mask;
    /// Every lane +0.
    unsafe fn zero() -> Self::V;
    /// Every lane `*p`.
    unsafe fn splat(p: *const f32) -> Self::V;
    /// `a · b + c` in one rounding per lane.
    unsafe fn fmadd(a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    /// `a + b` per lane.
    unsafe fn add(a: Self::V, b: Self::V) -> Self::V;
    /// The vector at `p`.
    unsafe fn load(p: *const f32) -> Self::V;
    /// The masked lanes of the vector at `p`, the others 0 (not read).
    unsafe fn load_masked(p: *const f32, mask: Self::Mask) -> Self::V;
    /// Writes `v` at `p`.
    unsafe fn store(p: *mut f32, v: Self::V);
    /// Writes the masked lanes of `v` at `p` (the others untouched).
    unsafe fn store_masked(p: *mut f32, mask: Self::Mask, v: Self::V);
}

/// An [`Isa`] from its intrinsics: `struct $name` with vectors `$v`, masks
/// `$mask` and `$lanes` lanes, whose methods run only in code compiled with
/// its instruction set ([`avx512`], [`avx2_fma`]).
macro_rules! isa {
    (
        $(#[$doc:meta])* $name:ident: $v:ty, $mask:ty, $lanes:literal;
        mask: |$lanes_kept:ident| $mask_of:expr;
        $zero:ident, $splat:ident, $fmadd:ident, $add:ident, $load:ident, $store:ident, $store_masked:ident;
        load_masked: |$p:ident, $m:ident| $load_masked:expr;
    ) => {
        $(#[$doc])*
        struct $name;

        impl Isa for $name {
            type V = $v;
            type Mask = $mask;
            const LANES: usize = $lanes;
            #[inline(always)]
            unsafe fn mask($lanes_kept: usize) -> $mask {
                // SAFETY: the callers run only in code compiled with the instruction set.
                unsafe { $mask_of }
            }
            #[inline(always)]
            unsafe fn zero() -> $v {
                // SAFETY: as `mask`.
                unsafe { $zero() }
            }
            #[inline(always)]
            unsafe fn splat(p: *const f32) -> $v {
                // SAFETY: as `mask`, and `p` is readable (the trait's contract).
                unsafe { $splat(*p) }
            }
            #[inline(always)]
            unsafe fn fmadd(a: $v, b: $v, c: $v) -> $v {
                // SAFETY: as `mask`.
                unsafe { $fmadd(a, b, c) }
            }
            #[inline(always)]
            unsafe fn add(a: $v, b: $v) -> $v {
                // SAFETY: as `mask`.
                unsafe { $add(a, b) }
            }
            #[inline(always)]
            unsafe fn load(p: *const f32) -> $v {
                // SAFETY: as `splat`.
                unsafe { $load(p) }
            }
            #[inline(always)]
            unsafe fn load_masked($p: *const f32, $m: $mask) -> $v {
                // SAFETY: as `splat`, for the lanes the mask keeps.
                unsafe { $load_masked }
            }
            #[inline(always)]
            unsafe fn store(p: *mut f32, v: $v) {
                // SAFETY: as `mask`, and `p` is writable (the trait's contract).
                unsafe { $store(p, v) }
            }
            #[inline(always)]
            unsafe fn store_masked(p: *mut f32, mask: $mask, v: $v) {
                // SAFETY: as `store`, for the lanes the mask keeps.
                unsafe { $store_masked(p, mask, v) }
            }
        }
    };
}

isa! {
    /// AVX-512F: 16 lanes, bit masks.
    Avx512: __m512, __mmask16, 16;
    mask: |lanes| _cvtu32_mask16((1u32 << lanes) - 1);
    _mm512_setzero_ps, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, _mm512_loadu_ps, _mm512_storeu_ps, _mm512_mask_storeu_ps;
    load_masked: |p, mask| _mm512_maskz_loadu_ps(mask, p);
}

isa! {
    /// AVX2 with FMA: 8 lanes, masks as vectors of all-ones or zero lanes.
    Avx2Fma: __m256, __m256i, 8;
    mask: |lanes| _mm256_cmpgt_epi32(_mm256_set1_epi32(lanes as i32), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    _mm256_setzero_ps, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_maskstore_ps;
    load_masked: |p, mask| _mm256_maskload_ps(p, mask);
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

/// Columns of the widest microkernel tile (AVX-512's 2 × 16).
const PANEL_COLS: usize = 32;

/// A `k × NV·LANES` panel of `b`, rows back to back, each starting a cache
/// line (for the widest tile, up to the longest contraction the kernels take).
#[repr(C, align(64))]
struct Panel([MaybeUninit<f32>; ONE_PASS_K * PANEL_COLS]);

/// Rows of `a` per copied block: the most a stationary tile has.
const A_ROWS: usize = 128;

thread_local! {
    /// This thread's buffer for copies of `a`, kept between products so that
    /// its pages are not faulted in again for each one.
    static A_BLOCK: std::cell::Cell<Vec<f32>> = const { std::cell::Cell::new(Vec::new()) };
}

/// A product's `a` copied into dense blocks of up to [`A_ROWS`] rows, back to
/// back, each `k` rows of an odd number of cache lines (so that the rows a
/// tile reads do not pile into a few cache sets), in the buffer of the thread
/// that made it (handed back when dropped). The column parts of a split
/// product read the one copy.
pub(super) struct PackedA {
    /// The blocks, in the vector's spare capacity: only the copied cells (not
    /// the padding at the end of each row) are initialised.
    cells: Vec<f32>,
    m: usize,
    k: usize,
}

/// The cells per copied row of a block of `rows` rows: an odd number of
/// cache lines.
fn block_lda(rows: usize) -> usize {
    (rows.div_ceil(16) | 1) * 16
}

impl PackedA {
    /// Copies `a: m×k` (element `(i, kk)` at `a[am.offset + i·am.rs + kk·am.cs]`).
    ///
    /// # Safety
    /// Every element addressed lies inside the allocation behind `a`.
    pub(super) unsafe fn new(m: usize, k: usize, a: *const f32, am: Mat) -> PackedA {
        let mut cells = A_BLOCK.take();
        cells.clear();
        cells.reserve((0..m).step_by(A_ROWS).map(|first| k * block_lda((m - first).min(A_ROWS))).sum());
        let mut to = cells.as_mut_ptr();
        for first in (0..m).step_by(A_ROWS) {
            let (rows, lda) = ((m - first).min(A_ROWS), block_lda((m - first).min(A_ROWS)));
            // SAFETY: the block's `k` rows of `lda` cells are inside the
            // capacity reserved above; the cells read from `a` are rows
            // `first..first + rows` of it, in bounds by the contract.
            unsafe {
                let from = a.offset(am.offset + first as isize * am.rs);
                for kk in 0..k {
                    let (from, to) = (from.offset(kk as isize * am.cs), to.add(kk * lda));
                    if am.rs == 1 {
                        std::ptr::copy_nonoverlapping(from, to, rows);
                    } else {
                        for i in 0..rows {
                            *to.add(i) = *from.offset(i as isize * am.rs);
                        }
                    }
                }
                to = to.add(k * lda);
            }
        }
        PackedA { cells, m, k }
    }

    /// The blocks as `(first, rows, lda, block)`: rows `first..first + rows`
    /// of `a`, as `k` rows of `lda` cells at `block`.
    ///
    /// An iterator rather than a callback: a closure is a function of its
    /// own, compiled without the caller's target features, and a microkernel
    /// inside one would call every intrinsic instead of inlining it.
    fn blocks(&self) -> impl Iterator<Item = (usize, usize, usize, *const f32)> + '_ {
        let mut at = self.cells.as_ptr();
        (0..self.m).step_by(A_ROWS).map(move |first| {
            let (rows, block) = ((self.m - first).min(A_ROWS), at);
            // Stays inside the capacity [`PackedA::new`] reserved (one past the last block at most).
            at = at.wrapping_add(self.k * block_lda(rows));
            (first, rows, block_lda(rows), block)
        })
    }
}

impl Drop for PackedA {
    fn drop(&mut self) {
        // A thread being torn down has no buffer to keep it in.
        let _ = A_BLOCK.try_with(|b| b.set(std::mem::take(&mut self.cells)));
    }
}

/// `$tile.run::<I, R, NV>($args)` for the run-time row count `$rows`, one arm
/// per `R` up to `MR` (the listed counts must reach it).
macro_rules! run_rows {
    ($tile:expr, $rows:expr, $args:tt; $($r:literal)+) => {
        match $rows {
            $($r if $r <= MR => $tile.run::<I, $r, NV> $args,)+
            rows => unreachable!("{rows} rows in a tile of at most {MR}"),
        }
    };
}

impl Tile {
    /// The whole `m × n` product (`m` the rows of `a`) in tiles of up to `MR`
    /// rows by `NV` vectors of columns.
    ///
    /// Each panel of `NV` vectors of columns is copied once per block of `a`
    /// (the last one zero-padded to the full width) and serves every row tile.
    /// The rows are split into as few tiles as `MR` allows, all within one row
    /// of each other: 128 rows in tiles of up to 6 are 18 of 6 and 4 of 5,
    /// rather than 21 of 6 and one of 2, which would keep only 4 of the 12
    /// accumulators busy.
    ///
    /// # Safety
    /// As [`Kernel::columns`], compiled with `I`'s instruction set, and
    /// `k <= ONE_PASS_K`.
    #[inline(always)]
    unsafe fn product<I: Isa, const MR: usize, const NV: usize>(&self, n: usize, a: &PackedA) {
        const { assert!(NV * I::LANES <= PANEL_COLS) };
        debug_assert!(self.k <= ONE_PASS_K);
        for (first, rows, lda, block) in a.blocks() {
            // SAFETY: each block's rows are inside the product, copied at `block`.
            unsafe { self.block::<I, MR, NV>(block, lda, first, rows, n) }
        }
    }

    /// Rows `first..first + m` of the product, whose part of `a` is `k` rows
    /// of `lda` cells at `a`.
    ///
    /// # Safety
    /// As [`Tile::product`], with the rows inside the product.
    #[inline(always)]
    unsafe fn block<I: Isa, const MR: usize, const NV: usize>(&self, a: *const f32, lda: usize, first: usize, m: usize, n: usize) {
        let width = NV * I::LANES;
        let tiles = m.div_ceil(MR);
        let Some(short) = m.checked_div(tiles) else { return };
        let extra = m % tiles;
        let mut panel = Panel([MaybeUninit::uninit(); ONE_PASS_K * PANEL_COLS]);
        let panel = panel.0.as_mut_ptr().cast::<f32>();
        let mut j = 0;
        while j < n {
            let cols = (n - j).min(width);
            // No closures around intrinsics here (see [`PackedA::blocks`]).
            // SAFETY: masks are plain values; the instruction set is there.
            let mut masks = [unsafe { I::mask(0) }; NV];
            for (v, mask) in masks.iter_mut().enumerate() {
                // SAFETY: as above.
                *mask = unsafe { I::mask(cols.saturating_sub(v * I::LANES).min(I::LANES)) };
            }
            let edge = (cols < width).then_some(masks);
            // SAFETY: row `kk` of the panel holds `width` cells of the
            // buffer; the columns read from `b` are inside the product, and
            // on the edge the masks skip the others (reading them as 0).
            unsafe {
                let b = self.b.offset(self.bm.offset + j as isize);
                for kk in 0..self.k {
                    let (from, to) = (b.offset(kk as isize * self.bm.rs), panel.add(kk * width));
                    for v in 0..NV {
                        let x = match edge {
                            None => I::load(from.add(v * I::LANES)),
                            Some(masks) => I::load_masked(from.add(v * I::LANES), masks[v]),
                        };
                        I::store(to.add(v * I::LANES), x);
                    }
                }
            }
            let mut i = 0;
            for t in 0..tiles {
                let rows = short + usize::from(t < extra);
                // SAFETY: rows `i..i + rows` and columns `j..j + cols` are
                // inside the block, and `cols` is below `width` only with
                // masks that keep the columns beyond it untouched.
                unsafe { run_rows!(self, rows, (a.add(i), lda, panel, first + i, j, edge); 1 2 3 4 5 6 7 8 9 10 11 12) }
                i += rows;
            }
            j += cols;
        }
    }

    /// The `R × NV·LANES` block of `c` at row `i0`, column `j0`, from the
    /// panel of `b` holding its columns; on the product's last columns
    /// (`edge`), only those the masks keep.
    ///
    /// # Safety
    /// As [`Kernel::sgemm`], compiled with `I`'s instruction set, with the
    /// block (its masked part on the edge) inside the product and `panel`
    /// holding `k` rows of `NV·LANES` cells.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn run<I: Isa, const R: usize, const NV: usize>(
        &self,
        a: *const f32,
        lda: usize,
        panel: *const f32,
        i0: usize,
        j0: usize,
        edge: Option<[I::Mask; NV]>,
    ) {
        // SAFETY: masked-off lanes of `c` are neither loaded nor stored, and
        // every other address is an element of the product or of the panel
        // (the caller's contract).
        unsafe {
            let mut acc = [[I::zero(); NV]; R];
            for kk in 0..self.k {
                let row = panel.add(kk * NV * I::LANES);
                let mut bv = [I::zero(); NV];
                for (v, bv) in bv.iter_mut().enumerate() {
                    *bv = I::load(row.add(I::LANES * v));
                }
                let col = a.add(kk * lda);
                for (r, acc) in acc.iter_mut().enumerate() {
                    let av = I::splat(col.add(r));
                    for v in 0..NV {
                        acc[v] = I::fmadd(av, bv[v], acc[v]);
                    }
                }
            }
            // One straight loop per case: a branch inside the loop keeps the
            // compiler from unrolling it, and the accumulators then go through
            // a stack copy that it zeroes (by a memset call) on every tile.
            let out = |r: usize, v: usize| self.c.offset(self.cm.offset + (i0 + r) as isize * self.cm.rs + (j0 + v * I::LANES) as isize);
            match (edge, self.accumulate) {
                (None, false) => (0..R).for_each(|r| (0..NV).for_each(|v| I::store(out(r, v), acc[r][v]))),
                (None, true) => (0..R).for_each(|r| (0..NV).for_each(|v| I::store(out(r, v), I::add(acc[r][v], I::load(out(r, v)))))),
                (Some(m), false) => (0..R).for_each(|r| (0..NV).for_each(|v| I::store_masked(out(r, v), m[v], acc[r][v]))),
                (Some(m), true) => (0..R).for_each(|r| {
                    (0..NV).for_each(|v| I::store_masked(out(r, v), m[v], I::add(acc[r][v], I::load_masked(out(r, v), m[v]))))
                }),
            }
        }
    }
}
