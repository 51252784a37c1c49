//! numpy arrays in and out of a plan's run.
//!
//! An input is read where numpy keeps it when it is C-contiguous (any numpy array of a native
//! element type is, unless it is a strided view or Fortran-ordered); otherwise
//! `numpy.ascontiguousarray` makes the one copy. Element types map one to one: numpy's bool,
//! int8..int64, uint8..uint64, float16, float32 and float64 are memc's `bool`, `i8`..`i64`,
//! `u8`..`u64`, `f16`, `f32` and `f64`; any other dtype (complex, strings, objects, non-native
//! byte order) is refused by name. Outputs are fresh arrays that a run fills straight from the
//! arena; an output of a type numpy has no dtype for (bf16, float8, float4, the 4- and 2-bit
//! integers) comes back as its codes, in the unsigned integers of its size, one element per
//! array element (`out.view(ml_dtypes.bfloat16)` reads them; inputs of those types are not
//! taken yet).

use memc_core::codegen::Scalar;
use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

/// Every element type a plan's inputs and outputs may have.
const SCALARS: [Scalar; 12] = [
    Scalar::Bool,
    Scalar::I8,
    Scalar::I16,
    Scalar::I32,
    Scalar::I64,
    Scalar::U8,
    Scalar::U16,
    Scalar::U32,
    Scalar::U64,
    Scalar::F16,
    Scalar::F32,
    Scalar::F64,
];

/// The numpy dtype of a memc element type.
pub fn descr(py: Python<'_>, elem: Scalar) -> Bound<'_, PyArrayDescr> {
    use numpy::dtype;
    match elem {
        Scalar::Bool => dtype::<bool>(py),
        Scalar::I8 => dtype::<i8>(py),
        Scalar::I16 => dtype::<i16>(py),
        Scalar::I32 => dtype::<i32>(py),
        Scalar::I64 => dtype::<i64>(py),
        Scalar::U8 => dtype::<u8>(py),
        Scalar::U16 => dtype::<u16>(py),
        Scalar::U32 => dtype::<u32>(py),
        Scalar::U64 => dtype::<u64>(py),
        Scalar::F16 => dtype::<half::f16>(py),
        Scalar::F32 => dtype::<f32>(py),
        Scalar::F64 => dtype::<f64>(py),
        // No numpy dtype: the codes (see the module doc).
        Scalar::BF16 => dtype::<u16>(py),
        Scalar::F8E4M3FN
        | Scalar::F8E4M3FNUZ
        | Scalar::F8E5M2
        | Scalar::F8E5M2FNUZ
        | Scalar::F4E2M1
        | Scalar::F8E8M0
        | Scalar::I4
        | Scalar::U4
        | Scalar::I2
        | Scalar::U2 => dtype::<u8>(py),
    }
}

/// The memc element type of a numpy dtype, if it has one.
fn scalar_of(dtype: &Bound<'_, PyArrayDescr>) -> Option<Scalar> {
    SCALARS
        .into_iter()
        .find(|&s| dtype.is_equiv_to(&descr(dtype.py(), s)))
}

/// A graph input as numpy holds it: a C-contiguous array of a memc element type.
pub struct InputArray<'py> {
    pub name: String,
    pub elem: Scalar,
    pub shape: Vec<u64>,
    array: Bound<'py, PyUntypedArray>,
}

impl InputArray<'_> {
    /// The array's elements as bytes, in C order.
    ///
    /// The slice stays valid while `self` lives: `self` holds a reference to the array, and
    /// numpy does not free or move the data of an array that is referenced. The bytes may be
    /// read with the GIL released; a Python thread writing into the array meanwhile races
    /// with the read (as with numpy's own GIL-free operations), but reads stay in bounds.
    pub fn bytes(&self) -> &[u8] {
        let len = self.array.len() * self.array.dtype().itemsize();
        if len == 0 {
            return &[];
        }
        // SAFETY: the array is C-contiguous (checked in `input_array`), so its `len` bytes
        // start at `data`; bytes need no alignment; see above for how long they stay valid.
        unsafe {
            let data = (*self.array.as_array_ptr()).fields.data.cast::<u8>();
            std::slice::from_raw_parts(data, len)
        }
    }
}

/// Checks that `value`, given for input `name`, is a numpy array of a memc element type, and
/// makes it C-contiguous (copying only when it is not).
pub fn input_array<'py>(name: &str, value: &Bound<'py, PyAny>) -> PyResult<InputArray<'py>> {
    let py = value.py();
    let array = value.cast::<PyUntypedArray>().map_err(|_| {
        PyTypeError::new_err(format!(
            "input `{name}`: expected a numpy.ndarray, got {}",
            crate::error::type_name(value)
        ))
    })?;
    let dtype = array.dtype();
    let elem = scalar_of(&dtype).ok_or_else(|| {
        let shown = dtype
            .repr()
            .map_or_else(|_| "?".to_string(), |r| r.to_string());
        crate::error::memc_error(format!(
            "input `{name}`: numpy {shown} is not an element type memc computes with \
             (bool, int8..int64, uint8..uint64, float16, float32, float64, native byte order)"
        ))
    })?;
    let array = if array.is_c_contiguous() {
        array.clone()
    } else {
        py.import("numpy")?
            .getattr("ascontiguousarray")?
            .call1((array,))?
            .cast_into::<PyUntypedArray>()?
    };
    let shape = array.shape().iter().map(|&d| d as u64).collect();
    Ok(InputArray {
        name: name.to_string(),
        elem,
        shape,
        array,
    })
}

/// A fresh, uninitialized numpy array of `elem` and `shape`, for a run to fill.
pub fn empty_array<'py>(
    py: Python<'py>,
    elem: Scalar,
    shape: &[u64],
) -> PyResult<Bound<'py, PyUntypedArray>> {
    let shape = PyTuple::new(py, shape)?;
    Ok(py
        .import("numpy")?
        .getattr("empty")?
        .call1((shape, descr(py, elem)))?
        .cast_into::<PyUntypedArray>()?)
}

/// The bytes of an array `empty_array` made, to fill.
///
/// # Safety
/// `array` must come from [`empty_array`] and not be shared yet (no other Python or Rust code
/// sees it until the returned slice is dropped), and must outlive the slice.
pub unsafe fn bytes_to_fill<'a>(array: &Bound<'_, PyUntypedArray>) -> &'a mut [u8] {
    let len = array.len() * array.dtype().itemsize();
    if len == 0 {
        return &mut [];
    }
    // SAFETY: a fresh array from `numpy.empty` is C-contiguous with `len` bytes at `data`,
    // and the caller promises no one else reads or writes them meanwhile.
    unsafe {
        let data = (*array.as_array_ptr()).fields.data.cast::<u8>();
        std::slice::from_raw_parts_mut(data, len)
    }
}
