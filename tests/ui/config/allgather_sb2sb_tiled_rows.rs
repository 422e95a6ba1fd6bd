/// Rejected at compile time: 200 rows do not split into tiles of 128.
fn main() {
    let call = nkilib::allgather_sb2sb_config!(rows = 200, tiled = true);
    let _ = call;
}
