//! Decode-attention test data: random inputs in `attention_tkg`'s layouts, the
//! kernel's tensors and the float64 reference output.

use super::{as_dtype, seed_of, tensor, uniform};
use nki::attention::reference_tkg::{Inputs, Shape, decode};
use nki::attention::tkg::{TkgConfig, TkgDims, TkgInputs};
use nki::{Dtype, Tensor};

/// One decode step's data, in the kernel's layouts, as f64.
pub struct Data {
    pub shape: Shape,
    pub q: Vec<f64>,
    pub k_active: Vec<f64>,
    pub v_active: Vec<f64>,
    pub k_prior: Vec<f64>,
    pub v_prior: Vec<f64>,
    pub mask: Vec<f64>,
    pub sink: Option<Vec<f64>>,
}

/// Random data for `s`: queries pre-scaled by `1/sqrt(d)`; batch `b` uses the
/// first `used_b` cache positions (a different length per batch) and sees the
/// active tokens causally; `holes` also hides every 7th visible prior key.
pub fn data(name: &str, s: Shape, sink: bool, holes: bool, dtype: Dtype) -> Data {
    let seed = seed_of(name);
    let scale = 1.0 / (s.d as f64).sqrt();
    let n = s.bs * s.q_head * s.s_active;
    let q: Vec<f64> = uniform(s.d * n, seed, -2.0, 2.0).iter().map(|x| x * scale).collect();
    let prior_len = s.cache_bs * s.full_sprior * s.d;
    let split = s.curr_sprior - s.s_active;
    let mut mask = vec![0.0; s.curr_sprior * n];
    for b in 0..s.bs {
        let used = split - (b * 37) % (split / 2 + 1);
        for h in 0..s.q_head {
            for t in 0..s.s_active {
                for j in 0..s.curr_sprior {
                    let visible = if j < split { j < used && !(holes && j % 7 == 3) } else { j - split <= t };
                    mask[((j * s.bs + b) * s.q_head + h) * s.s_active + t] = f64::from(u8::from(visible));
                }
            }
        }
    }
    Data {
        shape: s,
        q: as_dtype(&q, dtype),
        k_active: as_dtype(&uniform(s.d * s.bs * s.s_active, seed + 1, -1.0, 1.0), dtype),
        v_active: as_dtype(&uniform(s.bs * s.s_active * s.d, seed + 2, -1.0, 1.0), dtype),
        k_prior: as_dtype(&uniform(prior_len, seed + 3, -1.0, 1.0), dtype),
        v_prior: as_dtype(&uniform(prior_len, seed + 4, -1.0, 1.0), dtype),
        mask,
        sink: sink.then(|| uniform(s.q_head, seed + 5, -1.0, 3.0)),
    }
}

/// The kernel's tensors for `x`: q, k_active, v_active, k_prior, v_prior and
/// the mask, in parameter order, and the sink.
pub struct Tensors {
    data: [Tensor; 6],
    sink: Option<Tensor>,
}

pub fn tensors(x: &Data, tp_k_prior: bool, dtype: Dtype) -> Tensors {
    let s = x.shape;
    let n = s.bs * s.q_head * s.s_active;
    let k_prior_shape = if tp_k_prior { [s.cache_bs, 1, s.full_sprior, s.d] } else { [s.cache_bs, 1, s.d, s.full_sprior] };
    let data = [
        tensor(&[s.d, n], &x.q, dtype),
        tensor(&[s.d, s.bs * s.s_active], &x.k_active, dtype),
        tensor(&[s.bs, 1, s.s_active, s.d], &x.v_active, dtype),
        tensor(&k_prior_shape, &x.k_prior, dtype),
        tensor(&[s.cache_bs, 1, s.full_sprior, s.d], &x.v_prior, dtype),
        tensor(&[s.curr_sprior, s.bs, s.q_head, s.s_active], &x.mask, Dtype::U8),
    ];
    Tensors { data, sink: x.sink.as_ref().map(|v| tensor(&[s.q_head, 1], v, Dtype::F32)) }
}

/// The typed configuration of shape `s`.
pub fn config(s: Shape, tp_k_prior: bool, sink: bool) -> TkgConfig {
    let i = |v: usize| v as i64;
    let dims = TkgDims {
        bs: i(s.bs),
        q_head: i(s.q_head),
        s_active: i(s.s_active),
        curr_sprior: i(s.curr_sprior),
        full_sprior: i(s.full_sprior),
        d_head: i(s.d),
    };
    TkgConfig::new(dims).tp_k_prior(tp_k_prior).sink(sink)
}

/// The float64 decode output for `x`.
pub fn reference(x: &Data, tp_k_prior: bool) -> Vec<f64> {
    let inputs = Inputs {
        q: &x.q,
        k_active: &x.k_active,
        v_active: &x.v_active,
        k_prior: &x.k_prior,
        v_prior: &x.v_prior,
        mask: &x.mask,
        sink: x.sink.as_deref(),
        tp_k_prior,
    };
    decode(&inputs, x.shape)
}

impl Tensors {
    /// The typed API's view of the tensors.
    pub fn inputs(&self) -> TkgInputs<'_> {
        let [q, k_active, v_active, k_prior, v_prior, mask] = &self.data;
        TkgInputs { sink: self.sink.as_ref(), ..TkgInputs::new(q, k_active, v_active, k_prior, v_prior, mask) }
    }
}

/// A shape whose cache has exactly `bs` batches.
pub const fn shape(bs: usize, q_head: usize, s_active: usize, curr_sprior: usize, full_sprior: usize, d: usize) -> Shape {
    Shape { bs, q_head, s_active, curr_sprior, full_sprior, d, cache_bs: bs }
}

/// The files of `nki run attention-tkg`'s required flags.
const RUN_ARGS: [&str; 14] = [
    "run",
    "attention-tkg",
    "--q",
    "q.npy",
    "--k-active",
    "ka.npy",
    "--v-active",
    "va.npy",
    "--k-prior",
    "kp.npy",
    "--v-prior",
    "vp.npy",
    "--mask",
    "mask.npy",
];

/// `nki run attention-tkg` over `q.npy`, `ka.npy`, `va.npy`, `kp.npy`, `vp.npy`
/// and `mask.npy`, with `extra` flags; a flag already in it gets the new value
/// (`--tp-k-prior` takes none).
pub fn run_args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut args: Vec<&str> = RUN_ARGS.to_vec();
    let mut rest = extra.iter().copied().peekable();
    while let Some(flag) = rest.next() {
        match args.iter().position(|a| *a == flag) {
            Some(i) if flag != "--tp-k-prior" => args[i + 1] = rest.next().expect("a value"),
            _ => args.push(flag),
        }
    }
    args
}
