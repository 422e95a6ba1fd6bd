//! Unit tests of the pipeline on token streams: the Python it emits for each
//! construct, and the errors it reports.

mod bounds;

use crate::ast::FnKind;
use crate::check::{self, Generation};
use crate::diag::Diagnostics;
use crate::emit::python;
use crate::parse::parse_function;

/// Parses and checks `src`; returns the emitted Python or the error messages.
pub(crate) fn python_of(src: &str) -> Result<String, Vec<String>> {
    python_for(src, Generation::Trn2)
}

/// [`python_of`] for a kernel targeting `target`.
pub(crate) fn python_for(src: &str, target: Generation) -> Result<String, Vec<String>> {
    let item: syn::ItemFn = syn::parse_str(src).expect("test input is a function");
    let mut diag = Diagnostics::default();
    let f = parse_function(&item, FnKind::Kernel, &[], &[], &mut diag);
    let info = check::check(&f, target, &mut diag);
    if diag.has_errors() {
        return Err(diag.messages());
    }
    Ok(python::emit(&f, &info).0)
}

/// The body of the kernel `src` emits, after the check of its parameters'
/// contract (tested on its own).
fn body_of(src: &str) -> String {
    let py = python_of(src).unwrap_or_else(|e| panic!("unexpected errors: {e:?}"));
    let contract = |l: &&str| l.starts_with("    check_contract(");
    py.lines().skip(2).skip_while(contract).map(|l| l.strip_prefix("    ").unwrap_or(l)).collect::<Vec<_>>().join("\n")
}

#[test]
fn a_kernels_tensors_take_float_data_unless_they_declare_otherwise_and_ranges_are_asserted() {
    let py =
        python_of("fn k(x: Hbm, #[dtypes(int32, uint32)] ids: Option<Hbm>, #[range(>= 0.0, < 1.0)] rate: f64, #[range(> 0)] n: i64) {}")
            .unwrap();
    let floats = "(nl.float32, nl.bfloat16, nl.float16, nl.tfloat32, nl.float8_e4m3, nl.float8_e4m3fn, nl.float8_e5m2)";
    let x = format!("(\"x\", x, {floats}, \"float32, bfloat16, float16, tfloat32, float8_e4m3, float8_e4m3fn or float8_e5m2\", False)");
    let ids = "(\"ids\", ids, (nl.int32, nl.uint32), \"int32 or uint32\", True)";
    for line in [
        format!("    check_contract(\"k\", dtypes=({x}, {ids}))\n"),
        "    assert rate >= 0.0 and rate < 1.0, f\"k takes rate in [0, 1), not {rate!r}\"\n".to_string(),
        "    assert n > 0, f\"k takes n > 0, not {n!r}\"\n".to_string(),
    ] {
        assert!(py.contains(&line), "`{line}` missing from:\n{py}");
    }
}

#[test]
fn integer_division_becomes_floor_division_and_floats_stay_true_division() {
    let b = body_of("fn k(n: i64, x: f64) -> f64 { let a = n / 128; let b = x / 2.0; let c = (n as f64) / 3.0; b + c + (a as f64) }");
    assert_eq!(b, "a = n // 128\nb = x / 2.0\nc = float(n) / 3.0\nreturn b + c + float(a)");
}

#[test]
fn precedence_is_preserved_with_minimal_parentheses() {
    let b = body_of("fn k(a: i64, b: i64, c: i64) -> i64 { (a + b) * c - (a - (b - c)) }");
    assert_eq!(b, "return (a + b) * c - (a - (b - c))");
    let b = body_of("fn k(a: i64, b: bool) -> bool { !(a > 3) && (b || a == 2) }");
    assert_eq!(b, "return not a > 3 and (b or a == 2)");
}

#[test]
fn control_flow_maps_to_python() {
    let b = body_of(
        "fn k(n: i64, p: Option<Hbm>) { for i in (2..n).step_by(3) { if i == 4 { assert!(n > 1, \"n = {n}\"); } else if i > 9 { } else { let _ = i; } } if let Some(q) = p { let t = q; } }",
    );
    assert_eq!(
        b,
        "for i in range(2, n, 3):\n    if i == 4:\n        assert n > 1, f\"n = {n}\"\n    elif i > 9:\n        pass\n    else:\n        pass\nif p is not None:\n    q = p\n    t = q"
    );
}

#[test]
fn calls_use_keywords_and_shapes_become_tuples() {
    let b = body_of("fn k(x: Hbm) { let t = nl::ndarray([128, 4], nl::float32); nisa::dma_copy(t, x[s![0..128, nl::ds(4, 4)]]); }");
    assert_eq!(b, "t = nl.ndarray(shape=(128, 4), dtype=nl.float32)\nnisa.dma_copy(dst=t, src=x[0:128, nl.ds(start=4, size=4)])");
}

#[test]
fn defaults_and_optional_parameters_form_the_python_signature() {
    let py = python_of("fn k(q: Hbm, #[default(1.0)] scale: f64, #[default(true)] causal: bool, prior: Option<Hbm>) {}").unwrap();
    assert!(
        py.starts_with("@nki.jit\ndef k(q, scale=1.0, causal=True, prior=None):\n    check_contract(\"k\", dtypes=((\"q\", q, ("),
        "{py}"
    );
}

#[test]
fn an_option_before_a_required_parameter_is_positional() {
    // As the NKI library's `router_topk(x, w, w_bias, router_logits, ...)`: `None` is passed, not defaulted.
    let py = python_of("fn k(x: Hbm, bias: Option<Hbm>, out: Hbm, extra: Option<Hbm>, #[default(2)] n: i64) {}").unwrap();
    assert!(py.starts_with("@nki.jit\ndef k(x, bias, out, extra=None, n=2):\n"), "{py}");
    // A defaulted parameter still cannot precede a required one.
    let e = python_of("fn k(x: Hbm, #[default(1)] n: i64, out: Hbm) {}").unwrap_err();
    assert!(e.iter().any(|m| m.contains("`out` has no default but follows a parameter with one")), "{e:?}");
}

#[test]
fn affine_slice_extents_are_known_statically() {
    let errs = python_of(
        "fn k(i: i64) { let a = nl::ndarray([128, 512], nl::float32); let b = nl::ndarray([128, 256], nl::float32); nisa::tensor_copy(b, a[s![.., i * 256..(i + 1) * 256 + 1]]); }",
    )
    .unwrap_err();
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].contains("[128, 257]"), "{errs:?}");
}

#[test]
fn every_error_of_a_function_is_reported() {
    let errs =
        python_of("fn k(x: Hbm) { let a = |v: i64| v; while true {} let b = undefined + 1; nisa::nc_matmul(x, x, x); }").unwrap_err();
    assert_eq!(errs.len(), 6, "{errs:?}");
    assert!(errs.iter().any(|e| e.contains("closures")));
    assert!(errs.iter().any(|e| e.contains("`while`")));
    assert!(errs.iter().any(|e| e.contains("cannot find `undefined`")));
    assert_eq!(errs.iter().filter(|e| e.contains("nisa.nc_matmul")).count(), 3, "dst, stationary and moving in HBM: {errs:?}");
}

#[test]
fn keyword_problems_are_named() {
    let errs =
        python_of("fn k(x: Hbm) { let t = nl::ndarray([128, 4], nl::float32); nisa::memset(t, 0.0, valu = 1.0, dst = t); }").unwrap_err();
    assert!(errs.iter().any(|e| e.contains("no parameter `valu`; did you mean `value`?")), "{errs:?}");
    assert!(errs.iter().any(|e| e.contains("`dst` is given twice")), "{errs:?}");
}

#[test]
fn python_names_cannot_be_bound() {
    let errs = python_of("fn k(n: i64) { let range = n; let pass = 2; }").unwrap_err();
    assert_eq!(errs.len(), 2, "{errs:?}");
}

#[test]
fn replica_groups_are_tuples_of_tuples() {
    let b = body_of("fn k(x: Hbm) { let rg = ncc::ReplicaGroup([[0, 1], [2, 3]]); let one = ncc::ReplicaGroup([[0, 1, 2]]); }");
    assert_eq!(b, "rg = ncc.ReplicaGroup(((0, 1), (2, 3)))\none = ncc.ReplicaGroup(((0, 1, 2),))");
}

#[test]
fn a_ds_slice_can_be_bound_and_used_as_an_index() {
    let b = body_of(
        "fn k(x: Hbm, i: i64) { let r = nl::ds(i * 4, 4); let t = nl::ndarray([128, 4], nl::float32); nisa::dma_copy(t, x[s![0..128, r]]); }",
    );
    assert_eq!(
        b,
        "r = nl.ds(start=i * 4, size=4)\nt = nl.ndarray(shape=(128, 4), dtype=nl.float32)\nnisa.dma_copy(dst=t, src=x[0:128, r])"
    );
    // The slice's size is known: a mismatched copy is caught as with an inline nl::ds.
    let errs =
        python_of("fn k(x: Hbm) { let r = nl::ds(0, 8); let t = nl::ndarray([128, 4], nl::float32); nisa::tensor_copy(t, t[s![.., r]]); }")
            .unwrap_err();
    assert!(errs.iter().any(|e| e.contains("slice end 8 is past the end of dim 1")), "{errs:?}");
    let errs = python_of("fn k() { let r = nl::ds(0, 0); }").unwrap_err();
    assert!(errs.iter().any(|e| e.contains("at least 1")), "{errs:?}");
    let errs = python_of("fn k() { let r = nl::dss(0, 4); }").unwrap_err();
    assert!(errs.iter().any(|e| e.contains("did you mean `nl::ds`?")), "{errs:?}");
}

#[test]
fn no_official_op_or_parameter_is_planned() {
    let planned: Vec<_> = nki_spec::ops().filter(|o| o.binding().is_none()).map(|o| o.official_name()).collect();
    assert!(planned.is_empty(), "Planned ops: {planned:?}");
    let params: Vec<_> = nki_spec::ops()
        .flat_map(|o| {
            o.params.iter().filter(|p| p.kind == nki_spec::Kind::Planned).map(move |p| format!("{} {}", o.official_name(), p.name))
        })
        .collect();
    assert!(params.is_empty(), "Planned parameters: {params:?}");
    // The one compute dtype both executions use is accepted; another is refused by name.
    let rms = |dt: &str| {
        python_of(&format!(
            "fn k() {{ let x = nl::ndarray([4, 8], nl::float32); let w = nl::ndarray([1, 8], nl::float32); let y = nl::rms_norm(x, w, 1, 8, compute_dtype = nl::{dt}); }}"
        ))
    };
    assert!(rms("float32").is_ok_and(|py| py.contains("compute_dtype=nl.float32")), "{:?}", rms("float32"));
    let errs = rms("bfloat16").unwrap_err();
    assert!(errs.len() == 1 && errs[0].contains("compute_dtype of nl.rms_norm must be nl.float32"), "{errs:?}");
}

#[test]
fn reordering_views_are_typed_and_emitted_with_keywords() {
    let b = body_of(
        "fn k() { let t = nl::ndarray([128, 2, 4], nl::float32); let p = t.permute([0, 2, 1]); let f = p.flatten_dims(1, 2); let u = nl::ndarray([128, 8], nl::float32); nisa::tensor_copy(u, f); }",
    );
    assert!(b.contains("p = t.permute(dims=(0, 2, 1))") && b.contains("f = p.flatten_dims(start_dim=1, end_dim=2)"), "{b}");
    let errs =
        python_of("fn k() { let t = nl::ndarray([128, 2, 4], nl::float32); let p = t.permute([1, 0, 2]); let q = t.squeeze_dim(2); }")
            .unwrap_err();
    assert!(errs.iter().any(|e| e.contains("keep the partition dim (0) first")), "{errs:?}");
    assert!(errs.iter().any(|e| e.contains("dim 2 has size 4")), "{errs:?}");
}

#[test]
fn every_emitted_line_records_the_span_it_stands_for() {
    let src = r#"
        /// Doubles `x`.
        ///
        /// Row blocks of 128.
        fn k(x: Hbm) -> Hbm {
            let [n, d] = x.shape();
            let out = nl::ndarray([n, d], x.dtype(), buffer = nl::shared_hbm);
            for i in 0..n / 128 {
                let t = nl::ndarray([128, d], x.dtype());
                nisa::dma_copy(t, x[s![i * 128..(i + 1) * 128, ..]]);
                if d > 1 {
                    nisa::tensor_scalar(t, t, nl::multiply, 2.0);
                } else {
                    nisa::tensor_scalar(t, t, nl::add, 1.0);
                }
                nisa::dma_copy(out[s![i * 128..(i + 1) * 128, ..]], t);
            }
            out
        }"#;
    let item: syn::ItemFn = syn::parse_str(src).expect("test input is a function");
    let mut diag = Diagnostics::default();
    let f = parse_function(&item, FnKind::Kernel, &[], &[], &mut diag);
    let info = check::check(&f, Generation::Trn2, &mut diag);
    assert!(!diag.has_errors(), "{:?}", diag.messages());
    let (py, spans) = python::emit(&f, &info);
    assert!(py.contains("\n\n    Row blocks of 128.") && py.contains("    else:\n"), "{py}");
    assert_eq!(spans.len(), py.lines().count(), "one span per line, docstring blanks included:\n{py}");
}

#[test]
fn a_body_rustc_rejects_for_a_keyword_path_gets_a_stand_in_and_no_error_of_the_macros() {
    let expand = |src: &str| {
        let item: proc_macro2::TokenStream = src.parse().unwrap();
        crate::expand::expand(FnKind::Kernel, proc_macro2::TokenStream::new(), item).to_string()
    };
    // rustc reports `nl::where` (suggesting `nl::r#where`); the macro adds nothing.
    let keyword = expand("fn k(x: Hbm) -> Hbm { let v = nl::where(x, x, 0.0); x }");
    assert!(!keyword.contains("compile_error"), "{keyword}");
    assert!(keyword.contains("did not compile"), "{keyword}");
    // Any other body syn cannot read is syn's one error, beside the same stand-in.
    let other = expand("fn k(x: Hbm) -> Hbm { let v = x..=; x }");
    assert_eq!(other.matches("compile_error").count(), 1, "{other}");
    assert!(other.contains("did not compile"), "{other}");
}

/// Parses and checks `src` with the module constants `consts`; returns the
/// emitted Python (module constants first) or the error messages.
fn python_with_consts(consts: &[&str], src: &str) -> Result<String, Vec<String>> {
    let item: syn::ItemFn = syn::parse_str(src).expect("test input is a function");
    let items: Vec<syn::ItemConst> = consts.iter().map(|c| syn::parse_str(c).expect("test input is a constant")).collect();
    let mut diag = Diagnostics::default();
    let mut f = parse_function(&item, FnKind::Kernel, &[], &[], &mut diag);
    f.consts = crate::parse::parse_consts(&items, &mut diag);
    let info = check::check(&f, Generation::Trn2, &mut diag);
    if diag.has_errors() {
        return Err(diag.messages());
    }
    let consts: String = f.consts.iter().map(python::module_const).collect();
    Ok(consts + &python::emit(&f, &info).0)
}

#[test]
fn an_assert_message_may_name_a_module_str_constant() {
    let rule = "const N_POSITIVE: &str = \"k: n must be >= 1\";";
    let py = python_with_consts(&[rule], "fn k(n: i64) { assert!(n >= 1, N_POSITIVE); }").unwrap();
    assert!(py.starts_with("N_POSITIVE = \"k: n must be >= 1\"\n"), "{py}");
    assert!(py.contains("\n    assert n >= 1, N_POSITIVE\n"), "{py}");
    // Anything else named as the message is refused, naming it.
    let e = python_with_consts(&["const N_MIN: i64 = 1;"], "fn k(n: i64) { assert!(n >= N_MIN, N_MIN); }").unwrap_err();
    assert!(e.iter().any(|m| m.contains("the assert message `N_MIN` holds the integer 1")), "{e:?}");
    let e = python_with_consts(&[], "fn k(n: i64) { assert!(n >= 1, MISSING); }").unwrap_err();
    assert!(e.iter().any(|m| m.contains("the assert message `MISSING` is not a module `&str` constant")), "{e:?}");
    let e = python_with_consts(&[rule], "fn k(n: i64) { assert!(n >= 1, N_POSITIVE, n); }").unwrap_err();
    assert!(e.iter().any(|m| m.contains("the name of a module `&str` constant")), "{e:?}");
}

#[test]
fn an_assert_message_may_name_a_str_constant_of_another_module() {
    let py = python_with_consts(&[], "fn k(n: i64) { assert!(n >= 1, crate::rules::N_POSITIVE); }").unwrap();
    assert!(py.contains("\n    assert n >= 1, N_POSITIVE\n"), "{py}");
    // Imported under its own name, it may not meet a name of this module.
    let clash = "const N_POSITIVE: &str = \"k: n must be >= 1\";";
    let e = python_with_consts(&[clash], "fn k(n: i64) { assert!(n >= 1, crate::rules::N_POSITIVE); }").unwrap_err();
    assert!(e.iter().any(|m| m.contains("`crate::rules::N_POSITIVE` is imported into the emitted module as `N_POSITIVE`")), "{e:?}");
    // Only `crate::module::NAME`: a relative path is refused.
    let e = python_with_consts(&[], "fn k(n: i64) { assert!(n >= 1, super::rules::N_POSITIVE); }").unwrap_err();
    assert!(e.iter().any(|m| m.contains("or `crate::module::NAME` naming one of another #[nki_module]")), "{e:?}");
}

#[test]
fn an_import_step_answers_or_refuses_without_panicking() {
    let step = |s: &str| crate::module::import_step(s.parse().expect("test input tokenizes")).to_string();
    // Not the step's shape: one error, no panic.
    for bad in ["", "{}", "{ const X: i64 = 1; } (crate::a) [X]", "{ const X: i64 = 1; } (crate::a) [1] {} []"] {
        assert!(step(bad).contains("is a step of #[nki_module]'s imports"), "{bad}");
    }
    // A function is no item to import (its call needs no import).
    let out = step("{ fn X() {} } (crate::a) [X] {} []");
    assert!(out.contains("`X` is not a constant, #[nki_object] or #[nki_enum]"), "{out}");
    // A known constant passes on to the module; an unknown name is refused, naming it.
    let out = step("{ const X: i64 = 1; } (crate::a) [X Y] {} [] mod m { #[nki_helper] fn f() {} }");
    assert!(out.contains("`Y` is not a constant, #[nki_object] or #[nki_enum] of the #[nki_module] `crate::a`"), "{out}");
    assert!(out.contains("__imports { (crate :: a) { const X : i64 = 1 ; } }"), "{out}");
    // A module still to ask is asked next, carrying what was got.
    let out = step("{ const X: i64 = 1; } (crate::a) [X] {} [(crate::b) [Z]] mod m {}");
    assert!(
        out.starts_with("crate :: b :: __nki_module_items ! { (crate :: b) [Z] { (crate :: a) { const X : i64 = 1 ; } } [] mod m { } }"),
        "{out}"
    );
}

#[test]
fn a_field_of_another_functions_result_is_unseen_and_asks_for_a_type_where_it_matters() {
    // Arithmetic takes it as Python does; a method of it needs the bundle's type.
    let errs = python_of("fn k(x: Hbm, s: i64) -> i64 { let d = dims_of(x); let m = d.n - s; m.div_ceil(2) }").unwrap_err();
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].starts_with("cannot call `.div_ceil()` on the result of another function without knowing its type"), "{errs:?}");
    let b = body_of("fn k(x: Hbm, s: i64) -> i64 { let d = dims_of(x); d.n - s }");
    assert_eq!(b, "d = dims_of(x)\nreturn d.n - s");
}
