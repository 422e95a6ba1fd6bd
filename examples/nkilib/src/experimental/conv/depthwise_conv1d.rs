//! The NKI library's experimental `depthwise_conv1d_implicit_gemm`: a
//! depthwise 1-D convolution (one filter per channel) as matrix products over
//! an implicit im2col, never materialising the `[S, Q]` window matrix of a
//! whole tensor.
//!
//! `img_ref` is `[N, C, 1, W]`, `filter_ref` `[C, 1, 1, S]`; the output is
//! `[N, C, 1, Q]` with `Q = (W + pad_l + pad_r - S) / stride_w + 1` and
//! `out[n, c, q] = Σ_s filter[c, s] · x_padded[n, c, q·stride_w + s]` (zeros
//! outside the input). The channels are split evenly over the LNC programs.
//!
//! ```text
//! for each batch n, channel tile (up to C_TILE = 128 channels):
//!     x_padded rows of the tile staged in HBM with their zero pads
//!     filter tiles [S_TILE, channels] (taps on the partitions)
//!     for each channel c:
//!         window tiles w[s_tile][s, q] = x_padded[n, c, s_start + s + q·stride_w]
//!             # one DMA per S tile: overlapping rows, the implicit im2col
//!         for each Q tile (up to Q_TILE = 512 outputs):
//!             psum[1, q] = Σ_s-tiles filter[s_tile][:, c]ᵀ · w[s_tile][:, q]   # nc_matmul
//!             out[n, c, q] = psum                      # rounded to the input dtype
//! ```
//!
//! Taps are tiled by `S_TILE = min(S, 128)` (the contraction on the
//! partitions) and outputs by `Q_TILE = min(Q, 512)` (one PSUM bank of fp32).
//! The library loads the padded windows column by column near the pads; this
//! port writes each channel tile's zero-padded rows to an HBM scratch once and
//! reads every window tile from it with one strided DMA (the same values).
//!
//! The library's rules: `stride_h = 1` (`stride_w` any positive value), no
//! dilation, `batch_group_count = 1`, `feature_group_count = C` (depthwise),
//! zero padding (non-negative); and, which the library documents but does not
//! check, `C` divisible by the LNC programs. `padding`'s height pair, and
//! `in_perm`, `kern_perm` and `out_perm`, are accepted and, as in the library,
//! have no effect.

pub use kernel::*;

/// Why a `depthwise_conv1d_implicit_gemm` call is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DepthwiseRule {
    /// `stride` is not `(1, positive)`.
    Stride,
    /// A dilation other than `(1, 1)`.
    Dilation,
    /// `batch_group_count` is not 1.
    BatchGroups,
    /// `feature_group_count` is not `C`.
    Depthwise,
    /// A negative padding.
    Padding,
    /// The filter is longer than the padded input (no output).
    KernelSize,
    /// `C` is not divisible by the LNC programs.
    ChannelShards,
}

impl DepthwiseRule {
    /// The rule in words.
    pub const fn message(self) -> &'static str {
        match self {
            DepthwiseRule::Stride => "depthwise_conv1d_implicit_gemm: stride must be (1, stride_w) with stride_w >= 1",
            DepthwiseRule::Dilation => "depthwise_conv1d_implicit_gemm: only rhs_dilation = lhs_dilation = (1, 1) is supported",
            DepthwiseRule::BatchGroups => "depthwise_conv1d_implicit_gemm: only batch_group_count = 1 is supported",
            DepthwiseRule::Depthwise => "depthwise_conv1d_implicit_gemm: feature_group_count must equal C (depthwise)",
            DepthwiseRule::Padding => "depthwise_conv1d_implicit_gemm: padding must be non-negative",
            DepthwiseRule::KernelSize => "depthwise_conv1d_implicit_gemm: the kernel size S must be within 1..=W + pad_l + pad_r",
            DepthwiseRule::ChannelShards => "depthwise_conv1d_implicit_gemm: C must be divisible by the LNC programs",
        }
    }
}

/// The sizes and options of one call, for [`depthwise_violation`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DepthwiseShape {
    /// Channels `C`.
    pub c: i64,
    /// Input width `W`.
    pub w: i64,
    /// Kernel size `S`.
    pub s: i64,
    /// `padding[1]`, the width's `(left, right)`.
    pub pad_w: (i64, i64),
    /// `stride`.
    pub stride: (i64, i64),
    /// `rhs_dilation`.
    pub rhs_dilation: (i64, i64),
    /// `lhs_dilation`.
    pub lhs_dilation: (i64, i64),
    /// `feature_group_count`.
    pub feature_group_count: i64,
    /// `batch_group_count`.
    pub batch_group_count: i64,
    /// LNC programs sharing the channels.
    pub programs: i64,
}

/// The first rule a call breaks, or `None`.
pub const fn depthwise_violation(c: DepthwiseShape) -> Option<DepthwiseRule> {
    if c.stride.0 != 1 || c.stride.1 < 1 {
        return Some(DepthwiseRule::Stride);
    }
    if c.lhs_dilation.0 != 1 || c.lhs_dilation.1 != 1 || c.rhs_dilation.0 != 1 || c.rhs_dilation.1 != 1 {
        return Some(DepthwiseRule::Dilation);
    }
    if c.batch_group_count != 1 {
        return Some(DepthwiseRule::BatchGroups);
    }
    if c.feature_group_count != c.c {
        return Some(DepthwiseRule::Depthwise);
    }
    if c.pad_w.0 < 0 || c.pad_w.1 < 0 {
        return Some(DepthwiseRule::Padding);
    }
    if c.s < 1 || c.s > c.w + c.pad_w.0 + c.pad_w.1 {
        return Some(DepthwiseRule::KernelSize);
    }
    if c.programs < 1 || c.c % c.programs != 0 {
        return Some(DepthwiseRule::ChannelShards);
    }
    None
}

/// A call checked at compile time: the [`DepthwiseShape`] of the given sizes
/// (the options defaulting as in the library, `feature_group_count` to `c`,
/// `programs` to 1), or a compile error naming the rule it breaks.
///
/// ```
/// let c = nkilib::depthwise_conv1d_config!(c = 256, w = 512, s = 64, stride = (1, 2), pad_w = (5, 5), programs = 2);
/// assert_eq!(c.stride, (1, 2));
/// ```
///
/// ```compile_fail
/// // Striding the height is not supported.
/// let c = nkilib::depthwise_conv1d_config!(c = 16, w = 512, s = 3, stride = (2, 1));
/// ```
#[macro_export]
macro_rules! depthwise_conv1d_config {
    (c = $c:expr, w = $w:expr, s = $s:expr $(, $field:ident = $value:expr)* $(,)?) => {{
        const CALL: $crate::experimental::conv::depthwise_conv1d::DepthwiseShape =
            $crate::experimental::conv::depthwise_conv1d::DepthwiseShape {
                $($field: $value,)*
                ..$crate::experimental::conv::depthwise_conv1d::DepthwiseShape {
                    c: $c,
                    w: $w,
                    s: $s,
                    pad_w: (0, 0),
                    stride: (1, 1),
                    rhs_dilation: (1, 1),
                    lhs_dilation: (1, 1),
                    feature_group_count: $c,
                    batch_group_count: 1,
                    programs: 1,
                }
            };
        const _: () = if let Some(rule) = $crate::experimental::conv::depthwise_conv1d::depthwise_violation(CALL) {
            panic!("{}", rule.message());
        };
        CALL
    }};
}

/// The kernel with its tile constants and phase helpers.
#[nki::nki_module]
pub mod kernel {
    use nki::prelude::*;

    /// Taps per S tile at most: the contraction runs over the partitions.
    pub const S_TILE_MAX: i64 = 128;
    /// Outputs per Q tile at most: one PSUM bank of fp32.
    pub const Q_TILE_MAX: i64 = 512;
    /// Channels per channel tile at most: the filter tile's free size.
    pub const C_TILE_MAX: i64 = 128;

    /// The tiling of one call and this program's channels.
    #[nki_object]
    pub struct DepthwiseTiling {
        /// Channels `C`.
        pub c: i64,
        /// Input width `W`.
        pub w: i64,
        /// Kernel size `S`.
        pub s: i64,
        /// Left zero padding.
        pub pad_l: i64,
        /// Padded width `W + pad_l + pad_r`.
        pub w_padded: i64,
        /// Output width `Q`.
        pub q: i64,
        /// `stride_w`.
        pub stride_w: i64,
        /// Taps per S tile.
        pub s_tile: i64,
        /// Outputs per Q tile.
        pub q_tile: i64,
        /// Channels per channel tile.
        pub c_tile: i64,
        /// This program's channels.
        pub c_per_shard: i64,
        /// This program's first channel.
        pub c_offset: i64,
    }

    /// The library's checks (see `depthwise_violation`), when traced.
    #[nki_helper]
    fn check_depthwise_inputs(
        img_ref: Hbm,
        filter_ref: Hbm,
        padding: ((i64, i64), (i64, i64)),
        stride: (i64, i64),
        dilations: ((i64, i64), (i64, i64)),
        groups: (i64, i64),
    ) {
        let name = "depthwise_conv1d_implicit_gemm";
        let (img_dims, filter_dims) = (img_ref.ndim(), filter_ref.ndim());
        assert!(img_dims == 4, "{name}: img_ref must be [N, C, 1, W], got {img_dims} dims");
        assert!(filter_dims == 4, "{name}: filter_ref must be [C, 1, 1, S], got {filter_dims} dims");
        let [_, c, _, w] = img_ref.shape();
        let [fc, _, _, s] = filter_ref.shape();
        assert!(fc == c, "{name}: filter_ref has {fc} channels, img_ref {c}");
        let (stride_h, stride_w) = stride;
        assert!(stride_h == 1, "{name}: Only stride_h=1 is supported, got stride_h={stride_h}");
        assert!(stride_w >= 1, "{name}: stride_w must be >= 1, got stride_w={stride_w}");
        let (rhs_dilation, lhs_dilation) = dilations;
        let (l0, l1) = lhs_dilation;
        let (r0, r1) = rhs_dilation;
        assert!(l0 == 1 && l1 == 1, "{name}: Only lhs_dilation=(1,1) is supported, got ({l0}, {l1})");
        assert!(r0 == 1 && r1 == 1, "{name}: Only rhs_dilation=(1,1) is supported, got ({r0}, {r1})");
        let (feature_group_count, batch_group_count) = groups;
        assert!(batch_group_count == 1, "{name}: Only batch_group_count=1 is supported, got {batch_group_count}");
        assert!(
            feature_group_count == c,
            "{name}: Only depthwise convolution is supported (feature_group_count must equal C={c}), got {feature_group_count}"
        );
        let (_, pad_w) = padding;
        let (pad_l, pad_r) = pad_w;
        assert!(pad_l >= 0 && pad_r >= 0, "{name}: padding must be non-negative, got W padding ({pad_l}, {pad_r})");
        assert!(
            s >= 1 && s <= w + pad_l + pad_r,
            "{name}: kernel size S = {s} must be within 1..=W + pad_l + pad_r = {}",
            w + pad_l + pad_r
        );
    }

    /// The tile sizes and this program's share of the channels (an even split).
    #[nki_helper]
    fn depthwise_tiling(img_ref: Hbm, filter_ref: Hbm, pad_w: (i64, i64), stride_w: i64) -> DepthwiseTiling {
        let [_, c, _, w] = img_ref.shape();
        let s = filter_ref.shape()[3];
        let (pad_l, pad_r) = pad_w;
        let w_padded = w + pad_l + pad_r;
        let q = (w_padded - s) / stride_w + 1;
        let grid = nl::program_ndim() == 1;
        let programs = if grid { nl::num_programs(0) } else { 1 };
        let program = if grid { nl::program_id(0) } else { 0 };
        assert!(c % programs == 0, "depthwise_conv1d_implicit_gemm: C = {c} must be divisible by the {programs} LNC programs");
        let c_per_shard = c / programs;
        DepthwiseTiling {
            c,
            w,
            s,
            pad_l,
            w_padded,
            q,
            stride_w,
            s_tile: s.min(S_TILE_MAX),
            q_tile: q.min(Q_TILE_MAX),
            c_tile: c_per_shard.min(C_TILE_MAX),
            c_per_shard,
            c_offset: program * c_per_shard,
        }
    }

    /// The zero-padded input rows of `cs` channels from `c0` of batch `n`,
    /// staged to `x_padded` (`[N·C, W_padded]` HBM) for the window loads.
    #[nki_helper]
    fn stage_padded_rows(t: DepthwiseTiling, img_ref: Hbm, x_padded: Hbm, n: i64, c0: i64, cs: i64) {
        let rows = nl::ndarray([C_TILE_MAX, t.w_padded], img_ref.dtype(), buffer = nl::sbuf);
        if t.w_padded > t.w {
            nisa::memset(rows[s![0..cs, ..]], 0.0);
        }
        let img = img_ref.reshape([img_ref.shape()[0] * t.c, t.w]);
        let r0 = n * t.c + c0;
        nisa::dma_copy(rows[s![0..cs, t.pad_l..t.pad_l + t.w]], img[s![r0..r0 + cs, ..]]);
        nisa::dma_copy(x_padded[s![r0..r0 + cs, ..]], rows[s![0..cs, ..]]);
    }

    /// The filter taps of `cs` channels from `c0`, transposed to
    /// `[S_TILE, num_s_tiles, C_TILE]` (taps on the partitions).
    #[nki_helper]
    fn load_filter_tiles(t: DepthwiseTiling, filter_ref: Hbm, c0: i64, cs: i64) -> Sbuf {
        let num_s_tiles = t.s.div_ceil(t.s_tile);
        let filt = nl::ndarray([t.s_tile, num_s_tiles, C_TILE_MAX], filter_ref.dtype(), buffer = nl::sbuf);
        let taps = filter_ref.reshape([t.c, t.s]).permute([1, 0]);
        for si in 0..num_s_tiles {
            let s0 = si * t.s_tile;
            let ss = (t.s - s0).min(t.s_tile);
            nisa::dma_copy(filt[s![0..ss, si, 0..cs]], taps[s![s0..s0 + ss, c0..c0 + cs]]);
        }
        filt
    }

    /// The window tiles of one padded row (global row `r`):
    /// `win[s, si, q] = x_padded[r, si·S_TILE + s + q·stride_w]`, one strided DMA
    /// per S tile (rows overlapping in HBM).
    #[nki_helper]
    fn load_window_tiles(t: DepthwiseTiling, x_padded: Hbm, r: i64) -> Sbuf {
        let num_s_tiles = t.s.div_ceil(t.s_tile);
        let win = nl::ndarray([t.s_tile, num_s_tiles, t.q], x_padded.dtype(), buffer = nl::sbuf);
        for si in 0..num_s_tiles {
            let s0 = si * t.s_tile;
            let ss = (t.s - s0).min(t.s_tile);
            let windows = x_padded.ap([[1, ss], [t.stride_w, t.q]], offset = r * t.w_padded + s0);
            nisa::dma_copy(win[s![0..ss, si, ..]], windows);
        }
        win
    }

    /// One channel's outputs: per Q tile, the S tiles' products accumulated
    /// in PSUM, rounded to the output dtype and stored to row `r` of `out`.
    #[nki_helper]
    fn convolve_channel(t: DepthwiseTiling, filt: Sbuf, win: Sbuf, ci: i64, out: Hbm, r: i64) {
        let num_s_tiles = t.s.div_ceil(t.s_tile);
        for qi in 0..t.q.div_ceil(t.q_tile) {
            let q0 = qi * t.q_tile;
            let qs = (t.q - q0).min(t.q_tile);
            let acc = nl::ndarray([1, Q_TILE_MAX], nl::float32, buffer = nl::psum);
            for si in 0..num_s_tiles {
                let ss = (t.s - si * t.s_tile).min(t.s_tile);
                let stationary = filt[s![0..ss, si, ci..ci + 1]];
                let moving = win[s![0..ss, si, q0..q0 + qs]];
                nisa::nc_matmul(acc[s![.., 0..qs]], stationary, moving, accumulate = si > 0);
            }
            let res = nl::ndarray([1, Q_TILE_MAX], out.dtype(), buffer = nl::sbuf);
            nisa::tensor_copy(res[s![.., 0..qs]], acc[s![.., 0..qs]]);
            nisa::dma_copy(out[s![r..r + 1, q0..q0 + qs]], res[s![.., 0..qs]]);
        }
    }

    /// Depthwise 1-D convolution of `img_ref` (`[N, C, 1, W]`) with one filter
    /// per channel (`filter_ref`, `[C, 1, 1, S]`): `[N, C, 1, Q]` in the input's
    /// dtype, accumulated in fp32 (see the module docs). `padding` is
    /// `((pad_h_l, pad_h_r), (pad_w_l, pad_w_r))`, zeros, of which only the
    /// width's applies; `stride` `(1, stride_w)`.
    #[nki_kernel]
    pub fn depthwise_conv1d_implicit_gemm(
        #[dtypes(bfloat16, float16, float32)] img_ref: Hbm,
        #[dtypes(bfloat16, float16, float32)] filter_ref: Hbm,
        #[default(((0, 0), (0, 0)))] padding: ((i64, i64), (i64, i64)),
        #[default((1, 1))] stride: (i64, i64),
        #[default((1, 1))] rhs_dilation: (i64, i64),
        #[default((1, 1))] lhs_dilation: (i64, i64),
        #[default(1)] feature_group_count: i64,
        #[default(1)] batch_group_count: i64,
        in_perm: Option<(i64, i64, i64, i64)>,
        kern_perm: Option<(i64, i64, i64, i64)>,
        out_perm: Option<(i64, i64, i64, i64)>,
    ) -> Hbm {
        check_depthwise_inputs(
            img_ref,
            filter_ref,
            padding,
            stride,
            (rhs_dilation, lhs_dilation),
            (feature_group_count, batch_group_count),
        );
        let (_, pad_w) = padding;
        let (_, stride_w) = stride;
        let t: DepthwiseTiling = depthwise_tiling(img_ref, filter_ref, pad_w, stride_w);
        let n = img_ref.shape()[0];
        let output = nl::ndarray([n, t.c, 1, t.q], img_ref.dtype(), buffer = nl::shared_hbm);
        let out = output.reshape([n * t.c, t.q]);
        let x_padded = nl::ndarray([n * t.c, t.w_padded], img_ref.dtype(), buffer = nl::hbm);
        for b in 0..n {
            for cti in 0..t.c_per_shard.div_ceil(t.c_tile) {
                let c0 = t.c_offset + cti * t.c_tile;
                let cs = (t.c_per_shard - cti * t.c_tile).min(t.c_tile);
                stage_padded_rows(t, img_ref, x_padded, b, c0, cs);
                let filt = load_filter_tiles(t, filter_ref, c0, cs);
                for ci in 0..cs {
                    let r = b * t.c + c0 + ci;
                    let win = load_window_tiles(t, x_padded, r);
                    convolve_channel(t, filt, win, ci, out, r);
                }
            }
        }
        output
    }
}
