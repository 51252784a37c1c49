//! Tensors going into and out of a session: [`Tensor`] owns its bytes, [`TensorRef`] borrows
//! them.
//!
//! Both hold an element type, a shape and the elements' bytes in row-major (C) order, in the
//! host's byte order (memc only builds for little-endian hosts, so this is also the order of
//! `.npy` files and plan weights). Their constructors check that the byte length is the
//! product of the shape times the element size, so every tensor a session sees is well formed.

use crate::error::{Result, RuntimeError};
use memc_codegen::Scalar;

/// Rust types that are tensor elements: the primitive types with the same bytes as a
/// [`Scalar`].
///
/// # Safety
/// Implementors must be plain values of exactly `SCALAR.size()` bytes with no padding, so that
/// a slice of them may be read as bytes.
pub unsafe trait Element: Copy + 'static {
    const SCALAR: Scalar;

    /// The value of one element's bytes (`SCALAR.size()` of them). Any bytes give a value: a
    /// bool is true where its byte is not zero.
    fn from_bytes(bytes: &[u8]) -> Self;
}

macro_rules! element {
    ($($ty:ty => $scalar:ident),* $(,)?) => {$(
        // SAFETY: a primitive number type of the same size and representation as its scalar.
        unsafe impl Element for $ty {
            const SCALAR: Scalar = Scalar::$scalar;

            fn from_bytes(bytes: &[u8]) -> $ty {
                <$ty>::from_le_bytes(bytes.try_into().expect("one element's bytes"))
            }
        }
    )*};
}

element!(
    i8 => I8, i16 => I16, i32 => I32, i64 => I64,
    u8 => U8, u16 => U16, u32 => U32, u64 => U64,
    f32 => F32, f64 => F64,
);

// SAFETY: `bool` is one byte, 0 or 1, like a bool tensor element.
unsafe impl Element for bool {
    const SCALAR: Scalar = Scalar::Bool;

    fn from_bytes(bytes: &[u8]) -> bool {
        bytes[0] != 0
    }
}

/// A type and shape as memc prints them: `f32[2, 3]`, `i64[]` for a scalar.
pub fn signature(elem: Scalar, shape: &[u64]) -> String {
    format!("{}{}", elem.name(), shape_string(shape))
}

/// A shape as memc prints it: `[2, 3]`.
pub fn shape_string(shape: &[u64]) -> String {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    format!("[{}]", dims.join(", "))
}

/// The byte length of a tensor, or `None` when it does not fit in memory.
pub fn byte_len(elem: Scalar, shape: &[u64]) -> Option<usize> {
    let bytes = shape
        .iter()
        .try_fold(elem.size(), |acc, &d| acc.checked_mul(d))?;
    usize::try_from(bytes).ok()
}

fn check_len(elem: Scalar, shape: &[u64], got: usize) -> Result<()> {
    match byte_len(elem, shape) {
        Some(expected) if expected == got => Ok(()),
        expected => Err(RuntimeError::TensorSize {
            elem: elem.name(),
            shape: shape_string(shape),
            expected: expected.map_or("more than memory holds".to_string(), |n| n.to_string()),
            got: got as u64,
        }),
    }
}

fn as_bytes<T: Element>(data: &[T]) -> &[u8] {
    // SAFETY: `Element` types are plain values without padding (see its safety contract).
    unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), std::mem::size_of_val(data)) }
}

/// A borrowed tensor: an element type, a shape and the bytes of the elements.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct TensorRef<'a> {
    elem: Scalar,
    shape: &'a [u64],
    data: &'a [u8],
}

impl<'a> TensorRef<'a> {
    /// A tensor over `data`, which must hold exactly the shape's elements.
    pub fn new(elem: Scalar, shape: &'a [u64], data: &'a [u8]) -> Result<TensorRef<'a>> {
        check_len(elem, shape, data.len())?;
        Ok(TensorRef { elem, shape, data })
    }

    /// A tensor over typed elements, e.g. `TensorRef::from_slice(&[2, 2], &[1.0f32, 2., 3., 4.])`.
    pub fn from_slice<T: Element>(shape: &'a [u64], data: &'a [T]) -> Result<TensorRef<'a>> {
        TensorRef::new(T::SCALAR, shape, as_bytes(data))
    }

    /// For callers that checked the length themselves.
    pub(crate) fn new_unchecked(elem: Scalar, shape: &'a [u64], data: &'a [u8]) -> TensorRef<'a> {
        debug_assert_eq!(byte_len(elem, shape), Some(data.len()));
        TensorRef { elem, shape, data }
    }

    pub fn elem(&self) -> Scalar {
        self.elem
    }

    pub fn shape(&self) -> &'a [u64] {
        self.shape
    }

    pub fn data(&self) -> &'a [u8] {
        self.data
    }

    pub fn n_elements(&self) -> u64 {
        self.shape.iter().product()
    }

    /// The elements as `T`, which must be the tensor's element type.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        self.typed("tensor", T::SCALAR)?;
        Ok(self
            .data
            .chunks_exact(T::SCALAR.size() as usize)
            .map(T::from_bytes)
            .collect())
    }

    fn typed(&self, name: &str, requested: Scalar) -> Result<()> {
        if self.elem != requested {
            return Err(RuntimeError::ElementType {
                name: name.to_string(),
                actual: self.elem.name(),
                requested: requested.name(),
            });
        }
        Ok(())
    }

    /// An owned copy named `name`.
    pub fn to_tensor(&self, name: impl Into<String>) -> Tensor {
        Tensor {
            name: name.into(),
            elem: self.elem,
            shape: self.shape.to_vec(),
            data: self.data.to_vec(),
        }
    }
}

/// An owned, named tensor: what a session returns and what `.npy` files hold.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    name: String,
    elem: Scalar,
    shape: Vec<u64>,
    data: Vec<u8>,
}

impl Tensor {
    /// A tensor owning `data`, which must hold exactly the shape's elements.
    pub fn new(
        name: impl Into<String>,
        elem: Scalar,
        shape: Vec<u64>,
        data: Vec<u8>,
    ) -> Result<Tensor> {
        check_len(elem, &shape, data.len())?;
        Ok(Tensor {
            name: name.into(),
            elem,
            shape,
            data,
        })
    }

    /// A tensor holding a copy of typed elements.
    pub fn from_slice<T: Element>(
        name: impl Into<String>,
        shape: Vec<u64>,
        data: &[T],
    ) -> Result<Tensor> {
        Tensor::new(name, T::SCALAR, shape, as_bytes(data).to_vec())
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn elem(&self) -> Scalar {
        self.elem
    }

    pub fn shape(&self) -> &[u64] {
        &self.shape
    }

    pub fn data(&self) -> &[u8] {
        &self.data
    }

    pub fn into_data(self) -> Vec<u8> {
        self.data
    }

    pub fn as_ref(&self) -> TensorRef<'_> {
        TensorRef {
            elem: self.elem,
            shape: &self.shape,
            data: &self.data,
        }
    }

    /// The elements as `T`, which must be the tensor's element type.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        self.as_ref().typed(&self.name, T::SCALAR)?;
        self.as_ref().to_vec()
    }
}
