//! The feature cases shared by the ring forward and backward tests: the global
//! problem (q, k, v and the features on top), the masks of one run, and the
//! soft-cap, segment-id and bias sweeps, each run on the kernel's own
//! [`FeatureCase`] (which runs the ring and checks it against its float64 reference).

use super::{as_dtype, packed_segment_ids, tensor, uniform};
use nki::attention::reference::{Dims, Features};
use nki::attention::ring_bwd::RingBwdConfig;
use nki::attention::ring_fwd::RingFwdConfig;
use nki::attention::shard::SeqLayout::{self, Contiguous, Striped, Zigzag};
use nki::attention::shard::{shard_bias, shard_ids};
use nki::{Dtype, Precision, Tensor};

/// The layout and the masks of one run.
#[derive(Clone, Copy, Debug)]
pub struct Mask {
    pub layout: SeqLayout,
    pub causal: bool,
    pub window: Option<(usize, usize)>,
    pub chunk: Option<usize>,
    pub cap: Option<f64>,
}

impl Mask {
    /// `layout`, causal or not, without window, chunks or soft cap.
    pub const fn plain(layout: SeqLayout, causal: bool) -> Mask {
        Mask { layout, causal, window: None, chunk: None, cap: None }
    }

    /// The reference's features for this mask on top of `x`'s sinks, segment ids and bias.
    pub fn features(self, x: &Inputs) -> Features<'_> {
        Features {
            causal: self.causal,
            window: self.window,
            chunk: self.chunk,
            soft_cap: self.cap,
            sinks: x.sinks.as_deref(),
            segments: x.segments.as_ref().map(|(q, kv)| (q.as_slice(), kv.as_slice())),
            bias: x.bias.as_deref(),
        }
    }

    /// `cfg` with this mask's window, chunk size and soft cap.
    pub fn configure<C: MaskConfig>(self, mut cfg: C) -> C {
        if let Some((l, r)) = self.window {
            cfg = cfg.sliding_window(l as i64, r as i64);
        }
        if let Some(c) = self.chunk {
            cfg = cfg.chunk_size(c as i64);
        }
        if let Some(c) = self.cap {
            cfg = cfg.soft_cap(c);
        }
        cfg
    }
}

/// The mask setters the forward and backward ring configs share.
pub trait MaskConfig: Sized {
    fn sliding_window(self, left: i64, right: i64) -> Self;
    fn chunk_size(self, size: i64) -> Self;
    fn soft_cap(self, cap: f64) -> Self;
}

macro_rules! mask_config {
    ($($config:ty),*) => {$(
        impl MaskConfig for $config {
            fn sliding_window(self, left: i64, right: i64) -> Self {
                <$config>::sliding_window(self, left, right)
            }
            fn chunk_size(self, size: i64) -> Self {
                <$config>::chunk_size(self, size)
            }
            fn soft_cap(self, cap: f64) -> Self {
                <$config>::soft_cap(self, cap)
            }
        }
    )*};
}
mask_config!(RingFwdConfig, RingBwdConfig);

/// One global problem: `q` `[b, h, S, d]`, `k` and `v` `[b, h_kv, S, d]`, and
/// the features on top of them.
#[derive(Clone)]
pub struct Inputs {
    pub dims: Dims,
    pub q: Vec<f64>,
    pub k: Vec<f64>,
    pub v: Vec<f64>,
    /// One sink logit per query head.
    pub sinks: Option<Vec<f64>>,
    /// Global `(q, kv)` segment ids, `[b, S]` each.
    pub segments: Option<(Vec<i32>, Vec<i32>)>,
    /// Global bias `[b, h, S, S]`.
    pub bias: Option<Vec<f64>>,
    pub scale: f64,
}

/// The per-rank shards of a problem's sinks, segment ids and bias.
pub struct FeatureShards {
    pub sinks: Option<Tensor>,
    pub segments: Option<(Vec<Tensor>, Vec<Tensor>)>,
    pub bias: Option<Vec<Tensor>>,
}

impl FeatureShards {
    /// The `(q, kv)` segment-id shards as the configs take them.
    pub fn segment_ids(&self) -> Option<(&[Tensor], &[Tensor])> {
        self.segments.as_ref().map(|(q, kv)| (q.as_slice(), kv.as_slice()))
    }
}

impl Inputs {
    /// q, k and v uniform in [-1, 1) from `seed`, `seed + 1`, `seed + 2`; sinks
    /// (one per head, in [-1, 3)) from `sinks` when given; softmax scale 0.4.
    pub fn random(dims: Dims, seed: u64, sinks: Option<u64>) -> Inputs {
        let nq = dims.batch * dims.heads * dims.seqlen * dims.head_dim;
        let nk = dims.batch * dims.kv_heads * dims.seqlen * dims.head_dim;
        Inputs {
            dims,
            q: uniform(nq, seed, -1.0, 1.0),
            k: uniform(nk, seed + 1, -1.0, 1.0),
            v: uniform(nk, seed + 2, -1.0, 1.0),
            sinks: sinks.map(|s| uniform(dims.heads, s, -1.0, 3.0)),
            segments: None,
            bias: None,
            scale: 0.4,
        }
    }

    /// The problem with q, k and v rounded to `dtype` (what the kernel sees).
    pub fn rounded(&self, dtype: Dtype) -> Inputs {
        Inputs { q: as_dtype(&self.q, dtype), k: as_dtype(&self.k, dtype), v: as_dtype(&self.v, dtype), ..self.clone() }
    }

    /// The sinks (fp32), segment ids and bias (fp32) sharded over `w` ranks in `layout`.
    pub fn feature_shards(&self, w: usize, layout: SeqLayout) -> FeatureShards {
        let Dims { batch: b, heads: h, seqlen: s, .. } = self.dims;
        let ids = |x: &[i32]| {
            let t = Tensor::from_i64(&[b, s], &x.iter().map(|&i| i as i64).collect::<Vec<_>>(), Dtype::I32).unwrap();
            shard_ids(&t, w, layout).unwrap()
        };
        FeatureShards {
            sinks: self.sinks.as_ref().map(|x| tensor(&[h], x, Dtype::F32)),
            segments: self.segments.as_ref().map(|(q, kv)| (ids(q), ids(kv))),
            bias: self.bias.as_ref().map(|x| shard_bias(&tensor(&[b, h, s, s], x, Dtype::F32), w, layout).unwrap()),
        }
    }

    /// The name of one run in assertion messages.
    pub fn label(&self, w: usize, m: Mask, lnc: usize, precision: Precision) -> String {
        let (h, hk) = (self.dims.heads, self.dims.kv_heads);
        let bias = if self.bias.is_some() { " bias" } else { "" };
        format!("W{w} {m:?} lnc{lnc} {precision:?} h{h}:{hk} sinks={} segments={}{bias}", self.sinks.is_some(), self.segments.is_some())
    }
}

/// The masks the library has: contiguous non-causal and causal, striped causal.
pub const PLAIN: [Mask; 3] = [Mask::plain(Contiguous, false), Mask::plain(Contiguous, true), Mask::plain(Striped, true)];

/// One batch of `heads` query and `kv_heads` key heads, `w · s_local` tokens of `d`.
pub fn dims(w: usize, heads: usize, kv_heads: usize, s_local: usize, d: usize) -> Dims {
    Dims { batch: 1, heads, kv_heads, seqlen: w * s_local, head_dim: d }
}

/// A ring kernel's feature case: a global problem that runs on the ring and is
/// checked against the kernel's float64 reference.
pub trait FeatureCase: Sized {
    /// A problem of `dims` (with sinks or not) drawn from seeds past `seed`.
    fn draw(dims: Dims, sinks: bool, seed: u64) -> Self;
    /// The problem, for the sweeps to add features to.
    fn inputs(&mut self) -> &mut Inputs;
    /// Runs the ring of `w` ranks with `m`, `lnc` and `precision` and checks it.
    fn check(&self, w: usize, m: Mask, lnc: usize, precision: Precision);
}

/// Zigzag, windows (causal or two-sided) and chunks in every layout, at four
/// ring shapes drawn from seeds past `seed`, and four of the masks on eight ranks
/// of `S_local = eight.1` drawn from `eight.0`; fp32.
pub fn window_sweep<C: FeatureCase>(seed: u64, eight: (u64, usize)) {
    let masks = [
        Mask::plain(Zigzag, true),
        Mask { window: Some((100, 100)), ..Mask::plain(Contiguous, true) },
        Mask { window: Some((300, 0)), ..Mask::plain(Striped, true) },
        Mask { window: Some((77, 0)), ..Mask::plain(Zigzag, true) },
        Mask { window: Some((130, 40)), ..Mask::plain(Contiguous, false) },
        Mask { chunk: Some(96), ..Mask::plain(Contiguous, false) },
        Mask { chunk: Some(200), ..Mask::plain(Zigzag, true) },
        Mask { window: Some((50, 0)), chunk: Some(160), ..Mask::plain(Striped, true) },
    ];
    for (w, h, hk, lnc) in [(1, 2, 1, 1), (2, 2, 2, 2), (3, 4, 2, 1), (4, 2, 1, 2)] {
        let case = C::draw(dims(w, h, hk, 128, 16), w % 2 == 0, seed + 1 + w as u64);
        for m in masks {
            case.check(w, m, lnc, Precision::Fp32);
        }
    }
    let case = C::draw(dims(8, 2, 1, eight.1, 16), true, eight.0);
    for m in [masks[0], masks[1], masks[3], masks[4]] {
        case.check(8, m, 1, Precision::Fp32);
    }
}

/// Soft caps alone and with every other mask, at four ring shapes in fp32 and
/// one in hardware precision; inputs drawn from seeds past `seed`.
pub fn soft_cap_sweep<C: FeatureCase>(seed: u64) {
    let masks = [
        Mask { cap: Some(1.5), ..Mask::plain(Contiguous, false) },
        Mask { cap: Some(0.7), ..Mask::plain(Striped, true) },
        Mask { cap: Some(2.0), ..Mask::plain(Zigzag, true) },
        Mask { cap: Some(1.0), window: Some((90, 20)), chunk: Some(200), ..Mask::plain(Contiguous, false) },
        Mask { cap: Some(3.0), window: Some((150, 0)), ..Mask::plain(Zigzag, true) },
    ];
    for (w, h, hk, sl, lnc) in [(1, 2, 1, 128, 1), (2, 2, 2, 256, 2), (3, 4, 2, 128, 1), (4, 2, 1, 256, 2)] {
        // Larger queries so that the cap bends the logits.
        let mut case = C::draw(dims(w, h, hk, sl, 16), w % 2 == 1, seed + 1 + w as u64);
        case.inputs().q.iter_mut().for_each(|x| *x *= 6.0);
        for m in masks {
            case.check(w, m, lnc, Precision::Fp32);
        }
    }
    let mut case = C::draw(dims(4, 4, 2, 256, 64), true, seed + 9);
    case.inputs().q.iter_mut().for_each(|x| *x *= 6.0);
    case.check(4, masks[2], 2, Precision::Hardware);
}

/// The shapes of the segment-id and bias sweeps: `(w, h, h_kv, S_local, lnc, sinks)`.
const FEATURE_SHAPES: [(usize, usize, usize, usize, usize, bool); 4] =
    [(1, 2, 1, 128, 1, false), (2, 2, 2, 256, 2, true), (3, 4, 2, 128, 1, false), (4, 2, 1, 128, 2, true)];

/// Segment ids alone and with every other mask, two batches, at four ring
/// shapes in fp32 and one in hardware precision; inputs drawn from seeds past `seed`.
pub fn segment_sweep<C: FeatureCase>(seed: u64) {
    let masks = [
        Mask::plain(Contiguous, false),
        Mask::plain(Contiguous, true),
        Mask::plain(Striped, true),
        Mask::plain(Zigzag, true),
        Mask { window: Some((150, 0)), ..Mask::plain(Zigzag, true) },
        Mask { window: Some((90, 20)), chunk: Some(200), cap: Some(2.0), ..Mask::plain(Contiguous, false) },
    ];
    for (w, h, hk, sl, lnc, sinks) in FEATURE_SHAPES {
        let mut case = C::draw(Dims { batch: 2, ..dims(w, h, hk, sl, 16) }, sinks, seed + 1 + w as u64);
        case.inputs().segments = Some(packed_segment_ids(2, w * sl, seed + 11 + w as u64));
        for m in masks {
            case.check(w, m, lnc, Precision::Fp32);
        }
    }
    let mut case = C::draw(Dims { batch: 2, ..dims(4, 4, 2, 256, 64) }, false, seed + 19);
    case.inputs().segments = Some(packed_segment_ids(2, 1024, seed + 21));
    case.check(4, masks[3], 2, Precision::Hardware);
}

/// A bias alone, with every other mask and with segment ids, two batches, at
/// four ring shapes in fp32 and one in hardware precision; inputs drawn from
/// seeds past `seed`.
pub fn bias_sweep<C: FeatureCase>(seed: u64) {
    let masks = [
        Mask::plain(Contiguous, false),
        Mask::plain(Contiguous, true),
        Mask::plain(Striped, true),
        Mask::plain(Zigzag, true),
        Mask { window: Some((150, 0)), cap: Some(2.0), ..Mask::plain(Zigzag, true) },
        Mask { window: Some((90, 20)), chunk: Some(200), ..Mask::plain(Striped, true) },
    ];
    for (w, h, hk, sl, lnc, sinks) in FEATURE_SHAPES {
        let mut case = C::draw(Dims { batch: 2, ..dims(w, h, hk, sl, 16) }, sinks, seed + 1 + w as u64);
        let s = w * sl;
        case.inputs().bias = Some(uniform(2 * h * s * s, seed + 7 + w as u64, -2.0, 2.0));
        for m in masks {
            case.check(w, m, lnc, Precision::Fp32);
        }
        // With segment ids too.
        case.inputs().segments = Some(packed_segment_ids(2, s, seed + 11 + w as u64));
        case.check(w, masks[3], lnc, Precision::Fp32);
    }
    let mut case = C::draw(Dims { batch: 1, ..dims(4, 4, 2, 256, 64) }, true, seed + 19);
    case.inputs().bias = Some(uniform(4 * 1024 * 1024, seed + 23, -2.0, 2.0));
    case.check(4, masks[2], 2, Precision::Hardware);
}
