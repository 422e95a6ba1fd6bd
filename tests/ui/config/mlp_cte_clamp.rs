/// Rejected at compile time: 128 tokens take the context-encoding path, which (as the library's) has no clamps.
fn main() {
    let call = nkilib::mlp_config!(tokens = 128, hidden = 4096, intermediate = 896, programs = 2, clamped = true);
    let _ = call;
}
