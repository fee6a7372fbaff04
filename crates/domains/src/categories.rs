//! [`Categories`]: URL categories (gambling, social, ads, ...) from list files, in one
//! suffix set.
//!
//! Each file is one category, named by the file (`gambling.txt` is the category
//! `gambling`), with one entry per line in the format of [`crate::parse_entry`]: a domain
//! (its subdomains included), `*.domain` (subdomains only), an IP address, or a domain
//! with a URL path prefix (`example.com/games/`) for a category that covers only part of
//! a site. Blank lines and `#` comments are skipped; an invalid line is an error naming
//! the file and the line.
//!
//! All categories share one [`SuffixSet`]. An entry's value is the category id itself
//! when the entry is one category for a whole domain (the common case, with no further
//! memory), or the index of a small rule (several categories, path prefixes) otherwise.
//!
//! # Paths
//!
//! A request path is compared after the same normalisation as the prefixes: the query
//! and fragment are dropped, percent-encoded bytes other than `/` are decoded,
//! `.` and `..` segments are resolved, repeated slashes are collapsed, and ASCII case
//! is ignored (`/GAMES/` and `/%67ames/` are under `/games/`; over-matching a path on a
//! case-sensitive server is the safer error for a filter). A prefix that ends with `/`
//! matches any path that starts with it; one that does not (`/games`) matches that path
//! and the paths under it (`/games`, `/games/x`), not `/gamesx`. A `CONNECT` (HTTPS
//! without interception) carries no path: pass `""`, and only whole-domain entries
//! match.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::normalize::Host;
use crate::set::{
    EntryKind, LoadError, SuffixSet, Value, entry_error, for_each_line, parse_entry, read_file,
};

/// A category's id: its index in [`Categories::names`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CategoryId(pub u16);

/// Values at or above this are rule indexes (plus this); below it, a category id.
const RULE: Value = 1 << 31;

/// What an entry holds beyond one whole-domain category.
#[derive(Debug, Clone, Default)]
struct Rule {
    /// Categories of the whole domain (or of its subdomains, for that part).
    cats: Vec<CategoryId>,
    /// Normalised path prefixes and their categories.
    paths: Vec<(Box<str>, CategoryId)>,
}

impl Rule {
    fn add_cat(&mut self, c: CategoryId) {
        if !self.cats.contains(&c) {
            self.cats.push(c);
        }
    }

    fn add_path(&mut self, p: &str, c: CategoryId) {
        if !self.paths.iter().any(|(q, d)| &**q == p && *d == c) {
            self.paths.push((p.into(), c));
        }
    }
}

/// URL categories loaded from files into one suffix set.
#[derive(Debug, Clone, Default)]
pub struct Categories {
    names: Vec<String>,
    ids: HashMap<String, CategoryId>,
    set: SuffixSet,
    rules: Vec<Rule>,
}

/// One category that matched, with how specific the match was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CategoryMatch {
    /// The category.
    pub category: CategoryId,
    /// The length of the matching entry's domain: a longer one is a nearer parent.
    pub domain_len: usize,
    /// The length of the matching path prefix, 0 for a whole-domain entry.
    pub path_len: usize,
}

impl Categories {
    /// No categories.
    pub fn new() -> Self {
        Self::default()
    }

    /// Loads every `*.txt` file of a directory, in name order, each as the category
    /// named by the file's stem.
    pub fn load_dir(dir: impl AsRef<Path>) -> Result<Self, LoadError> {
        let dir = dir.as_ref();
        let io = |source| LoadError::Io {
            path: dir.to_owned(),
            source,
        };
        let mut files: Vec<PathBuf> = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(io)? {
            let path = entry.map_err(io)?.path();
            if path.extension().is_some_and(|e| e == "txt") && path.is_file() {
                files.push(path);
            }
        }
        files.sort();
        Self::load_files(files)
    }

    /// Loads the given files, each as the category named by its stem (`gambling.txt`
    /// is `gambling`); files with the same stem add to the same category.
    pub fn load_files<P: AsRef<Path>>(
        files: impl IntoIterator<Item = P>,
    ) -> Result<Self, LoadError> {
        let mut cats = Categories::new();
        for file in files {
            let file = file.as_ref();
            let name = file
                .file_stem()
                .and_then(|s| s.to_str())
                .filter(|s| !s.is_empty())
                .ok_or_else(|| LoadError::Other {
                    path: file.to_owned(),
                    message: "the file name gives no category name".into(),
                })?
                .to_owned();
            cats.add_file(file, &name)?;
        }
        cats.set.shrink_to_fit();
        Ok(cats)
    }

    /// The id of a category, created if new.
    pub fn category(&mut self, name: &str) -> Option<CategoryId> {
        if let Some(&id) = self.ids.get(name) {
            return Some(id);
        }
        let id = CategoryId(u16::try_from(self.names.len()).ok()?);
        self.names.push(name.to_owned());
        self.ids.insert(name.to_owned(), id);
        Some(id)
    }

    /// Adds a file's entries to the category `name`.
    pub fn add_file(
        &mut self,
        file: impl AsRef<Path>,
        name: &str,
    ) -> Result<CategoryId, LoadError> {
        let file = file.as_ref();
        let cat = self.category(name).ok_or_else(|| LoadError::Other {
            path: file.to_owned(),
            message: "more than 65536 categories".into(),
        })?;
        let data = read_file(file)?;
        self.set.reserve_for(&data);
        for_each_line(&data, |line_no, line| {
            let Some(entry) =
                parse_entry(line).map_err(|source| entry_error(file, line_no, line, source))?
            else {
                return Ok(());
            };
            let path = entry.path.as_deref().map(normalize_path);
            let parts: &[EntryKind] = match entry.kind {
                // Each part gets its own rule, so that a rule is never shared between
                // the name and its subdomains (merges change rules in place).
                EntryKind::Domain => &[EntryKind::Exact, EntryKind::SubdomainsOnly],
                EntryKind::SubdomainsOnly => &[EntryKind::SubdomainsOnly],
                EntryKind::Exact => &[EntryKind::Exact],
            };
            for &kind in parts {
                let value = match &path {
                    None => Value::from(cat.0),
                    Some(p) => {
                        let mut rule = Rule::default();
                        rule.add_path(p, cat);
                        self.push_rule(rule)
                    }
                };
                let Categories { set, rules, .. } = self;
                set.insert_with(&entry.host, kind, value, |old, new| merge(rules, old, new))
                    .map_err(|source| LoadError::Set {
                        path: file.to_owned(),
                        line: line_no,
                        source,
                    })?;
            }
            Ok(())
        })?;
        Ok(cat)
    }

    fn push_rule(&mut self, rule: Rule) -> Value {
        self.rules.push(rule);
        RULE + (self.rules.len() - 1) as Value
    }

    /// The category names, indexed by [`CategoryId`].
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// A category's name.
    pub fn name(&self, id: CategoryId) -> Option<&str> {
        self.names.get(usize::from(id.0)).map(String::as_str)
    }

    /// A category's id, if it exists.
    pub fn id(&self, name: &str) -> Option<CategoryId> {
        self.ids.get(name).copied()
    }

    /// The number of distinct hosts in all the categories.
    pub fn hosts(&self) -> usize {
        self.set.len()
    }

    /// Every category match for a host and a request path (`""` when there is none, as
    /// for `CONNECT`), from the least to the most specific domain.
    pub fn matches(&self, host: &Host, path: &str) -> Vec<CategoryMatch> {
        let mut out = Vec::new();
        let path = if path.is_empty() {
            String::new()
        } else {
            normalize_path(path)
        };
        let mut add = |value: Value, domain_len: usize| {
            if value < RULE {
                out.push(CategoryMatch {
                    category: CategoryId(value as u16),
                    domain_len,
                    path_len: 0,
                });
                return;
            }
            let Some(rule) = self.rules.get((value - RULE) as usize) else {
                return;
            };
            for &category in &rule.cats {
                out.push(CategoryMatch {
                    category,
                    domain_len,
                    path_len: 0,
                });
            }
            for (prefix, category) in &rule.paths {
                if path_matches(&path, prefix) {
                    out.push(CategoryMatch {
                        category: *category,
                        domain_len,
                        path_len: prefix.len(),
                    });
                }
            }
        };
        match host {
            Host::Name(name) => self
                .set
                .for_each_match(name, |m| add(m.value, m.entry.len())),
            Host::Ip(ip) => {
                if let Some(m) = self.set.lookup_ip(*ip) {
                    add(m.value, m.entry.len());
                }
            }
        }
        out
    }

    /// The categories of a host and request path, sorted, each once.
    pub fn lookup(&self, host: &Host, path: &str) -> Vec<CategoryId> {
        let mut cats: Vec<CategoryId> = self
            .matches(host, path)
            .iter()
            .map(|m| m.category)
            .collect();
        cats.sort_unstable();
        cats.dedup();
        cats
    }

    /// The most specific category: the entry on the nearest domain (the host itself
    /// before its parents), there the longest matching path prefix before a
    /// whole-domain entry, and among equals the lowest id.
    pub fn most_specific(&self, host: &Host, path: &str) -> Option<CategoryId> {
        self.matches(host, path)
            .into_iter()
            .max_by(|a, b| {
                (a.domain_len, a.path_len)
                    .cmp(&(b.domain_len, b.path_len))
                    .then(b.category.cmp(&a.category))
            })
            .map(|m| m.category)
    }

    /// The bytes held on the heap by the suffix set and the rules (approximately, for
    /// the rules).
    pub fn heap_bytes(&self) -> usize {
        self.set.heap_bytes()
            + self.rules.capacity() * std::mem::size_of::<Rule>()
            + self
                .rules
                .iter()
                .map(|r| {
                    r.cats.capacity() * 2 + r.paths.iter().map(|(p, _)| p.len() + 24).sum::<usize>()
                })
                .sum::<usize>()
    }
}

/// Merges a new value into an old one for the same entry part. A rule belongs to one
/// entry part only, so the old rule can be changed in place.
fn merge(rules: &mut Vec<Rule>, old: Value, new: Value) -> Value {
    if old == new {
        return old;
    }
    // What the new value brings: a category, or the (fresh) rule made for this line.
    let (new_cat, new_rule) = if new < RULE {
        (Some(CategoryId(new as u16)), None)
    } else {
        (None, rules.get((new - RULE) as usize).cloned())
    };
    let apply = |rule: &mut Rule| {
        if let Some(c) = new_cat {
            rule.add_cat(c);
        }
        if let Some(n) = &new_rule {
            for &c in &n.cats {
                rule.add_cat(c);
            }
            for (p, c) in &n.paths {
                rule.add_path(p, *c);
            }
        }
    };
    if old >= RULE {
        if let Some(rule) = rules.get_mut((old - RULE) as usize) {
            apply(rule);
        }
        // The fresh rule was merged into the old one; drop it if it is the last.
        if new >= RULE && (new - RULE) as usize + 1 == rules.len() {
            rules.pop();
        }
        return old;
    }
    let mut rule = Rule::default();
    rule.add_cat(CategoryId(old as u16));
    apply(&mut rule);
    if new >= RULE && (new - RULE) as usize + 1 == rules.len() {
        // Reuse the fresh rule's slot: it belongs to this entry part only.
        let last = rules.len() - 1;
        rules[last] = rule;
        return new;
    }
    rules.push(rule);
    RULE + (rules.len() - 1) as Value
}

/// Normalises a request path (or a path prefix from a list) for comparison: see the
/// module documentation.
pub fn normalize_path(path: &str) -> String {
    let path = path.split(['?', '#']).next().unwrap_or_default();
    // Decode %XX except %2F (an encoded slash is not a segment boundary to a server).
    let bytes = path.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len() + 1);
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' && i + 2 < bytes.len() {
            let hex = |x: u8| (x as char).to_digit(16).map(|d| d as u8);
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                let v = h << 4 | l;
                if v != b'/' {
                    decoded.push(v);
                    i += 3;
                    continue;
                }
            }
        }
        decoded.push(b);
        i += 1;
    }
    decoded.make_ascii_lowercase();
    // Resolve dot segments and collapse empty ones.
    let mut segments: Vec<&[u8]> = Vec::new();
    let trailing_slash = decoded.ends_with(b"/")
        || decoded.ends_with(b"/.")
        || decoded.ends_with(b"/..")
        || decoded == b"."
        || decoded == b"..";
    for seg in decoded.split(|&b| b == b'/') {
        match seg {
            b"" | b"." => {}
            b".." => {
                segments.pop();
            }
            s => segments.push(s),
        }
    }
    let mut out = Vec::with_capacity(decoded.len() + 1);
    for s in &segments {
        out.push(b'/');
        out.extend_from_slice(s);
    }
    if trailing_slash || segments.is_empty() {
        out.push(b'/');
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether a normalised path is under a normalised prefix.
fn path_matches(path: &str, prefix: &str) -> bool {
    if prefix.ends_with('/') {
        return path.starts_with(prefix);
    }
    match path.strip_prefix(prefix) {
        Some(rest) => rest.is_empty() || rest.starts_with('/'),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::normalize::normalize_host;

    fn h(s: &str) -> Host {
        normalize_host(s).unwrap()
    }

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    fn fixture() -> (tempfile::TempDir, Categories) {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "gambling.txt",
            "# gambling\ncasino.example\nbets.example.net\nportal.example/games/\n",
        );
        write(
            dir.path(),
            "games.txt",
            "portal.example/games/\ncasino.example\n*.play.example\nportal.example/arcade\n",
        );
        write(
            dir.path(),
            "social.txt",
            "portal.example\nbücher.example\n10.1.2.3\n",
        );
        write(dir.path(), "ignored.md", "not.a.category\n");
        let cats = Categories::load_dir(dir.path()).unwrap();
        (dir, cats)
    }

    #[test]
    fn loads_a_directory_by_file_name() {
        let (_dir, cats) = fixture();
        assert_eq!(cats.names(), ["gambling", "games", "social"]);
        let id = |n| cats.id(n).unwrap();
        assert_eq!(
            cats.lookup(&h("www.casino.example"), "/"),
            [id("gambling"), id("games")]
        );
        assert_eq!(cats.lookup(&h("bets.example.net"), ""), [id("gambling")]);
        assert!(cats.lookup(&h("example.net"), "/").is_empty());
        assert!(cats.lookup(&h("not.a.category"), "/").is_empty());
        assert_eq!(cats.lookup(&h("x.play.example"), "/"), [id("games")]);
        assert!(cats.lookup(&h("play.example"), "/").is_empty());
        assert_eq!(
            cats.lookup(&h("xn--bcher-kva.example"), "/"),
            [id("social")]
        );
        assert_eq!(cats.lookup(&h("0x0a.1.2.3"), "/"), [id("social")]);
        assert_eq!(cats.lookup(&h("[::ffff:10.1.2.3]:80"), "/"), [id("social")]);
    }

    #[test]
    fn paths() {
        let (_dir, cats) = fixture();
        let id = |n| cats.id(n).unwrap();
        let social = id("social");
        let host = h("PORTAL.example.");
        assert_eq!(cats.lookup(&host, "/"), [social]);
        assert_eq!(cats.lookup(&host, ""), [social]);
        for p in [
            "/games/",
            "/games/poker?x=1",
            "/GAMES/x",
            "/%67ames/x",
            "//games//x",
            "/news/../games/x",
            "/./games/x",
        ] {
            assert_eq!(
                cats.lookup(&host, p),
                [id("gambling"), id("games"), social],
                "{p}"
            );
            assert_eq!(
                cats.lookup(&h("sub.portal.example"), p),
                [id("gambling"), id("games"), social],
                "{p}"
            );
        }
        assert_eq!(cats.lookup(&host, "/games"), [social]);
        assert_eq!(cats.lookup(&host, "/gamesx/"), [social]);
        assert_eq!(cats.lookup(&host, "/games%2fx"), [social]);
        assert_eq!(cats.lookup(&host, "/arcade"), [id("games"), social]);
        assert_eq!(cats.lookup(&host, "/arcade/x"), [id("games"), social]);
        assert_eq!(cats.lookup(&host, "/arcadex"), [social]);
        // The most specific: a path prefix before the whole domain.
        assert_eq!(cats.most_specific(&host, "/arcade/1"), Some(id("games")));
        assert_eq!(cats.most_specific(&host, "/"), Some(social));
        assert_eq!(cats.most_specific(&h("nothing.example"), "/"), None);
    }

    #[test]
    fn most_specific_prefers_the_nearest_domain() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(dir.path(), "news.txt", "example.com\n");
        let b = write(dir.path(), "ads.txt", "ads.example.com\n");
        let cats = Categories::load_files([&a, &b]).unwrap();
        let ads = cats.id("ads").unwrap();
        let news = cats.id("news").unwrap();
        assert_eq!(cats.most_specific(&h("x.ads.example.com"), "/"), Some(ads));
        assert_eq!(cats.most_specific(&h("www.example.com"), "/"), Some(news));
        assert_eq!(cats.lookup(&h("x.ads.example.com"), "/"), [news, ads]);
        let m = cats.matches(&h("x.ads.example.com"), "/");
        assert_eq!(m.len(), 2);
        assert_eq!(m[1].domain_len, "ads.example.com".len());
    }

    #[test]
    fn subdomain_only_and_whole_entries_stay_apart() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(dir.path(), "a.txt", "example.org/p/\n");
        let b = write(dir.path(), "b.txt", "*.example.org\n");
        let c = write(dir.path(), "c.txt", "example.org\n*.example.org/q/\n");
        let cats = Categories::load_files([&a, &b, &c]).unwrap();
        let [a, b, c] = ["a", "b", "c"].map(|n| cats.id(n).unwrap());
        assert_eq!(cats.lookup(&h("example.org"), "/"), [c]);
        assert_eq!(cats.lookup(&h("example.org"), "/p/"), [a, c]);
        assert_eq!(cats.lookup(&h("example.org"), "/q/"), [c]);
        assert_eq!(cats.lookup(&h("w.example.org"), "/"), [b, c]);
        assert_eq!(cats.lookup(&h("w.example.org"), "/p/1"), [a, b, c]);
        assert_eq!(cats.lookup(&h("w.example.org"), "/q/1"), [b, c]);
    }

    #[test]
    fn errors_name_the_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "ok.txt", "fine.example\n");
        write(dir.path(), "bad.txt", "good.example\n\n# x\nbad..example\n");
        let err = Categories::load_dir(dir.path()).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("bad.txt:4:"), "{text}");
        assert!(text.contains("bad..example"), "{text}");
        assert!(matches!(
            Categories::load_dir(dir.path().join("none")),
            Err(LoadError::Io { .. })
        ));
    }

    #[test]
    fn path_normalisation() {
        assert_eq!(normalize_path(""), "/");
        assert_eq!(normalize_path("/"), "/");
        assert_eq!(normalize_path("/a/b/../c/./d/"), "/a/c/d/");
        assert_eq!(normalize_path("/../../a"), "/a");
        assert_eq!(normalize_path("/A%42c?q#f"), "/abc");
        assert_eq!(normalize_path("/a%2Fb"), "/a%2fb");
        assert_eq!(normalize_path("/a%"), "/a%");
        assert_eq!(normalize_path("/a%4"), "/a%4");
        assert_eq!(normalize_path("/a/.."), "/");
        assert_eq!(normalize_path("/a/b/.."), "/a/");
    }
}
