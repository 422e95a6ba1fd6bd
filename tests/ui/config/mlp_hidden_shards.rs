/// Rejected at compile time: on LNC2 the 128-column tiles of H (here 3) split over the two programs.
fn main() {
    let call = nkilib::mlp_config!(tokens = 4, hidden = 384, intermediate = 256, programs = 2);
    let _ = call;
}
