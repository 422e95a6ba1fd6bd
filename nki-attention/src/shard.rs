//! Whole-sequence tensors to and from the ranks of a ring.
//!
//! Ring kernels see `S_local = S_total / W` tokens per rank. [`shard`] cuts a
//! global `[b, h, S_total, d]` tensor into per-rank tensors in a kernel's layout,
//! [`unshard`] and [`unshard_lse`] put per-rank results back in global order.
//!
//! ```
//! use nki_attention::shard::{SeqLayout, shard, unshard};
//! use nki_core::{Dtype, Tensor};
//! let x = Tensor::from_f32(&[1, 1, 4, 1], &[0.0, 1.0, 2.0, 3.0], Dtype::F32).unwrap();
//! let parts = shard(&x, 2, SeqLayout::Striped, false).unwrap();
//! assert_eq!(parts[1].to_f32_vec(), vec![1.0, 3.0]); // tokens 1 and 3
//! assert_eq!(unshard(&parts, SeqLayout::Striped, false).unwrap().to_f32_vec(), x.to_f32_vec());
//! ```

use nki::tensor::checked_numel;
use nki::{NkiError, Result, Tensor};

/// How a sequence is split across the `W` ranks of a ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeqLayout {
    /// Rank `r` holds tokens `[r·S_local, (r+1)·S_local)`.
    Contiguous,
    /// Rank `r` holds tokens `t` with `t mod W == r` (local `i` is global `i·W + r`).
    Striped,
    /// The sequence cut into `2W` chunks of `S_local / 2` tokens; rank `r` holds
    /// chunks `r` and `2W-1-r` (balances the causal work across ranks).
    Zigzag,
}

impl SeqLayout {
    /// Every layout, in the order the CLI lists them.
    pub const ALL: [SeqLayout; 3] = [SeqLayout::Contiguous, SeqLayout::Striped, SeqLayout::Zigzag];

    /// The layout's name (`contiguous`, `striped`, `zigzag`).
    pub const fn name(self) -> &'static str {
        match self {
            SeqLayout::Contiguous => "contiguous",
            SeqLayout::Striped => "striped",
            SeqLayout::Zigzag => "zigzag",
        }
    }

    /// The layout called `name`.
    pub fn parse(name: &str) -> Option<SeqLayout> {
        SeqLayout::ALL.into_iter().find(|l| l.name() == name)
    }

    /// Tokens each rank's share must be a multiple of (zigzag halves it).
    pub const fn unit(self) -> usize {
        match self {
            SeqLayout::Zigzag => 2,
            _ => 1,
        }
    }

    /// The global position of local token `i` of ring position `r`.
    pub fn global(self, r: usize, i: usize, workers: usize, s_local: usize) -> usize {
        match self {
            SeqLayout::Contiguous => r * s_local + i,
            SeqLayout::Striped => i * workers + r,
            SeqLayout::Zigzag => {
                let half = s_local / 2;
                if i < half { r * half + i } else { (2 * workers - 1 - r) * half + i - half }
            }
        }
    }
}

/// Tokens per rank when `s_total` tokens are split over `workers` ranks, each
/// rank's share a multiple of `unit`.
pub fn per_rank(s_total: usize, workers: usize, unit: usize) -> Result<usize> {
    if workers == 0 {
        return Err(NkiError::argument("workers", 0, "a ring needs at least one worker"));
    }
    if unit.checked_mul(workers).is_none_or(|m| !s_total.is_multiple_of(m)) {
        let rule = if unit == 1 {
            format!("must be a multiple of the {workers} workers")
        } else {
            format!("must be a multiple of {unit} x the {workers} workers")
        };
        return Err(NkiError::argument("S_total", s_total, &rule));
    }
    Ok(s_total / workers)
}

/// `[b, h, s, d]` of a 4-d tensor, or an error naming `param`.
fn dims4(param: &str, t: &Tensor) -> Result<[usize; 4]> {
    <[usize; 4]>::try_from(t.shape())
        .map_err(|_| NkiError::argument(param, format!("shape {:?}", t.shape()), "must be 4-d [b, h, seqlen, d]"))
}

/// Splits `global` (`[b, h, S_total, d]`) into `workers` tensors of its dtype,
/// `[b, h, S_local, d]` each (`[b, h, d, S_local]` when `d_major`).
pub fn shard(global: &Tensor, workers: usize, layout: SeqLayout, d_major: bool) -> Result<Vec<Tensor>> {
    let [b, h, st, d] = dims4("global", global)?;
    let sl = per_rank(st, workers, layout.unit())?;
    let shape = if d_major { [b, h, d, sl] } else { [b, h, sl, d] };
    let n = checked_numel(&shape)?;
    let g = global.to_f32_vec();
    (0..workers)
        .map(|r| {
            let mut vals = vec![0f32; n];
            for bh in 0..b * h {
                for i in 0..sl {
                    let src = (bh * st + layout.global(r, i, workers, sl)) * d;
                    for c in 0..d {
                        let dst = if d_major { (bh * d + c) * sl + i } else { (bh * sl + i) * d + c };
                        vals[dst] = g[src + c];
                    }
                }
            }
            Tensor::from_f32(&shape, &vals, global.dtype())
        })
        .collect()
}

/// Splits whole-sequence segment ids (`[b, S_total]`) into per-rank
/// `[b, S_local]` tensors of their dtype, in the ring's layout.
pub fn shard_ids(global: &Tensor, workers: usize, layout: SeqLayout) -> Result<Vec<Tensor>> {
    let [b, st] = <[usize; 2]>::try_from(global.shape())
        .map_err(|_| NkiError::argument("segment_ids", format!("shape {:?}", global.shape()), "must be 2-d [b, S_total]"))?;
    shard(&global.reshape(&[b, 1, st, 1])?, workers, layout, false)?.iter().map(|t| t.reshape(&[b, st / workers])).collect()
}

/// Splits a whole-sequence bias (`[b, h, S_total, S_total]`, query rows by key
/// columns) into per-rank `[b, h, S_local, S_total]` tensors: the rows of each
/// rank's queries in its local order, every key column at its global position.
pub fn shard_bias(global: &Tensor, workers: usize, layout: SeqLayout) -> Result<Vec<Tensor>> {
    let [b, h, st, cols] = dims4("bias", global)?;
    if cols != st {
        return Err(NkiError::argument("bias", format!("shape {:?}", global.shape()), "must be [b, h, S_total, S_total]"));
    }
    shard(&global.reshape(&[b, h, st, st])?, workers, layout, false)
}

/// Puts per-rank `[b, h, S_local, d]` tensors (`[b, h, d, S_local]` when
/// `d_major`) back into one `[b, h, S_total, d]` tensor of their dtype.
pub fn unshard(parts: &[Tensor], layout: SeqLayout, d_major: bool) -> Result<Tensor> {
    let first = parts.first().ok_or_else(|| NkiError::argument("parts", "[]", "needs one tensor per rank"))?;
    let [b, h, x, y] = dims4("parts[0]", first)?;
    let (sl, d) = if d_major { (y, x) } else { (x, y) };
    if !sl.is_multiple_of(layout.unit()) {
        return Err(NkiError::argument("parts[0]", format!("shape {:?}", first.shape()), "zigzag ranks hold an even number of tokens"));
    }
    let (w, st) = (parts.len(), parts.len().saturating_mul(sl));
    let mut vals = vec![0f32; checked_numel(&[b, h, st, d])?];
    for (r, p) in parts.iter().enumerate() {
        if p.shape() != first.shape() {
            return Err(NkiError::argument(
                &format!("parts[{r}]"),
                format!("shape {:?}", p.shape()),
                &format!("must match parts[0] {:?}", first.shape()),
            ));
        }
        let local = p.to_f32_vec();
        for bh in 0..b * h {
            for i in 0..sl {
                let dst = (bh * st + layout.global(r, i, w, sl)) * d;
                for c in 0..d {
                    let src = if d_major { (bh * d + c) * sl + i } else { (bh * sl + i) * d + c };
                    vals[dst + c] = local[src];
                }
            }
        }
    }
    Tensor::from_f32(&[b, h, st, d], &vals, first.dtype())
}

/// Splits a whole-sequence log-sum-exp (`[b, h, S_total]`) into per-rank
/// `[b, h, 128, S_local / 128]` tensors (row `128 g + p` at `[.., p, g]`), the
/// layout `ring_attention_spmd_bwd` reads.
pub fn shard_lse(global: &Tensor, workers: usize, layout: SeqLayout) -> Result<Vec<Tensor>> {
    let [b, h, st] = <[usize; 3]>::try_from(global.shape())
        .map_err(|_| NkiError::argument("lse", format!("shape {:?}", global.shape()), "must be 3-d [b, h, S_total]"))?;
    let sl = per_rank(st, workers, 128)?;
    let g = sl / 128;
    let vals = global.to_f32_vec();
    (0..workers)
        .map(|r| {
            let mut local = vec![0f32; b * h * sl];
            for bh in 0..b * h {
                for i in 0..sl {
                    local[(bh * 128 + i % 128) * g + i / 128] = vals[bh * st + layout.global(r, i, workers, sl)];
                }
            }
            Tensor::from_f32(&[b, h, 128, g], &local, global.dtype())
        })
        .collect()
}

/// Puts per-rank log-sum-exps (`[b, h, 128, S_local / 128]`, row `128 g + p` at
/// `[.., p, g]`) back into one `[b, h, S_total]` tensor.
pub fn unshard_lse(parts: &[Tensor], layout: SeqLayout) -> Result<Tensor> {
    let first = parts.first().ok_or_else(|| NkiError::argument("parts", "[]", "needs one tensor per rank"))?;
    let [b, h, p128, groups] = dims4("parts[0]", first)?;
    if p128 != 128 {
        return Err(NkiError::argument("parts[0]", format!("shape {:?}", first.shape()), "an LSE is [b, h, 128, S_local / 128]"));
    }
    let (w, sl) = (parts.len(), 128 * groups);
    let st = w.saturating_mul(sl);
    let mut vals = vec![0f32; checked_numel(&[b, h, st])?];
    for (r, p) in parts.iter().enumerate() {
        let local = p.to_f32_vec();
        for bh in 0..b * h {
            for i in 0..sl {
                vals[bh * st + layout.global(r, i, w, sl)] = local[(bh * 128 + i % 128) * groups + i / 128];
            }
        }
    }
    Tensor::from_f32(&[b, h, st], &vals, first.dtype())
}

#[cfg(test)]
mod tests {
    use super::*;
    use nki::Dtype;

    #[test]
    fn shard_and_unshard_round_trip_in_both_layouts() {
        let (b, h, st, d) = (1, 2, 12, 3);
        let vals: Vec<f32> = (0..b * h * st * d).map(|i| i as f32).collect();
        let x = Tensor::from_f32(&[b, h, st, d], &vals, Dtype::F32).unwrap();
        for layout in SeqLayout::ALL {
            for d_major in [false, true] {
                let parts = shard(&x, 3, layout, d_major).unwrap();
                assert_eq!(parts[0].shape(), if d_major { &[1, 2, 3, 4] } else { &[1, 2, 4, 3] });
                // Local token 1 of rank 2, head 1, feature 0: [0, 1, 1, 0] or [0, 1, 0, 1].
                let t = layout.global(2, 1, 3, 4);
                let local = parts[2].to_f32_vec();
                let at = if d_major { 3 * 4 + 1 } else { (4 + 1) * 3 };
                assert_eq!(local[at], vals[(st + t) * d], "{layout:?} d_major={d_major}");
                assert_eq!(unshard(&parts, layout, d_major).unwrap().to_f32_vec(), vals);
            }
        }
        assert_eq!(SeqLayout::Striped.global(2, 1, 3, 4), 5);
        assert_eq!(SeqLayout::Contiguous.global(2, 1, 3, 4), 9);
        assert!(shard(&x, 5, SeqLayout::Contiguous, false).unwrap_err().message.contains("multiple of the 5 workers"));
        assert_eq!(
            shard(&x, 0, SeqLayout::Contiguous, false).unwrap_err().message,
            "invalid workers = 0: a ring needs at least one worker"
        );
    }

    #[test]
    fn zigzag_rank_r_holds_chunks_r_and_2w_minus_1_minus_r() {
        // W = 3, S_local = 4: chunks of 2 tokens, rank 0 holds 0 and 5, rank 1 holds 1 and 4, rank 2 holds 2 and 3.
        let held: Vec<Vec<usize>> = (0..3).map(|r| (0..4).map(|i| SeqLayout::Zigzag.global(r, i, 3, 4)).collect()).collect();
        assert_eq!(held, vec![vec![0, 1, 10, 11], vec![2, 3, 8, 9], vec![4, 5, 6, 7]]);
        let x = Tensor::from_f32(&[1, 1, 6, 1], &[0.0; 6], Dtype::F32).unwrap();
        assert!(shard(&x, 6, SeqLayout::Zigzag, false).unwrap_err().message.contains("multiple of 2 x the 6 workers"));
        assert_eq!(SeqLayout::parse("zigzag"), Some(SeqLayout::Zigzag));
        assert!(SeqLayout::ALL.iter().all(|&l| SeqLayout::parse(l.name()) == Some(l)));
    }

    #[test]
    fn lse_shards_round_trip() {
        let vals: Vec<f32> = (0..2 * 1024).map(|i| i as f32).collect();
        let g = Tensor::from_f32(&[1, 2, 1024], &vals, Dtype::F32).unwrap();
        for layout in SeqLayout::ALL {
            let parts = shard_lse(&g, 4, layout).unwrap();
            assert_eq!(parts[0].shape(), &[1, 2, 128, 2]);
            assert_eq!(unshard_lse(&parts, layout).unwrap().to_f32_vec(), vals, "{layout:?}");
        }
        assert!(shard_lse(&g, 3, SeqLayout::Contiguous).unwrap_err().message.contains("multiple of 128 x the 3 workers"));
        assert!(shard_lse(&g, 0, SeqLayout::Contiguous).unwrap_err().message.contains("at least one worker"));
    }

    #[test]
    fn lse_rows_follow_the_group_layout() {
        // Two ranks of 256 tokens: element [p, g] is local row 128 g + p.
        let part = |r: usize| {
            let vals: Vec<f32> = (0..256).map(|k| (r * 1000 + (k % 2) * 128 + k / 2) as f32).collect();
            Tensor::from_f32(&[1, 1, 128, 2], &vals, Dtype::F32).unwrap()
        };
        let g = unshard_lse(&[part(0), part(1)], SeqLayout::Contiguous).unwrap().to_f32_vec();
        assert_eq!(g.len(), 512);
        assert!((0..512).all(|t| g[t] == ((t / 256) * 1000 + t % 256) as f32));
    }
}
