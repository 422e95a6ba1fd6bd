//! The documented constraints of `nisa.dma_transpose`, declared once: the
//! emulator checks every call against them, and `#[nki_kernel]` includes this
//! file (by path, so it depends on nothing) to report at compile time the ones
//! whose shapes, dtypes and modes it knows.
//!
//! Source: the NKI 2.32 docstring of `dma_transpose` and the DGE reference.
//!
//! * Every mode: `src` and `dst` share one dtype (no cast); the permutation is
//!   fixed by the rank of `src` (2-, 3- or 4-d); `dst` has exactly the permuted
//!   shape, rank included (enforced since SDK 2.30). The memory spaces (`dst` in
//!   SBUF, `src` in HBM or SBUF) are the op's parameter kinds and are checked
//!   with them.
//! * A direct transpose (a plain or `.ap()` source) accepts `dge_mode` unknown,
//!   hwdge or none. `swdge` lowers indirect transposes (a `vector_offset`
//!   source, trn2+), which nki-rs does not model, so it is rejected here, like
//!   `oob_mode=skip`, which only applies to indirect sources. `none` (no DGE, a
//!   static transpose) is listed by the DGE reference's table though not by the
//!   docstring; the AWS library's `mlp_tkg` transposes its bias and row scales
//!   that way, and that kernel runs on hardware.
//! * `dge_mode=hwdge` needs the hardware DGE (NeuronCore-v3, trn2, and newer), a
//!   2-byte dtype, and `src.shape[0] == 16` for a 2-d source or `src.shape[0]`
//!   in {1, 2, 4, 8, 16} with `src.shape[0] * src.shape[-2]` a multiple of 16 for
//!   3-d and 4-d sources. Its `src.shape[-1] <= 128` is not listed here: every
//!   permutation makes `src.shape[-1]` dst's partition dim, which an SBUF tile
//!   already bounds by `pmax` (128). (SDK 2.29 and the DGE reference state the
//!   older `src.shape[0] == 16`, `src.shape[-1] % 128 == 0`; 2.32 relaxed them.)
//!   With `unknown` the compiler chooses the lowering and none of the hwdge
//!   limits apply.

/// The permutation `axes` must be for a source of rank 2, 3 and 4.
pub const PERMUTATIONS: [&[i64]; 3] = [&[1, 0], &[2, 1, 0], &[3, 1, 2, 0]];
/// The permutation of a source of `rank` dims, if it has one.
pub fn permutation_of_rank(rank: usize) -> Option<&'static [i64]> {
    PERMUTATIONS.iter().copied().find(|p| p.len() == rank)
}

/// Element size the hardware DGE transposes, in bytes.
pub const HWDGE_ELEMENT_BYTES: i64 = 2;
/// `src.shape[0]` of a 2-d source under the hardware DGE.
pub const HWDGE_2D_OUTER: i64 = 16;
/// The `src.shape[0]` a 3-d or 4-d source may have under the hardware DGE.
pub const HWDGE_OUTER: [i64; 5] = [1, 2, 4, 8, 16];
/// What `src.shape[0] * src.shape[-2]` must divide into under the hardware DGE (3-d, 4-d).
pub const HWDGE_ROW_MULTIPLE: i64 = 16;

/// `nisa.dge_mode` as the rules see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dge {
    /// The compiler chooses (the default).
    Unknown,
    /// Software DGE on the GpSimd engine.
    Swdge,
    /// The hardware DGE block.
    Hwdge,
    /// Descriptors precomputed on the host.
    None,
}

impl Dge {
    /// The `nisa.dge_mode` member name.
    pub const fn name(self) -> &'static str {
        match self {
            Dge::Unknown => "unknown",
            Dge::Swdge => "swdge",
            Dge::Hwdge => "hwdge",
            Dge::None => "none",
        }
    }

    /// The mode of a member name.
    pub fn from_name(name: &str) -> Option<Dge> {
        [Dge::Unknown, Dge::Swdge, Dge::Hwdge, Dge::None].into_iter().find(|d| d.name() == name)
    }
}

/// One documented constraint of `nisa.dma_transpose`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransposeRule {
    /// `src.dtype == dst.dtype`.
    SameDtype,
    /// `src` is 2-, 3- or 4-d.
    Rank,
    /// `axes` is the permutation of `src`'s rank.
    Axes,
    /// `dst.shape` is `src.shape` permuted by `axes`, rank included.
    DstShape,
    /// A direct transpose takes `dge_mode` unknown, hwdge or none.
    DgeMode,
    /// `oob_mode=skip` needs an indirect source.
    OobSkip,
    /// The hardware DGE exists from NeuronCore-v3.
    HwdgeGeneration,
    /// The hardware DGE moves 2-byte elements.
    HwdgeDtype,
    /// The hardware DGE needs `src.shape[0]` 16 (2-d) or a power of two up to 16 (3-d, 4-d).
    HwdgeOuterDim,
    /// The hardware DGE needs `src.shape[0] * src.shape[-2]` a multiple of 16 (3-d, 4-d).
    HwdgeRows,
}

impl TransposeRule {
    /// Every rule, in the order they are checked.
    pub const ALL: [TransposeRule; 10] = [
        TransposeRule::SameDtype,
        TransposeRule::Rank,
        TransposeRule::Axes,
        TransposeRule::DstShape,
        TransposeRule::DgeMode,
        TransposeRule::OobSkip,
        TransposeRule::HwdgeGeneration,
        TransposeRule::HwdgeDtype,
        TransposeRule::HwdgeOuterDim,
        TransposeRule::HwdgeRows,
    ];

    /// The argument the rule is about.
    pub const fn operand(self) -> &'static str {
        match self {
            TransposeRule::SameDtype | TransposeRule::DstShape => "dst",
            TransposeRule::Axes => "axes",
            TransposeRule::DgeMode | TransposeRule::HwdgeGeneration => "dge_mode",
            TransposeRule::OobSkip => "oob_mode",
            TransposeRule::Rank | TransposeRule::HwdgeDtype | TransposeRule::HwdgeOuterDim | TransposeRule::HwdgeRows => "src",
        }
    }

    /// The rule in words.
    pub const fn message(self) -> &'static str {
        match self {
            TransposeRule::SameDtype => "dma_transpose does not cast: src and dst must have the same dtype",
            TransposeRule::Rank => "src must be 2-, 3- or 4-d",
            TransposeRule::Axes => "axes must be the permutation of src's rank: (1, 0) for 2-d, (2, 1, 0) for 3-d, (3, 1, 2, 0) for 4-d",
            TransposeRule::DstShape => "dst must have exactly src's shape permuted by axes, rank included",
            TransposeRule::DgeMode => {
                "a direct transpose takes dge_mode unknown, hwdge or none (swdge lowers indirect vector_offset sources, which nki-rs does not model)"
            }
            TransposeRule::OobSkip => "oob_mode=skip only applies to an indirect (vector_offset) src, which nki-rs does not model",
            TransposeRule::HwdgeGeneration => "the hardware DGE (dge_mode=hwdge) exists on NeuronCore-v3 (trn2) and newer",
            TransposeRule::HwdgeDtype => "dge_mode=hwdge transposes 2-byte dtypes only",
            TransposeRule::HwdgeOuterDim => {
                "dge_mode=hwdge needs src.shape[0] == 16 for a 2-d src, or src.shape[0] in {1, 2, 4, 8, 16} for a 3-d or 4-d src"
            }
            TransposeRule::HwdgeRows => "dge_mode=hwdge needs src.shape[0] * src.shape[-2] to be a multiple of 16 for a 3-d or 4-d src",
        }
    }
}

/// A dim, when known (always at run time, sometimes at compile time).
pub type Dim = Option<i64>;

/// The `axes` argument.
#[derive(Clone, Copy, Debug)]
pub enum Axes<'a> {
    /// Not given: the permutation of `src`'s rank.
    Default,
    /// Given, with its entries when known.
    Given(&'a [Dim]),
    /// Given, but not known.
    Unknown,
}

/// What is known about one `dma_transpose` call.
#[derive(Clone, Copy, Debug)]
pub struct TransposeCall<'a> {
    /// `src.shape`, when its rank is known.
    pub src_shape: Option<&'a [Dim]>,
    /// `dst.shape`, when its rank is known.
    pub dst_shape: Option<&'a [Dim]>,
    /// The `nl` names of the two dtypes, when known.
    pub src_dtype: Option<&'a str>,
    pub dst_dtype: Option<&'a str>,
    /// Bytes per element of `src`, when known.
    pub element_bytes: Option<i64>,
    /// The permutation.
    pub axes: Axes<'a>,
    /// The DGE mode (`Some(Dge::Unknown)` when not given), when known.
    pub dge: Option<Dge>,
    /// Whether `oob_mode` is `skip`, when known.
    pub oob_skip: Option<bool>,
    /// Whether the target generation has the hardware DGE, and its name.
    pub has_hwdge: bool,
    pub target: &'a str,
}

fn text(dims: &[Dim]) -> String {
    let parts: Vec<String> = dims.iter().map(|d| d.map_or("?".into(), |v| v.to_string())).collect();
    format!("[{}]", parts.join(", "))
}

fn all_known(dims: &[Dim]) -> Option<Vec<i64>> {
    dims.iter().copied().collect()
}

impl TransposeCall<'_> {
    /// The permutation in effect, when known: the given axes, or the one of `src`'s rank.
    fn permutation(&self) -> Option<Vec<i64>> {
        match self.axes {
            Axes::Given(a) => all_known(a),
            Axes::Default => permutation_of_rank(self.src_shape?.len()).map(<[i64]>::to_vec),
            Axes::Unknown => None,
        }
    }

    /// Every rule the call is known to break, in [`TransposeRule::ALL`] order, each
    /// with the values that break it. Rules that only follow from an earlier broken
    /// one (the dst shape under wrong axes, say) are not repeated.
    pub fn violations(&self) -> Vec<(TransposeRule, String)> {
        let mut out = Vec::new();
        if let (Some(s), Some(d)) = (self.src_dtype, self.dst_dtype)
            && s != d
        {
            out.push((TransposeRule::SameDtype, format!("src is {s} but dst is {d}")));
        }
        let rank = self.src_shape.map(<[Dim]>::len);
        let rank_ok = rank.is_none_or(|n| (2..=4).contains(&n));
        if !rank_ok {
            out.push((TransposeRule::Rank, format!("src has shape {}", text(self.src_shape.unwrap_or_default()))));
        }
        let perm = self.permutation();
        let axes_ok = match (&perm, rank) {
            (Some(p), Some(n)) => !rank_ok || (p.len() == n && PERMUTATIONS.contains(&p.as_slice())),
            (Some(p), None) => PERMUTATIONS.contains(&p.as_slice()),
            (None, _) => true,
        };
        if !axes_ok && let Some(p) = &perm {
            let of = rank.map_or(String::new(), |n| format!(" for a {n}-d src"));
            out.push((TransposeRule::Axes, format!("axes are {p:?}{of}")));
        }
        if rank_ok
            && axes_ok
            && let (Some(src), Some(dst), Some(p)) = (self.src_shape, self.dst_shape, &perm)
        {
            let want: Vec<Dim> = p.iter().map(|&a| src[a as usize]).collect();
            let differs = want.len() != dst.len() || want.iter().zip(dst).any(|(w, d)| matches!((w, d), (Some(a), Some(b)) if a != b));
            if differs {
                out.push((
                    TransposeRule::DstShape,
                    format!("dst has shape {} but src {} permuted by axes {p:?} is {}", text(dst), text(src), text(&want)),
                ));
            }
        }
        if self.dge == Some(Dge::Swdge) {
            out.push((TransposeRule::DgeMode, "dge_mode is swdge".into()));
        }
        if self.oob_skip == Some(true) {
            out.push((TransposeRule::OobSkip, "oob_mode is skip".into()));
        }
        if self.dge == Some(Dge::Hwdge) {
            self.hwdge_violations(rank_ok, &mut out);
        }
        out
    }

    fn hwdge_violations(&self, rank_ok: bool, out: &mut Vec<(TransposeRule, String)>) {
        if !self.has_hwdge {
            out.push((TransposeRule::HwdgeGeneration, format!("dge_mode is hwdge and the target is {}", self.target)));
        }
        if let Some(b) = self.element_bytes.filter(|&b| b != HWDGE_ELEMENT_BYTES) {
            out.push((TransposeRule::HwdgeDtype, format!("src is {} ({b} bytes per element)", self.src_dtype.unwrap_or("?"))));
        }
        let Some(src) = self.src_shape.filter(|_| rank_ok) else {
            return;
        };
        let (outer, rows) = (src[0], src[src.len() - 2]);
        let outer_ok = |v: i64| if src.len() == 2 { v == HWDGE_2D_OUTER } else { HWDGE_OUTER.contains(&v) };
        if let Some(v) = outer.filter(|&v| !outer_ok(v)) {
            out.push((TransposeRule::HwdgeOuterDim, format!("src has shape {} (src.shape[0] = {v})", text(src))));
        }
        // The product in i128: unchecked shapes reach this rule and may be near i64::MAX.
        if src.len() > 2
            && let (Some(a), Some(b)) = (outer, rows)
            && let product = i128::from(a) * i128::from(b)
            && product % i128::from(HWDGE_ROW_MULTIPLE) != 0
        {
            out.push((TransposeRule::HwdgeRows, format!("src has shape {} ({a} * {b} = {product})", text(src))));
        }
    }
}
