//! The rules of the cross-entropy kernels (the library's `loss/validation`):
//! once as `const fn`s over a call's sizes, with the `cross_entropy_config!`
//! macro that makes a broken rule a compile error, and once as the checks the
//! kernels run when they are traced.
//!
//! The limits are Trainium2's: at most 128 positions per batch (the
//! partitions), vocabulary chunks of at most 65,536 columns (the free-dim
//! limit the library names `F_MAX`), and one `[positions_per_batch,
//! chunk_size]` tile of the logits' dtype within 24 MiB.

pub use kernel::*;

/// Why a cross-entropy call is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrossEntropyRule {
    /// `reduction` is neither `"mean"` nor `"sum"` (backward only).
    Reduction,
    /// No positions.
    Positions,
    /// An empty vocabulary.
    Vocab,
    /// `chunk_size` is not within `1..=vocab_size`.
    ChunkSize,
    /// `chunk_size` is above the free-dim limit `F_MAX`.
    ChunkLimit,
    /// `positions_per_batch` is not within `1..=P_MAX`.
    PositionsPerBatch,
    /// One `[positions_per_batch, chunk_size]` tile exceeds `MAX_ALLOCATION_BYTES`.
    Allocation,
}

impl CrossEntropyRule {
    /// The rule in words.
    pub const fn message(self) -> &'static str {
        match self {
            CrossEntropyRule::Reduction => "cross_entropy_backward: reduction must be 'mean' or 'sum'",
            CrossEntropyRule::Positions => "cross_entropy: num_positions must be > 0",
            CrossEntropyRule::Vocab => "cross_entropy: vocab_size must be > 0",
            CrossEntropyRule::ChunkSize => "cross_entropy: chunk_size must be within 1..=vocab_size",
            CrossEntropyRule::ChunkLimit => "cross_entropy: chunk_size exceeds the hardware limit 65536",
            CrossEntropyRule::PositionsPerBatch => "cross_entropy: positions_per_batch must be within 1..=128",
            CrossEntropyRule::Allocation => {
                "cross_entropy: positions_per_batch × chunk_size × dtype bytes exceeds the 24 MiB allocation limit"
            }
        }
    }
}

/// The sizes and options of one cross-entropy call, for [`cross_entropy_violation`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CrossEntropyShape {
    /// Positions (`B·T`), the rows of the logits.
    pub num_positions: i64,
    /// Vocabulary size `V`, the columns.
    pub vocab_size: i64,
    /// Positions per batch.
    pub positions_per_batch: i64,
    /// Vocabulary columns per chunk.
    pub chunk_size: i64,
    /// Bytes of one logit (2 for bfloat16, 4 for float32).
    pub dtype_bytes: i64,
    /// The backward's `reduction` (`"mean"` for the forward, which has none).
    pub reduction: &'static str,
}

/// Whether `a` and `b` are the same string (a `const` comparison).
const fn same_str(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The first rule a call breaks, or `None`, in the library's order.
pub const fn cross_entropy_violation(c: CrossEntropyShape) -> Option<CrossEntropyRule> {
    if !same_str(c.reduction, "mean") && !same_str(c.reduction, "sum") {
        return Some(CrossEntropyRule::Reduction);
    }
    if c.num_positions <= 0 {
        return Some(CrossEntropyRule::Positions);
    }
    if c.vocab_size <= 0 {
        return Some(CrossEntropyRule::Vocab);
    }
    if c.chunk_size <= 0 || c.chunk_size > c.vocab_size {
        return Some(CrossEntropyRule::ChunkSize);
    }
    if c.chunk_size > F_MAX {
        return Some(CrossEntropyRule::ChunkLimit);
    }
    if c.positions_per_batch <= 0 || c.positions_per_batch > P_MAX {
        return Some(CrossEntropyRule::PositionsPerBatch);
    }
    if c.positions_per_batch * c.chunk_size * c.dtype_bytes > MAX_ALLOCATION_BYTES {
        return Some(CrossEntropyRule::Allocation);
    }
    None
}

/// A cross-entropy call checked at compile time: the [`CrossEntropyShape`] of
/// the given sizes (`positions_per_batch`, `chunk_size`, `dtype_bytes` and
/// `reduction` defaulting as in the library: 32, 32768, 2, `"mean"`), or a
/// compile error naming the rule it breaks.
///
/// ```
/// let c = nkilib::cross_entropy_config!(num_positions = 8192, vocab_size = 129280, positions_per_batch = 64, chunk_size = 65535);
/// assert_eq!(c.chunk_size, 65535);
/// let c = nkilib::cross_entropy_config!(num_positions = 1, vocab_size = 32128, reduction = "sum", chunk_size = 32128);
/// assert_eq!(c.reduction, "sum");
/// ```
///
/// ```compile_fail
/// // A chunk wider than the vocabulary.
/// let c = nkilib::cross_entropy_config!(num_positions = 128, vocab_size = 16384);
/// ```
#[macro_export]
macro_rules! cross_entropy_config {
    (num_positions = $n:expr, vocab_size = $v:expr $(, $field:ident = $value:expr)* $(,)?) => {{
        const CALL: $crate::experimental::loss::validation::CrossEntropyShape =
            $crate::experimental::loss::validation::CrossEntropyShape {
                $($field: $value,)*
                ..$crate::experimental::loss::validation::CrossEntropyShape {
                    num_positions: $n,
                    vocab_size: $v,
                    positions_per_batch: 32,
                    chunk_size: 32768,
                    dtype_bytes: 2,
                    reduction: "mean",
                }
            };
        const _: () = if let Some(rule) = $crate::experimental::loss::validation::cross_entropy_violation(CALL) {
            panic!("{}", rule.message());
        };
        CALL
    }};
}

/// The limits and the checks the kernels run when traced.
#[nki::nki_module]
pub mod kernel {
    use nki::prelude::*;

    /// Positions per batch at most: the partitions.
    pub const P_MAX: i64 = 128;
    /// Vocabulary columns per chunk at most: the free-dim limit.
    pub const F_MAX: i64 = 65536;
    /// The largest SBUF allocation, one `[positions_per_batch, chunk_size]` tile.
    pub const MAX_ALLOCATION_BYTES: i64 = 25165824;

    /// The library's `validate_cross_entropy_forward_inputs`: the shapes of the
    /// logits and targets and the batch and chunk sizes (the dtypes are the
    /// kernels' parameter contracts).
    #[nki_helper]
    pub fn validate_cross_entropy_forward_inputs(
        logits_hbm: Hbm,
        targets_hbm: Hbm,
        positions_per_batch: i64,
        chunk_size: i64,
        func_name: &str,
    ) {
        let (logits_dims, targets_dims) = (logits_hbm.ndim(), targets_hbm.ndim());
        assert!(logits_dims == 2, "{func_name}: logits_hbm must be 2D [num_positions, vocab_size], got {logits_dims} dims");
        assert!(targets_dims == 1, "{func_name}: targets_hbm must be 1D [num_positions], got {targets_dims} dims");
        let [num_positions, vocab_size] = logits_hbm.shape();
        let [num_targets] = targets_hbm.shape();
        assert!(
            num_targets == num_positions,
            "{func_name}: targets_hbm length {num_targets} must match logits_hbm first dim {num_positions}"
        );
        assert!(num_positions > 0, "{func_name}: num_positions must be > 0, got {num_positions}");
        assert!(vocab_size > 0, "{func_name}: vocab_size must be > 0, got {vocab_size}");
        assert!(chunk_size > 0, "{func_name}: chunk_size must be > 0, got {chunk_size}");
        assert!(chunk_size <= vocab_size, "{func_name}: chunk_size {chunk_size} must be <= vocab_size {vocab_size}");
        assert!(chunk_size <= F_MAX, "{func_name}: chunk_size {chunk_size} exceeds hardware limit {F_MAX}");
        assert!(
            positions_per_batch > 0 && positions_per_batch <= P_MAX,
            "{func_name}: positions_per_batch must be in (0, {P_MAX}], got {positions_per_batch}"
        );
        let dtype_bytes = if logits_hbm.dtype() == nl::bfloat16 { 2 } else { 4 };
        let allocation_bytes = positions_per_batch * chunk_size * dtype_bytes;
        assert!(
            allocation_bytes <= MAX_ALLOCATION_BYTES,
            "{func_name}: allocation size {allocation_bytes} bytes (positions_per_batch × chunk_size × {dtype_bytes} bytes) exceeds hardware limit {MAX_ALLOCATION_BYTES} bytes"
        );
    }

    /// The library's `validate_cross_entropy_backward_inputs`: `reduction`, then
    /// the forward's checks and the saved log-sum-exp's shape.
    #[nki_helper]
    pub fn validate_cross_entropy_backward_inputs(
        logits_hbm: Hbm,
        targets_hbm: Hbm,
        lse_state_hbm: Hbm,
        positions_per_batch: i64,
        chunk_size: i64,
        reduction: &str,
    ) {
        let func_name = "cross_entropy_backward";
        assert!(reduction == "mean" || reduction == "sum", "{func_name}: reduction must be one of ('mean', 'sum'), got '{reduction}'");
        validate_cross_entropy_forward_inputs(logits_hbm, targets_hbm, positions_per_batch, chunk_size, func_name);
        let lse_dims = lse_state_hbm.ndim();
        assert!(lse_dims == 1, "{func_name}: lse_state_hbm must be 1D [num_positions], got {lse_dims} dims");
        let [num_positions, _] = logits_hbm.shape();
        let [num_lse] = lse_state_hbm.shape();
        assert!(num_lse == num_positions, "{func_name}: lse_state_hbm length {num_lse} must match logits_hbm first dim {num_positions}");
    }
}
