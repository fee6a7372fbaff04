use super::*;
use crate::body::fuzz::{XorShift, mutate};

const CT: &[u8] = b"multipart/form-data; boundary=XyZ";

/// Joins lines with CRLF and ends the body with CRLF.
fn crlf(lines: &[&str]) -> Vec<u8> {
    let mut b = lines.join("\r\n").into_bytes();
    b.extend_from_slice(b"\r\n");
    b
}

/// Joins lines with LF and ends the body with LF (what go-ftw sends for `data: |`).
fn lf(lines: &[&str]) -> Vec<u8> {
    let mut b = lines.join("\n").into_bytes();
    b.push(b'\n');
    b
}

fn run(body: &[u8]) -> Multipart {
    parse(body, CT, &Limits::default())
}

fn s(v: &[u8]) -> String {
    String::from_utf8_lossy(v).into_owned()
}

fn args(m: &Multipart) -> Vec<(String, String)> {
    m.args.iter().map(|(n, v)| (s(n), s(v))).collect()
}

fn headers(m: &Multipart) -> Vec<(String, String)> {
    m.part_headers.iter().map(|(n, v)| (s(n), s(v))).collect()
}

fn p(n: &str, v: &str) -> (String, String) {
    (n.to_owned(), v.to_owned())
}

fn normal_body() -> Vec<u8> {
    crlf(&[
        "--XyZ",
        "Content-Disposition: form-data; name=\"name\"",
        "",
        "Brian Rectanus",
        "--XyZ",
        "Content-Disposition: form-data; name=\"text\"",
        "Content-Type: text/plain; charset=utf-8",
        "",
        "line one",
        "line two",
        "",
        "--XyZ",
        "Content-Disposition: form-data; name=\"image\"; filename=\"image.jpg\"",
        "Content-Type: image/jpeg",
        "",
        "BINARY",
        "DATA",
        "--XyZ",
        "Content-Disposition: form-data; name=\"empty\"",
        "",
        "",
        "--XyZ--",
    ])
}

#[test]
fn normal_body_parses_cleanly() {
    let body = normal_body();
    let m = run(&body);
    assert_eq!(m.error, None);
    assert_eq!(m.flags, MultipartFlags::default());
    assert!(!m.strict_error());
    assert_eq!(
        m.unmatched_boundary_value, 2,
        "v3 sets 2 once a later boundary matches"
    );
    assert_eq!(m.boundary, b"XyZ");
    assert_eq!(
        args(&m),
        vec![
            p("name", "Brian Rectanus"),
            p("text", "line one\r\nline two\r\n"),
            p("empty", "")
        ]
    );
    assert_eq!(m.files.len(), 1);
    let f = &m.files[0];
    assert_eq!((s(&f.name), s(&f.filename)), (p("image", "image.jpg")));
    assert_eq!(f.size, b"BINARY\r\nDATA".len());
    assert_eq!(&body[f.content.clone()], b"BINARY\r\nDATA");
    assert_eq!(f.content_type.as_deref(), Some(&b"image/jpeg"[..]));
    assert_eq!(
        headers(&m),
        vec![
            p("name", "Content-Disposition: form-data; name=\"name\""),
            p("text", "Content-Disposition: form-data; name=\"text\""),
            p("text", "Content-Type: text/plain; charset=utf-8"),
            p(
                "image",
                "Content-Disposition: form-data; name=\"image\"; filename=\"image.jpg\""
            ),
            p("image", "Content-Type: image/jpeg"),
            p("empty", "Content-Disposition: form-data; name=\"empty\""),
        ]
    );
    assert_eq!(m.names.len(), 4);
    assert_eq!(m.filenames, vec![b"image.jpg".to_vec()]);
}

#[test]
fn empty_body_is_not_an_error() {
    let m = run(b"");
    assert_eq!(m.error, None);
    assert!(m.args.is_empty());
}

#[test]
fn empty_filename_is_an_argument() {
    let m = run(&crlf(&[
        "--XyZ",
        "Content-Disposition: form-data; name=\"f\"; filename=\"\"",
        "Content-Type: application/octet-stream",
        "",
        "",
        "--XyZ--",
    ]));
    assert_eq!(m.error, None);
    assert!(m.files.is_empty());
    assert_eq!(args(&m), vec![p("f", "")]);
}

// ---- one body per flag -------------------------------------------------------

#[test]
fn flag_boundary_quoted() {
    let m = parse(
        &normal_body(),
        b"multipart/form-data; boundary=\"XyZ\"",
        &Limits::default(),
    );
    assert!(m.flags.boundary_quoted);
    assert!(m.strict_error());
    assert_eq!(m.error, None);
    assert_eq!(m.args.len(), 3);
}

#[test]
fn flag_boundary_whitespace() {
    let m = parse(
        &normal_body(),
        b"multipart/form-data; boundary =XyZ",
        &Limits::default(),
    );
    assert!(m.flags.boundary_whitespace);
    assert!(m.strict_error());
    assert_eq!(m.args.len(), 3);
    let m = parse(
        b"",
        b"multipart/form-data; boundary= XyZ",
        &Limits::default(),
    );
    assert!(m.flags.boundary_whitespace);
    assert_eq!(m.boundary, b" XyZ");
}

#[test]
fn flag_missing_semicolon() {
    let m = parse(
        &normal_body(),
        b"multipart/form-data boundary=XyZ",
        &Limits::default(),
    );
    assert!(m.flags.missing_semicolon);
    assert!(m.strict_error());
    assert_eq!(m.args.len(), 3);
}

#[test]
fn flag_data_before() {
    let mut body = b"preamble text\r\n".to_vec();
    body.extend_from_slice(&normal_body());
    let m = run(&body);
    assert!(m.flags.data_before);
    assert!(m.strict_error());
    assert_eq!(m.args.len(), 3);
}

#[test]
fn flag_data_after() {
    let mut body = normal_body();
    body.extend_from_slice(b"epilogue");
    let m = run(&body);
    assert!(m.flags.data_after);
    assert!(m.strict_error());
    assert_eq!(m.error, None);
    // A final boundary without a line end is fine and leaves nothing after it.
    let mut body = normal_body();
    body.truncate(body.len() - 2);
    let m = run(&body);
    assert!(!m.flags.data_after);
    assert_eq!(m.error, None);
}

#[test]
fn flag_header_folding() {
    let m = run(&crlf(&[
        "--XyZ",
        "Content-Disposition: form-data;",
        " name=\"folded\"",
        "",
        "v",
        "--XyZ--",
    ]));
    assert!(m.flags.header_folding);
    assert!(!m.flags.invalid_header_folding);
    assert!(m.strict_error());
    assert_eq!(m.error, None);
    assert_eq!(args(&m), vec![p("folded", "v")]);
    assert_eq!(
        headers(&m),
        vec![p(
            "folded",
            "Content-Disposition: form-data; name=\"folded\""
        )]
    );
}

#[test]
fn flag_invalid_header_folding() {
    let m = run(&crlf(&[
        "--XyZ",
        "Content-Disposition: form-data;",
        "\x0c name=\"ff\"",
        "",
        "v",
        "--XyZ--",
    ]));
    assert!(m.flags.header_folding);
    assert!(m.flags.invalid_header_folding);
    assert_eq!(args(&m), vec![p("ff", "v")]);
}

#[test]
fn flag_lf_line() {
    let m = run(&lf(&[
        "--XyZ",
        "Content-Disposition: form-data; name=\"a\"",
        "",
        "1",
        "--XyZ--",
    ]));
    assert!(m.flags.lf_line);
    assert!(!m.flags.crlf_lf_lines);
    assert!(m.strict_error());
    assert_eq!(m.error, None);
    assert_eq!(args(&m), vec![p("a", "1")]);
}

#[test]
fn flag_crlf_lf_lines() {
    let body = b"--XyZ\r\nContent-Disposition: form-data; name=\"a\"\n\r\n1\r\n--XyZ--\r\n";
    let m = run(body);
    assert!(m.flags.lf_line);
    assert!(m.flags.crlf_lf_lines);
    assert_eq!(args(&m), vec![p("a", "1")]);
    // A bare LF just before a boundary counts too (v3's CRLF state tracking).
    let m = run(b"--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\n--XyZ--\r\n");
    assert!(m.flags.lf_line && m.flags.crlf_lf_lines);
    assert_eq!(args(&m), vec![p("a", "1")]);
}

#[test]
fn flag_invalid_quoting() {
    let m = run(&crlf(&[
        "--XyZ",
        "Content-Disposition: form-data; name='single'",
        "",
        "v",
        "--XyZ--",
    ]));
    assert!(m.flags.invalid_quoting);
    assert!(m.strict_error());
    assert_eq!(args(&m), vec![p("single", "v")]);
    // A single quote inside an unquoted value counts; inside double quotes it does not.
    let m = run(&crlf(&[
        "--XyZ",
        "Content-Disposition: form-data; name=it's",
        "",
        "v",
        "--XyZ--",
    ]));
    assert!(m.flags.invalid_quoting);
    let m = run(&crlf(&[
        "--XyZ",
        "Content-Disposition: form-data; name=\"it's\"",
        "",
        "v",
        "--XyZ--",
    ]));
    assert!(!m.flags.invalid_quoting);
}

#[test]
fn flag_invalid_part() {
    // Our boundary right where part data should begin.
    let m = run(&crlf(&[
        "--XyZ",
        "Content-Disposition: form-data; name=\"a\"",
        "",
        "--XyZ",
        "Content-Disposition: form-data; name=\"b\"",
        "",
        "2",
        "--XyZ--",
    ]));
    assert!(m.flags.invalid_part);
    assert!(m.strict_error());
    // A part whose headers never end: without a name it is dropped at the final boundary.
    let m = run(b"--XyZ\r\nX-Other: 1\r\n--XyZ--");
    assert!(m.flags.invalid_part);
    assert!(m.args.is_empty());
}

#[test]
fn flag_file_limit_exceeded() {
    let body = crlf(&[
        "--XyZ",
        "Content-Disposition: form-data; name=\"f1\"; filename=\"a.txt\"",
        "",
        "A",
        "--XyZ",
        "Content-Disposition: form-data; name=\"f2\"; filename=\"b.txt\"",
        "",
        "B",
        "--XyZ--",
    ]);
    let limits = Limits {
        max_files: 1,
        ..Limits::default()
    };
    let m = parse(&body, CT, &limits);
    assert!(m.flags.file_limit_exceeded);
    assert!(m.strict_error());
    assert_eq!(m.limit_hit, Some(LimitHit::Files));
    assert_eq!(
        m.error.as_deref(),
        Some(
            "Multipart: Upload file limit exceeded 1. Use SecUploadFileLimit to change the limit."
        )
    );
    assert_eq!(m.files.len(), 2, "the files are still listed");
    let m = parse(&body, CT, &Limits::default());
    assert!(!m.flags.file_limit_exceeded);
    assert_eq!(m.error, None);
}

#[test]
fn flag_unmatched_boundary() {
    // A data line that looks like a boundary; with the final boundary read from the
    // unterminated last line, v3 leaves the value at 1.
    let body = b"--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n--not-it\r\n--XyZ--";
    let m = run(body);
    assert_eq!(m.unmatched_boundary_value, 1);
    assert!(m.flags.unmatched_boundary);
    assert!(!m.strict_error(), "not part of MULTIPART_STRICT_ERROR");
    assert_eq!(args(&m), vec![p("a", "--not-it")]);
    // Our delimiter inside a line sets it too.
    let m = run(b"--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nx --XyZ y\r\n--XyZ--");
    assert_eq!(m.unmatched_boundary_value, 1);
    // A boundary line after it sets the value to 2.
    let m =
        run(b"--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n--not-it\r\n--XyZ--\r\n");
    assert_eq!(m.unmatched_boundary_value, 2);
    assert!(!m.flags.unmatched_boundary);
}

// ---- errors ------------------------------------------------------------------

#[test]
fn content_type_errors() {
    let cases: &[(&[u8], &str)] = &[
        (b"", "Multipart: Content-Type header not available."),
        (b"text/plain; boundary=x", "Multipart: Invalid MIME type."),
        (
            b"multipart/form-data",
            "Multipart: Boundary not found in C-T.",
        ),
        (
            b"multipart/form-data; Boundary=x",
            "Multipart: Invalid boundary in C-T (case sensitivity).",
        ),
        (
            b"multipart/form-data; boundary=a; boundary=b",
            "Multipart: Multiple boundary parameters in C-T.",
        ),
        (
            b"multipart/form-data; charset=utf-8; boundary=x",
            "Multipart: Invalid boundary in C-T (malformed).",
        ),
        (
            b"multipart/form-data; boundary",
            "Multipart: Invalid boundary in C-T (malformed).",
        ),
        (
            b"multipart/form-data; boundaryx=y",
            "Multipart: Invalid boundary in C-T (parameter name).",
        ),
        (
            b"multipart/form-data; boundary=\"abc",
            "Multipart: Invalid boundary in C-T (quote).",
        ),
        (
            b"multipart/form-data; boundary=abc\"",
            "Multipart: Invalid boundary in C-T (quote).",
        ),
        (
            b"multipart/form-data; boundary=\"\"",
            "Multipart: Invalid boundary in C-T (empty).",
        ),
        (
            b"multipart/form-data; boundary=",
            "Multipart: Invalid boundary in C-T (empty).",
        ),
        (
            b"multipart/form-data; boundary=a{b",
            "Multipart: Invalid boundary in C-T (characters).",
        ),
        (
            b"multipart/form-data; boundary=abc ",
            "Multipart: Invalid boundary in C-T (characters).",
        ),
    ];
    for (ct, msg) in cases {
        let m = parse(&normal_body(), ct, &Limits::default());
        assert_eq!(m.error.as_deref(), Some(*msg), "for {:?}", s(ct));
        assert!(m.flags.error && m.strict_error());
        assert!(m.args.is_empty());
    }
    let long = [b"multipart/form-data; boundary=".as_slice(), &[b'a'; 1000]].concat();
    assert_eq!(
        parse(b"", &long, &Limits::default()).error.as_deref(),
        Some("Multipart: Invalid boundary in C-T (length).")
    );
}

#[test]
fn content_type_tolerances() {
    // Case of the MIME type does not matter; a charset after the boundary is tolerated.
    for ct in [
        &b"Multipart/Form-Data; boundary=XyZ"[..],
        b"multipart/form-data;boundary=XyZ",
        b"multipart/form-data; boundary=XyZ; charset=UTF-8",
    ] {
        let m = parse(&normal_body(), ct, &Limits::default());
        assert_eq!(m.error, None, "for {:?}", s(ct));
        assert_eq!(m.args.len(), 3);
        assert!(!m.strict_error());
    }
}

#[test]
fn reqbody_error_messages() {
    let m = run(b"--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nv\r\n");
    assert_eq!(
        m.error.as_deref(),
        Some("Multipart: Final boundary missing.")
    );
    assert_eq!(
        m.reqbody_error_msg().as_deref(),
        Some("Multipart parsing error: Multipart: Final boundary missing.")
    );
    assert!(m.flags.error);
    let m = run(b"just some text\r\n");
    assert_eq!(
        m.error.as_deref(),
        Some("Multipart: No boundaries found in payload.")
    );
    assert!(m.flags.data_before);
}

#[test]
fn invalid_boundary_line_is_fatal() {
    let m = run(b"--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nv\r\n--XyZextra\r\n--XyZ--\r\n");
    assert_eq!(
        m.error.as_deref(),
        Some("Multipart: Invalid boundary: --XyZextra")
    );
    assert!(m.flags.error);
    let m = run(b"--XyZ  \r\n");
    assert_eq!(
        m.error.as_deref(),
        Some("Multipart: Invalid boundary: --XyZ  ")
    );
    let m = parse(
        b"--\"XyZ\"\r\n",
        b"multipart/form-data; boundary=\"XyZ\"",
        &Limits::default(),
    );
    assert_eq!(
        m.error.as_deref(),
        Some("Multipart: Invalid boundary (quotes).")
    );
    let m = run(b"-- XyZ\r\n");
    assert_eq!(
        m.error.as_deref(),
        Some("Multipart: Invalid boundary (whitespace).")
    );
}

#[test]
fn header_errors_are_recorded_but_not_fatal() {
    let m = run(&crlf(&[
        "--XyZ",
        "NoColonHere",
        "Content-Disposition: form-data; name=\"a\"",
        "",
        "v",
        "--XyZ--",
    ]));
    assert_eq!(
        m.error.as_deref(),
        Some("Multipart: Invalid part header (colon missing): NoColonHere")
    );
    assert_eq!(args(&m), vec![p("a", "v")]);
    let m = run(&crlf(&[
        "--XyZ",
        ": x",
        "Content-Disposition: form-data; name=\"a\"",
        "",
        "v",
        "--XyZ--",
    ]));
    assert_eq!(
        m.error.as_deref(),
        Some("Multipart: Invalid part header (header name missing).")
    );
    let m = run(
        b"--XyZ\r\nX-A: \0\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nv\r\n--XyZ--\r\n",
    );
    assert_eq!(
        m.error.as_deref(),
        Some("Multipart: Nul byte in part headers.")
    );
    assert_eq!(args(&m), vec![p("a", "v")]);
    let m = run(&crlf(&[
        "--XyZ",
        " folded first",
        "Content-Disposition: form-data; name=\"a\"",
        "",
        "v",
        "--XyZ--",
    ]));
    assert_eq!(
        m.error.as_deref(),
        Some("Multipart: Invalid part header (folding error).")
    );
}

#[test]
fn content_disposition_errors() {
    let cases = [
        ("attachment; name=\"a\"", -1),
        ("form-data name=\"a\"", -2),
        ("form-data; ", -3),
        ("form-data; name", -4),
        ("form-data; name ", -5),
        ("form-data; name x", -13),
        ("form-data; name=", -6),
        ("form-data; name=\"", -7),
        ("form-data; name=\"abc", -7),
        ("form-data; name=\"a\\", -8),
        ("form-data; foo=\"a\"", -11),
        ("form-data; name=\"a\" x", -12),
        ("form-data; name=\"a\"; name=\"b\"", -14),
        ("form-data; name=a; filename=b; filename=c", -15),
        ("form-data; name=a; filename*='x", -16),
        ("form-data; name=a; filename*=utf-8'en", -17),
        ("form-data; name=a; filename=x; filename*=utf-8''%zz", -18),
        ("form-data; name=a; filename=x; filename*=utf-8''a b", -19),
        (
            "form-data; name=a; filename=x; filename*=utf-8''a; filename*=utf-8''b",
            -20,
        ),
        ("form-data; name=a; filename*=utf-8''a.txt", -21),
    ];
    for (cd, rc) in cases {
        let body = crlf(&[
            "--XyZ",
            &format!("Content-Disposition: {cd}"),
            "",
            "v",
            "--XyZ--",
        ]);
        let m = run(&body);
        let want = format!("Invalid Content-Disposition header ({rc}): {cd}");
        let got = m.error.clone().unwrap_or_default();
        assert!(
            got.ends_with(&want) || got == "Multipart: Final boundary missing.",
            "{cd}: {got}"
        );
        assert!(m.args.is_empty(), "{cd}");
        // The error text of the header itself is what v3 reports when the body
        // ends without a final boundary on its own last line.
        let mut short = body.clone();
        short.truncate(body.len() - b"v\r\n--XyZ--\r\n".len());
        short.extend_from_slice(b"--XyZ--");
        let m = run(&short);
        assert_eq!(
            m.error.unwrap_or_default(),
            format!("Multipart: {want}"),
            "{cd}"
        );
    }
    let m = run(&crlf(&[
        "--XyZ",
        "Content-Disposition: form-data",
        "",
        "v",
        "--XyZ--",
    ]));
    assert!(m.error.is_some());
    let m = run(b"--XyZ\r\nContent-Disposition: form-data\r\n\r\n--XyZ--");
    assert_eq!(
        m.error.as_deref(),
        Some("Multipart: Content-Disposition header missing name field.")
    );
}

#[test]
fn content_disposition_forms() {
    let m = run(&crlf(&[
        "--XyZ",
        "Content-Disposition: form-data;name=plain;\tfilename=  \"q\\\"uo\\\\te\\d.txt\" ;",
        "",
        "data",
        "--XyZ",
        "Content-Disposition: form-data; name=\"s\"; filename=\"x.bin\"; filename*=UTF-8''x%20y.bin",
        "",
        "data2",
        "--XyZ--",
    ]));
    assert_eq!(m.error, None);
    // The second part's `filename*` names another file: it is a reading of its own.
    assert_eq!(m.files.len(), 3);
    assert_eq!(s(&m.files[0].name), "plain");
    assert_eq!(s(&m.files[0].filename), "q\"uo\\te\\d.txt");
    assert_eq!(s(&m.files[1].filename), "x.bin");
    assert_eq!(s(&m.files[2].filename), "x y.bin");
    // v3 also wants the literal text `filename=` when it found a filename.
    let m = run(b"--XyZ\r\nContent-Disposition: form-data; name=a; filename = b\r\n\r\n--XyZ--");
    assert_eq!(
        m.error.as_deref(),
        Some("Multipart: Invalid Content-Disposition header (filename).")
    );
}

#[test]
fn repeated_deciding_header_is_an_error_and_every_reading_is_inspected() {
    // The first Content-Disposition says file, the second says field: a parser that
    // keeps the last reads field `id`. Both readings are kept, and the body is an error.
    let m = run(&crlf(&[
        "--XyZ",
        "Content-Disposition: form-data; name=\"x\"; filename=\"a.txt\"",
        "content-disposition: form-data; name=\"id\"",
        "",
        "1' UNION SELECT password FROM users-- ",
        "--XyZ--",
    ]));
    assert!(m.completed);
    assert!(m.flags.duplicate_part_header);
    assert!(m.strict_error());
    assert_eq!(
        m.error.as_deref(),
        Some("Multipart: Duplicate part header: content-disposition.")
    );
    assert_eq!(
        args(&m),
        vec![p("id", "1' UNION SELECT password FROM users-- ")]
    );
    assert_eq!(m.files.len(), 1);
    assert_eq!(s(&m.files[0].filename), "a.txt");
    assert_eq!(
        m.names.iter().map(|n| s(n)).collect::<Vec<_>>(),
        vec!["x", "id"]
    );
    // Both lines are in MULTIPART_PART_HEADERS.
    assert_eq!(headers(&m).len(), 2);

    // Two Content-Type lines: the second one's charset is visible to the rules.
    let m = run(&crlf(&[
        "--XyZ",
        "Content-Disposition: form-data; name=\"id\"",
        "Content-Type: text/plain",
        "Content-Type: text/plain; charset=utf-7",
        "",
        "v",
        "--XyZ--",
    ]));
    assert!(m.flags.duplicate_part_header);
    assert_eq!(
        m.error.as_deref(),
        Some("Multipart: Duplicate part header: Content-Type.")
    );
    assert_eq!(
        headers(&m),
        vec![
            p("id", "Content-Disposition: form-data; name=\"id\""),
            p("id", "Content-Type: text/plain"),
            p("id", "Content-Type: text/plain; charset=utf-7"),
        ]
    );
    assert_eq!(args(&m), vec![p("id", "v")]);

    let m = run(&crlf(&[
        "--XyZ",
        "Content-Disposition: form-data; name=\"id\"",
        "Content-Transfer-Encoding: 8bit",
        "CONTENT-TRANSFER-ENCODING: base64",
        "",
        "v",
        "--XyZ--",
    ]));
    assert!(m.flags.duplicate_part_header);

    // Other headers may repeat, as in ModSecurity v3; every line is kept.
    let m = run(&crlf(&[
        "--XyZ",
        "Content-Disposition: form-data; name=\"a\"",
        "X-Note: one",
        "x-note: two",
        "",
        "v",
        "--XyZ--",
    ]));
    assert_eq!(m.error, None);
    assert!(!m.strict_error());
    assert_eq!(args(&m), vec![p("a", "v")]);
    assert_eq!(headers(&m).len(), 3);
}

#[test]
fn folded_content_disposition_is_an_error_and_both_readings_are_inspected() {
    // Unfolded, the part is a file; read without unfolding, it is field `id`.
    let m = run(&crlf(&[
        "--XyZ",
        "Content-Disposition: form-data; name=\"id\"",
        " ; filename=\"a.txt\"",
        "",
        "payload",
        "--XyZ--",
    ]));
    assert!(m.flags.header_folding);
    assert_eq!(
        m.error.as_deref(),
        Some("Multipart: Folded Content-Disposition header reads two ways.")
    );
    assert_eq!(m.files.len(), 1);
    assert_eq!(s(&m.files[0].filename), "a.txt");
    assert_eq!(args(&m), vec![p("id", "payload")]);
    // Folding another header is only the flag, as in ModSecurity v3.
    let m = run(&crlf(&[
        "--XyZ",
        "Content-Disposition: form-data; name=\"id\"",
        "Content-Type: text/plain;",
        " charset=utf-8",
        "",
        "v",
        "--XyZ--",
    ]));
    assert!(m.flags.header_folding);
    assert_eq!(m.error, None);
    assert_eq!(args(&m), vec![p("id", "v")]);
}

#[test]
fn filename_star_naming_another_file_is_seen_too() {
    let m = run(&crlf(&[
        "--XyZ",
        "Content-Disposition: form-data; name=\"up\"; filename=\"a.txt\"; filename*=UTF-8''shell%2Ephp",
        "",
        "<?php system($_GET[1]); ?>",
        "--XyZ--",
    ]));
    assert_eq!(m.error, None);
    let files: Vec<_> = m.files.iter().map(|f| s(&f.filename)).collect();
    assert_eq!(files, vec!["a.txt", "shell.php"]);
    assert_eq!(
        m.filenames.iter().map(|n| s(n)).collect::<Vec<_>>(),
        vec!["a.txt", "shell.php"]
    );
    // The same name twice is one file.
    let m = run(&crlf(&[
        "--XyZ",
        "Content-Disposition: form-data; name=\"up\"; filename=\"a b.txt\"; filename*=UTF-8''a%20b.txt",
        "",
        "x",
        "--XyZ--",
    ]));
    assert_eq!(m.files.len(), 1);
    assert_eq!(m.filenames.len(), 1);
}

#[test]
fn ambiguous_parameters_and_missing_disposition_are_errors() {
    for cd in [
        "form-data; name=\"a\"; name=\"b\"",
        "form-data; name=\"a\"; filename=\"x\"; filename=\"y\"",
        "form-data; name=\"a\"; filename=\"x\"; filename*=UTF-8''y; filename*=UTF-8''z",
        "form-data; Name=\"a\"",
        "Form-Data; name=\"a\"",
    ] {
        let m = run(&crlf(&[
            "--XyZ",
            &format!("Content-Disposition: {cd}"),
            "",
            "v",
            "--XyZ--",
        ]));
        assert!(m.error.is_some(), "{cd}");
    }
    // Without a Content-Disposition the part stays in its header section (as in
    // ModSecurity v3): its content is never taken for a field or a file.
    let body = crlf(&["--XyZ", "Content-Type: text/plain", "", "v", "--XyZ--"]);
    let m = run(&body);
    assert!(m.error.is_some());
    assert!(m.args.is_empty() && m.files.is_empty());
}

#[test]
fn long_lines() {
    // Content lines longer than the 4096-byte buffer are read in pieces and rejoined.
    let long = "x".repeat(10_000);
    let cr_at_edge = format!("{}\r{}", "y".repeat(4095), "z".repeat(10));
    let m = run(&crlf(&[
        "--XyZ",
        "Content-Disposition: form-data; name=\"a\"",
        "",
        &long,
        &cr_at_edge,
        "--XyZ--",
    ]));
    assert_eq!(m.error, None);
    assert_eq!(args(&m), vec![p("a", &format!("{long}\r\n{cr_at_edge}"))]);
    // A header line that long is a fatal error.
    let m = run(&crlf(&[
        "--XyZ",
        &format!("X-Long: {long}"),
        "",
        "v",
        "--XyZ--",
    ]));
    assert_eq!(
        m.error.as_deref(),
        Some("Multipart: Part header line over 4096 bytes long")
    );
    // So is one of exactly 4096 bytes with its line end.
    let exact = format!("X-Long: {}", "h".repeat(4096 - 10));
    let m = run(&crlf(&["--XyZ", &exact, "", "v", "--XyZ--"]));
    assert!(m.error.is_some());
    let under = format!("X-Long: {}", "h".repeat(4096 - 11));
    let m = run(&crlf(&[
        "--XyZ",
        &under,
        "Content-Disposition: form-data; name=\"a\"",
        "",
        "v",
        "--XyZ--",
    ]));
    assert_eq!(m.error, None);
}

#[test]
fn limits() {
    let mut lines = vec![];
    for i in 0..5 {
        lines.push("--XyZ".to_owned());
        lines.push(format!("Content-Disposition: form-data; name=\"a{i}\""));
        lines.push(String::new());
        lines.push(format!("v{i}"));
    }
    lines.push("--XyZ--".to_owned());
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let body = crlf(&refs);
    let m = parse(
        &body,
        CT,
        &Limits {
            max_args: 3,
            ..Limits::default()
        },
    );
    assert_eq!(m.args.len(), 3);
    assert_eq!(m.limit_hit, Some(LimitHit::Arguments));
    assert_eq!(m.error, None);
    let m = parse(
        &body,
        CT,
        &Limits {
            multipart_parts: 4,
            ..Limits::default()
        },
    );
    assert_eq!(m.limit_hit, Some(LimitHit::MultipartParts));
    assert_eq!(
        m.error.as_deref(),
        Some("Multipart: Too many parts (limit 4).")
    );
    assert_eq!(m.args.len(), 4);
    assert!(m.strict_error());
    let m = parse(
        &body,
        CT,
        &Limits {
            multipart_parts: 5,
            ..Limits::default()
        },
    );
    assert_eq!(m.error, None);
    assert_eq!(m.args.len(), 5);
}

#[test]
fn readings_of_repeated_headers_count_against_the_part_limit() {
    let mut lines = vec!["--XyZ".to_owned()];
    for i in 0..10 {
        lines.push(format!("Content-Disposition: form-data; name=\"f{i}\""));
    }
    lines.extend(["".to_owned(), "v".to_owned(), "--XyZ--".to_owned()]);
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let limits = Limits {
        multipart_parts: 4,
        ..Limits::default()
    };
    let m = parse(&crlf(&lines), CT, &limits);
    assert_eq!(m.args.len() + m.files.len(), 4);
    assert_eq!(m.limit_hit, Some(LimitHit::MultipartParts));
    assert_eq!(
        m.error.as_deref(),
        Some("Multipart: Too many parts (limit 4).")
    );
    // Within the limit, every reading is an argument.
    let m = run(&crlf(&lines));
    assert_eq!(m.args.len(), 10);
    assert!(m.flags.duplicate_part_header);
}

#[test]
fn part_header_output_is_bounded() {
    let name = "n".repeat(4000);
    let mut body =
        format!("--XyZ\r\nContent-Disposition: form-data; name=\"{name}\"\r\n").into_bytes();
    for i in 0..200_000 {
        body.extend_from_slice(format!("h{i}:\r\n").as_bytes());
    }
    body.extend_from_slice(b"\r\nv\r\n--XyZ--\r\n");
    let m = run(&body);
    let total: usize = m.part_headers.iter().map(|(n, v)| n.len() + v.len()).sum();
    assert!(total <= HEADER_BUDGET_BASE + body.len() * 16);
    assert_eq!(
        m.error.as_deref(),
        Some("Multipart: Too much part header data.")
    );
}

// ---- CRS regression bodies ---------------------------------------------------

#[test]
fn crs_922110_charsets_without_trailing_cr() {
    // 922110 test 2, sent with LF lines as go-ftw does and with CRLF lines.
    let lines = [
        "------WebKitFormBoundary",
        "Content-Disposition: form-data; name=\"username\"",
        "Content-Type: text/plain; charset=utf-7",
        "",
        "+ADw-img+ACA-src+AD0-x+AD4-",
        "------WebKitFormBoundary",
        "Content-Disposition: form-data; name=\"dummy\"",
        "Content-Type: text/plain; charset=utf-8",
        "",
        "test",
        "------WebKitFormBoundary--",
    ];
    let ct = b"multipart/form-data; boundary=----WebKitFormBoundary";
    for body in [lf(&lines), crlf(&lines)] {
        let m = parse(&body, ct, &Limits::default());
        assert_eq!(m.error, None);
        assert_eq!(
            headers(&m),
            vec![
                p(
                    "username",
                    "Content-Disposition: form-data; name=\"username\""
                ),
                p("username", "Content-Type: text/plain; charset=utf-7"),
                p("dummy", "Content-Disposition: form-data; name=\"dummy\""),
                p("dummy", "Content-Type: text/plain; charset=utf-8"),
            ]
        );
        assert_eq!(
            args(&m),
            vec![
                p("username", "+ADw-img+ACA-src+AD0-x+AD4-"),
                p("dummy", "test")
            ]
        );
    }
}

#[test]
fn crs_922120_content_transfer_encoding_header() {
    let body = lf(&[
        "--boundary",
        "Content-Disposition: form-data; name=\"a\"",
        "Content-Transfer-Encoding: base64",
        "",
        "dGVzdA==",
        "--boundary--",
    ]);
    let m = parse(
        &body,
        b"multipart/form-data; boundary=boundary",
        &Limits::default(),
    );
    assert!(headers(&m).contains(&p("a", "Content-Transfer-Encoding: base64")));
}

#[test]
fn crs_922130_invalid_header_name_characters() {
    let tail = "Content-Disposition: form-data; name=\"post\"\r\n\r\n<?php var_dump(file_get_contents(\"/etc/passwd\"));\r\n--boundary--";
    for bad in [
        "\x0eContent-Disposition",
        "Content-Disposition\x0e",
        "Content- Disposition",
        "Content\x7f-Disposition",
    ] {
        let body =
            format!("--boundary\r\n{bad}: form-data; name=\"file\"; filename=\"1.php\"\r\n{tail}");
        let m = parse(
            body.as_bytes(),
            b"multipart/form-data; boundary=boundary",
            &Limits::default(),
        );
        assert_eq!(
            m.reqbody_error_msg().as_deref(),
            Some(
                "Multipart parsing error: Multipart: Invalid part header (contains invalid character)."
            ),
            "{bad:?}"
        );
        assert_eq!(
            args(&m),
            vec![p(
                "post",
                "<?php var_dump(file_get_contents(\"/etc/passwd\"));"
            )]
        );
        assert!(m.files.is_empty());
    }
    // Negative tests 5 and 6: printable characters are fine.
    for good in ["Content-!Disposition", "Content~Disposition"] {
        let body = lf(&[
            "--boundary",
            &format!("{good}: form-data; name=\"file\"; filename=\"1.php\""),
            "Content-Disposition: form-data; name=\"post\"",
            "",
            "<?php var_dump(file_get_contents(\"/etc/passwd\")); ?>",
            "--boundary--",
        ]);
        let m = parse(
            &body,
            b"multipart/form-data; boundary=boundary",
            &Limits::default(),
        );
        assert_eq!(m.error, None, "{good}");
        assert!(headers(&m).contains(&p(
            "post",
            &format!("{good}: form-data; name=\"file\"; filename=\"1.php\"")
        )));
    }
    // Test 8: parts without headers.
    let body = lf(&[
        "--boundary123",
        "test",
        "--boundary123",
        "yet another test",
        "--boundary123--",
    ]);
    let m = parse(
        &body,
        b"multipart/form-data; boundary=boundary123",
        &Limits::default(),
    );
    assert!(m.part_headers.is_empty());
    assert!(m.error.is_some());
}

#[test]
fn crs_920120_920121_file_names() {
    let body = lf(&[
        "-----------------------------627652292512397580456702590",
        "Content-Disposition: form-data; name=\"fi=le\"; filename=\"test\"",
        "Content-Type: text/plain",
        "",
        "email: security@example.com",
        "",
        "-----------------------------627652292512397580456702590",
        "Content-Disposition: form-data; name=\"note\"",
        "",
        "Contact info.",
        "-----------------------------627652292512397580456702590--",
    ]);
    let ct =
        b"multipart/form-data; boundary=---------------------------627652292512397580456702590";
    let m = parse(&body, ct, &Limits::default());
    assert_eq!(m.error, None);
    assert_eq!(
        (s(&m.files[0].name), s(&m.files[0].filename)),
        p("fi=le", "test")
    );
    assert_eq!(m.files[0].size, "email: security@example.com\n".len());
    assert_eq!(args(&m), vec![p("note", "Contact info.")]);

    let ct = b"multipart/form-data; boundary=--------397236876";
    for (cd, filename) in [
        ("name=\"fileRap\"; filename=\"te;st.txt\"", "te;st.txt"),
        ("name=\"fileRap\"; filename=\"te'st.txt\"", "te'st.txt"),
        ("name=\"fileRap\"; filename=\"te\\\"st.txt\"", "te\"st.txt"),
        ("name=\"fileRap\"; filename=\"file=.txt\"", "file=.txt"),
    ] {
        let body = lf(&[
            "----------397236876",
            &format!("Content-Disposition: form-data; {cd}"),
            "Content-Type: text/plain",
            "",
            "Some-file-test-here",
            "----------397236876--",
        ]);
        let m = parse(&body, ct, &Limits::default());
        assert_eq!(m.error, None, "{cd}");
        assert_eq!(s(&m.files[0].filename), filename);
    }
}

#[test]
fn crs_932180_broken_second_part() {
    // 932180 test 3: the second part has no headers and the body ends with another
    // boundary; the first file is still reported.
    let body = lf(&[
        "------WebKitFormBoundaryABCDEFGIJKLMNOPQ",
        "Content-Disposition: form-data; name=\"image\"; filename=\"test.jpg\"",
        "Content-Type: image/jpeg",
        "",
        "... Some content ...",
        "------WebKitFormBoundaryABCDEFGIJKLMNOPQ",
        "",
        "BINARYDATA",
        "--0000--",
    ]);
    let ct = b"multipart/form-data; boundary=----WebKitFormBoundaryABCDEFGIJKLMNOPQ";
    let m = parse(&body, ct, &Limits::default());
    assert_eq!(m.files.len(), 1);
    assert_eq!(s(&m.files[0].filename), "test.jpg");
    assert_eq!(
        m.error.as_deref(),
        Some("Multipart: Final boundary missing.")
    );
    assert_eq!(m.unmatched_boundary_value, 1);
}

// ---- robustness --------------------------------------------------------------

const PIECES: &[&[u8]] = &[
    b"--XyZ",
    b"--XyZ--",
    b"\r\n",
    b"\n",
    b"\r",
    b"\0",
    b"\"",
    b"'",
    b";",
    b":",
    b"=",
    b" ",
    b"\t",
    b"Content-Disposition: form-data; name=",
    b"filename*=",
    b"\\",
    b"\xff",
];

#[test]
fn fuzz_mutations_never_panic() {
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    let seeds = [
        normal_body(),
        lf(&[
            "--XyZ",
            "Content-Disposition: form-data; name=a",
            " folded",
            "",
            "x",
            "--XyZ--",
        ]),
    ];
    let cts: [&[u8]; 4] = [
        CT,
        b"multipart/form-data; boundary=\"XyZ\"",
        b"multipart/form-data boundary = XyZ",
        b"multipart/form-data; boundary=XyZ; charset=x",
    ];
    let limits = Limits {
        max_args: 5,
        multipart_parts: 6,
        max_files: 1,
        ..Limits::default()
    };
    for round in 0..4000 {
        let seed = &seeds[round % seeds.len()];
        let body = mutate(&mut rng, seed, PIECES);
        let ct = mutate(&mut rng, cts[round % cts.len()], PIECES);
        for ct in [&ct[..], cts[round % cts.len()]] {
            let m = parse(&body, ct, &limits);
            assert!(m.args.len() <= limits.max_args);
            for f in &m.files {
                assert!(f.content.end <= body.len() && f.size == f.content.len());
            }
            assert_eq!(m.flags.error, m.error.is_some());
        }
    }
}

#[test]
fn hostile_shapes_stay_fast() {
    // Lines of dashes with a long boundary: a naive scan would be quadratic per line.
    let boundary = "b".repeat(950);
    let ct = format!("multipart/form-data; boundary={boundary}");
    let mut body =
        format!("--{boundary}\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n").into_bytes();
    for _ in 0..500 {
        body.extend_from_slice(&[b'-'; 4000]);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    let m = parse(&body, ct.as_bytes(), &Limits::default());
    assert_eq!(m.error, None);
    assert_eq!(m.args[0].1.len(), 500 * 4002 - 2);
    // Many folded lines: the header stops growing past the line limit.
    let mut body = b"--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\nX-F: 1\r\n".to_vec();
    for _ in 0..100_000 {
        body.extend_from_slice(b" more folded text\r\n");
    }
    body.extend_from_slice(b"\r\nv\r\n--XyZ--\r\n");
    let m = run(&body);
    assert_eq!(m.error.as_deref(), Some("Multipart: Part header too long."));
    assert!(m.part_headers.iter().all(|(_, l)| l.len() <= 2 * BUF));
}
