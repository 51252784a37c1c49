//! Shared pieces of the runtime's tests: hand-written programs, their weights, scratch paths,
//! and a plan file assembler that follows the format's documentation byte by byte (so the
//! tests also check that the documentation is right).

#![allow(dead_code)]

use memc_codegen::kernel::{
    BinaryOp, Contract, Inst, InstKind, LoopKernel, MatView, Region, Stage, Store, View,
};
use memc_codegen::program::{IoTensor, Step, WeightSlot};
use memc_codegen::{Kernel, KernelBody, Program, Scalar};
use memc_ir::{ElemType, TensorType, WeightBytes, WeightStore};
use std::path::PathBuf;
use std::sync::Arc;

/// A fresh, empty directory for one test.
pub fn scratch_dir(test: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("memc-runtime-tests")
        .join(test);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("the target directory is writable");
    dir
}

pub fn view(region: Region, elem: Scalar, byte_offset: i64, strides: Vec<i64>) -> View {
    View {
        region,
        elem,
        byte_offset,
        strides,
        guards: Vec::new(),
        pad: 0,
    }
}

pub fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// `out[i] = a[i] <op> b[i]` over `n` f32 elements.
pub fn binary_kernel(name: &str, op: BinaryOp, n: u64, a: View, b: View, out: View) -> Kernel {
    Kernel {
        name: name.to_string(),
        body: KernelBody::Loop(LoopKernel {
            outer: vec![n],
            inner: vec![],
            views: vec![a, b, out],
            stages: vec![Stage::Map {
                insts: vec![
                    Inst {
                        ty: Scalar::F32,
                        kind: InstKind::Load { view: 0 },
                    },
                    Inst {
                        ty: Scalar::F32,
                        kind: InstKind::Load { view: 1 },
                    },
                    Inst {
                        ty: Scalar::F32,
                        kind: InstKind::Binary { op, lhs: 0, rhs: 1 },
                    },
                ],
                stores: vec![Store::new(2, 2)],
            }],
        }),
    }
}

pub const BIAS: [f32; 4] = [10.0, 20.0, 30.0, 40.0];
pub const MATRIX: [f32; 8] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];

/// A two-step program over `x: f32[4]`:
///
/// - `add`: `sum = x + bias` (bias a weight);
/// - `matmul`: `y = sum[1x4] @ matrix[4x2]` (a weight), written over `x`, which is dead;
///
/// with outputs `y: f32[1, 2]` and `bias: f32[4]`, a constant output read from the weights.
pub fn add_matmul_program() -> (Program, WeightStore) {
    let arena = |offset| view(Region::Arena, Scalar::F32, offset, vec![1]);
    let add = binary_kernel(
        "Add add #0",
        BinaryOp::Add,
        4,
        arena(0),
        view(Region::Weights, Scalar::F32, 0, vec![1]),
        arena(64),
    );
    let matmul = Kernel {
        name: "MatMul matmul #0".into(),
        body: KernelBody::Contract(Contract {
            elem: Scalar::F32,
            batch: vec![],
            m: 1,
            n: 2,
            k: 4,
            a: MatView {
                region: Region::Arena,
                byte_offset: 64,
                batch_strides: vec![],
                row_stride: 4,
                col_stride: 1,
            },
            b: MatView {
                region: Region::Weights,
                byte_offset: 64,
                batch_strides: vec![],
                row_stride: 2,
                col_stride: 1,
            }
            .into(),
            c: MatView {
                region: Region::Arena,
                byte_offset: 0,
                batch_strides: vec![],
                row_stride: 2,
                col_stride: 1,
            },
            alpha: 1f64.to_bits(),
            accumulate: false,
            pack: None,
            a_packed: None,
            b_packed: None,
            transposed: false,
            winograd: None,
        }),
    };
    let program = Program {
        arena_size: 128,
        weights_size: 96,
        state_size: 0,
        inputs: vec![IoTensor {
            name: "x".into(),
            elem: Scalar::F32,
            shape: vec![4],
            region: Region::Arena,
            byte_offset: 0,
            extent: None,
        }],
        outputs: vec![
            IoTensor {
                name: "y".into(),
                elem: Scalar::F32,
                shape: vec![1, 2],
                region: Region::Arena,
                byte_offset: 0,
                extent: None,
            },
            IoTensor {
                name: "bias".into(),
                elem: Scalar::F32,
                shape: vec![4],
                region: Region::Weights,
                byte_offset: 0,
                extent: None,
            },
        ],
        weights: vec![
            // Deliberately out of offset order: the writer sorts slots itself.
            WeightSlot {
                name: "matrix".into(),
                byte_offset: 64,
                byte_size: 32,
                pack: None,
                unpacked: None,
                operand: None,
            },
            WeightSlot {
                name: "bias".into(),
                byte_offset: 0,
                byte_size: 16,
                pack: None,
                unpacked: None,
                operand: None,
            },
        ],
        state: vec![],
        steps: vec![
            Step {
                op: "onnx.Add \"add\"".into(),
                kernels: vec![add],
            },
            Step {
                op: "onnx.Reshape \"flat\"".into(),
                kernels: vec![],
            },
            Step {
                op: "onnx.MatMul \"matmul\"".into(),
                kernels: vec![matmul],
            },
        ],
    };
    let mut store = WeightStore::new();
    store
        .insert(
            "bias",
            TensorType::with_shape(ElemType::F32, &[4]),
            WeightBytes::Owned(Arc::from(f32_bytes(&BIAS))),
        )
        .unwrap();
    store
        .insert(
            "matrix",
            TensorType::with_shape(ElemType::F32, &[4, 2]),
            WeightBytes::Owned(Arc::from(f32_bytes(&MATRIX))),
        )
        .unwrap();
    (program, store)
}

/// What `add_matmul_program` computes for `x`.
pub fn add_matmul_reference(x: &[f32; 4]) -> [f32; 2] {
    let sum: Vec<f32> = x.iter().zip(BIAS).map(|(a, b)| a + b).collect();
    let mut y = [0f32; 2];
    for (j, y) in y.iter_mut().enumerate() {
        *y = (0..4).map(|k| sum[k] * MATRIX[k * 2 + j]).sum();
    }
    y
}

/// The bytes of a plan file with these parts, laid out as `plan`'s module doc says.
pub fn assemble(version: u32, metadata: &[u8], weights: &[u8], weights_crc: u32) -> Vec<u8> {
    let weights_offset = (64 + metadata.len() as u64).next_multiple_of(4096);
    let mut file = Vec::new();
    file.extend_from_slice(b"MEMCPLAN");
    file.extend_from_slice(&version.to_le_bytes());
    file.extend_from_slice(&64u32.to_le_bytes());
    file.extend_from_slice(&64u64.to_le_bytes());
    file.extend_from_slice(&(metadata.len() as u64).to_le_bytes());
    file.extend_from_slice(&weights_offset.to_le_bytes());
    file.extend_from_slice(&(weights.len() as u64).to_le_bytes());
    file.extend_from_slice(&crc32fast::hash(metadata).to_le_bytes());
    file.extend_from_slice(&weights_crc.to_le_bytes());
    file.extend_from_slice(&0u32.to_le_bytes());
    let header_crc = crc32fast::hash(&file);
    file.extend_from_slice(&header_crc.to_le_bytes());
    assert_eq!(file.len(), 64);
    file.extend_from_slice(metadata);
    file.resize(weights_offset as usize, 0);
    file.extend_from_slice(weights);
    file
}

/// Rewrites the header checksum after a test changed header bytes 0..60.
pub fn fix_header_crc(file: &mut [u8]) {
    let crc = crc32fast::hash(&file[0..60]);
    file[60..64].copy_from_slice(&crc.to_le_bytes());
}
