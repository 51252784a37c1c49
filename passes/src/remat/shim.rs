//! TEMPORARY until the op table's flops/is_random land.
use memc_ir::{Function, OpId, WeightStore};
pub fn flops(func: &Function, op: OpId) -> u64 {
    let data = func.op(op);
    if data.opcode.def().is_view() {
        return 0;
    }
    data.results
        .first()
        .and_then(|&r| func.value_type(r).tensor().and_then(|t| t.static_shape()))
        .map_or(0, |s| s.iter().product::<u64>())
}
pub fn is_random(_func: &Function, _w: &WeightStore, _op: OpId) -> bool {
    false
}
