/// Rejected at compile time: all-expert splits H over LNC2, and H / 128 = 3 does not split in two.
fn main() {
    let call = nkilib::moe_tkg_config!(tokens = 4, hidden = 384, intermediate = 128, experts = 4, top_k = 4, programs = 2, is_all_expert = true);
    let _ = call;
}
