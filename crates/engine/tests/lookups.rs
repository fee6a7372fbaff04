//! `@rbl` through a resolver hook and `@geoLookup` on a MaxMind database built by
//! the test: names formed as ModSecurity v3 forms them, captures, the lookup
//! limit, failures, GEO filled for later rules, load warnings and errors.

mod common;

use common::mmdb;
use engine::{RblAnswer, RblFailure, RblResolver, Ruleset, RulesetBuilder, Transaction, TxContext};
use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};

/// A resolver that answers from a table and records what it was asked.
#[derive(Debug, Default)]
struct FakeResolver {
    listed: HashMap<String, Ipv4Addr>,
    failing: Vec<String>,
    asked: Mutex<Vec<String>>,
}

impl FakeResolver {
    fn listing(names: &[(&str, [u8; 4])]) -> Arc<FakeResolver> {
        Arc::new(FakeResolver {
            listed: names
                .iter()
                .map(|(n, a)| (n.to_string(), Ipv4Addr::from(*a)))
                .collect(),
            ..Default::default()
        })
    }

    fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

impl RblResolver for FakeResolver {
    fn lookup(&self, name: &str) -> RblAnswer {
        self.asked.lock().unwrap().push(name.to_string());
        if self.failing.iter().any(|f| f == name) {
            return RblAnswer::Failed("server failure".into());
        }
        match self.listed.get(name) {
            Some(a) => RblAnswer::Listed(*a),
            None => RblAnswer::NotListed,
        }
    }
}

fn load(source: seclang::MemorySource, file: &str, resolver: bool) -> Result<Ruleset, String> {
    let text =
        String::from_utf8(seclang::FileSource::read(&source, file.as_ref()).unwrap()).unwrap();
    let mut b = RulesetBuilder::new(Arc::new(source));
    b.rbl_resolver(resolver);
    b.add_text(&text, file).map_err(|e| e.to_string())?;
    b.build().map_err(|e| e.to_string())
}

fn rules(text: &str) -> Arc<Ruleset> {
    let mut src = seclang::MemorySource::new();
    src.insert("/rules/test.conf", text);
    Arc::new(load(src, "/rules/test.conf", true).unwrap_or_else(|e| panic!("{e}")))
}

/// Runs phases 1 and 2 of a GET from `client`; returns the intervention status.
fn run(
    rs: &Arc<Ruleset>,
    client: &str,
    uri: &str,
    resolver: Option<Arc<dyn RblResolver>>,
    limit: Option<usize>,
) -> (Option<u16>, Transaction) {
    let ctx = TxContext {
        client_ip: client.parse().unwrap(),
        rbl: resolver,
        ..Default::default()
    };
    let mut tx = Transaction::new(rs.clone(), ctx);
    if let Some(l) = limit {
        tx.set_rbl_lookup_limit(l);
    }
    tx.set_request_line(b"GET", uri.as_bytes(), b"HTTP/1.1");
    tx.add_request_header(b"Host", b"example.com");
    let mut i = tx.process_request_headers();
    if i.is_none() {
        i = tx.process_request_body();
    }
    tx.process_logging();
    (i.map(|i| i.status), tx)
}

#[test]
fn a_listed_client_address_matches_in_reversed_form() {
    let rs = rules(
        "SecRule REMOTE_ADDR \"@rbl bl.test\" \"id:1,phase:1,deny,status:403,capture,setvar:tx.who=%{TX.0}\"",
    );
    let dns = FakeResolver::listing(&[("7.2.0.192.bl.test", [127, 0, 0, 2])]);
    let (status, tx) = run(&rs, "192.0.2.7", "/", Some(dns.clone()), None);
    assert_eq!(status, Some(403));
    assert_eq!(dns.asked(), vec!["7.2.0.192.bl.test"]);
    // With `capture`, TX.0 is the value looked up.
    assert_eq!(tx.tx_var("who"), Some(&b"192.0.2.7"[..]));

    let (status, mut tx) = run(&rs, "192.0.2.8", "/", Some(dns.clone()), None);
    assert_eq!(status, None);
    assert_eq!(dns.asked().last().unwrap(), "8.2.0.192.bl.test");
    assert!(
        tx.events()
            .filter_map(engine::Event::into_rbl_failure)
            .collect::<Vec<_>>()
            .is_empty()
    );

    // The names a server can resolve before phase 1.
    assert_eq!(
        rs.rbl_client_names("192.0.2.7".parse().unwrap()),
        vec!["7.2.0.192.bl.test"]
    );
    assert!(
        rs.rbl_client_names("2001:db8::1".parse().unwrap())
            .is_empty()
    );
    assert_eq!(rs.rbl_use().client_zones, vec!["bl.test"]);
    assert!(!rs.rbl_use().other_inputs);
}

#[test]
fn httpbl_names_carry_the_access_key() {
    let rule = "SecRule REMOTE_ADDR \"@rbl dnsbl.httpbl.org\" \"id:1,phase:1,deny,status:403\"";
    let dns =
        FakeResolver::listing(&[("abcdefghijkl.7.2.0.192.dnsbl.httpbl.org", [127, 1, 40, 1])]);
    let keyed = rules(&format!("SecHttpBlKey abcdefghijkl\n{rule}"));
    let (status, _) = run(&keyed, "192.0.2.7", "/", Some(dns.clone()), None);
    assert_eq!(status, Some(403));
    assert_eq!(
        keyed.rbl_client_names("192.0.2.7".parse().unwrap()),
        vec!["abcdefghijkl.7.2.0.192.dnsbl.httpbl.org"]
    );
    // Without a key nothing is asked and nothing matches.
    let keyless = rules(rule);
    let (status, _) = run(&keyless, "192.0.2.7", "/", Some(dns.clone()), None);
    assert_eq!(status, None);
    assert_eq!(dns.asked().len(), 1);
    assert!(
        keyless
            .rbl_client_names("192.0.2.7".parse().unwrap())
            .is_empty()
    );
}

/// A server makes only the phases that hold an `@rbl` rule on a value other than the
/// client's address able to wait for a lookup: the rule use names those phases,
/// whether the rule is a chain's first link or a later one.
#[test]
fn other_inputs_are_named_by_phase() {
    let rs = rules(concat!(
        "SecRule REMOTE_ADDR \"@rbl bl.test\" \"id:1,phase:1,deny,status:403\"\n",
        "SecRule TX:real_ip \"@rbl dnsbl.httpbl.org\" \"id:2,phase:2,pass,nolog\"\n",
        "SecRule ARGS \"@rx .\" \"id:3,phase:4,pass,nolog,chain\"\n",
        "    SecRule REQUEST_HEADERS:Referer \"@rbl uribl.test\" \"t:lowercase\"\n",
        "SecRule REMOTE_ADDR \"@rbl bl2.test\" \"id:4,phase:5,pass,nolog\"\n",
    ));
    let used = rs.rbl_use();
    assert!(used.other_inputs);
    assert_eq!(used.other_input_phases(), [false, true, false, true, false]);
    assert_eq!(used.client_zones, vec!["bl.test", "bl2.test"]);
    // Only rules on the client's address: no phase waits.
    let client_only =
        rules("SecRule REMOTE_ADDR \"@rbl bl.test\" \"id:1,phase:2,deny,status:403\"");
    assert!(!client_only.rbl_use().other_inputs);
    assert_eq!(client_only.rbl_use().other_input_phases(), [false; 5]);
}

#[test]
fn other_inputs_are_looked_up_in_domain_form() {
    let rs = rules(
        "SecRule ARGS:site \"@rbl uribl.test\" \"id:1,phase:1,deny,status:403,capture,setvar:tx.site=%{TX.0}\"",
    );
    assert!(rs.rbl_use().other_inputs);
    assert_eq!(
        rs.rbl_use().other_input_phases(),
        [true, false, false, false, false]
    );
    assert!(rs.rbl_use().client_zones.is_empty());
    let dns = FakeResolver::listing(&[("evil.example.uribl.test", [127, 0, 0, 2])]);
    let (status, tx) = run(
        &rs,
        "192.0.2.7",
        "/?site=evil.example",
        Some(dns.clone()),
        None,
    );
    assert_eq!(status, Some(403));
    assert_eq!(tx.tx_var("site"), Some(&b"evil.example"[..]));
    let (status, _) = run(
        &rs,
        "192.0.2.7",
        "/?site=good.example",
        Some(dns.clone()),
        None,
    );
    assert_eq!(status, None);
    // A value that cannot be part of a name is never sent.
    let (status, _) = run(&rs, "192.0.2.7", "/?site=a%20b", Some(dns.clone()), None);
    assert_eq!(status, None);
    assert_eq!(
        dns.asked(),
        vec!["evil.example.uribl.test", "good.example.uribl.test"]
    );
}

#[test]
fn lookups_per_transaction_are_bounded_and_asked_once() {
    let rs = rules(
        "SecRule ARGS \"@rbl uribl.test\" \"id:1,phase:1,pass,log\"\n\
         SecRule ARGS \"@rbl uribl.test\" \"id:2,phase:2,pass,log\"",
    );
    let dns = FakeResolver::listing(&[]);
    let uri = "/?a=h1&b=h2&c=h3&d=h4&e=h5&f=h1";
    let (_, mut tx) = run(&rs, "192.0.2.7", uri, Some(dns.clone()), Some(3));
    // Three distinct names asked, each once, in both rules together.
    assert_eq!(
        dns.asked(),
        vec!["h1.uribl.test", "h2.uribl.test", "h3.uribl.test"]
    );
    let failures = tx
        .events()
        .filter_map(engine::Event::into_rbl_failure)
        .collect::<Vec<_>>();
    assert_eq!(
        failures,
        vec![RblFailure::OverLimit {
            name: "h4.uribl.test".into(),
            limit: 3
        }]
    );
    assert!(
        failures[0].to_string().contains("3 lookups"),
        "{}",
        failures[0]
    );
    // The default limit.
    let dns = FakeResolver::listing(&[]);
    let many: String = (0..20).map(|i| format!("a{i}=n{i}&")).collect();
    let (_, _) = run(
        &rs,
        "192.0.2.7",
        &format!("/?{many}"),
        Some(dns.clone()),
        None,
    );
    assert_eq!(dns.asked().len(), engine::lookups::DEFAULT_RBL_LOOKUPS);
}

#[test]
fn a_failed_lookup_does_not_match_and_is_reported() {
    let rs = rules("SecRule REMOTE_ADDR \"@rbl bl.test\" \"id:1,phase:1,deny,status:403\"");
    let dns = Arc::new(FakeResolver {
        failing: vec!["7.2.0.192.bl.test".into()],
        ..Default::default()
    });
    let (status, mut tx) = run(&rs, "192.0.2.7", "/", Some(dns), None);
    assert_eq!(status, None);
    let f = tx
        .events()
        .filter_map(engine::Event::into_rbl_failure)
        .collect::<Vec<_>>();
    assert_eq!(
        f,
        vec![RblFailure::Failed {
            name: "7.2.0.192.bl.test".into(),
            reason: "server failure".into()
        }]
    );
    assert!(
        tx.events()
            .filter_map(engine::Event::into_rbl_failure)
            .collect::<Vec<_>>()
            .is_empty(),
        "taken once"
    );
    // A negated rule matches what is not listed.
    let rs = rules("SecRule REMOTE_ADDR \"!@rbl bl.test\" \"id:1,phase:1,deny,status:403\"");
    let (status, _) = run(
        &rs,
        "192.0.2.7",
        "/",
        Some(FakeResolver::listing(&[])),
        None,
    );
    assert_eq!(status, Some(403));
    // Without a resolver in the transaction, @rbl never matches.
    let rs = rules("SecRule REMOTE_ADDR \"@rbl bl.test\" \"id:1,phase:1,deny,status:403\"");
    let (status, _) = run(&rs, "192.0.2.7", "/", None, None);
    assert_eq!(status, None);
}

fn geo_source(rules: &str) -> seclang::MemorySource {
    let db = mmdb::build(
        "Palisade-Test-City",
        &[
            (
                Ipv4Addr::new(192, 0, 2, 0),
                24,
                mmdb::city("FR", "France", "Europe", "Paris", "75001", 48.8566, 2.3522),
            ),
            (
                Ipv4Addr::new(198, 51, 100, 0),
                25,
                mmdb::map(vec![(
                    "country",
                    mmdb::map(vec![("iso_code", mmdb::s("NZ"))]),
                )]),
            ),
        ],
    );
    let mut src = seclang::MemorySource::new();
    src.insert("/etc/waf/data/geo.mmdb", db);
    src.insert("/etc/waf/geo.conf", rules);
    src
}

const GEO_RULES: &str = "SecGeoLookupDb data/geo.mmdb\n\
    SecRule REMOTE_ADDR \"@geoLookup\" \"id:1,phase:1,pass,nolog,setvar:tx.city=%{GEO.CITY},setvar:tx.lat=%{GEO.LATITUDE}\"\n\
    SecRule GEO:COUNTRY_CODE \"@streq FR\" \"id:2,phase:1,deny,status:403\"\n\
    SecRule &GEO \"@eq 0\" \"id:3,phase:1,pass,log,setvar:tx.nowhere=1\"\n\
    SecRule REMOTE_ADDR \"!@geoLookup\" \"id:4,phase:1,pass,log,setvar:tx.unknown=1\"";

#[test]
fn the_test_database_reads_back_with_maxminddb() {
    let src = geo_source("");
    let bytes = seclang::FileSource::read(&src, "/etc/waf/data/geo.mmdb".as_ref()).unwrap();
    let reader = maxminddb::Reader::from_source(bytes).unwrap();
    assert_eq!(reader.metadata().database_type, "Palisade-Test-City");
    assert_eq!(reader.metadata().record_size, 24);
    let hit = reader.lookup("192.0.2.200".parse().unwrap()).unwrap();
    let city: maxminddb::geoip2::City = hit.decode().unwrap().unwrap();
    assert_eq!(city.country.iso_code, Some("FR"));
    assert_eq!(city.city.names.english, Some("Paris"));
    assert_eq!(city.location.latitude, Some(48.8566));
    // 198.51.100.0/25 holds 198.51.100.127 but not .128.
    assert!(
        reader
            .lookup("198.51.100.127".parse().unwrap())
            .unwrap()
            .has_data()
    );
    assert!(
        !reader
            .lookup("198.51.100.128".parse().unwrap())
            .unwrap()
            .has_data()
    );
    assert!(
        !reader
            .lookup("203.0.113.1".parse().unwrap())
            .unwrap()
            .has_data()
    );
}

#[test]
fn geolookup_fills_geo_for_later_rules() {
    let src = geo_source(GEO_RULES);
    let rs = Arc::new(load(src, "/etc/waf/geo.conf", false).unwrap());
    assert!(
        !rs.warnings().iter().any(|w| w.contains("@geoLookup")),
        "{:?}",
        rs.warnings()
    );
    let (status, tx) = run(&rs, "192.0.2.10", "/", None, None);
    assert_eq!(status, Some(403));
    assert_eq!(tx.tx_var("city"), Some(&b"Paris"[..]));
    // Coordinates with six decimals, as C's "%f".
    assert_eq!(tx.tx_var("lat"), Some(&b"48.856600"[..]));
    assert_eq!(tx.tx_var("nowhere"), None);
    assert_eq!(tx.tx_var("unknown"), None);
    // An entry with only a country: only COUNTRY_CODE is set.
    let (status, tx) = run(&rs, "198.51.100.3", "/", None, None);
    assert_eq!(status, None);
    assert_eq!(tx.tx_var("city"), Some(&b""[..]));
    assert_eq!(tx.tx_var("nowhere"), None);
    // No entry: no match, GEO stays empty.
    let (status, tx) = run(&rs, "203.0.113.1", "/", None, None);
    assert_eq!(status, None);
    assert_eq!(tx.tx_var("nowhere"), Some(&b"1"[..]));
    assert_eq!(tx.tx_var("unknown"), Some(&b"1"[..]));
    // An IPv6 client in an IPv4 database: no entry.
    let (status, tx) = run(&rs, "2001:db8::1", "/", None, None);
    assert_eq!(status, None);
    assert_eq!(tx.tx_var("unknown"), Some(&b"1"[..]));
}

#[test]
fn geolookup_takes_ip_literals_from_any_variable() {
    let src = geo_source(
        "SecGeoLookupDb data/geo.mmdb\n\
         SecRule ARGS:ip \"@geoLookup\" \"id:1,phase:1,pass,nolog\"\n\
         SecRule GEO:country_code \"@streq NZ\" \"id:2,phase:1,deny,status:403\"",
    );
    let rs = Arc::new(load(src, "/etc/waf/geo.conf", false).unwrap());
    assert_eq!(
        run(&rs, "192.0.2.10", "/?ip=198.51.100.9", None, None).0,
        Some(403)
    );
    // Host names are not resolved.
    assert_eq!(run(&rs, "192.0.2.10", "/?ip=localhost", None, None).0, None);
}

#[test]
fn load_warnings_until_a_resolver_or_database_is_configured() {
    let text = "SecRule REMOTE_ADDR \"@rbl bl.test\" \"id:1,phase:1,pass\"\n\
                SecRule REMOTE_ADDR \"@geoLookup\" \"id:2,phase:1,pass\"";
    let mut src = seclang::MemorySource::new();
    src.insert("/r/lookups.conf", text);
    let rs = load(src, "/r/lookups.conf", false).unwrap();
    let w = rs.warnings().join("\n");
    assert!(
        w.contains("lookups.conf:1") && w.contains("@rbl never matches"),
        "{w}"
    );
    assert!(
        w.contains("lookups.conf:2") && w.contains("SecGeoLookupDb"),
        "{w}"
    );
    // With a resolver and a database (the directive may come after the rule).
    let src = geo_source(&format!("{text}\nSecGeoLookupDb data/geo.mmdb"));
    let rs = load(src, "/etc/waf/geo.conf", true).unwrap();
    assert!(rs.warnings().is_empty(), "{:?}", rs.warnings());
}

#[test]
fn load_errors_name_the_directive_file_and_line() {
    let mut src = seclang::MemorySource::new();
    src.insert(
        "/r/geo.conf",
        "SecRuleEngine On\nSecGeoLookupDb missing.mmdb",
    );
    let e = load(src, "/r/geo.conf", false).unwrap_err();
    assert!(
        e.contains("geo.conf:2") && e.contains("SecGeoLookupDb") && e.contains("missing.mmdb"),
        "{e}"
    );
    let mut src = seclang::MemorySource::new();
    src.insert("/r/bad.mmdb", "not a database");
    src.insert("/r/geo.conf", "SecGeoLookupDb bad.mmdb");
    let e = load(src, "/r/geo.conf", false).unwrap_err();
    assert!(
        e.contains("geo.conf:1") && e.contains("/r/bad.mmdb is not a MaxMind database"),
        "{e}"
    );
    let mut src = seclang::MemorySource::new();
    src.insert(
        "/r/rbl.conf",
        "SecRule REMOTE_ADDR \"@rbl\" \"id:1,phase:1,pass\"",
    );
    let e = load(src, "/r/rbl.conf", true).unwrap_err();
    assert!(e.contains("rbl.conf:1") && e.contains("zone"), "{e}");
    let mut src = seclang::MemorySource::new();
    src.insert("/r/key.conf", "SecHttpBlKey \"not a key\"");
    let e = load(src, "/r/key.conf", true).unwrap_err();
    assert!(
        e.contains("key.conf:1") && e.contains("SecHttpBlKey"),
        "{e}"
    );
}

/// Phase 2 of a GET with `uri`, pausing for lookups when `pause`; returns the
/// intervention status, whether the phase paused, the names asked by then, and the
/// transaction (phase 2 finished).
fn phase2_pausing(
    rs: &Arc<Ruleset>,
    uri: &str,
    dns: &Arc<FakeResolver>,
    pause: bool,
) -> (Option<u16>, bool, Vec<String>, Transaction) {
    let ctx = TxContext {
        client_ip: "192.0.2.7".parse().unwrap(),
        rbl: Some(dns.clone() as Arc<dyn RblResolver>),
        ..Default::default()
    };
    let mut tx = Transaction::new(rs.clone(), ctx);
    tx.set_request_line(b"GET", uri.as_bytes(), b"HTTP/1.1");
    tx.add_request_header(b"Host", b"example.com");
    tx.set_pause_for_lookups(pause);
    assert_eq!(tx.process_request_headers(), None);
    assert!(!tx.paused(), "phase 1 holds no lookup");
    let mut i = tx.process_request_body();
    let paused = tx.paused();
    let asked = dns.asked();
    if paused {
        assert_eq!(i, None, "a paused phase returns no intervention");
        i = tx.resume_phase();
        assert!(!tx.paused());
    }
    (i.map(|i| i.status), paused, asked, tx)
}

/// A phase that pauses before an `@rbl` rule on a request value and is resumed ends
/// as the phase run in one go: the rules before the pause acted once, the `@rbl`
/// rule and the rules after it ran on resuming (the walk's skips included), and
/// no lookup was made before the pause. A phase whose walk skips the `@rbl` rule
/// never pauses.
#[test]
fn a_phase_paused_for_a_lookup_resumes_where_it_stopped() {
    let rs = rules(concat!(
        "SecAction \"id:1,phase:2,pass,nolog,setvar:tx.before=+1\"\n",
        "SecRule ARGS:skip \"@streq yes\" \"id:2,phase:2,pass,nolog,skipAfter:END-LOOKUP\"\n",
        "SecRule ARGS:site \"@rbl uribl.test\" \"id:3,phase:2,pass,nolog,setvar:tx.listed=+1\"\n",
        "SecAction \"id:4,phase:2,pass,nolog,skip:1,setvar:tx.after=+1\"\n",
        "SecAction \"id:5,phase:2,pass,nolog,setvar:tx.skipped=1\"\n",
        "SecMarker END-LOOKUP\n",
        "SecRule TX:listed \"@eq 1\" \"id:6,phase:2,deny,status:403\"\n",
        "SecAction \"id:7,phase:2,pass,nolog,setvar:tx.end=+1\"\n",
    ));
    for (uri, listed) in [
        ("/?site=evil.example", true),
        ("/?site=good.example", false),
    ] {
        let dns = FakeResolver::listing(&[("evil.example.uribl.test", [127, 0, 0, 2])]);
        let (whole, paused, _, one_go) = phase2_pausing(&rs, uri, &dns, false);
        assert!(!paused);
        let dns = FakeResolver::listing(&[("evil.example.uribl.test", [127, 0, 0, 2])]);
        let (resumed, paused, asked, tx) = phase2_pausing(&rs, uri, &dns, true);
        assert!(paused, "{uri}: the walk reaches rule 3");
        assert!(
            asked.is_empty(),
            "{uri}: a lookup before the pause: {asked:?}"
        );
        assert_eq!(resumed, whole, "{uri}");
        assert_eq!(resumed, listed.then_some(403), "{uri}");
        for var in ["before", "listed", "after", "skipped", "end"] {
            assert_eq!(tx.tx_var(var), one_go.tx_var(var), "{uri}: tx.{var}");
        }
        assert_eq!(tx.tx_var("before"), Some(&b"1"[..]), "{uri}");
        assert_eq!(tx.tx_var("after"), Some(&b"1"[..]), "{uri}");
        assert_eq!(tx.tx_var("skipped"), None, "{uri}");
        assert_eq!(dns.asked(), vec![uri[7..].to_string() + ".uribl.test"]);
    }
    // The walk jumps over rule 3: no pause, no lookup.
    let dns = FakeResolver::listing(&[]);
    let (status, paused, _, tx) = phase2_pausing(&rs, "/?site=a.example&skip=yes", &dns, true);
    assert!(!paused);
    assert_eq!(status, None);
    assert!(dns.asked().is_empty());
    assert_eq!(tx.tx_var("end"), Some(&b"1"[..]));
    assert_eq!(tx.tx_var("after"), None);
}

/// A later phase started while one is paused drops the rest of the paused one
/// (the server refused the request instead of resuming).
#[test]
fn starting_another_phase_drops_a_paused_one() {
    let rs = rules(concat!(
        "SecRule ARGS:site \"@rbl uribl.test\" \"id:1,phase:2,pass,nolog\"\n",
        "SecAction \"id:2,phase:2,pass,nolog,setvar:tx.after=1\"\n",
        "SecAction \"id:3,phase:5,pass,nolog,setvar:tx.logged=1\"\n",
    ));
    let dns = FakeResolver::listing(&[]);
    let ctx = TxContext {
        client_ip: "192.0.2.7".parse().unwrap(),
        rbl: Some(dns.clone() as Arc<dyn RblResolver>),
        ..Default::default()
    };
    let mut tx = Transaction::new(rs, ctx);
    tx.set_request_line(b"GET", b"/?site=a.example", b"HTTP/1.1");
    tx.set_pause_for_lookups(true);
    assert_eq!(tx.process_request_headers(), None);
    assert_eq!(tx.process_request_body(), None);
    assert!(tx.paused());
    tx.process_logging();
    assert!(!tx.paused());
    assert_eq!(tx.resume_phase(), None);
    assert_eq!(tx.tx_var("after"), None);
    assert_eq!(tx.tx_var("logged"), Some(&b"1"[..]));
    assert!(dns.asked().is_empty());
}

/// A phase walked in slices ([`Transaction::set_slice`]: here a pause before
/// every rule but the first of each slice) ends as the phase walked in one go:
/// the same intervention and variables, skips and chains included.
#[test]
fn a_phase_walked_in_slices_ends_as_one_walk() {
    let rs = rules(concat!(
        "SecAction \"id:1,phase:2,pass,nolog,setvar:tx.before=+1\"\n",
        "SecRule ARGS:skip \"@streq yes\" \"id:2,phase:2,pass,nolog,skipAfter:END\"\n",
        "SecRule ARGS:site \"@rbl uribl.test\" \"id:3,phase:2,pass,nolog,setvar:tx.listed=+1\"\n",
        "SecAction \"id:4,phase:2,pass,nolog,skip:1,setvar:tx.after=+1\"\n",
        "SecAction \"id:5,phase:2,pass,nolog,setvar:tx.skipped=1\"\n",
        "SecRule ARGS:a \"@streq 1\" \"id:8,phase:2,pass,nolog,chain\"\n",
        "  SecRule ARGS:b \"@streq 2\" \"setvar:tx.chained=1\"\n",
        "SecMarker END\n",
        "SecRule TX:listed \"@eq 1\" \"id:6,phase:2,deny,status:403\"\n",
        "SecAction \"id:7,phase:2,pass,nolog,setvar:tx.end=+1\"\n",
    ));
    let run = |uri: &str, slice: Option<u64>| {
        let dns = FakeResolver::listing(&[("evil.example.uribl.test", [127, 0, 0, 2])]);
        let ctx = TxContext {
            client_ip: "192.0.2.7".parse().unwrap(),
            rbl: Some(dns as Arc<dyn RblResolver>),
            ..Default::default()
        };
        let mut tx = Transaction::new(rs.clone(), ctx);
        tx.set_request_line(b"GET", uri.as_bytes(), b"HTTP/1.1");
        tx.set_slice(slice);
        assert_eq!(tx.process_request_headers(), None);
        let mut out = tx.process_request_body();
        let mut pauses = 0;
        while tx.paused() {
            assert_eq!(out, None, "a paused phase returns no intervention");
            pauses += 1;
            out = tx.resume_phase();
        }
        (out.map(|i| i.status), pauses, tx)
    };
    for uri in [
        "/?site=evil.example&a=1&b=2",
        "/?site=good.example&a=1&b=3",
        "/?site=evil.example&skip=yes",
    ] {
        let (whole, pauses, one_go) = run(uri, None);
        assert_eq!(pauses, 0);
        let (sliced, pauses, tx) = run(uri, Some(0));
        assert!(pauses >= 3, "{uri}: {pauses} pauses");
        assert_eq!(sliced, whole, "{uri}");
        for var in ["before", "listed", "after", "skipped", "chained", "end"] {
            assert_eq!(tx.tx_var(var), one_go.tx_var(var), "{uri}: tx.{var}");
        }
    }
}

/// A slice is counted from where the walk began or resumed: with a slice of
/// about ten rules' work, a walk of 100 rules pauses about ten times, each
/// resumed walk going through several rules (not one rule per resume once the
/// first slice is used up).
#[test]
fn each_resumed_walk_gets_a_whole_slice() {
    let mut text = String::new();
    for id in 1..=100 {
        text.push_str(&format!(
            "SecAction \"id:{id},phase:2,pass,nolog,setvar:tx.n=+1\"\n"
        ));
    }
    let rs = rules(&text);
    let mut tx = Transaction::new(rs, TxContext::default());
    tx.set_request_line(b"GET", b"/", b"HTTP/1.1");
    // RULE_WORK (256 units) is charged per rule; setvar adds its own.
    tx.set_slice(Some(10 * 256));
    assert_eq!(tx.process_request_headers(), None);
    let mut out = tx.process_request_body();
    let mut pauses = 0;
    while tx.paused() {
        assert_eq!(out, None);
        pauses += 1;
        out = tx.resume_phase();
    }
    assert_eq!(out, None);
    assert_eq!(tx.tx_var("n"), Some(&b"100"[..]));
    assert!(
        (3..=40).contains(&pauses),
        "{pauses} pauses for 100 rules in slices of about 10"
    );
}
