//! The `STATIC_MX` form (trn3) of the context-encoding path: the
//! library's static-MX branches of `mlp_cte` (its
//! `load_and_transpose_mx_quant_hidden_tile`, `project_mx_source_tensor_tile`,
//! `perform_mx_down_projection` and the MX layouts of its activation,
//! product and quantization steps). The fp8 hidden rows, the gate/up/down
//! weights and the requantized gated product are multiplied by
//! `nc_matmul_mx`, four contraction values to a `float8_e4m3fn_x4` element
//! (their bytes read through an `.ap(..., dtype=float8_e4m3fn_x4)` view),
//! every block scale the constant 127 (`2^0`), summed in bfloat16 PSUM.
//!
//! Layouts (the library's documented pre-shuffles; `f < 128`, `g < 4`):
//!
//! ```text
//! a packed contraction element of H-tile b (512 rows) on partition p holds
//!     hidden rows  h = a·H/2 + 256·b + 2p + d,   (a, d) in {0, 1}², element 2a + d
//! gate/up [H, I] stored as [128 p, H/512 b, I/512 e, 4 g, 128 f, 4 (a, d)]:
//!     logical (h as above, column 512e + 4f + g)
//! down [I, H] stored as [128 f, I/512 e, H, 4 g]: logical (row 512e + 4f + g, column h)
//! the gated product of intermediate tile e sits on partition f as [e, token, g]:
//!     its column 512e + 4f + g, so one x4 element is the down contraction's 4 rows
//! ```
//!
//! ```text
//! unit = 127 block scales
//! for each tile of up to 256 of the program's token rows:
//!     x = hidden rows → [128, H/512, 256, 4] fp8               (load_and_transpose_mx_quant_hidden_tile)
//!     for each 512 intermediate columns e of the program:
//!         gate[f, g, t] = Σ_b nc_matmul_mx(W_gate[b, e, g], x[b])  bf16 PSUM, b ascending
//!         gu[f, e, t, g] = act(gate · s_gate)                       compute dtype
//!         up likewise;  gu = round(gu · up) · s_up                   (skip_gate_proj: act(up · s_up))
//!         gu = round(gu · (1 / down_in_scale));  q = clamp(gu, ±240)  float8_e4m3
//!     for each 128 of the tile's rows, each 1024 columns of H:   (perform_mx_down_projection)
//!         o = Σ_e nc_matmul_mx(q[e, rows], W_down[e, cols])       bf16 PSUM, e ascending
//!         o = o · s_down                                            compute dtype
//!         (I sharded) o[:, my half] += the other program's partial
//!         output[rows] = o
//! ```
//!
//! `s_gate`, `s_up`, `s_down` are the weights' static scales times their
//! input's (`gate_up_in_scale`, `down_in_scale`), as `STATIC`'s.

pub use kernel::*;

/// The static-MX phases.
#[nki::nki_module]
pub mod kernel {
    use crate::mlp::mlp_cte::mlp_cte_constants::{MLPCTEConstants, MLPCTEQuantScales, P_MAX};
    use crate::mlp::mlp_cte::mlp_cte_projection::sync_down_proj_results_across_int_dim;
    use crate::mlp::mlp_cte::mlp_cte_quantization::perform_intermediate_static_quantization;
    use crate::mlp::mlp_cte::mlp_cte_tensor_io::store_hidden_tensor_tile;
    use crate::mlp::mlp_parameters::{MLPActivationParameters, MLPParameters, MLPQuantizationParameters, MLPTensors};
    pub use crate::mlp::mlp_tkg::projection_mx_constants::MX_TILE;
    pub use crate::output_projection::output_projection_cte::output_projection_cte_mx::{H_SUBTILE_SIZE, UNIT_MX_SCALE};
    pub use crate::utils::common_types::ActFnType;
    pub use crate::utils::common_types::NormType;
    use crate::utils::kernel_helpers::apply_scaled_activation;
    pub use crate::utils::mx_layout::MX_PACK;
    use nki::prelude::*;

    /// Token rows per tile: the moving width of a gate/up `nc_matmul_mx`
    /// (four of its bf16 PSUM rows fill one bank).
    pub const MX_BXS_TILE: i64 = 256;
    /// A packed hidden element is two runs of this many consecutive rows,
    /// `H/2` apart (the halves `a` of the module docs).
    pub const MX_HALF_PAIR: i64 = 2;

    /// Rows `r0 .. r0 + rows` of the fp8 `hidden` `[T, H]` into
    /// `[128, H/512, 256, 4]` bytes: partition `p`, H-tile `b`, token `t`
    /// holding rows `a·H/2 + 256·b + 2p + d` as element `2a + d` (the
    /// library's transposing load, in 2-byte runs).
    #[nki_helper]
    pub fn load_and_transpose_mx_quant_hidden_tile(hidden: Hbm, cst: MLPCTEConstants, r0: i64, rows: i64) -> Sbuf {
        let h = cst.h;
        let nb = h / MX_TILE;
        let x8 = nl::ndarray([P_MAX, nb, MX_BXS_TILE, MX_PACK], hidden.dtype(), buffer = nl::sbuf);
        for b in nl::affine_range(nb) {
            for a in nl::affine_range(MX_HALF_PAIR) {
                nisa::dma_copy(
                    x8[s![.., b, 0..rows, a * MX_HALF_PAIR..(a + 1) * MX_HALF_PAIR]],
                    hidden.ap(
                        [[MX_HALF_PAIR, P_MAX], [h, rows], [1, MX_HALF_PAIR]],
                        offset = r0 * h + a * (h / MX_HALF_PAIR) + b * (MX_TILE / MX_HALF_PAIR),
                    ),
                );
            }
        }
        x8.ap([[nb * MX_BXS_TILE, P_MAX], [MX_BXS_TILE, nb], [1, MX_BXS_TILE]], dtype = nl::float8_e4m3fn_x4)
    }

    /// `acc` `[128 f, 4 g, 256]` (bf16 PSUM) = the projection of the packed
    /// rows `x` by intermediate tile `e` (this program's) of the pre-shuffled
    /// `w`: per H-tile in order, its weights loaded as `[128, 4, 128, 4]`
    /// bytes, one `nc_matmul_mx` per 128 columns `g`.
    #[nki_helper(target = "trn3")]
    pub fn project_mx_source_tensor_tile(x: Sbuf, w: Hbm, acc: Psum, unit: Sbuf, cst: MLPCTEConstants, e: i64, rows: i64) {
        let nb = cst.h / MX_TILE;
        let w_tiles = w.reshape([P_MAX, nb, cst.i_total / MX_TILE, MX_PACK, P_MAX, MX_PACK]);
        let eg = cst.i_offset / MX_TILE + e;
        for b in nl::sequential_range(nb) {
            let w8 = nl::ndarray([P_MAX, MX_PACK, P_MAX, MX_PACK], w.dtype(), buffer = nl::sbuf);
            nisa::dma_copy(w8, w_tiles[s![.., b, eg, .., .., ..]]);
            let w4 = w8.ap([[MX_PACK * P_MAX, P_MAX], [P_MAX, MX_PACK], [1, P_MAX]], dtype = nl::float8_e4m3fn_x4);
            for g in nl::sequential_range(MX_PACK) {
                nisa::nc_matmul_mx(
                    acc[s![.., g, 0..rows]],
                    w4[s![.., g, ..]],
                    x[s![.., b, 0..rows]],
                    unit[s![.., 0..P_MAX]],
                    unit[s![.., 0..rows]],
                );
            }
        }
    }

    /// The gated product of intermediate tile `e` into `gu[:, e, :rows, :]`
    /// (compute dtype), each PSUM sum read token-major (`[f, t, g]`).
    #[nki_helper(target = "trn3")]
    pub fn perform_mx_gate_up_projection(
        x: Sbuf,
        w: MLPTensors,
        gu: Sbuf,
        unit: Sbuf,
        act: MLPActivationParameters,
        scales: MLPCTEQuantScales,
        cst: MLPCTEConstants,
        e: i64,
        rows: i64,
    ) {
        let dst = gu[s![.., e, 0..rows, ..]];
        let (gate_scale, up_scale) = (scales.gate, scales.up);
        let up = nl::ndarray([P_MAX, MX_PACK, MX_BXS_TILE], nl::bfloat16, buffer = nl::psum);
        if let Some(us) = up_scale {
            if act.skip_gate_proj {
                project_mx_source_tensor_tile(x, w.up_proj_weights_tensor, up, unit, cst, e, rows);
                apply_scaled_activation(dst, up[s![.., .., 0..rows]].permute([0, 2, 1]), act.activation_fn, us);
            } else if let Some(gs) = gate_scale {
                let gate = nl::ndarray([P_MAX, MX_PACK, MX_BXS_TILE], nl::bfloat16, buffer = nl::psum);
                project_mx_source_tensor_tile(x, w.gate_proj_weights_tensor, gate, unit, cst, e, rows);
                apply_scaled_activation(dst, gate[s![.., .., 0..rows]].permute([0, 2, 1]), act.activation_fn, gs);
                project_mx_source_tensor_tile(x, w.up_proj_weights_tensor, up, unit, cst, e, rows);
                nisa::tensor_tensor(dst, dst, up[s![.., .., 0..rows]].permute([0, 2, 1]), nl::multiply);
                nisa::activation(dst, nl::copy, dst, scale = us);
            }
        }
    }

    /// The library's `perform_mx_down_projection` for one tile of `rows`
    /// token rows from `r0`: the packed product `q` `[128, I/512, 256]`
    /// against the pre-shuffled down weights, 128 rows and 1024 columns at a
    /// time, dequantized into the compute dtype, exchanged between the
    /// programs of an `I`-sharded call and stored.
    #[nki_helper(target = "trn3")]
    pub fn perform_mx_down_projection(
        q: Sbuf,
        down_w: Hbm,
        output: Hbm,
        unit: Sbuf,
        down_scale: Sbuf,
        cst: MLPCTEConstants,
        r0: i64,
        rows: i64,
    ) {
        let h = cst.h;
        let w_tiles = down_w.reshape([P_MAX, cst.i_total / MX_TILE, h, MX_PACK]);
        for st in nl::sequential_range(rows.div_ceil(P_MAX)) {
            let t0 = st * P_MAX;
            let n = (rows - t0).min(P_MAX);
            let o = nl::ndarray([P_MAX, h], cst.compute_dtype, buffer = nl::sbuf);
            for hc in nl::sequential_range(h.div_ceil(H_SUBTILE_SIZE)) {
                let c0 = hc * H_SUBTILE_SIZE;
                let cols = (h - c0).min(H_SUBTILE_SIZE);
                let acc = nl::ndarray([P_MAX, H_SUBTILE_SIZE], nl::bfloat16, buffer = nl::psum);
                for e in nl::sequential_range(cst.i / MX_TILE) {
                    let w8 = nl::ndarray([P_MAX, H_SUBTILE_SIZE, MX_PACK], down_w.dtype(), buffer = nl::sbuf);
                    let eg = cst.i_offset / MX_TILE + e;
                    nisa::dma_copy(w8[s![.., 0..cols, ..]], w_tiles[s![.., eg, c0..c0 + cols, ..]]);
                    let w4 = w8.ap([[H_SUBTILE_SIZE, P_MAX], [1, H_SUBTILE_SIZE]], dtype = nl::float8_e4m3fn_x4);
                    nisa::nc_matmul_mx(
                        acc[s![0..n, 0..cols]],
                        q[s![.., e, t0..t0 + n]],
                        w4[s![.., 0..cols]],
                        unit[s![.., 0..n]],
                        unit[s![.., 0..cols]],
                    );
                }
                nisa::activation(o[s![0..n, c0..c0 + cols]], nl::copy, acc[s![0..n, 0..cols]], scale = down_scale[s![0..n, ..]]);
            }
            if cst.shard_on_intermediate {
                sync_down_proj_results_across_int_dim(o, cst, n);
            }
            store_hidden_tensor_tile(o, output, cst, r0 + t0, n);
        }
    }

    /// One tile of up to 256 token rows from `r0` of a `STATIC_MX` call:
    /// the loop body of the module docs.
    #[nki_helper(target = "trn3")]
    pub fn mlp_cte_static_mx_tile(p: MLPParameters, unit: Sbuf, scales: MLPCTEQuantScales, cst: MLPCTEConstants, r0: i64, rows: i64) {
        let (w, act) = (p.w, p.act);
        let ne = cst.i / MX_TILE;
        let x = load_and_transpose_mx_quant_hidden_tile(p.hidden, cst, r0, rows);
        let gu = nl::ndarray([P_MAX, ne, MX_BXS_TILE, MX_PACK], cst.compute_dtype, buffer = nl::sbuf);
        let qdt = cst.down_proj_quant_dtype;
        let q8 = nl::ndarray([P_MAX, ne, MX_BXS_TILE, MX_PACK], qdt, buffer = nl::sbuf);
        let (down_in_inv, down_scale) = (scales.down_in_inv, scales.down);
        for e in nl::affine_range(ne) {
            perform_mx_gate_up_projection(x, w, gu, unit, act, scales, cst, e, rows);
            if let Some(inv) = down_in_inv {
                let (g, d) = (gu[s![.., e, 0..rows, ..]], q8[s![.., e, 0..rows, ..]]);
                perform_intermediate_static_quantization(g, d, inv);
            }
        }
        let q = q8.ap([[ne * MX_BXS_TILE, P_MAX], [MX_BXS_TILE, ne], [1, MX_BXS_TILE]], dtype = nl::float8_e4m3fn_x4);
        if let Some(ds) = down_scale {
            perform_mx_down_projection(q, w.down_proj_weights_tensor, p.output, unit, ds, cst, r0, rows);
        }
    }

    /// The `STATIC_MX` context-encoding MLP of the fp8 `p.hidden` `[T, H]`
    /// into `p.output` `[T, H]`, this program's rows and columns.
    #[nki_helper(target = "trn3")]
    pub fn mlp_cte_static_mx(p: MLPParameters, scales: MLPCTEQuantScales, cst: MLPCTEConstants) {
        let unit = nl::ndarray([P_MAX, H_SUBTILE_SIZE], nl::uint8, buffer = nl::sbuf);
        nisa::memset(unit, UNIT_MX_SCALE);
        for tile in nl::sequential_range(cst.t.div_ceil(MX_BXS_TILE)) {
            let r0 = cst.t_offset + tile * MX_BXS_TILE;
            let rows = (cst.t_offset + cst.t - r0).min(MX_BXS_TILE);
            mlp_cte_static_mx_tile(p, unit, scales, cst, r0, rows);
        }
    }
}
