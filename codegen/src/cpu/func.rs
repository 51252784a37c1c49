//! The state shared by everything that emits one kernel function: the Cranelift function
//! builder, the module that resolves run-time helpers, and small emission utilities (counted
//! loops, helper calls, error construction) and the Cranelift type of each kernel scalar.
//!
//! Loops emitted by [`FnCx::loop_begin`]/[`FnCx::loop_end`] run their body at least once, so
//! callers skip empty loops statically (every extent is a compile-time constant).

use super::error::CpuError;
use super::helpers::{Helper, HelperSig};
use crate::kernel::Scalar;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    types, AbiParam, Block, FuncRef, InstBuilder, StackSlot, StackSlotData, StackSlotKind, Type,
    Value,
};
use cranelift_frontend::{FunctionBuilder, Variable};
use cranelift_jit::JITModule;
use cranelift_module::{FuncId, Linkage, Module};
use std::collections::HashMap;

/// The Cranelift type holding a value of kernel scalar `ty`: of its compute type, for a
/// storage type (see [`memory_type`] for its bytes). Bool is a byte holding 0 or 1.
pub(crate) fn clif_type(ty: Scalar) -> Option<Type> {
    Some(match ty.compute() {
        Scalar::Bool | Scalar::I8 | Scalar::U8 => types::I8,
        Scalar::I16 | Scalar::U16 => types::I16,
        Scalar::I32 | Scalar::U32 => types::I32,
        Scalar::I64 | Scalar::U64 => types::I64,
        Scalar::F32 => types::F32,
        Scalar::F64 => types::F64,
        _ => return None,
    })
}

/// The Cranelift type of an element's bytes in memory: the value type for compute types, an
/// integer of the element's size for storage types.
pub(crate) fn memory_type(ty: Scalar) -> Option<Type> {
    if !ty.is_storage_only() {
        return clif_type(ty);
    }
    Some(match ty.size() {
        1 => types::I8,
        _ => types::I16,
    })
}

/// Helpers already declared in the module, shared by every function of a program.
pub(crate) type HelperIds = HashMap<&'static str, FuncId>;

/// One function being emitted.
pub(crate) struct FnCx<'f, 'm> {
    pub b: FunctionBuilder<'f>,
    module: &'m mut JITModule,
    helper_ids: &'m mut HelperIds,
    helper_refs: HashMap<&'static str, FuncRef>,
    /// A 32-byte stack slot for passing vectors to 4-lane helpers, made on first use.
    scratch: Option<StackSlot>,
    /// A 64-byte stack slot, 16-byte aligned, for passing four vectors to 16-lane helpers,
    /// made on first use.
    scratch_x16: Option<StackSlot>,
    kernel_name: &'m str,
}

/// An open counted loop (see [`FnCx::loop_begin`]).
pub(crate) struct OpenLoop {
    var: Variable,
    header: Block,
    exit: Block,
    extent: i64,
    step: i64,
}

impl<'f, 'm> FnCx<'f, 'm> {
    pub(crate) fn new(
        b: FunctionBuilder<'f>,
        module: &'m mut JITModule,
        helper_ids: &'m mut HelperIds,
        kernel_name: &'m str,
    ) -> Self {
        FnCx {
            b,
            module,
            helper_ids,
            helper_refs: HashMap::new(),
            scratch: None,
            scratch_x16: None,
            kernel_name,
        }
    }

    pub(crate) fn unsupported(&self, message: String) -> CpuError {
        CpuError::Unsupported {
            kernel: self.kernel_name.to_string(),
            message,
        }
    }

    /// The function reference of run-time helper `helper`, declared on first use.
    fn helper_ref(&mut self, helper: Helper) -> Result<FuncRef, CpuError> {
        if let Some(&r) = self.helper_refs.get(helper.name) {
            return Ok(r);
        }
        let id = match self.helper_ids.get(helper.name) {
            Some(&id) => id,
            None => {
                let mut sig = self.module.make_signature();
                match helper.sig {
                    HelperSig::Unary(ty) | HelperSig::Binary(ty) => {
                        let clif = clif_type(ty)
                            .ok_or_else(|| self.unsupported(format!("no {} helper", ty.name())))?;
                        let n_params = if matches!(helper.sig, HelperSig::Unary(_)) {
                            1
                        } else {
                            2
                        };
                        for _ in 0..n_params {
                            sig.params.push(AbiParam::new(clif));
                        }
                        sig.returns.push(AbiParam::new(clif));
                    }
                    HelperSig::LanesX4 => {
                        let ptr = self.module.target_config().pointer_type();
                        sig.params.push(AbiParam::new(ptr));
                    }
                    HelperSig::Widen => {
                        sig.params.push(AbiParam::new(types::I32));
                        sig.returns.push(AbiParam::new(types::F32));
                    }
                    HelperSig::Narrow => {
                        sig.params.push(AbiParam::new(types::F32));
                        sig.returns.push(AbiParam::new(types::I32));
                    }
                }
                let id = self
                    .module
                    .declare_function(helper.name, Linkage::Import, &sig)
                    .map_err(|e| CpuError::Cranelift(e.to_string()))?;
                self.helper_ids.insert(helper.name, id);
                id
            }
        };
        let r = self.module.declare_func_in_func(id, self.b.func);
        self.helper_refs.insert(helper.name, r);
        Ok(r)
    }

    /// Calls scalar run-time helper `helper` with `args` and returns its result.
    pub(crate) fn call_helper(
        &mut self,
        helper: Helper,
        args: &[Value],
    ) -> Result<Value, CpuError> {
        let func_ref = self.helper_ref(helper)?;
        let call = self.b.ins().call(func_ref, args);
        self.b
            .inst_results(call)
            .first()
            .copied()
            .ok_or_else(|| self.unsupported(format!("helper {} returns nothing", helper.name)))
    }

    /// Calls 4-lane helper `helper` (see [`HelperSig::LanesX4`]) on the f32x4 `vectors` (one or
    /// two) through a stack slot, and returns the f32x4 result.
    pub(crate) fn call_lanes_x4(
        &mut self,
        helper: Helper,
        vectors: &[Value],
    ) -> Result<Value, CpuError> {
        let (slot, ptr) = self.call_through_slot(helper, vectors, false)?;
        Ok(self.b.ins().stack_load(ptr, types::F32X4, slot, 0))
    }

    /// Calls 16-lane `helper` on four f32x4 vectors (through a 64-byte stack slot) and
    /// returns the four result vectors, in the same order.
    pub(crate) fn call_lanes_x16(
        &mut self,
        helper: Helper,
        vectors: [Value; 4],
    ) -> Result<[Value; 4], CpuError> {
        let (slot, ptr) = self.call_through_slot(helper, &vectors, true)?;
        Ok(std::array::from_fn(|i| {
            self.b
                .ins()
                .stack_load(ptr, types::F32X4, slot, (16 * i) as i32)
        }))
    }

    /// Stores the f32x4 `vectors` one after another in this function's stack slot for the
    /// 4-lane helpers (32 bytes) or, when `wide`, the 16-lane ones (64 bytes), made on first
    /// use, 16-byte aligned, and calls `helper` on its address; returns the slot, where the
    /// helper left its results, and the pointer type.
    fn call_through_slot(
        &mut self,
        helper: Helper,
        vectors: &[Value],
        wide: bool,
    ) -> Result<(StackSlot, types::Type), CpuError> {
        let func_ref = self.helper_ref(helper)?;
        let (cached, bytes) = if wide {
            (&mut self.scratch_x16, 64)
        } else {
            (&mut self.scratch, 32)
        };
        let slot = match *cached {
            Some(slot) => slot,
            None => {
                let data = StackSlotData::new(StackSlotKind::ExplicitSlot, bytes, 4);
                let slot = self.b.create_sized_stack_slot(data);
                *cached = Some(slot);
                slot
            }
        };
        let ptr = self.module.target_config().pointer_type();
        for (i, &v) in vectors.iter().enumerate() {
            self.b.ins().stack_store(ptr, v, slot, (16 * i) as i32);
        }
        let addr = self.b.ins().stack_addr(ptr, slot, 0);
        self.b.ins().call(func_ref, &[addr]);
        Ok((slot, ptr))
    }

    /// Opens a loop over `0, step, 2*step, ...` below `extent` (which must be positive) and
    /// returns its induction variable (I64). The body is emitted between this call and
    /// [`FnCx::loop_end`].
    pub(crate) fn loop_begin(&mut self, extent: i64, step: i64) -> (OpenLoop, Value) {
        self.loop_begin_at(0, extent, step)
    }

    /// Like [`FnCx::loop_begin`] but starting at `start` (which must be below `extent`).
    pub(crate) fn loop_begin_at(
        &mut self,
        start: i64,
        extent: i64,
        step: i64,
    ) -> (OpenLoop, Value) {
        let var = self.b.declare_var(types::I64);
        let zero = self.b.ins().iconst(types::I64, start);
        self.b.def_var(var, zero);
        let header = self.b.create_block();
        let exit = self.b.create_block();
        self.b.ins().jump(header, &[]);
        self.b.switch_to_block(header);
        let iv = self.b.use_var(var);
        (
            OpenLoop {
                var,
                header,
                exit,
                extent,
                step,
            },
            iv,
        )
    }

    /// Closes a loop opened by [`FnCx::loop_begin`]; emission continues after the loop.
    pub(crate) fn loop_end(&mut self, open: OpenLoop) {
        let iv = self.b.use_var(open.var);
        let next = self.b.ins().iadd_imm_s(iv, open.step);
        self.b.def_var(open.var, next);
        // Continue while another full step fits: next + step <= extent, i.e. next < extent
        // for unit steps.
        let limit = open.extent - open.step + 1;
        let more = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, next, limit);
        self.b.ins().brif(more, open.header, &[], open.exit, &[]);
        self.b.seal_block(open.header);
        self.b.switch_to_block(open.exit);
        self.b.seal_block(open.exit);
    }
}
