//! The Debian package (`scripts/package-deb`), installed on a clean root and started
//! the way its systemd unit starts it.
//!
//! The package is built from this build's `palisade` (or taken from `PALISADE_DEB`,
//! as `scripts/test-all` does with the release package), unpacked with `dpkg-deb -x`
//! into an empty directory, and checked: its files and their modes, its control
//! fields and conffiles, its maintainer scripts (`sh -n`), the logrotate snippet and
//! the unit (the hardening keys, then `systemd-analyze verify`). Then the installed
//! binary runs with the unit's `ExecStart=` arguments, a clean environment and
//! `NOTIFY_SOCKET` naming a datagram socket this test listens on, with the installed
//! default configuration adapted only in its ports and paths (a free loopback
//! listener and admin port, this test's backend, this test's directories for
//! /var/log/palisade, /var/lib/palisade and /usr/share/palisade); the rules are
//! Debian's CRS as the default configuration names them. Run by root, the binary
//! runs as `nobody` with only CAP_NET_BIND_SERVICE (setpriv, as the unit's `User=`,
//! `AmbientCapabilities=`, `CapabilityBoundingSet=` and `NoNewPrivileges=` do) and
//! listens on a port below 1024. It must report READY=1,
//! send watchdog pings, answer 200 to a benign request and 403 to an attack, report
//! RELOADING=1/READY=1 around `ExecReload=`, and STOPPING=1 before it exits.
//!
//! Needs dpkg-deb, systemd-analyze and Debian's modsecurity-crs: without them the
//! test fails, unless `PALISADE_ALLOW_SKIP=1`.

mod common;

use common::*;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The repository's root.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The package to test: `PALISADE_DEB`, or one built from this build's binary.
fn package(dir: &TempDir) -> PathBuf {
    if let Some(p) = std::env::var_os("PALISADE_DEB") {
        return PathBuf::from(p);
    }
    let out = Command::new(repo().join("scripts/package-deb"))
        .args(["--binary", palisade_bin(), "--compression", "gzip", "--out"])
        .arg(dir.path("out"))
        .stderr(Stdio::inherit())
        .output()
        .expect("running scripts/package-deb");
    assert!(out.status.success(), "scripts/package-deb failed");
    let text = String::from_utf8_lossy(&out.stdout);
    PathBuf::from(text.lines().last().expect("the package's path").trim())
}

/// The user and group (`nobody`, `nogroup`) the binary runs as when this test runs
/// as root and setpriv (util-linux) is there to drop privileges the way the unit does;
/// `None` otherwise.
fn unprivileged() -> Option<(u32, u32)> {
    let root = run(Command::new("id").arg("-u")).trim() == "0";
    (root && Path::new("/usr/bin/setpriv").exists()).then_some((65534, 65534))
}

/// A free loopback port below 1024 that only CAP_NET_BIND_SERVICE lets a user other
/// than root bind (below `net.ipv4.ip_unprivileged_port_start`); `None` (and a note)
/// where every user may bind low ports (containers often set the limit to 0), which
/// would not show the capability at work.
fn privileged_port() -> Option<u16> {
    let start = std::fs::read_to_string("/proc/sys/net/ipv4/ip_unprivileged_port_start")
        .ok()
        .and_then(|s| s.trim().parse::<u16>().ok())
        .unwrap_or(1024)
        .min(1024);
    if start <= 800 {
        eprintln!(
            "note: net.ipv4.ip_unprivileged_port_start is {start}: any user binds low ports here, so the listener takes an ordinary port"
        );
        return None;
    }
    let offset = (std::process::id() % 200) as u16;
    let port = (0..200)
        .map(|i| 600 + (offset + i) % 200)
        .find(|&p| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok())
        .expect("a free port between 600 and 800");
    Some(port)
}

/// `KEY=VALUE` lines of a systemd unit, by section, in order (a key may repeat).
fn unit_keys(text: &str) -> BTreeMap<String, Vec<(String, String)>> {
    let mut out: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    let mut section = String::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(s) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = s.to_owned();
            continue;
        }
        let (k, v) = line.split_once('=').expect("KEY=VALUE");
        out.entry(section.clone())
            .or_default()
            .push((k.trim().to_owned(), v.trim().to_owned()));
    }
    out
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        output_text(&out)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Replaces `from` by `to` in `text`, which must hold it exactly `times` times: the
/// default configuration is adapted in its ports and paths, nothing else.
fn swap(text: &mut String, from: &str, to: &str, times: usize) {
    assert_eq!(
        text.matches(from).count(),
        times,
        "{from:?} should be there {times} time(s):\n{text}"
    );
    *text = text.replace(from, to);
}

/// Collects notification datagrams until one holds `want` (a `KEY=VALUE` line), or
/// `limit` passes, or the process exits; returns every message received meanwhile.
fn wait_for_notification(
    sock: &UnixDatagram,
    want: &str,
    limit: Duration,
    p: &mut Palisade,
) -> Vec<String> {
    let deadline = Instant::now() + limit;
    let mut seen = Vec::new();
    let mut buf = vec![0u8; 4096];
    loop {
        match sock.recv(&mut buf) {
            Ok(n) => {
                let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
                let found = msg.lines().any(|l| l == want);
                seen.push(msg);
                if found {
                    return seen;
                }
            }
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(e) => panic!("reading the notification socket: {e}"),
        }
        if let Ok(Some(status)) = p.child.try_wait() {
            panic!(
                "palisade exited ({status}) before {want}; notifications {seen:?}; stderr:\n{}",
                p.stderr_text()
            );
        }
        assert!(
            Instant::now() < deadline,
            "no {want} in {limit:?}; notifications {seen:?}; stderr:\n{}",
            p.stderr_text()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_package_installs_on_a_clean_root_and_serves_as_its_unit_starts_it() {
    let crs = Path::new("/usr/share/modsecurity-crs/rules");
    if required(Path::new("/usr/bin/dpkg-deb"), "building the .deb (dpkg)").is_none()
        || required(crs, "the default configuration (Debian's modsecurity-crs)").is_none()
        || required(
            Path::new("/usr/bin/systemd-analyze"),
            "systemd-analyze verify on the unit (systemd)",
        )
        .is_none()
    {
        return;
    }
    let dir = TempDir::new("package");
    let deb = package(&dir);
    assert!(deb.is_file(), "{}", deb.display());

    // --- Control fields, conffiles, maintainer scripts.
    let field = |name: &str| {
        run(Command::new("dpkg-deb").arg("-f").arg(&deb).arg(name))
            .trim()
            .to_owned()
    };
    assert_eq!(field("Package"), "palisade");
    let depends = field("Depends");
    for dep in ["modsecurity-crs", "adduser", "libc6 (>= "] {
        assert!(depends.contains(dep), "Depends: {depends}");
    }
    let control = dir.path("control");
    run(Command::new("dpkg-deb").arg("-e").arg(&deb).arg(&control));
    let conffiles = std::fs::read_to_string(control.join("conffiles")).unwrap();
    let mut conffiles: Vec<&str> = conffiles.lines().collect();
    conffiles.sort();
    assert_eq!(
        conffiles,
        ["/etc/logrotate.d/palisade", "/etc/palisade/palisade.toml"]
    );
    for script in ["postinst", "prerm", "postrm"] {
        let p = control.join(script);
        let mode = std::fs::metadata(&p).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755, "{script} mode {mode:o}");
        run(Command::new("sh").arg("-n").arg(&p));
    }
    let postinst = std::fs::read_to_string(control.join("postinst")).unwrap();
    for what in [
        "adduser --system",
        "/etc/palisade/admin.token",
        "daemon-reload",
    ] {
        assert!(postinst.contains(what), "postinst lacks {what}");
    }

    // --- Every file root-owned, with its mode.
    let listing = run(Command::new("dpkg-deb").arg("-c").arg(&deb));
    for line in listing.lines() {
        assert!(line.contains(" root/root "), "not root-owned: {line}");
    }
    let root = dir.path("root");
    std::fs::create_dir_all(&root).unwrap();
    run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root));
    let mode = |p: &str| {
        std::fs::metadata(root.join(p))
            .unwrap_or_else(|e| panic!("{p}: {e}"))
            .permissions()
            .mode()
            & 0o7777
    };
    for (path, want) in [
        ("usr/bin/palisade", 0o755),
        ("usr/lib/systemd/system/palisade.service", 0o644),
        ("etc/palisade/palisade.toml", 0o644),
        ("etc/logrotate.d/palisade", 0o644),
        ("usr/share/palisade/palisade-recommended.conf", 0o644),
        (
            "usr/share/palisade/plugins/palisade-detection/palisade-detection-config.conf",
            0o644,
        ),
        (
            "usr/share/palisade/plugins/palisade-detection/palisade-detection-before.conf",
            0o644,
        ),
        (
            "usr/share/palisade/plugins/palisade-detection/palisade-detection-after.conf",
            0o644,
        ),
        ("usr/share/doc/palisade/copyright", 0o644),
        ("usr/share/doc/palisade/config.md", 0o644),
    ] {
        assert_eq!(mode(path), want, "{path}");
    }
    let version = run(Command::new(root.join("usr/bin/palisade")).arg("--version"));
    assert!(version.starts_with("palisade "), "{version}");

    // --- The unit.
    let unit_path = root.join("usr/lib/systemd/system/palisade.service");
    let unit = unit_keys(&std::fs::read_to_string(&unit_path).unwrap());
    let service = &unit["Service"];
    let get = |k: &str| -> Vec<&str> {
        service
            .iter()
            .filter(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
            .collect()
    };
    for (k, v) in [
        ("Type", "notify"),
        (
            "ExecStart",
            "/usr/bin/palisade run --config /etc/palisade/palisade.toml",
        ),
        ("ExecReload", "/bin/kill -HUP $MAINPID"),
        ("User", "palisade"),
        ("Group", "palisade"),
        ("StateDirectory", "palisade"),
        ("LogsDirectory", "palisade"),
        ("AmbientCapabilities", "CAP_NET_BIND_SERVICE"),
        ("CapabilityBoundingSet", "CAP_NET_BIND_SERVICE"),
        ("NoNewPrivileges", "yes"),
        ("ProtectSystem", "strict"),
        ("ProtectHome", "yes"),
        ("PrivateTmp", "yes"),
    ] {
        assert_eq!(get(k), [v], "{k}= in the unit");
    }
    let watchdog = get("WatchdogSec");
    assert_eq!(watchdog.len(), 1, "WatchdogSec= in the unit");
    let rw = get("ReadWritePaths").join(" ");
    assert!(rw.contains("/var/log/palisade"), "ReadWritePaths={rw}");
    assert_eq!(
        unit["Install"],
        [("WantedBy".to_owned(), "multi-user.target".to_owned())]
    );
    // systemd's own check: every key known and its value valid, the executables
    // there, the dependencies loadable. The empty root has no systemd targets and no
    // /bin/kill, so the unit is verified against this system, as a copy whose
    // ExecStart= names the unpacked binary; nothing else in it changes. Unknown keys
    // and bad values are only warnings for systemd-analyze: any line naming the unit
    // fails the test.
    let mut verified = std::fs::read_to_string(&unit_path).unwrap();
    swap(
        &mut verified,
        "ExecStart=/usr/bin/palisade ",
        &format!("ExecStart={} ", root.join("usr/bin/palisade").display()),
        1,
    );
    std::fs::create_dir_all(dir.path("verify")).unwrap();
    let verify_unit = dir.path("verify").join("palisade.service");
    std::fs::write(&verify_unit, verified).unwrap();
    let verify = Command::new("/usr/bin/systemd-analyze")
        .arg("verify")
        .arg(&verify_unit)
        .output()
        .unwrap();
    let verify_text = output_text(&verify);
    assert!(
        verify.status.success() && !verify_text.contains("palisade.service"),
        "systemd-analyze verify: {verify_text}"
    );

    // --- The logrotate snippet rotates the default configuration's logs, then asks
    // for a reopen with SIGUSR1 (not SIGHUP: no reload).
    let rotate = std::fs::read_to_string(root.join("etc/logrotate.d/palisade")).unwrap();
    assert!(
        rotate.contains("/var/log/palisade/*.log {"),
        "logrotate: {rotate}"
    );
    let post = rotate
        .split("postrotate")
        .nth(1)
        .and_then(|s| s.split("endscript").next())
        .expect("a postrotate script");
    assert!(
        post.contains("systemctl kill")
            && post.contains("USR1")
            && post.contains("palisade.service"),
        "postrotate: {post}"
    );
    assert!(!post.contains("HUP"), "postrotate: {post}");

    // --- The default configuration, adapted in its ports and paths only. Run by
    // root, the test drops to an unprivileged user as the unit does (User=,
    // AmbientCapabilities=CAP_NET_BIND_SERVICE, CapabilityBoundingSet=,
    // NoNewPrivileges=) and listens on a port below 1024, which only that
    // capability opens.
    let as_user = unprivileged();
    let backend = Backend::start().await;
    let listen = loopback(match as_user.and_then(|_| privileged_port()) {
        Some(p) => p,
        None => free_port(),
    });
    let admin = loopback(free_port());
    let installed = std::fs::read_to_string(root.join("etc/palisade/palisade.toml")).unwrap();
    for log in ["error_log", "access_log"] {
        let line = installed
            .lines()
            .find(|l| l.starts_with(log))
            .unwrap_or_else(|| panic!("no {log} in the default configuration"));
        assert!(
            line.contains("\"/var/log/palisade/") && line.ends_with(".log\""),
            "{line}: outside what logrotate rotates"
        );
    }
    assert!(installed.contains("path = \"/var/lib/palisade/store\""));
    let mut cfg = installed.clone();
    swap(
        &mut cfg,
        "address = \"0.0.0.0:80\"",
        &format!("address = \"{listen}\""),
        1,
    );
    swap(
        &mut cfg,
        "servers = [\"127.0.0.1:8081\"]",
        &format!("servers = [\"{}\"]", backend.addr),
        1,
    );
    swap(
        &mut cfg,
        "address = \"127.0.0.1:9901\"",
        &format!("address = \"{admin}\""),
        1,
    );
    let share = format!("{}/", root.join("usr/share/palisade").display());
    swap(&mut cfg, "\"/usr/share/palisade/", &format!("\"{share}"), 4);
    let logs = dir.path("var-log-palisade");
    let state = dir.path("var-lib-palisade");
    std::fs::create_dir_all(&logs).unwrap();
    std::fs::create_dir_all(&state).unwrap();
    swap(
        &mut cfg,
        "\"/var/log/palisade/",
        &format!("\"{}/", logs.display()),
        2,
    );
    swap(
        &mut cfg,
        "\"/var/lib/palisade/",
        &format!("\"{}/", state.display()),
        1,
    );
    let token = dir.path("admin.token");
    std::fs::write(&token, "package-test-token\n").unwrap();
    swap(
        &mut cfg,
        "\"/etc/palisade/admin.token\"",
        &format!("\"{}\"", token.display()),
        1,
    );
    // What stays absolute is Debian's CRS, as installed by modsecurity-crs.
    for line in cfg.lines().filter(|l| l.starts_with("file = \"/")) {
        assert!(
            line.contains("\"/etc/modsecurity/crs/")
                || line.contains("\"/usr/share/modsecurity-crs/")
                || line.contains(&share),
            "{line}"
        );
    }
    let etc = dir.path("etc-palisade");
    std::fs::create_dir_all(&etc).unwrap();
    let cfg_path = etc.join("palisade.toml");
    std::fs::write(&cfg_path, &cfg).unwrap();
    if let Some((uid, gid)) = as_user {
        // The unpacked root and the configuration readable by the service's user,
        // whatever this test's umask.
        for d in [&dir.0, &etc] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        std::fs::set_permissions(&cfg_path, std::fs::Permissions::from_mode(0o644)).unwrap();
        // As the package's postinst and systemd (StateDirectory=, LogsDirectory=)
        // set them up: the directories the service's own, the token readable by its
        // group.
        for d in [&logs, &state] {
            std::os::unix::fs::chown(d, Some(uid), Some(gid)).unwrap();
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o750)).unwrap();
        }
        std::os::unix::fs::chown(&token, Some(0), Some(gid)).unwrap();
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o640)).unwrap();
    }

    // --- Started as the unit starts it: ExecStart='s arguments, a clean environment
    // with NOTIFY_SOCKET and a watchdog (2 s here, for a quick ping), working
    // directory /.
    let mut exec: Vec<String> = get("ExecStart")[0]
        .split_whitespace()
        .map(|a| match a {
            "/usr/bin/palisade" => root.join("usr/bin/palisade").display().to_string(),
            "/etc/palisade/palisade.toml" => cfg_path.display().to_string(),
            other => other.to_owned(),
        })
        .collect();
    if let Some((uid, gid)) = as_user {
        // setpriv executes the binary in its own process: the pid is palisade's.
        let drop: Vec<String> = [
            "/usr/bin/setpriv".to_owned(),
            format!("--reuid={uid}"),
            format!("--regid={gid}"),
            "--clear-groups".to_owned(),
            "--inh-caps=-all,+net_bind_service".to_owned(),
            "--ambient-caps=-all,+net_bind_service".to_owned(),
            "--bounding-set=-all,+net_bind_service".to_owned(),
            "--no-new-privs".to_owned(),
            "--".to_owned(),
        ]
        .into();
        exec.splice(0..0, drop);
    } else {
        eprintln!(
            "note: not root (or no setpriv): the binary runs as this user, on an unprivileged port"
        );
    }
    let sock_path = dir.path("notify.sock");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    // systemd's socket takes datagrams from every service user.
    std::fs::set_permissions(&sock_path, std::fs::Permissions::from_mode(0o666)).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let stderr = dir.path("stderr.log");
    let child = Command::new(&exec[0])
        .args(&exec[1..])
        .env_clear()
        .env(
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        )
        .env("NOTIFY_SOCKET", &sock_path)
        .env("WATCHDOG_USEC", "2000000")
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let mut p = Palisade {
        child,
        addr: listen,
        stderr,
    };
    // Loading CRS takes a while in a debug build.
    let start = wait_for_notification(&sock, "READY=1", Duration::from_secs(240), &mut p);
    let ready = start.last().unwrap();
    assert!(ready.contains("STATUS=serving on 1 listener(s)"), "{ready}");
    // Ready means bound: the first connection is served.
    assert!(std::net::TcpStream::connect(listen).is_ok());
    // Two pings: the watchdog keeps going.
    wait_for_notification(&sock, "WATCHDOG=1", Duration::from_secs(5), &mut p);
    wait_for_notification(&sock, "WATCHDOG=1", Duration::from_secs(5), &mut p);

    let benign = send_raw(
        listen,
        b"GET /products?id=42 HTTP/1.1\r\nHost: localhost\r\nUser-Agent: Mozilla/5.0\r\nAccept: text/html\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    assert_eq!(benign.status, 200, "{}", benign.text());
    let attack = send_raw(
        listen,
        b"GET /products?id=1%27%20OR%20%271%27%3D%271 HTTP/1.1\r\nHost: localhost\r\nUser-Agent: Mozilla/5.0\r\nAccept: text/html\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    assert_eq!(attack.status, 403, "{}", attack.text());
    assert_eq!(
        backend.requests().len(),
        1,
        "the attack reached the backend"
    );
    assert!(
        wait_for_line(&logs.join("error.log"), Duration::from_secs(5), |l| l
            .contains("[id \"949110\"]"))
        .is_some(),
        "the attack's match lines in the error log"
    );
    assert!(
        wait_for_line(&logs.join("access.log"), Duration::from_secs(5), |l| l
            .contains("\"status\":403"))
        .is_some(),
        "the access log"
    );
    assert!(
        state.join("store").is_dir(),
        "the store in the state directory"
    );
    if let Some((uid, _)) = as_user {
        use std::os::unix::fs::MetadataExt as _;
        for f in [
            logs.join("error.log"),
            logs.join("access.log"),
            state.join("store"),
        ] {
            assert_eq!(std::fs::metadata(&f).unwrap().uid(), uid, "{}", f.display());
        }
        let status = std::fs::read_to_string(format!("/proc/{}/status", p.pid())).unwrap();
        let uids = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .expect("a Uid: line");
        assert!(
            uids.split_whitespace().all(|u| u == uid.to_string()),
            "palisade runs as uid {uid}: Uid:{uids}"
        );
        let caps = status
            .lines()
            .find_map(|l| l.strip_prefix("CapEff:"))
            .expect("a CapEff: line");
        // CAP_NET_BIND_SERVICE is capability 10, and the only one.
        assert_eq!(
            u64::from_str_radix(caps.trim(), 16).unwrap(),
            1 << 10,
            "capabilities {caps}"
        );
    }
    let status = send_raw(
        admin,
        b"GET /status HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    assert_eq!(status.status, 200);

    // ExecReload=: RELOADING=1, then READY=1 once the reload is done.
    let reload: Vec<String> = get("ExecReload")[0]
        .replace("$MAINPID", &p.pid().to_string())
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    run(Command::new(&reload[0]).args(&reload[1..]));
    let around = wait_for_notification(&sock, "READY=1", Duration::from_secs(240), &mut p);
    assert!(
        around
            .iter()
            .any(|m| m.lines().any(|l| l == "RELOADING=1") && m.contains("MONOTONIC_USEC=")),
        "{around:?}"
    );
    let again = send_raw(
        listen,
        b"GET /products?id=1%27%20OR%20%271%27%3D%271 HTTP/1.1\r\nHost: localhost\r\nUser-Agent: Mozilla/5.0\r\nAccept: text/html\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    assert_eq!(again.status, 403);

    // SIGTERM (systemctl stop): STOPPING=1, then a clean exit.
    p.terminate();
    wait_for_notification(&sock, "STOPPING=1", Duration::from_secs(10), &mut p);
    let s = tokio::task::spawn_blocking(move || p.wait_exit(Duration::from_secs(30)))
        .await
        .unwrap();
    assert!(s.success(), "{s}");
}
