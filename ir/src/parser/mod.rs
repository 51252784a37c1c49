//! The parser: MLIR's generic operation syntax, as the printer writes it, plus the usual
//! variants a person writes by hand (an implicit module, `func.return`, `%a, %b = ...` result
//! lists, `1 : i64` typed integers, `array<i64: 1, 2>`).
//!
//! Guarantees: parsing never panics and never recurses without bound (nesting deeper than
//! [`MAX_NESTING`] is an error); every error is a [`Diagnostic`] with the byte span of the
//! offending text. Operand types written in an op's signature must equal the types of the
//! values used, and op names must be in the op table. Everything else (attribute schemas,
//! element type rules, dominance across regions) is the verifier's job, so that hand-written
//! and pass-produced IR are judged by the same code.

mod cursor;

use crate::diag::{Diagnostic, Span};
use crate::function::Function;
use crate::ops::Opcode;
use crate::types::{Dim, ElemType, TensorType, Type};
use crate::weights::WeightBytes;
use crate::{AttrDict, Attribute, BlockId, Module, OpId, RegionId, ValueId};
use cursor::Cursor;
use std::collections::HashMap;

/// How deeply regions, arrays and parentheses may nest.
pub const MAX_NESTING: usize = 128;

type PResult<T> = Result<T, Diagnostic>;

/// Parses a module from text.
pub fn parse_module(source: &str) -> Result<Module, Diagnostic> {
    let mut parser = Parser {
        cur: Cursor::new(source),
        module: Module::new(),
        depth: 0,
    };
    parser.file()?;
    Ok(parser.module)
}

struct Parser<'s> {
    cur: Cursor<'s>,
    module: Module,
    depth: usize,
}

/// Per-function state: the function under construction and the visible value names.
struct FuncState {
    func: Function,
    scopes: Vec<HashMap<String, Vec<ValueId>>>,
}

impl FuncState {
    fn define(&mut self, name: String, values: Vec<ValueId>, span: Span) -> PResult<()> {
        if self.scopes.iter().any(|s| s.contains_key(&name)) {
            return Err(
                Diagnostic::error(format!("redefinition of value `%{name}`"))
                    .with_span(span, "already defined above"),
            );
        }
        // There is always at least the function scope.
        if let Some(scope) = self.scopes.last_mut() {
            scope.insert(name, values);
        }
        Ok(())
    }

    fn lookup(&self, name: &str) -> Option<&Vec<ValueId>> {
        self.scopes.iter().rev().find_map(|s| s.get(name))
    }
}

impl<'s> Parser<'s> {
    fn enter(&mut self, span: Span) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return Err(
                Diagnostic::error(format!("nesting is deeper than {MAX_NESTING} levels"))
                    .with_span(span, "too deep"),
            );
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    fn file(&mut self) -> PResult<()> {
        self.cur.skip_trivia();
        if self.cur.peek_keyword("module") {
            self.cur.expect_keyword("module")?;
            if self.cur.eat("@") {
                self.cur.symbol_name()?;
            }
            if self.cur.peek_keyword("attributes") {
                self.cur.expect_keyword("attributes")?;
                self.attr_dict()?;
            }
            self.cur.expect("{", "`{` to open the module body")?;
            while !self.cur.eat("}") {
                if self.cur.at_end() {
                    return Err(self.cur.error_here("expected `}` to close the module"));
                }
                self.function()?;
            }
        } else {
            while !self.cur.at_end() {
                self.function()?;
            }
        }
        if !self.cur.at_end() {
            return Err(self
                .cur
                .error_here("expected end of input after the module"));
        }
        if self.module.n_functions() == 0 {
            return Err(Diagnostic::error("the input holds no function")
                .with_span(
                    self.cur.span_here(),
                    "expected `func.func` before this point",
                )
                .with_note("a module is `module { func.func @name(...) { ... } }`"));
        }
        Ok(())
    }

    fn function(&mut self) -> PResult<()> {
        if !self.cur.peek_keyword("func.func") {
            return Err(self.cur.error_here("expected `func.func`"));
        }
        self.cur.expect_keyword("func.func")?;
        for visibility in ["private", "public", "nested"] {
            if self.cur.peek_keyword(visibility) {
                self.cur.expect_keyword(visibility)?;
            }
        }
        let name_start = self.cur.pos();
        self.cur.expect("@", "`@` and the function name")?;
        let name = self.cur.symbol_name()?;
        let name_span = self.cur.span_from(name_start);
        if self.module.find_function(&name).is_some() {
            return Err(
                Diagnostic::error(format!("redefinition of function `@{name}`"))
                    .with_span(name_span, "a function of this name is defined above"),
            );
        }

        // Arguments.
        self.cur.expect("(", "`(` to open the argument list")?;
        let mut args: Vec<(String, Span, Type, AttrDict)> = Vec::new();
        if !self.cur.eat(")") {
            loop {
                let start = self.cur.pos();
                let (arg_name, index) = self.cur.value_name()?;
                let span = self.cur.span_from(start);
                if index.is_some() {
                    return Err(
                        Diagnostic::error("an argument name cannot have a `#` index")
                            .with_span(span, "plain `%name` expected"),
                    );
                }
                self.cur.expect(":", "`:` and the argument type")?;
                let ty = self.ty()?;
                let attrs = if self.cur.peek("{") {
                    self.attr_dict()?
                } else {
                    AttrDict::new()
                };
                args.push((arg_name, span, ty, attrs));
                if self.cur.eat(")") {
                    break;
                }
                self.cur.expect(",", "`,` or `)` in the argument list")?;
            }
        }

        // Results.
        let mut results: Vec<(Type, AttrDict)> = Vec::new();
        if self.cur.eat("->") {
            if self.cur.eat("(") {
                if !self.cur.eat(")") {
                    loop {
                        let ty = self.ty()?;
                        let attrs = if self.cur.peek("{") {
                            self.attr_dict()?
                        } else {
                            AttrDict::new()
                        };
                        results.push((ty, attrs));
                        if self.cur.eat(")") {
                            break;
                        }
                        self.cur.expect(",", "`,` or `)` in the result list")?;
                    }
                }
            } else {
                results.push((self.ty()?, AttrDict::new()));
            }
        }
        if self.cur.peek_keyword("attributes") {
            let start = self.cur.pos();
            self.cur.expect_keyword("attributes")?;
            let dict = self.attr_dict()?;
            if !dict.is_empty() {
                return Err(
                    Diagnostic::error("function attributes are not supported").with_span(
                        self.cur.span_from(start),
                        "memc keeps no function attributes",
                    ),
                );
            }
        }

        let arg_types = args.iter().map(|a| a.2.clone()).collect();
        let result_types = results.iter().map(|r| r.0.clone()).collect();
        let mut func = Function::new(&name, arg_types, result_types);
        func.set_span(name_span);
        for (i, (_, attrs)) in results.into_iter().enumerate() {
            *func.result_attrs_mut(i) = attrs;
        }
        let mut state = FuncState {
            func,
            scopes: vec![HashMap::new()],
        };
        let arg_values = state.func.args().to_vec();
        for (i, (arg_name, span, _, attrs)) in args.into_iter().enumerate() {
            *state.func.arg_attrs_mut(i) = attrs;
            state.define(arg_name, vec![arg_values[i]], span)?;
        }

        let open = self.cur.pos();
        self.cur.expect("{", "`{` to open the function body")?;
        let body = state.func.body();
        let entry = state.func.entry_block();
        self.region_body(&mut state, body, Some(entry), open)?;
        self.module.add_function(state.func);
        Ok(())
    }

    /// Parses blocks up to and including the closing `}`. `entry` is a block already created
    /// for the region (the function's entry block), used for an unlabeled first block.
    fn region_body(
        &mut self,
        state: &mut FuncState,
        region: RegionId,
        entry: Option<BlockId>,
        open: usize,
    ) -> PResult<()> {
        self.enter(self.cur.span_from(open))?;
        state.scopes.push(HashMap::new());
        let mut block: Option<BlockId> = entry;
        let mut first = true;
        loop {
            if self.cur.eat("}") {
                break;
            }
            if self.cur.at_end() {
                return Err(
                    Diagnostic::error("expected `}` to close this region").with_span(
                        self.cur.span_from(open),
                        "region opened here is never closed",
                    ),
                );
            }
            if self.cur.peek("^") {
                let label_start = self.cur.pos();
                self.cur.expect("^", "`^`")?;
                self.cur.bare_name()?;
                let label_span = self.cur.span_from(label_start);
                let mut arg_defs = Vec::new();
                if self.cur.eat("(") {
                    loop {
                        let start = self.cur.pos();
                        let (arg_name, _) = self.cur.value_name()?;
                        let span = self.cur.span_from(start);
                        self.cur.expect(":", "`:` and the block argument type")?;
                        arg_defs.push((arg_name, span, self.ty()?));
                        if self.cur.eat(")") {
                            break;
                        }
                        self.cur
                            .expect(",", "`,` or `)` in the block argument list")?;
                    }
                }
                self.cur.expect(":", "`:` after the block label")?;
                let types: Vec<Type> = arg_defs.iter().map(|a| a.2.clone()).collect();
                let new_block = match (first, entry) {
                    // A labeled entry block of the function body: its arguments must be the
                    // function's, which are already defined.
                    (true, Some(existing)) => {
                        if !arg_defs.is_empty() {
                            return Err(Diagnostic::error(
                                "the function's entry block takes the function's arguments",
                            )
                            .with_span(
                                label_span,
                                "write the arguments in the signature instead",
                            ));
                        }
                        existing
                    }
                    _ => state.func.append_block(region, types),
                };
                let arg_values = state.func.block(new_block).args.clone();
                for ((arg_name, span, _), value) in arg_defs.into_iter().zip(arg_values) {
                    state.define(arg_name, vec![value], span)?;
                }
                block = Some(new_block);
            } else if block.is_none() {
                block = Some(state.func.append_block(region, Vec::new()));
            }
            first = false;
            // Ops until the next label or the closing brace.
            while !self.cur.peek("^") && !self.cur.peek("}") && !self.cur.at_end() {
                let Some(b) = block else { break };
                self.op(state, b)?;
            }
        }
        state.scopes.pop();
        self.leave();
        Ok(())
    }

    fn op(&mut self, state: &mut FuncState, block: BlockId) -> PResult<()> {
        let start = self.cur.pos();
        // Result names: `%a`, `%a:2`, `%a, %b`.
        let mut result_names: Vec<(String, usize, Span)> = Vec::new();
        if self.cur.peek("%") {
            loop {
                let name_start = self.cur.pos();
                let (name, index) = self.cur.value_name()?;
                let mut count = 1;
                if self.cur.eat(":") {
                    count = self.cur.usize_literal("the number of results")?;
                    if count == 0 {
                        return Err(Diagnostic::error(
                            "a result group must hold at least one value",
                        )
                        .with_span(self.cur.span_from(name_start), "`:0` is not allowed"));
                    }
                }
                let span = self.cur.span_from(name_start);
                if index.is_some() {
                    return Err(Diagnostic::error("a result name cannot have a `#` index")
                        .with_span(span, "plain `%name` expected"));
                }
                result_names.push((name, count, span));
                if !self.cur.eat(",") {
                    break;
                }
            }
            self.cur.expect("=", "`=` after the result names")?;
        }
        let n_bound: usize = result_names.iter().map(|r| r.1).sum();

        let op = if self.cur.peek_keyword("return") || self.cur.peek_keyword("func.return") {
            self.return_op(state, start)?
        } else if self.cur.peek("\"") {
            self.generic_op(state, start, n_bound)?
        } else {
            return Err(self
                .cur
                .error_here("expected an operation: `\"dialect.op\"(...)` or `return`"));
        };
        let op_span = self.cur.span_from(start);
        state.func.set_op_span(op, op_span);

        if self.cur.peek_keyword("loc") {
            state.func.op_mut(op).loc = self.location()?;
        }

        let results = state.func.op(op).results.clone();
        if results.len() != n_bound {
            return Err(Diagnostic::error(format!(
                "the operation defines {} result(s) but {} name(s) are bound",
                results.len(),
                n_bound
            ))
            .with_span(op_span, "result count differs from the names on the left"));
        }
        let mut next = 0;
        for (name, count, span) in result_names {
            state.define(name, results[next..next + count].to_vec(), span)?;
            next += count;
        }
        state.func.append_op(block, op);
        Ok(())
    }

    fn return_op(&mut self, state: &mut FuncState, start: usize) -> PResult<OpId> {
        if !self.cur.eat_keyword("return") {
            self.cur.expect_keyword("func.return")?;
        }
        let mut operands = Vec::new();
        if self.cur.peek("%") {
            loop {
                operands.push(self.value_use(state)?);
                if !self.cur.eat(",") {
                    break;
                }
            }
            self.cur
                .expect(":", "`:` and the types of the returned values")?;
            let types_start = self.cur.pos();
            let mut types = Vec::new();
            loop {
                types.push(self.ty()?);
                if !self.cur.eat(",") {
                    break;
                }
            }
            self.check_operand_types(state, &operands, &types, self.cur.span_from(types_start))?;
        }
        let _ = start;
        Ok(state
            .func
            .create_op(Opcode::Return, operands, Vec::new(), AttrDict::new()))
    }

    fn generic_op(&mut self, state: &mut FuncState, start: usize, n_bound: usize) -> PResult<OpId> {
        let name_start = self.cur.pos();
        let name = self.cur.string_literal()?;
        let name_span = self.cur.span_from(name_start);
        let Some(opcode) = Opcode::from_name(&name) else {
            let mut diag = Diagnostic::error(format!("unknown operation `{name}`"))
                .with_span(name_span, "not in memc's op table");
            if let Some(similar) = Opcode::ALL
                .iter()
                .find(|o| o.name().eq_ignore_ascii_case(&name))
            {
                diag = diag.with_note(format!("did you mean `{}`?", similar.name()));
            }
            return Err(diag);
        };
        self.cur.expect("(", "`(` to open the operand list")?;
        let mut operands = Vec::new();
        if !self.cur.eat(")") {
            loop {
                operands.push(self.value_use(state)?);
                if self.cur.eat(")") {
                    break;
                }
                self.cur.expect(",", "`,` or `)` in the operand list")?;
            }
        }
        if self.cur.peek("[") {
            return Err(Diagnostic::error("block successors are not supported")
                .with_span(self.cur.span_here(), "memc has no branch operations"));
        }
        let op = state
            .func
            .create_op(opcode, operands.clone(), Vec::new(), AttrDict::new());
        if self.cur.peek("(") {
            let open = self.cur.pos();
            self.cur.expect("(", "`(`")?;
            self.enter(self.cur.span_from(open))?;
            loop {
                let region_open = self.cur.pos();
                self.cur.expect("{", "`{` to open a region")?;
                let region = state.func.add_region(op);
                self.region_body(state, region, None, region_open)?;
                if self.cur.eat(")") {
                    break;
                }
                self.cur.expect(",", "`,` or `)` in the region list")?;
            }
            self.leave();
        }
        if self.cur.peek("{") {
            state.func.op_mut(op).attrs = self.attr_dict()?;
        }
        self.cur.expect(":", "`:` and the operation's type")?;
        let sig_start = self.cur.pos();
        self.cur.expect("(", "`(` to open the operand types")?;
        let mut operand_types = Vec::new();
        if !self.cur.eat(")") {
            loop {
                operand_types.push(self.ty()?);
                if self.cur.eat(")") {
                    break;
                }
                self.cur.expect(",", "`,` or `)` in the operand types")?;
            }
        }
        let operand_types_span = self.cur.span_from(sig_start);
        self.cur.expect("->", "`->` and the result types")?;
        let mut result_types = Vec::new();
        if self.cur.eat("(") {
            if !self.cur.eat(")") {
                loop {
                    result_types.push(self.ty()?);
                    if self.cur.eat(")") {
                        break;
                    }
                    self.cur.expect(",", "`,` or `)` in the result types")?;
                }
            }
        } else {
            result_types.push(self.ty()?);
        }
        self.check_operand_types(state, &operands, &operand_types, operand_types_span)?;
        if result_types.len() != n_bound {
            return Err(Diagnostic::error(format!(
                "the operation's type has {} result(s) but {} name(s) are bound",
                result_types.len(),
                n_bound
            ))
            .with_span(
                self.cur.span_from(start),
                "result count differs from the names on the left",
            ));
        }
        for ty in result_types {
            state.func.add_result(op, ty);
        }
        Ok(op)
    }

    fn check_operand_types(
        &self,
        state: &FuncState,
        operands: &[ValueId],
        types: &[Type],
        span: Span,
    ) -> PResult<()> {
        if operands.len() != types.len() {
            return Err(Diagnostic::error(format!(
                "{} operand(s) but {} operand type(s)",
                operands.len(),
                types.len()
            ))
            .with_span(span, "one type per operand expected"));
        }
        for (i, (&value, ty)) in operands.iter().zip(types).enumerate() {
            let actual = state.func.value_type(value);
            if actual != ty {
                return Err(Diagnostic::error(format!(
                    "operand #{i} has type {actual} but the signature says {ty}"
                ))
                .with_span(span, "type does not match the value's definition"));
            }
        }
        Ok(())
    }

    fn value_use(&mut self, state: &FuncState) -> PResult<ValueId> {
        let start = self.cur.pos();
        let (name, index) = self.cur.value_name()?;
        let span = self.cur.span_from(start);
        let Some(values) = state.lookup(&name) else {
            return Err(
                Diagnostic::error(format!("use of undefined value `%{name}`"))
                    .with_span(span, "not defined before this use"),
            );
        };
        let i = index.unwrap_or(0);
        values.get(i).copied().ok_or_else(|| {
            Diagnostic::error(format!(
                "`%{name}` has {} result(s); #{i} is out of range",
                values.len()
            ))
            .with_span(span, "no such result")
        })
    }

    fn location(&mut self) -> PResult<Option<String>> {
        self.cur.expect_keyword("loc")?;
        self.cur.expect("(", "`(` after `loc`")?;
        let loc = if self.cur.peek("\"") {
            Some(self.cur.string_literal()?)
        } else if self.cur.eat_keyword("unknown") {
            None
        } else {
            return Err(self
                .cur
                .error_here("expected a location name string or `unknown`"));
        };
        self.cur.expect(")", "`)` to close the location")?;
        Ok(loc)
    }

    fn attr_dict(&mut self) -> PResult<AttrDict> {
        let open = self.cur.pos();
        self.cur.expect("{", "`{` to open the attributes")?;
        let mut dict = AttrDict::new();
        if self.cur.eat("}") {
            return Ok(dict);
        }
        loop {
            let name_start = self.cur.pos();
            let name = if self.cur.peek("\"") {
                self.cur.string_literal()?
            } else {
                self.cur.bare_name()?
            };
            let name_span = self.cur.span_from(name_start);
            if !self.cur.eat("=") {
                return Err(
                    Diagnostic::error(format!("attribute `{name}` has no value")).with_span(
                        name_span,
                        "expected `= value` (unit attributes are not supported)",
                    ),
                );
            }
            let value = self.attribute()?;
            if dict.insert(name.clone(), value).is_some() {
                return Err(
                    Diagnostic::error(format!("attribute `{name}` is given twice"))
                        .with_span(name_span, "duplicate attribute"),
                );
            }
            if self.cur.eat("}") {
                break;
            }
            if self.cur.at_end() {
                return Err(
                    Diagnostic::error("expected `}` to close the attributes").with_span(
                        self.cur.span_from(open),
                        "attributes opened here are never closed",
                    ),
                );
            }
            self.cur.expect(",", "`,` or `}` in the attributes")?;
        }
        Ok(dict)
    }

    fn attribute(&mut self) -> PResult<Attribute> {
        let start = self.cur.pos();
        if self.cur.peek("\"") {
            return Ok(Attribute::String(self.cur.string_literal()?));
        }
        if self.cur.peek("[") {
            let here = self.cur.span_here();
            self.enter(here)?;
            self.cur.expect("[", "`[`")?;
            let mut items = Vec::new();
            if !self.cur.eat("]") {
                loop {
                    items.push(self.attribute()?);
                    if self.cur.eat("]") {
                        break;
                    }
                    self.cur.expect(",", "`,` or `]` in the array")?;
                }
            }
            self.leave();
            return Ok(Attribute::Array(items));
        }
        if self.cur.peek_number() {
            return self.number_attribute();
        }
        if self.cur.eat_keyword("true") {
            return Ok(Attribute::Bool(true));
        }
        if self.cur.eat_keyword("false") {
            return Ok(Attribute::Bool(false));
        }
        if self.cur.eat_keyword("dense_resource") {
            self.cur.expect("<", "`<` after `dense_resource`")?;
            let key = if self.cur.peek("\"") {
                self.cur.string_literal()?
            } else {
                self.cur.bare_name()?
            };
            self.cur.expect(">", "`>` to close `dense_resource`")?;
            self.cur.expect(":", "`:` and the weight's tensor type")?;
            let ty_start = self.cur.pos();
            let Type::Tensor(ty) = self.ty()? else {
                return Err(Diagnostic::error("a weight must have a tensor type")
                    .with_span(self.cur.span_from(ty_start), "`none` is not a tensor"));
            };
            let span = self.cur.span_from(start);
            return self.weight(&key, ty, span).map(Attribute::Weight);
        }
        if self.cur.eat_keyword("array") {
            self.cur.expect("<", "`<` after `array`")?;
            let elem_start = self.cur.pos();
            let elem = self.cur.bare_name()?;
            if !matches!(elem.as_str(), "i64" | "i32" | "i16" | "i8") {
                return Err(Diagnostic::error(format!(
                    "dense arrays of `{elem}` are not supported"
                ))
                .with_span(
                    self.cur.span_from(elem_start),
                    "expected i64, i32, i16 or i8",
                ));
            }
            let mut items = Vec::new();
            if self.cur.eat(":") {
                loop {
                    items.push(Attribute::Int(self.cur.int_literal()?));
                    if !self.cur.eat(",") {
                        break;
                    }
                }
            }
            self.cur.expect(">", "`>` to close the array")?;
            return Ok(Attribute::Array(items));
        }
        if self.cur.peek_keyword("tensor") {
            return Ok(Attribute::Type(self.ty()?));
        }
        if self.cur.peek_ident() {
            let word_start = self.cur.pos();
            let word = self.cur.bare_name()?;
            if let Some(elem) = ElemType::from_mlir_name(&word) {
                return Ok(Attribute::ElemType(elem));
            }
            return Err(
                Diagnostic::error(format!("unknown attribute value `{word}`")).with_span(
                    self.cur.span_from(word_start),
                    "not a number, string, array, type or weight",
                ),
            );
        }
        Err(self.cur.error_here("expected an attribute value"))
    }

    fn number_attribute(&mut self) -> PResult<Attribute> {
        let start = self.cur.pos();
        let number = self.cur.number_literal()?;
        let span = self.cur.span_from(start);
        let suffix = if self.cur.eat(":") {
            let ty_start = self.cur.pos();
            let name = self.cur.bare_name()?;
            Some((name, self.cur.span_from(ty_start)))
        } else {
            None
        };
        use cursor::Number;
        match (number, suffix) {
            (Number::Int(v), None) => Ok(Attribute::Int(v)),
            (Number::Int(v), Some((t, _)))
                if matches!(
                    t.as_str(),
                    "i64" | "i32" | "i16" | "i8" | "si64" | "si32" | "index"
                ) =>
            {
                Ok(Attribute::Int(v))
            }
            (Number::Int(v), Some((t, _))) if matches!(t.as_str(), "f64" | "f32" | "f16") => {
                Ok(Attribute::Float(v as f64))
            }
            (Number::Float(v), None) => Ok(Attribute::Float(v)),
            (Number::Float(v), Some((t, _)))
                if matches!(t.as_str(), "f64" | "f32" | "f16" | "bf16") =>
            {
                Ok(Attribute::Float(v))
            }
            (Number::Hex(bits), Some((t, _))) if t == "f64" => {
                Ok(Attribute::Float(f64::from_bits(bits)))
            }
            (Number::Hex(bits), Some((t, t_span))) if t == "f32" => match u32::try_from(bits) {
                Ok(b) => Ok(Attribute::Float(f64::from(f32::from_bits(b)))),
                Err(_) => Err(Diagnostic::error("hex literal is wider than f32")
                    .with_span(t_span.to(span), "expected at most 8 hex digits")),
            },
            (Number::Hex(bits), _) => i64::try_from(bits).map(Attribute::Int).map_err(|_| {
                Diagnostic::error("hex integer is out of range for i64")
                    .with_span(span, "too large")
            }),
            (_, Some((t, t_span))) => {
                Err(Diagnostic::error(format!("unsupported numeric type `{t}`"))
                    .with_span(t_span, "expected i64, i32, f64 or f32"))
            }
        }
    }

    fn weight(&mut self, key: &str, ty: TensorType, span: Span) -> PResult<crate::WeightId> {
        if let Some(id) = self.module.weights.lookup(key) {
            let existing = self.module.weights.get(id).map(|w| w.ty().clone());
            if existing.as_ref() != Some(&ty) {
                let before = existing.map_or_else(String::new, |t| t.to_string());
                return Err(Diagnostic::error(format!(
                    "weight `{key}` is used as {ty} here but as {before} before"
                ))
                .with_span(span, "conflicting weight type"));
            }
            return Ok(id);
        }
        self.module
            .weights
            .insert(key, ty, WeightBytes::Absent)
            .map_err(|e| Diagnostic::error(e.to_string()).with_span(span, "invalid weight"))
    }

    fn ty(&mut self) -> PResult<Type> {
        let start = self.cur.pos();
        if self.cur.eat_keyword("none") {
            return Ok(Type::None);
        }
        if !self.cur.peek_keyword("tensor") {
            if self.cur.peek_ident() {
                let word = self.cur.bare_name()?;
                let span = self.cur.span_from(start);
                let note = if ElemType::from_mlir_name(&word).is_some() {
                    format!("write a scalar as `tensor<{word}>`")
                } else {
                    "memc values are ranked tensors, such as `tensor<2x3xf32>`".to_string()
                };
                return Err(Diagnostic::error(format!("unsupported type `{word}`"))
                    .with_span(span, "expected a tensor type")
                    .with_note(note));
            }
            return Err(self
                .cur
                .error_here("expected a type such as `tensor<2x3xf32>`"));
        }
        self.cur.expect_keyword("tensor")?;
        self.cur.expect("<", "`<` right after `tensor`")?;
        let mut dims = Vec::new();
        if self.cur.peek("*") {
            return Err(Diagnostic::error("unranked tensors are not supported")
                .with_span(self.cur.span_here(), "memc needs the rank of every tensor"));
        }
        loop {
            if self.cur.eat_raw("?") {
                dims.push(Dim::Unknown);
            } else if self.cur.peek_digit() {
                let dim_start = self.cur.pos();
                let n = self.cur.raw_u64().map_err(|_| {
                    Diagnostic::error("dimension is too large")
                        .with_span(self.cur.span_from(dim_start), "does not fit in 64 bits")
                })?;
                dims.push(Dim::Static(n));
            } else {
                break;
            }
            if !self.cur.eat_raw("x") {
                return Err(self.cur.error_here("expected `x` after a dimension"));
            }
        }
        let elem_start = self.cur.pos();
        let elem_name = self.cur.raw_ident();
        let elem_span = self.cur.span_from(elem_start);
        let Some(elem) = ElemType::from_mlir_name(&elem_name) else {
            let label = if elem_name.is_empty() {
                "expected an element type".to_string()
            } else {
                format!("`{elem_name}`")
            };
            let supported: Vec<&str> = ElemType::ALL.iter().map(|e| e.mlir_name()).collect();
            return Err(Diagnostic::error("unknown or unsupported element type")
                .with_span(elem_span, label)
                .with_note(format!("supported: {}", supported.join(" "))));
        };
        if self.cur.eat(",") {
            let enc_start = self.cur.pos();
            if !self.cur.eat("#memc.dims") {
                return Err(Diagnostic::error("unsupported tensor encoding")
                    .with_span(self.cur.span_here(), "expected `#memc.dims<[...]>`"));
            }
            self.cur.expect("<", "`<` after `#memc.dims`")?;
            self.cur.expect("[", "`[` and the names of the `?` dims")?;
            let mut names = Vec::new();
            if !self.cur.eat("]") {
                loop {
                    names.push(self.cur.string_literal()?);
                    if self.cur.eat("]") {
                        break;
                    }
                    self.cur.expect(",", "`,` or `]` in the dim names")?;
                }
            }
            self.cur.expect(">", "`>` to close `#memc.dims`")?;
            let enc_span = self.cur.span_from(enc_start);
            let n_dynamic = dims.iter().filter(|d| **d == Dim::Unknown).count();
            if names.len() != n_dynamic {
                return Err(Diagnostic::error(format!(
                    "{} dim name(s) for {} `?` dim(s)",
                    names.len(),
                    n_dynamic
                ))
                .with_span(
                    enc_span,
                    "one name per `?` dim expected (\"\" for an unnamed one)",
                ));
            }
            let mut names = names.into_iter();
            for dim in dims.iter_mut().filter(|d| **d == Dim::Unknown) {
                let name = names.next().unwrap_or_default();
                *dim = Dim::parse(&name).map_err(|message| {
                    Diagnostic::error(format!("malformed symbolic dim: {message}"))
                        .with_span(enc_span, "in these dim names")
                })?;
                if dim.as_static().is_some() {
                    return Err(
                        Diagnostic::error(format!("dim name `{name}` is a constant"))
                            .with_span(enc_span, "write a static dim in the shape instead of `?`"),
                    );
                }
            }
        }
        self.cur.expect(">", "`>` to close the tensor type")?;
        Ok(Type::Tensor(TensorType::new(elem, dims)))
    }
}
