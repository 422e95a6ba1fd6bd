/// Rejected at compile time: the dilation is at least 1.
fn main() {
    let call = nkilib::conv1d_config!(c_in = 32, l = 50, k = 3, dilation = 0);
    let _ = call;
}
