//! The NKI library's `rope_hf`: rotary position embedding of query and key
//! tensors in the HuggingFace layout `[batch, heads, seq, head_dim]`.
//!
//! With `h = head_dim / 2`, each row `x` of a head is rotated half against
//! half: `out[i] = x[i]·cos[i] − x[i+h]·sin[i]` and `out[i+h] = x[i+h]·cos[i+h] +
//! x[i]·sin[i+h]` for `i < h` (HuggingFace's `x·cos + rotate_half(x)·sin`).
//! `backward` applies the transposed rotation, the gradient of the forward
//! one: `out[i] = x[i]·cos[i] + x[i+h]·sin[i+h]` and `out[i+h] = x[i+h]·cos[i+h]
//! − x[i]·sin[i]`. The angles are `cos` and `sin` `[(batch,) seq', head_dim]`,
//! or one packed `rope_cache` `[(batch,) seq', 2·head_dim]` holding cos in its
//! first half and sin in its second; without the batch dim every batch reads
//! the same angles, and `seq' >= seq` (the first `seq` positions are used).
//!
//! ```text
//! seq is split evenly over the LNC programs; each takes seq/programs positions
//! for b in batch:
//!     for each group of up to NUM_COALESCE_TILES tiles of SEQ_TILE positions:
//!         cos, sin = load [SEQ_TILE, tiles, head_dim]   # position on the partitions
//!         for x in (q, k):                              (apply_rope_all_heads)
//!             for each head:
//!                 t = load x[b, head, group]            # [SEQ_TILE, tiles, head_dim]
//!                 store rotate(t, cos, sin)             (apply_rope_single)
//! ```
//!
//! A tile puts `SEQ_TILE` consecutive positions on the partitions and up to
//! `NUM_COALESCE_TILES` such runs side by side in the free dims, so one DMA
//! moves `NUM_COALESCE_TILES · SEQ_TILE` positions of a head (the loads and
//! stores are access patterns over the row-major HBM tensors). The products
//! and the rotated rows are rounded to the dtype of `q` as in the library
//! (its intermediate tiles have that dtype); the angles are loaded into tiles
//! of that dtype too.
//!
//! The kernel takes the library's signature `q, k, q_out, k_out, cos=None,
//! sin=None, rope_cache=None, backward=False`, writes `q_out` and `k_out`
//! (HBM tensors the caller allocates) and returns them. Its rules are
//! [`rope_hf_violation`]'s: 4-D `q` and `k` of one batch, sequence and head
//! size (even), exactly one of `(cos, sin)` and `rope_cache`, angle tensors of
//! the documented shapes, and `seq` a multiple of `128 · programs`.

use nki::prelude::*;

pub use kernel::*;

/// The shapes `rope_hf` is called with, for [`rope_hf_violation`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RopeHfShape {
    /// `q` `[batch, q_heads, seq, head_dim]`.
    pub q: [i64; 4],
    /// `k` `[batch, k_heads, seq, head_dim]`.
    pub k: [i64; 4],
    /// Dims of the angle tensor (`cos`, or `rope_cache` when packed): 2 or 3.
    pub rope_ndim: i64,
    /// The angle tensor's shape, right-aligned (`[1, seq', dim]` for 2 dims).
    pub rope: [i64; 3],
    /// Whether the angles come packed in `rope_cache`.
    pub packed: bool,
    /// Whether `cos` and `sin` (both) are given.
    pub cos_sin: bool,
    /// Whether `sin` has `cos`'s shape.
    pub sin_like_cos: bool,
    /// LNC programs the sequence is split over.
    pub programs: i64,
}

/// Why a `rope_hf` call is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeHfRule {
    /// `q` and `k` must share batch, sequence and head size.
    QkMismatch,
    /// `head_dim` must be even and positive (the rotation pairs its halves).
    HeadDim,
    /// Exactly one of `rope_cache` and `(cos, sin)` must be given.
    AngleSource,
    /// `cos` and `sin` must have one shape.
    SinShape,
    /// The angles' last dim must be `head_dim` (`2·head_dim` packed).
    AngleDim,
    /// The angles must be `[seq', dim]` or `[batch, seq', dim]`.
    AngleBatch,
    /// The angles must cover the sequence (`seq' >= seq`).
    AngleSeq,
    /// `seq` must be a positive multiple of `128 · programs`.
    SeqTiles,
}

impl RopeHfRule {
    /// The rule in words.
    pub const fn message(self) -> &'static str {
        match self {
            RopeHfRule::QkMismatch => "rope_hf: q and k must share batch, seq and head_dim",
            RopeHfRule::HeadDim => "rope_hf: head_dim must be even and positive",
            RopeHfRule::AngleSource => "rope_hf: give either rope_cache or both cos and sin, not both",
            RopeHfRule::SinShape => "rope_hf: sin must have the shape of cos",
            RopeHfRule::AngleDim => "rope_hf: the angles' last dim must be head_dim (2 * head_dim for rope_cache)",
            RopeHfRule::AngleBatch => "rope_hf: the angles must be [seq, dim] or [batch, seq, dim]",
            RopeHfRule::AngleSeq => "rope_hf: the angles must cover seq positions",
            RopeHfRule::SeqTiles => "rope_hf: seq must be a positive multiple of 128 * programs",
        }
    }
}

/// The first rule a `rope_hf` call breaks.
pub const fn rope_hf_violation(c: RopeHfShape) -> Option<RopeHfRule> {
    let ([b, _, s, d], [kb, _, ks, kd]) = (c.q, c.k);
    if b != kb || s != ks || d != kd {
        return Some(RopeHfRule::QkMismatch);
    }
    if d < 2 || d % 2 != 0 {
        return Some(RopeHfRule::HeadDim);
    }
    if c.packed == c.cos_sin {
        return Some(RopeHfRule::AngleSource);
    }
    if c.cos_sin && !c.sin_like_cos {
        return Some(RopeHfRule::SinShape);
    }
    let [rb, rs, rd] = c.rope;
    if rd != if c.packed { 2 * d } else { d } {
        return Some(RopeHfRule::AngleDim);
    }
    if !(c.rope_ndim == 2 || (c.rope_ndim == 3 && rb == b)) {
        return Some(RopeHfRule::AngleBatch);
    }
    if rs < s {
        return Some(RopeHfRule::AngleSeq);
    }
    if c.programs < 1 || s < 1 || s % (kernel::SEQ_TILE * c.programs) != 0 {
        return Some(RopeHfRule::SeqTiles);
    }
    None
}

/// A `rope_hf` call checked at compile time: `rope_hf_config!(q = [1, 32, 256,
/// 128], k = [1, 8, 256, 128], rope = [256, 256], packed = true, programs = 2)`
/// is its [`RopeHfShape`], or a compile error naming the rule it breaks.
///
/// ```
/// let c = nkilib::rope_hf_config!(q = [1, 32, 256, 128], k = [1, 8, 256, 128], rope = [1, 256, 128], packed = false, programs = 2);
/// assert_eq!(c.rope, [1, 256, 128]);
/// ```
///
/// ```compile_fail
/// // 64 positions are less than one tile on each of two programs.
/// let c = nkilib::rope_hf_config!(q = [1, 32, 64, 128], k = [1, 8, 64, 128], rope = [64, 128], packed = false, programs = 2);
/// ```
#[macro_export]
macro_rules! rope_hf_config {
    (q = $q:expr, k = $k:expr, rope = [$($r:expr),+], packed = $packed:expr, programs = $p:expr) => {{
        const SHAPE: $crate::embeddings::rope_hf::RopeHfShape = {
            let dims: &[i64] = &[$($r),+];
            let rope = if dims.len() == 2 { [1, dims[0], dims[1]] } else { [dims[0], dims[1], dims[2]] };
            $crate::embeddings::rope_hf::RopeHfShape {
                q: $q,
                k: $k,
                rope_ndim: dims.len() as i64,
                rope,
                packed: $packed,
                cos_sin: !$packed,
                sin_like_cos: true,
                programs: $p,
            }
        };
        const _: () = if let Some(rule) = $crate::embeddings::rope_hf::rope_hf_violation(SHAPE) {
            panic!("{}", rule.message());
        };
        SHAPE
    }};
}

/// The kernel, its tile constants and phase helpers.
#[nki_module]
pub mod kernel {
    use nki::prelude::*;

    /// Positions per tile: one per partition.
    pub const SEQ_TILE: i64 = 128;
    /// Tiles of positions moved by one DMA (side by side in the free dims).
    pub const NUM_COALESCE_TILES: i64 = 8;

    /// The angles of one group of positions, shared by every head of `q` and `k`.
    #[nki_object]
    pub struct RopeHfAngles {
        /// `cos` `[SEQ_TILE, tiles, head_dim]`, in `q`'s dtype.
        pub cos: Tensor,
        /// `sin` `[SEQ_TILE, tiles, head_dim]`, in `q`'s dtype.
        pub sin: Tensor,
        /// The batch the group belongs to.
        pub batch_id: i64,
        /// The group's first position.
        pub seq_start: i64,
        /// Whether the transposed (backward) rotation is applied.
        pub backward: bool,
    }

    /// The access pattern of `tiles` runs of `SEQ_TILE` rows of a row-major
    /// tensor of `row` elements per row, starting at element `offset`: row
    /// `t·SEQ_TILE + p` at partition `p`, slot `t`, its first `cols` elements.
    #[nki_helper]
    pub fn seq_tiles(x: Hbm, row: i64, tiles: i64, cols: i64, offset: i64) -> Hbm {
        x.ap([[row, SEQ_TILE], [SEQ_TILE * row, tiles], [1, cols]], offset = offset)
    }

    /// `x_tile` `[SEQ_TILE, tiles, head_dim]` rotated by the angles: `x·cos`,
    /// then the half products added to or subtracted from each half (see the
    /// module docs for the two directions).
    #[nki_helper]
    pub fn apply_rope_single(x_tile: Sbuf, angles: RopeHfAngles) -> Sbuf {
        let [p, tiles, d] = x_tile.shape();
        let h = d / 2;
        let dt = x_tile.dtype();
        let result = nl::ndarray([p, tiles, d], dt, buffer = nl::sbuf);
        let lo_term = nl::ndarray([p, tiles, h], dt, buffer = nl::sbuf);
        let hi_term = nl::ndarray([p, tiles, h], dt, buffer = nl::sbuf);
        let (x_lo, x_hi) = (x_tile[s![.., .., 0..h]], x_tile[s![.., .., h..d]]);
        let (sin_lo, sin_hi) = (angles.sin[s![.., .., 0..h]], angles.sin[s![.., .., h..d]]);
        let (out_lo, out_hi) = (result[s![.., .., 0..h]], result[s![.., .., h..d]]);
        nisa::tensor_tensor(result, x_tile, angles.cos, nl::multiply);
        if angles.backward {
            nisa::tensor_tensor(lo_term, x_hi, sin_hi, nl::multiply);
            nisa::tensor_tensor(out_lo, out_lo, lo_term, nl::add);
            nisa::tensor_tensor(hi_term, x_lo, sin_lo, nl::multiply);
            nisa::tensor_tensor(out_hi, out_hi, hi_term, nl::subtract);
        } else {
            nisa::tensor_tensor(lo_term, x_hi, sin_lo, nl::multiply);
            nisa::tensor_tensor(out_lo, out_lo, lo_term, nl::subtract);
            nisa::tensor_tensor(hi_term, x_lo, sin_hi, nl::multiply);
            nisa::tensor_tensor(out_hi, out_hi, hi_term, nl::add);
        }
        result
    }

    /// Every head of `x` `[batch, heads, seq, head_dim]` at the angles' batch
    /// and positions: load, rotate, store into `x_out`.
    #[nki_helper]
    pub fn apply_rope_all_heads(x: Hbm, x_out: Hbm, angles: RopeHfAngles) {
        let [_, heads, seq, d] = x.shape();
        let tiles = angles.cos.shape()[1];
        for head_id in nl::sequential_range(heads) {
            let offset = ((angles.batch_id * heads + head_id) * seq + angles.seq_start) * d;
            let x_tile = nl::ndarray([SEQ_TILE, tiles, d], x.dtype(), buffer = nl::sbuf);
            nisa::dma_copy(x_tile, seq_tiles(x, d, tiles, d, offset));
            let rotated = apply_rope_single(x_tile, angles);
            nisa::dma_copy(seq_tiles(x_out, d, tiles, d, offset), rotated);
        }
    }

    /// Rotary embedding of `q` and `k` `[batch, heads, seq, head_dim]` into
    /// `q_out` and `k_out`, which it returns; the angles are `cos` and `sin`
    /// `[(batch,) seq', head_dim]` or `rope_cache` `[(batch,) seq',
    /// 2·head_dim]` (cos then sin). `backward` applies the gradient's
    /// (transposed) rotation.
    #[nki_kernel]
    pub fn rope_hf(
        #[dtypes(float32, bfloat16, float16)] q: Hbm,
        #[dtypes(float32, bfloat16, float16)] k: Hbm,
        #[dtypes(float32, bfloat16, float16)] q_out: Hbm,
        #[dtypes(float32, bfloat16, float16)] k_out: Hbm,
        #[dtypes(float32, bfloat16, float16)] cos: Option<Hbm>,
        #[dtypes(float32, bfloat16, float16)] sin: Option<Hbm>,
        #[dtypes(float32, bfloat16, float16)] rope_cache: Option<Hbm>,
        #[default(false)] backward: bool,
    ) -> (Hbm, Hbm) {
        assert!(
            q.ndim() == 4 && k.ndim() == 4,
            "rope_hf: q and k must be [batch, heads, seq, head_dim], got {} and {} dims",
            q.ndim(),
            k.ndim()
        );
        let [batch, _, seq, d] = q.shape();
        let [kb, _, ks, kd] = k.shape();
        let programs = if nl::program_ndim() == 1 { nl::num_programs(0) } else { 1 };
        let program = if nl::program_ndim() == 1 { nl::program_id(0) } else { 0 };
        // The rules of `rope_hf_violation`, checked when the kernel is traced.
        assert!(kb == batch && ks == seq && kd == d, "rope_hf: k must share q's batch, seq and head_dim ({batch}, {seq}, {d})");
        assert!(d >= 2 && d % 2 == 0, "rope_hf: q: head_dim must be even and positive, got {d}");
        assert!(q_out.shape() == q.shape() && k_out.shape() == k.shape(), "rope_hf: q_out and k_out must have the shapes of q and k");
        let packed = rope_cache.is_some();
        assert!(packed != (cos.is_some() && sin.is_some()), "rope_hf: give either rope_cache or both cos and sin, not both");
        assert!(packed || cos.is_some() == sin.is_some(), "rope_hf: cos and sin must be given together");
        // `cos` carries the angles' shape unless they are packed.
        let rope = rope_cache.unwrap_or(cos.unwrap_or(q));
        let sin_src = rope_cache.unwrap_or(sin.unwrap_or(q));
        assert!(packed || sin_src.shape() == rope.shape(), "rope_hf: sin must have the shape of cos");
        let rope_dim = if packed { 2 * d } else { d };
        let rope_shape = rope.shape();
        let rank = rope.ndim();
        assert!(rope_shape[rank - 1] == rope_dim, "rope_hf: the angles' last dim must be {rope_dim}, got {rope_shape}");
        assert!(
            rank == 2 || (rank == 3 && rope_shape[0] == batch),
            "rope_hf: the angles must be [seq, dim] or [{batch}, seq, dim], got {rope_shape}"
        );
        let rope_seq = rope_shape[rank - 2];
        assert!(rope_seq >= seq, "rope_hf: the angles cover {rope_seq} positions, fewer than seq = {seq}");
        assert!(seq % (SEQ_TILE * programs) == 0, "rope_hf: q: seq = {seq} must be a multiple of 128 * {programs} programs");

        let seq_per_shard = seq / programs;
        let n_tiles = seq_per_shard / SEQ_TILE;
        let sin_col0 = if packed { d } else { 0 };
        for batch_id in nl::sequential_range(batch) {
            let rope_base = if rank == 3 { batch_id * rope_seq * rope_dim } else { 0 };
            for group in nl::sequential_range(n_tiles.div_ceil(NUM_COALESCE_TILES)) {
                let tiles = (n_tiles - group * NUM_COALESCE_TILES).min(NUM_COALESCE_TILES);
                let seq_start = program * seq_per_shard + group * NUM_COALESCE_TILES * SEQ_TILE;
                let row0 = rope_base + seq_start * rope_dim;
                let cos_tile = nl::ndarray([SEQ_TILE, tiles, d], q.dtype(), buffer = nl::sbuf);
                nisa::dma_copy(cos_tile, seq_tiles(rope, rope_dim, tiles, d, row0));
                let sin_tile = nl::ndarray([SEQ_TILE, tiles, d], q.dtype(), buffer = nl::sbuf);
                nisa::dma_copy(sin_tile, seq_tiles(sin_src, rope_dim, tiles, d, row0 + sin_col0));
                let angles = RopeHfAngles { cos: cos_tile, sin: sin_tile, batch_id, seq_start, backward };
                apply_rope_all_heads(q, q_out, angles);
                apply_rope_all_heads(k, k_out, angles);
            }
        }
        (q_out, k_out)
    }
}
