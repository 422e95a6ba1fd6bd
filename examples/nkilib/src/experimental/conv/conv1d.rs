//! The NKI library's experimental `conv1d`: a dense 1-D convolution
//! (`[B, C_in, L]` input, `[K, C_in, C_out]` filters) on the Tensor Engine,
//! several filter taps stacked on the partitions of one matmul.
//!
//! `L_out = (L + pad_left + pad_right - dilation·(K - 1) - 1) / stride + 1` and
//! `y[b, o, l] = act(bias[o] + Σ_k Σ_i filters[k, i, o] · x[b, i, l·stride + k·dilation - pad_left])`,
//! zeros outside the input; `bias` and `activation_fn` are optional, the
//! output is in the input's dtype. With `lnc_shard` the LNC programs split
//! `C_out` (`ceil(C_out / programs)` channels each, the last program the rest).
//!
//! ```text
//! for each C_out group (up to NUM_PSUM_BANKS tiles of P_MAX channels):
//!     bias tiles (fp32) and stacked filter tiles of the group      (load_bias_and_filters_for_c_out_group)
//!     for each batch b, L_out tile (up to F_MAX outputs):         (conv1d_lout_tile)
//!         for each C_in tile (up to P_MAX channels):
//!             window = x[b, C_in tile, the inputs the tile reads]  (load_input_window_to_sbuf)
//!             stacked[k_outer] = K_REP taps' strided views of the window,
//!                 tap j on partitions j·partition_stride ..      (scatter_input_to_stacked)
//!             psum[t] += filters_stacked[t][C_in tile][k_outer]ᵀ · stacked[k_outer]
//!                 for every k_outer, every C_out tile t       (conv1d_matmul, fp32 PSUM)
//!         result = act(psum + bias) in the input dtype      (apply_bias_activation_and_copy)
//!         y[b, C_out tile, L_out tile] = result
//! ```
//!
//! The replication: a C_in tile of at most 32 channels stacks
//! `K_REP = min(K, 4)` taps 32 partitions apart, one of at most 64 stacks
//! `min(K, 2)` taps 64 apart, a larger one takes one tap per matmul; the
//! partitions between a tile's channels and the next tap are zero in both
//! operands. Taps outside the input (the padding) are zeros of the stacked
//! input. With a bias the PSUM sum is added to the fp32 bias and rounded to the
//! input dtype before the activation (which rounds again).
//!
//! The library sizes its C_out groups and double buffering from the SBUF
//! budget; the port takes up to `NUM_PSUM_BANKS` tiles per group (the same
//! products in the same order) and leaves buffer placement to the allocator.
//! `Swish` is the activation table's `gelu_apprx_sigmoid`, as in the library's
//! kernel (its torch reference applies SiLU instead).
//!
//! The library's rules: `stride >= 1`, `dilation >= 1`, non-negative padding,
//! matching C_in and dtypes; and, which it leaves to the hardware, at least one
//! output (the dilated filter no longer than the padded input).

pub use kernel::*;

/// Why a `conv1d` call is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Conv1dRule {
    /// `stride` below 1.
    Stride,
    /// `dilation` below 1.
    Dilation,
    /// A negative padding.
    Padding,
    /// The filters' C_in is not the input's.
    Channels,
    /// No output: `K < 1` or the dilated filter longer than the padded input.
    OutputLength,
}

impl Conv1dRule {
    /// The rule in words.
    pub const fn message(self) -> &'static str {
        match self {
            Conv1dRule::Stride => "conv1d: stride must be >= 1",
            Conv1dRule::Dilation => "conv1d: dilation must be >= 1",
            Conv1dRule::Padding => "conv1d: padding must be non-negative",
            Conv1dRule::Channels => "conv1d: the filters' input channels must match x_in's",
            Conv1dRule::OutputLength => "conv1d: K must be >= 1 and dilation * (K - 1) + 1 at most L + pad_left + pad_right",
        }
    }
}

/// The sizes and options of one call, for [`conv1d_violation`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv1dShape {
    /// Input channels `C_in` of `x_in`.
    pub c_in: i64,
    /// Input channels of `filters` (its second dimension).
    pub filter_c_in: i64,
    /// Input length `L`.
    pub l: i64,
    /// Kernel size `K`.
    pub k: i64,
    /// `stride`.
    pub stride: i64,
    /// `padding`, `(left, right)`.
    pub padding: (i64, i64),
    /// `dilation`.
    pub dilation: i64,
}

/// The first rule a call breaks, or `None`.
pub const fn conv1d_violation(c: Conv1dShape) -> Option<Conv1dRule> {
    if c.stride < 1 {
        return Some(Conv1dRule::Stride);
    }
    if c.dilation < 1 {
        return Some(Conv1dRule::Dilation);
    }
    if c.padding.0 < 0 || c.padding.1 < 0 {
        return Some(Conv1dRule::Padding);
    }
    if c.filter_c_in != c.c_in {
        return Some(Conv1dRule::Channels);
    }
    if c.k < 1 || c.dilation * (c.k - 1) + 1 > c.l + c.padding.0 + c.padding.1 {
        return Some(Conv1dRule::OutputLength);
    }
    None
}

/// A call checked at compile time: the [`Conv1dShape`] of the given sizes
/// (`filter_c_in` defaulting to `c_in`, the options as in the library), or a
/// compile error naming the rule it breaks.
///
/// ```
/// let c = nkilib::conv1d_config!(c_in = 80, l = 1500, k = 3, padding = (1, 1));
/// assert_eq!(c.padding, (1, 1));
/// ```
///
/// ```compile_fail
/// // A dilation of 0 is refused.
/// let c = nkilib::conv1d_config!(c_in = 32, l = 50, k = 3, dilation = 0);
/// ```
#[macro_export]
macro_rules! conv1d_config {
    (c_in = $c:expr, l = $l:expr, k = $k:expr $(, $field:ident = $value:expr)* $(,)?) => {{
        const CALL: $crate::experimental::conv::conv1d::Conv1dShape = $crate::experimental::conv::conv1d::Conv1dShape {
            $($field: $value,)*
            ..$crate::experimental::conv::conv1d::Conv1dShape {
                c_in: $c,
                filter_c_in: $c,
                l: $l,
                k: $k,
                stride: 1,
                padding: (0, 0),
                dilation: 1,
            }
        };
        const _: () = if let Some(rule) = $crate::experimental::conv::conv1d::conv1d_violation(CALL) {
            panic!("{}", rule.message());
        };
        CALL
    }};
}

/// The kernel with its tile constants, configuration bundles and phase helpers.
#[nki::nki_module]
pub mod kernel {
    pub use crate::utils::common_types::ActFnType;
    use crate::utils::kernel_helpers::apply_activation;
    use nki::prelude::*;

    /// Channels per C_in or C_out tile at most: the partitions.
    pub const P_MAX: i64 = nl::tile_size::pmax;
    /// Outputs per L_out tile at most: one PSUM bank of fp32.
    pub const F_MAX: i64 = nl::tile_size::psum_fmax;
    /// Partitions between stacked taps when a C_in tile has at most 32 channels.
    pub const PARTITION_STRIDE_32: i64 = 32;
    /// Partitions between stacked taps when a C_in tile has at most 64 channels.
    pub const PARTITION_STRIDE_64: i64 = 64;
    /// Taps stacked per matmul at a stride of 32 partitions.
    pub const MAX_K_REP_AT_32: i64 = 4;
    /// Taps stacked per matmul at a stride of 64 partitions.
    pub const MAX_K_REP_AT_64: i64 = 2;
    /// PSUM banks: C_out tiles accumulated at once (a C_out group).
    pub const NUM_PSUM_BANKS: i64 = 8;

    /// The call's options and sizes.
    #[nki_object]
    pub struct Conv1dConfig {
        /// `stride`.
        pub stride: i64,
        /// Left zero padding.
        pub pad_left: i64,
        /// Right zero padding.
        pub pad_right: i64,
        /// `dilation`.
        pub dilation: i64,
        /// Whether a bias is added.
        pub has_bias: bool,
        /// Whether an activation is applied.
        pub has_activation: bool,
        /// Whether the LNC programs split C_out.
        pub lnc_shard: bool,
        /// Batch `B`.
        pub b: i64,
        /// Input channels `C_in`.
        pub c_in: i64,
        /// Output channels `C_out`.
        pub c_out: i64,
        /// Input length `L`.
        pub l: i64,
        /// Kernel size `K`.
        pub k: i64,
        /// Output length `L_out`.
        pub l_out: i64,
    }

    /// The tiling of one call and this program's C_out range.
    #[nki_object]
    pub struct Conv1dTileConfig {
        /// Outputs per L_out tile.
        pub l_tile: i64,
        /// Channels of the largest C_in tile.
        pub c_in_tile_size_max: i64,
        /// C_in tiles.
        pub c_in_tile_count: i64,
        /// This program's C_out tiles.
        pub c_out_tile_count: i64,
        /// Stacked matmuls per C_in tile at most (those of the largest C_in tile).
        pub k_outer_tile_count: i64,
        /// This program's first output channel.
        pub c_out_start: i64,
        /// One past this program's last output channel.
        pub c_out_end: i64,
        /// C_out tiles accumulated together (a C_out group).
        pub c_out_group_size: i64,
        /// Inputs one L_out tile reads at most.
        pub window_size_max: i64,
    }

    /// One L_out tile `[l_start, l_end)` and the inputs `[valid_start,
    /// valid_end)` it reads (the window without its padding).
    #[nki_object]
    pub struct Conv1dWindow {
        /// First output of the tile.
        pub l_start: i64,
        /// One past the last output.
        pub l_end: i64,
        /// First input read.
        pub valid_start: i64,
        /// One past the last input read.
        pub valid_end: i64,
    }

    /// `(K_REP, partition_stride)` of a C_in tile of `c_in_tile_size` channels:
    /// taps per stacked matmul and partitions between them.
    #[nki_helper]
    fn get_k_replication_params(c_in_tile_size: i64, k: i64) -> (i64, i64) {
        if c_in_tile_size <= PARTITION_STRIDE_32 {
            (k.min(MAX_K_REP_AT_32), PARTITION_STRIDE_32)
        } else if c_in_tile_size <= PARTITION_STRIDE_64 {
            (k.min(MAX_K_REP_AT_64), PARTITION_STRIDE_64)
        } else {
            (1, c_in_tile_size)
        }
    }

    /// The library's checks (see `conv1d_violation`) and the call's sizes.
    #[nki_helper]
    fn build_conv1d_config(
        x_in: Hbm,
        filters: Hbm,
        bias: Option<Hbm>,
        stride: i64,
        padding: (i64, i64),
        dilation: i64,
        has_activation: bool,
        lnc_shard: bool,
    ) -> Conv1dConfig {
        let (x_dims, f_dims) = (x_in.ndim(), filters.ndim());
        assert!(x_dims == 3, "conv1d: x_in must be [B, C_in, L], got {x_dims} dims");
        assert!(f_dims == 3, "conv1d: filters must be [K, C_in, C_out], got {f_dims} dims");
        let [b, c_in, l] = x_in.shape();
        let [k, c_in_filter, c_out] = filters.shape();
        let (pad_left, pad_right) = padding;
        assert!(dilation >= 1, "conv1d: Dilation must be >= 1, got dilation={dilation}");
        assert!(stride >= 1, "conv1d: Stride must be >= 1, got stride={stride}");
        assert!(pad_left >= 0 && pad_right >= 0, "conv1d: Padding must be non-negative, got (pad_left={pad_left}, pad_right={pad_right})");
        assert!(c_in == c_in_filter, "conv1d: Input channels must match filter channels, got C_in={c_in} vs C_in_filter={c_in_filter}");
        assert!(x_in.dtype() == filters.dtype(), "conv1d: x_in.dtype must match filters.dtype");
        let mut has_bias = false;
        if let Some(bv) = bias {
            let bias_dims = bv.ndim();
            assert!(bias_dims == 1 && bv.shape()[0] == c_out, "conv1d: bias must be [C_out]");
            assert!(x_in.dtype() == bv.dtype(), "conv1d: x_in.dtype must match bias.dtype");
            has_bias = true;
        }
        let span = dilation * (k - 1) + 1;
        assert!(
            k >= 1 && span <= l + pad_left + pad_right,
            "conv1d: K = {k} with dilation {dilation} spans {span} inputs, more than L + pad_left + pad_right = {}",
            l + pad_left + pad_right
        );
        Conv1dConfig {
            stride,
            pad_left,
            pad_right,
            dilation,
            has_bias,
            has_activation,
            lnc_shard,
            b,
            c_in,
            c_out,
            l,
            k,
            l_out: (l + pad_left + pad_right - span) / stride + 1,
        }
    }

    /// The tile sizes, this program's C_out range (`ceil(C_out / programs)`
    /// channels each with `lnc_shard`) and the C_out group size.
    #[nki_helper]
    fn build_tile_config(cfg: Conv1dConfig) -> Conv1dTileConfig {
        let grid = nl::program_ndim() == 1;
        let n_prgs = if cfg.lnc_shard && grid { nl::num_programs(0) } else { 1 };
        let prg_id = if cfg.lnc_shard && grid { nl::program_id(0) } else { 0 };
        let c_out_per_nc = cfg.c_out.div_ceil(n_prgs);
        let c_out_start = c_out_per_nc * prg_id;
        let c_out_end = (c_out_start + c_out_per_nc).min(cfg.c_out);
        let c_out_local = (c_out_end - c_out_start).max(0);
        let l_tile = cfg.l_out.min(F_MAX);
        let c_in_tile_size_max = cfg.c_in.min(P_MAX);
        let (k_rep_max, _): (i64, i64) = get_k_replication_params(c_in_tile_size_max, cfg.k);
        let c_out_tile_count = c_out_local.div_ceil(P_MAX);
        Conv1dTileConfig {
            l_tile,
            c_in_tile_size_max,
            c_in_tile_count: cfg.c_in.div_ceil(P_MAX),
            c_out_tile_count,
            k_outer_tile_count: cfg.k.div_ceil(k_rep_max),
            c_out_start,
            c_out_end: c_out_start + c_out_local,
            c_out_group_size: c_out_tile_count.max(1).min(NUM_PSUM_BANKS),
            window_size_max: (l_tile - 1) * cfg.stride + (cfg.k - 1) * cfg.dilation + 1,
        }
    }

    /// The K-replicated filters of one C_out tile and C_in tile into
    /// `filters_sb[:, tile, c_in_tile, k_outer, :cos]`: tap `j` of a stacked
    /// matmul on partitions `j·partition_stride ..`, zeros between.
    #[nki_helper]
    fn load_filters_to_sbuf(filters: Hbm, filters_sb: Sbuf, cfg: Conv1dConfig, tile: i64, c_in_tile: i64, c_out0: i64, cos: i64) {
        let c_in_start = c_in_tile * P_MAX;
        let cis = (cfg.c_in - c_in_start).min(P_MAX);
        let (k_rep, partition_stride): (i64, i64) = get_k_replication_params(cis, cfg.k);
        for k_outer in 0..cfg.k.div_ceil(k_rep) {
            let k_start = k_outer * k_rep;
            let k_actual = (cfg.k - k_start).min(k_rep);
            let stacked = filters_sb[s![0..partition_stride * k_actual, tile, c_in_tile, k_outer, 0..cos]];
            if partition_stride > cis {
                nisa::memset(stacked, 0.0);
            }
            for j in 0..k_actual {
                let p0 = j * partition_stride;
                nisa::dma_copy(
                    filters_sb[s![p0..p0 + cis, tile, c_in_tile, k_outer, 0..cos]],
                    filters[s![k_start + j, c_in_start..c_in_start + cis, c_out0..c_out0 + cos]],
                );
            }
        }
    }

    /// The group's bias tiles (fp32, `bias_sb[:, tile]`) and stacked filters
    /// for every C_in tile, C_out tiles of `P_MAX` channels from `group_start`.
    #[nki_helper]
    fn load_bias_and_filters_for_c_out_group(
        filters: Hbm,
        bias: Option<Hbm>,
        filters_sb: Sbuf,
        bias_sb: Sbuf,
        cfg: Conv1dConfig,
        tc: Conv1dTileConfig,
        group_start: i64,
        group_tiles: i64,
    ) {
        for tile in 0..group_tiles {
            let c_out0 = group_start + tile * P_MAX;
            let cos = (tc.c_out_end - c_out0).min(P_MAX);
            if let Some(bv) = bias {
                // fp32: the bias is a per-partition scalar operand.
                let bias_col = bv.reshape([cfg.c_out, 1]);
                nisa::dma_copy(bias_sb[s![0..cos, tile..tile + 1]], bias_col[s![c_out0..c_out0 + cos, ..]]);
            }
            for c_in_tile in 0..tc.c_in_tile_count {
                load_filters_to_sbuf(filters, filters_sb, cfg, tile, c_in_tile, c_out0, cos);
            }
        }
    }

    /// The inputs of batch `b`'s C_in tile that the L_out tile `[l_start,
    /// l_end)` reads, the padding left out, into `window_sb[:cis, :]`; the
    /// window's valid range (empty when the tile reads only padding).
    #[nki_helper]
    fn load_input_window_to_sbuf(
        x_in: Hbm,
        window_sb: Sbuf,
        cfg: Conv1dConfig,
        b: i64,
        c_in_start: i64,
        l_start: i64,
        l_end: i64,
    ) -> Conv1dWindow {
        let cis = (cfg.c_in - c_in_start).min(P_MAX);
        let full_start = l_start * cfg.stride - cfg.pad_left;
        let full_end = (l_end - 1) * cfg.stride + (cfg.k - 1) * cfg.dilation - cfg.pad_left + 1;
        let valid_start = full_start.max(0);
        let valid_end = full_end.min(cfg.l);
        if valid_start < valid_end {
            nisa::dma_copy(
                window_sb[s![0..cis, 0..valid_end - valid_start]],
                x_in[s![b, c_in_start..c_in_start + cis, valid_start..valid_end]],
            );
        }
        Conv1dWindow { l_start, l_end, valid_start, valid_end }
    }

    /// `dst = src` on the Vector Engine for even `idx`, the Scalar Engine for
    /// odd (the library alternates the scatter's copies).
    #[nki_helper]
    fn tensor_copy_alternating(dst: Sbuf, src: Sbuf, idx: i64) {
        if idx % 2 == 0 {
            nisa::tensor_copy(dst, src, engine = nisa::engine::vector);
        } else {
            nisa::tensor_copy(dst, src, engine = nisa::engine::scalar);
        }
    }

    /// The window of a C_in tile of `cis` channels as stacked matmul inputs:
    /// `stacked[j·partition_stride + i, k_outer, l] = x[i, (l_start + l)·stride
    /// + (k_outer·K_REP + j)·dilation - pad_left]`, zeros outside the input and
    /// between the taps.
    #[nki_helper]
    fn scatter_input_to_stacked(window_sb: Sbuf, stacked_sb: Sbuf, cfg: Conv1dConfig, w: Conv1dWindow, cis: i64, engine_idx: i64) {
        let lts = w.l_end - w.l_start;
        let (k_rep, partition_stride): (i64, i64) = get_k_replication_params(cis, cfg.k);
        for k_outer in 0..cfg.k.div_ceil(k_rep) {
            let k_start = k_outer * k_rep;
            let k_actual = (cfg.k - k_start).min(k_rep);
            let first_in = w.l_start * cfg.stride + k_start * cfg.dilation - cfg.pad_left;
            let last_in = (w.l_end - 1) * cfg.stride + (k_start + k_actual - 1) * cfg.dilation - cfg.pad_left + 1;
            if first_in < 0 || last_in > cfg.l || partition_stride > cis {
                nisa::memset(stacked_sb[s![0..partition_stride * k_actual, k_outer, 0..lts]], 0.0);
            }
            for j in 0..k_actual {
                let base = w.l_start * cfg.stride + (k_start + j) * cfg.dilation - cfg.pad_left;
                // The outputs whose input lies in the window.
                let first: i64 = if base >= w.valid_start { 0 } else { (w.valid_start - base).div_ceil(cfg.stride) };
                let last: i64 = if base + (lts - 1) * cfg.stride < w.valid_end { lts } else { (w.valid_end - base).div_ceil(cfg.stride) };
                let (first, last) = (first.max(0).min(lts), last.max(0).min(lts));
                if first < last && w.valid_start < w.valid_end {
                    let src0 = base + first * cfg.stride - w.valid_start;
                    let src1 = src0 + (last - first - 1) * cfg.stride + 1;
                    let p0 = j * partition_stride;
                    tensor_copy_alternating(
                        stacked_sb[s![p0..p0 + cis, k_outer, first..last]],
                        window_sb[s![0..cis, src0..src1; cfg.stride]],
                        engine_idx + k_start + j,
                    );
                }
            }
        }
    }

    /// `psum[:, tile] += filters_sb[:, tile, c_in_tile, k_outer]ᵀ ·
    /// stacked[:, k_outer]` for every stacked matmul of the C_in tile, every
    /// C_out tile of the group.
    #[nki_helper]
    fn conv1d_matmul(
        stacked_sb: Sbuf,
        filters_sb: Sbuf,
        psum: Psum,
        cfg: Conv1dConfig,
        tc: Conv1dTileConfig,
        group: (i64, i64),
        c_in_tile: i64,
        lts: i64,
    ) {
        let (group_start, group_tiles) = group;
        let cis = (cfg.c_in - c_in_tile * P_MAX).min(P_MAX);
        let (k_rep, partition_stride): (i64, i64) = get_k_replication_params(cis, cfg.k);
        for k_outer in 0..cfg.k.div_ceil(k_rep) {
            let rows = partition_stride * (cfg.k - k_outer * k_rep).min(k_rep);
            for tile in 0..group_tiles {
                let cos = (tc.c_out_end - group_start - tile * P_MAX).min(P_MAX);
                nisa::nc_matmul(
                    psum[s![0..cos, tile, 0..lts]],
                    filters_sb[s![0..rows, tile, c_in_tile, k_outer, 0..cos]],
                    stacked_sb[s![0..rows, k_outer, 0..lts]],
                );
            }
        }
    }

    /// `result[:, tile] = act(psum + bias)` in the input dtype for every C_out
    /// tile of the group: the bias added in fp32 and rounded before the
    /// activation, which reads the rounded sum.
    #[nki_helper]
    fn apply_bias_activation_and_copy(
        psum: Psum,
        result_sb: Sbuf,
        bias_sb: Sbuf,
        activation_fn: Option<ActFnType>,
        cfg: Conv1dConfig,
        tc: Conv1dTileConfig,
        group: (i64, i64),
        lts: i64,
    ) {
        let (group_start, group_tiles) = group;
        for tile in 0..group_tiles {
            let cos = (tc.c_out_end - group_start - tile * P_MAX).min(P_MAX);
            let (dst, acc) = (result_sb[s![0..cos, tile, 0..lts]], psum[s![0..cos, tile, 0..lts]]);
            if cfg.has_bias {
                nisa::tensor_scalar(dst, acc, nl::add, bias_sb[s![0..cos, tile..tile + 1]]);
                if let Some(act) = activation_fn {
                    apply_activation(dst, dst, act);
                }
            } else if let Some(act) = activation_fn {
                apply_activation(dst, acc, act);
            } else {
                nisa::tensor_copy(dst, acc);
            }
        }
    }

    /// One L_out tile of batch `b` for a C_out group: the C_in tiles' windows
    /// scattered and multiplied into PSUM, then bias, activation and the store.
    #[nki_helper]
    fn conv1d_lout_tile(
        x_in: Hbm,
        filters_sb: Sbuf,
        bias_sb: Sbuf,
        y_out: Hbm,
        cfg: Conv1dConfig,
        tc: Conv1dTileConfig,
        activation_fn: Option<ActFnType>,
        group: (i64, i64),
        b: i64,
        l_start: i64,
    ) {
        let (group_start, group_tiles) = group;
        let l_end = (l_start + tc.l_tile).min(cfg.l_out);
        let lts = l_end - l_start;
        let psum = nl::ndarray([P_MAX, NUM_PSUM_BANKS, F_MAX], nl::float32, buffer = nl::psum);
        for c_in_tile in 0..tc.c_in_tile_count {
            let c_in_start = c_in_tile * P_MAX;
            let window_sb = nl::ndarray([P_MAX, tc.window_size_max], x_in.dtype(), buffer = nl::sbuf);
            let w: Conv1dWindow = load_input_window_to_sbuf(x_in, window_sb, cfg, b, c_in_start, l_start, l_end);
            let stacked_sb = nl::ndarray([P_MAX, tc.k_outer_tile_count, tc.l_tile], x_in.dtype(), buffer = nl::sbuf);
            let cis = (cfg.c_in - c_in_start).min(P_MAX);
            scatter_input_to_stacked(window_sb, stacked_sb, cfg, w, cis, c_in_tile * cfg.k);
            conv1d_matmul(stacked_sb, filters_sb, psum, cfg, tc, group, c_in_tile, lts);
        }
        let result_sb = nl::ndarray([P_MAX, tc.c_out_group_size, tc.l_tile], x_in.dtype(), buffer = nl::sbuf);
        apply_bias_activation_and_copy(psum, result_sb, bias_sb, activation_fn, cfg, tc, group, lts);
        for tile in 0..group_tiles {
            let c_out0 = group_start + tile * P_MAX;
            let cos = (tc.c_out_end - c_out0).min(P_MAX);
            nisa::dma_copy(y_out[s![b, c_out0..c_out0 + cos, l_start..l_end]], result_sb[s![0..cos, tile, 0..lts]]);
        }
    }

    /// 1-D convolution of `x_in` (`[B, C_in, L]`) with `filters`
    /// (`[K, C_in, C_out]`), an optional `bias` (`[C_out]`) and activation:
    /// `[B, C_out, L_out]` in the input's dtype, accumulated in fp32 (see the
    /// module docs). `padding` is `(left, right)` zeros; with `lnc_shard` the
    /// LNC programs split C_out.
    #[nki_kernel]
    pub fn conv1d(
        #[dtypes(bfloat16, float16, float32)] x_in: Hbm,
        #[dtypes(bfloat16, float16, float32)] filters: Hbm,
        #[dtypes(bfloat16, float16, float32)] bias: Option<Hbm>,
        #[default(1)] stride: i64,
        #[default((0, 0))] padding: (i64, i64),
        #[default(1)] dilation: i64,
        activation_fn: Option<ActFnType>,
        #[default(false)] lnc_shard: bool,
    ) -> Hbm {
        let cfg: Conv1dConfig = build_conv1d_config(x_in, filters, bias, stride, padding, dilation, activation_fn.is_some(), lnc_shard);
        let tc: Conv1dTileConfig = build_tile_config(cfg);
        let y_out = nl::ndarray([cfg.b, cfg.c_out, cfg.l_out], x_in.dtype(), buffer = nl::shared_hbm);
        let group_channels = tc.c_out_group_size * P_MAX;
        for group_idx in 0..(tc.c_out_end - tc.c_out_start).div_ceil(group_channels) {
            let group_start = tc.c_out_start + group_idx * group_channels;
            let group_tiles = (tc.c_out_end - group_start).div_ceil(P_MAX).min(tc.c_out_group_size);
            let filters_sb = nl::ndarray(
                [P_MAX, tc.c_out_group_size, tc.c_in_tile_count, tc.k_outer_tile_count, P_MAX],
                x_in.dtype(),
                buffer = nl::sbuf,
            );
            let bias_sb = nl::ndarray([P_MAX, tc.c_out_group_size], nl::float32, buffer = nl::sbuf);
            load_bias_and_filters_for_c_out_group(filters, bias, filters_sb, bias_sb, cfg, tc, group_start, group_tiles);
            for b in 0..cfg.b {
                for l_tile_idx in 0..cfg.l_out.div_ceil(tc.l_tile) {
                    let group = (group_start, group_tiles);
                    conv1d_lout_tile(x_in, filters_sb, bias_sb, y_out, cfg, tc, activation_fn, group, b, l_tile_idx * tc.l_tile);
                }
            }
        }
        y_out
    }
}
