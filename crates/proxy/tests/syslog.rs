//! Logs shipped to syslog (`[[syslog]]`) against Debian's rsyslog on loopback
//! ports: RFC 5424 messages over UDP, TCP and TLS arrive with their log's name as
//! MSGID; while the TCP and TLS receiver is away, lines are queued, and they arrive
//! once it is back; requests never wait for it.

mod common;

use common::*;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const RSYSLOGD: &str = "/usr/sbin/rsyslogd";

/// rsyslog listening on UDP, TCP and TLS (OpenSSL driver) loopback ports, writing
/// every message as `INPUT FACILITY SEVERITY APP MSGID MSG` to `out.log`.
struct Rsyslog {
    child: Option<Child>,
    conf: PathBuf,
    out: PathBuf,
    tcp: SocketAddr,
    tls: SocketAddr,
}

impl Rsyslog {
    fn write_config(dir: &TempDir, udp: SocketAddr, tcp: SocketAddr, tls: SocketAddr) -> PathBuf {
        let work = dir.path("rsyslog-work");
        std::fs::create_dir_all(&work).unwrap();
        let out = dir.path("out.log");
        let conf = dir.path("rsyslog.conf");
        let text = format!(
            r#"global(workDirectory="{work}" maxMessageSize="64k"
  defaultNetstreamDriverCAFile="{ca}"
  defaultNetstreamDriverCertFile="{cert}"
  defaultNetstreamDriverKeyFile="{key}")
module(load="imudp")
module(load="imtcp" maxSessions="100")
input(type="imudp" address="127.0.0.1" port="{up}" name="udp")
input(type="imtcp" address="127.0.0.1" port="{tp}" name="tcp")
input(type="imtcp" address="127.0.0.1" port="{sp}" name="tls"
  streamDriver.name="ossl" streamDriver.mode="1" streamDriver.authMode="anon")
template(name="t" type="string"
  string="%inputname% %syslogfacility-text% %syslogseverity-text% %app-name% %msgid% %msg%\n")
action(type="omfile" file="{out}" template="t")
"#,
            work = work.display(),
            ca = dir.path("cert.pem").display(),
            cert = dir.path("cert.pem").display(),
            key = dir.path("key.pem").display(),
            up = udp.port(),
            tp = tcp.port(),
            sp = tls.port(),
            out = out.display(),
        );
        std::fs::write(&conf, text).unwrap();
        conf
    }

    fn start(conf: &Path, out: &Path, tcp: SocketAddr, tls: SocketAddr) -> Rsyslog {
        let pid = conf.with_extension("pid");
        let _ = std::fs::remove_file(&pid);
        let child = Command::new(RSYSLOGD)
            .args(["-n", "-f"])
            .arg(conf)
            .arg("-i")
            .arg(&pid)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("rsyslogd starts");
        // A bound, not a timing check: both TCP listeners accept once it is up.
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(tcp).is_err()
            || std::net::TcpStream::connect(tls).is_err()
        {
            assert!(Instant::now() < deadline, "rsyslogd did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        Rsyslog {
            child: Some(child),
            conf: conf.to_owned(),
            out: out.to_owned(),
            tcp,
            tls,
        }
    }

    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn restart(&mut self) {
        self.stop();
        *self = Rsyslog::start(&self.conf.clone(), &self.out.clone(), self.tcp, self.tls);
    }

    fn lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Waits until every one of `want` is in a line (each given as the parts a
    /// line must contain).
    fn wait_for(&self, want: &[Vec<String>]) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let lines = self.lines();
            let missing: Vec<_> = want
                .iter()
                .filter(|parts| !lines.iter().any(|l| parts.iter().all(|p| l.contains(p))))
                .collect();
            if missing.is_empty() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "missing {missing:?} in {lines:#?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Rsyslog {
    fn drop(&mut self) {
        self.stop();
    }
}

fn parts(p: &[&str]) -> Vec<String> {
    p.iter().map(|s| (*s).to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_reach_rsyslog_over_udp_tcp_and_tls_and_wait_out_an_outage() {
    if required(Path::new(RSYSLOGD), "receiving syslog messages").is_none() {
        return;
    }
    let dir = TempDir::new("syslog");
    let c = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    std::fs::write(dir.path("cert.pem"), c.cert.pem()).unwrap();
    std::fs::write(dir.path("key.pem"), c.signing_key.serialize_pem()).unwrap();
    let (udp, tcp, tls) = (
        loopback(free_port()),
        loopback(free_port()),
        loopback(free_port()),
    );
    let conf = Rsyslog::write_config(&dir, udp, tcp, tls);
    let mut rsyslog = Rsyslog::start(&conf, &dir.path("out.log"), tcp, tls);

    let backend = Backend::start().await;
    let listen = loopback(free_port());
    let admin = loopback(free_port());
    let extra = format!(
        r#"{rules}
[admin]
address = "{admin}"

[[syslog]]
address = "{udp}"
logs = ["access"]

[[syslog]]
address = "{tcp}"
transport = "tcp"
logs = ["access", "error"]
facility = "local3"

[[syslog]]
address = "{tls}"
transport = "tls"
tls_ca_file = "cert.pem"
server_name = "localhost"
logs = ["access"]
app_name = "edge-waf"
"#,
        rules = rules_toml(
            r#"SecRule ARGS:q "@contains attack" "id:42,phase:1,deny,status:403,log,msg:'probe'""#
        ),
    );
    let _p = Palisade::start(&dir, &basic_config(listen, backend.addr, &extra), listen);

    // No access log file: the access log is on because receivers take it.
    assert_eq!(get(listen, "/hello?q=fine", "").await.status, 200);
    assert_eq!(get(listen, "/blocked?q=attack", "").await.status, 403);
    rsyslog.wait_for(&[
        parts(&[
            "udp local0 info palisade access {",
            "\"uri\":\"/hello?q=fine\"",
        ]),
        parts(&[
            "tcp local3 info palisade access {",
            "\"uri\":\"/blocked?q=attack\"",
        ]),
        parts(&["tcp local3 warning palisade error ", "[id \"42\"]"]),
        parts(&[
            "tls local0 info edge-waf access {",
            "\"uri\":\"/hello?q=fine\"",
        ]),
        parts(&["tls local0 info edge-waf access {", "\"status\":403"]),
    ]);
    // The UDP receiver takes only the access log.
    assert!(
        !rsyslog
            .lines()
            .iter()
            .any(|l| l.starts_with("udp") && l.contains(" error ")),
        "{:#?}",
        rsyslog.lines()
    );

    // The receiver goes away. The requests do not wait for it; once the proxy
    // has seen the TCP and TLS connections fail, what it logs is queued.
    rsyslog.stop();
    let down = |r: &str| format!("palisade_syslog_connected{{receiver=\"{r}\"}}");
    let (tcp_down, tls_down) = (down(&format!("tcp/{tcp}")), down(&format!("tls/{tls}")));
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut probes = 0;
    while metric(admin, &tcp_down).await != 0.0 || metric(admin, &tls_down).await != 0.0 {
        assert!(Instant::now() < deadline, "the outage was never noticed");
        assert_eq!(
            get(listen, &format!("/probe-{probes}"), "").await.status,
            200
        );
        probes += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for i in 0..10 {
        let r = get(listen, &format!("/during-outage-{i}"), "").await;
        assert_eq!(r.status, 200);
    }
    let queued = |r: &str| format!("palisade_syslog_queued{{receiver=\"{r}\"}}");
    let deadline = Instant::now() + Duration::from_secs(60);
    while metric(admin, &queued(&format!("tcp/{tcp}"))).await < 10.0 {
        assert!(Instant::now() < deadline, "the lines were not queued");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        metric(
            admin,
            &format!("palisade_syslog_errors_total{{receiver=\"tcp/{tcp}\"}}")
        )
        .await
            >= 1.0
    );

    // Back: everything queued arrives, on both connections.
    rsyslog.restart();
    let want: Vec<Vec<String>> = (0..10)
        .flat_map(|i| {
            let uri = format!("\"uri\":\"/during-outage-{i}\"");
            [
                vec!["tcp local3 info palisade access {".to_owned(), uri.clone()],
                vec!["tls local0 info edge-waf access {".to_owned(), uri],
            ]
        })
        .collect();
    rsyslog.wait_for(&want);
    assert_eq!(metric(admin, &tcp_down).await, 1.0);
    assert_eq!(
        metric(
            admin,
            &format!("palisade_syslog_dropped_total{{receiver=\"tcp/{tcp}\"}}")
        )
        .await,
        0.0
    );
}

#[test]
fn check_refuses_syslog_settings_that_cannot_work() {
    assert_check_refuses(
        "[[syslog]]\naddress = \"127.0.0.1:514\"\nfacility = \"local9\"\n",
        "facility \"local9\"",
    );
    assert_check_refuses(
        "[[syslog]]\naddress = \"127.0.0.1:514\"\nlogs = [\"acess\"]\n",
        "logs: \"acess\"",
    );
    assert_check_refuses(
        "[[syslog]]\naddress = \"127.0.0.1:514\"\ntransport = \"tcp\"\nserver_name = \"x\"\n",
        "are for transport = \"tls\"",
    );
    assert_check_refuses(
        "[[syslog]]\naddress = \"127.0.0.1:514\"\ntransport = \"quic\"\n",
        "quic",
    );
    assert_check_refuses(
        "[[syslog]]\naddress = \"127.0.0.1:6514\"\ntransport = \"tls\"\ntls_ca_file = \"/nonexistent/ca.pem\"\n",
        "tls_ca_file /nonexistent/ca.pem",
    );
}
