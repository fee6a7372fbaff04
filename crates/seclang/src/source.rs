//! Where rule files come from: the file system, or memory for tests.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

/// Reads rule and data files. The parser and the engine do all their file access
/// through this trait, so both stay free of direct I/O.
pub trait FileSource {
    /// Returns the whole content of a file.
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// Expands a glob pattern to the matching files, sorted lexically. A pattern without
    /// glob characters returns itself if the file exists.
    fn glob(&self, pattern: &Path) -> io::Result<Vec<PathBuf>>;
}

/// Reads files from the local file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct FsSource;

impl FileSource for FsSource {
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        std::fs::read(path)
    }

    fn glob(&self, pattern: &Path) -> io::Result<Vec<PathBuf>> {
        let text = pattern.to_str().ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "path is not valid UTF-8")
        })?;
        let paths = glob::glob(text)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let mut out = Vec::new();
        for p in paths {
            out.push(p.map_err(|e| io::Error::other(e.to_string()))?);
        }
        out.sort();
        Ok(out)
    }
}

/// Files held in memory, keyed by path. Globs match with the `glob` crate's pattern
/// rules against the stored paths.
#[derive(Debug, Default, Clone)]
pub struct MemorySource {
    files: BTreeMap<PathBuf, Vec<u8>>,
}

impl MemorySource {
    /// An empty set of files.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces a file.
    pub fn insert(&mut self, path: impl Into<PathBuf>, content: impl Into<Vec<u8>>) {
        self.files.insert(path.into(), content.into());
    }
}

impl FileSource for MemorySource {
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.files
            .get(path)
            .cloned()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such file"))
    }

    fn glob(&self, pattern: &Path) -> io::Result<Vec<PathBuf>> {
        let text = pattern.to_str().ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "path is not valid UTF-8")
        })?;
        let pat = glob::Pattern::new(text)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        Ok(self
            .files
            .keys()
            .filter(|p| p.to_str().is_some_and(|s| pat.matches(s)))
            .cloned()
            .collect())
    }
}
