//! Arithmetic expansion `$(( ))` and `(( ))`: 64-bit signed integers,
//! evaluated over brush-parser's arithmetic AST.

use brush_parser::ast::{
    ArithmeticExpr as A, ArithmeticTarget, BinaryOperator as B, UnaryAssignmentOperator as UA,
    UnaryOperator as U,
};

use super::io::Io;
use super::{Flow, Shell};

impl Shell {
    /// Evaluates the arithmetic expression `text` (parameters and command
    /// substitutions in it are expanded first).
    ///
    /// # Errors
    /// [`Flow::Exit`] for a syntax error or a division by zero.
    pub fn arith(&mut self, text: &str, io: &Io) -> Result<i64, Flow> {
        let expanded = self.expand_single(text, io)?;
        if expanded.trim().is_empty() {
            return Ok(0);
        }
        let expr = brush_parser::arithmetic::parse(&expanded).map_err(|e| {
            io.warn(format!("sh: arithmetic: {e}"));
            Flow::Exit(2)
        })?;
        self.eval(&expr, io, 0)
    }

    fn target_name(t: &ArithmeticTarget) -> &str {
        match t {
            ArithmeticTarget::Variable(n) | ArithmeticTarget::ArrayElement(n, _) => n,
        }
    }

    fn read_target(&mut self, t: &ArithmeticTarget, io: &Io, depth: u32) -> Result<i64, Flow> {
        let raw = self.var(Self::target_name(t)).unwrap_or_default();
        let raw = raw.trim();
        if raw.is_empty() {
            return Ok(0);
        }
        if let Ok(v) = raw.parse::<i64>() {
            return Ok(v);
        }
        if depth > 8 {
            io.warn(format!(
                "sh: arithmetic: {raw}: expression recursion too deep"
            ));
            return Err(Flow::Exit(1));
        }
        let expr = brush_parser::arithmetic::parse(raw).map_err(|e| {
            io.warn(format!("sh: arithmetic: {raw}: {e}"));
            Flow::Exit(1)
        })?;
        self.eval(&expr, io, depth + 1)
    }

    fn eval(&mut self, e: &A, io: &Io, depth: u32) -> Result<i64, Flow> {
        Ok(match e {
            A::Literal(v) => *v,
            A::Reference(t) => self.read_target(t, io, depth)?,
            A::UnaryOp(op, x) => {
                let x = self.eval(x, io, depth)?;
                match op {
                    U::UnaryPlus => x,
                    U::UnaryMinus => x.wrapping_neg(),
                    U::BitwiseNot => !x,
                    U::LogicalNot => i64::from(x == 0),
                }
            }
            A::BinaryOp(B::LogicalAnd, a, b) => {
                i64::from(self.eval(a, io, depth)? != 0 && self.eval(b, io, depth)? != 0)
            }
            A::BinaryOp(B::LogicalOr, a, b) => {
                i64::from(self.eval(a, io, depth)? != 0 || self.eval(b, io, depth)? != 0)
            }
            A::BinaryOp(op, a, b) => {
                let (a, b) = (self.eval(a, io, depth)?, self.eval(b, io, depth)?);
                binary(*op, a, b, io)?
            }
            A::Conditional(c, a, b) => {
                if self.eval(c, io, depth)? != 0 {
                    self.eval(a, io, depth)?
                } else {
                    self.eval(b, io, depth)?
                }
            }
            A::Assignment(t, x) => {
                let v = self.eval(x, io, depth)?;
                self.set_var(Self::target_name(t), v.to_string());
                v
            }
            A::BinaryAssignment(op, t, x) => {
                let old = self.read_target(t, io, depth)?;
                let x = self.eval(x, io, depth)?;
                let v = binary(*op, old, x, io)?;
                self.set_var(Self::target_name(t), v.to_string());
                v
            }
            A::UnaryAssignment(op, t) => {
                let old = self.read_target(t, io, depth)?;
                let (new, ret) = match op {
                    UA::PrefixIncrement => (old.wrapping_add(1), old.wrapping_add(1)),
                    UA::PrefixDecrement => (old.wrapping_sub(1), old.wrapping_sub(1)),
                    UA::PostfixIncrement => (old.wrapping_add(1), old),
                    UA::PostfixDecrement => (old.wrapping_sub(1), old),
                };
                self.set_var(Self::target_name(t), new.to_string());
                ret
            }
        })
    }
}

fn binary(op: B, a: i64, b: i64, io: &Io) -> Result<i64, Flow> {
    let zero = |io: &Io| {
        io.warn("sh: arithmetic: division by zero");
        Err(Flow::Exit(1))
    };
    Ok(match op {
        B::Power => {
            if b < 0 {
                io.warn("sh: arithmetic: negative exponent");
                return Err(Flow::Exit(1));
            }
            a.wrapping_pow(u32::try_from(b).unwrap_or(u32::MAX))
        }
        B::Multiply => a.wrapping_mul(b),
        B::Divide => {
            if b == 0 {
                return zero(io);
            }
            a.wrapping_div(b)
        }
        B::Modulo => {
            if b == 0 {
                return zero(io);
            }
            a.wrapping_rem(b)
        }
        B::Comma => b,
        B::Add => a.wrapping_add(b),
        B::Subtract => a.wrapping_sub(b),
        B::ShiftLeft => a.wrapping_shl(u32::try_from(b & 63).unwrap_or(0)),
        B::ShiftRight => a.wrapping_shr(u32::try_from(b & 63).unwrap_or(0)),
        B::LessThan => i64::from(a < b),
        B::LessThanOrEqualTo => i64::from(a <= b),
        B::GreaterThan => i64::from(a > b),
        B::GreaterThanOrEqualTo => i64::from(a >= b),
        B::Equals => i64::from(a == b),
        B::NotEquals => i64::from(a != b),
        B::BitwiseAnd => a & b,
        B::BitwiseXor => a ^ b,
        B::BitwiseOr => a | b,
        B::LogicalAnd => i64::from(a != 0 && b != 0),
        B::LogicalOr => i64::from(a != 0 || b != 0),
    })
}
