//! A lowered program: the kernels of every scheduled op, the I/O signature and the weights it
//! reads, all addressed by byte offsets into the arena and the weights section. This is what
//! the plan file stores (as data, JIT-compiled again at load) and what backends compile.
//!
//! Guarantees: [`Program::validate`] checks every kernel against the region sizes and every
//! I/O tensor and weight slot against its region, so a program read from an untrusted file
//! either validates or is rejected before any code runs.

use crate::kernel::{Kernel, KernelError, Region, RegionSizes, Scalar};
use serde::{Deserialize, Serialize};

/// A graph input or output: where its bytes live while the plan runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IoTensor {
    /// The ONNX name.
    pub name: String,
    pub elem: Scalar,
    pub shape: Vec<u64>,
    /// Inputs are always in the arena; an output may be a weight (a constant output).
    pub region: Region,
    pub byte_offset: u64,
}

impl IoTensor {
    pub fn byte_size(&self) -> u64 {
        self.shape.iter().product::<u64>() * self.elem.size()
    }
}

/// Where one weight's bytes go in the weights section.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WeightSlot {
    /// The weight's name in the model's weight store.
    pub name: String,
    pub byte_offset: u64,
    pub byte_size: u64,
    /// When set, the slot holds bytes computed from model weights (a packed low-bit weight)
    /// rather than a copy of the weight `name`; `name` is then the packed slot's own name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pack: Option<crate::nbits::PackSpec>,
}

/// The kernels of one scheduled op (zero for ops that are views or fused into a later step).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// The op, as the planner names it (`onnx.MatMul "fc1/MatMul"`).
    pub op: String,
    pub kernels: Vec<Kernel>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Program {
    pub arena_size: u64,
    pub weights_size: u64,
    pub inputs: Vec<IoTensor>,
    pub outputs: Vec<IoTensor>,
    pub weights: Vec<WeightSlot>,
    pub steps: Vec<Step>,
}

/// Alignment of every weight inside the weights section.
pub const WEIGHT_ALIGN: u64 = 64;

impl Program {
    pub fn region_sizes(&self) -> RegionSizes {
        RegionSizes {
            arena: self.arena_size,
            weights: self.weights_size,
        }
    }

    pub fn kernels(&self) -> impl Iterator<Item = &Kernel> {
        self.steps.iter().flat_map(|s| &s.kernels)
    }

    pub fn n_kernels(&self) -> usize {
        self.steps.iter().map(|s| s.kernels.len()).sum()
    }

    /// Checks every kernel, I/O tensor and weight slot against the region sizes.
    pub fn validate(&self) -> Result<(), KernelError> {
        let sizes = self.region_sizes();
        let bad = |message: String| KernelError::Malformed {
            kernel: "program".into(),
            message,
        };
        for io in self.inputs.iter().chain(&self.outputs) {
            let n = io
                .shape
                .iter()
                .try_fold(1u64, |acc, &d| acc.checked_mul(d))
                .and_then(|n| n.checked_mul(io.elem.size()))
                .ok_or_else(|| bad(format!("tensor `{}` has too many elements", io.name)))?;
            let limit = match io.region {
                Region::Arena => sizes.arena,
                Region::Weights => sizes.weights,
            };
            if io.byte_offset.checked_add(n).is_none_or(|end| end > limit) {
                return Err(bad(format!("tensor `{}` lies outside its region", io.name)));
            }
        }
        if let Some(input) = self.inputs.iter().find(|io| io.region != Region::Arena) {
            return Err(bad(format!("input `{}` is not in the arena", input.name)));
        }
        for slot in &self.weights {
            if slot
                .byte_offset
                .checked_add(slot.byte_size)
                .is_none_or(|end| end > sizes.weights)
            {
                return Err(bad(format!(
                    "weight `{}` lies outside the weights section",
                    slot.name
                )));
            }
            if let Some(spec) = &slot.pack {
                spec.check_layout()
                    .map_err(|e| bad(format!("packed weight `{}`: {e}", slot.name)))?;
                if spec.byte_size() != slot.byte_size {
                    return Err(bad(format!(
                        "packed weight `{}` has {} bytes, its spec needs {}",
                        slot.name,
                        slot.byte_size,
                        spec.byte_size()
                    )));
                }
            }
        }
        for kernel in self.kernels() {
            kernel.validate(sizes)?;
        }
        Ok(())
    }
}
