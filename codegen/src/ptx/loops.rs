//! Loop kernels as PTX (to be written).

use super::{PtxEntry, PtxError};
use crate::kernel::{LoopKernel, RegionSizes};

pub(super) fn emit(
    _k: &LoopKernel,
    kernel: &str,
    _name: &str,
    _sizes: RegionSizes,
) -> Result<PtxEntry, PtxError> {
    Err(PtxError::Unsupported {
        kernel: kernel.to_string(),
        message: "loop kernels are not emitted yet".into(),
    })
}
