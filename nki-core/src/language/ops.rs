//! Operator tokens passed as `op=` arguments (`nl.add`, `nl.exp`, ...).

use crate::numeric::erf::erf;
use std::fmt;

/// An `nki.language` function used as an operator token by ISA ops: ALU ops on
/// the Vector/GpSimd engines, comparisons (1.0 / 0.0 results), and activation
/// functions on the Scalar engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum NlOp {
    Add,
    Subtract,
    Multiply,
    Divide,
    Maximum,
    Minimum,
    Power,
    Less,
    LessEqual,
    Greater,
    GreaterEqual,
    Equal,
    NotEqual,
    LogicalAnd,
    LogicalOr,
    LogicalXor,
    AbsMax,
    AbsMin,
    Fmod,
    Mod,
    BitwiseAnd,
    BitwiseOr,
    BitwiseXor,
    LeftShift,
    RightShift,
    Exp,
    Log,
    Copy,
    Reciprocal,
    Sqrt,
    Rsqrt,
    Square,
    Abs,
    Negative,
    Tanh,
    Sigmoid,
    Relu,
    Silu,
    Gelu,
    GeluApprxTanh,
    GeluApprxSigmoid,
    Erf,
    Sin,
    Cos,
    Arctan,
    Softplus,
    Mish,
    Sign,
    Ceil,
    Floor,
    Trunc,
    Tan,
    ErfDx,
    GeluDx,
    GeluApprxSigmoidDx,
    SiluDx,
    LogicalNot,
    Invert,
    Average,
    Bypass,
    Prelu,
}

impl NlOp {
    /// Every token, in a stable order.
    pub const ALL: [NlOp; 61] = [
        NlOp::Add,
        NlOp::Subtract,
        NlOp::Multiply,
        NlOp::Divide,
        NlOp::Maximum,
        NlOp::Minimum,
        NlOp::Power,
        NlOp::Less,
        NlOp::LessEqual,
        NlOp::Greater,
        NlOp::GreaterEqual,
        NlOp::Equal,
        NlOp::NotEqual,
        NlOp::LogicalAnd,
        NlOp::LogicalOr,
        NlOp::LogicalXor,
        NlOp::AbsMax,
        NlOp::AbsMin,
        NlOp::Fmod,
        NlOp::Mod,
        NlOp::BitwiseAnd,
        NlOp::BitwiseOr,
        NlOp::BitwiseXor,
        NlOp::LeftShift,
        NlOp::RightShift,
        NlOp::Exp,
        NlOp::Log,
        NlOp::Copy,
        NlOp::Reciprocal,
        NlOp::Sqrt,
        NlOp::Rsqrt,
        NlOp::Square,
        NlOp::Abs,
        NlOp::Negative,
        NlOp::Tanh,
        NlOp::Sigmoid,
        NlOp::Relu,
        NlOp::Silu,
        NlOp::Gelu,
        NlOp::GeluApprxTanh,
        NlOp::GeluApprxSigmoid,
        NlOp::Erf,
        NlOp::Sin,
        NlOp::Cos,
        NlOp::Arctan,
        NlOp::Softplus,
        NlOp::Mish,
        NlOp::Sign,
        NlOp::Ceil,
        NlOp::Floor,
        NlOp::Trunc,
        NlOp::Tan,
        NlOp::ErfDx,
        NlOp::GeluDx,
        NlOp::GeluApprxSigmoidDx,
        NlOp::SiluDx,
        NlOp::LogicalNot,
        NlOp::Invert,
        NlOp::Average,
        NlOp::Bypass,
        NlOp::Prelu,
    ];

    /// The `nki.language` name (`"add"`, `"exp"`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            NlOp::Add => "add",
            NlOp::Subtract => "subtract",
            NlOp::Multiply => "multiply",
            NlOp::Divide => "divide",
            NlOp::Maximum => "maximum",
            NlOp::Minimum => "minimum",
            NlOp::Power => "power",
            NlOp::Less => "less",
            NlOp::LessEqual => "less_equal",
            NlOp::Greater => "greater",
            NlOp::GreaterEqual => "greater_equal",
            NlOp::Equal => "equal",
            NlOp::NotEqual => "not_equal",
            NlOp::LogicalAnd => "logical_and",
            NlOp::LogicalOr => "logical_or",
            NlOp::LogicalXor => "logical_xor",
            NlOp::AbsMax => "abs_max",
            NlOp::AbsMin => "abs_min",
            NlOp::Fmod => "fmod",
            NlOp::Mod => "mod",
            NlOp::BitwiseAnd => "bitwise_and",
            NlOp::BitwiseOr => "bitwise_or",
            NlOp::BitwiseXor => "bitwise_xor",
            NlOp::LeftShift => "left_shift",
            NlOp::RightShift => "right_shift",
            NlOp::Exp => "exp",
            NlOp::Log => "log",
            NlOp::Copy => "copy",
            NlOp::Reciprocal => "reciprocal",
            NlOp::Sqrt => "sqrt",
            NlOp::Rsqrt => "rsqrt",
            NlOp::Square => "square",
            NlOp::Abs => "abs",
            NlOp::Negative => "negative",
            NlOp::Tanh => "tanh",
            NlOp::Sigmoid => "sigmoid",
            NlOp::Relu => "relu",
            NlOp::Silu => "silu",
            NlOp::Gelu => "gelu",
            NlOp::GeluApprxTanh => "gelu_apprx_tanh",
            NlOp::GeluApprxSigmoid => "gelu_apprx_sigmoid",
            NlOp::Erf => "erf",
            NlOp::Sin => "sin",
            NlOp::Cos => "cos",
            NlOp::Arctan => "arctan",
            NlOp::Softplus => "softplus",
            NlOp::Mish => "mish",
            NlOp::Sign => "sign",
            NlOp::Ceil => "ceil",
            NlOp::Floor => "floor",
            NlOp::Trunc => "trunc",
            NlOp::Tan => "tan",
            NlOp::ErfDx => "erf_dx",
            NlOp::GeluDx => "gelu_dx",
            NlOp::GeluApprxSigmoidDx => "gelu_apprx_sigmoid_dx",
            NlOp::SiluDx => "silu_dx",
            NlOp::LogicalNot => "logical_not",
            NlOp::Invert => "invert",
            NlOp::Average => "average",
            NlOp::Bypass => "bypass",
            NlOp::Prelu => "prelu",
        }
    }

    /// Parses an `nl` name, with or without the `nl.` prefix.
    pub fn from_name(name: &str) -> Option<NlOp> {
        let bare = name.strip_prefix("nl.").unwrap_or(name);
        NlOp::ALL.into_iter().find(|o| o.name() == bare)
    }

    /// Whether the token is a two-operand ALU op (arithmetic or comparison).
    pub const fn is_binary(self) -> bool {
        !self.is_unary()
    }

    /// Whether the token is a one-operand activation function.
    pub const fn is_unary(self) -> bool {
        matches!(
            self,
            NlOp::Exp
                | NlOp::Log
                | NlOp::Copy
                | NlOp::Reciprocal
                | NlOp::Sqrt
                | NlOp::Rsqrt
                | NlOp::Square
                | NlOp::Abs
                | NlOp::Negative
                | NlOp::Tanh
                | NlOp::Sigmoid
                | NlOp::Relu
                | NlOp::Silu
                | NlOp::Gelu
                | NlOp::GeluApprxTanh
                | NlOp::GeluApprxSigmoid
                | NlOp::Erf
                | NlOp::Sin
                | NlOp::Cos
                | NlOp::Arctan
                | NlOp::Softplus
                | NlOp::Mish
                | NlOp::Sign
                | NlOp::Ceil
                | NlOp::Floor
                | NlOp::Trunc
                | NlOp::Tan
                | NlOp::ErfDx
                | NlOp::GeluDx
                | NlOp::GeluApprxSigmoidDx
                | NlOp::SiluDx
                | NlOp::LogicalNot
                | NlOp::Invert
                | NlOp::Prelu
        )
    }

    /// Whether the token can reduce (`add`, `maximum`, `minimum`, `multiply`).
    pub const fn is_reduction(self) -> bool {
        matches!(self, NlOp::Add | NlOp::Maximum | NlOp::Minimum | NlOp::Multiply)
    }

    /// Applies a binary token in fp32 (comparisons give 1.0 or 0.0).
    #[inline(always)]
    pub fn apply2(self, a: f32, b: f32) -> f32 {
        let flag = |c: bool| if c { 1.0 } else { 0.0 };
        match self {
            NlOp::Add => a + b,
            NlOp::Subtract => a - b,
            NlOp::Multiply => a * b,
            NlOp::Divide => a / b,
            NlOp::Maximum => a.max(b),
            NlOp::Minimum => a.min(b),
            NlOp::Power => a.powf(b),
            NlOp::Less => flag(a < b),
            NlOp::LessEqual => flag(a <= b),
            NlOp::Greater => flag(a > b),
            NlOp::GreaterEqual => flag(a >= b),
            NlOp::Equal => flag(a == b),
            NlOp::NotEqual => flag(a != b),
            NlOp::LogicalAnd => flag(a != 0.0 && b != 0.0),
            NlOp::LogicalOr => flag(a != 0.0 || b != 0.0),
            NlOp::LogicalXor => flag((a != 0.0) != (b != 0.0)),
            NlOp::AbsMax => a.abs().max(b.abs()),
            NlOp::AbsMin => a.abs().min(b.abs()),
            NlOp::Fmod => a % b,
            NlOp::Mod => {
                // The remainder takes the sign of the divisor (Python's `%`).
                let r = a % b;
                if r != 0.0 && (r < 0.0) != (b < 0.0) { r + b } else { r }
            }
            NlOp::BitwiseAnd | NlOp::BitwiseOr | NlOp::BitwiseXor | NlOp::LeftShift | NlOp::RightShift => {
                self.apply_int(int_value(a), int_value(b)).map_or(f32::NAN, |r| r as f32)
            }
            NlOp::Average => (a + b) * 0.5,
            NlOp::Bypass => a,
            _ => f32::NAN,
        }
    }

    /// Applies a unary token in fp32.
    #[inline(always)]
    pub fn apply1(self, x: f32) -> f32 {
        match self {
            NlOp::Exp => crate::numeric::exp::exp(x),
            NlOp::Log => x.ln(),
            NlOp::Copy => x,
            NlOp::Reciprocal => 1.0 / x,
            NlOp::Sqrt => x.sqrt(),
            NlOp::Rsqrt => 1.0 / x.sqrt(),
            NlOp::Square => x * x,
            NlOp::Abs => x.abs(),
            NlOp::Negative => -x,
            NlOp::Tanh => x.tanh(),
            NlOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
            NlOp::Relu => x.max(0.0),
            NlOp::Silu => x / (1.0 + (-x).exp()),
            NlOp::Gelu => {
                let x64 = f64::from(x);
                (0.5 * x64 * (1.0 + erf(x64 / std::f64::consts::SQRT_2))) as f32
            }
            NlOp::GeluApprxTanh => {
                let x64 = f64::from(x);
                let inner = (2.0 / std::f64::consts::PI).sqrt() * (x64 + 0.044_715 * x64 * x64 * x64);
                (0.5 * x64 * (1.0 + inner.tanh())) as f32
            }
            NlOp::GeluApprxSigmoid => x / (1.0 + (-1.702 * x).exp()),
            NlOp::Erf => erf(f64::from(x)) as f32,
            NlOp::Sin => x.sin(),
            NlOp::Cos => x.cos(),
            NlOp::Arctan => x.atan(),
            NlOp::Softplus => softplus(f64::from(x)) as f32,
            NlOp::Mish => (f64::from(x) * softplus(f64::from(x)).tanh()) as f32,
            NlOp::Sign => {
                if x > 0.0 {
                    1.0
                } else if x < 0.0 {
                    -1.0
                } else {
                    x
                }
            }
            NlOp::Ceil => x.ceil(),
            NlOp::Floor => x.floor(),
            NlOp::Trunc => x.trunc(),
            NlOp::Tan => f64::from(x).tan() as f32,
            NlOp::ErfDx => {
                let x64 = f64::from(x);
                (2.0 / std::f64::consts::PI.sqrt() * (-x64 * x64).exp()) as f32
            }
            NlOp::GeluDx => {
                let x64 = f64::from(x);
                let density = (-0.5 * x64 * x64).exp() / (2.0 * std::f64::consts::PI).sqrt();
                (0.5 * (1.0 + erf(x64 / std::f64::consts::SQRT_2)) + x64 * density) as f32
            }
            NlOp::GeluApprxSigmoidDx => {
                let s = sigmoid(1.702 * f64::from(x));
                (s * (1.0 + 1.702 * f64::from(x) * (1.0 - s))) as f32
            }
            NlOp::SiluDx => {
                let s = sigmoid(f64::from(x));
                (s * (1.0 + f64::from(x) * (1.0 - s))) as f32
            }
            NlOp::LogicalNot => {
                if x == 0.0 {
                    1.0
                } else {
                    0.0
                }
            }
            NlOp::Invert => !int_value(x) as f32,
            NlOp::Prelu => prelu_with_slope(x, 0.0),
            _ => f32::NAN,
        }
    }

    /// Whether the token is one of the ALU table's unary ops (`nl.abs`, ...), which
    /// the instructions combining data with a scalar operand take as their op.
    pub fn is_alu_unary(self) -> bool {
        nki_spec::constants::ALU_UNARY_TOKENS.contains(&self.name())
    }

    /// Whether the docs define the token on integers only (bitwise ops and shifts).
    pub fn integer_only(self) -> bool {
        nki_spec::constants::INTEGER_TOKENS.contains(&self.name())
    }

    /// Exact integer evaluation of a two-operand token on integer values, where it
    /// has one (arithmetic wraps, shifts past the width give 0, or the sign for an
    /// arithmetic right shift).
    pub fn apply_int(self, a: i64, b: i64) -> Option<i64> {
        let shift = u32::try_from(b).ok().filter(|&s| s < 64);
        Some(match self {
            NlOp::Add => a.wrapping_add(b),
            NlOp::Subtract => a.wrapping_sub(b),
            NlOp::Multiply => a.wrapping_mul(b),
            NlOp::Maximum => a.max(b),
            NlOp::Minimum => a.min(b),
            NlOp::Less => i64::from(a < b),
            NlOp::LessEqual => i64::from(a <= b),
            NlOp::Greater => i64::from(a > b),
            NlOp::GreaterEqual => i64::from(a >= b),
            NlOp::Equal => i64::from(a == b),
            NlOp::NotEqual => i64::from(a != b),
            NlOp::BitwiseAnd => a & b,
            NlOp::BitwiseOr => a | b,
            NlOp::BitwiseXor => a ^ b,
            NlOp::LeftShift => shift.map_or(0, |s| a << s),
            NlOp::RightShift => shift.map_or(if a < 0 { -1 } else { 0 }, |s| a >> s),
            _ => return None,
        })
    }

    /// Identity element of a reduction token.
    pub fn identity(self) -> f32 {
        match self {
            NlOp::Add => 0.0,
            NlOp::Multiply => 1.0,
            NlOp::Maximum => f32::NEG_INFINITY,
            NlOp::Minimum => f32::INFINITY,
            _ => f32::NAN,
        }
    }
}

/// PReLU: `x` where `x >= 0`, else `alpha * x` (the token alone has slope 0;
/// `nisa.activate2` passes its `relu_param`).
pub(crate) fn prelu_with_slope(x: f32, alpha: f32) -> f32 {
    if x >= 0.0 { x } else { alpha * x }
}

/// The integer a bitwise token reads from a float value: truncated toward zero (NaN reads as 0).
fn int_value(x: f32) -> i64 {
    if x.is_nan() { 0 } else { x.trunc() as i64 }
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// `ln(1 + e^x)` without overflow for large `x`.
fn softplus(x: f64) -> f64 {
    x.max(0.0) + (-x.abs()).exp().ln_1p()
}

impl fmt::Display for NlOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "nl.{}", self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_arity_is_consistent() {
        for op in NlOp::ALL {
            assert_eq!(NlOp::from_name(&op.to_string()), Some(op));
            assert_ne!(op.is_unary(), op.is_binary());
        }
        assert_eq!(NlOp::Less.apply2(1.0, 2.0), 1.0);
        assert_eq!(NlOp::GreaterEqual.apply2(1.0, 2.0), 0.0);
        assert_eq!(NlOp::Maximum.identity(), f32::NEG_INFINITY);
    }
}
