/// Rejected at compile time: on LNC2 the 128-column tiles of H (here 3) split over the two hidden shards.
fn main() {
    let call = nkilib::norm_tkg_config!(bxs = 4, hidden = 384, programs = 2);
    let _ = call;
}
