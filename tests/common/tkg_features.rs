//! Decode-attention data for the library's `AttnTKGConfig` features: fused RoPE
//! (`inv_freqs`, `rope_pos_ids`), masks from positions (`use_pos_id`, with a
//! sliding window from `start_pos_ids`) and the tensor layouts (`qk_in_sb`,
//! `out_in_sb`, `k_out_in_sb`); the expected `out` and `k_out` in float64.

use super::tkg::{Data, data};
use super::{as_dtype, seed_of, uniform};
use nki::attention::reference_tkg::{Shape, position_mask, rope};
use nki::attention::tkg::{TkgConfig, TkgInputs};
use nki::{Dtype, Tensor};

/// The features one case exercises.
#[derive(Clone, Copy, Debug, Default)]
pub struct Features {
    pub tp_k_prior: bool,
    pub sink: bool,
    pub rope: bool,
    pub pos_id: bool,
    /// A sliding window of this many positions (with `pos_id`).
    pub window: Option<usize>,
    /// `q` / `k_active` in the HBM layouts (`qk_in_sb=False`; with `rope`).
    pub qk_hbm: bool,
    pub out_in_sb: bool,
    pub k_out_in_sb: bool,
    pub no_fa_tiling: bool,
    /// A block cache of this block length (see [`as_block_cache`]); 0: flat.
    pub block_len: usize,
}

/// One case: the kernel's inputs (each `(name, shape, values, dtype)`, in
/// parameter order, optional ones by name) and the expected outputs.
pub struct Case {
    pub shape: Shape,
    pub features: Features,
    pub inputs: Vec<(&'static str, Vec<usize>, Vec<f64>, Dtype)>,
    pub out: Vec<f64>,
    pub k_out: Vec<f64>,
    /// The largest RoPE angle (0 without RoPE): its float32 range reduction bounds the error.
    pub max_angle: f64,
}

/// `(d, cols)` columns as `(cols, d)` rows (the HBM layouts of `q` and `k_active`).
fn rows_of(cols_major: &[f64], d: usize) -> Vec<f64> {
    let cols = cols_major.len() / d;
    (0..cols * d).map(|i| cols_major[(i % d) * cols + i / d]).collect()
}

/// Column `(b·heads + h)·s_a + t` of a `(d, cols)` tensor as `[b, h, :, t]` blocks
/// (the `(bs, heads, d, s_a)` layout of `out` and `k_out`).
fn blocks_of(cols_major: &[f64], d: usize, s_a: usize) -> Vec<f64> {
    let cols = cols_major.len() / d;
    (0..cols * d)
        .map(|i| {
            let (bh, e, t) = (i / (d * s_a), i / s_a % d, i % s_a);
            cols_major[e * cols + bh * s_a + t]
        })
        .collect()
}

/// The case `name` of shape `s` with features `f`, values rounded to `dtype`.
pub fn case(name: &str, s: Shape, f: Features, dtype: Dtype) -> Case {
    let x: Data = data(name, s, f.sink, false, dtype);
    let seed = seed_of(name) + 10;
    let (bs, sa, d, n) = (s.bs, s.s_active, s.d, s.bs * s.q_head * s.s_active);
    let split = s.curr_sprior - sa;
    // Each batch's own position, as the library's tests draw them; a window moves with each token.
    let pos: Vec<f64> = (0..bs * sa)
        .map(|i| {
            let p = (i / sa * 3 + split / 4 * 3) % split;
            (p + if f.window.is_some() { i % sa } else { 0 }) as f64
        })
        .collect();
    let start: Option<Vec<f64>> = f.window.map(|w| pos.iter().map(|&p| (p - w as f64 + 1.0).rem_euclid(s.curr_sprior as f64)).collect());
    let active: Vec<f64> = (0..sa * n).map(|i| f64::from(u8::from(i / n <= i % sa))).collect();
    let mask = if f.pos_id { position_mask(s, &pos, start.as_deref(), Some(&active)) } else { x.mask.clone() };
    let inv: Vec<f64> = as_dtype(&uniform(d / 2, seed, 0.0, 1.0), Dtype::F32);
    // With RoPE, q comes unscaled: the kernel scales it after rotating.
    let scale = if f.rope { (d as f64).sqrt() } else { 1.0 };
    let q_in = as_dtype(&x.q.iter().map(|v| v * scale).collect::<Vec<_>>(), dtype);
    let (q_att, k_att, max_angle) = if f.rope {
        let q_r = rope(&q_in, d, &inv, &pos, |c| c / (s.q_head * sa) * sa + c % sa);
        let k_r = rope(&x.k_active, d, &inv, &pos, |c| c);
        let max_angle = inv.iter().fold(0.0, |a: f64, &v| a.max(v)) * pos.iter().fold(0.0, |a: f64, &v| a.max(v));
        (q_r.iter().map(|v| v / (d as f64).sqrt()).collect(), k_r, max_angle)
    } else {
        (q_in.clone(), x.k_active.clone(), 0.0)
    };
    let reference = Data { q: q_att, k_active: k_att.clone(), mask, ..clone_data(&x) };
    let out = super::tkg::reference(&reference, f.tp_k_prior);
    let out = if f.out_in_sb { cols_of_blocks(&out, s) } else { out };
    let k_out = if f.k_out_in_sb { k_att } else { blocks_of(&k_att, d, sa) };

    let k_prior_shape = if f.tp_k_prior { vec![s.cache_bs, 1, s.full_sprior, d] } else { vec![s.cache_bs, 1, d, s.full_sprior] };
    let (q_shape, k_shape, q_vals, k_vals) = if f.qk_hbm {
        (vec![bs, s.q_head, sa, d], vec![bs, 1, sa, d], rows_of(&q_in, d), rows_of(&x.k_active, d))
    } else {
        (vec![d, n], vec![d, bs * sa], q_in, x.k_active.clone())
    };
    let mask_in = if f.pos_id { active } else { x.mask.clone() };
    let mask_keys = if f.pos_id { sa } else { s.curr_sprior };
    let mut inputs = vec![
        ("q", q_shape, q_vals, dtype),
        ("k_active", k_shape, k_vals, dtype),
        ("v_active", vec![bs, 1, sa, d], x.v_active.clone(), dtype),
        ("k_prior", k_prior_shape, x.k_prior.clone(), dtype),
        ("v_prior", vec![s.cache_bs, 1, s.full_sprior, d], x.v_prior.clone(), dtype),
        ("mask", vec![mask_keys, bs, s.q_head, sa], mask_in, Dtype::U8),
    ];
    if let Some(sk) = &x.sink {
        inputs.push(("sink", vec![s.q_head, 1], sk.clone(), Dtype::F32));
    }
    if f.rope {
        inputs.push(("inv_freqs", vec![d / 2, 1], inv, Dtype::F32));
    }
    if f.rope || f.pos_id {
        inputs.push(("rope_pos_ids", vec![bs, sa], pos, Dtype::F32));
    }
    if let Some(st) = start {
        inputs.push(("start_pos_ids", vec![bs, sa], st, Dtype::F32));
    }
    Case { shape: s, features: f, inputs, out, k_out, max_angle }
}

/// `[b, h, :, t]` blocks as columns `(d, bs·q_head·s_a)` (the `out_in_sb` layout).
fn cols_of_blocks(blocks: &[f64], s: Shape) -> Vec<f64> {
    let (d, sa, cols) = (s.d, s.s_active, s.bs * s.q_head * s.s_active);
    (0..d * cols).map(|i| blocks[((i % cols) / sa * d + i / cols) * sa + i % cols % sa]).collect()
}

fn clone_data(x: &Data) -> Data {
    Data {
        shape: x.shape,
        q: x.q.clone(),
        k_active: x.k_active.clone(),
        v_active: x.v_active.clone(),
        k_prior: x.k_prior.clone(),
        v_prior: x.v_prior.clone(),
        mask: x.mask.clone(),
        sink: x.sink.clone(),
    }
}

impl Case {
    /// The typed configuration.
    pub fn config(&self) -> TkgConfig {
        let f = self.features;
        super::tkg::config(self.shape, f.tp_k_prior, f.sink)
            .fuse_rope(f.rope)
            .use_pos_id(f.pos_id)
            .window(f.window.is_some())
            .qk_in_sb(!f.qk_hbm)
            .out_in_sb(f.out_in_sb)
            .k_out_in_sb(f.k_out_in_sb)
            .fa_tiling(!f.no_fa_tiling)
            .block_len(f.block_len as i64)
    }

    /// The input tensors, by name.
    pub fn tensors(&self) -> Vec<(&'static str, Tensor)> {
        self.inputs.iter().map(|(name, shape, v, dt)| (*name, super::tensor(shape, v, *dt))).collect()
    }

    /// The typed API's view of `t` (this case's [`tensors`](Self::tensors)).
    pub fn inputs<'a>(t: &'a [(&'static str, Tensor)]) -> TkgInputs<'a> {
        let get = |n: &str| t.iter().find(|(name, _)| *name == n).map(|(_, t)| t);
        TkgInputs {
            sink: get("sink"),
            inv_freqs: get("inv_freqs"),
            rope_pos_ids: get("rope_pos_ids"),
            start_pos_ids: get("start_pos_ids"),
            active_blocks_table: get("active_blocks_table"),
            ..TkgInputs::new(&t[0].1, &t[1].1, &t[2].1, &t[3].1, &t[4].1, &t[5].1)
        }
    }
}

/// The block-cache layout of a case.
#[derive(Clone, Copy, Debug)]
pub struct Blocks {
    pub block_len: usize,
    /// The mask's fold order, as the library documents it for the run's LNC:
    /// `(keys per core, reduced block length)` — within each core's keys, fold
    /// `f` of `128·len` keys lists key `f·128·len + p·len + r` at `f·128·len + r·128 + p`.
    pub folds: (usize, usize),
}

/// `c` (a flat cache with `tp_k_prior`) as a block cache: each batch's first
/// `curr_sprior` positions cut into blocks stored in a shuffled order, the table
/// naming them; a given mask moved into the fold order. The attended keys and
/// values are unchanged, so are the expected outputs.
pub fn as_block_cache(mut c: Case, blocks: Blocks) -> Case {
    let (s, bl) = (c.shape, blocks.block_len);
    assert!(c.features.tp_k_prior, "a block cache is read transposed, as tp_k_prior");
    let (per_batch, d) = (s.curr_sprior / bl, s.d);
    let total = s.bs * per_batch;
    // A shuffled placement: block i of the sequence order is stored at order[i].
    let keys = uniform(total, seed_of("blocks") + total as u64, 0.0, 1.0);
    let mut order: Vec<usize> = (0..total).collect();
    order.sort_by(|&a, &b| keys[a].total_cmp(&keys[b]));
    for cache in [3, 4] {
        let flat = &c.inputs[cache].2;
        let mut stored = vec![0.0; total * bl * d];
        for (i, &slot) in order.iter().enumerate() {
            let (b, blk) = (i / per_batch, i % per_batch);
            let src = (b * s.full_sprior + blk * bl) * d;
            stored[slot * bl * d..(slot + 1) * bl * d].copy_from_slice(&flat[src..src + bl * d]);
        }
        c.inputs[cache].1 = vec![total, bl, d];
        c.inputs[cache].2 = stored;
    }
    if !c.features.pos_id {
        let (per, len) = blocks.folds;
        let row = s.bs * s.q_head * s.s_active;
        let old = c.inputs[5].2.clone();
        for k in 0..s.curr_sprior {
            let fold = k / per * per + k % per / (128 * len) * (128 * len);
            let (p, r) = ((k - fold) / len, (k - fold) % len);
            let at = fold + r * 128 + p;
            c.inputs[5].2[at * row..(at + 1) * row].copy_from_slice(&old[k * row..(k + 1) * row]);
        }
    }
    let table: Vec<f64> = order.iter().map(|&o| o as f64).collect();
    c.inputs.push(("active_blocks_table", vec![s.bs, per_batch], table, Dtype::U32));
    c.features.block_len = bl;
    c
}
