//! `md5` and `sha1`: raw binary digests (not hex), as ModSecurity produces them.

use std::borrow::Cow;

use md5::Digest as _;

/// `t:md5`: the 16-byte MD5 digest of the input.
pub(super) fn md5(input: &[u8]) -> Cow<'_, [u8]> {
    Cow::Owned(md5::Md5::digest(input).to_vec())
}

/// `t:sha1`: the 20-byte SHA-1 digest of the input.
pub(super) fn sha1(input: &[u8]) -> Cow<'_, [u8]> {
    Cow::Owned(sha1::Sha1::digest(input).to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn md5_vectors() {
        assert_eq!(hex(&md5(b"")), "d41d8cd98f00b204e9800998ecf8427e");
        assert_eq!(hex(&md5(b"abc")), "900150983cd24fb0d6963f7d28e17f72");
        assert_eq!(md5(b"\x00\xff").len(), 16);
    }

    #[test]
    fn sha1_vectors() {
        assert_eq!(hex(&sha1(b"")), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(
            hex(&sha1(b"abc")),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
        assert_eq!(sha1(b"\x00\xff").len(), 20);
    }
}
