//! Low-bit products as PTX (to be written).

use super::{PtxEntry, PtxError};
use crate::kernel::NBitsMatMul;

pub(super) fn emit(_q: &NBitsMatMul, kernel: &str, _name: &str) -> Result<PtxEntry, PtxError> {
    Err(PtxError::Unsupported {
        kernel: kernel.to_string(),
        message: "low-bit products are not emitted yet".into(),
    })
}
