//! Tensor-parallel two-layer projection `y = (x · W1) · W2` over the ranks of one
//! replica group, Megatron style: the first weight split by columns, the second
//! by rows, so the hidden activations never leave their rank.
//!
//! Every rank `r` of the `RANKS` members holds
//! * `x_t`: rows `r·K/R .. (r+1)·K/R` of `xᵀ` (`[K/R, M]`, the input features it owns),
//! * `w1`: columns `r·H/R ..` of `W1` (`[K, H/R]`),
//! * `w2`: rows `r·H/R ..` of `W2` (`[H/R, N]`),
//!
//! and ends with rows `r·M/R .. (r+1)·M/R` of `y` (`[M/R, N]`, fp32). Phases:
//! 1. `ncc::all_gather` along dim 0 assembles the whole `xᵀ` (`[K, M]`) on every rank;
//! 2. `hᵀ = W1_rᵀ · xᵀ`: this rank's `H/R` hidden features for every row (`[H/R, M]`,
//!    fp32 from PSUM, cast by DMA to the weights' dtype for the next matmul);
//! 3. `h_r · W2_r`: this rank's share of `y` summed over its hidden features (`[M, N]`);
//! 4. `ncc::reduce_scatter` along dim 0 adds the shares of all ranks and leaves
//!    each rank its `M/R` rows.
//!
//! Both products run through [`matmul`](super::matmul::matmul) (so `H/R` and `M`
//! are multiples of 128, `M` and `N` of 512).

use super::matmul::matmul;
use nki::prelude::*;

/// `y`'s rows for this rank of a 4-rank group (see the module doc for the layout).
#[nki_kernel]
pub fn tp_matmul(x_t: Hbm, w1: Hbm, w2: Hbm) -> Hbm {
    let ranks = 4;
    let group = ncc::ReplicaGroup([[0, 1, 2, 3]]);
    let [k_shard, m] = x_t.shape();
    let [k, h_shard] = w1.shape();
    let [h_w2, n] = w2.shape();
    assert!(k == k_shard * ranks, "w1 is [K, H/R] and x_t [K/R, M]: K = {k} is not {ranks} x {k_shard}");
    assert!(h_w2 == h_shard, "w1 is [K, H/R] and w2 [H/R, N]: H/R differs ({h_shard} vs {h_w2})");
    assert!(m % (128 * ranks) == 0, "M must be a multiple of {ranks} x 128, got {m}");
    // Phase 1: every rank's feature rows, in member order.
    let x_full = nl::ndarray([k, m], x_t.dtype(), buffer = nl::shared_hbm);
    ncc::all_gather([x_t], [x_full], group, 0);
    // Phases 2 and 3: this rank's hidden features, then its share of y.
    let h_acc: Hbm = matmul(w1, x_full);
    let h_t = nl::ndarray([h_shard, m], w2.dtype(), buffer = nl::shared_hbm);
    nisa::dma_copy(h_t, h_acc);
    let share: Hbm = matmul(h_t, w2);
    // Phase 4: sum the shares; rank r keeps rows r·M/R ..
    let y = nl::ndarray([m / ranks, n], nl::float32, buffer = nl::shared_hbm);
    ncc::reduce_scatter([share], [y], group, 0, nl::add);
    y
}
