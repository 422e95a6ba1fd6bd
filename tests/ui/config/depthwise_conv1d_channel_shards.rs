/// Rejected at compile time: the channels split evenly over the LNC programs.
fn main() {
    let call = nkilib::depthwise_conv1d_config!(c = 255, w = 512, s = 64, programs = 2);
    let _ = call;
}
