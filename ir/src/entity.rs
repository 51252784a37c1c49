//! Typed `u32` handles for every IR entity.
//!
//! Entities live in arenas (`cranelift_entity::PrimaryMap`) owned by a [`crate::Function`] or a
//! [`crate::Module`]; they are named by these handles and never by pointers. Analyses annotate
//! them through `SecondaryMap`s keyed by the same handles.
//!
//! `Display` of a handle is its raw spelling (`%7`, `^bb2`, `op3`). The printer renumbers values
//! and blocks in program order before printing, so the text of a function that was edited by a
//! pass shows dense names; a handle's `Display` is for debugging messages.

use cranelift_entity::entity_impl;
use std::fmt;

/// An operation inside a function.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpId(u32);
entity_impl!(OpId);

/// An SSA value: an operation result or a block argument.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId(u32);
entity_impl!(ValueId);

/// A basic block: a list of operations with arguments.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockId(u32);
entity_impl!(BlockId);

/// A region: a list of blocks, owned by an operation or by a function (its body).
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RegionId(u32);
entity_impl!(RegionId);

/// A function inside a module.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FuncId(u32);
entity_impl!(FuncId);

/// A weight in the module's [`crate::WeightStore`].
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WeightId(u32);
entity_impl!(WeightId);

macro_rules! display_with_prefix {
    ($($ty:ident => $prefix:literal),* $(,)?) => {$(
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
        impl fmt::Debug for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(self, f)
            }
        }
    )*};
}

display_with_prefix! {
    OpId => "op",
    ValueId => "%",
    BlockId => "^bb",
    RegionId => "region",
    FuncId => "func",
    WeightId => "weight",
}
