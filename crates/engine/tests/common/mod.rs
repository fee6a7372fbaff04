//! Shared helpers for the engine's integration tests: loading CRS and running
//! transactions.

#![allow(dead_code)]

pub mod mmdb;
pub mod regression;

use engine::{Intervention, Ruleset, RulesetBuilder, Transaction, TxContext};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The shared folder beside the checkout.
pub fn shared() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared")
}

/// The engine settings every CRS test run uses: blocking, bodies inspected, and the
/// XML/JSON body processor switches that ModSecurity's recommended configuration has.
pub const PREAMBLE: &str = r#"
SecRuleEngine On
SecRequestBodyAccess On
SecResponseBodyAccess On
SecResponseBodyMimeType text/plain text/html text/xml application/json
SecRule REQUEST_HEADERS:Content-Type "@rx ^(?:application(?:/soap\+|/)|text/)xml" "id:200000,phase:1,t:none,t:lowercase,pass,nolog,ctl:requestBodyProcessor=XML"
SecRule REQUEST_HEADERS:Content-Type "@rx ^application/json" "id:200001,phase:1,t:none,t:lowercase,pass,nolog,ctl:requestBodyProcessor=JSON"
"#;

/// CRS v4 from ../shared/crs.
pub fn crs_v4() -> Arc<Ruleset> {
    let crs = shared().join("crs");
    let mut b = RulesetBuilder::new(Arc::new(seclang::FsSource));
    b.add_text(PREAMBLE, "preamble.conf").expect("preamble");
    b.add_file(&crs.join("crs-setup.conf.example"))
        .expect("crs-setup");
    b.add_file(&crs.join("rules/*.conf")).expect("CRS v4 rules");
    Arc::new(b.build().expect("build"))
}

/// Debian's CRS 3.3.4 (the modsecurity-crs package, which .ci/run installs); missing
/// is a failure, not a skip.
pub fn crs_v3() -> Arc<Ruleset> {
    let load = Path::new("/usr/share/modsecurity-crs/owasp-crs.load");
    assert!(
        load.exists(),
        "{} is missing: install Debian's modsecurity-crs (CRS 3.3.4; .ci/run does)",
        load.display()
    );
    let mut b = RulesetBuilder::new(Arc::new(seclang::FsSource));
    b.add_text(PREAMBLE, "preamble.conf").expect("preamble");
    b.add_file(load).expect("CRS 3.3.4");
    Arc::new(b.build().expect("build"))
}

/// A request for tests.
pub struct Req<'a> {
    pub method: &'a str,
    pub uri: &'a str,
    pub headers: Vec<(&'a str, &'a str)>,
    pub body: &'a [u8],
}

/// Browser-like headers.
pub fn browser_headers() -> Vec<(&'static str, &'static str)> {
    vec![
        ("Host", "shop.example.com"),
        (
            "User-Agent",
            "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
        ),
        (
            "Accept",
            "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
        ),
        ("Accept-Language", "en-GB,en;q=0.5"),
        ("Accept-Encoding", "gzip, deflate, br"),
        ("Connection", "keep-alive"),
        ("Cookie", "session=6f1c2a9b; theme=dark; consent=yes"),
    ]
}

/// Runs phases 1 and 2 (and 5); returns the intervention and the transaction.
pub fn run(ruleset: &Arc<Ruleset>, req: &Req<'_>) -> (Option<Intervention>, Transaction) {
    run_tx(Transaction::new(ruleset.clone(), TxContext::default()), req)
}

/// [`run`] on a transaction made by the caller (a site's, for one).
pub fn run_tx(mut tx: Transaction, req: &Req<'_>) -> (Option<Intervention>, Transaction) {
    tx.set_request_line(req.method.as_bytes(), req.uri.as_bytes(), b"HTTP/1.1");
    for (k, v) in &req.headers {
        tx.add_request_header(k.as_bytes(), v.as_bytes());
    }
    let mut out = tx.process_request_headers();
    if out.is_none() {
        if !req.body.is_empty() {
            tx.append_request_body(req.body);
        }
        out = tx.process_request_body();
    }
    tx.process_logging();
    (out, tx)
}
