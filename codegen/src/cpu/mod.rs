//! The Cranelift CPU backend. (Being written.)
