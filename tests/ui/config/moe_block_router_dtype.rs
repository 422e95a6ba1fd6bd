/// Rejected at compile time: router_mm_dtype must be bfloat16, float16 or float32.
fn main() {
    let call = nkilib::moe_block_config!(tokens = 4, hidden = 3072, intermediate = 384, experts = 128, local_experts = 128, top_k = 4, router_mm_dtype_supported = false);
    let _ = call;
}
