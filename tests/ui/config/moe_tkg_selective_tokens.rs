/// Rejected at compile time: the selective-expert path holds at most 128 tokens (all-expert tiles them).
fn main() {
    let call = nkilib::moe_tkg_config!(tokens = 256, hidden = 512, intermediate = 128, experts = 4, top_k = 2, programs = 2, is_all_expert = false);
    let _ = call;
}
