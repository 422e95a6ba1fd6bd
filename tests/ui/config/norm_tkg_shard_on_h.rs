/// Rejected at compile time: `shard_on_h` splits H over the two programs of an LNC2 launch.
fn main() {
    let call = nkilib::norm_tkg_config!(bxs = 16, hidden = 8192, programs = 1, shard_on_h = true);
    let _ = call;
}
