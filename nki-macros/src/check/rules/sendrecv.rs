//! The rule of `nisa.sendrecv`: the two programs of an LNC2 pair exchange
//! tiles, so each names the other program (0 or 1) as both its peer to send to
//! and to receive from, and `src` and `dst` have one shape and dtype.

use crate::check::site::CallSite;
use crate::check::types::Ty;
use crate::diag::Diagnostics;

pub fn check(diag: &mut Diagnostics, site: &CallSite<'_>) -> Ty {
    let mut peers = Vec::new();
    for role in ["send_to_rank", "recv_from_rank"] {
        let Some(a) = site.arg(role) else { continue };
        let Some(r) = a.ty.const_int() else { continue };
        if !(0..2).contains(&r) {
            diag.error(a.expr.span, format!("{role} of nisa.sendrecv is {r}; the programs of an LNC2 pair are 0 and 1"));
        } else {
            peers.push((r, a.expr.span));
        }
    }
    if let [(a, _), (b, span)] = peers[..]
        && a != b
    {
        diag.error(span, format!("send_to_rank {a} and recv_from_rank {b} of nisa.sendrecv differ, but each program of an LNC2 pair exchanges with the other one"));
    }
    if let (Some((s, _)), Some((d, ds))) = (site.tensor("src"), site.tensor("dst")) {
        let known =
            |t: &crate::check::types::TensorTy| t.shape.as_ref().and_then(|s| s.iter().map(|v| v.as_const()).collect::<Option<Vec<_>>>());
        if let (Some(a), Some(b)) = (known(s), known(d))
            && a != b
        {
            diag.error(
                ds,
                format!("{} of nisa.sendrecv has shape {b:?} but {} has {a:?}; they must match", site.label("dst"), site.label("src")),
            );
        }
        if let (Some(a), Some(b)) = (s.dtype, d.dtype)
            && a != b
        {
            diag.error(
                ds,
                format!("{} of nisa.sendrecv is {b} but {} is {a}; the dtypes must match", site.label("dst"), site.label("src")),
            );
        }
    }
    Ty::Unit
}
