//! `normalisePath` and `normalisePathWin`.

use std::borrow::Cow;

/// True when normalisation cannot change `input`: no `//`, no segment ending in `.` (which
/// covers `.` and `..` segments), and on Windows no backslash.
fn is_normal(input: &[u8], win: bool) -> bool {
    if win && memchr::memchr(b'\\', input).is_some() {
        return false;
    }
    input.last() != Some(&b'.')
        && memchr::memmem::find(input, b"./").is_none()
        && memchr::memmem::find(input, b"//").is_none()
}

/// `t:normalisePath`: removes `.` segments, resolves `..` against the previous segment and
/// collapses repeated slashes. A trailing slash is kept only if the input had one. On a
/// relative path a `..` that would climb above the start is kept (`a/../../b` gives
/// `../b`); on an absolute path it stops at the root (`/../a` gives `/a`).
pub(super) fn normalise_path(input: &[u8]) -> Cow<'_, [u8]> {
    normalise(input, false)
}

/// `t:normalisePathWin`: as `normalisePath`, with backslashes read as slashes.
pub(super) fn normalise_path_win(input: &[u8]) -> Cow<'_, [u8]> {
    normalise(input, true)
}

fn normalise(input: &[u8], win: bool) -> Cow<'_, [u8]> {
    if input.is_empty() || is_normal(input, win) {
        return Cow::Borrowed(input);
    }
    let buf = normalise_in_place(input.to_vec(), win, true);
    if buf == input {
        Cow::Borrowed(input)
    } else {
        Cow::Owned(buf)
    }
}

/// The normalisation itself, done in place over `buf` with a read index (`src`) and a write
/// index (`dst <= src`) so that its results match libmodsecurity's in-place algorithm in
/// every corner case (the Windows flavour rewrites backslashes lazily while scanning, so a
/// few odd inputs such as `a/\\b` keep one backslash, as there). With `skip`, the bytes
/// inside a segment are copied in one go rather than one step each (the same result;
/// the step-by-step walk is kept for the test that compares the two).
fn normalise_in_place(mut buf: Vec<u8>, win: bool, skip: bool) -> Vec<u8> {
    let is_sep = |b: u8| b == b'/' || (win && b == b'\\');
    let end = buf.len() - 1;
    let relative = !is_sep(buf[0]);
    let trailing = is_sep(buf[end]);
    let mut src: usize = 0;
    // Signed: a back-reference may step before the start, and is then clamped.
    let mut dst: isize = 0;
    let mut hit_root = false;
    let mut done = false;

    while !done && src <= end && dst <= end as isize {
        // Inside a segment (this byte and the next are not separators) a step only
        // copies the byte: copy up to the byte before the next separator at once.
        if skip && src < end && !is_sep(buf[src]) && !is_sep(buf[src + 1]) {
            let rest = &buf[src + 2..=end];
            let next = if win {
                memchr::memchr2(b'/', b'\\', rest)
            } else {
                memchr::memchr(b'/', rest)
            };
            // The last byte of the segment is handled by the step below.
            let last = next.map_or(end, |i| src + 1 + i);
            let d = dst as usize;
            if d != src {
                buf.copy_within(src..last, d);
            }
            dst += (last - src) as isize;
            src = last;
        }
        if win {
            if buf[src] == b'\\' {
                buf[src] = b'/';
            }
            if src < end && buf[src + 1] == b'\\' {
                buf[src + 1] = b'/';
            }
        }

        // Normalise only at the end of a segment (or of the input).
        let at_segment_end = if src == end {
            done = true;
            true
        } else {
            buf[src + 1] == b'/'
        };

        if at_segment_end {
            if src != end && buf[src] == b'/' {
                // Empty segment: the copy below collapses the slashes.
            } else if buf[src] == b'.' {
                let d = dst as usize;
                if dst > 0 && buf[d - 1] == b'.' {
                    // A back-reference ("..").
                    if relative && (hit_root || dst - 2 <= 0) {
                        // Nothing to climb over in a relative path: keep it.
                        hit_root = true;
                    } else {
                        // Drop the ".." and the segment before it.
                        dst -= 3;
                        while dst > 0 && buf[dst as usize] != b'/' {
                            dst -= 1;
                        }
                        if dst <= 0 {
                            hit_root = true;
                            dst = 0;
                            // An absolute path ending on ".." keeps its root slash.
                            if !relative && src == end {
                                dst += 1;
                            }
                        }
                        if done {
                            continue;
                        }
                        src += 1;
                    }
                } else if dst == 0 {
                    // "." at the start of a relative path.
                    if done {
                        continue;
                    }
                    src += 1;
                } else if buf[d - 1] == b'/' {
                    // A "." segment.
                    if done {
                        continue;
                    }
                    dst -= 1;
                    src += 1;
                }
            } else if dst > 0 {
                // A regular segment.
                hit_root = false;
            }
        }

        // Copy one byte, collapsing runs of slashes to their last one.
        if buf[src] == b'/' {
            while src < end && is_sep(buf[src + 1]) {
                src += 1;
            }
            // A relative path never starts with a slash.
            if relative && dst == 0 {
                src += 1;
                continue;
            }
        }
        buf[dst as usize] = buf[src];
        dst += 1;
        src += 1;
    }

    let mut len = dst.max(0) as usize;
    if !trailing && len > 0 && buf[len - 1] == b'/' {
        len -= 1;
    }
    buf.truncate(len);
    buf
}

#[cfg(test)]
mod tests {
    use super::*;

    fn np(s: &[u8]) -> Vec<u8> {
        normalise_path(s).into_owned()
    }

    fn npw(s: &[u8]) -> Vec<u8> {
        normalise_path_win(s).into_owned()
    }

    #[test]
    fn posix() {
        assert_eq!(np(b"/a/b/../c"), b"/a/c");
        assert_eq!(np(b"/a/./b/"), b"/a/b/");
        assert_eq!(np(b"a/../../b"), b"../b");
        assert_eq!(np(b"../a"), b"../a");
        assert_eq!(np(b"/../a"), b"/a");
        assert_eq!(np(b"//a//b//"), b"/a/b/");
        assert_eq!(np(b"/a/b/.."), b"/a");
        assert_eq!(np(b"."), b"");
        assert_eq!(np(b".."), b"..");
        assert_eq!(np(b"/."), b"");
        assert_eq!(np(b"a/."), b"a");
        assert_eq!(np(b"./a"), b"a");
        assert_eq!(np(b"a//"), b"a/");
        assert_eq!(np(b"/"), b"/");
        assert_eq!(np(b""), b"");
        assert_eq!(np(b"a/b/../../.."), b"..");
        assert_eq!(np(b"/a/.."), b"");
        assert_eq!(np(b"/etc/./passwd"), b"/etc/passwd");
        assert_eq!(np(b"/foo/../../etc/passwd"), b"/etc/passwd");
        assert_eq!(np(b"/a\x00/../b\xff"), b"/b\xff");
    }

    #[test]
    fn windows() {
        assert_eq!(npw(b"a\\b\\..\\c"), b"a/c");
        assert_eq!(npw(b"c:\\x\\..\\y"), b"c:/y");
        assert_eq!(npw(b"\\\\srv\\a"), b"/srv/a");
        // libmodsecurity's lazy backslash rewrite leaves one here.
        assert_eq!(npw(b"a/\\\\b"), b"a\\b");
        assert_eq!(npw(b"a\\b"), b"a/b");
    }

    #[test]
    fn copying_segments_at_once_changes_nothing() {
        let alphabet: &[u8] = b"/\\.ab";
        let mut rng = crate::body::fuzz::XorShift(0x2545_F491_4F6C_DD1D);
        for _ in 0..20_000 {
            let seed = rng.next();
            let len = 1 + (seed % 14) as usize;
            let input: Vec<u8> = (0..len)
                .map(|j| alphabet[((seed >> (j * 4)) % alphabet.len() as u64) as usize])
                .collect();
            for win in [false, true] {
                assert_eq!(
                    normalise_in_place(input.clone(), win, true),
                    normalise_in_place(input.clone(), win, false),
                    "{input:?} win {win}"
                );
            }
        }
    }

    #[test]
    fn borrows_when_unchanged() {
        assert!(matches!(normalise_path(b"/a/b.php"), Cow::Borrowed(_)));
        assert!(matches!(normalise_path(b"/a/b/"), Cow::Borrowed(_)));
        assert!(matches!(normalise_path(b"../a"), Cow::Borrowed(_)));
        assert!(matches!(normalise_path_win(b"/a/b"), Cow::Borrowed(_)));
    }
}
