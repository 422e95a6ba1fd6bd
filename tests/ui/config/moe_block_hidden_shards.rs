/// Rejected at compile time: H must split over the two programs in 128-column tiles.
fn main() {
    let call = nkilib::moe_block_config!(tokens = 4, hidden = 3200, intermediate = 384, experts = 128, local_experts = 128, top_k = 4);
    let _ = call;
}
