//! Sliding windows: the attributes of convolutions and pools, checked and resolved.
//!
//! [`WindowAttrs`] reads `strides`, `dilations`, `pads`, `auto_pad` and `ceil_mode` from an op
//! (the same names and rules for Conv, ConvTranspose, MaxPool and AveragePool) and checks them;
//! its errors are the sentences shape inference reports. [`WindowAttrs::output_dim`] gives the
//! output size along one axis for a possibly symbolic input size (shape inference), and
//! [`WindowAttrs::resolve`] gives, for static sizes, every axis's kernel, stride, dilation,
//! resolved begin and end pads and output size (lowering). [`Window::of`] does both steps for
//! one op: the kernel from `kernel_shape`, else the weight's spatial dims.
//!
//! Resolution follows ONNX: `auto_pad = SAME_UPPER | SAME_LOWER` gives `ceil(in / stride)`
//! outputs and pads `(out - 1) * stride + extent - in` in total (at least 0), the odd one at
//! the end (upper) or the beginning (lower); `VALID` pads nothing; `NOTSET` takes `pads`
//! (begin pads of every axis, then end pads). With `ceil_mode` the output rounds up, but the
//! last window must start inside the input or its begin padding.

use super::OpCtx;
use crate::dim::{add_const, ceil_div, static_dim};
use crate::{Dim, Function, OpId};

/// How an op's pads are given.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum AutoPad {
    /// Explicit `pads` (0 when absent).
    NotSet,
    /// Pads so that the output is `ceil(in / stride)`, the odd pad at the end.
    SameUpper,
    /// Pads so that the output is `ceil(in / stride)`, the odd pad at the beginning.
    SameLower,
    /// No padding.
    Valid,
}

impl AutoPad {
    /// Whether this is `SAME_UPPER` or `SAME_LOWER`.
    pub fn is_same(self) -> bool {
        matches!(self, AutoPad::SameUpper | AutoPad::SameLower)
    }
}

/// The window attributes of one op over `n_spatial` axes, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowAttrs {
    /// The stride of every spatial axis (1 when absent).
    pub strides: Vec<u64>,
    /// The dilation of every spatial axis (1 when absent).
    pub dilations: Vec<u64>,
    /// The begin pads of every spatial axis, then the end pads, as given (0 when absent;
    /// only used with [`AutoPad::NotSet`]).
    pub pads: Vec<u64>,
    pub auto_pad: AutoPad,
    /// Whether the output size rounds up (pools only; false for ops without the attribute).
    pub ceil_mode: bool,
}

/// A window resolved against static input sizes: per spatial axis, everything a kernel needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Window {
    pub kernel: Vec<u64>,
    pub strides: Vec<u64>,
    pub dilations: Vec<u64>,
    /// The pad before the input along each axis.
    pub pad_begin: Vec<u64>,
    /// The pad after the input along each axis (as given or derived; with `ceil_mode` the
    /// last window may read past it).
    pub pad_end: Vec<u64>,
    /// The output size along each axis.
    pub output: Vec<u64>,
}

/// A list attribute of `n` positive entries, all 1 when absent.
fn positive_list(ctx: &OpCtx, name: &str, n: usize) -> Result<Vec<u64>, String> {
    let Some(values) = ctx.ints_attr(name)? else {
        return Ok(vec![1; n]);
    };
    if values.len() != n {
        return Err(format!(
            "`{name}` has {} entries but the input has {n} spatial dims",
            values.len()
        ));
    }
    values
        .iter()
        .map(|&v| {
            u64::try_from(v)
                .ok()
                .filter(|&v| v > 0)
                .ok_or_else(|| format!("`{name}` entries must be positive, got {values:?}"))
        })
        .collect()
}

fn floor_div(a: i128, b: i128) -> i128 {
    a.div_euclid(b)
}

/// `ceil(dim / stride)`.
fn ceil_div_dim(dim: &Dim, stride: u64) -> Dim {
    match dim {
        Dim::Static(n) => static_dim(ceil_div(i128::from(*n), i128::from(stride))),
        _ if stride == 1 => dim.clone(),
        // An exact polynomial quotient is its own ceiling.
        _ => dim.div_exact(&Dim::Static(stride)).unwrap_or(Dim::Unknown),
    }
}

impl WindowAttrs {
    /// Reads and checks the window attributes of the op in `ctx` over `n_spatial` axes.
    pub fn of(ctx: &OpCtx, n_spatial: usize) -> Result<WindowAttrs, String> {
        let strides = positive_list(ctx, "strides", n_spatial)?;
        let dilations = positive_list(ctx, "dilations", n_spatial)?;
        let pads = match ctx.ints_attr("pads")? {
            None => vec![0; 2 * n_spatial],
            Some(p) if p.len() != 2 * n_spatial => {
                return Err(format!(
                    "`pads` has {} entries but the input has {n_spatial} spatial dims (expected {})",
                    p.len(),
                    2 * n_spatial
                ));
            }
            Some(p) => match p.iter().map(|&v| u64::try_from(v)).collect() {
                Ok(p) => p,
                Err(_) => {
                    return Err(format!("`pads` entries must not be negative, got {p:?}"));
                }
            },
        };
        let auto_pad = match ctx.str_attr("auto_pad") {
            None | Some("NOTSET") => AutoPad::NotSet,
            Some("SAME_UPPER") => AutoPad::SameUpper,
            Some("SAME_LOWER") => AutoPad::SameLower,
            Some("VALID") => AutoPad::Valid,
            Some(other) => {
                return Err(format!(
                    "`auto_pad` must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got {other:?}"
                ));
            }
        };
        // Only pools declare `ceil_mode`; its default comes from the table.
        let declares_ceil_mode = ctx
            .func
            .op(ctx.op)
            .opcode
            .def()
            .attr_def("ceil_mode")
            .is_some();
        let ceil_mode = declares_ceil_mode && ctx.int_attr("ceil_mode").is_some_and(|v| v != 0);
        Ok(WindowAttrs {
            strides,
            dilations,
            pads,
            auto_pad,
            ceil_mode,
        })
    }

    /// The kernel's spatial sizes: `kernel_shape` (checked: `n_spatial` positive entries),
    /// else the weight's spatial dims (`None` where symbolic).
    pub fn kernel_sizes(
        ctx: &OpCtx,
        n_spatial: usize,
        weight_spatial: &[Dim],
    ) -> Result<Vec<Option<u64>>, String> {
        match ctx.ints_attr("kernel_shape")? {
            Some(_) => Ok(positive_list(ctx, "kernel_shape", n_spatial)?
                .into_iter()
                .map(Some)
                .collect()),
            None => Ok(weight_spatial.iter().map(Dim::as_static).collect()),
        }
    }

    /// The number of spatial axes.
    pub fn n_spatial(&self) -> usize {
        self.strides.len()
    }

    /// The explicit `(begin, end)` pads of spatial axis `axis` (ignoring `auto_pad`).
    pub fn explicit_pads(&self, axis: usize) -> (u64, u64) {
        (self.pads[axis], self.pads[self.n_spatial() + axis])
    }

    /// The output size along spatial axis `axis` of a sliding window (Conv, MaxPool,
    /// AveragePool) over `input`, for a kernel of size `kernel` (`Unknown` when the kernel
    /// size is not known).
    pub fn output_dim(&self, axis: usize, input: &Dim, kernel: Option<u64>) -> Result<Dim, String> {
        let Some(kernel) = kernel else {
            return Ok(Dim::Unknown);
        };
        if kernel == 0 {
            return Err("kernel sizes must be positive".to_string());
        }
        let (stride, dilation) = (self.strides[axis], self.dilations[axis]);
        let (pad_begin, pad_end) = match self.auto_pad {
            AutoPad::SameUpper | AutoPad::SameLower => return Ok(ceil_div_dim(input, stride)),
            AutoPad::Valid => (0, 0),
            AutoPad::NotSet => {
                let (begin, end) = self.explicit_pads(axis);
                (i128::from(begin), i128::from(end))
            }
        };
        let extent = i128::from(dilation) * (i128::from(kernel) - 1) + 1;
        let s = i128::from(stride);
        // The output is `floor((input + c) / s) + 1` (ceil with ceil_mode), with:
        let c = pad_begin + pad_end - extent;
        if let Some(n) = input.as_static() {
            let n = i128::from(n);
            let total = n + c;
            if total < 0 {
                return Err(format!(
                    "the padded input size {} is smaller than the kernel's extent {extent}",
                    n + pad_begin + pad_end
                ));
            }
            let mut out = if self.ceil_mode {
                ceil_div(total, s)
            } else {
                floor_div(total, s)
            } + 1;
            // The last window must start inside the input or its left padding.
            if self.ceil_mode && (out - 1) * s >= n + pad_begin {
                out -= 1;
            }
            return Ok(static_dim(out));
        }
        // Symbolic: when input = s*q exactly, floor((s*q + c) / s) = q + floor(c / s).
        let quotient = if stride == 1 {
            Some(input.clone())
        } else {
            input.div_exact(&Dim::Static(stride))
        };
        let Some(q) = quotient else {
            return Ok(Dim::Unknown);
        };
        let steps = if self.ceil_mode {
            ceil_div(c, s)
        } else {
            floor_div(c, s)
        };
        let mut extra = steps + 1;
        if self.ceil_mode && steps * s >= pad_begin {
            extra -= 1;
        }
        Ok(add_const(&q, extra))
    }

    /// Resolves the window for a kernel of sizes `kernel` over static `input` sizes: the pads
    /// `auto_pad` implies and every output size.
    pub fn resolve(&self, kernel: &[u64], input: &[u64]) -> Result<Window, String> {
        let n = self.n_spatial();
        if kernel.len() != n || input.len() != n {
            return Err(format!(
                "the window has {n} spatial dims but the kernel has {} and the input {}",
                kernel.len(),
                input.len()
            ));
        }
        let mut window = Window {
            kernel: kernel.to_vec(),
            strides: self.strides.clone(),
            dilations: self.dilations.clone(),
            pad_begin: Vec::with_capacity(n),
            pad_end: Vec::with_capacity(n),
            output: Vec::with_capacity(n),
        };
        for axis in 0..n {
            let output =
                match self.output_dim(axis, &Dim::Static(input[axis]), Some(kernel[axis]))? {
                    Dim::Static(out) => out,
                    _ => {
                        return Err(format!(
                            "the output size along spatial dim {axis} does not fit in 64 bits"
                        ))
                    }
                };
            let (begin, end) = match self.auto_pad {
                AutoPad::NotSet => self.explicit_pads(axis),
                AutoPad::Valid => (0, 0),
                AutoPad::SameUpper | AutoPad::SameLower => {
                    let extent =
                        i128::from(self.dilations[axis]) * (i128::from(kernel[axis]) - 1) + 1;
                    let total = ((i128::from(output) - 1) * i128::from(self.strides[axis])
                        + extent
                        - i128::from(input[axis]))
                    .max(0);
                    let total = u64::try_from(total).map_err(|_| {
                        format!("the padding along spatial dim {axis} does not fit in 64 bits")
                    })?;
                    let begin = if self.auto_pad == AutoPad::SameUpper {
                        total / 2
                    } else {
                        total - total / 2
                    };
                    (begin, total - begin)
                }
            };
            window.pad_begin.push(begin);
            window.pad_end.push(end);
            window.output.push(output);
        }
        Ok(window)
    }
}

impl Window {
    /// The window of a Conv or pool `op` over static `input` spatial sizes: the kernel from
    /// `kernel_shape`, else the static spatial dims of the weight (operand 1).
    pub fn of(func: &Function, op: OpId, input: &[u64]) -> Result<Window, String> {
        let ctx = OpCtx { func, op };
        let n_spatial = input.len();
        let weight_spatial: Vec<Dim> = ctx
            .operand_type(1)
            .filter(|w| w.rank() == n_spatial + 2)
            .map_or_else(Vec::new, |w| w.dims[2..].to_vec());
        let kernel: Option<Vec<u64>> = WindowAttrs::kernel_sizes(&ctx, n_spatial, &weight_spatial)?
            .into_iter()
            .collect();
        let kernel = match kernel {
            Some(k) if k.len() == n_spatial => k,
            _ => {
                return Err(format!(
                    "the kernel's {n_spatial} spatial sizes are not known: give `kernel_shape` or a weight with static dims"
                ))
            }
        };
        WindowAttrs::of(&ctx, n_spatial)?.resolve(&kernel, input)
    }

    /// The number of spatial axes.
    pub fn n_spatial(&self) -> usize {
        self.kernel.len()
    }

    /// The input span one window covers along `axis`: `dilation * (kernel - 1) + 1`.
    pub fn extent(&self, axis: usize) -> u64 {
        self.dilations[axis] * (self.kernel[axis].saturating_sub(1)) + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Attribute, ElemType, Opcode, TensorType, Type};

    fn pool_with(attrs: Vec<(&'static str, Attribute)>, input: &[u64]) -> (Function, OpId) {
        let mut shape = vec![1, 1];
        shape.extend_from_slice(input);
        let ty = Type::from(TensorType::with_shape(ElemType::F32, &shape));
        let mut func = Function::new("f", vec![ty.clone()], Vec::new());
        let x = func.args()[0];
        let entry = func.entry_block();
        let op = func.build_op(entry, Opcode::MaxPool, vec![x], vec![ty], attrs);
        (func, op)
    }

    fn ints(v: &[i64]) -> Attribute {
        Attribute::ints(v.iter().copied())
    }

    fn string(s: &str) -> Attribute {
        Attribute::String(s.to_string())
    }

    #[test]
    fn explicit_pads_and_strides() {
        let (func, op) = pool_with(
            vec![
                ("kernel_shape", ints(&[3, 2])),
                ("strides", ints(&[2, 1])),
                ("pads", ints(&[1, 0, 1, 1])),
            ],
            &[7, 5],
        );
        let w = Window::of(&func, op, &[7, 5]).expect("the attributes are valid");
        assert_eq!(w.kernel, [3, 2]);
        assert_eq!(w.strides, [2, 1]);
        assert_eq!(w.dilations, [1, 1]);
        assert_eq!(w.pad_begin, [1, 0]);
        assert_eq!(w.pad_end, [1, 1]);
        // (7 + 2 - 3) / 2 + 1 = 4; (5 + 1 - 2) / 1 + 1 = 5.
        assert_eq!(w.output, [4, 5]);
        assert_eq!(w.extent(0), 3);
    }

    #[test]
    fn same_upper_and_lower_put_the_odd_pad_at_opposite_ends() {
        for (mode, begin, end) in [("SAME_UPPER", 1, 2), ("SAME_LOWER", 2, 1)] {
            let (func, op) = pool_with(
                vec![("kernel_shape", ints(&[4])), ("auto_pad", string(mode))],
                &[5],
            );
            let w = Window::of(&func, op, &[5]).expect("the attributes are valid");
            assert_eq!(w.output, [5], "{mode}");
            assert_eq!((w.pad_begin[0], w.pad_end[0]), (begin, end), "{mode}");
        }
    }

    #[test]
    fn valid_pads_nothing_and_dilation_widens_the_window() {
        let (func, op) = pool_with(
            vec![
                ("kernel_shape", ints(&[3])),
                ("dilations", ints(&[2])),
                ("pads", ints(&[4, 4])),
                ("auto_pad", string("VALID")),
            ],
            &[9],
        );
        let w = Window::of(&func, op, &[9]).expect("the attributes are valid");
        assert_eq!((w.pad_begin[0], w.pad_end[0]), (0, 0));
        assert_eq!(w.extent(0), 5);
        assert_eq!(w.output, [5]);
    }

    #[test]
    fn ceil_mode_rounds_up_but_starts_every_window_inside() {
        let (func, op) = pool_with(
            vec![
                ("kernel_shape", ints(&[2])),
                ("strides", ints(&[2])),
                ("ceil_mode", Attribute::Int(1)),
            ],
            &[5],
        );
        let w = Window::of(&func, op, &[5]).expect("the attributes are valid");
        assert_eq!(w.output, [3]);
        let (func, op) = pool_with(
            vec![
                ("kernel_shape", ints(&[3])),
                ("strides", ints(&[2])),
                ("pads", ints(&[0, 1])),
                ("ceil_mode", Attribute::Int(1)),
            ],
            &[4],
        );
        // ceil((4 + 1 - 3) / 2) + 1 = 2; a third window would start at 4, past the input.
        let w = Window::of(&func, op, &[4]).expect("the attributes are valid");
        assert_eq!(w.output, [2]);
    }

    #[test]
    fn bad_attributes_are_sentences() {
        let cases: Vec<(Vec<(&'static str, Attribute)>, &str)> = vec![
            (
                vec![("kernel_shape", ints(&[2])), ("strides", ints(&[0]))],
                "`strides` entries must be positive, got [0]",
            ),
            (
                vec![("kernel_shape", ints(&[2])), ("pads", ints(&[1]))],
                "`pads` has 1 entries but the input has 1 spatial dims (expected 2)",
            ),
            (
                vec![("kernel_shape", ints(&[2])), ("pads", ints(&[-1, 0]))],
                "`pads` entries must not be negative, got [-1, 0]",
            ),
            (
                vec![("kernel_shape", ints(&[2])), ("auto_pad", string("SAME"))],
                "`auto_pad` must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got \"SAME\"",
            ),
            (
                vec![("kernel_shape", ints(&[9]))],
                "the padded input size 4 is smaller than the kernel's extent 9",
            ),
        ];
        for (attrs, message) in cases {
            let (func, op) = pool_with(attrs, &[4]);
            assert_eq!(Window::of(&func, op, &[4]), Err(message.to_string()));
        }
    }
}
