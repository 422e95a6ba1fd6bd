//! What several kernels' tests share: the leading fields of their
//! configurations and what those fields alone give, and the rounding of their
//! inputs.
//!
//! A configuration's `Debug` form is its case name, and the seed of its inputs
//! is drawn from that name ([`crate::common::seed_of`]), so the shared fields
//! cannot move into a nested struct without changing every case's inputs:
//! these macros declare them in place, flat and first.

use crate::common::as_dtype;
use nki::Dtype;

/// Rounds each of `values` to `dtype` in place, as the device would hold them.
pub(crate) fn round_to<'a>(dtype: Dtype, values: impl IntoIterator<Item = &'a mut Vec<f64>>) {
    for v in values {
        *v = as_dtype(v, dtype);
    }
}

/// Declares a test configuration (`Clone, Copy, Debug`) whose first fields are
/// the `[leading]` ones, followed by the fields given.
macro_rules! flat_case {
    ([$($leading:tt)*] $(#[$attr:meta])* struct $name:ident { $($fields:tt)* }) => {
        $(#[$attr])*
        #[derive(Clone, Copy, Debug)]
        struct $name {
            $($leading)*
            $($fields)*
        }
    };
}
pub(crate) use flat_case;

/// Declares a test configuration (`Clone, Copy, Debug`) whose first fields are
/// the launch's `lnc` programs and the `[B, S, H]` tokens (`lnc, b, s, h`),
/// followed by the fields given; and its [`Programs`].
macro_rules! token_case {
    ($(#[$attr:meta])* struct $name:ident { $($fields:tt)* }) => {
        $crate::support::flat_case!([lnc: usize, b: usize, s: usize, h: usize,] $(#[$attr])* struct $name { $($fields)* });

        impl $crate::support::Programs for $name {
            fn lnc(&self) -> usize {
                self.lnc
            }
        }
    };
}
pub(crate) use token_case;

/// The launch size of a [`token_case!`] configuration, for code generic over
/// several kinds of them.
pub(crate) trait Programs {
    /// The LNC size.
    fn lnc(&self) -> usize;
}

/// Declares a blockwise mixture-of-experts test configuration (`Clone, Copy,
/// Debug`) whose first fields are its sizes and token skipping (`t, h, i, e,
/// k, b, skip_token`), followed by the fields given; and its `rows()`, the
/// `T'` token rows its inputs hold.
macro_rules! blockwise_case {
    ($(#[$attr:meta])* struct $name:ident { $($fields:tt)* }) => {
        $crate::support::flat_case! {
            [
                /// Tokens (without the padding row).
                t: usize,
                h: usize,
                i: usize,
                e: usize,
                /// Experts per token.
                k: usize,
                /// Positions per block.
                b: usize,
                /// `skip_token`: no zero padding row (`T' = T`, else `T + 1` rows).
                skip_token: bool,
            ]
            $(#[$attr])* struct $name { $($fields)* }
        }

        impl $name {
            /// `T'`: the tokens, plus the zero padding row unless `skip_token`.
            fn rows(&self) -> usize {
                if self.skip_token { self.t } else { self.t + 1 }
            }
        }
    };
}
pub(crate) use blockwise_case;

/// Declares a blockwise test configuration of MX experts: the
/// [`blockwise_case!`] fields, then the weights' MX element type `w`, the
/// biases `bias`, the activation `act` and the `routing`, followed by the
/// fields given; and its `expert(tokens)`, one expert's `mlp_tkg` MX shape
/// over `tokens` rows on one program.
macro_rules! mx_blockwise_case {
    ($(#[$attr:meta])* struct $name:ident { $($fields:tt)* }) => {
        $crate::support::blockwise_case! {
            $(#[$attr])*
            struct $name {
                /// The weights' MX element type.
                w: $crate::mlp_tkg_mx::W,
                /// Gate/up and down biases.
                bias: bool,
                act: nkilib::utils::common_types::ActFnType,
                routing: $crate::moe_cte::Routing,
                $($fields)*
            }
        }

        impl $name {
            /// One expert's `mlp_tkg` MX shape over `tokens` rows on one program.
            fn expert(&self, tokens: usize) -> $crate::mlp_tkg_mx::Mx {
                $crate::mlp_tkg_mx::mx(1, tokens, self.h, self.i, self.w, false, self.bias)
            }
        }
    };
}
pub(crate) use mx_blockwise_case;
