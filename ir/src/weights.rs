//! The weight store: where a module's constant tensors live, outside the IR.
//!
//! An IR attribute names a weight by [`WeightId`]; the bytes stay where they were loaded. This
//! The ONNX importer backs it by memory maps of the model file and its external data
//! ([`WeightBytes::Mapped`]); small tensors stored as typed values are packed into owned memory
//! ([`WeightBytes::Owned`]). A weight parsed from text has no bytes
//! ([`WeightBytes::Absent`]): the text format refers to weights by name only.

use crate::{TensorType, WeightId};
use cranelift_entity::PrimaryMap;
use std::collections::HashMap;
use std::sync::Arc;

/// Where a weight's bytes are.
#[derive(Clone, Debug)]
pub enum WeightBytes {
    /// The bytes are not loaded (IR parsed from text refers to weights by name).
    Absent,
    /// The bytes are owned in memory, shared between clones of the store.
    Owned(Arc<[u8]>),
    /// The bytes are a slice of a memory-mapped file (the model or its external data); the map
    /// lives as long as any slice of it.
    Mapped(bytes::Bytes),
}

#[derive(Clone, Debug)]
pub struct Weight {
    name: String,
    ty: TensorType,
    bytes: WeightBytes,
}

impl Weight {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn ty(&self) -> &TensorType {
        &self.ty
    }

    /// Where the weight's bytes are.
    pub fn data(&self) -> &WeightBytes {
        &self.bytes
    }

    /// The weight's bytes, or `None` when they are not loaded.
    pub fn bytes(&self) -> Option<&[u8]> {
        match &self.bytes {
            WeightBytes::Absent => None,
            WeightBytes::Owned(b) => Some(b),
            WeightBytes::Mapped(b) => Some(b),
        }
    }
}

/// Error from [`WeightStore::insert`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WeightError {
    #[error("weight `{0}` is defined twice")]
    Duplicate(String),
    #[error("weight `{name}` has {actual} bytes but its type {ty} needs {expected}")]
    SizeMismatch {
        name: String,
        ty: String,
        expected: u64,
        actual: u64,
    },
}

/// The weights of a module, named by [`WeightId`] and by their unique names.
#[derive(Clone, Debug, Default)]
pub struct WeightStore {
    weights: PrimaryMap<WeightId, Weight>,
    by_name: HashMap<String, WeightId>,
}

impl WeightStore {
    pub fn new() -> WeightStore {
        WeightStore::default()
    }

    /// Adds a weight. Names are unique; when bytes are present their length must match the type.
    pub fn insert(
        &mut self,
        name: &str,
        ty: TensorType,
        bytes: WeightBytes,
    ) -> Result<WeightId, WeightError> {
        if self.by_name.contains_key(name) {
            return Err(WeightError::Duplicate(name.to_string()));
        }
        let len = match &bytes {
            WeightBytes::Absent => None,
            WeightBytes::Owned(b) => Some(b.len()),
            WeightBytes::Mapped(b) => Some(b.len()),
        };
        if let (Some(len), Some(expected)) = (len, ty.static_byte_size()) {
            if len as u64 != expected {
                return Err(WeightError::SizeMismatch {
                    name: name.to_string(),
                    ty: ty.to_string(),
                    expected,
                    actual: len as u64,
                });
            }
        }
        let id = self.weights.push(Weight {
            name: name.to_string(),
            ty,
            bytes,
        });
        self.by_name.insert(name.to_string(), id);
        Ok(id)
    }

    pub fn get(&self, id: WeightId) -> Option<&Weight> {
        self.weights.get(id)
    }

    pub fn lookup(&self, name: &str) -> Option<WeightId> {
        self.by_name.get(name).copied()
    }

    pub fn len(&self) -> usize {
        self.weights.len()
    }

    pub fn is_empty(&self) -> bool {
        self.weights.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (WeightId, &Weight)> {
        self.weights.iter()
    }
}
