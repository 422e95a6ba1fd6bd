//! `#[nki_enum]` parameters beyond `router_topk`'s: a default member, an
//! optional enum, a member passed to a helper, matched and shown in a message,
//! an enum field of a bundle parameter; the registry's view of them and the
//! emitted Python.

use nki::emit::{ArgValue, ParamKind, PyEnum};
use nki::prelude::*;

#[nki_module]
pub mod scaled {
    use nki::prelude::*;

    /// How `scale` scales (the values are the Python members').
    // Derives of its own stay; `#[nki_enum]` adds the others kernels need.
    #[nki_enum]
    #[derive(Debug, PartialEq, Hash)]
    pub enum Scaling {
        /// Halves.
        HALF = 2,
        /// Triples.
        Triple_It = -3,
        /// Leaves the values. Without a value it counts on from the member
        /// before, as in Rust: -2.
        Keep,
    }

    /// How many times `how` is applied by `repeat`: `match` with `|` and `_`.
    #[nki_helper]
    pub fn times(how: Scaling, cap: i64) -> i64 {
        let mut n = 0;
        match how {
            Scaling::HALF | Scaling::Triple_It => n = cap,
            _ => {
                n = 0;
            }
        }
        n
    }

    /// `x` scaled by `how` `times(how, 2)` times.
    #[nki_kernel]
    pub fn repeat(x: Hbm, how: Scaling) -> Hbm {
        let [p, f] = x.shape();
        let t = nl::ndarray([p, f], nl::float32);
        nisa::dma_copy(t, x);
        for _ in 0..times(how, 2) {
            match how {
                Scaling::HALF => nisa::tensor_scalar(t, t, nl::multiply, 0.5),
                Scaling::Triple_It => nisa::tensor_scalar(t, t, nl::multiply, 3.0),
                Scaling::Keep => {}
            }
        }
        let out = nl::ndarray([p, f], x.dtype(), buffer = nl::shared_hbm);
        nisa::dma_copy(out, t);
        out
    }

    /// The factor of `how`.
    #[nki_helper]
    pub fn factor(how: Scaling) -> f64 {
        if how == Scaling::HALF {
            return 0.5;
        }
        if how == Scaling::Keep {
            return 1.0;
        }
        3.0
    }

    /// A bundle with an enum field: `x * factor(how) + offset`.
    #[nki_object]
    pub struct ScaleArgs {
        /// Added after scaling.
        pub offset: f64,
        /// How to scale.
        #[default(Scaling::Keep)]
        pub how: Scaling,
    }

    /// `x * factor(cfg.how) + cfg.offset`; `Triple_It` is refused.
    #[nki_kernel]
    pub fn shift(x: Hbm, cfg: ScaleArgs) -> Hbm {
        let [p, f] = x.shape();
        assert!(cfg.how != Scaling::Triple_It, "shift: cfg.how = {} is not implemented", cfg.how);
        let t = nl::ndarray([p, f], nl::float32);
        nisa::dma_copy(t, x);
        match cfg.how {
            Scaling::HALF => nisa::tensor_scalar(t, t, nl::multiply, 0.5),
            _ => {}
        }
        nisa::tensor_scalar(t, t, nl::add, cfg.offset);
        let out = nl::ndarray([p, f], x.dtype(), buffer = nl::shared_hbm);
        nisa::dma_copy(out, t);
        out
    }

    /// `x * factor(how)`, then `x * factor(then)` if given.
    #[nki_kernel]
    pub fn scale(x: Hbm, #[default(Scaling::Triple_It)] how: Scaling, #[default(None)] then: Option<Scaling>) -> Hbm {
        let [p, f] = x.shape();
        assert!(p <= 128, "scale: {how} takes at most 128 rows, got {p}");
        let t = nl::ndarray([p, f], nl::float32);
        nisa::dma_copy(t, x);
        nisa::tensor_scalar(t, t, nl::multiply, factor(how));
        if let Some(next) = then {
            nisa::tensor_scalar(t, t, nl::multiply, factor(next));
        }
        let out = nl::ndarray([p, f], x.dtype(), buffer = nl::shared_hbm);
        nisa::dma_copy(out, t);
        out
    }
}

use scaled::{ScaleArgs, Scaling, repeat, scale, shift};

fn ones(rows: usize) -> Tensor {
    Tensor::from_f32(&[rows, 4], &vec![1.0; rows * 4], Dtype::F32).unwrap()
}

#[test]
fn defaults_options_and_helpers_take_the_enum() {
    let x = ones(2);
    let run = |call: scale::Call| call.launch(&Launch::new()).unwrap().to_f32_vec();
    assert_eq!(run(scale::Call::new(&x)), vec![3.0; 8]);
    assert_eq!(run(scale::Call::new(&x).how(Scaling::HALF)), vec![0.5; 8]);
    assert_eq!(run(scale::Call::new(&x).how(Scaling::HALF).then(Scaling::HALF)), vec![0.25; 8]);
    // A member in a message reads as in Python.
    let e = scale::Call::new(&ones(130)).how(Scaling::HALF).launch(&Launch::new()).unwrap_err();
    assert!(e.message.contains("scale: Scaling.HALF takes at most 128 rows, got 130"), "{e}");
}

#[test]
fn match_takes_each_arm_by_member() {
    let x = ones(1);
    let run = |how| repeat::Call::new(&x, how).launch(&Launch::new()).unwrap().to_f32_vec();
    assert_eq!(run(Scaling::HALF), vec![0.25; 4]);
    assert_eq!(run(Scaling::Triple_It), vec![9.0; 4]);
    assert_eq!(run(Scaling::Keep), vec![1.0; 4]);
    let py = repeat::NKI_SOURCE;
    assert!(py.contains("        if how == Scaling.HALF:\n") && py.contains("        elif how == Scaling.Triple_It:\n"), "{py}");
    assert!(py.contains("        elif how == Scaling.Keep:\n"), "{py}");
    let py = scaled::times::NKI_SOURCE;
    assert!(py.contains("    if how == Scaling.HALF or how == Scaling.Triple_It:\n") && py.contains("    else:\n"), "{py}");
}

#[test]
fn the_registry_names_the_members_and_the_entry_takes_them_by_name() {
    assert_eq!((Scaling::CLASS, Scaling::MEMBERS), ("Scaling", &["HALF", "Triple_It", "Keep"][..]));
    let how = scale::INFO.params.iter().find(|p| p.name == "how").unwrap();
    assert_eq!(how.kind, ParamKind::Enum { class: "Scaling", members: &["HALF", "Triple_It", "Keep"] });
    assert_eq!((how.optional, how.default), (true, Some("Scaling.Triple_It")));
    let entry = scale::INFO.entry.unwrap();
    let x = Some(ArgValue::Tensor(ones(1)));
    let got = Launch::new().run(|ctx| entry(ctx, &[x.clone(), Some(ArgValue::Member("HALF".into())), None])).unwrap();
    assert_eq!(got[0].to_f32_vec(), vec![0.5; 4]);
    let e = Launch::new().run(|ctx| entry(ctx, &[x.clone(), Some(ArgValue::Member("DOUBLE".into())), None])).unwrap_err();
    assert_eq!(e.message, "invalid how = DOUBLE: how takes a Scaling member: HALF, Triple_It, Keep");
    let e = Launch::new().run(|ctx| entry(ctx, &[x.clone(), None, Some(ArgValue::Int(2))])).unwrap_err();
    assert_eq!(e.message, "invalid then = 2: then takes a Scaling member: HALF, Triple_It, Keep");
}

#[test]
fn the_emitted_python_declares_the_class_and_checks_the_arguments() {
    let source = scaled::__NKI_CONST_SCALING.source;
    assert!(source.starts_with("class Scaling(Enum):\n"), "{source}");
    assert!(source.contains("    HALF = 2\n") && source.contains("    Triple_It = -3\n"), "{source}");
    assert!(source.contains("    Keep = -2\n"), "{source}");
    let kernel = scale::NKI_SOURCE;
    assert!(kernel.contains("def scale(x, how=Scaling.Triple_It, then=None):"), "{kernel}");
    // Checked by the package's `check_contract`: the row's message names the class's members.
    assert!(
        kernel.contains("check_contract(\"scale\", enums=((\"how\", how, Scaling, \"Scaling member (HALF, Triple_It, Keep)\", False), (\"then\", then, Scaling, \"Scaling member (HALF, Triple_It, Keep)\", True))"),
        "{kernel}"
    );
    assert!(scaled::factor::NKI_SOURCE.contains("if how == Scaling.HALF:"), "{}", scaled::factor::NKI_SOURCE);
}

#[test]
fn a_bundle_field_takes_the_enum_in_rust_the_registry_and_python() {
    let x = ones(1);
    let run = |cfg: ScaleArgs| shift::Call::new(&x, &cfg).launch(&Launch::new()).map(|t| t.to_f32_vec());
    assert_eq!(run(ScaleArgs { offset: 1.0, how: Scaling::HALF }).unwrap(), vec![1.5; 4]);
    assert_eq!(run(ScaleArgs { offset: 1.0, how: Scaling::Keep }).unwrap(), vec![2.0; 4]);
    let e = run(ScaleArgs { offset: 0.0, how: Scaling::Triple_It }).unwrap_err();
    assert!(e.message.contains("shift: cfg.how = Scaling.Triple_It is not implemented"), "{e}");
    // The registry flattens the bundle: the enum field by its members, its default the member.
    let how = shift::INFO.params.iter().find(|p| p.name == "cfg.how").unwrap();
    assert_eq!(how.kind, ParamKind::Enum { class: "Scaling", members: &["HALF", "Triple_It", "Keep"] });
    assert_eq!((how.optional, how.default, how.bundle), (true, Some("Scaling.Keep"), Some("ScaleArgs")));
    let entry = shift::INFO.entry.unwrap();
    let args = |how: Option<ArgValue>| [Some(ArgValue::Tensor(ones(1))), Some(ArgValue::Float(0.25)), how];
    let got = Launch::new().run(|ctx| entry(ctx, &args(Some(ArgValue::Member("HALF".into()))))).unwrap();
    assert_eq!(got[0].to_f32_vec(), vec![0.75; 4]);
    let got = Launch::new().run(|ctx| entry(ctx, &args(None))).unwrap();
    assert_eq!(got[0].to_f32_vec(), vec![1.25; 4]);
    let e = Launch::new().run(|ctx| entry(ctx, &args(Some(ArgValue::Member("DOUBLE".into()))))).unwrap_err();
    assert_eq!(e.message, "invalid cfg.how = DOUBLE: cfg.how takes a Scaling member: HALF, Triple_It, Keep");
    let e = Launch::new().run(|ctx| entry(ctx, &args(Some(ArgValue::Int(7))))).unwrap_err();
    assert_eq!(e.message, "invalid cfg.how = 7: cfg.how takes a Scaling member: HALF, Triple_It, Keep");
    // The dataclass types the field with the enum, its default the member; the kernel checks it.
    let class = scaled::__NKI_CONST_SCALEARGS.source;
    assert!(class.contains("    how: Scaling = Scaling.Keep\n"), "{class}");
    let kernel = shift::NKI_SOURCE;
    assert!(kernel.contains("enums=((\"cfg.how\", cfg.how, Scaling, \"Scaling member (HALF, Triple_It, Keep)\", False),)"), "{kernel}");
    assert!(kernel.contains("    if cfg.how == Scaling.HALF:\n"), "{kernel}");
}
