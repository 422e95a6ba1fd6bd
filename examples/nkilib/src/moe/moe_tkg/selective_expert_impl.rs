//! The selective-expert path: the library's `selective_expert_impl`, each
//! token through its top-k experts only, the expert ids read on the device.
//!
//! With two programs and more than one token the tokens are split between
//! them (the first takes `T/2`, the second the rest) and each computes whole
//! rows, unless `H · I >= 3072 · 1536`, where, as in the library, both take
//! every token and split the hidden dim as `mlp_tkg` does:
//!
//! ```text
//! x_sb = hidden (its hidden shard)           [128, T, H1s]
//! idx = expert_index                          [T, K] in SBUF
//! for each token t of this program:
//!     acc = 0                                 [1, H/n], hidden's dtype
//!     for k in 0..K:
//!         e = idx[t, k]                        # scalar_offset of every expert DMA
//!         o = expert_mlp(x_sb[:, t, :])        [1, H/n], hidden's dtype
//!         (POST_SCALE) o *= expert_affinities[t, e]   # gathered by e, float32
//!         acc += o
//!     output[t, shard] = acc                  # output_dtype
//! ```

pub use kernel::*;

/// Whether a selective call of `t` tokens on `n` programs splits the tokens
/// between them (else the hidden dim), as the kernel's `shard_on_t` decides.
pub const fn selective_shards_tokens(t: i64, h: i64, i: i64, n: i64) -> bool {
    n > 1 && t > 1 && h * i < SHARD_ON_T_MAX_HI
}

/// The selective path.
#[nki::nki_module]
pub mod kernel {
    use crate::mlp::mlp_parameters::H0;
    use crate::mlp::mlp_parameters::MLPActivationParameters;
    use crate::moe::moe_tkg::moe_tkg_utils::{
        MoeTkgOptions, MoeTkgTensors, expert_dims, expert_mlp, select_expert_scales, select_expert_weights,
    };
    use crate::subkernels::norm_tkg_utils::load_input_to_sbuf;
    pub use crate::utils::common_types::ExpertAffinityScaleMode;
    pub use crate::utils::common_types::QuantizationType;
    use nki::prelude::*;

    /// From this `H · I` (3072 · 1536) on, the library keeps every token on
    /// both programs (hidden-sharded) rather than splitting the tokens.
    pub const SHARD_ON_T_MAX_HI: i64 = 4718592;

    /// Whether `n` programs split the `t` tokens (else the hidden dim);
    /// [`selective_shards_tokens`](super::selective_shards_tokens) is the
    /// same rule for the compile-time checks.
    #[nki_helper]
    pub fn shard_on_t(t: i64, h: i64, i: i64, n: i64) -> bool {
        n > 1 && t > 1 && h * i < SHARD_ON_T_MAX_HI
    }

    /// `output[t] = Σ_k affinity · expert_k(hidden[t])` for the tokens of
    /// this program (module docs).
    #[nki_helper]
    pub fn _selective_expert_moe_tkg(w: MoeTkgTensors, opts: MoeTkgOptions, output: Hbm) {
        let x = w.hidden_input;
        let [t, h] = x.shape();
        let i = w.expert_gate_up_weights.shape()[3];
        let k = w.expert_index.shape()[1];
        let io = x.dtype();
        let n = if nl::program_ndim() == 1 { nl::num_programs(0) } else { 1 };
        let pid = if n > 1 { nl::program_id(0) } else { 0 };
        let by_tokens = shard_on_t(t, h, i, n);
        let (hn, hid) = if by_tokens { (1, 0) } else { (n, pid) };
        let first = t / 2;
        let (t_off, t_cnt) = if !by_tokens {
            (0, t)
        } else if pid == 0 {
            (0, first)
        } else {
            (first, t - first)
        };
        let (hs, c0) = (h / hn, hid * (h / hn));
        let x_sb = nl::ndarray([H0, t, h / H0 / hn], io, buffer = nl::sbuf);
        load_input_to_sbuf(x, x_sb, 0, t, hn, hid, 1, false);
        let idx = nl::ndarray([t, k], w.expert_index.dtype(), buffer = nl::sbuf);
        nisa::dma_copy(idx, w.expert_index);
        let post = opts.expert_affinities_scaling_mode == ExpertAffinityScaleMode::POST_SCALE;
        let aff = w.expert_affinities;
        let e = aff.shape()[1];
        let acc = nl::ndarray([1, hs], io, buffer = nl::sbuf);
        let a = nl::ndarray([1, 1], aff.dtype(), buffer = nl::sbuf);
        let cast = nl::ndarray([1, hs], output.dtype(), buffer = nl::sbuf);
        let dims = expert_dims(1, h, i, hn, hid);
        for tt in 0..t_cnt {
            let tok = t_off + tt;
            nisa::memset(acc, 0.0);
            for kk in 0..k {
                let id = idx[s![tok..tok + 1, kk..kk + 1]];
                let ew = select_expert_weights(w, id);
                let q = select_expert_scales(w, id, opts.quantization_type);
                let o = expert_mlp(x_sb[s![.., tok..tok + 1, ..]], ew, q, opts.act, dims, io);
                if post {
                    nisa::dma_copy(a, aff.ap([[e, 1], [1, 1]], offset = tok * e, scalar_offset = id, indirect_dim = 1));
                    nisa::tensor_scalar(o, o, nl::multiply, a);
                }
                nisa::tensor_tensor(acc, acc, o, nl::add);
            }
            nisa::tensor_copy(cast, acc);
            nisa::dma_copy(output[s![tok..tok + 1, c0..c0 + hs]], cast);
        }
    }
}
