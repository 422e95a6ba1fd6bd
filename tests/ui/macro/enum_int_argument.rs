use nki::prelude::*;

#[nki_module]
pub mod k {
    use nki::prelude::*;

    #[nki_enum]
    pub enum Act {
        SIGMOID = 0,
        SOFTMAX = 1,
    }

    /// Takes a member of `Act`: the member's value is not the member.
    #[nki_kernel]
    pub fn pick(act: Act, dst: Hbm) {
        let ok = act == Act::SOFTMAX;
        let softmax = act == 1;
        let tanh = act == Act::TANH;
    }
}

fn main() {
    let dst = nki::Tensor::zeros(&[1, 1], nki::Dtype::F32).unwrap();
    let _ = k::pick::Call::new(1, &dst);
}
