//! Contractions as PTX (to be written).

use super::{PtxEntry, PtxError};
use crate::kernel::Contract;

pub(super) fn emit(_c: &Contract, kernel: &str, _name: &str) -> Result<PtxEntry, PtxError> {
    Err(PtxError::Unsupported {
        kernel: kernel.to_string(),
        message: "contractions are not emitted yet".into(),
    })
}
