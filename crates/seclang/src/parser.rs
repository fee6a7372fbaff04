//! The SecLang parser. (Being written: see the seclang parser task.)

use crate::ast::Directive;
use crate::error::ParseError;
use crate::source::FileSource;
use std::path::Path;

/// Parses SecLang text. `name` is used as the file name in spans; `Include` paths are
/// resolved relative to its directory through `source`.
pub fn parse_str(text: &str, name: &str) -> Result<Vec<Directive>, ParseError> {
    let _ = (text, name);
    unimplemented!("seclang parser")
}

/// Reads and parses a file and everything it includes.
pub fn parse_file(source: &dyn FileSource, path: &Path) -> Result<Vec<Directive>, ParseError> {
    let _ = (source, path);
    unimplemented!("seclang parser")
}
