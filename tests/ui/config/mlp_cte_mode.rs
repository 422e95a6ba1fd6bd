/// Rejected at compile time: 128 tokens take the library's context-encoding path, not implemented.
fn main() {
    let call = nkilib::mlp_config!(tokens = 128, hidden = 4096, intermediate = 896, programs = 2);
    let _ = call;
}
