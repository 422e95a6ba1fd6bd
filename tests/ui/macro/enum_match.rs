use nki::prelude::*;

#[nki_module]
pub mod k {
    use nki::prelude::*;

    #[nki_enum]
    pub enum Act {
        SIGMOID = 0,
        SOFTMAX = 1,
        RELU = 2,
    }

    /// `match` names every member, or ends with `_`.
    #[nki_kernel]
    pub fn pick(act: Act, dst: Sbuf) {
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

fn main() {}
