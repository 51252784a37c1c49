//! A lowered program: the kernels of every scheduled op, the I/O signature, the weights it
//! reads and the persistent state it updates, all addressed by byte offsets into the arena, the
//! weights section and the state region. This is what the plan file stores (as data,
//! JIT-compiled again at load) and what backends compile.
//!
//! Persistent state is what a training step keeps from one run to the next: its parameters
//! (read by the step, updated by an optimizer between steps) and its gradient buffers (updated
//! in place by `ms.InPlaceAccumulatorV2`). It lives in a region of its own, apart from the
//! arena: the arena holds only what one run needs, and the state survives the run.
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
    /// Inputs are always in the arena; an output may be a weight (a constant output), never
    /// persistent state.
    pub region: Region,
    pub byte_offset: u64,
    /// For an output with a bounded dim (`<=N` in the IR: NonZero's, Compress's, Unique's
    /// results): where the run writes its actual extent. `shape` then holds the bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extent: Option<RunExtent>,
}

/// Where a run leaves the extent of an output's bounded axis: an i64 at `byte_offset` in the
/// arena, between 0 and `shape[axis]` in a run that went right (the runtime checks that before
/// it reads the output, [`IoTensor::trimmed_shape`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunExtent {
    pub axis: u32,
    pub byte_offset: u64,
}

/// Bytes of an extent slot (one i64).
pub const EXTENT_BYTES: u64 = 8;

impl IoTensor {
    /// The bytes the tensor takes in its region (at its bound, for a bounded output).
    pub fn byte_size(&self) -> u64 {
        self.shape.iter().product::<u64>() * self.elem.size()
    }

    /// The output's shape in one run, given the i64 its extent slot holds: `shape` with the
    /// bounded axis set to `extent`; an error when `extent` is negative or above the bound
    /// (a corrupted plan or a kernel bug, never read past). `shape` itself without an extent.
    pub fn trimmed_shape(&self, extent: i64) -> Result<Vec<u64>, String> {
        let mut shape = self.shape.clone();
        let Some(slot) = self.extent else {
            return Ok(shape);
        };
        let axis = slot.axis as usize;
        let bound = shape[axis];
        match u64::try_from(extent) {
            Ok(e) if e <= bound => {
                shape[axis] = e;
                Ok(shape)
            }
            _ => Err(format!(
                "output `{}`: the run left extent {extent} on axis {axis}, outside [0, {bound}]",
                self.name
            )),
        }
    }

    /// The output as one run left it, for runners that hold the whole arena (the reference, the
    /// PTX interpreter, MLIR's engine): its shape and bytes, trimmed to the extent its slot holds
    /// when it has one. `region` is the region the output lives in. Errors name the output.
    pub fn read_output(&self, region: &[u8], arena: &[u8]) -> Result<(Vec<u64>, Vec<u8>), String> {
        let slice = |bytes: &[u8], at: u64, n: u64| {
            usize::try_from(at)
                .ok()
                .zip(usize::try_from(n).ok())
                .and_then(|(at, n)| bytes.get(at..at.checked_add(n)?))
                .map(<[u8]>::to_vec)
                .ok_or_else(|| format!("output `{}` lies outside its region", self.name))
        };
        let full = slice(region, self.byte_offset, self.byte_size())?;
        let Some(slot) = self.extent else {
            return Ok((self.shape.clone(), full));
        };
        let raw: [u8; 8] = slice(arena, slot.byte_offset, EXTENT_BYTES)?
            .try_into()
            .expect("the slice has EXTENT_BYTES bytes");
        let shape = self.trimmed_shape(i64::from_le_bytes(raw))?;
        let bytes = self.trim_bytes(&full, &shape);
        Ok((shape, bytes))
    }

    /// The elements of the output at `trimmed` (from [`IoTensor::trimmed_shape`]) out of `full`,
    /// its bytes at the bound: for each index before the bounded axis, the leading `extent`
    /// slices of that axis.
    pub fn trim_bytes(&self, full: &[u8], trimmed: &[u64]) -> Vec<u8> {
        let Some(slot) = self.extent else {
            return full.to_vec();
        };
        let axis = slot.axis as usize;
        let elem = self.elem.size() as usize;
        let inner: usize = self.shape[axis + 1..].iter().product::<u64>() as usize * elem;
        let outer: usize = self.shape[..axis].iter().product::<u64>() as usize;
        let (bound, extent) = (self.shape[axis] as usize, trimmed[axis] as usize);
        let mut out = Vec::with_capacity(outer * extent * inner);
        for o in 0..outer {
            let start = o * bound * inner;
            out.extend_from_slice(&full[start..start + extent * inner]);
        }
        out
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
    /// When set, the weight `name` has this sub-byte type (4- or 2-bit), which ONNX packs two
    /// or four to a byte, and the slot holds it one element per byte, as kernels address such
    /// elements (`memc_ir::packing::unpack`, done while the plan file is written); `byte_size`
    /// is then its element count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unpacked: Option<Scalar>,
    /// When set, the slot holds a product's constant operand laid out for the CPU's GEMM
    /// ([`crate::prepack`]), computed from the weight the spec names; `name` is the slot's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operand: Option<crate::prepack::OperandPack>,
}

pub use memc_ir::state::StateKind;

/// A tensor that persists across runs, in the state region.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StateTensor {
    /// The ONNX graph input's name.
    pub name: String,
    pub kind: StateKind,
    pub elem: Scalar,
    pub shape: Vec<u64>,
    pub byte_offset: u64,
}

impl StateTensor {
    pub fn byte_size(&self) -> u64 {
        self.shape.iter().product::<u64>() * self.elem.size()
    }
}

/// Alignment of every tensor inside the state region.
pub const STATE_ALIGN: u64 = 64;

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
    /// The state region's size: every [`StateTensor`]'s bytes.
    pub state_size: u64,
    pub inputs: Vec<IoTensor>,
    pub outputs: Vec<IoTensor>,
    pub weights: Vec<WeightSlot>,
    /// The persistent state, in the order of the graph inputs it came from.
    pub state: Vec<StateTensor>,
    pub steps: Vec<Step>,
}

/// Alignment of every weight inside the weights section.
pub const WEIGHT_ALIGN: u64 = 64;

impl Program {
    pub fn region_sizes(&self) -> RegionSizes {
        RegionSizes {
            arena: self.arena_size,
            weights: self.weights_size,
            state: self.state_size,
        }
    }

    pub fn kernels(&self) -> impl Iterator<Item = &Kernel> {
        self.steps.iter().flat_map(|s| &s.kernels)
    }

    pub fn n_kernels(&self) -> usize {
        self.steps.iter().map(|s| s.kernels.len()).sum()
    }

    /// The state tensor called `name`.
    pub fn state_tensor(&self, name: &str) -> Option<&StateTensor> {
        self.state.iter().find(|s| s.name == name)
    }

    /// Checks every kernel, I/O tensor, weight slot and state tensor against the region sizes.
    pub fn validate(&self) -> Result<(), KernelError> {
        let sizes = self.region_sizes();
        let bad = |message: String| KernelError::Malformed {
            kernel: "program".into(),
            message,
        };
        let tensors = self
            .inputs
            .iter()
            .chain(&self.outputs)
            .map(|io| (&io.name, io.elem, &io.shape, io.region, io.byte_offset))
            .chain(
                self.state
                    .iter()
                    .map(|s| (&s.name, s.elem, &s.shape, Region::State, s.byte_offset)),
            );
        for (name, elem, shape, region, byte_offset) in tensors {
            let n = shape
                .iter()
                .try_fold(1u64, |acc, &d| acc.checked_mul(d))
                .and_then(|n| n.checked_mul(elem.size()))
                .ok_or_else(|| bad(format!("tensor `{name}` has too many elements")))?;
            if byte_offset
                .checked_add(n)
                .is_none_or(|end| end > sizes.of(region))
            {
                return Err(bad(format!("tensor `{name}` lies outside its region")));
            }
        }
        for (i, s) in self.state.iter().enumerate() {
            if self.state[..i].iter().any(|t| t.name == s.name) {
                return Err(bad(format!("state tensor `{}` is listed twice", s.name)));
            }
        }
        if let Some(input) = self.inputs.iter().find(|io| io.extent.is_some()) {
            return Err(bad(format!(
                "input `{}` has a run-time extent (only outputs may)",
                input.name
            )));
        }
        for output in &self.outputs {
            let Some(slot) = output.extent else {
                continue;
            };
            if slot.axis as usize >= output.shape.len() {
                return Err(bad(format!(
                    "output `{}` has its extent on axis {}, but rank {}",
                    output.name,
                    slot.axis,
                    output.shape.len()
                )));
            }
            if output.region != Region::Arena
                || slot.byte_offset % EXTENT_BYTES != 0
                || slot
                    .byte_offset
                    .checked_add(EXTENT_BYTES)
                    .is_none_or(|end| end > sizes.arena)
            {
                return Err(bad(format!(
                    "output `{}` has its extent slot at byte {}, outside the arena or misaligned",
                    output.name, slot.byte_offset
                )));
            }
        }
        if let Some(input) = self.inputs.iter().find(|io| io.region != Region::Arena) {
            return Err(bad(format!("input `{}` is not in the arena", input.name)));
        }
        if let Some(output) = self.outputs.iter().find(|io| io.region == Region::State) {
            return Err(bad(format!(
                "output `{}` is persistent state (read state with the session, not as an output)",
                output.name
            )));
        }
        for slot in &self.weights {
            // A slot computed from a spec: the spec's own rules, and its size.
            let computed = |layout: Result<(), String>, size: u64| {
                layout.map_err(|e| bad(format!("packed weight `{}`: {e}", slot.name)))?;
                if size != slot.byte_size {
                    return Err(bad(format!(
                        "packed weight `{}` has {} bytes, its spec needs {size}",
                        slot.name, slot.byte_size
                    )));
                }
                Ok(())
            };
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
            if let Some(elem) = slot.unpacked {
                if !elem.elem().is_sub_byte() || slot.pack.is_some() {
                    return Err(bad(format!(
                        "weight `{}` is unpacked from {}, which is not a packed sub-byte type",
                        slot.name,
                        elem.name()
                    )));
                }
            }
            if let Some(spec) = &slot.operand {
                if slot.pack.is_some() || slot.unpacked.is_some() {
                    return Err(bad(format!(
                        "weight `{}` is both a laid-out product operand and another packing",
                        slot.name
                    )));
                }
                computed(spec.check_layout(), spec.byte_size())?;
            }
            if let Some(spec) = &slot.pack {
                computed(spec.check_layout(), spec.byte_size())?;
            }
        }
        for kernel in self.kernels() {
            kernel.validate(sizes)?;
        }
        Ok(())
    }
}
