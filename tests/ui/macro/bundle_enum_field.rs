use nki::prelude::*;

#[nki_module]
pub mod k {
    use nki::prelude::*;

    #[nki_enum]
    pub enum Act {
        SIGMOID = 0,
        SOFTMAX = 1,
    }

    #[nki_enum]
    pub enum Norm {
        RMS = 0,
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
    pub fn pick(cfg: Cfg, dst: Hbm) {
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
}

fn main() {}
