//! The NKI library's `RoPE`: rotary position embedding of `[d_head, B, n_heads, S]`
//! embeddings, the head dimension on the partitions.
//!
//! Each pair `(e, o)` of a head vector is rotated by its position's angle:
//! `e' = e·cos − o·sin`, `o' = o·cos + e·sin`. In the contiguous layout the pair
//! is `(x[i], x[i + d_head/2])`; in the interleaved layout it is
//! `(x[2i], x[2i+1])`, gathered into the contiguous order by a stride-2 DMA on
//! load and scattered back the same way on store.
//!
//! ```text
//! tile = S / programs (S split over the LNC programs with lnc_shard)
//! for each chunk [B_c, heads_c, S_c] of [B, n_heads, tile]:   # B_c·heads_c·S_c <= FREE_TILE
//!     x   = load x_in[:, chunk]               # [d_head, B_c, heads_c, S_c], pairs split in halves
//!     cos, sin = load, repeated over heads_c  # [d_head/2, B_c, heads_c, S_c]
//!     odd = copy x[d_head/2:]                 # its own buffer, starting at partition 0
//!     even' = x[:d_head/2]·cos − odd·sin
//!     x[d_head/2:] = odd·cos + x[:d_head/2]·sin  # the new odd half over the old
//!     store even', x[d_head/2:]
//! ```
//!
//! Products are rounded to `x_in`'s dtype as in the library (its intermediate
//! tiles have that dtype). The library holds a program's whole
//! `[B, n_heads, S/programs]` in one tile per operand and leaves the fit to its
//! compiler (it documents `B·n_heads·S` up to about 72K in bf16); the port cuts
//! the same work into chunks of at most [`FREE_TILE`] elements per partition,
//! sequence first, then heads, then batches, so every shape the library accepts
//! runs here with six small tiles live. The library's own checks are the rules:
//! `d_head` 64 or 128; `B`, `n_heads` and `S` positive; with `lnc_shard`, `S` a
//! multiple of the programs; `cos` and `sin` of shape `[d_head/2, B, S]` and one
//! dtype; the three tensors are floats (`#[dtypes(...)]`: float32, bfloat16 or
//! float16). (Its docstring quotes `B <= 64`, `S <= 512` and `n_heads <= 16`,
//! which its code does not check and its own tests exceed.) `relayout_in_sbuf`
//! is accepted for the signature; the interleaved layout is always converted by
//! the strided DMA, which gives the same values as the library's matmul
//! permutation.

// The kernel keeps the library's Python name.
#![allow(non_snake_case)]

use nki::prelude::*;

/// The head sizes the library supports.
pub const HEAD_DIMS: [i64; 2] = [64, 128];

/// Why a `RoPE` shape is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeRule {
    /// `d_head` is not 64 or 128.
    HeadDim,
    /// `B` is not positive.
    Batch,
    /// `n_heads` is not positive.
    Heads,
    /// `S` is not positive.
    Seq,
    /// With `lnc_shard`, `S` does not split evenly over the programs.
    SeqNotDivisible,
}

impl RopeRule {
    /// The rule in words.
    pub const fn message(self) -> &'static str {
        match self {
            RopeRule::HeadDim => "RoPE: d_head must be 64 or 128",
            RopeRule::Batch => "RoPE: B must be positive",
            RopeRule::Heads => "RoPE: n_heads must be positive",
            RopeRule::Seq => "RoPE: S must be positive",
            RopeRule::SeqNotDivisible => "RoPE: with lnc_shard, S must be a multiple of the number of programs",
        }
    }
}

/// The first library rule `[d_head, B, n_heads, S]` breaks over `programs` programs.
pub const fn rope_violation(d_head: i64, batch: i64, heads: i64, seq: i64, programs: i64) -> Option<RopeRule> {
    if d_head != HEAD_DIMS[0] && d_head != HEAD_DIMS[1] {
        return Some(RopeRule::HeadDim);
    }
    if batch < 1 {
        return Some(RopeRule::Batch);
    }
    if heads < 1 {
        return Some(RopeRule::Heads);
    }
    if seq < 1 {
        return Some(RopeRule::Seq);
    }
    if programs < 1 || seq % programs != 0 {
        return Some(RopeRule::SeqNotDivisible);
    }
    None
}

/// A `RoPE` shape checked at compile time: `rope_config!(d_head = 128, batch = 2,
/// heads = 8, seq = 512, programs = 2)` is the shape tuple, or a compile error
/// naming the rule it breaks.
///
/// ```
/// let shape = nkilib::rope_config!(d_head = 64, batch = 1, heads = 4, seq = 256, programs = 2);
/// assert_eq!(shape, (64, 1, 4, 256));
/// ```
///
/// ```compile_fail
/// // d_head 96 is not supported.
/// let shape = nkilib::rope_config!(d_head = 96, batch = 1, heads = 4, seq = 256, programs = 1);
/// ```
#[macro_export]
macro_rules! rope_config {
    (d_head = $d:expr, batch = $b:expr, heads = $h:expr, seq = $s:expr, programs = $p:expr) => {{
        const _: () = if let Some(rule) = $crate::embeddings::rope::rope_violation($d, $b, $h, $s, $p) {
            panic!("{}", rule.message());
        };
        ($d, $b, $h, $s)
    }};
}

pub use kernel::*;

/// The kernel with its chunk size.
#[nki_module]
pub mod kernel {
    use nki::prelude::*;

    /// The most elements per partition a chunk's tile holds (16 KiB in float32).
    pub const FREE_TILE: i64 = 4096;

    /// Applies rotary position embedding to `x_in` `[d_head, B, n_heads, S]` with
    /// `cos` and `sin` `[d_head/2, B, S]`, returning a tensor like `x_in`.
    ///
    /// `lnc_shard` splits `S` over the LNC programs; `contiguous_layout` pairs
    /// `x[i]` with `x[i + d_head/2]` (else `x[2i]` with `x[2i+1]`);
    /// `relayout_in_sbuf` is accepted and changes nothing (see the module docs).
    #[nki_kernel]
    pub fn RoPE(
        #[dtypes(float32, bfloat16, float16)] x_in: Hbm,
        #[dtypes(float32, bfloat16, float16)] cos: Hbm,
        #[dtypes(float32, bfloat16, float16)] sin: Hbm,
        #[default(false)] lnc_shard: bool,
        #[default(true)] contiguous_layout: bool,
        #[default(false)] relayout_in_sbuf: bool,
    ) -> Hbm {
        let [d_head, batch, heads, seq] = x_in.shape();
        let half = d_head / 2;
        // The rules of `rope_violation`, checked when the kernel is traced.
        assert!(d_head == 64 || d_head == 128, "RoPE: x_in: d_head must be 64 or 128, got {d_head}");
        assert!(batch >= 1, "RoPE: x_in: B must be positive, got {batch}");
        assert!(heads >= 1, "RoPE: x_in: n_heads must be positive, got {heads}");
        assert!(seq >= 1, "RoPE: x_in: S must be positive, got {seq}");
        let [ch, cb, cs] = cos.shape();
        assert!(
            ch == half && cb == batch && cs == seq,
            "RoPE: cos must be [d_head/2, B, S] = [{half}, {batch}, {seq}], got [{ch}, {cb}, {cs}]"
        );
        let [sh, sb, ss] = sin.shape();
        assert!(
            sh == half && sb == batch && ss == seq,
            "RoPE: sin must be [d_head/2, B, S] = [{half}, {batch}, {seq}], got [{sh}, {sb}, {ss}]"
        );
        assert!(cos.dtype() == sin.dtype(), "RoPE: cos and sin must have the same dtype");
        let grid = lnc_shard && nl::program_ndim() == 1;
        let programs = if grid { nl::num_programs(0) } else { 1 };
        let program = if grid { nl::program_id(0) } else { 0 };
        assert!(seq % programs == 0, "RoPE: x_in: S = {seq} must be a multiple of the {programs} programs with lnc_shard");
        let tile = seq / programs;
        let t0 = tile * program;

        // Chunks of at most FREE_TILE elements per partition: the sequence
        // first, then the heads, then the batches.
        let s_chunk = tile.min(FREE_TILE);
        let h_chunk = heads.min(FREE_TILE / s_chunk);
        let b_chunk = batch.min(FREE_TILE / (s_chunk * h_chunk));
        let x_out = nl::ndarray([d_head, batch, heads, seq], x_in.dtype(), buffer = nl::shared_hbm);
        for bi in 0..batch.div_ceil(b_chunk) {
            let b0 = bi * b_chunk;
            let bb = (batch - b0).min(b_chunk);
            for hi in 0..heads.div_ceil(h_chunk) {
                let h0 = hi * h_chunk;
                let hh = (heads - h0).min(h_chunk);
                for si in 0..tile.div_ceil(s_chunk) {
                    let s0 = t0 + si * s_chunk;
                    let sl = (tile - si * s_chunk).min(s_chunk);
                    let x = x_in[s![.., b0..b0 + bb, h0..h0 + hh, s0..s0 + sl]];
                    let out = x_out[s![.., b0..b0 + bb, h0..h0 + hh, s0..s0 + sl]];
                    let c = cos.reshape([half, batch, 1, seq]).broadcast(2, hh)[s![.., b0..b0 + bb, .., s0..s0 + sl]];
                    let sn = sin.reshape([half, batch, 1, seq]).broadcast(2, hh)[s![.., b0..b0 + bb, .., s0..s0 + sl]];
                    rope_chunk(x, c, sn, out, contiguous_layout);
                }
            }
        }
        x_out
    }

    /// Rotates one chunk: `x` and `out` `[d_head, B_c, heads_c, S_c]` HBM views,
    /// `cos` and `sin` `[d_head/2, B_c, heads_c, S_c]` HBM views (the angles
    /// repeated over the heads).
    #[nki_helper]
    pub fn rope_chunk(x_in: Hbm, cos: Hbm, sin: Hbm, x_out: Hbm, contiguous_layout: bool) {
        let [d_head, bb, hh, sl] = x_in.shape();
        let half = d_head / 2;
        let dt = x_in.dtype();

        // Load, the pairs split into halves (a stride-2 gather for the interleaved layout).
        let x = nl::ndarray([d_head, bb, hh, sl], dt, buffer = nl::sbuf);
        if contiguous_layout {
            nisa::dma_copy(x, x_in);
        } else {
            nisa::dma_copy(x[s![0..half, .., .., ..]], x_in[s![0..d_head;2, .., .., ..]]);
            nisa::dma_copy(x[s![half..d_head, .., .., ..]], x_in[s![1..d_head;2, .., .., ..]]);
        }
        let c = nl::ndarray([half, bb, hh, sl], cos.dtype(), buffer = nl::sbuf);
        nisa::dma_copy(c, cos);
        let sn = nl::ndarray([half, bb, hh, sl], sin.dtype(), buffer = nl::sbuf);
        nisa::dma_copy(sn, sin);

        // Rotate: the odd half first moved to partition 0, where the operands line
        // up; two product tiles reused, the new odd half written over the old one.
        let odd = nl::ndarray([half, bb, hh, sl], dt, buffer = nl::sbuf);
        nisa::tensor_copy(odd, x[s![half..d_head, .., .., ..]]);
        let even_new = nl::ndarray([half, bb, hh, sl], dt, buffer = nl::sbuf);
        let prod = nl::ndarray([half, bb, hh, sl], dt, buffer = nl::sbuf);
        nisa::tensor_tensor(even_new, x[s![0..half, .., .., ..]], c, nl::multiply);
        nisa::tensor_tensor(prod, odd, sn, nl::multiply);
        nisa::tensor_tensor(even_new, even_new, prod, nl::subtract);
        nisa::tensor_tensor(prod, odd, c, nl::multiply);
        nisa::tensor_tensor(odd, x[s![0..half, .., .., ..]], sn, nl::multiply);
        nisa::tensor_tensor(x[s![half..d_head, .., .., ..]], prod, odd, nl::add);

        // Store (a stride-2 scatter for the interleaved layout).
        let odd_new = x[s![half..d_head, .., .., ..]];
        if contiguous_layout {
            nisa::dma_copy(x_out[s![0..half, .., .., ..]], even_new);
            nisa::dma_copy(x_out[s![half..d_head, .., .., ..]], odd_new);
        } else {
            nisa::dma_copy(x_out[s![0..d_head;2, .., .., ..]], even_new);
            nisa::dma_copy(x_out[s![1..d_head;2, .., .., ..]], odd_new);
        }
    }
}
