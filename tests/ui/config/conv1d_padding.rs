/// Rejected at compile time: padding is non-negative.
fn main() {
    let call = nkilib::conv1d_config!(c_in = 32, l = 50, k = 3, padding = (-1, 2));
    let _ = call;
}
