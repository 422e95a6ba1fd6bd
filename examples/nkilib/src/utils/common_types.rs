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
        BSD = 0,
        /// `[I / d_head, B, S, d_head]`: head by head.
        NBSd = 1,
        /// `[I / d_head, B, d_head, S]`: head by head, transposed.
        NBdS = 2,
    }

    /// The normalization of the hidden rows before a projection or quantization.
    #[nki_enum]
    pub enum NormType {
        /// No normalization.
        NO_NORM = 0,
        /// RMSNorm with gamma.
        RMS_NORM = 1,
        /// LayerNorm with gamma and an optional beta.
        LAYER_NORM = 2,
        /// RMSNorm without gamma (gamma folded into the weights).
        RMS_NORM_SKIP_GAMMA = 3,
    }

    /// The activation of an MLP's gate.
    #[nki_enum]
    pub enum ActFnType {
        /// `x · sigmoid(x)` (SwiGLU when gated).
        SiLU = 0,
        /// `x · Φ(x)`, the exact GELU.
        GELU = 1,
        /// GELU with the tanh approximation.
        GELU_Tanh_Approx = 2,
        /// GELU with the sigmoid approximation, `x · sigmoid(1.702 x)`.
        Swish = 3,
    }

    /// A MoE router's activation over the experts.
    #[nki_enum]
    pub enum RouterActFnType {
        /// The sigmoid of each logit.
        SIGMOID = 0,
        /// The softmax along the experts.
        SOFTMAX = 1,
    }

    /// How weights (and activations) are quantized.
    #[nki_enum]
    pub enum QuantizationType {
        /// Not quantized.
        NONE = 0,
        /// `float8_e4m3`, one scale per tensor.
        STATIC = 1,
        /// `float8_e4m3`, one scale per row (or output column).
        ROW = 2,
        /// Microscaling.
        MX = 3,
        /// Per-tensor microscaling.
        STATIC_MX = 4,
        /// Per-row microscaling.
        ROW_MX = 5,
    }

    /// When a MoE kernel multiplies an expert's output by its affinity.
    #[nki_enum]
    pub enum ExpertAffinityScaleMode {
        /// Experts' outputs are summed unweighted.
        NO_SCALE = 0,
        /// Each expert's output is multiplied by the token's affinity for it.
        POST_SCALE = 1,
        /// The input is scaled before the expert MLP (context encoding).
        PRE_SCALE = 2,
        /// Pre-scaling applied later in the context-encoding expert MLP.
        PRE_SCALE_DELAYED = 3,
    }

    /// How fused QKV weights are packed.
    #[nki_enum]
    pub enum QKVWeightLayout {
        /// `[H, I]` as in the checkpoint.
        CONTIGUOUS = 0,
        /// Microscaling: four H rows packed per element.
        MX_CONTIGUOUS = 1,
        /// Microscaling, packed in the DMA-transpose order.
        MX_INTERLEAVED = 2,
    }
}
