use super::*;

fn names(inputs: &Inputs) -> Vec<String> {
    inputs
        .entries()
        .iter()
        .map(|e| String::from_utf8_lossy(&e.name).into_owned())
        .collect()
}

fn value_of<'a>(inputs: &'a Inputs, name: &str) -> Option<&'a [u8]> {
    inputs
        .entries()
        .iter()
        .find(|e| e.name == name.as_bytes())
        .map(|e| &e.value[..])
}

fn request() -> RequestData {
    RequestData {
        filename: b"/api/items/1' or '1'='1".to_vec(),
        uri_raw: b"/api/items/1%27%20or%20%271%27=%271?q=hello".to_vec(),
        args_get: vec![
            (b"q".to_vec(), b"hello".to_vec()),
            (
                b"data".to_vec(),
                b"eyJ1c2VyIjp7Im5hbWUiOiJ4JyBPUiAxPTEtLSJ9fQ==".to_vec(),
            ),
        ],
        headers: vec![
            (b"Host".to_vec(), b"example.com".to_vec()),
            (b"X-Custom".to_vec(), b"${jndi:ldap://x/a}".to_vec()),
            (b"Cookie".to_vec(), b"sid=abc".to_vec()),
        ],
        cookies: vec![(b"sid".to_vec(), b"abc".to_vec())],
        ..RequestData::default()
    }
}

#[test]
fn head_stage_takes_every_placement() {
    let req = request();
    let mut inputs = Inputs::default();
    inputs.fill_head(&req);
    let n = names(&inputs);
    for want in [
        "ARGS:q",
        "ARGS_NAMES:q",
        "ARGS:data",
        "REQUEST_FILENAME",
        "REQUEST_FILENAME:1",
        "REQUEST_FILENAME:3",
        "REQUEST_HEADERS:Host",
        "REQUEST_HEADERS:X-Custom",
        "REQUEST_COOKIES:sid",
        "REQUEST_COOKIES_NAMES:sid",
    ] {
        assert!(n.iter().any(|x| x == want), "{want} missing from {n:?}");
    }
    assert!(!n.iter().any(|x| x == "REQUEST_HEADERS:Cookie"), "{n:?}");
    assert_eq!(
        value_of(&inputs, "REQUEST_FILENAME:3"),
        Some(&b"1' or '1'='1"[..])
    );
    // Decoded: base64, then JSON, with the lineage in the name.
    let leaf = value_of(&inputs, "ARGS:data|base64|json:user.name");
    assert_eq!(leaf, Some(&b"x' OR 1=1--"[..]), "{n:?}");
    let e = inputs
        .entries()
        .iter()
        .find(|e| e.name == b"ARGS:data|base64|json:user.name")
        .unwrap();
    assert_eq!(e.source, Source::Decoded);
    assert_eq!(e.depth, 2);
    let parent = &inputs.entries()[e.parent.unwrap() as usize];
    assert_eq!(parent.name, b"ARGS:data|base64");
    // A second call adds nothing.
    let before = inputs.entries().len();
    inputs.fill_head(&req);
    assert_eq!(inputs.entries().len(), before);
}

#[test]
fn body_stage_takes_arguments_files_xml_and_raw_bodies() {
    let mut req = RequestData {
        args_post: vec![(
            b"json.query".to_vec(),
            br#"{ user(id: "7") { name } }"#.to_vec(),
        )],
        body: b"ignored: parsed by its processor".to_vec(),
        processor: Some(crate::actions::BodyProcessor::Json),
        ..RequestData::default()
    };
    let mut inputs = Inputs::default();
    inputs.fill_body(&req);
    assert_eq!(
        value_of(&inputs, "ARGS:json.query|graphql:id"),
        Some(&b"7"[..]),
        "{:?}",
        names(&inputs)
    );
    assert!(value_of(&inputs, "REQUEST_BODY").is_none());
    // No processor read it: the raw body is an input.
    req.processor = None;
    req.args_post.clear();
    let mut inputs = Inputs::default();
    inputs.fill_body(&req);
    assert_eq!(value_of(&inputs, "REQUEST_BODY"), Some(&req.body[..]));
}

#[test]
fn decoding_is_bounded() {
    // Nested encodings stop at MAX_DEPTH.
    let mut v = b"<script>alert(1)</script>".to_vec();
    for _ in 0..6 {
        v = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &v).into_bytes();
    }
    let req = RequestData {
        args_get: vec![(b"x".to_vec(), v)],
        ..RequestData::default()
    };
    let mut inputs = Inputs::default();
    inputs.fill_head(&req);
    let depth = inputs.entries().iter().map(|e| e.depth).max().unwrap();
    assert_eq!(depth, decode::MAX_DEPTH);
    // Many large values: the decoded bytes stay under the bound.
    let big = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        "a'b ".repeat(100_000),
    )
    .into_bytes();
    let req = RequestData {
        args_get: (0..20)
            .map(|i| (format!("k{i}").into_bytes(), big.clone()))
            .collect(),
        ..RequestData::default()
    };
    let mut inputs = Inputs::default();
    inputs.fill_head(&req);
    let decoded: usize = inputs
        .entries()
        .iter()
        .filter(|e| e.source == Source::Decoded)
        .map(|e| e.value.len())
        .sum();
    assert!(decoded <= decode::MAX_DECODED_BYTES, "{decoded}");
    assert!(inputs.dropped() > 0);
}

#[test]
fn path_segments_keep_encoded_slashes() {
    let req = RequestData {
        filename: b"/api/items//localhost/admin".to_vec(),
        uri_raw: b"http://example.com/api/items/%2F%2Flocalhost%2Fadmin?x=1".to_vec(),
        ..RequestData::default()
    };
    let mut inputs = Inputs::default();
    inputs.fill_head(&req);
    assert_eq!(
        value_of(&inputs, "REQUEST_FILENAME:3"),
        Some(&b"//localhost/admin"[..]),
        "{:?}",
        names(&inputs)
    );
    assert_eq!(raw_path(b"/a/b?c=/d"), b"/a/b");
    assert_eq!(raw_path(b"https://h:8080"), b"");
    assert_eq!(raw_path(b"/x#frag"), b"/x");
}
