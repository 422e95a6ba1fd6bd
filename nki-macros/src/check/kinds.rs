//! Whether an argument's type suits its parameter's kind (and memory spaces).

use super::*;
use nki_spec::Memory;
use nki_spec::constants::ALU_UNARY_TOKENS;

impl Checker<'_> {
    /// Checks that an argument's type suits its parameter kind.
    pub(super) fn kind(&mut self, what: &str, p: &Param, t: &Ty, e: &Expr) {
        if t.is_unknown() {
            return;
        }
        let name = p.name;
        let takes_register = matches!(p.kind, Kind::RegisterSource | Kind::DynamicOffset | Kind::Register);
        if !takes_register && t.holds_register() {
            self.diag.error(e.span, format!("`{name}` of {what}: {}", nki_spec::registers::TRACE_TIME));
            return;
        }
        let expect = |d: &mut Diagnostics, want: &str| {
            d.error(e.span, format!("`{name}` of {what} must be {want}, but this is {}", t.describe()));
        };
        match (p.kind, t) {
            (Kind::Tensor(spaces), Ty::Tensor(tt)) => {
                if let Some(space) = tt.space
                    && let Some(why) = space_violation(spaces, space)
                {
                    self.diag.error(e.span, format!("`{name}` of {what} {why}, but this is {} tensor", space.with_article()));
                }
            }
            (Kind::Tensor(_), _) => expect(self.diag, "a tensor"),
            (Kind::Operand, Ty::Int(_) | Ty::Float | Ty::Tensor(_)) => {}
            (Kind::Operand, _) => expect(self.diag, "a number or a (P, 1) tensor"),
            (Kind::Op(class), Ty::Op(c, n)) => {
                let ok = match class {
                    OpClass::Any => true,
                    OpClass::Alu => *c == OpClass::Alu,
                    OpClass::Act => *c == OpClass::Act,
                    OpClass::AluScalar => *c == OpClass::Alu || n.is_some_and(|n| ALU_UNARY_TOKENS.contains(&n)),
                };
                if !ok {
                    let want = match class {
                        OpClass::Act => "an activation function such as nl::exp or nl::copy".to_string(),
                        OpClass::AluScalar => {
                            let unary: Vec<String> = ALU_UNARY_TOKENS.iter().map(|t| format!("nl::{t}")).collect();
                            format!("an ALU op such as nl::add or nl::maximum, or a unary ALU op ({})", unary.join(", "))
                        }
                        _ => "an ALU op such as nl::add or nl::maximum".to_string(),
                    };
                    self.diag.error(e.span, format!("`{name}` of {what} must be {want}, but nl::{} is not", n.unwrap_or("?")));
                }
            }
            (Kind::Op(_), _) => expect(self.diag, "an operator token such as nl::add or nl::exp"),
            (Kind::Int, Ty::Int(_)) | (Kind::Float, Ty::Int(_) | Ty::Float) | (Kind::Bool, Ty::Bool) => {}
            (Kind::Int, _) => expect(self.diag, "an integer"),
            (Kind::Float, _) => expect(self.diag, "a number"),
            (Kind::Bool, _) => expect(self.diag, "a bool"),
            (Kind::OptBool, Ty::Bool | Ty::None) => {}
            (Kind::OptBool, Ty::Option(i)) if matches!(**i, Ty::Bool | Ty::Unknown | Ty::Opaque) => {}
            (Kind::OptBool, _) => expect(self.diag, "a bool or None"),
            (Kind::Dtype, Ty::Dtype(_)) | (Kind::Buffer, Ty::Buffer(_)) | (Kind::Str, Ty::Str) => {}
            (Kind::Dtype, _) => expect(self.diag, "a dtype such as nl::float32"),
            (Kind::Buffer, _) => expect(self.diag, "a buffer such as nl::sbuf"),
            (Kind::Str, _) => expect(self.diag, "a string"),
            (Kind::Enum(en), Ty::Enum(got)) if en == *got => {}
            (Kind::Enum(en), _) => expect(self.diag, &format!("a nisa::{en} member")),
            (Kind::Pattern, Ty::List(items) | Ty::Tuple(items)) => {
                let pair = |t: &Ty| match t {
                    Ty::List(x) | Ty::Tuple(x) => x.len() == 2 && x.iter().all(|v| v.is_int() || v.is_unknown()),
                    Ty::Unknown => true,
                    _ => false,
                };
                if items.is_empty() || !items.iter().all(pair) {
                    expect(self.diag, "an access pattern [[step, count], ...]");
                }
            }
            (Kind::Pattern, _) => expect(self.diag, "an access pattern [[step, count], ...]"),
            (Kind::Ints, Ty::Shape(_)) => {}
            (Kind::Ints, Ty::List(items) | Ty::Tuple(items)) if items.iter().all(|v| v.is_int() || v.is_unknown()) => {}
            (Kind::Ints, Ty::Seq(v)) if v.is_int() || v.is_unknown() => {}
            (Kind::Ints, _) => expect(self.diag, "a list of integers"),
            (Kind::Floats, Ty::List(items) | Ty::Tuple(items))
                if items.iter().all(|v| matches!(v, Ty::Int(_) | Ty::Float | Ty::Unknown)) => {}
            (Kind::Floats, _) => expect(self.diag, "a list of numbers"),
            // Its shape is checked by the rule of nl.shared_constant.
            (Kind::Constant, _) => {}
            (Kind::Axis, Ty::Int(_)) => {}
            (Kind::Axis, Ty::List(items) | Ty::Tuple(items)) if items.iter().all(|v| v.is_int() || v.is_unknown()) => {}
            (Kind::Axis, _) => expect(self.diag, "an axis or a tuple of axes"),
            (Kind::Pair, Ty::Tuple(items) | Ty::List(items)) if items.len() == 2 && items.iter().all(|v| v.is_int() || v.is_unknown()) => {}
            (Kind::Pair, _) => expect(self.diag, "a pair of integers"),
            (Kind::RegisterSource, Ty::Register | Ty::Int(_)) => {}
            (Kind::RegisterSource, _) => expect(self.diag, "a register or an integer"),
            (Kind::DynamicOffset, Ty::Register | Ty::Tensor(_)) => {}
            (Kind::DynamicOffset, _) => expect(self.diag, "a register or a one-element SBUF tensor"),
            (Kind::Register, Ty::Register) if name == "dst" => self.frozen_write(e),
            (Kind::Register, Ty::Register) | (Kind::ReplicaGroup, Ty::ReplicaGroup) => {}
            (Kind::Register, _) => expect(self.diag, "a register"),
            (Kind::ReplicaGroup, _) => expect(self.diag, "a replica group (ncc::ReplicaGroup(...))"),
            (Kind::Groups, t) if t.fits(&Ty::Groups) => {}
            (Kind::Groups, _) => expect(self.diag, "replica group rings such as [[0, 1, 2, 3]]"),
            (Kind::TensorLists, Ty::List(chs) | Ty::Tuple(chs))
                if chs.iter().all(|c| matches!(c, Ty::List(ts) | Ty::Tuple(ts) if ts.iter().all(|t| t.is_tensor() || t.is_unknown()))) => {}
            // One list per channel from a comprehension over a trace-time channel count.
            (Kind::TensorLists, Ty::Seq(ch))
                if matches!(&**ch, Ty::List(ts) | Ty::Tuple(ts) if ts.iter().all(|t| t.is_tensor() || t.is_unknown()))
                    || matches!(&**ch, Ty::Seq(t) if t.is_tensor() || t.is_unknown()) => {}
            (Kind::TensorLists, _) => expect(self.diag, "one list of tensors per channel, e.g. [[buf]]"),
            (Kind::Tensors, Ty::List(ts) | Ty::Tuple(ts)) if ts.iter().all(|t| t.is_tensor() || t.is_unknown()) => {}
            (Kind::Tensors, Ty::Seq(t)) if t.is_tensor() || t.is_unknown() => {}
            (Kind::Tensors, _) => expect(self.diag, "a list of tensors"),
            (Kind::Names, _) if split_views::literal_pattern(e).is_some() => {}
            (Kind::Names, _) => {
                expect(self.diag, "a literal pattern of dim names, each a string or a tuple of strings, e.g. (\"b\", (\"h\", \"w\"))")
            }
            (Kind::Sizes, _) if split_views::literal_sizes(e, t).is_some() => {}
            (Kind::Sizes, _) => expect(self.diag, "a list of (name, size) pairs, e.g. [(\"h\", 4)]"),
            (Kind::Callable | Kind::Planned, _) => {
                self.diag.error(e.span, format!("`{name}` of {what} is part of NKI 2.32, but nki-rs does not support it yet"));
            }
        }
    }
}

/// Why a tensor in `space` cannot be passed where `spaces` are accepted: the
/// spec's rule ([`Spaces::admits`]), with a hint where one helps. HBM is taken
/// as shared (kernel inputs and outputs are); the emulator refuses a private
/// one where only shared HBM is accepted.
fn space_violation(spaces: Spaces, space: Space) -> Option<&'static str> {
    let memory = match space {
        Space::Sbuf => Memory::Sbuf,
        Space::Psum => Memory::Psum,
        Space::Hbm => Memory::SharedHbm,
    };
    if spaces.admits(memory) {
        return None;
    }
    Some(match spaces {
        Spaces::OnChip => "must be in SBUF or PSUM (compute engines cannot access HBM: load it into an SBUF tile with nisa::dma_copy)",
        Spaces::Psum => "must be in PSUM (the Tensor Engine writes its results only to PSUM)",
        Spaces::Dma => {
            "cannot be in PSUM: DMA cannot access PSUM, so move PSUM data to SBUF with nisa::tensor_copy first (and DMA the SBUF tile)"
        }
        _ => spaces.requirement(),
    })
}
