//! A byte cursor over the source text with the token-level reads the parser needs.
//!
//! Every read either consumes what it recognizes or leaves the position unchanged and returns
//! an error whose span points at what was found. Trivia (whitespace and `//` comments) is skipped
//! before a token by the reads that say so; the `raw_*` reads inside a tensor type skip nothing.
//! The position only moves over whole UTF-8 characters, so spans are always char boundaries.

use crate::diag::{Diagnostic, Span};

pub enum Number {
    Int(i64),
    Float(f64),
    Hex(u64),
}

pub struct Cursor<'s> {
    src: &'s str,
    pos: usize,
}

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_ident_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'.')
}

fn is_value_name_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'.' | b'-')
}

type PResult<T> = Result<T, Diagnostic>;

impl<'s> Cursor<'s> {
    pub fn new(src: &'s str) -> Cursor<'s> {
        Cursor { src, pos: 0 }
    }

    pub fn pos(&self) -> usize {
        self.pos
    }

    fn rest(&self) -> &'s [u8] {
        &self.src.as_bytes()[self.pos.min(self.src.len())..]
    }

    fn byte(&self, offset: usize) -> Option<u8> {
        self.src.as_bytes().get(self.pos + offset).copied()
    }

    pub fn skip_trivia(&mut self) {
        loop {
            match self.byte(0) {
                Some(b' ' | b'\t' | b'\n' | b'\r') => self.pos += 1,
                Some(b'/') if self.byte(1) == Some(b'/') => {
                    while let Some(b) = self.byte(0) {
                        if b == b'\n' {
                            break;
                        }
                        self.pos += 1;
                    }
                    // The comment may end inside a multi-byte char only if the input ended;
                    // `pos` stops at `\n` or the end, both boundaries.
                }
                _ => break,
            }
        }
    }

    pub fn at_end(&mut self) -> bool {
        self.skip_trivia();
        self.pos >= self.src.len()
    }

    /// The span covering what was read since `start` (trailing trivia excluded).
    pub fn span_from(&self, start: usize) -> Span {
        Span::new(start, self.pos.max(start))
    }

    /// The span of the next token, for pointing at what was found.
    pub fn span_here(&mut self) -> Span {
        self.skip_trivia();
        let rest = self.rest();
        let len = match rest.first() {
            None => 0,
            Some(&b) if is_ident_char(b) => rest.iter().take_while(|&&c| is_ident_char(c)).count(),
            Some(_) => self.src[self.pos..]
                .chars()
                .next()
                .map_or(1, char::len_utf8),
        };
        Span::new(self.pos, self.pos + len)
    }

    fn describe_here(&mut self) -> String {
        let span = self.span_here();
        if span.start == span.end {
            return "end of input".to_string();
        }
        let text = self.src.get(span.range()).unwrap_or("?");
        let shown: String = text.chars().take(24).collect();
        format!("`{}`", shown.escape_debug())
    }

    /// An error at the next token: `expected <what>, found <token>`.
    pub fn error_here(&mut self, message: &str) -> Diagnostic {
        let found = self.describe_here();
        let span = self.span_here();
        Diagnostic::error(message.to_string()).with_span(span, format!("found {found}"))
    }

    pub fn peek(&mut self, text: &str) -> bool {
        self.skip_trivia();
        self.rest().starts_with(text.as_bytes())
    }

    pub fn eat(&mut self, text: &str) -> bool {
        if self.peek(text) {
            self.pos += text.len();
            true
        } else {
            false
        }
    }

    /// Consumes `text` with no trivia skipped before it.
    pub fn eat_raw(&mut self, text: &str) -> bool {
        if self.rest().starts_with(text.as_bytes()) {
            self.pos += text.len();
            true
        } else {
            false
        }
    }

    pub fn expect(&mut self, text: &str, what: &str) -> PResult<()> {
        if self.eat(text) {
            Ok(())
        } else {
            Err(self.error_here(&format!("expected {what}")))
        }
    }

    pub fn peek_keyword(&mut self, keyword: &str) -> bool {
        self.peek(keyword) && !self.byte(keyword.len()).is_some_and(is_ident_char)
    }

    pub fn eat_keyword(&mut self, keyword: &str) -> bool {
        if self.peek_keyword(keyword) {
            self.pos += keyword.len();
            true
        } else {
            false
        }
    }

    pub fn expect_keyword(&mut self, keyword: &str) -> PResult<()> {
        if self.eat_keyword(keyword) {
            Ok(())
        } else {
            Err(self.error_here(&format!("expected `{keyword}`")))
        }
    }

    pub fn peek_ident(&mut self) -> bool {
        self.skip_trivia();
        self.byte(0).is_some_and(is_ident_start)
    }

    pub fn peek_digit(&self) -> bool {
        self.byte(0).is_some_and(|b| b.is_ascii_digit())
    }

    pub fn peek_number(&mut self) -> bool {
        self.skip_trivia();
        match self.byte(0) {
            Some(b) if b.is_ascii_digit() => true,
            Some(b'-') => self.byte(1).is_some_and(|b| b.is_ascii_digit()),
            _ => false,
        }
    }

    /// A bare identifier: `[a-zA-Z_][a-zA-Z0-9_$.]*`.
    pub fn bare_name(&mut self) -> PResult<String> {
        if !self.peek_ident() {
            return Err(self.error_here("expected a name"));
        }
        let len = self
            .rest()
            .iter()
            .take_while(|&&b| is_ident_char(b))
            .count();
        let name = self.src[self.pos..self.pos + len].to_string();
        self.pos += len;
        Ok(name)
    }

    /// Letters, digits and `_` with no trivia skipped (an element type inside `tensor<...>`).
    pub fn raw_ident(&mut self) -> String {
        let len = self
            .rest()
            .iter()
            .take_while(|&&b| b.is_ascii_alphanumeric() || b == b'_')
            .count();
        let name = self.src[self.pos..self.pos + len].to_string();
        self.pos += len;
        name
    }

    /// Decimal digits with no trivia skipped; `Err` on overflow (position unchanged).
    pub fn raw_u64(&mut self) -> Result<u64, ()> {
        let len = self
            .rest()
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        let value = self.src[self.pos..self.pos + len]
            .parse::<u64>()
            .map_err(|_| ())?;
        self.pos += len;
        Ok(value)
    }

    /// The name after `@`: a bare identifier or a string.
    pub fn symbol_name(&mut self) -> PResult<String> {
        if self.peek("\"") {
            self.string_literal()
        } else {
            self.bare_name()
        }
    }

    /// `%name` or `%name#index`; returns the name without `%`.
    pub fn value_name(&mut self) -> PResult<(String, Option<usize>)> {
        if !self.peek("%") {
            return Err(self.error_here("expected a value name such as `%0`"));
        }
        let start = self.pos;
        self.pos += 1;
        let len = self
            .rest()
            .iter()
            .take_while(|&&b| is_value_name_char(b))
            .count();
        if len == 0 {
            self.pos = start;
            return Err(
                Diagnostic::error("expected a value name after `%`").with_span(
                    Span::new(start, start + 1),
                    "a name such as `%0` or `%x` expected",
                ),
            );
        }
        let name = self.src[self.pos..self.pos + len].to_string();
        self.pos += len;
        let mut index = None;
        if self.eat_raw("#") {
            let digits_start = self.pos;
            let n = self.raw_u64().ok().and_then(|n| usize::try_from(n).ok());
            match n {
                Some(n) if self.pos > digits_start => index = Some(n),
                _ => {
                    return Err(Diagnostic::error("expected a result number after `#`")
                        .with_span(Span::new(start, self.pos), "such as `%0#1`"));
                }
            }
        }
        Ok((name, index))
    }

    pub fn usize_literal(&mut self, what: &str) -> PResult<usize> {
        self.skip_trivia();
        let start = self.pos;
        match self.raw_u64().ok().and_then(|n| usize::try_from(n).ok()) {
            Some(n) if self.pos > start => Ok(n),
            _ => Err(self.error_here(&format!("expected {what}"))),
        }
    }

    pub fn int_literal(&mut self) -> PResult<i64> {
        let start = self.pos;
        match self.number_literal()? {
            Number::Int(v) => Ok(v),
            _ => {
                let span = Span::new(start, self.pos);
                Err(Diagnostic::error("expected an integer").with_span(span, "not an integer"))
            }
        }
    }

    /// `-?[0-9]+`, `-?[0-9]+.[0-9]*([eE][-+]?[0-9]+)?` or `0x[0-9a-fA-F]+`.
    pub fn number_literal(&mut self) -> PResult<Number> {
        if !self.peek_number() {
            return Err(self.error_here("expected a number"));
        }
        let start = self.pos;
        let negative = self.eat_raw("-");
        if self.rest().starts_with(b"0x") || self.rest().starts_with(b"0X") {
            self.pos += 2;
            let len = self
                .rest()
                .iter()
                .take_while(|b| b.is_ascii_hexdigit())
                .count();
            let digits = &self.src[self.pos..self.pos + len];
            self.pos += len;
            let span = Span::new(start, self.pos);
            if negative || len == 0 {
                return Err(Diagnostic::error("malformed hex literal").with_span(span, "here"));
            }
            return u64::from_str_radix(digits, 16)
                .map(Number::Hex)
                .map_err(|_| {
                    Diagnostic::error("hex literal is too large")
                        .with_span(span, "more than 64 bits")
                });
        }
        let digits = |c: &Self| c.rest().iter().take_while(|b| b.is_ascii_digit()).count();
        self.pos += digits(self);
        let mut is_float = false;
        if self.byte(0) == Some(b'.') {
            is_float = true;
            self.pos += 1;
            self.pos += digits(self);
            if matches!(self.byte(0), Some(b'e' | b'E')) {
                let save = self.pos;
                self.pos += 1;
                if matches!(self.byte(0), Some(b'+' | b'-')) {
                    self.pos += 1;
                }
                let n = digits(self);
                if n == 0 {
                    self.pos = save;
                } else {
                    self.pos += n;
                }
            }
        }
        let text = &self.src[start..self.pos];
        let span = Span::new(start, self.pos);
        if is_float {
            text.parse::<f64>()
                .map(Number::Float)
                .map_err(|_| Diagnostic::error("malformed float literal").with_span(span, "here"))
        } else {
            text.parse::<i64>().map(Number::Int).map_err(|_| {
                Diagnostic::error("integer literal is out of range for i64")
                    .with_span(span, "too large")
            })
        }
    }

    /// A string literal with MLIR's escapes: `\"`, `\\`, `\n`, `\t` and `\XX` (two hex digits).
    pub fn string_literal(&mut self) -> PResult<String> {
        if !self.peek("\"") {
            return Err(self.error_here("expected a string literal"));
        }
        let start = self.pos;
        self.pos += 1;
        let mut bytes = Vec::new();
        loop {
            let Some(b) = self.byte(0) else {
                return Err(Diagnostic::error("unterminated string literal")
                    .with_span(Span::new(start, self.pos), "string starts here"));
            };
            match b {
                b'"' => {
                    self.pos += 1;
                    break;
                }
                b'\n' => {
                    return Err(Diagnostic::error("unterminated string literal").with_span(
                        Span::new(start, self.pos),
                        "string ends at the end of the line",
                    ));
                }
                b'\\' => {
                    let escape = self.byte(1);
                    let (value, len) = match escape {
                        Some(b'"') => (b'"', 2),
                        Some(b'\\') => (b'\\', 2),
                        Some(b'n') => (b'\n', 2),
                        Some(b't') => (b'\t', 2),
                        Some(h) if h.is_ascii_hexdigit() => {
                            let lo = self.byte(2).filter(u8::is_ascii_hexdigit);
                            let Some(lo) = lo else {
                                return Err(Diagnostic::error("malformed escape in string")
                                    .with_span(
                                        Span::new(self.pos, self.pos + 2),
                                        "expected two hex digits",
                                    ));
                            };
                            let hex = |c: u8| (c as char).to_digit(16).unwrap_or(0) as u8;
                            (hex(h) * 16 + hex(lo), 3)
                        }
                        _ => {
                            return Err(Diagnostic::error("unknown escape in string").with_span(
                                Span::new(self.pos, self.pos + 1),
                                "expected \\\", \\\\, \\n, \\t or \\XX",
                            ));
                        }
                    };
                    bytes.push(value);
                    self.pos += len;
                }
                _ => {
                    bytes.push(b);
                    self.pos += 1;
                }
            }
        }
        String::from_utf8(bytes).map_err(|_| {
            Diagnostic::error("string literal is not valid UTF-8")
                .with_span(Span::new(start, self.pos), "after unescaping")
        })
    }
}
