/// Rejected at compile time: the kernel strides the width only.
fn main() {
    let call = nkilib::depthwise_conv1d_config!(c = 16, w = 512, s = 3, stride = (2, 1));
    let _ = call;
}
