//! Exact decimal arithmetic: `+ - * / % **`, parentheses and unary signs over decimal numbers. The grammar is
//! MiniBot's (digits, `.`, operators, parentheses and spaces only; integer exponents within a bound); the
//! numbers are `rust_decimal` (28 significant digits), and every operation is checked, so overflow is an error
//! the model can read rather than a panic.

use minibot_agent::{Tool, ToolContext, ToolResult, excerpt};
use minibot_config::CalculatorSection;
use rust_decimal::prelude::*;
use serde::Deserialize;
use serde_json::{Value, json};

pub struct CalculateExpression {
    default_scale: u32,
    max_length: usize,
    max_exponent: u32,
}

impl CalculateExpression {
    pub fn new(config: &CalculatorSection) -> Self {
        Self {
            default_scale: config.default_scale,
            max_length: config.max_expression_length,
            max_exponent: config.max_exponent_abs,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Args {
    expression: String,
    #[serde(default)]
    scale: Option<i64>,
}

impl Tool for CalculateExpression {
    type Args = Args;

    fn name(&self) -> &str {
        "calculate_expression"
    }

    fn description(&self) -> String {
        format!(
            "Evaluate an arithmetic expression exactly with decimal numbers. Supports + - * / % ** (integer \
             exponents), parentheses and unary signs; at most {} characters. `scale` is the number of decimal \
             places kept in the result (default {}).",
            self.max_length, self.default_scale
        )
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "expression": { "type": "string", "description": "for example (1.5 + 2) * 3 ** 2" },
                "scale": { "type": ["integer", "null"], "minimum": 1 }
            },
            "required": ["expression"],
            "additionalProperties": false
        })
    }

    async fn call(&self, args: Args, _ctx: &ToolContext) -> ToolResult {
        // Refused before any other work, and quoted by its start only: a 10 MB expression echoed back would be
        // spilled to a 10 MB file on every call.
        let length = args.expression.chars().count();
        if length > self.max_length {
            return Ok(json!({ "ok": false, "expression": excerpt(&args.expression),
                "error": format!("expression is longer than {} characters (it has {length})", self.max_length),
                "scale": args.scale.unwrap_or(i64::from(self.default_scale)) }));
        }
        let scale = match args.scale {
            None => self.default_scale,
            Some(s) if s >= 1 => u32::try_from(s).unwrap_or(u32::MAX),
            Some(_) => {
                return Ok(json!({ "ok": false, "expression": args.expression,
                    "error": "scale must be at least 1", "scale": args.scale }));
            }
        };
        let result = evaluate(&args.expression, self.max_exponent).map(|value| {
            value.round_dp_with_strategy(scale.min(28), RoundingStrategy::MidpointNearestEven).normalize()
        });
        Ok(match result {
            Ok(value) => {
                json!({ "ok": true, "expression": args.expression, "result": value.to_string(), "scale": scale })
            }
            Err(error) => {
                json!({ "ok": false, "expression": args.expression, "error": error, "scale": scale })
            }
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Number(Decimal),
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    Power,
    Open,
    Close,
}

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            ' ' | '\t' | '\n' | '\r' => i += 1,
            '0'..='9' | '.' => {
                let start = i;
                while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                    i += 1;
                }
                let literal: String = chars[start..i].iter().collect();
                if literal.matches('.').count() > 1 || literal == "." {
                    return Err(format!("`{literal}` is not a number"));
                }
                let number = Decimal::from_str(&literal)
                    .map_err(|_| format!("`{literal}` has more digits than 28-digit decimals can hold"))?;
                tokens.push(Token::Number(number));
            }
            '*' if chars.get(i + 1) == Some(&'*') => {
                tokens.push(Token::Power);
                i += 2;
            }
            '+' | '-' | '*' | '/' | '%' | '(' | ')' => {
                tokens.push(match c {
                    '+' => Token::Plus,
                    '-' => Token::Minus,
                    '*' => Token::Star,
                    '/' => Token::Slash,
                    '%' => Token::Percent,
                    '(' => Token::Open,
                    _ => Token::Close,
                });
                i += 1;
            }
            other => {
                return Err(format!("character `{other}` is not allowed; use digits, . + - * / % ** ( )"));
            }
        }
    }
    if tokens.is_empty() {
        return Err("the expression is empty".into());
    }
    Ok(tokens)
}

/// Evaluates an expression; `max_exponent` bounds `|e|` in `x ** e`.
pub fn evaluate(text: &str, max_exponent: u32) -> Result<Decimal, String> {
    let tokens = tokenize(text)?;
    let mut parser = Parser { tokens: &tokens, pos: 0, max_exponent, depth: 0 };
    let value = parser.expression()?;
    match parser.tokens.get(parser.pos) {
        None => Ok(value),
        Some(Token::Close) => Err("unbalanced parentheses: unexpected `)`".into()),
        Some(_) => Err("unexpected token after the end of the expression".into()),
    }
}

/// Nesting beyond this is refused instead of recursing deeper.
const MAX_DEPTH: u32 = 200;

struct Parser<'a> {
    tokens: &'a [Token],
    pos: usize,
    max_exponent: u32,
    depth: u32,
}

const OVERFLOW: &str = "the result is out of range for 28-digit decimals";

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    // expression := term (('+' | '-') term)*
    fn expression(&mut self) -> Result<Decimal, String> {
        let mut value = self.term()?;
        while let Some(op) = self.peek().cloned() {
            let next = match op {
                Token::Plus | Token::Minus => {
                    self.pos += 1;
                    self.term()?
                }
                _ => break,
            };
            value =
                if op == Token::Plus { value.checked_add(next) } else { value.checked_sub(next) }.ok_or(OVERFLOW)?;
        }
        Ok(value)
    }

    // term := unary (('*' | '/' | '%') unary)*
    fn term(&mut self) -> Result<Decimal, String> {
        let mut value = self.unary()?;
        while let Some(op) = self.peek().cloned() {
            if !matches!(op, Token::Star | Token::Slash | Token::Percent) {
                break;
            }
            self.pos += 1;
            let rhs = self.unary()?;
            if matches!(op, Token::Slash | Token::Percent) && rhs.is_zero() {
                return Err("division by zero".into());
            }
            value = match op {
                Token::Star => value.checked_mul(rhs),
                Token::Slash => value.checked_div(rhs),
                _ => value.checked_rem(rhs),
            }
            .ok_or(OVERFLOW)?;
        }
        Ok(value)
    }

    // unary := ('+' | '-') unary | power
    fn unary(&mut self) -> Result<Decimal, String> {
        match self.peek() {
            Some(Token::Minus) => {
                self.pos += 1;
                self.nested(|p| p.unary()).map(|v| -v)
            }
            Some(Token::Plus) => {
                self.pos += 1;
                self.nested(|p| p.unary())
            }
            _ => self.power(),
        }
    }

    // power := atom ('**' unary)?   (right-associative, binds tighter than unary minus on its left)
    fn power(&mut self) -> Result<Decimal, String> {
        let base = self.atom()?;
        if self.peek() != Some(&Token::Power) {
            return Ok(base);
        }
        self.pos += 1;
        let exponent = self.nested(|p| p.unary())?;
        if !exponent.fract().is_zero() {
            return Err("exponents must be whole numbers".into());
        }
        let exponent = exponent.to_i64().ok_or("the exponent is too large")?;
        if exponent.unsigned_abs() > u64::from(self.max_exponent) {
            return Err(format!("the exponent must be between -{0} and {0}", self.max_exponent));
        }
        if base.is_zero() && exponent < 0 {
            return Err("division by zero".into());
        }
        base.checked_powi(exponent).ok_or_else(|| OVERFLOW.to_string())
    }

    fn atom(&mut self) -> Result<Decimal, String> {
        match self.peek().cloned() {
            Some(Token::Number(n)) => {
                self.pos += 1;
                Ok(n)
            }
            Some(Token::Open) => {
                self.pos += 1;
                let value = self.nested(|p| p.expression())?;
                if self.peek() != Some(&Token::Close) {
                    return Err("unbalanced parentheses: missing `)`".into());
                }
                self.pos += 1;
                Ok(value)
            }
            Some(_) => Err("expected a number or `(`".into()),
            None => Err("the expression ends too early".into()),
        }
    }

    fn nested(&mut self, f: impl FnOnce(&mut Self) -> Result<Decimal, String>) -> Result<Decimal, String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err("the expression is nested too deeply".into());
        }
        let result = f(self);
        self.depth -= 1;
        result
    }
}

#[cfg(test)]
mod tests {
    use super::evaluate;

    fn eval(text: &str) -> Result<String, String> {
        evaluate(text, 1000).map(|d| d.normalize().to_string())
    }

    #[test]
    fn exact_decimal_arithmetic() {
        assert_eq!(eval("12345*6789"), Ok("83810205".into()));
        assert_eq!(eval("0.1 + 0.2"), Ok("0.3".into()));
        assert_eq!(eval("2 ** 10"), Ok("1024".into()));
        assert_eq!(eval("-2 ** 2"), Ok("-4".into()), "as in Python, ** binds tighter than unary minus");
        assert_eq!(eval("2 ** -1"), Ok("0.5".into()));
        assert_eq!(eval("2 ** 3 ** 2"), Ok("512".into()), "right-associative");
        assert_eq!(eval("(1 + 2) * -(3 - 5)"), Ok("6".into()));
        assert_eq!(eval("7 % 3"), Ok("1".into()));
        assert_eq!(eval("10 / 4"), Ok("2.5".into()));
    }

    #[test]
    fn bad_input_is_a_clear_error() {
        assert_eq!(eval("1 / 0"), Err("division by zero".into()));
        assert!(eval("2 ** 1001").is_err_and(|e| e.contains("exponent")));
        assert!(eval("10 ** 100").is_err_and(|e| e.contains("out of range")));
        assert!(eval("import os").is_err_and(|e| e.contains("not allowed")));
        assert!(eval("(1 + 2").is_err_and(|e| e.contains("parentheses")));
        assert!(eval("1 + 2)").is_err_and(|e| e.contains("parentheses")));
        assert!(eval("1..2").is_err());
        assert!(eval("").is_err());
        assert!(eval("2 ** 0.5").is_err_and(|e| e.contains("whole")));
        assert!(eval(&"-".repeat(500)).is_err());
        assert!(eval(&"(".repeat(300)).is_err());
    }
}
