//! placeholder
pub fn parse_module() {}
