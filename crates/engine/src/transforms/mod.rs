//! Transformations (`t:` actions): pure functions from bytes to bytes.

use std::borrow::Cow;

/// One transformation, resolved from its name at load time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transform {
    /// `t:lowercase`.
    Lowercase,
}

impl Transform {
    /// Looks up a transformation by its SecLang name (case-insensitive). `none` is not a
    /// transformation: the engine handles it (it clears the list) before calling this.
    pub fn from_name(name: &str) -> Option<Transform> {
        let _ = name;
        unimplemented!("transforms")
    }

    /// The SecLang name, as ModSecurity's manual spells it.
    pub fn name(self) -> &'static str {
        unimplemented!("transforms")
    }

    /// Applies the transformation. Returns `Cow::Borrowed` when the input is unchanged.
    pub fn apply(self, input: &[u8]) -> Cow<'_, [u8]> {
        let _ = input;
        unimplemented!("transforms")
    }
}
