use nki::prelude::*;

#[nki_module]
pub mod k {
    use nki::prelude::*;

    #[nki_enum]
    pub enum Act {
        SIGMOID,
        SOFTMAX,
        RELU,
    }

    #[nki_enum]
    pub enum Norm {
        RMS,
    }

    /// Enum fields default to members of their own enum, never to values.
    #[nki_object]
    pub struct Cfg {
        #[default(1)]
        pub act: Act,
        #[default(Norm::RMS)]
        pub other: Act,
        #[default(Act::TANH)]
        pub missing: Act,
        #[default(Norm::RMS)]
        pub norm: Norm,
    }

    /// A field compares with members of its enum; a field value is a member.
    #[nki_kernel]
    pub fn pick_field(cfg: Cfg, dst: Hbm) {
        let ok = cfg.act == Act::SOFTMAX;
        let wrong = cfg.act == 1;
        let other = cfg.norm == Act::SIGMOID;
        let built = Cfg { act: 0, other: Act::SIGMOID, missing: Act::SIGMOID, norm: Norm::RMS };
        match cfg.act {
            Act::SIGMOID => {}
        }
        match cfg.act.value {
            Act::SIGMOID => {}
            _ => {}
        }
    }

    /// Takes a member of `Act`: the member's value is not the member.
    #[nki_kernel]
    pub fn pick(act: Act, dst: Hbm) {
        let ok = act == Act::SOFTMAX;
        let softmax = act == 1;
        let tanh = act == Act::TANH;
    }

    /// `match` names every member, or ends with `_`.
    #[nki_kernel]
    pub fn pick_match(act: Act, dst: Sbuf) {
        match act {
            Act::SIGMOID => nisa::memset(dst, 0.0),
            Act::SOFTMAX => nisa::memset(dst, 1.0),
        }
        match act {
            Act::SIGMOID | Act::TANH => nisa::memset(dst, 0.0),
            _ => {}
        }
        match act {
            1 => nisa::memset(dst, 0.0),
            _ => {}
        }
    }
}

fn main() {
    let dst = nki::Tensor::zeros(&[1, 1], nki::Dtype::F32).unwrap();
    let _ = k::pick::Call::new(1, &dst);
}
