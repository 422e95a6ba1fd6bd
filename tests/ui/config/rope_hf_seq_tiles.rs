/// Rejected at compile time: with two programs each needs whole tiles of 128 positions.
fn main() {
    let call = nkilib::rope_hf_config!(q = [1, 32, 128, 128], k = [1, 8, 128, 128], rope = [128, 128], packed = false, programs = 2);
    let _ = call;
}
