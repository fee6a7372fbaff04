//! For the crate's unit tests: one GET through every phase.

use super::Transaction;
use crate::Intervention;

/// Runs a GET of `uri` (Host `example.com`, answered 200) through phases 1 to 5 and
/// gives the first intervention, with the transaction.
pub(crate) fn get(mut tx: Transaction, uri: &str) -> (Option<Intervention>, Transaction) {
    tx.set_request_line(b"GET", uri.as_bytes(), b"HTTP/1.1");
    tx.add_request_header(b"Host", b"example.com");
    let i = tx
        .process_request_headers()
        .or_else(|| tx.process_request_body());
    tx.set_response_status(200, b"HTTP/1.1");
    let i = i
        .or_else(|| tx.process_response_headers())
        .or_else(|| tx.process_response_body());
    tx.process_logging();
    (i, tx)
}
