//! memc-ir: the SSA intermediate representation of memc.
//!
//! - [`entity`]: typed `u32` handles (`OpId`, `ValueId`, ...) into per-function arenas.
//! - [`types`], [`attr`]: ranked tensor types with named symbolic dims; attributes.
//! - [`minifloat`], [`packing`]: the narrow float formats' conversions; ONNX's packing of
//!   sub-byte elements.
//! - [`ops`]: the op table, where every op is declared once.
//! - [`function`] holds [`Function`] (data-flow graph plus a separate [`Layout`] for program order)
//!   and [`Module`] (functions plus the [`WeightStore`]).
//! - [`printer`], [`parser`]: MLIR's generic op syntax, round-tripping exactly
//!   (`print(parse(text)) == text` for text memc printed); upstream
//!   `mlir-opt --allow-unregistered-dialect` parses what memc prints.
//! - [`verifier`]: the invariants every pass may rely on.
//! - [`infer`]: shape inference, op by op (for the importer) or over a whole module.
//! - [`diag`]: errors with locations, rendered with ariadne.

pub mod attr;
pub mod diag;
pub mod dim;
pub mod entity;
pub mod function;
pub mod infer;
pub mod minifloat;
pub mod onnx;
pub mod ops;
pub mod packing;
pub mod parser;
pub mod printer;
pub mod state;
pub mod target;
pub mod types;
pub mod verifier;
pub mod weights;

pub use attr::{AttrDict, AttrKind, Attribute};
pub use diag::{Diagnostic, Span};
pub use entity::{BlockId, FuncId, OpId, RegionId, ValueId, WeightId};
pub use function::{Function, Layout, Module, OpData, ValueDef};
pub use infer::{infer_module, unbound_symbols, KnownValue, ShapeInference, SymInt};
pub use ops::Opcode;
pub use parser::parse_module;
pub use printer::print_module;
pub use types::{BoundedLayout, Dim, ElemType, TensorType, Type};
pub use verifier::verify_module;

pub use weights::{Weight, WeightBytes, WeightStore};
