//! `NkiTensor.rearrange`: einops-style split, reorder and merge of dims.
//!
//! A pattern names each dim; a group of names in the source pattern splits
//! that dim (sizes from `fixed_sizes`, one of the group's inferred), the names
//! are reordered into the destination pattern's order, and each group of the
//! destination pattern merges its dims. It is the chain `reshape_dim`,
//! `permute`, `flatten_dims`, so it composes with every other view and moves no
//! data.

use super::Tensor;
use crate::{NkiError, Result};

/// A pattern: per dim, its name, or the names of the dims it splits into / merges from.
pub type Pattern<'a> = [&'a [&'a str]];

/// The flat names of `pattern`, refusing an empty group or a repeated name.
fn names<'a>(pattern: &Pattern<'a>, which: &str) -> Result<Vec<&'a str>> {
    let flat: Vec<&str> = pattern.iter().flat_map(|g| g.iter().copied()).collect();
    let repeated = flat.iter().enumerate().find(|(i, n)| flat[..*i].contains(n));
    if pattern.iter().any(|g| g.is_empty()) || repeated.is_some() {
        return Err(NkiError::shape("rearrange", format!("{which} {pattern:?} must hold names or groups of names, each name once")));
    }
    Ok(flat)
}

impl Tensor {
    /// `t.rearrange(src_pattern, dst_pattern, fixed_sizes)`: splits the groups of
    /// `src` (one name per dim of this view), reorders the names as in `dst` and
    /// merges `dst`'s groups. `fixed` gives the sizes of split names; each group
    /// may leave one out.
    pub fn rearrange(&self, src: &Pattern<'_>, dst: &Pattern<'_>, fixed: &[(&str, i64)]) -> Result<Tensor> {
        let (from, to) = (names(src, "src_pattern")?, names(dst, "dst_pattern")?);
        if src.len() != self.ndim() {
            return Err(NkiError::shape(
                "rearrange",
                format!("src_pattern {src:?} names {} dims but '{}' {:?} has {}", src.len(), self.name(), self.shape(), self.ndim()),
            ));
        }
        let (mut a, mut b) = (from.clone(), to.clone());
        a.sort_unstable();
        b.sort_unstable();
        if a != b {
            return Err(NkiError::shape("rearrange", format!("src_pattern {src:?} and dst_pattern {dst:?} must name the same dims")));
        }
        let mut view = self.clone();
        for (d, group) in src.iter().enumerate().rev() {
            if group.len() > 1 {
                let sizes: Vec<i64> = group.iter().map(|n| fixed.iter().find(|(k, _)| k == n).map_or(-1, |&(_, v)| v)).collect();
                view = view.reshape_dim(d, &sizes)?;
            }
        }
        let order: Vec<usize> = to.iter().map(|n| from.iter().position(|m| m == n).unwrap_or(0)).collect();
        view = view.permute(&order)?;
        let mut at = to.len();
        for group in dst.iter().rev() {
            at -= group.len();
            if group.len() > 1 {
                view = view.flatten_dims(at, at + group.len() - 1)?;
            }
        }
        Ok(view)
    }
}
