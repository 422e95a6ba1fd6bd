/// Rejected at compile time: the stride is at least 1.
fn main() {
    let call = nkilib::conv1d_config!(c_in = 64, l = 100, k = 3, stride = 0);
    let _ = call;
}
