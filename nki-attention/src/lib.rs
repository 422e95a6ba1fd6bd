//! Attention kernels written in the nki-rs DSL: `attention_cte` (prefill flash
//! attention) and `attention_bwd` (its gradients), the ring-attention kernels
//! built on them, and `attention_tkg` (decode attention over a KV cache).

extern crate nki_core as nki;

/// `Display` for a rule enum through its `message`, and `assert_valid` and
/// `validate` for its configuration: the first broken rule as a panic (a compile
/// error in a `const`) or as an `Err` from the configuration's `rule_error`.
macro_rules! rules_of {
    ($config:ty, $rule:ty) => {
        impl ::std::fmt::Display for $rule {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.message())
            }
        }

        impl $config {
            /// Panics (a compile error in a `const`) when a rule is broken.
            pub const fn assert_valid(self) -> Self {
                if let Some(rule) = self.violation() {
                    panic!("{}", rule.message());
                }
                self
            }

            /// The first broken rule as an `Err` naming the parameter, its value and the rule.
            pub fn validate(&self) -> ::nki::Result<()> {
                match self.violation() {
                    Some(rule) => Err(self.rule_error(rule)),
                    None => Ok(()),
                }
            }
        }
    };
}

pub mod bwd;
pub mod cte;
pub mod dtypes;
pub mod reference;
pub mod reference_tkg;
pub mod ring_bwd;
pub mod ring_config;
mod ring_features;
pub mod ring_fwd;
mod ring_masks;
pub mod ring_rules;
mod rings;
pub mod scale;
pub mod shard;
pub mod tkg;

/// A configuration constant whose `assert_valid` runs at compile time (the body of
/// [`cte_config!`], [`ring_fwd_config!`] and [`ring_bwd_config!`]).
#[doc(hidden)]
#[macro_export]
macro_rules! __checked_config {
    ($ty:ty, $cfg:expr) => {{
        const CFG: $ty = $cfg;
        const _: () = {
            CFG.assert_valid();
        };
        CFG
    }};
}
