/// Rejected at compile time: with `shard_on_tokens` each program needs a token
/// (odd T is split unevenly, as the library does).
fn main() {
    let call = nkilib::router_topk_config!(t = 1, h = 512, e = 128, k = 4, act_fn = SOFTMAX, router_pre_norm = false, programs = 2);
    let _ = call;
}
