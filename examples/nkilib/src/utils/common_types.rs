//! The enums the library's kernels take, declared once (the library keeps them
//! in `nkilib/core/utils/common_types.py`): same class names, member names and
//! values, so a caller builds the same arguments for either package.
//!
//! Each kernel imports the ones it takes (`use crate::utils::common_types::
//! {NormType, QuantizationType};` inside its `#[nki_module]`), and its emitted
//! module imports them from `common_types`, so the package exports one class
//! per enum. A kernel that implements only some members refuses the others by
//! name.

use nki::prelude::*;

pub use types::*;

/// The shared enums.
#[nki_module]
pub mod types {
    /// How a fused QKV projection is stored.
    #[nki_enum]
    pub enum QKVOutputLayout {
        /// `[B, S, I]`.
        BSD,
        /// `[I / d_head, B, S, d_head]`: head by head.
        NBSd,
        /// `[I / d_head, B, d_head, S]`: head by head, transposed.
        NBdS,
    }

    /// The normalization of the hidden rows before a projection or quantization.
    #[nki_enum]
    pub enum NormType {
        /// No normalization.
        NO_NORM,
        /// RMSNorm with gamma.
        RMS_NORM,
        /// LayerNorm with gamma and an optional beta.
        LAYER_NORM,
        /// RMSNorm without gamma (gamma folded into the weights).
        RMS_NORM_SKIP_GAMMA,
    }

    /// The activation of an MLP's gate.
    #[nki_enum]
    pub enum ActFnType {
        /// `x · sigmoid(x)` (SwiGLU when gated).
        SiLU,
        /// `x · Φ(x)`, the exact GELU.
        GELU,
        /// GELU with the tanh approximation.
        GELU_Tanh_Approx,
        /// GELU with the sigmoid approximation, `x · sigmoid(1.702 x)`.
        Swish,
    }

    /// A MoE router's activation over the experts.
    #[nki_enum]
    pub enum RouterActFnType {
        /// The sigmoid of each logit.
        SIGMOID,
        /// The softmax along the experts.
        SOFTMAX,
    }

    /// How weights (and activations) are quantized.
    #[nki_enum]
    pub enum QuantizationType {
        /// Not quantized.
        NONE,
        /// `float8_e4m3`, one scale per tensor.
        STATIC,
        /// `float8_e4m3`, one scale per row (or output column).
        ROW,
        /// Microscaling.
        MX,
        /// Per-tensor microscaling.
        STATIC_MX,
        /// Per-row microscaling.
        ROW_MX,
    }

    /// When a MoE kernel multiplies an expert's output by its affinity.
    #[nki_enum]
    pub enum ExpertAffinityScaleMode {
        /// Experts' outputs are summed unweighted.
        NO_SCALE,
        /// Each expert's output is multiplied by the token's affinity for it.
        POST_SCALE,
        /// The input is scaled before the expert MLP (context encoding).
        PRE_SCALE,
        /// Pre-scaling applied later in the context-encoding expert MLP.
        PRE_SCALE_DELAYED,
    }

    /// How fused QKV weights are packed.
    #[nki_enum]
    pub enum QKVWeightLayout {
        /// `[H, I]` as in the checkpoint.
        CONTIGUOUS,
        /// Microscaling: four H rows packed per element.
        MX_CONTIGUOUS,
        /// Microscaling, packed in the DMA-transpose order.
        MX_INTERLEAVED,
    }
}
