/// Rejected at compile time: three row tiles do not split over two LNC
/// programs.
fn main() {
    let call = nkilib::allgather_sb2sb_config!(rows = 384, tiled = true, lnc = 2);
    let _ = call;
}
