/// Rejected at compile time: an LNC2 context-encoding call that shards the tokens needs an even count.
fn main() {
    let call = nkilib::mlp_config!(tokens = 301, hidden = 4096, intermediate = 896, programs = 2);
    let _ = call;
}
