/// Rejected at compile time: the dilated filter fits the padded input (at least one output).
fn main() {
    let call = nkilib::conv1d_config!(c_in = 32, l = 50, k = 9, dilation = 7, padding = (3, 3));
    let _ = call;
}
