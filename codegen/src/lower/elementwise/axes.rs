//! Loop-axis simplification for the kernels of this module and of `reduce`: axes of extent 1
//! are dropped and adjacent axes that every view walks as one (the outer stride is the inner
//! stride times the inner extent) are merged, so backends see long contiguous rows.
//!
//! Guarantees: the simplified kernel reads and writes the same elements in the same order
//! within each row (row-major linear inner indices, which ArgMax/ArgMin return, are unchanged).
//! Kernels whose instructions name loop axes (`Index`, `LoadIndirect`) or whose views have
//! guards are left alone, as are kernels with an empty loop.

use crate::kernel::{InstKind, Kernel, KernelBody, LoopKernel, Stage};

/// An elementwise kernel's last axis grows by merging until it has this many elements.
const TARGET_ROW: u64 = 1024;
/// ... as long as this many rows remain for threads to share (or the kernel is small).
const MIN_ROWS: u64 = 64;
/// Kernels with fewer elements than this run on one thread anyway.
const SMALL: u64 = 32 * 1024;

/// One loop axis: its extent and each view's stride along it.
#[derive(Clone)]
struct Axis {
    extent: u64,
    strides: Vec<i64>,
}

impl Axis {
    /// Whether `self` (the outer) and `inner` can be walked as one axis by every view.
    fn merges_with(&self, inner: &Axis) -> bool {
        self.strides
            .iter()
            .zip(&inner.strides)
            .all(|(&o, &i)| i.checked_mul(inner.extent as i64) == Some(o))
    }

    fn merge(&self, inner: &Axis) -> Axis {
        Axis {
            extent: self.extent * inner.extent,
            strides: inner.strides.clone(),
        }
    }
}

/// Merges every mergeable adjacent pair of `axes`.
fn merge_all(axes: &mut Vec<Axis>) {
    let mut i = axes.len();
    while i >= 2 {
        if axes[i - 2].merges_with(&axes[i - 1]) {
            let merged = axes[i - 2].merge(&axes[i - 1]);
            axes[i - 2] = merged;
            axes.remove(i - 1);
        }
        i -= 1;
    }
}

/// Simplifies the loop axes of `kernel` (see the module doc).
pub fn simplify_axes(mut kernel: Kernel) -> Kernel {
    let KernelBody::Loop(k) = &mut kernel.body else {
        return kernel;
    };
    if k.outer.iter().chain(&k.inner).any(|&e| e == 0)
        || k.views.iter().any(|v| !v.guards.is_empty())
        || names_axes(k)
    {
        return kernel;
    }
    let n_outer = k.outer.len();
    let axis = |a: usize, extent: u64| Axis {
        extent,
        strides: k.views.iter().map(|v| v.strides[a]).collect(),
    };
    let mut outer: Vec<Axis> = k
        .outer
        .iter()
        .enumerate()
        .map(|(a, &e)| axis(a, e))
        .collect();
    let mut inner: Vec<Axis> = k
        .inner
        .iter()
        .enumerate()
        .map(|(j, &e)| axis(n_outer + j, e))
        .collect();
    outer.retain(|a| a.extent != 1);
    let only_maps = k.stages.iter().all(|s| matches!(s, Stage::Map { .. }));
    if inner.iter().all(|a| a.extent == 1) && only_maps {
        // A Map over a one-point inner space is a plain elementwise kernel.
        inner.clear();
    } else if !inner.is_empty() {
        inner.retain(|a| a.extent != 1);
        if inner.is_empty() {
            inner.push(Axis {
                extent: 1,
                strides: vec![0; k.views.len()],
            });
        }
        merge_all(&mut inner);
    }
    if inner.is_empty() && !outer.is_empty() {
        // Rows are every outer axis but the last: merge freely among them, and grow the last
        // axis while enough rows remain.
        let last = outer.pop().expect("outer is not empty");
        merge_all(&mut outer);
        outer.push(last);
        let total: u64 = outer.iter().map(|a| a.extent).product();
        while outer.len() >= 2 {
            let n = outer.len();
            let rows_after: u64 = outer[..n - 2].iter().map(|a| a.extent).product();
            let grow = outer[n - 1].extent < TARGET_ROW
                && (rows_after >= MIN_ROWS || total < SMALL)
                && outer[n - 2].merges_with(&outer[n - 1]);
            if !grow {
                break;
            }
            let merged = outer[n - 2].merge(&outer[n - 1]);
            outer[n - 2] = merged;
            outer.pop();
        }
    } else {
        merge_all(&mut outer);
    }
    k.outer = outer.iter().map(|a| a.extent).collect();
    k.inner = inner.iter().map(|a| a.extent).collect();
    for (v, view) in k.views.iter_mut().enumerate() {
        view.strides = outer.iter().chain(&inner).map(|a| a.strides[v]).collect();
    }
    kernel
}

/// Whether an instruction of `k` depends on loop-axis numbering.
fn names_axes(k: &LoopKernel) -> bool {
    k.stages.iter().any(|s| {
        let insts = match s {
            Stage::Reduce { insts, .. } | Stage::Map { insts, .. } | Stage::Once { insts, .. } => {
                insts
            }
        };
        insts.iter().any(|i| {
            matches!(
                i.kind,
                InstKind::Index { .. } | InstKind::LoadIndirect { .. }
            )
        })
    })
}
