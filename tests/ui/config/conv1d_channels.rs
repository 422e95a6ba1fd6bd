/// Rejected at compile time: the filters take x_in's input channels.
fn main() {
    let call = nkilib::conv1d_config!(c_in = 64, l = 100, k = 3, filter_c_in = 48);
    let _ = call;
}
