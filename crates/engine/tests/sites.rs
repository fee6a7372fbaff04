//! Per-site policies over CRS v4 loaded once: paranoia levels seeded per site, a
//! DetectionOnly site, an exclusion for one path of one site, removals that stay in
//! their site, and the base shared (not copied) by every site.

mod common;

use common::{Req, browser_headers};
use engine::{Intervention, Policy, PolicyBuilder, Ruleset, Transaction, TxContext};
use std::sync::{Arc, OnceLock};

/// CRS v4, loaded once for every test of this file.
fn crs() -> &'static Arc<Ruleset> {
    static CRS: OnceLock<Arc<Ruleset>> = OnceLock::new();
    CRS.get_or_init(common::crs_v4)
}

fn site(name: &str, setup: impl FnOnce(&mut PolicyBuilder)) -> Arc<Policy> {
    let mut b = PolicyBuilder::new(crs(), name, Arc::new(seclang::FsSource));
    setup(&mut b);
    let site = b.build().expect("site builds");
    site.check_jumps()
        .expect("the site's walk jumps where the stepwise walk went");
    Arc::new(site)
}

/// Runs phases 1, 2 and 5 of `req` for `site` (the plain base without one).
fn run(site: Option<&Arc<Policy>>, req: &Req<'_>) -> (Option<Intervention>, Transaction) {
    let tx = match site {
        Some(p) => Transaction::with_policy(p.clone(), TxContext::default()),
        None => Transaction::new(crs().clone(), TxContext::default()),
    };
    common::run_tx(tx, req)
}

fn get<'a>(uri: &'a str, headers: Vec<(&'a str, &'a str)>) -> Req<'a> {
    Req {
        method: "GET",
        uri,
        headers,
        body: b"",
    }
}

/// Browser headers without a User-Agent: CRS's 920320 (paranoia level 2).
fn no_user_agent() -> Vec<(&'static str, &'static str)> {
    browser_headers()
        .into_iter()
        .filter(|(k, _)| *k != "User-Agent")
        .collect()
}

/// Browser headers with a scanner's User-Agent: CRS's 913100 (level 1, critical:
/// it alone reaches the blocking score).
fn scanner() -> Vec<(&'static str, &'static str)> {
    let mut h: Vec<_> = browser_headers()
        .into_iter()
        .filter(|(k, _)| *k != "User-Agent")
        .collect();
    h.push(("User-Agent", "Nikto/2.5.0"));
    h
}

#[test]
fn a_paranoia_level_2_rule_fires_on_the_level_2_site_only() {
    let pl2 = site("pl2", |b| {
        b.paranoia_level(2, None).unwrap();
    });
    let pl1 = site("pl1", |b| {
        b.paranoia_level(1, None).unwrap();
    });
    let plain = site("plain", |_| {});
    let req = get("/products?page=2", no_user_agent());
    for _ in 0..2 {
        let (_, tx) = run(Some(&pl2), &req);
        assert!(
            tx.matched_rule_ids().contains(&920320),
            "{:?}",
            tx.matched_rule_ids()
        );
        assert_eq!(tx.tx_var("blocking_paranoia_level"), Some(&b"2"[..]));
        for (what, p) in [("pl1", Some(&pl1)), ("plain", Some(&plain)), ("base", None)] {
            let (_, tx) = run(p, &req);
            assert!(
                !tx.matched_rule_ids().contains(&920320),
                "{what}: {:?}",
                tx.matched_rule_ids()
            );
            assert_eq!(tx.tx_var("blocking_paranoia_level"), Some(&b"1"[..]));
        }
    }
    // Attacks are blocked at both levels; benign requests pass at both.
    let attack = get("/item?id=1'%20OR%20'1'='1", browser_headers());
    for p in [&pl2, &pl1] {
        assert_eq!(run(Some(p), &attack).0.map(|i| i.status), Some(403));
        let (i, tx) = run(
            Some(p),
            &get("/products/list?category=books", browser_headers()),
        );
        assert!(i.is_none(), "{}: {:?}", p.name(), tx.matched_rule_ids());
    }
    // A seeded level is a different walk than the base's: those sites have fold
    // tables of their own; a site that seeds nothing uses the base's.
    assert!(pl2.own_folds() && pl1.own_folds());
    assert!(plain.keeps_folds() && !plain.own_folds());
}

/// CRS v4 built at paranoia level `level` the usual way (crs-setup's 900000).
fn crs_at(level: u8) -> Arc<Ruleset> {
    let crs = common::shared().join("crs");
    let mut b = engine::RulesetBuilder::new(Arc::new(seclang::FsSource));
    b.add_text(common::PREAMBLE, "preamble.conf").unwrap();
    b.add_file(&crs.join("crs-setup.conf.example")).unwrap();
    b.add_text(
        &format!(
            "SecAction \"id:900000,phase:1,pass,t:none,nolog,setvar:tx.blocking_paranoia_level={level}\""
        ),
        "level.conf",
    )
    .unwrap();
    b.add_file(&crs.join("rules/*.conf")).unwrap();
    Arc::new(b.build().unwrap())
}

/// A site's paranoia level gives the verdicts, matches and scores of CRS built at
/// that level, request by request: the site's own fold table stands for the rules
/// as written.
#[test]
fn a_site_at_a_paranoia_level_matches_crs_built_at_that_level() {
    let uas = ["", "curl/8.5.0", "Nikto/2.5.0"];
    let targets = [
        "/products/list?category=books&page=2&sort=price",
        "/item?id=1'%20OR%20'1'='1",
        "/search?q=%3Cscript%3Ealert(1)%3C/script%3E",
        "/download?file=../../../../etc/passwd",
        "/a?x=1;cat%20/etc/passwd",
        "/index.php?page=php://filter/resource=index",
        "/api?q=select%20*%20from%20users%20where%20id=1",
        "/b?c=<a%20href=x>t</a>&d=1--",
        "/page?x=%00&y=%ff",
        "/x?a=1&a=2&a=3&b=~!@#$%25^&*()",
    ];
    for level in [2u8, 3] {
        let native = crs_at(level);
        let site = site(&format!("pl{level}"), |b| {
            b.paranoia_level(level, None).unwrap();
        });
        assert!(site.own_folds());
        for ua in uas {
            for target in targets {
                let mut headers: Vec<_> = browser_headers()
                    .into_iter()
                    .filter(|(k, _)| *k != "User-Agent")
                    .collect();
                if !ua.is_empty() {
                    headers.push(("User-Agent", ua));
                }
                let req = get(target, headers);
                let (want, tx_native) = {
                    let mut tx = Transaction::new(native.clone(), TxContext::default());
                    tx.set_request_line(b"GET", target.as_bytes(), b"HTTP/1.1");
                    for (k, v) in &req.headers {
                        tx.add_request_header(k.as_bytes(), v.as_bytes());
                    }
                    let i = tx
                        .process_request_headers()
                        .or_else(|| tx.process_request_body());
                    tx.process_logging();
                    (i, tx)
                };
                let (got, tx_site) = run(Some(&site), &req);
                let what = format!("PL{level} {target} UA {ua:?}");
                assert_eq!(
                    got.map(|i| (i.status, i.rule_id)),
                    want.map(|i| (i.status, i.rule_id)),
                    "{what}"
                );
                assert_eq!(
                    tx_site.matched_rule_ids(),
                    tx_native.matched_rule_ids(),
                    "{what}"
                );
                assert_eq!(
                    tx_site.anomaly_scores(),
                    tx_native.anomaly_scores(),
                    "{what}"
                );
            }
        }
    }
}

#[test]
fn a_detection_only_site_passes_an_attack_and_logs_it() {
    let watch = site("watch", |b| {
        b.rule_engine(engine::RuleEngineMode::DetectionOnly);
    });
    let attack = get(
        "/search?q=%3Cscript%3Ealert(1)%3C/script%3E",
        browser_headers(),
    );
    let (i, mut tx) = run(Some(&watch), &attack);
    assert!(i.is_none(), "DetectionOnly blocked: {i:?}");
    let ids = tx.matched_rule_ids();
    assert!(ids.contains(&941100) && ids.contains(&949110), "{ids:?}");
    assert!(tx.anomaly_scores().0 >= 5);
    assert!(
        tx.events()
            .filter_map(engine::Event::into_log_line)
            .collect::<Vec<_>>()
            .iter()
            .any(|l| l.contains("[id \"949110\"]"))
    );
    // The same request on the base is blocked.
    let (i, _) = run(None, &attack);
    assert_eq!(i.map(|i| (i.status, i.rule_id)), Some((403, Some(949110))));
}

#[test]
fn an_exclusion_for_one_path_of_one_site() {
    // The REQUEST-900 way: a rule of the site's removes a CRS rule for one path,
    // at run time.
    let shop = site("shop", |b| {
        b.add_text(
            r#"SecRule REQUEST_FILENAME "@beginsWith /scan/" "id:10001,phase:1,pass,nolog,ctl:ruleRemoveById=913100""#,
            "shop.conf",
        )
        .unwrap();
    });
    let blog = site("blog", |_| {});
    let on = |p: Option<&Arc<Policy>>, uri: &str| run(p, &get(uri, scanner())).0.map(|i| i.status);
    assert_eq!(on(Some(&shop), "/scan/report"), None);
    assert_eq!(on(Some(&shop), "/other"), Some(403));
    assert_eq!(on(Some(&blog), "/scan/report"), Some(403));
    assert_eq!(on(None, "/scan/report"), Some(403));
    assert!(shop.keeps_folds());
}

#[test]
fn configure_time_removals_stay_in_their_site() {
    let by_id = site("by-id", |b| {
        b.add_text("SecRuleRemoveById 913100", "a.conf").unwrap();
    });
    let by_tag = site("by-tag", |b| {
        b.add_text("SecRuleRemoveByTag attack-reputation-scanner", "b.conf")
            .unwrap();
    });
    let target = site("target", |b| {
        b.add_text(
            r#"SecRuleUpdateTargetById 913100 "!REQUEST_HEADERS:User-Agent""#,
            "c.conf",
        )
        .unwrap();
    });
    let strict = site("strict", |_| {});
    let req = get("/", scanner());
    for _ in 0..3 {
        for p in [&by_id, &by_tag, &target] {
            let (i, tx) = run(Some(p), &req);
            assert!(i.is_none(), "{}: {:?}", p.name(), tx.matched_rule_ids());
            assert_eq!(run(Some(&strict), &req).0.map(|i| i.status), Some(403));
            assert_eq!(run(None, &req).0.map(|i| i.status), Some(403));
        }
    }
    assert!(by_id.removes(913100) && by_tag.removes(913100) && !strict.removes(913100));
    // An exclusion naming a rule CRS does not have is refused, with its place.
    let mut b = PolicyBuilder::new(crs(), "typo", Arc::new(seclang::FsSource));
    let e = b
        .add_text("\nSecRuleRemoveById 913101", "typo.conf")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("typo.conf:2") && e.contains("no rule with id 913101"),
        "{e}"
    );
}

#[test]
fn twenty_sites_share_one_compiled_base() {
    let sites: Vec<Arc<Policy>> = (0..20)
        .map(|i| {
            site(&format!("site{i}"), |b| {
                b.add_text(
                    &format!(
                        "SecRuleRemoveById 920350\nSecRuleUpdateTargetById 942100 \"!ARGS:q{i}\"\n\
                         SecRule REQUEST_FILENAME \"@beginsWith /api{i}/\" \"id:{},phase:1,pass,nolog,ctl:ruleRemoveByTag=attack-xss\"",
                        20000 + i
                    ),
                    &format!("site{i}.conf"),
                )
                .unwrap();
            })
        })
        .collect();
    for (i, p) in sites.iter().enumerate() {
        assert!(Arc::ptr_eq(p.base(), crs()));
        assert_eq!(p.rule_count(), 1, "site {i}");
        assert!(p.keeps_folds(), "site {i}");
    }
    // Each site's exclusion is its own.
    let xss = |i: usize, j: usize| {
        let uri = format!("/api{j}/x?q=%3Cscript%3Ealert(1)%3C/script%3E");
        run(Some(&sites[i]), &get(&uri, browser_headers()))
            .0
            .map(|i| i.status)
    };
    assert_eq!(xss(3, 3), None);
    assert_eq!(xss(3, 4), Some(403));
    assert_eq!(xss(4, 4), None);
}
