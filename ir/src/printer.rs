//! The printer: MLIR's generic operation syntax.
//!
//! ```text
//! module {
//!   func.func @main(%arg0: tensor<?x4xf32, #memc.dims<["batch"]>>) -> tensor<?x4xf32, #memc.dims<["batch"]>> {
//!     %0 = "onnx.Relu"(%arg0) : (tensor<?x4xf32, #memc.dims<["batch"]>>) -> tensor<?x4xf32, #memc.dims<["batch"]>>
//!     return %0 : tensor<?x4xf32, #memc.dims<["batch"]>>
//!   }
//! }
//! ```
//!
//! Values are renumbered in program order when printed (block arguments `%argN`, op results
//! `%N`, multi-result ops `%N:k` used as `%N#i`), so the text never shows the gaps that erased
//! ops leave in the arenas. The output is deterministic, and `parse` followed by `print` gives the
//! same text back. `func.return` uses MLIR's custom form (`return %0 : type`); every other op
//! is printed generically.

use crate::function::ValueDef;
use crate::ops::Opcode;
use crate::{AttrDict, Attribute, BlockId, Function, Module, OpId, RegionId, ValueId};
use cranelift_entity::SecondaryMap;
use std::fmt::{self, Write};

/// Prints a module.
pub fn print_module(module: &Module) -> String {
    let mut out = String::from("module {\n");
    for (_, func) in module.functions() {
        print_function_into(&mut out, module, func, 1);
    }
    out.push_str("}\n");
    out
}

/// Prints one function of `module` (the module supplies weight names).
pub fn print_function(module: &Module, func: &Function) -> String {
    let mut out = String::new();
    print_function_into(&mut out, module, func, 0);
    out
}

/// Writes `s` as an MLIR string literal with escapes.
pub fn write_string_literal(f: &mut impl Write, s: &str) -> fmt::Result {
    f.write_char('"')?;
    for byte in s.bytes() {
        match byte {
            b'"' => f.write_str("\\\"")?,
            b'\\' => f.write_str("\\\\")?,
            b'\n' => f.write_str("\\n")?,
            b'\t' => f.write_str("\\t")?,
            0x20..=0x7e => f.write_char(byte as char)?,
            _ => write!(f, "\\{byte:02X}")?,
        }
    }
    f.write_char('"')
}

/// Formats a float so that MLIR reads it back as the same f64: a decimal with a `.` when the
/// shortest round-trip form allows, the hex bit pattern (`0x... : f64`) for NaN and infinities.
pub fn format_float(value: f64) -> String {
    if !value.is_finite() {
        return format!("0x{:016X} : f64", value.to_bits());
    }
    let text = format!("{value:?}");
    match text.split_once('e') {
        Some((mantissa, exponent)) if !mantissa.contains('.') => format!("{mantissa}.0e{exponent}"),
        Some(_) => text,
        None if text.contains('.') => text,
        None => format!("{text}.0"),
    }
}

struct Names {
    values: SecondaryMap<ValueId, Option<(u32, Option<u32>, bool)>>,
    next_arg: u32,
    next_result: u32,
    blocks: SecondaryMap<BlockId, u32>,
}

impl Names {
    fn value(&self, value: ValueId) -> String {
        match self.values[value] {
            Some((n, None, true)) => format!("%arg{n}"),
            Some((n, None, false)) => format!("%{n}"),
            Some((n, Some(i), _)) => format!("%{n}#{i}"),
            // A use of a value that no placed op defines: only printed for invalid IR (the
            // verifier rejects it), and spelled so that it cannot be mistaken for a real name.
            None => format!("%<invalid {value}>"),
        }
    }
}

struct Printer<'a> {
    module: &'a Module,
    func: &'a Function,
    names: Names,
}

fn print_function_into(out: &mut String, module: &Module, func: &Function, indent: usize) {
    let mut names = Names {
        values: SecondaryMap::new(),
        next_arg: 0,
        next_result: 0,
        blocks: SecondaryMap::new(),
    };
    number_region(func, func.body(), &mut names);
    let p = Printer {
        module,
        func,
        names,
    };
    // Writing into a String cannot fail.
    let _ = p.function(out, indent);
}

/// Assigns names in program order: block arguments and op results, nested regions in place.
fn number_region(func: &Function, region: RegionId, names: &mut Names) {
    for (block_index, &block) in func.layout().region_blocks(region).iter().enumerate() {
        names.blocks[block] = block_index as u32;
        for &arg in &func.block(block).args {
            names.values[arg] = Some((names.next_arg, None, true));
            names.next_arg += 1;
        }
        for &op in func.layout().block_ops(block) {
            let results = &func.op(op).results;
            let n = names.next_result;
            names.next_result += 1;
            for (i, &result) in results.iter().enumerate() {
                let index = if results.len() == 1 {
                    None
                } else {
                    Some(i as u32)
                };
                names.values[result] = Some((n, index, false));
            }
            if results.is_empty() {
                names.next_result -= 1;
            }
            for &nested in &func.op(op).regions {
                number_region(func, nested, names);
            }
        }
    }
}

impl Printer<'_> {
    fn function(&self, out: &mut String, indent: usize) -> fmt::Result {
        let func = self.func;
        let pad = "  ".repeat(indent);
        write!(out, "{pad}func.func @")?;
        write_symbol(out, func.name())?;
        out.push('(');
        for (i, &arg) in func.args().iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            write!(out, "{}: {}", self.names.value(arg), func.value_type(arg))?;
            self.attr_dict(out, func.arg_attrs(i), true)?;
        }
        out.push(')');
        let results = func.result_types();
        let any_result_attrs = (0..results.len()).any(|i| !func.result_attrs(i).is_empty());
        if results.len() == 1 && !any_result_attrs {
            write!(out, " -> {}", results[0])?;
        } else if !results.is_empty() {
            out.push_str(" -> (");
            for (i, ty) in results.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write!(out, "{ty}")?;
                self.attr_dict(out, func.result_attrs(i), true)?;
            }
            out.push(')');
        }
        out.push_str(" {\n");
        self.region_body(out, func.body(), indent + 1, true)?;
        writeln!(out, "{pad}}}")
    }

    /// The blocks of a region. The entry block's label is left out where MLIR allows it: in the
    /// function body (its arguments are the function's) and for an argument-free entry block.
    fn region_body(
        &self,
        out: &mut String,
        region: RegionId,
        indent: usize,
        is_body: bool,
    ) -> fmt::Result {
        let func = self.func;
        let blocks = func.layout().region_blocks(region);
        for (i, &block) in blocks.iter().enumerate() {
            let args = &func.block(block).args;
            let show_label = i > 0 || (!is_body && !args.is_empty());
            if show_label {
                let pad = "  ".repeat(indent.saturating_sub(1));
                write!(out, "{pad}^bb{}", self.names.blocks[block])?;
                if !args.is_empty() {
                    out.push('(');
                    for (j, &arg) in args.iter().enumerate() {
                        if j > 0 {
                            out.push_str(", ");
                        }
                        write!(out, "{}: {}", self.names.value(arg), func.value_type(arg))?;
                    }
                    out.push(')');
                }
                out.push_str(":\n");
            }
            for &op in func.layout().block_ops(block) {
                self.op(out, op, indent)?;
            }
        }
        Ok(())
    }

    fn op(&self, out: &mut String, op: OpId, indent: usize) -> fmt::Result {
        let func = self.func;
        let data = func.op(op);
        let pad = "  ".repeat(indent);
        out.push_str(&pad);
        if let Some(&first) = data.results.first() {
            match func.value(first).def {
                ValueDef::Result { .. } => {}
                ValueDef::BlockArg { .. } => unreachable!("op results are defined by their op"),
            }
            let name = self.names.value(first);
            let base = name.split('#').next().unwrap_or(&name);
            if data.results.len() == 1 {
                write!(out, "{base} = ")?;
            } else {
                write!(out, "{base}:{} = ", data.results.len())?;
            }
        }
        if data.opcode == Opcode::Return && data.regions.is_empty() && data.attrs.is_empty() {
            out.push_str("return");
            if !data.operands.is_empty() {
                out.push(' ');
                self.value_list(out, &data.operands)?;
                out.push_str(" : ");
                self.type_list(out, &data.operands)?;
            }
        } else {
            write_string_literal(out, data.opcode.name())?;
            out.push('(');
            self.value_list(out, &data.operands)?;
            out.push(')');
            if !data.regions.is_empty() {
                out.push_str(" (");
                for (i, &region) in data.regions.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    out.push_str("{\n");
                    self.region_body(out, region, indent + 1, false)?;
                    write!(out, "{pad}}}")?;
                }
                out.push(')');
            }
            self.attr_dict(out, &data.attrs, true)?;
            out.push_str(" : (");
            self.type_list(out, &data.operands)?;
            out.push_str(") -> ");
            if data.results.len() == 1 {
                write!(out, "{}", func.value_type(data.results[0]))?;
            } else {
                out.push('(');
                self.type_list(out, &data.results)?;
                out.push(')');
            }
        }
        if let Some(loc) = &data.loc {
            out.push_str(" loc(");
            write_string_literal(out, loc)?;
            out.push(')');
        }
        out.push('\n');
        Ok(())
    }

    fn value_list(&self, out: &mut String, values: &[ValueId]) -> fmt::Result {
        for (i, &v) in values.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            out.push_str(&self.names.value(v));
        }
        Ok(())
    }

    fn type_list(&self, out: &mut String, values: &[ValueId]) -> fmt::Result {
        for (i, &v) in values.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            write!(out, "{}", self.func.value_type(v))?;
        }
        Ok(())
    }

    fn attr_dict(&self, out: &mut String, attrs: &AttrDict, leading_space: bool) -> fmt::Result {
        if attrs.is_empty() {
            return Ok(());
        }
        if leading_space {
            out.push(' ');
        }
        out.push('{');
        for (i, (name, value)) in attrs.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            write_attr_name(out, name)?;
            out.push_str(" = ");
            self.attr(out, value)?;
        }
        out.push('}');
        Ok(())
    }

    fn attr(&self, out: &mut String, attr: &Attribute) -> fmt::Result {
        match attr {
            Attribute::Int(v) => write!(out, "{v}"),
            Attribute::Float(v) => out.write_str(&format_float(*v)),
            Attribute::Bool(v) => write!(out, "{v}"),
            Attribute::String(s) => write_string_literal(out, s),
            Attribute::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    self.attr(out, item)?;
                }
                out.push(']');
                Ok(())
            }
            Attribute::ElemType(e) => write!(out, "{e}"),
            Attribute::Type(t) => write!(out, "{t}"),
            Attribute::Weight(id) => match self.module.weights.get(*id) {
                Some(w) => {
                    out.push_str("dense_resource<");
                    write_string_literal(out, w.name())?;
                    write!(out, "> : {}", w.ty())
                }
                None => write!(out, "dense_resource<\"<invalid {id}>\"> : none"),
            },
        }
    }
}

/// Whether `name` is a bare identifier in MLIR's grammar (`[a-zA-Z_][a-zA-Z0-9_$.]*`).
pub fn is_bare_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '.'))
}

fn write_attr_name(out: &mut String, name: &str) -> fmt::Result {
    if is_bare_identifier(name) {
        out.push_str(name);
        Ok(())
    } else {
        write_string_literal(out, name)
    }
}

fn write_symbol(out: &mut String, name: &str) -> fmt::Result {
    if is_bare_identifier(name) {
        out.push_str(name);
        Ok(())
    } else {
        write_string_literal(out, name)
    }
}
