/// Rejected at compile time: qkv_cte's DMA-transpose MX path moves the rows as stored, so it cannot normalise them.
fn main() {
    let call = nkilib::qkv_cte_config!(
        bxs = 1024,
        hidden = 1024,
        fused_qkv = 384,
        mx_quant = true,
        s_shard = 512,
        mx_interleaved = true,
        fp8_input = true,
        normalized = true
    );
    let _ = call;
}
