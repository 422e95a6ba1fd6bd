//! The limits on the softmax scale that the kernels' rules share.
//!
//! Every kernel multiplies scores by the scale as an fp32 immediate, so it must
//! be a finite float32 value: NaN, an infinity or an `f64` beyond the float32
//! range turns every score into NaN or ±inf.
//!
//! A kernel that masks by writing FLOAT32_MIN into a score and then multiplies by
//! the scale needs more: `FLOAT32_MIN × scale` must stay far below every real
//! scaled score, so that its `exp` vanishes. A zero scale makes masked and real
//! scores equal, a negative one makes masked scores the largest, and a tiny
//! positive one brings `FLOAT32_MIN × scale` within reach of the real scores:
//! from [`MIN_MASKED_SCALE`] up, a masked score sits at least `3.4e8` below the
//! row max, far past where `exp` underflows to zero. Which configurations of
//! which kernel mask this way is stated at each kernel's rule.

/// The smallest scale that keeps FLOAT32_MIN-masked scores masked after scaling.
pub const MIN_MASKED_SCALE: f64 = 1e-30;

/// Whether `scale` is a finite float32 value.
pub const fn is_finite_f32(scale: f64) -> bool {
    scale >= f32::MIN as f64 && scale <= f32::MAX as f64
}

/// Whether a FLOAT32_MIN mask multiplied by `scale` still masks.
pub const fn keeps_masks(scale: f64) -> bool {
    scale >= MIN_MASKED_SCALE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finite_means_finite_in_float32() {
        for ok in [0.0, -0.0, 1.0, -2.5, f32::MAX as f64, f32::MIN as f64, 1e-300] {
            assert!(is_finite_f32(ok), "{ok}");
        }
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e39, -1e300] {
            assert!(!is_finite_f32(bad), "{bad}");
        }
    }

    #[test]
    fn the_threshold_keeps_masked_scores_far_below_real_ones() {
        // At the threshold the scaled sentinel is below -3.4e8, so exp of it minus
        // any row max of at least 0 underflows in f32.
        let sentinel = f32::MIN * MIN_MASKED_SCALE as f32;
        assert!(sentinel < -3.4e8 && (sentinel - 0.0).exp() == 0.0);
        assert!(keeps_masks(MIN_MASKED_SCALE) && keeps_masks(0.125) && keeps_masks(1e30));
        assert!(!keeps_masks(0.0) && !keeps_masks(-0.125) && !keeps_masks(1e-31) && !keeps_masks(f64::NAN));
    }
}
