//! Slice kernels compiled for the widest vector unit the CPU has.
//!
//! The crate is built for the baseline x86-64 (SSE2), so a plain loop runs
//! four lanes at a time. [`wide_fn!`] compiles one `#[inline(always)]` body
//! three times — for AVX-512 (F, VL, BW, DQ: every AVX-512 CPU since
//! Skylake-X and Zen 4; F alone trips an LLVM instruction-selection bug on
//! 256-bit masks), for AVX2 and for the baseline — and picks one
//! per call from the CPU's features (a cached load). The three run the same
//! operations in the same order (Rust never reassociates or fuses float
//! arithmetic), so results are bit-identical whichever runs.
//!
//! The body must not call closures holding intrinsics: a closure is compiled
//! without its caller's `#[target_feature]` (see `docs/ARCHITECTURE.md`).

/// `wide_fn!(/// docs  pub fn name(arg: Ty, ...) -> Ret = body_fn;)` defines
/// `name`, which runs `body_fn` (an `#[inline(always)]` function with the same
/// parameters) compiled for AVX-512 or AVX2 when the CPU has them.
macro_rules! wide_fn {
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? = $body:path;) => {
        $(#[$meta])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq")]
                fn avx512($($arg: $ty),*) $(-> $ret)? {
                    $body($($arg),*)
                }
                #[target_feature(enable = "avx2")]
                fn avx2($($arg: $ty),*) $(-> $ret)? {
                    $body($($arg),*)
                }
                if std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512vl")
                    && std::arch::is_x86_feature_detected!("avx512bw")
                    && std::arch::is_x86_feature_detected!("avx512dq")
                {
                    // SAFETY: the CPU supports these AVX-512 subsets (checked just above).
                    return unsafe { avx512($($arg),*) };
                }
                if std::arch::is_x86_feature_detected!("avx2") {
                    // SAFETY: the CPU supports AVX2 (checked just above).
                    return unsafe { avx2($($arg),*) };
                }
            }
            $body($($arg),*)
        }
    };
}

pub(crate) use wide_fn;
