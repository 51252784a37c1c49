//! Unit tests of shape inference: the tricky semantics of single ops, known values flowing
//! through shape computations, the whole-module driver, and hostile input.

use super::*;
use crate::{Attribute, ElemType, WeightBytes};
use std::sync::Arc;

/// Builds a function op by op, the way the importer does: each op is inferred as it is added
/// and its result types are set from the inferred ones.
struct Builder {
    func: Function,
    weights: WeightStore,
    infer: ShapeInference,
}

fn dims(text: &[&str]) -> Vec<Dim> {
    text.iter()
        .map(|t| Dim::parse(t).expect("test dims parse"))
        .collect()
}

fn f32_of(text: &[&str]) -> TensorType {
    TensorType::new(ElemType::F32, dims(text))
}

fn attrs(items: &[(&'static str, Attribute)]) -> Vec<(&'static str, Attribute)> {
    items.to_vec()
}

fn int(v: i64) -> Attribute {
    Attribute::Int(v)
}

fn ints(v: &[i64]) -> Attribute {
    Attribute::ints(v.iter().copied())
}

fn string(s: &str) -> Attribute {
    Attribute::String(s.to_string())
}

impl Builder {
    fn new(args: Vec<TensorType>) -> Builder {
        let args = args.into_iter().map(Type::from).collect();
        Builder {
            func: Function::new("f", args, Vec::new()),
            weights: WeightStore::new(),
            infer: ShapeInference::new(),
        }
    }

    fn arg(&self, index: usize) -> ValueId {
        self.func.args()[index]
    }

    /// Adds `opcode` with `n_results` placeholder results and infers it.
    fn try_op(
        &mut self,
        opcode: Opcode,
        operands: Vec<ValueId>,
        attrs: Vec<(&'static str, Attribute)>,
        n_results: usize,
    ) -> Result<Option<Vec<TensorType>>, String> {
        let placeholder: Type = TensorType::new(ElemType::F32, Vec::new()).into();
        let entry = self.func.entry_block();
        let op = self
            .func
            .build_op(entry, opcode, operands, vec![placeholder; n_results], attrs);
        let inferred = self.infer.infer_op(&self.func, &self.weights, op)?;
        if let Some(types) = &inferred {
            let results = self.func.op(op).results.clone();
            for (&r, ty) in results.iter().zip(types) {
                self.func.set_value_type(r, ty.clone().into());
            }
        }
        Ok(inferred)
    }

    /// Adds a one-result op that must infer; returns its result.
    fn op(
        &mut self,
        opcode: Opcode,
        operands: Vec<ValueId>,
        attrs: Vec<(&'static str, Attribute)>,
    ) -> ValueId {
        self.ops(opcode, operands, attrs, 1)[0]
    }

    /// Adds an op that must infer; returns its results.
    fn ops(
        &mut self,
        opcode: Opcode,
        operands: Vec<ValueId>,
        attrs: Vec<(&'static str, Attribute)>,
        n_results: usize,
    ) -> Vec<ValueId> {
        match self.try_op(opcode, operands, attrs, n_results) {
            Ok(Some(_)) => {}
            other => panic!("{} did not infer: {other:?}", opcode.name()),
        }
        let entry = self.func.entry_block();
        let last = *self
            .func
            .layout()
            .block_ops(entry)
            .last()
            .expect("an op was just added");
        self.func.op(last).results.clone()
    }

    /// The error `opcode` is rejected with.
    fn error(
        &mut self,
        opcode: Opcode,
        operands: Vec<ValueId>,
        attrs: Vec<(&'static str, Attribute)>,
    ) -> String {
        match self.try_op(opcode, operands, attrs, 1) {
            Err(message) => message,
            other => panic!("{} was not rejected: {other:?}", opcode.name()),
        }
    }

    /// A value of type `ty` whose contents nobody knows (an operand-less Identity that is never
    /// inferred).
    fn opaque(&mut self, ty: TensorType) -> ValueId {
        let entry = self.func.entry_block();
        let op = self
            .func
            .build_op(entry, Opcode::Identity, vec![], vec![ty.into()], []);
        self.func.op(op).results[0]
    }

    /// A `memc.weight` with loaded little-endian bytes.
    fn weight(&mut self, ty: TensorType, bytes: Vec<u8>) -> ValueId {
        let name = format!("w{}", self.weights.len());
        let id = self
            .weights
            .insert(&name, ty, WeightBytes::Owned(Arc::from(bytes)))
            .expect("test weights are well formed");
        self.op(
            Opcode::Weight,
            vec![],
            attrs(&[("value", Attribute::Weight(id))]),
        )
    }

    /// A 1-d `i64` constant.
    fn ints(&mut self, values: &[i64]) -> ValueId {
        let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let ty = TensorType::with_shape(ElemType::I64, &[values.len() as u64]);
        self.weight(ty, bytes)
    }

    /// An `i64` scalar constant.
    fn int(&mut self, value: i64) -> ValueId {
        let ty = TensorType::with_shape(ElemType::I64, &[]);
        self.weight(ty, value.to_le_bytes().to_vec())
    }

    /// An `f32` constant of the given shape.
    fn floats(&mut self, shape: &[u64], values: &[f32]) -> ValueId {
        let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.weight(TensorType::with_shape(ElemType::F32, shape), bytes)
    }

    /// The dims of a value's type, as text.
    fn dims(&self, value: ValueId) -> Vec<String> {
        self.func
            .value_type(value)
            .tensor()
            .expect("test values are tensors")
            .dims
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    fn ty(&self, value: ValueId) -> TensorType {
        self.func
            .value_type(value)
            .tensor()
            .expect("test values are tensors")
            .clone()
    }

    /// The known value of `value`, as text.
    fn known(&self, value: ValueId) -> Option<String> {
        self.infer.known_value(value).map(ToString::to_string)
    }
}

#[test]
fn reshape_to_heads_keeps_symbolic_batch_and_seq() {
    // [batch, seq, 768] -> Shape -> Gather(0), Gather(1) -> Unsqueeze -> Concat with 12, 64.
    let mut b = Builder::new(vec![f32_of(&["batch", "seq", "768"])]);
    let x = b.arg(0);
    let shape = b.op(Opcode::Shape, vec![x], vec![]);
    assert_eq!(b.known(shape).as_deref(), Some("[batch, seq, 768]"));
    let zero = b.int(0);
    let one = b.int(1);
    let axes = b.ints(&[0]);
    let batch = b.op(Opcode::Gather, vec![shape, zero], vec![]);
    let seq = b.op(Opcode::Gather, vec![shape, one], vec![]);
    assert_eq!(b.dims(batch), Vec::<String>::new());
    let batch = b.op(Opcode::Unsqueeze, vec![batch, axes], vec![]);
    let seq = b.op(Opcode::Unsqueeze, vec![seq, axes], vec![]);
    let heads = b.ints(&[12, 64]);
    let target = b.op(
        Opcode::Concat,
        vec![batch, seq, heads],
        attrs(&[("axis", int(0))]),
    );
    assert_eq!(b.known(target).as_deref(), Some("[batch, seq, 12, 64]"));
    let reshaped = b.op(Opcode::Reshape, vec![x, target], vec![]);
    assert_eq!(b.dims(reshaped), ["batch", "seq", "12", "64"]);
}

#[test]
fn reshape_zero_and_minus_one() {
    let mut b = Builder::new(vec![
        f32_of(&["batch", "seq", "768"]),
        f32_of(&["2", "3"]),
        TensorType::with_shape(ElemType::I64, &[2]),
    ]);
    let x = b.arg(0);
    let flat = b.ints(&[-1, 768]);
    let r = b.op(Opcode::Reshape, vec![x, flat], vec![]);
    assert_eq!(b.dims(r), ["batch*seq", "768"]);
    let copy = b.ints(&[0, 0, -1]);
    let r = b.op(Opcode::Reshape, vec![x, copy], vec![]);
    assert_eq!(b.dims(r), ["batch", "seq", "768"]);
    let split_heads = b.ints(&[0, -1, 64]);
    let r = b.op(Opcode::Reshape, vec![x, split_heads], vec![]);
    assert_eq!(b.dims(r), ["batch", "12*seq", "64"]);
    // -1 that does not divide symbolically is unknown, never a guess.
    let odd = b.ints(&[-1, 5]);
    let r = b.op(Opcode::Reshape, vec![x, odd], vec![]);
    assert_eq!(b.dims(r), ["?", "5"]);

    let small = b.arg(1);
    let four = b.ints(&[4]);
    assert_eq!(
        b.error(Opcode::Reshape, vec![small, four], vec![]),
        "cannot reshape 6 elements into [4]"
    );
    let two_minus_ones = b.ints(&[-1, -1]);
    assert_eq!(
        b.error(Opcode::Reshape, vec![small, two_minus_ones], vec![]),
        "the shape [-1, -1] has more than one -1"
    );
    let not_divisible = b.ints(&[4, -1]);
    assert_eq!(
        b.error(Opcode::Reshape, vec![small, not_divisible], vec![]),
        "cannot reshape 6 elements into [4, -1]"
    );
    // allowzero: 0 is a size, not a copy.
    let zero = b.ints(&[0, 3]);
    assert!(b
        .error(
            Opcode::Reshape,
            vec![small, zero],
            attrs(&[("allowzero", int(1))])
        )
        .contains("cannot reshape 6 elements into [0, 3]"));
    let r = b.op(Opcode::Reshape, vec![small, zero], vec![]);
    assert_eq!(b.dims(r), ["2", "3"]);
    // Unknown shape values still give the rank.
    let unknown_shape = b.arg(2);
    assert_eq!(b.known(unknown_shape), None);
    let r = b.op(Opcode::Reshape, vec![x, unknown_shape], vec![]);
    assert_eq!(b.dims(r), ["?", "?"]);
}

#[test]
fn slice_with_negative_and_clamped_indices() {
    let mut b = Builder::new(vec![f32_of(&["10", "seq"])]);
    let x = b.arg(0);
    let axis0 = b.ints(&[0]);
    let axis1 = b.ints(&[1]);
    let case = |b: &mut Builder, starts: i64, ends: i64, axes: ValueId, steps: i64| {
        let s = b.ints(&[starts]);
        let e = b.ints(&[ends]);
        let st = b.ints(&[steps]);
        let r = b.op(Opcode::Slice, vec![x, s, e, axes, st], vec![]);
        b.dims(r)
    };
    assert_eq!(case(&mut b, -3, i64::MAX, axis0, 1), ["3", "seq"]);
    assert_eq!(case(&mut b, 1, -1, axis0, 2), ["4", "seq"]);
    assert_eq!(case(&mut b, -1, i64::MIN, axis0, -1), ["10", "seq"]);
    assert_eq!(case(&mut b, 20, 30, axis0, 1), ["0", "seq"]);
    assert_eq!(case(&mut b, 8, 2, axis0, -3), ["2", "seq"]);
    // A symbolic dim: only the whole axis is known.
    assert_eq!(case(&mut b, 0, i64::MAX, axis1, 1), ["10", "seq"]);
    assert_eq!(case(&mut b, 1, i64::MAX, axis1, 1), ["10", "?"]);
    assert_eq!(case(&mut b, -1, i64::MIN, axis1, -1), ["10", "seq"]);
    let s = b.ints(&[0]);
    let e = b.ints(&[1]);
    let zero_step = b.ints(&[0]);
    assert_eq!(
        b.error(Opcode::Slice, vec![x, s, e, axis0, zero_step], vec![]),
        "the step for axis 0 is 0"
    );
    // Slicing a known shape vector folds: the last dim.
    let shape = b.op(Opcode::Shape, vec![x], vec![]);
    let last = b.ints(&[-1]);
    let end = b.ints(&[i64::MAX]);
    let tail = b.op(Opcode::Slice, vec![shape, last, end], vec![]);
    assert_eq!(b.known(tail).as_deref(), Some("[seq]"));
}

#[test]
fn conv_and_pool_output_sizes() {
    let mut b = Builder::new(vec![
        f32_of(&["1", "3", "224", "224"]),
        f32_of(&["64", "3", "7", "7"]),
        f32_of(&["n", "3", "h", "225"]),
        f32_of(&["8", "3", "3", "3"]),
        f32_of(&["1", "3", "10", "10"]),
    ]);
    let (x, w, xs, w3, x10) = (b.arg(0), b.arg(1), b.arg(2), b.arg(3), b.arg(4));
    let y = b.op(
        Opcode::Conv,
        vec![x, w],
        attrs(&[("strides", ints(&[2, 2])), ("pads", ints(&[3, 3, 3, 3]))]),
    );
    assert_eq!(b.dims(y), ["1", "64", "112", "112"]);
    // SAME_UPPER: ceil(in / stride), whatever the kernel.
    let y = b.op(
        Opcode::Conv,
        vec![xs, w3],
        attrs(&[
            ("strides", ints(&[2, 2])),
            ("auto_pad", string("SAME_UPPER")),
        ]),
    );
    assert_eq!(b.dims(y), ["n", "8", "?", "113"]);
    // Stride 1 and pads that keep the size: the symbolic dim survives.
    let y = b.op(
        Opcode::Conv,
        vec![xs, w3],
        attrs(&[("pads", ints(&[1, 1, 1, 1]))]),
    );
    assert_eq!(b.dims(y), ["n", "8", "h", "225"]);
    let y = b.op(Opcode::Conv, vec![xs, w3], vec![]);
    assert_eq!(b.dims(y), ["n", "8", "h-2", "223"]);
    // Dilation 2 makes a 3x3 kernel span 5.
    let y = b.op(
        Opcode::Conv,
        vec![x10, w3],
        attrs(&[("dilations", ints(&[2, 2]))]),
    );
    assert_eq!(b.dims(y), ["1", "8", "6", "6"]);
    let y = b.op(
        Opcode::Conv,
        vec![x10, w3],
        attrs(&[("auto_pad", string("VALID")), ("strides", ints(&[3, 3]))]),
    );
    assert_eq!(b.dims(y), ["1", "8", "3", "3"]);
    let wide = b.arg(1);
    let narrow_input = b.arg(4);
    assert_eq!(
        b.error(
            Opcode::Conv,
            vec![narrow_input, wide],
            attrs(&[("dilations", ints(&[2, 2]))])
        ),
        "the padded input size 10 is smaller than the kernel's extent 13"
    );
    let grouped = b.error(Opcode::Conv, vec![x, w3], attrs(&[("group", int(3))]));
    assert_eq!(
        grouped,
        "the input has 3 channels but the weight expects 3 per group x 3 group(s)"
    );

    // Pools: floor by default; ceil_mode rounds up but drops a window that would start in
    // the right padding.
    let pool = |b: &mut Builder, len: &str, kernel: i64, stride: i64, pads: [i64; 2], ceil: i64| {
        let input = b.opaque(f32_of(&["1", "1", len]));
        let y = b.op(
            Opcode::MaxPool,
            vec![input],
            attrs(&[
                ("kernel_shape", ints(&[kernel])),
                ("strides", ints(&[stride])),
                ("pads", ints(&pads)),
                ("ceil_mode", int(ceil)),
            ]),
        );
        b.dims(y)[2].clone()
    };
    assert_eq!(pool(&mut b, "6", 3, 2, [0, 0], 0), "2");
    assert_eq!(pool(&mut b, "6", 3, 2, [0, 0], 1), "3");
    assert_eq!(pool(&mut b, "2", 1, 2, [0, 0], 1), "1");
    assert_eq!(pool(&mut b, "112", 3, 2, [1, 1], 0), "56");
    assert_eq!(pool(&mut b, "2*s", 2, 2, [0, 0], 0), "s");
    assert_eq!(pool(&mut b, "s", 2, 2, [0, 0], 0), "?");

    // ConvTranspose: stride * (in - 1) + output_padding + extent - pads.
    let xt = b.opaque(f32_of(&["1", "8", "4", "seq"]));
    let wt = b.opaque(f32_of(&["8", "2", "3", "3"]));
    let y = b.op(
        Opcode::ConvTranspose,
        vec![xt, wt],
        attrs(&[
            ("strides", ints(&[2, 2])),
            ("pads", ints(&[1, 1, 1, 1])),
            ("output_padding", ints(&[1, 1])),
            ("group", int(2)),
        ]),
    );
    assert_eq!(b.dims(y), ["1", "4", "8", "2*seq"]);
    let y = b.op(
        Opcode::ConvTranspose,
        vec![xt, wt],
        attrs(&[("output_shape", ints(&[9, 10]))]),
    );
    assert_eq!(b.dims(y), ["1", "2", "9", "10"]);
}

#[test]
fn split_evenly_unevenly_and_by_sizes() {
    let mut b = Builder::new(vec![f32_of(&["7", "4"]), f32_of(&["2*seq", "4"])]);
    let (x, xs) = (b.arg(0), b.arg(1));
    let parts = b.ops(Opcode::Split, vec![x], attrs(&[("num_outputs", int(3))]), 3);
    let sizes: Vec<Vec<String>> = parts.iter().map(|&p| b.dims(p)).collect();
    assert_eq!(sizes, [["3", "4"], ["3", "4"], ["1", "4"]]);
    let split = b.ints(&[2, 5]);
    let parts = b.ops(Opcode::Split, vec![x, split], vec![], 2);
    assert_eq!(b.dims(parts[1]), ["5", "4"]);
    let halves = b.ops(Opcode::Split, vec![xs], vec![], 2);
    assert_eq!(b.dims(halves[0]), ["seq", "4"]);
    let quarters = b.ops(Opcode::Split, vec![xs], vec![], 4);
    assert_eq!(b.dims(quarters[3]), ["?", "4"]);
    let bad = b.ints(&[2, 4]);
    assert_eq!(
        b.try_op(Opcode::Split, vec![x, bad], vec![], 2),
        Err("`split` [2, 4] does not add up to the size 7 of axis 0".to_string())
    );
    assert_eq!(
        b.try_op(Opcode::Split, vec![x], attrs(&[("num_outputs", int(2))]), 3),
        Err("`num_outputs` is 2 but the op has 3 results".to_string())
    );
    // Splitting a known shape vector folds.
    let shape = b.op(Opcode::Shape, vec![xs], vec![]);
    let ones = b.ints(&[1, 1]);
    let pieces = b.ops(Opcode::Split, vec![shape, ones], vec![], 2);
    assert_eq!(b.known(pieces[0]).as_deref(), Some("[2*seq]"));
    assert_eq!(b.known(pieces[1]).as_deref(), Some("[4]"));
}

#[test]
fn concat_adds_symbolic_dims() {
    let mut b = Builder::new(vec![
        f32_of(&["batch", "12", "past", "64"]),
        f32_of(&["batch", "12", "seq", "64"]),
        f32_of(&["", "12", "1", "64"]),
    ]);
    let (past, cur, one) = (b.arg(0), b.arg(1), b.arg(2));
    let kv = b.op(Opcode::Concat, vec![past, cur], attrs(&[("axis", int(-2))]));
    assert_eq!(b.dims(kv), ["batch", "12", "past+seq", "64"]);
    let kv = b.op(Opcode::Concat, vec![kv, one], attrs(&[("axis", int(2))]));
    assert_eq!(b.dims(kv), ["batch", "12", "past+seq+1", "64"]);
    let bad = b.ints(&[1]);
    assert_eq!(
        b.error(Opcode::Concat, vec![past, bad], attrs(&[("axis", int(0))])),
        "input #1 has rank 1 but input #0 has rank 4"
    );
}

#[test]
fn range_lengths() {
    let mut b = Builder::new(vec![
        f32_of(&["batch", "seq"]),
        TensorType::with_shape(ElemType::I64, &[]),
    ]);
    let (x, unknown) = (b.arg(0), b.arg(1));
    let (zero, ten, three) = (b.int(0), b.int(10), b.int(3));
    let r = b.op(Opcode::Range, vec![zero, ten, three], vec![]);
    assert_eq!(b.dims(r), ["4"]);
    assert_eq!(b.known(r).as_deref(), Some("[0, 3, 6, 9]"));
    let minus_two = b.int(-2);
    let r = b.op(Opcode::Range, vec![ten, zero, minus_two], vec![]);
    assert_eq!(b.dims(r), ["5"]);
    let r = b.op(Opcode::Range, vec![ten, zero, three], vec![]);
    assert_eq!(b.dims(r), ["0"]);
    // Range(0, seq, 1) from the shape: seq positions.
    let shape = b.op(Opcode::Shape, vec![x], vec![]);
    let one = b.int(1);
    let seq = b.op(Opcode::Gather, vec![shape, one], vec![]);
    let r = b.op(Opcode::Range, vec![zero, seq, one], vec![]);
    assert_eq!(b.dims(r), ["seq"]);
    // A start that may exceed the limit gives an unknown length.
    let r = b.op(Opcode::Range, vec![ten, seq, one], vec![]);
    assert_eq!(b.dims(r), ["?"]);
    let (f0, f1, quarter) = (
        b.floats(&[], &[0.0]),
        b.floats(&[], &[1.0]),
        b.floats(&[], &[0.25]),
    );
    let r = b.op(Opcode::Range, vec![f0, f1, quarter], vec![]);
    assert_eq!(b.ty(r), f32_of(&["4"]));
    let r = b.op(Opcode::Range, vec![zero, unknown, one], vec![]);
    assert_eq!(b.dims(r), ["?"]);
    let r = b.error(Opcode::Range, vec![zero, ten, zero], vec![]);
    assert_eq!(r, "delta is 0");
}

#[test]
fn torchscript_pad_chain_folds() {
    // How the TorchScript exporter writes `F.pad(x, [0, 1, 0, 1])`'s `pads`: the torch pads
    // (last axis first, begin/end pairs) padded with zeros to 2 * rank, reshaped to pairs,
    // reversed by a Slice with step -1, transposed and flattened into ONNX's order.
    let mut b = Builder::new(vec![f32_of(&["2", "3"])]);
    let torch_pads = b.ints(&[0, 1, 0, 1]);
    let four = b.ints(&[4]);
    let zeros = b.op(Opcode::ConstantOfShape, vec![four], vec![]);
    let zeros = b.op(
        Opcode::Cast,
        vec![zeros],
        attrs(&[("to", Attribute::ElemType(ElemType::I64))]),
    );
    let all = b.op(
        Opcode::Concat,
        vec![torch_pads, zeros],
        attrs(&[("axis", int(0))]),
    );
    let pairs_shape = b.ints(&[-1, 2]);
    let pairs = b.op(Opcode::Reshape, vec![all, pairs_shape], vec![]);
    let (start, end, axis, step) = (
        b.ints(&[-1]),
        b.ints(&[i64::MIN + 1]),
        b.ints(&[0]),
        b.ints(&[-1]),
    );
    let reversed = b.op(Opcode::Slice, vec![pairs, start, end, axis, step], vec![]);
    assert_eq!(
        b.known(reversed).as_deref(),
        Some("[0, 0, 0, 0, 0, 1, 0, 1]")
    );
    let transposed = b.op(
        Opcode::Transpose,
        vec![reversed],
        attrs(&[("perm", ints(&[1, 0]))]),
    );
    assert_eq!(
        b.known(transposed).as_deref(),
        Some("[0, 0, 0, 0, 0, 0, 1, 1]")
    );
    let flat_shape = b.ints(&[-1]);
    let onnx_pads = b.op(Opcode::Reshape, vec![transposed, flat_shape], vec![]);
    assert_eq!(
        b.known(onnx_pads).as_deref(),
        Some("[0, 0, 0, 0, 0, 0, 1, 1]")
    );
    // Slices along several axes, and a default perm (reversed axes).
    let eight = b.ints(&[1, 2, 3, 4, 5, 6, 7, 8]);
    let two_by_four = b.ints(&[2, 4]);
    let m = b.op(Opcode::Reshape, vec![eight, two_by_four], vec![]);
    let (starts, ends, axes) = (b.ints(&[1, 3]), b.ints(&[2, 0]), b.ints(&[0, 1]));
    let steps = b.ints(&[1, -2]);
    let corner = b.op(Opcode::Slice, vec![m, starts, ends, axes, steps], vec![]);
    assert_eq!(b.dims(corner), ["1", "2"]);
    assert_eq!(b.known(corner).as_deref(), Some("[8, 6]"));
    let t = b.op(Opcode::Transpose, vec![m], vec![]);
    assert_eq!(b.dims(t), ["4", "2"]);
    assert_eq!(b.known(t).as_deref(), Some("[1, 5, 2, 6, 3, 7, 4, 8]"));
}

#[test]
fn constant_of_shape_expand_and_where() {
    let mut b = Builder::new(vec![f32_of(&["batch", "seq", "768"]), f32_of(&["3", "1"])]);
    let (x, small) = (b.arg(0), b.arg(1));
    let shape = b.op(Opcode::Shape, vec![x], vec![]);
    let zeros = b.op(Opcode::ConstantOfShape, vec![shape], vec![]);
    assert_eq!(b.ty(zeros), f32_of(&["batch", "seq", "768"]));
    // ConstantOfShape(value = 1 : i64) of a small shape is a known value.
    let fill = {
        let id = b
            .weights
            .insert(
                "one",
                TensorType::with_shape(ElemType::I64, &[1]),
                WeightBytes::Owned(Arc::from(1i64.to_le_bytes().to_vec())),
            )
            .expect("fresh name");
        Attribute::Weight(id)
    };
    let three = b.ints(&[3]);
    let ones = b.op(
        Opcode::ConstantOfShape,
        vec![three],
        attrs(&[("value", fill)]),
    );
    assert_eq!(b.ty(ones).elem, ElemType::I64);
    assert_eq!(b.known(ones).as_deref(), Some("[1, 1, 1]"));

    let target = b.ints(&[2, 1, 4]);
    let e = b.op(Opcode::Expand, vec![small, target], vec![]);
    assert_eq!(b.dims(e), ["2", "3", "4"]);
    let bad = b.ints(&[2, 5]);
    assert!(b
        .error(Opcode::Expand, vec![small, bad], vec![])
        .contains("dims 3 and 2 do not broadcast"));

    // The exporter's pattern: Where(Equal(shape, -1), ones, shape) keeps the shape, since dims
    // are never -1; Expand to it gives x's shape.
    let minus_one = b.int(-1);
    let is_minus_one = b.op(Opcode::Equal, vec![shape, minus_one], vec![]);
    assert_eq!(b.known(is_minus_one).as_deref(), Some("[0, 0, 0]"));
    let where_ = b.op(Opcode::Where, vec![is_minus_one, ones, shape], vec![]);
    assert_eq!(b.known(where_).as_deref(), Some("[batch, seq, 768]"));
    let scalar = b.floats(&[], &[0.5]);
    let e = b.op(Opcode::Expand, vec![scalar, where_], vec![]);
    assert_eq!(b.dims(e), ["batch", "seq", "768"]);

    // Where broadcasts all three operands.
    let cond = b.opaque(TensorType::new(ElemType::Bool, dims(&["1", "seq"])));
    let lhs = b.opaque(f32_of(&["batch", "1"]));
    let rhs = b.floats(&[1], &[0.0]);
    let w = b.op(Opcode::Where, vec![cond, lhs, rhs], vec![]);
    assert_eq!(b.ty(w), f32_of(&["batch", "seq"]));
}

#[test]
fn reductions_with_keepdims_and_axes() {
    let mut b = Builder::new(vec![
        f32_of(&["batch", "seq", "768"]),
        TensorType::with_shape(ElemType::I64, &[1]),
    ]);
    let (x, unknown_axes) = (b.arg(0), b.arg(1));
    let last = b.ints(&[-1]);
    let r = b.op(Opcode::ReduceMean, vec![x, last], vec![]);
    assert_eq!(b.dims(r), ["batch", "seq", "1"]);
    let r = b.op(
        Opcode::ReduceMean,
        vec![x, last],
        attrs(&[("keepdims", int(0))]),
    );
    assert_eq!(b.dims(r), ["batch", "seq"]);
    // Opset 13 spells the axes as an attribute.
    let r = b.op(
        Opcode::ReduceMean,
        vec![x],
        attrs(&[("axes", ints(&[0, 2])), ("keepdims", int(0))]),
    );
    assert_eq!(b.dims(r), ["seq"]);
    let r = b.op(Opcode::ReduceSum, vec![x], vec![]);
    assert_eq!(b.dims(r), ["1", "1", "1"]);
    let r = b.op(
        Opcode::ReduceSum,
        vec![x],
        attrs(&[("noop_with_empty_axes", int(1))]),
    );
    assert_eq!(b.dims(r), ["batch", "seq", "768"]);
    let r = b.op(Opcode::ReduceMax, vec![x, unknown_axes], vec![]);
    assert_eq!(b.dims(r), ["?", "?", "?"]);
    let r = b.op(
        Opcode::ReduceMax,
        vec![x, unknown_axes],
        attrs(&[("keepdims", int(0))]),
    );
    assert_eq!(b.dims(r), ["?", "?"]);
    let twice = b.ints(&[1, -2]);
    assert_eq!(
        b.error(Opcode::ReduceMean, vec![x, twice], vec![]),
        "axis -2 is listed twice in [1, -2]"
    );
    // ReduceProd of a shape vector folds to the element count.
    let shape = b.op(Opcode::Shape, vec![x], vec![]);
    let count = b.op(
        Opcode::ReduceProd,
        vec![shape],
        attrs(&[("keepdims", int(0))]),
    );
    assert_eq!(b.known(count).as_deref(), Some("[768*batch*seq]"));
    let a = b.op(
        Opcode::ArgMax,
        vec![x],
        attrs(&[("axis", int(-1)), ("keepdims", int(0))]),
    );
    assert_eq!(
        b.ty(a),
        TensorType::new(ElemType::I64, dims(&["batch", "seq"]))
    );
}

#[test]
fn other_ops_follow_the_spec() {
    let mut b = Builder::new(vec![
        f32_of(&["batch", "seq", "768"]),
        f32_of(&["2", "3"]),
        f32_of(&["3", "4"]),
        f32_of(&["1", "64", "7", "7"]),
    ]);
    let (x, a, m, img) = (b.arg(0), b.arg(1), b.arg(2), b.arg(3));
    let scale = b.floats(&[768], &[1.0; 768]);
    let ln = b.ops(
        Opcode::LayerNormalization,
        vec![x, scale],
        attrs(&[("axis", int(-1))]),
        3,
    );
    assert_eq!(b.dims(ln[0]), ["batch", "seq", "768"]);
    assert_eq!(b.dims(ln[1]), ["batch", "seq", "1"]);
    let g = b.op(Opcode::Gemm, vec![a, m], vec![]);
    assert_eq!(b.dims(g), ["2", "4"]);
    let g = b.op(
        Opcode::Gemm,
        vec![m, a],
        attrs(&[("transA", int(1)), ("transB", int(1))]),
    );
    assert_eq!(b.dims(g), ["4", "2"]);
    let gap = b.op(Opcode::GlobalAveragePool, vec![img], vec![]);
    assert_eq!(b.dims(gap), ["1", "64", "1", "1"]);
    let flat = b.op(Opcode::Flatten, vec![x], attrs(&[("axis", int(2))]));
    assert_eq!(b.dims(flat), ["batch*seq", "768"]);
    let t = b.op(
        Opcode::Transpose,
        vec![x],
        attrs(&[("perm", ints(&[0, 2, 1]))]),
    );
    assert_eq!(b.dims(t), ["batch", "768", "seq"]);
    let shape = b.op(
        Opcode::Shape,
        vec![x],
        attrs(&[("start", int(-2)), ("end", int(100))]),
    );
    assert_eq!(b.known(shape).as_deref(), Some("[seq, 768]"));
    let size = b.op(Opcode::Size, vec![a], vec![]);
    assert_eq!(b.known(size).as_deref(), Some("[6]"));
    let k = b.ints(&[5]);
    let top = b.ops(Opcode::TopK, vec![x, k], vec![], 2);
    assert_eq!(b.dims(top[0]), ["batch", "seq", "5"]);
    assert_eq!(b.ty(top[1]).elem, ElemType::I64);
    let pads = b.ints(&[0, 1, 0, 0, 2, 0]);
    let p = b.op(Opcode::Pad, vec![x, pads], vec![]);
    assert_eq!(b.dims(p), ["batch", "seq+3", "768"]);
    let crop = b.ints(&[-1, 0, -1, 0]);
    let p = b.op(Opcode::Pad, vec![a, crop], vec![]);
    assert_eq!(b.dims(p), ["0", "3"]);
    let repeats = b.ints(&[2, 1, 3]);
    let t = b.op(Opcode::Tile, vec![x, repeats], vec![]);
    assert_eq!(b.dims(t), ["2*batch", "seq", "2304"]);
    let scales = b.floats(&[4], &[1.0, 1.0, 2.0, 0.5]);
    let empty = b.floats(&[0], &[]);
    let r = b.op(Opcode::Resize, vec![img, empty, scales], vec![]);
    assert_eq!(b.dims(r), ["1", "64", "14", "3"]);
    let sizes = b.ints(&[1, 64, 10, 11]);
    let r = b.op(Opcode::Resize, vec![img, empty, empty, sizes], vec![]);
    assert_eq!(b.dims(r), ["1", "64", "10", "11"]);
    let u = b.ints(&[0, 3]);
    let un = b.op(Opcode::Unsqueeze, vec![a, u], vec![]);
    assert_eq!(b.dims(un), ["1", "2", "3", "1"]);
    let squeezed = b.op(Opcode::Squeeze, vec![un], vec![]);
    assert_eq!(b.dims(squeezed), ["2", "3"]);
    let bad_axis = b.ints(&[1]);
    assert_eq!(
        b.error(Opcode::Squeeze, vec![un, bad_axis], vec![]),
        "cannot squeeze axis 1: its size is 2, not 1"
    );
    let idx = b.ints(&[0, 2, 1, 2]);
    let gathered = b.op(Opcode::Gather, vec![m, idx], attrs(&[("axis", int(1))]));
    assert_eq!(b.dims(gathered), ["3", "4"]);
    let far = b.ints(&[7]);
    assert_eq!(
        b.error(Opcode::Gather, vec![m, far], vec![]),
        "index 7 is out of range for axis 0 of size 3"
    );
    let q = b.op(Opcode::QuantizeLinear, vec![a, scale], vec![]);
    assert_eq!(b.ty(q).elem, ElemType::U8);
    let zp = b.weight(TensorType::with_shape(ElemType::I8, &[]), vec![0]);
    let s1 = b.floats(&[], &[0.1]);
    let q = b.op(Opcode::QuantizeLinear, vec![a, s1, zp], vec![]);
    assert_eq!(b.ty(q), TensorType::new(ElemType::I8, dims(&["2", "3"])));
    let dq = b.op(Opcode::DequantizeLinear, vec![q, s1, zp], vec![]);
    assert_eq!(b.ty(dq), f32_of(&["2", "3"]));
    let cast = b.op(
        Opcode::Cast,
        vec![shape],
        attrs(&[("to", Attribute::ElemType(ElemType::I32))]),
    );
    assert_eq!(b.known(cast).as_deref(), Some("[seq, 768]"));
    assert_eq!(
        b.error(Opcode::MatMul, vec![a, a], vec![]),
        "MatMul inner dims differ: 3 and 2"
    );
}

#[test]
fn weights_decode_little_endian() {
    let mut b = Builder::new(vec![]);
    let bytes = [-3i32, 7].iter().flat_map(|v| v.to_le_bytes()).collect();
    let w = b.weight(TensorType::with_shape(ElemType::I32, &[2]), bytes);
    assert_eq!(b.known(w).as_deref(), Some("[-3, 7]"));
    let h = b.weight(
        TensorType::with_shape(ElemType::F16, &[1]),
        vec![0x00, 0x3c],
    );
    assert_eq!(b.known(h).as_deref(), Some("[1.0]"));
    let big = b.weight(TensorType::with_shape(ElemType::U8, &[2048]), vec![0; 2048]);
    assert_eq!(b.known(big), None);
}

/// `func @f(%x: [batch, seq, 768], %y: [?, ?]) -> ?`: y = Reshape(Relu(x), Shape(x)[:2] ++ [768])
/// with result types written as unknown, the way a lit-test writes them.
fn module_with_unknown_types() -> Module {
    let x_ty: Type = f32_of(&["batch", "seq", "768"]).into();
    let unknown2: Type = f32_of(&["", "", ""]).into();
    let mut func = Function::new("f", vec![x_ty], vec![unknown2.clone()]);
    let entry = func.entry_block();
    let x = func.args()[0];
    let relu = func.build_op(entry, Opcode::Relu, vec![x], vec![unknown2.clone()], []);
    let relu = func.op(relu).results[0];
    let shape = func.build_op(
        entry,
        Opcode::Shape,
        vec![x],
        vec![TensorType::with_shape(ElemType::I64, &[3]).into()],
        [],
    );
    let shape = func.op(shape).results[0];
    let reshape = func.build_op(
        entry,
        Opcode::Reshape,
        vec![relu, shape],
        vec![unknown2],
        [],
    );
    let reshape = func.op(reshape).results[0];
    func.build_op(entry, Opcode::Return, vec![reshape], vec![], []);
    let mut module = Module::new();
    module.add_function(func);
    module
}

#[test]
fn infer_module_refines_types_and_signatures() {
    let mut module = module_with_unknown_types();
    assert_eq!(
        unbound_symbols(&module),
        ["batch".to_string(), "seq".to_string()]
    );
    infer_module(&mut module, &HashMap::new()).expect("infers");
    crate::verify_module(&module).expect("stays valid");
    let func = module.function(module.func_ids()[0]);
    assert_eq!(
        func.result_types()[0].to_string(),
        r#"tensor<?x?x768xf32, #memc.dims<["batch", "seq"]>>"#
    );

    let mut module = module_with_unknown_types();
    let bindings = HashMap::from([("batch".to_string(), 4)]);
    infer_module(&mut module, &bindings).expect("infers");
    let func = module.function(module.func_ids()[0]);
    assert_eq!(
        func.result_types()[0].to_string(),
        r#"tensor<4x?x768xf32, #memc.dims<["seq"]>>"#
    );
    assert_eq!(unbound_symbols(&module), ["seq".to_string()]);
}

#[test]
fn infer_module_reports_conflicts_at_the_op() {
    // Relu(x) is written as [?, ?], so the verifier cannot see that MatMul's inner dims are 3
    // and 4; inference refines Relu(x) to [2, 3] and reports the MatMul.
    let x_ty: Type = f32_of(&["2", "3"]).into();
    let w: Type = f32_of(&["4", "5"]).into();
    let mut func = Function::new("g", vec![x_ty.clone(), w], vec![x_ty.clone()]);
    let entry = func.entry_block();
    let (x, other) = (func.args()[0], func.args()[1]);
    let unknown: Type = f32_of(&["", ""]).into();
    let relu = func.build_op(entry, Opcode::Relu, vec![x], vec![unknown], []);
    let relu = func.op(relu).results[0];
    let mm = func.build_op(
        entry,
        Opcode::MatMul,
        vec![relu, other],
        vec![x_ty.clone()],
        [],
    );
    func.op_mut(mm).loc = Some("layer0/matmul".to_string());
    func.build_op(entry, Opcode::Return, vec![x], vec![], []);
    let mut module = Module::new();
    module.add_function(func);
    let errors = infer_module(&mut module, &HashMap::new()).expect_err("inner dims differ");
    assert_eq!(errors.len(), 1);
    assert_eq!(
        errors[0].message,
        "`onnx.MatMul`: MatMul inner dims differ: 3 and 4"
    );
    assert!(errors[0].notes[0].contains("layer0/matmul"));
}

#[test]
fn if_branches_that_refine_differently_fall_back_to_the_if_type() {
    let cond: Type = TensorType::new(ElemType::Bool, vec![]).into();
    let a: Type = f32_of(&["2"]).into();
    let b_ty: Type = f32_of(&["3"]).into();
    let unknown: Type = f32_of(&[""]).into();
    let mut func = Function::new("h", vec![cond, a, b_ty], vec![unknown.clone()]);
    let entry = func.entry_block();
    let (c, x, y) = (func.args()[0], func.args()[1], func.args()[2]);
    let if_op = func.build_op(entry, Opcode::If, vec![c], vec![unknown.clone()], []);
    for value in [x, y] {
        let region = func.add_region(if_op);
        let block = func.append_block(region, vec![]);
        let neg = func.build_op(block, Opcode::Neg, vec![value], vec![unknown.clone()], []);
        let neg = func.op(neg).results[0];
        func.build_op(block, Opcode::Yield, vec![neg], vec![], []);
    }
    let result = func.op(if_op).results[0];
    func.build_op(entry, Opcode::Return, vec![result], vec![], []);
    let mut module = Module::new();
    module.add_function(func);
    crate::verify_module(&module).expect("valid before");
    infer_module(&mut module, &HashMap::new()).expect("infers");
    crate::verify_module(&module).expect("valid after");
    let func = module.function(module.func_ids()[0]);
    assert_eq!(func.result_types()[0].to_string(), "tensor<?xf32>");
}

/// Every op with every operand shape from a hostile list, with hostile attributes: inference
/// returns, it never panics.
#[test]
fn hostile_input_never_panics() {
    let huge = u64::MAX / 2;
    let operand_sets: Vec<Vec<TensorType>> = vec![
        vec![],
        vec![TensorType::with_shape(ElemType::F32, &[])],
        vec![TensorType::with_shape(ElemType::I64, &[]); 5],
        vec![TensorType::with_shape(ElemType::F32, &[huge, huge, 3]); 3],
        vec![TensorType::with_shape(ElemType::I64, &[0]); 4],
        vec![
            TensorType::with_shape(ElemType::F32, &[1, 3, 5, 5]),
            TensorType::with_shape(ElemType::F32, &[2, 3, 9, 9]),
            TensorType::with_shape(ElemType::I64, &[4]),
        ],
        vec![TensorType::new(ElemType::F32, dims(&["a", "", "a*b"]))],
        vec![TensorType::with_shape(ElemType::I64, &[2000000]); 2],
    ];
    let attr_sets: Vec<Vec<(&'static str, Attribute)>> = vec![
        vec![],
        attrs(&[
            ("axis", int(i64::MIN)),
            ("perm", ints(&[5, -1])),
            ("kernel_shape", ints(&[-1, 0])),
            ("strides", ints(&[0])),
            ("pads", ints(&[-5, i64::MAX])),
            ("dilations", ints(&[i64::MAX, i64::MAX])),
            ("group", int(0)),
            ("start", int(i64::MIN)),
            ("end", int(i64::MAX)),
            ("num_outputs", int(-3)),
            ("axes", ints(&[i64::MAX])),
            ("output_shape", ints(&[-1])),
            ("stash_type", int(99)),
        ]),
        attrs(&[
            ("axis", int(i64::MAX)),
            ("kernel_shape", ints(&[i64::MAX, i64::MAX])),
            ("strides", ints(&[i64::MAX, i64::MAX])),
            ("pads", ints(&[i64::MAX, i64::MAX, i64::MAX, i64::MAX])),
            ("auto_pad", string("SAME_LOWER")),
            ("ceil_mode", int(1)),
            ("keepdims", int(0)),
            ("to", int(3)),
            ("value", string("oops")),
            ("axes", string("oops")),
        ]),
    ];
    for &opcode in Opcode::ALL {
        for operands in &operand_sets {
            for attr_set in &attr_sets {
                for n_results in [0, 1, 3] {
                    let mut b = Builder::new(operands.clone());
                    let args = b.func.args().to_vec();
                    let _ = b.try_op(opcode, args, attr_set.clone(), n_results);
                    // Again with known operand values: a huge constant and negative entries.
                    let mut b = Builder::new(vec![]);
                    let values = [
                        b.ints(&[i64::MAX, -1, 0]),
                        b.ints(&[i64::MIN]),
                        b.int(-7),
                        b.ints(&[]),
                    ];
                    let _ = b.try_op(opcode, values.to_vec(), attr_set.clone(), n_results);
                }
            }
        }
    }
}

#[test]
fn invalid_handles_are_errors() {
    let mut b = Builder::new(vec![]);
    let other = {
        let mut f = Function::new("other", vec![], vec![]);
        let entry = f.entry_block();
        for _ in 0..5 {
            f.build_op(entry, Opcode::Return, vec![], vec![], []);
        }
        f.layout().block_ops(entry)[4]
    };
    assert!(b
        .infer
        .infer_op(&b.func, &b.weights, other)
        .expect_err("not an op of f")
        .contains("is not an op"));
}
