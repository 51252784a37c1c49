//! The shapes of ONNX's recurrent ops `RNN`, `GRU` and `LSTM` (opsets 7 to 22), resolved once
//! from operand types and attributes ([`RecurrentDims`]): shape inference, the FLOP counts and
//! lowering all read them, so they cannot disagree about a hidden size or a direction count.
//!
//! Every op reads `X` as `[seq, batch, input]` (`layout` 0) or `[batch, seq, input]`
//! (`layout` 1), `W` as `[directions, gates * hidden, input]`, `R` as `[directions, gates *
//! hidden, hidden]`, `B` as `[directions, 2 * gates * hidden]` (the input biases, then the
//! recurrent ones), `sequence_lens` as `[batch]`, `initial_h` / `initial_c` and the results
//! `Y_h` / `Y_c` as `[directions, batch, hidden]` (`layout` 1: `[batch, directions, hidden]`),
//! `P` (LSTM's peepholes) as `[directions, 3 * hidden]`, and `Y` as `[seq, directions, batch,
//! hidden]` (`layout` 1: `[batch, seq, directions, hidden]`). The gates are 1 (RNN), 3 (GRU:
//! z, r, h) or 4 (LSTM: i, o, f, c); `directions` is 2 for `direction` "bidirectional", else 1.
//!
//! Guarantees: `resolve` never panics; it returns a sentence naming the operand or attribute
//! that is wrong, and a dim it cannot tell is [`Dim::Unknown`], never a wrong one.

use super::{OpCtx, Opcode};
use crate::{Dim, TensorType};

/// Which recurrent cell an op runs.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Cell {
    Rnn,
    Gru,
    Lstm,
}

impl Cell {
    /// The cell of `opcode`, if it is a recurrent op.
    pub fn of(opcode: Opcode) -> Option<Cell> {
        match opcode {
            Opcode::RNN => Some(Cell::Rnn),
            Opcode::GRU => Some(Cell::Gru),
            Opcode::LSTM => Some(Cell::Lstm),
            _ => None,
        }
    }

    /// The gates whose rows `W` and `R` stack.
    pub fn gates(self) -> u64 {
        match self {
            Cell::Rnn => 1,
            Cell::Gru => 3,
            Cell::Lstm => 4,
        }
    }

    /// The ONNX name of the op.
    pub fn name(self) -> &'static str {
        match self {
            Cell::Rnn => "RNN",
            Cell::Gru => "GRU",
            Cell::Lstm => "LSTM",
        }
    }

    /// The default `activations` of one direction.
    pub fn default_activations(self) -> &'static [&'static str] {
        match self {
            Cell::Rnn => &["Tanh"],
            Cell::Gru => &["Sigmoid", "Tanh"],
            Cell::Lstm => &["Sigmoid", "Tanh", "Tanh"],
        }
    }
}

/// The order in which the steps visit the sequence (`direction`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Direction {
    Forward,
    Reverse,
    Bidirectional,
}

impl Direction {
    /// How many directions the op runs (the leading dim of `W`).
    pub fn count(self) -> u64 {
        match self {
            Direction::Bidirectional => 2,
            _ => 1,
        }
    }

    /// Whether direction `index` (0 or 1) visits the sequence backwards.
    pub fn is_reverse(self, index: u64) -> bool {
        match self {
            Direction::Forward => false,
            Direction::Reverse => true,
            Direction::Bidirectional => index == 1,
        }
    }
}

/// The dims of one `RNN`, `GRU` or `LSTM` op (see the module doc).
#[derive(Clone, Debug)]
pub struct RecurrentDims {
    pub cell: Cell,
    pub seq: Dim,
    pub batch: Dim,
    pub input: Dim,
    pub hidden: Dim,
    pub direction: Direction,
    /// `layout` 1: batch-major `X`, `Y`, states.
    pub batchwise: bool,
    /// `activations` is absent or its default (Sigmoid for gates, Tanh otherwise).
    pub default_activations: bool,
    /// `clip`, when given: the pre-activations are clipped to `[-clip, clip]`.
    pub clip: Option<f64>,
    /// GRU's `linear_before_reset`.
    pub linear_before_reset: bool,
    /// LSTM's `input_forget`: the forget gate is `1 - input gate`.
    pub input_forget: bool,
}

impl RecurrentDims {
    /// Operand positions.
    pub const X: usize = 0;
    pub const W: usize = 1;
    pub const R: usize = 2;
    pub const B: usize = 3;
    pub const SEQUENCE_LENS: usize = 4;
    pub const INITIAL_H: usize = 5;
    pub const INITIAL_C: usize = 6;
    pub const P: usize = 7;
    /// Result positions.
    pub const Y: usize = 0;
    pub const Y_H: usize = 1;
    pub const Y_C: usize = 2;

    /// The dims of recurrent op `ctx`, checking every operand and attribute against `X`.
    pub fn resolve(ctx: &OpCtx) -> Result<RecurrentDims, String> {
        let opcode = ctx.func.op(ctx.op).opcode;
        let cell = Cell::of(opcode).ok_or("not a recurrent op (a memc bug)")?;
        let operand = |i: usize, name: &str| -> Result<&TensorType, String> {
            ctx.operand_type(i)
                .ok_or_else(|| format!("the `{name}` operand is missing"))
        };
        let x = operand(Self::X, "X")?;
        let w = operand(Self::W, "W")?;
        let r = operand(Self::R, "R")?;
        let batchwise = match ctx.int_attr("layout").unwrap_or(0) {
            0 => false,
            1 => true,
            other => return Err(format!("`layout` is {other}; it must be 0 or 1")),
        };
        let direction = match ctx.str_attr("direction").unwrap_or("forward") {
            "forward" => Direction::Forward,
            "reverse" => Direction::Reverse,
            "bidirectional" => Direction::Bidirectional,
            other => {
                return Err(format!(
                "`direction` \"{other}\" is not one of \"forward\", \"reverse\", \"bidirectional\""
            ))
            }
        };
        let dirs = Dim::Static(direction.count());
        let gates = cell.gates();
        if x.rank() != 3 {
            return Err(format!(
                "`X` has type {x}; it must be 3-d ({})",
                if batchwise {
                    "batch, seq, input"
                } else {
                    "seq, batch, input"
                }
            ));
        }
        let (seq, batch) = if batchwise {
            (x.dims[1].clone(), x.dims[0].clone())
        } else {
            (x.dims[0].clone(), x.dims[1].clone())
        };
        if w.rank() != 3 || r.rank() != 3 {
            return Err(format!(
                "`W` has type {w} and `R` {r}; both must be 3-d (directions, {gates} * hidden_size, input or hidden size)"
            ));
        }
        let mut hidden = r.dims[2].clone();
        if let Some(h) = ctx.int_attr("hidden_size") {
            if h <= 0 {
                return Err(format!("`hidden_size` is {h}; it must be positive"));
            }
            hidden = same(
                &hidden,
                &Dim::Static(h as u64),
                "`hidden_size` and R's dim 2",
            )?;
        }
        let gate_rows = match &hidden {
            Dim::Static(h) => Dim::Static(h * gates),
            _ => Dim::Unknown,
        };
        same(
            &w.dims[0],
            &dirs,
            "the directions of `direction` and W's dim 0",
        )?;
        same(
            &r.dims[0],
            &dirs,
            "the directions of `direction` and R's dim 0",
        )?;
        same(&w.dims[1], &gate_rows, "W's dim 1 and gates * hidden_size")?;
        same(&r.dims[1], &gate_rows, "R's dim 1 and gates * hidden_size")?;
        let input = same(
            &x.dims[2],
            &w.dims[2],
            "the input sizes of X (dim 2) and W (dim 2)",
        )?;
        let scaled = |k: u64| match &hidden {
            Dim::Static(h) => Dim::Static(h * k),
            _ => Dim::Unknown,
        };
        if let Some(b) = ctx.operand_type(Self::B) {
            if b.rank() != 2
                || same(&b.dims[0], &dirs, "").is_err()
                || same(&b.dims[1], &scaled(2 * gates), "").is_err()
            {
                return Err(format!(
                    "`B` has type {b}; it must be (directions, 2 * {gates} * hidden_size) = ({dirs}, {})",
                    scaled(2 * gates)
                ));
            }
        }
        let mut batch = batch;
        if let Some(lens) = ctx.operand_type(Self::SEQUENCE_LENS) {
            if lens.rank() != 1 {
                return Err(format!(
                    "`sequence_lens` has type {lens}; it must be 1-d (batch)"
                ));
            }
            batch = same(
                &batch,
                &lens.dims[0],
                "the batch sizes of X and sequence_lens",
            )?;
        }
        let states: &[(usize, &str)] = if cell == Cell::Lstm {
            &[
                (Self::INITIAL_H, "initial_h"),
                (Self::INITIAL_C, "initial_c"),
            ]
        } else {
            &[(Self::INITIAL_H, "initial_h")]
        };
        for &(index, name) in states {
            if let Some(s) = ctx.operand_type(index) {
                let (d, b) = if batchwise { (1, 0) } else { (0, 1) };
                if s.rank() != 3
                    || same(&s.dims[d], &dirs, "").is_err()
                    || same(&s.dims[2], &hidden, "").is_err()
                {
                    return Err(format!(
                        "`{name}` has type {s}; it must be ({}) with {dirs} directions and hidden size {hidden}",
                        if batchwise {
                            "batch, directions, hidden_size"
                        } else {
                            "directions, batch, hidden_size"
                        }
                    ));
                }
                batch = same(
                    &batch,
                    &s.dims[b],
                    &format!("the batch sizes of X and {name}"),
                )?;
            }
        }
        if cell == Cell::Lstm {
            if let Some(p) = ctx.operand_type(Self::P) {
                if p.rank() != 2
                    || same(&p.dims[0], &dirs, "").is_err()
                    || same(&p.dims[1], &scaled(3), "").is_err()
                {
                    return Err(format!(
                        "`P` has type {p}; it must be (directions, 3 * hidden_size) = ({dirs}, {})",
                        scaled(3)
                    ));
                }
            }
        }
        let default_activations = match ctx.attr("activations") {
            None => true,
            Some(crate::Attribute::Array(items)) => {
                let names: Vec<&str> = items
                    .iter()
                    .filter_map(|a| match a {
                        crate::Attribute::String(s) => Some(s.as_str()),
                        _ => None,
                    })
                    .collect();
                let defaults = cell.default_activations();
                names.len() == defaults.len() * direction.count() as usize
                    && names
                        .iter()
                        .zip(defaults.iter().cycle())
                        .all(|(n, d)| n.eq_ignore_ascii_case(d))
            }
            Some(_) => false,
        };
        let clip = match ctx.float_attr("clip") {
            Some(c) if c.is_nan() || c <= 0.0 => {
                return Err(format!("`clip` is {c}; it must be positive"));
            }
            other => other,
        };
        let flag = |name: &str| -> Result<bool, String> {
            match ctx.int_attr(name).unwrap_or(0) {
                0 => Ok(false),
                1 => Ok(true),
                other => Err(format!("`{name}` is {other}; it must be 0 or 1")),
            }
        };
        Ok(RecurrentDims {
            cell,
            seq,
            batch,
            input,
            hidden,
            direction,
            batchwise,
            default_activations,
            clip,
            linear_before_reset: cell == Cell::Gru && flag("linear_before_reset")?,
            input_forget: cell == Cell::Lstm && flag("input_forget")?,
        })
    }

    /// `Y`: `[seq, directions, batch, hidden]`, or `[batch, seq, directions, hidden]`.
    pub fn y_dims(&self) -> Vec<Dim> {
        let dirs = Dim::Static(self.direction.count());
        if self.batchwise {
            vec![
                self.batch.clone(),
                self.seq.clone(),
                dirs,
                self.hidden.clone(),
            ]
        } else {
            vec![
                self.seq.clone(),
                dirs,
                self.batch.clone(),
                self.hidden.clone(),
            ]
        }
    }

    /// `Y_h` and `Y_c`: `[directions, batch, hidden]`, or `[batch, directions, hidden]`.
    pub fn state_dims(&self) -> Vec<Dim> {
        let dirs = Dim::Static(self.direction.count());
        if self.batchwise {
            vec![self.batch.clone(), dirs, self.hidden.clone()]
        } else {
            vec![dirs, self.batch.clone(), self.hidden.clone()]
        }
    }
}

/// Two dims that must be equal: `Err` naming `what` when both are static and differ; else the
/// more precise one.
fn same(a: &Dim, b: &Dim, what: &str) -> Result<Dim, String> {
    Ok(match (a, b) {
        (Dim::Static(x), Dim::Static(y)) if x != y => {
            return Err(format!("{what} differ: {x} and {y}"));
        }
        (Dim::Static(_), _) => a.clone(),
        (_, Dim::Static(_)) => b.clone(),
        (Dim::Unknown, _) => b.clone(),
        _ => a.clone(),
    })
}
