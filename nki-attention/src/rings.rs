//! Replica groups of the ring kernels, checked in `const` context, and the
//! launch checks both ring APIs share.

use crate::dtypes::ParamDtypes;
use crate::ring_config::{RingDims, RingFeatures};
use nki::{Launch, NkiError, Result, Tensor};

/// How a set of replica groups fails to describe rings of `num_workers` ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GroupProblem {
    /// A group does not hold `num_workers` ranks.
    Size,
    /// The rank ids are not each of `0..groups·num_workers` exactly once.
    Ranks,
}

/// Number of rings: one when `groups` is empty (all ranks of the launch).
pub(crate) const fn ring_count(groups: &[&[i64]]) -> usize {
    if groups.is_empty() { 1 } else { groups.len() }
}

/// The first problem of `groups` as rings of `num_workers` ranks, if any.
pub(crate) const fn group_problem(groups: &[&[i64]], num_workers: i64) -> Option<GroupProblem> {
    let mut g = 0;
    while g < groups.len() {
        if groups[g].len() as i64 != num_workers {
            return Some(GroupProblem::Size);
        }
        g += 1;
    }
    // Count the occurrences of every id in 0..ranks (the sizes above make the total right).
    let ranks = groups.len() * if num_workers > 0 { num_workers as usize } else { 0 };
    let mut id = 0;
    while id < ranks {
        let mut seen = 0;
        let mut g = 0;
        while g < groups.len() {
            let mut j = 0;
            while j < groups[g].len() {
                if groups[g][j] == id as i64 {
                    seen += 1;
                }
                j += 1;
            }
            g += 1;
        }
        if seen != 1 {
            return Some(GroupProblem::Ranks);
        }
        id += 1;
    }
    None
}

/// A tensor's shape as the kernels' `i64`s.
pub(crate) fn shape_i64(t: &Tensor) -> Vec<i64> {
    t.shape().iter().map(|&x| x as i64).collect()
}

/// Checks that `launch` runs `rings` rings of `workers` ranks and that each named
/// list holds one tensor per rank.
pub(crate) fn check_ring_launch(launch: &Launch, rings: usize, workers: i64, lists: &[(&str, &[Tensor])]) -> Result<()> {
    let ranks = rings * workers as usize;
    if launch.num_ranks() != ranks {
        return Err(NkiError::argument(
            "ranks",
            launch.num_ranks(),
            &format!("the launch must have {ranks} ranks ({rings} ring(s) of {workers} workers)"),
        ));
    }
    for (name, list) in lists {
        if list.len() != ranks {
            return Err(NkiError::argument(name, format!("{} tensors", list.len()), &format!("needs one tensor per rank ({ranks})")));
        }
    }
    Ok(())
}

/// The checks both passes run first on a launch's per-rank inputs `lists`:
/// the ranks and one tensor of each kind per rank ([`check_ring_launch`]) and
/// every tensor's dtype against the kernel's contract `dtypes`.
pub(crate) fn check_ring_tensors(launch: &Launch, ring: &RingFeatures, dtypes: &ParamDtypes, lists: &[(&str, &[Tensor])]) -> Result<()> {
    check_ring_launch(launch, ring.rings(), ring.num_workers, lists)?;
    for (param, list) in lists {
        dtypes.check_each(param, list)?;
    }
    Ok(())
}

/// The shapes `got` of the first rank's `q` (`q0`) against the configuration's
/// dims, when it has them.
pub(crate) fn check_dims(ring: &RingFeatures, got: RingDims, q0: &[i64]) -> Result<()> {
    match ring.dims {
        Some(dims) if dims != got => {
            Err(NkiError::argument("q", format!("shape {q0:?}"), &format!("the configuration's dims are {dims:?}")))
        }
        _ => Ok(()),
    }
}

/// The KV heads of a launch: the configured ones, else those of the first
/// rank's `k` (`heads`, the query heads, when `k` is not 4-d; its check names it).
pub(crate) fn kv_heads_of(ring: &RingFeatures, k: &Tensor, heads: i64) -> i64 {
    let k0 = shape_i64(k);
    ring.kv_heads.unwrap_or(if k0.len() == 4 { k0[1] } else { heads })
}

/// Sets the feature arguments both ring kernels' `Call` builders take alike on
/// `$call` for rank `$r`: the ring, the causal mask, the sinks, the masks, the
/// soft cap, the segment ids and the bias of `$inputs` under `$ring`'s features.
macro_rules! ring_call_features {
    ($call:expr, $ring:expr, $inputs:expr, $r:expr) => {{
        let groups: Vec<Vec<i64>> = $ring.replica_groups.iter().map(|g| g.to_vec()).collect();
        $call
            .replica_groups((!groups.is_empty()).then_some(groups))
            .num_workers($ring.num_workers)
            .use_causal_mask($ring.causal)
            .sinks($inputs.sinks)
            .window_left($ring.window.map(|w| w.0))
            .window_right($ring.window.map(|w| w.1))
            .chunk_size($ring.chunk_size)
            .soft_cap($ring.soft_cap)
            .q_segment_ids($inputs.segment_ids.map(|(q, _)| &q[$r]))
            .kv_segment_ids($inputs.segment_ids.map(|(_, kv)| &kv[$r]))
            .bias($inputs.bias.map(|bias| &bias[$r]))
    }};
}
pub(crate) use ring_call_features;

/// Segment ids are exact in the kernels' fp32 comparisons below this magnitude.
pub(crate) const SEGMENT_ID_LIMIT: i64 = 1 << 24;

/// Checks the optional feature inputs of a ring launch over `ranks` ranks with
/// `[b, h, s]` query rows per rank and `num_workers` workers: `sinks` float32
/// `[h]` with finite logits, segment ids and bias as [`check_segment_ids`] and
/// [`check_bias`] say (the bias holds each rank's rows against every key).
pub(crate) fn check_feature_inputs(
    sinks: Option<&Tensor>,
    segment_ids: Option<(&[Tensor], &[Tensor])>,
    bias: Option<&[Tensor]>,
    ranks: usize,
    [b, h, s]: [i64; 3],
    num_workers: i64,
) -> Result<()> {
    if let Some(sinks) = sinks {
        if sinks.shape() != [h as usize] || sinks.dtype() != nki::Dtype::F32 {
            return Err(NkiError::argument(
                "sinks",
                format!("{} {:?}", sinks.dtype(), sinks.shape()),
                &format!("must be float32 [{h}], one logit per query head"),
            ));
        }
        if let Some(bad) = sinks.to_f32_vec().into_iter().find(|x| !x.is_finite()) {
            return Err(NkiError::argument("sinks", bad, "every sink logit must be finite"));
        }
    }
    if let Some((q_ids, kv_ids)) = segment_ids {
        check_segment_ids(q_ids, kv_ids, ranks, [b, s])?;
    }
    if let Some(bias) = bias {
        check_bias(bias, ranks, [b, h, s, s * num_workers])?;
    }
    Ok(())
}

/// Checks the per-rank segment ids: one int32 `[b, seqlen]` tensor per rank for
/// the queries and for the keys, every id below [`SEGMENT_ID_LIMIT`] in magnitude.
pub(crate) fn check_segment_ids(q_ids: &[Tensor], kv_ids: &[Tensor], ranks: usize, b_s: [i64; 2]) -> Result<()> {
    for (name, list) in [("q_segment_ids", q_ids), ("kv_segment_ids", kv_ids)] {
        if list.len() != ranks {
            return Err(NkiError::argument(name, format!("{} tensors", list.len()), &format!("needs one tensor per rank ({ranks})")));
        }
        for (r, t) in list.iter().enumerate() {
            if shape_i64(t) != b_s || t.dtype() != nki::Dtype::I32 {
                return Err(NkiError::argument(
                    &format!("{name}[{r}]"),
                    format!("{} {:?}", t.dtype(), t.shape()),
                    &format!("must be int32 {b_s:?} ([b, seqlen])"),
                ));
            }
            if let Some(bad) = t.to_i64_vec().into_iter().find(|x| x.abs() >= SEGMENT_ID_LIMIT) {
                return Err(NkiError::argument(&format!("{name}[{r}]"), bad, "segment ids must be below 2^24 in magnitude"));
            }
        }
    }
    Ok(())
}

/// Checks the per-rank bias: one finite float32 tensor of shape `want` per rank.
pub(crate) fn check_bias(bias: &[Tensor], ranks: usize, want: [i64; 4]) -> Result<()> {
    if bias.len() != ranks {
        return Err(NkiError::argument("bias", format!("{} tensors", bias.len()), &format!("needs one tensor per rank ({ranks})")));
    }
    for (r, t) in bias.iter().enumerate() {
        if shape_i64(t) != want || t.dtype() != nki::Dtype::F32 {
            return Err(NkiError::argument(
                &format!("bias[{r}]"),
                format!("{} {:?}", t.dtype(), t.shape()),
                &format!("must be float32 {want:?} ([b, h, seqlen, num_workers·seqlen])"),
            ));
        }
        if let Some(bad) = t.to_f32_vec().into_iter().find(|x| !x.is_finite()) {
            return Err(NkiError::argument(&format!("bias[{r}]"), bad, "every bias value must be finite"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_must_be_rings_over_every_rank_once() {
        assert_eq!(group_problem(&[], 4), None);
        assert_eq!(group_problem(&[&[0, 4], &[1, 5], &[2, 6], &[3, 7]], 2), None);
        assert_eq!(group_problem(&[&[0, 1], &[2]], 2), Some(GroupProblem::Size));
        assert_eq!(group_problem(&[&[0, 1], &[1, 2]], 2), Some(GroupProblem::Ranks));
        assert_eq!(group_problem(&[&[0, 5]], 2), Some(GroupProblem::Ranks));
        assert_eq!(ring_count(&[&[0, 1], &[2, 3]]), 2);
        assert_eq!(ring_count(&[]), 1);
    }
}
