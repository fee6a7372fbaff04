//! JSON request bodies, flattened to ARGS the way ModSecurity v3 names them.

use super::{Arg, Limits};

/// Why a JSON body was refused (sets REQBODY_ERROR).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("JSON parsing error: {0}")]
pub struct JsonError(pub String);

/// Parses a JSON document into ARGS pairs.
pub fn parse(input: &[u8], limits: &Limits) -> Result<Vec<Arg>, JsonError> {
    let _ = (input, limits);
    unimplemented!("json")
}
