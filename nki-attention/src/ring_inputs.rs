//! Checks of the optional feature inputs both ring passes take, shared so the
//! forward and the backward refuse the same inputs with the same messages.

use nki::prelude::*;

/// Checks `sinks` (one float32 logit per query head), the segment ids (int32
/// `[b, s]`, both or neither) and `bias` (float32 `[b, heads, s, num_workers·s]`:
/// this rank's query rows against every key) for `b` batches of `heads` query
/// heads and `s` tokens per rank.
#[nki_helper]
pub(crate) fn check_feature_inputs(
    sinks: Option<Hbm>,
    q_segment_ids: Option<Hbm>,
    kv_segment_ids: Option<Hbm>,
    bias: Option<Hbm>,
    b: i64,
    heads: i64,
    s: i64,
    num_workers: i64,
) {
    if let Some(sk) = sinks {
        let sk_shape = sk.shape();
        assert!(sk.ndim() == 1 && sk_shape[0] == heads, "sinks must be [{heads}] (one logit per query head), got {sk_shape}");
        assert!(sk.dtype() == nl::float32, "sinks must be float32");
    }
    assert!(q_segment_ids.is_some() == kv_segment_ids.is_some(), "q_segment_ids and kv_segment_ids must both be set or both be None");
    if let Some(qs) = q_segment_ids {
        let qs_shape = qs.shape();
        assert!(qs.ndim() == 2 && qs_shape[0] == b && qs_shape[1] == s, "q_segment_ids must be [{b}, {s}], got {qs_shape}");
        assert!(qs.dtype() == nl::int32, "q_segment_ids must be int32");
    }
    if let Some(ks) = kv_segment_ids {
        let ks_shape = ks.shape();
        assert!(ks.ndim() == 2 && ks_shape[0] == b && ks_shape[1] == s, "kv_segment_ids must be [{b}, {s}], got {ks_shape}");
        assert!(ks.dtype() == nl::int32, "kv_segment_ids must be int32");
    }
    if let Some(bi) = bias {
        let bi_shape = bi.shape();
        let total = num_workers * s;
        assert!(
            bi.ndim() == 4 && bi_shape[0] == b && bi_shape[1] == heads && bi_shape[2] == s && bi_shape[3] == total,
            "bias must be [{b}, {heads}, {s}, {total}] (this rank's query rows, every key), got {bi_shape}"
        );
        assert!(bi.dtype() == nl::float32, "bias must be float32");
    }
}
