//! Every transformation, as pipelines chosen by the input.
//!
//! Input: one byte for the pipeline length (1 to 4), one byte per step naming a
//! transformation (an index into [`Transform::ALL`]), then the value. Each step's
//! result is checked against what the transformation promises whatever its input:
//! encoders decode back to their input, digests have their size, case and
//! whitespace transformations leave none of what they remove, and a borrowed result
//! lies inside its input.

use crate::input::Input;
use engine::internals::transforms::Transform;
use std::borrow::Cow;

/// Runs one pipeline on one value.
pub fn fuzz_transforms(data: &[u8]) {
    let mut input = Input::new(data);
    let steps = 1 + input.below(4);
    let pipeline: Vec<Transform> = (0..steps)
        .map(|_| Transform::ALL[input.below(Transform::ALL.len())])
        .collect();
    let mut value = input.rest().to_vec();
    for t in pipeline {
        let out = t.apply(&value);
        if let Cow::Borrowed(b) = &out {
            assert!(
                within(b, &value),
                "{}: a borrowed result must lie inside its input",
                t.name()
            );
        }
        check(t, &value, &out);
        value = out.into_owned();
    }
}

/// Whether `part` is a sub-slice of `whole` (an empty slice anywhere counts).
fn within(part: &[u8], whole: &[u8]) -> bool {
    if part.is_empty() {
        return true;
    }
    let range = whole.as_ptr_range();
    let p = part.as_ptr_range();
    range.start <= p.start && p.end <= range.end
}

/// C's `isspace` in the "C" locale.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// The promises of `t` for input `v` and output `out`.
fn check(t: Transform, v: &[u8], out: &[u8]) {
    let name = t.name();
    match t {
        Transform::Lowercase => {
            assert_eq!(out.len(), v.len(), "{name}: length");
            assert!(
                !out.iter().any(u8::is_ascii_uppercase),
                "{name}: upper case left"
            );
            assert_eq!(out, v.to_ascii_lowercase(), "{name}");
        }
        Transform::Uppercase => {
            assert_eq!(out, v.to_ascii_uppercase(), "{name}");
        }
        Transform::UrlEncode => {
            let back = Transform::UrlDecode.apply(out);
            assert_eq!(&*back, v, "{name}: urlDecode must give the input back");
        }
        Transform::Base64Encode => {
            assert_eq!(out.len(), v.len().div_ceil(3) * 4, "{name}: length");
            let back = Transform::Base64Decode.apply(out);
            assert_eq!(&*back, v, "{name}: base64Decode must give the input back");
            let back = Transform::Base64DecodeExt.apply(out);
            assert_eq!(
                &*back, v,
                "{name}: base64DecodeExt must give the input back"
            );
        }
        Transform::HexEncode => {
            assert_eq!(out.len(), 2 * v.len(), "{name}: length");
            let back = Transform::HexDecode.apply(out);
            assert_eq!(&*back, v, "{name}: hexDecode must give the input back");
        }
        Transform::Md5 => assert_eq!(out.len(), 16, "{name}: digest size"),
        Transform::Sha1 => assert_eq!(out.len(), 20, "{name}: digest size"),
        Transform::Length => assert_eq!(out, v.len().to_string().as_bytes(), "{name}"),
        Transform::RemoveNulls => {
            assert!(!out.contains(&0), "{name}: NUL left");
            assert_eq!(out.len(), v.iter().filter(|&&b| b != 0).count(), "{name}");
        }
        Transform::ReplaceNulls => {
            assert_eq!(out.len(), v.len(), "{name}: length");
            assert!(!out.contains(&0), "{name}: NUL left");
        }
        Transform::RemoveWhitespace => {
            assert!(!out.iter().any(|&b| is_c_space(b)), "{name}: space left");
        }
        Transform::CompressWhitespace => {
            assert!(
                !out.windows(2).any(|w| is_c_space(w[0]) && is_c_space(w[1])),
                "{name}: a run of white space left"
            );
        }
        Transform::Trim => {
            assert!(
                !out.first().is_some_and(|&b| is_c_space(b)),
                "{name}: left end"
            );
            assert!(
                !out.last().is_some_and(|&b| is_c_space(b)),
                "{name}: right end"
            );
        }
        Transform::TrimLeft => {
            assert!(!out.first().is_some_and(|&b| is_c_space(b)), "{name}");
            assert!(v.ends_with(out), "{name}: must keep a suffix");
        }
        Transform::TrimRight => {
            assert!(!out.last().is_some_and(|&b| is_c_space(b)), "{name}");
            assert!(v.starts_with(out), "{name}: must keep a prefix");
        }
        Transform::ParityEven7bit | Transform::ParityOdd7bit | Transform::ParityZero7bit => {
            assert_eq!(out.len(), v.len(), "{name}: length");
            // ModSecurity computes the parity over all eight bits of the input byte
            // (so a byte with its top bit set counts it), then sets or clears bit 7.
            for (&o, &i) in out.iter().zip(v) {
                assert_eq!(o & 0x7f, i & 0x7f, "{name}: low seven bits");
                let odd = i.count_ones() % 2 == 1;
                let top = o & 0x80 != 0;
                match t {
                    Transform::ParityEven7bit => assert_eq!(top, odd, "{name}"),
                    Transform::ParityOdd7bit => assert_eq!(top, !odd, "{name}"),
                    _ => assert!(!top, "{name}"),
                }
            }
        }
        // Decoders only ever shrink (or keep) a value.
        Transform::UrlDecode
        | Transform::UrlDecodeUni
        | Transform::HtmlEntityDecode
        | Transform::JsDecode
        | Transform::CssDecode
        | Transform::EscapeSeqDecode
        | Transform::Base64Decode
        | Transform::Base64DecodeExt
        | Transform::HexDecode
        | Transform::SqlHexDecode
        | Transform::RemoveComments
        | Transform::RemoveCommentsChar
        | Transform::ReplaceComments
        | Transform::NormalisePath
        | Transform::NormalisePathWin
        | Transform::CmdLine => {
            assert!(out.len() <= v.len(), "{name}: a decoder grew the value");
        }
        // `%uHHHH` for each multi-byte sequence: at most six bytes per input byte.
        Transform::Utf8ToUnicode => {
            assert!(out.len() <= 6 * v.len(), "{name}: output too long");
        }
    }
}
