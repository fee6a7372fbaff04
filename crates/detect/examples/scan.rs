//! Runs every detector on each argument and prints what it finds: a way to see how
//! the detectors read a value.
//!
//! ```text
//! cargo run -p detect --example scan -- "1' OR 1=1--" "<img src=x onerror=alert(1)>"
//! ```

fn main() {
    for arg in std::env::args().skip(1) {
        let value = arg.as_bytes();
        let found: Vec<String> = detect::Class::ALL
            .iter()
            .filter_map(|c| c.scan(value))
            .map(|f| {
                format!(
                    "{} ({}, bytes {}..{})",
                    f.class.name(),
                    f.rule,
                    f.at.start,
                    f.at.end
                )
            })
            .collect();
        if found.is_empty() {
            println!("{arg:?}: nothing");
        } else {
            println!("{arg:?}: {}", found.join("; "));
        }
    }
}
