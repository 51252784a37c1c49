//! memc
