//! The network-wide deployment over a real `nats-server` (started here on 127.0.0.1, a free
//! port, in a temporary directory, killed at the end even on failure): agents, controller,
//! restarts, authentication, rejection. Without `nats-server` on the PATH each test prints one
//! `skip:` line. Every wait is bounded.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use netwide::server::{Login, Role, Server, User};

const BIN: &str = env!("CARGO_BIN_EXE_netsift");
const HOSTS: [&str; 2] = ["a", "b"];

/// A temporary directory, a server and the users' credentials; the server is killed and the
/// directory removed on drop.
struct Net {
    dir: PathBuf,
    bin: PathBuf,
    config: String,
    server: Option<Server>,
    /// The CA every client checks the server's certificate against (a TLS server).
    ca: Option<PathBuf>,
    /// The controller's `--expect`: a snapshot of [`Net::run_args`] with seed 7.
    expect: PathBuf,
}

/// How a test's server is set up.
#[derive(PartialEq)]
enum Setup {
    /// Passwords, no TLS.
    Plain,
    /// TLS with a certificate of a CA made for the test (`openssl`).
    Tls,
    /// Host b's agent logs in with an NKEY (`agent-b.creds` holds its seed).
    NkeyB,
}

impl Net {
    fn start(name: &str) -> Option<Net> {
        Net::start_with(name, Setup::Plain)
    }

    fn start_with(name: &str, setup: Setup) -> Option<Net> {
        let Some(bin) = netwide::server::binary() else {
            println!("skip: nats-server not on PATH (apt-get install nats-server)");
            return None;
        };
        let dir = testkit::scratch("nw").join(name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let ca = if setup == Setup::Tls {
            let Some(ca) = make_ca(&dir, "ca") else {
                println!("skip: openssl not on PATH (apt-get install openssl)");
                let _ = std::fs::remove_dir_all(&dir);
                return None;
            };
            Some(ca)
        } else {
            None
        };
        let mut users: Vec<User> = ["a", "b", "c"]
            .iter()
            .map(|h| User {
                name: format!("agent-{h}"),
                login: if setup == Setup::NkeyB && *h == "b" {
                    let kp = nkeys::KeyPair::new_user();
                    Login::Nkey {
                        public: kp.public_key(),
                        seed: kp.seed().unwrap(),
                    }
                } else {
                    Login::Password(format!("pw-{h}"))
                },
                role: Role::Agent {
                    host: h.to_string(),
                },
            })
            .collect();
        users.push(User {
            name: "controller".into(),
            login: Login::Password("pw-c".into()),
            role: Role::Controller,
        });
        for u in &users {
            u.write_creds(&dir).unwrap();
        }
        let port = netwide::server::free_port().unwrap();
        let mut config = netwide::server::config(port, &dir.join("js"), &users);
        if ca.is_some() {
            let (cert, key) = server_cert(&dir, "ca");
            config = netwide::server::with_tls(&config, &cert, &key);
        }
        let mut net = Net {
            dir,
            bin,
            config,
            server: None,
            ca,
            expect: PathBuf::new(),
        };
        net.expect = net.expected(&Net::run_args("7"));
        net.restart_server(port);
        // The controller makes the stream, its consumer and the bucket (agents may not).
        let (none, _) = reports(net.controller(&["--epochs", "0"]));
        assert!(none.is_empty());
        Some(net)
    }

    fn restart_server(&mut self, port: u16) {
        if let Some(mut s) = self.server.take() {
            s.kill();
        }
        let s = Server::start(
            &self.bin,
            &self.dir,
            port,
            &self.config,
            Duration::from_secs(5),
        )
        .unwrap();
        self.server = Some(s);
    }

    /// A snapshot of a run with `args` (what a deployment gives the controller as `--expect`).
    fn expected<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> PathBuf {
        let text: Vec<String> = args
            .iter()
            .map(|a| a.as_ref().to_string_lossy().into_owned())
            .collect();
        // One directory per set of arguments (their text, file-name safe).
        let name: String = text
            .join("_")
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let dir = self.dir.join(format!("expected-{name}"));
        let _ = std::fs::remove_dir_all(&dir);
        let st = Command::new(BIN)
            .arg("run")
            .arg(self.trace("a"))
            .args(args)
            .args(["--host", "expected"])
            .arg("--snapshots")
            .arg(&dir)
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success());
        dir.join(snapshot::file_name("expected", 0))
    }

    fn url(&self) -> String {
        self.server.as_ref().unwrap().url()
    }

    fn creds(&self, user: &str) -> PathBuf {
        self.dir.join(format!("{user}.creds"))
    }

    /// A small trace per host: different flows (seeds), two epochs of 10,000 packets.
    fn trace(&self, host: &str) -> PathBuf {
        let p = self.dir.join(format!("{host}.pcap"));
        if !p.exists() {
            let seed = (host.as_bytes()[0] as u64).to_string();
            let st = Command::new(BIN)
                .args([
                    "gen",
                    "--packets",
                    "20000",
                    "--flows",
                    "2000",
                    "--seed",
                    &seed,
                ])
                .arg("--out")
                .arg(&p)
                .status()
                .unwrap();
            assert!(st.success());
        }
        p
    }

    fn run_args(seed: &str) -> Vec<String> {
        [
            "--epoch-packets",
            "10000",
            "--task",
            "heavy_hitters,cardinality",
            "--workers",
            "1",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([
            "--seed".to_string(),
            seed.to_string(),
            "--truth".into(),
            "off".into(),
        ])
        .collect()
    }

    fn agent(&self, host: &str, url: &str, user: &str, seed: &str) -> Output {
        let wait = ["--drain-timeout-ms", "5000"];
        self.agent_cmd(host, url, user, seed, &wait)
            .output()
            .unwrap()
    }

    fn agent_cmd(&self, host: &str, url: &str, user: &str, seed: &str, extra: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.arg("agent")
            .arg(self.trace(host))
            .args(Net::run_args(seed))
            .args(["--nats", url, "--host", host])
            .arg("--creds")
            .arg(self.creds(user))
            .arg("--spool")
            .arg(self.dir.join(format!("spool-{host}")))
            .args(self.tls_args())
            .args(extra)
            .stdin(Stdio::null());
        c
    }

    fn tls_args(&self) -> Vec<String> {
        match &self.ca {
            Some(ca) => vec!["--tls-ca".into(), ca.display().to_string()],
            None => vec![],
        }
    }

    fn controller(&self, extra: &[&str]) -> Command {
        self.controller_expecting(&self.expect, extra)
    }

    fn controller_expecting(&self, expect: &std::path::Path, extra: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.args([
            "controller",
            "--nats",
            &self.url(),
            "--hosts",
            "a,b",
            "--deadline-ms",
            "1000",
        ])
        .arg("--creds")
        .arg(self.creds("controller"))
        .arg("--expect")
        .arg(expect)
        .args(self.tls_args())
        .args(extra)
        .stdin(Stdio::null());
        c
    }
}

/// `openssl` run in `dir`; false when it is missing or fails.
fn openssl(dir: &std::path::Path, args: &[&str]) -> bool {
    Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A self-signed CA (`<name>.pem`, `<name>.key` in `dir`, P-256); None without `openssl`.
fn make_ca(dir: &std::path::Path, name: &str) -> Option<PathBuf> {
    let (pem, key) = (format!("{name}.pem"), format!("{name}.key"));
    let ok = openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=netsift test CA",
            "-keyout",
            &key,
            "-out",
            &pem,
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
    );
    ok.then(|| dir.join(pem))
}

/// The server's certificate for 127.0.0.1, signed by CA `ca` (made by [`make_ca`]).
fn server_cert(dir: &std::path::Path, ca: &str) -> (PathBuf, PathBuf) {
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    assert!(openssl(
        dir,
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
        ],
    ));
    assert!(openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            &format!("{ca}.pem"),
            "-CAkey",
            &format!("{ca}.key"),
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "server.ext",
            "-out",
            "server.pem",
        ],
    ));
    (dir.join("server.pem"), dir.join("server.key"))
}

impl Drop for Net {
    fn drop(&mut self) {
        if let Some(mut s) = self.server.take() {
            s.kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A child killed on drop (a test that fails leaves nothing running).
struct Kid(Child);

impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The controller's reports (JSON lines), bounded by a timeout.
fn reports(mut c: Command) -> (Vec<serde_json::Value>, String) {
    let child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut kid = Kid(child);
    let end = std::time::Instant::now() + Duration::from_secs(30);
    while kid.0.try_wait().unwrap().is_none() {
        assert!(
            std::time::Instant::now() < end,
            "controller did not stop within 30 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let child = std::mem::replace(&mut kid.0, Command::new("true").spawn().unwrap());
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "controller failed: {err}");
    let v = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (v, err)
}

/// How many snapshots the stream holds.
fn stored(net: &Net) -> usize {
    stream_snapshots(net).len()
}

/// The snapshots the stream holds, oldest first.
fn stream_snapshots(net: &Net) -> Vec<snapshot::Snapshot> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _enter = rt.enter();
    let b = netwide::creds::Broker {
        url: net.url(),
        creds: net.creds("controller"),
        tls_ca: net.ca.clone(),
        name: "test".into(),
        inbox: netwide::CONTROLLER_INBOX.into(),
    };
    let c = rt
        .block_on(b.connect(Duration::from_secs(5), false))
        .unwrap();
    let js = async_nats::jetstream::new(c);
    rt.block_on(netwide::stored_snapshots(&js, Duration::from_secs(5)))
        .unwrap()
        .into_iter()
        .map(|(_, s)| s.unwrap())
        .collect()
}

/// Host `h`'s agent publishes its trace's two epochs.
fn publish(net: &Net, h: &str) {
    let o = net.agent(h, &net.url(), &format!("agent-{h}"), "7");
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("2 snapshots published"),
        "{}",
        stderr(&o)
    );
}

/// Every host's agent publishes its trace's two epochs.
fn publish_all(net: &Net) {
    for h in HOSTS {
        publish(net, h);
    }
}

/// The next two reports: epochs 0 and 1 corrected with b (revision 2), as `netsift merge`.
fn corrected_with_b(net: &Net, rx: &std::sync::mpsc::Receiver<String>) {
    let mut fixed = vec![next_line(rx, 20), next_line(rx, 20)];
    fixed.sort_by_key(|r| r["epoch"].as_u64());
    for r in &fixed {
        assert_eq!(r["revision"], 2, "{r}");
        assert_eq!(r["hosts"], serde_json::json!(["a", "b"]));
        assert_eq!(r["missing"], serde_json::json!([]));
    }
    check_equal_to_merge(net, &fixed);
}

/// A command that failed saying `what`.
fn failed_with(o: &Output, what: &str) {
    assert!(!o.status.success(), "{}", stderr(o));
    assert!(stderr(o).contains(what), "{}", stderr(o));
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// `netsift merge --json` of the same hosts' snapshots written by `run`.
fn merge_locally(net: &Net) -> serde_json::Value {
    let snaps = net.dir.join("local");
    let mut files = vec![];
    for h in HOSTS {
        let st = Command::new(BIN)
            .arg("run")
            .arg(net.trace(h))
            .args(Net::run_args("7"))
            .args(["--host", h, "--json"])
            .arg("--snapshots")
            .arg(&snaps)
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(st.success());
        for e in 0..2 {
            files.push(snaps.join(snapshot::file_name(h, e)));
        }
    }
    let out = Command::new(BIN)
        .args(["merge", "--json"])
        .args(&files)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Each epoch's task answers (what does not depend on timing).
fn answers(epoch: &serde_json::Value) -> Vec<(serde_json::Value, serde_json::Value)> {
    epoch["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["task"].clone(), t["answer"].clone()))
        .collect()
}

fn check_equal_to_merge(net: &Net, got: &[serde_json::Value]) {
    let want = merge_locally(net);
    let want = want["epochs"].as_array().unwrap();
    assert_eq!(got.len(), want.len());
    for r in got {
        let e = r["epoch"].as_u64().unwrap() as usize;
        let mine = &r["report"]["epochs"][0];
        assert_eq!(mine["index"].as_u64(), Some(e as u64));
        assert_eq!(mine["packets"], want[e]["packets"]);
        assert!(!answers(mine).is_empty());
        assert!(answers(mine).iter().all(|(_, a)| !a.is_null()));
        assert_eq!(answers(mine), answers(&want[e]), "epoch {e}");
    }
}

#[test]
fn broker_report_equals_merge_and_agent_restart_counts_once() {
    let Some(net) = Net::start("merge") else {
        return;
    };
    // Agent a first finds no broker: its snapshots stay in its spool (it stops with them).
    let dead = format!("nats://127.0.0.1:{}", netwide::server::free_port().unwrap());
    let o = net
        .agent_cmd("a", &dead, "agent-a", "7", &["--drain-timeout-ms", "300"])
        .output()
        .unwrap();
    assert!(!o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("2 left in"), "{}", stderr(&o));
    // Restarted: the spool is sent first, then the same trace's epochs again: each stored once
    // (duplicates, as many as the run rewrote after the spool's copy was sent).
    publish(&net, "a");
    publish(&net, "b");
    // The stream holds each (host, epoch) once.
    assert_eq!(stored(&net), 4);
    let err = both_epochs_of_both_hosts(&net);
    assert!(err.contains("\"accepted\":4"), "{err}");
}

/// A controller's reports of epochs 0 and 1: first revisions with every host, equal to
/// `netsift merge`. Returns its standard error.
fn both_epochs_of_both_hosts(net: &Net) -> String {
    let (got, err) = reports(net.controller(&["--epochs", "2"]));
    for r in &got {
        assert_eq!(r["revision"], 1, "{r}");
        assert_eq!(r["hosts"], serde_json::json!(["a", "b"]));
        assert_eq!(r["missing"], serde_json::json!([]));
    }
    check_equal_to_merge(net, &got);
    err
}

#[test]
fn unauthenticated_agent_is_refused() {
    let Some(net) = Net::start("auth") else {
        return;
    };
    let bad = net.dir.join("bad.creds");
    std::fs::write(&bad, "user = \"agent-a\"\npassword = \"wrong\"\n").unwrap();
    let o = net
        .agent_cmd("a", &net.url(), "bad", "7", &[])
        .output()
        .unwrap();
    failed_with(&o, "refused the credentials");
    // An agent whose user may not use another host's subjects is refused by the server, and
    // says so at once (the first: reading that host's lease).
    let o = net
        .agent_cmd(
            "b",
            &net.url(),
            "agent-a",
            "7",
            &["--drain-timeout-ms", "1500", "--ack-timeout-ms", "500"],
        )
        .output()
        .unwrap();
    failed_with(&o, "Permissions Violation");
    assert_eq!(stored(&net), 0);
}

#[test]
fn corrupted_and_incompatible_snapshots_are_rejected() {
    let Some(net) = Net::start("reject") else {
        return;
    };
    publish_all(&net);
    // Host c: another seed (incompatible), and a corrupted snapshot published straight to its
    // subject (an agent sets a corrupted spool file aside: cli/tests/netwide_agent.rs).
    let junk = b"NSIFTSNP not a snapshot".to_vec();
    let id = netwide::message_id("c", 9, &junk);
    assert!(publish_raw(&net, "c", &id, junk));
    let o = net.agent("c", &net.url(), "agent-c", "8");
    assert!(o.status.success(), "{}", stderr(&o));
    let mut c = Command::new(BIN);
    c.args([
        "controller",
        "--nats",
        &net.url(),
        "--hosts",
        "a,b,c",
        "--deadline-ms",
        "1000",
    ])
    .arg("--creds")
    .arg(net.creds("controller"))
    .arg("--expect")
    .arg(&net.expect)
    .args(["--epochs", "2"]);
    let (got, err) = reports(c);
    assert!(err.contains("\"rejected_malformed\":1"), "{err}");
    assert!(err.contains("\"rejected_incompatible\":2"), "{err}");
    for r in &got {
        assert_eq!(r["hosts"], serde_json::json!(["a", "b"]));
        assert_eq!(r["missing"], serde_json::json!(["c"]));
    }
    check_equal_to_merge(&net, &got);
}

#[test]
fn controller_and_server_restarts_lose_nothing() {
    let Some(mut net) = Net::start("restart") else {
        return;
    };
    // Every host's epochs published.
    publish_all(&net);
    // The server dies and comes back on its file storage.
    let port = net.server.as_ref().unwrap().port;
    net.restart_server(port);
    // A controller killed after its first report...
    let mut c = net.controller(&[]);
    let mut kid = Kid(c
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap());
    let mut first = String::new();
    {
        use std::io::BufRead;
        let out = kid.0.stdout.take().unwrap();
        let mut r = std::io::BufReader::new(out);
        r.read_line(&mut first).unwrap();
    }
    drop(kid);
    let first: serde_json::Value = serde_json::from_str(&first).unwrap();
    // ...and its successor: every epoch reported once in all.
    let (rest, _) = reports(net.controller(&["--epochs", "2"]));
    let mut epochs: Vec<u64> = std::iter::once(&first)
        .chain(&rest)
        .map(|r| r["epoch"].as_u64().unwrap())
        .collect();
    epochs.sort();
    assert_eq!(epochs, vec![0, 1]);
    let all: Vec<serde_json::Value> = std::iter::once(first).chain(rest).collect();
    check_equal_to_merge(&net, &all);
}

/// A child (killed on drop) and the lines of its standard output as they come.
fn lines_of(mut c: Command) -> (Kid, std::sync::mpsc::Receiver<String>) {
    let mut kid = Kid(c
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    let out = kid.0.stdout.take().unwrap();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    (kid, rx)
}

/// The next line of a child's standard output, waited for at most `secs`.
fn next_line(rx: &std::sync::mpsc::Receiver<String>, secs: u64) -> serde_json::Value {
    let l = rx
        .recv_timeout(Duration::from_secs(secs))
        .expect("no report in time");
    serde_json::from_str(&l).unwrap()
}

#[test]
fn deadline_reports_missing_host_then_a_late_snapshot_corrects_it() {
    let Some(net) = Net::start("late") else {
        return;
    };
    publish(&net, "a");
    let (kid, rx) = lines_of(net.controller(&[]));
    // Past the deadline (1 s): both epochs without b.
    for e in 0..2 {
        let r = next_line(&rx, 20);
        assert_eq!(r["epoch"], e);
        assert_eq!(r["revision"], 1);
        assert_eq!(r["hosts"], serde_json::json!(["a"]));
        assert_eq!(r["missing"], serde_json::json!(["b"]));
    }
    // b arrives late: each epoch corrected, revision 2, as merge of both hosts.
    publish(&net, "b");
    corrected_with_b(&net, &rx);
    drop(kid);
}

#[test]
fn tls_with_a_ca_and_a_server_of_another_ca_refused() {
    let Some(net) = Net::start_with("tls", Setup::Tls) else {
        return;
    };
    // Over TLS (the server's certificate chains to --tls-ca): as without.
    publish_all(&net);
    both_epochs_of_both_hosts(&net);
    // Another CA: the agent and the controller refuse the server at once.
    let (ca, other) = (net.ca.clone().unwrap(), make_ca(&net.dir, "other").unwrap());
    let mut c = net.agent_cmd("a", &net.url(), "agent-a", "7", &[]);
    let o = replace_arg(&mut c, &ca, &other).output().unwrap();
    failed_with(&o, "TLS failed");
    assert!(!stderr(&o).contains("retrying"), "{}", stderr(&o));
    let mut c = net.controller(&["--epochs", "2"]);
    let o = replace_arg(&mut c, &ca, &other).output().unwrap();
    failed_with(&o, "TLS failed");
    // Without TLS the server does not let a client in.
    let c = net.controller(&["--epochs", "2"]);
    let plain: Vec<&std::ffi::OsStr> = c
        .get_args()
        .filter(|a| *a != "--tls-ca" && *a != ca.as_os_str())
        .collect();
    let o = Command::new(BIN).args(plain).output().unwrap();
    assert!(!o.status.success(), "{}", stderr(&o));
}

#[test]
fn nkey_login() {
    let Some(net) = Net::start_with("nkey", Setup::NkeyB) else {
        return;
    };
    let creds = std::fs::read_to_string(net.creds("agent-b")).unwrap();
    assert!(creds.starts_with("nkey_seed = \"SU"), "{creds}");
    // Another key pair's seed is refused.
    let wrong = net.dir.join("wrong.creds");
    let seed = nkeys::KeyPair::new_user().seed().unwrap();
    std::fs::write(&wrong, format!("nkey_seed = \"{seed}\"\n")).unwrap();
    let o = net
        .agent_cmd("b", &net.url(), "wrong", "7", &[])
        .output()
        .unwrap();
    failed_with(&o, "refused the credentials");
    // Host b by its NKEY, host a by password: both merged.
    publish_all(&net);
    both_epochs_of_both_hosts(&net);
}

#[test]
fn hosts_from_stream_expects_every_host_that_published() {
    let Some(net) = Net::start("fromstream") else {
        return;
    };
    // b's trace has only the first epoch: the controller, knowing b from the stream, names
    // it missing in the second.
    let short = net.dir.join("b-short.pcap");
    keep_packets(&net.trace("b"), &short, |i| i < 10_000);
    for (h, trace) in [("a", net.trace("a")), ("b", short)] {
        let mut c = net.agent_cmd(h, &net.url(), &format!("agent-{h}"), "7", &[]);
        let o = replace_arg(&mut c, &net.trace(h), &trace).output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let mut c = Command::new(BIN);
    c.args(["controller", "--nats", &net.url(), "--hosts-from-stream"])
        .args(["--deadline-ms", "1000", "--epochs", "2", "--creds"])
        .arg(net.creds("controller"))
        .arg("--expect")
        .arg(&net.expect);
    let (mut got, _) = reports(c);
    got.sort_by_key(|r| r["epoch"].as_u64());
    assert_eq!(got.len(), 2);
    assert_eq!(got[0]["hosts"], serde_json::json!(["a", "b"]));
    assert_eq!(got[0]["missing"], serde_json::json!([]));
    assert_eq!(got[1]["hosts"], serde_json::json!(["a"]));
    assert_eq!(got[1]["missing"], serde_json::json!(["b"]));
}

/// Copy the pcap `from` to `to` keeping the packets whose index `keep` accepts (a pcap of
/// `netsift gen`: 24-byte header, 16-byte record headers).
fn keep_packets(from: &std::path::Path, to: &std::path::Path, keep: impl Fn(usize) -> bool) {
    let b = std::fs::read(from).unwrap();
    let mut out = b[..24].to_vec();
    let (mut at, mut i) = (24, 0);
    while at + 16 <= b.len() {
        let len = u32::from_le_bytes(b[at + 8..at + 12].try_into().unwrap()) as usize;
        if keep(i) {
            out.extend_from_slice(&b[at..at + 16 + len]);
        }
        at += 16 + len;
        i += 1;
    }
    std::fs::write(to, out).unwrap();
}

/// Command `c` with argument `from` replaced by `to`.
fn replace_arg<'a>(
    c: &'a mut Command,
    from: &std::path::Path,
    to: &std::path::Path,
) -> &'a mut Command {
    let args: Vec<std::ffi::OsString> = c
        .get_args()
        .map(|a| {
            if a == from.as_os_str() {
                to.as_os_str().to_owned()
            } else {
                a.to_owned()
            }
        })
        .collect();
    let mut n = Command::new(BIN);
    n.args(args).stdin(Stdio::null());
    *c = n;
    c
}

#[test]
fn idle_time_epoch_is_published_and_merged() {
    let Some(net) = Net::start("idle") else {
        return;
    };
    // 30,000 packets at 1 Mpps in 10 ms epochs: 0, 1, 2. Host a has none in epoch 1.
    let mut traces = vec![];
    for h in HOSTS {
        let full = net.dir.join(format!("{h}-30k.pcap"));
        let st = Command::new(BIN)
            .args(["gen", "--packets", "30000", "--flows", "2000", "--seed"])
            .arg((h.as_bytes()[0] as u64).to_string())
            .arg("--out")
            .arg(&full)
            .status()
            .unwrap();
        assert!(st.success());
        let t = net.dir.join(format!("{h}-gap.pcap"));
        keep_packets(&full, &t, |i| h != "a" || !(10_000..20_000).contains(&i));
        traces.push(t);
    }
    for (h, t) in HOSTS.iter().zip(&traces) {
        let o = idle_agent(&net, h, t).output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("3 snapshots published"),
            "{}",
            stderr(&o)
        );
    }
    let expect = net.expected(&TIMED_RUN);
    let (mut got, _) = reports(net.controller_expecting(&expect, &["--epochs", "3"]));
    got.sort_by_key(|r| r["epoch"].as_u64());
    assert_eq!(got.len(), 3);
    for r in &got {
        assert_eq!(r["hosts"], serde_json::json!(["a", "b"]), "{r}");
        assert_eq!(r["missing"], serde_json::json!([]));
        assert_eq!(r["revision"], 1);
    }
    // Epoch 1 is b's traffic alone, as b's own run answers it.
    let o = Command::new(BIN)
        .arg("run")
        .arg(&traces[1])
        .args(TIMED_RUN)
        .arg("--json")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let alone: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let mine = &got[1]["report"]["epochs"][0];
    assert_eq!(mine["packets"], 10_000);
    assert_eq!(answers(mine), answers(&alone["epochs"][1]));
}

/// The idle test's run options: time epochs of 10 ms.
const TIMED_RUN: [&str; 10] = [
    "--task",
    "heavy_hitters,cardinality",
    "--workers",
    "1",
    "--seed",
    "7",
    "--truth",
    "off",
    "--epoch-ms",
    "10",
];

/// An agent over `trace` with [`TIMED_RUN`].
fn idle_agent(net: &Net, host: &str, trace: &std::path::Path) -> Command {
    let mut c = Command::new(BIN);
    c.arg("agent")
        .arg(trace)
        .args(TIMED_RUN)
        .args(["--drain-timeout-ms", "5000"])
        .args(["--nats", &net.url(), "--host", host])
        .arg("--creds")
        .arg(net.creds(&format!("agent-{host}")))
        .arg("--spool")
        .arg(net.dir.join(format!("spool-{host}")))
        .stdin(Stdio::null());
    c
}

#[test]
fn restarted_controller_corrects_an_epoch_reported_before() {
    let Some(net) = Net::start("restore") else {
        return;
    };
    publish(&net, "a");
    // A controller reports both epochs without b (deadline) and stops.
    let (first, _) = reports(net.controller(&["--epochs", "2"]));
    assert_eq!(first.len(), 2);
    assert!(first
        .iter()
        .all(|r| r["missing"] == serde_json::json!(["b"])));
    // b late, while no controller runs; the next controller corrects both epochs from the
    // bucket's reports and the stream's snapshots.
    publish(&net, "b");
    let (kid, rx) = lines_of(net.controller(&[]));
    corrected_with_b(&net, &rx);
    drop(kid);
}

#[test]
fn sigterm_mid_trace_closes_the_epoch_and_drains() {
    let Some(net) = Net::start("sigterm") else {
        return;
    };
    // The trace comes on stdin: the first epoch and half the second, then SIGTERM, then a
    // trickle of packets (the run looks for the signal at each packet) until the agent ends.
    // Epoch 0's snapshot in the stream: the run is past it, inside epoch 1.
    let (trace, mut kid, mut stdin, cut) = stdin_agent(&net, "a", 15_000);
    use std::io::Write;
    let end = std::time::Instant::now() + Duration::from_secs(20);
    let pid = kid.0.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let (mut at, mut status) = (cut, None);
    while status.is_none() {
        assert!(
            std::time::Instant::now() < end,
            "agent did not end after SIGTERM"
        );
        let next = skip_records(&trace, at, 1);
        if at < trace.len() && stdin.write_all(&trace[at..next]).is_ok() {
            let _ = stdin.flush();
            at = next;
        }
        std::thread::sleep(Duration::from_millis(20));
        status = kid.0.try_wait().unwrap();
    }
    drop(stdin);
    let mut err = String::new();
    use std::io::Read;
    kid.0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.unwrap().code(), Some(143), "{err}");
    assert!(err.contains("2 snapshots published"), "{err}");
    assert!(err.contains(" 0 left in"), "{err}");
    let snaps = stream_snapshots(&net);
    assert_eq!(snaps.len(), 2);
    assert!(!snaps[0].epoch.partial);
    assert_eq!(snaps[1].epoch.index, 1);
    assert!(snaps[1].epoch.partial);
    assert!(snaps[1].epoch.interrupted && !snaps[1].epoch.started_mid);
    assert!(snaps[1].epoch.packets < 10_000);
    // The controller's report says so (b missing after the deadline).
    let (mut got, err) = reports(net.controller(&["--epochs", "2"]));
    got.sort_by_key(|r| r["epoch"].as_u64());
    assert_eq!(got.len(), 2, "{err}");
    assert_eq!(got[0]["partial"], serde_json::json!([]), "{}", got[0]);
    assert_eq!(got[1]["partial"], serde_json::json!(["a"]), "{}", got[1]);
}

/// Host `h`'s agent reading its trace from standard input (`-`), given its first `records`
/// records, once its epoch 0 is in the stream; the trace's bytes and where the rest begins.
/// The agent runs while the pipe stays open.
fn stdin_agent(
    net: &Net,
    h: &str,
    records: usize,
) -> (Vec<u8>, Kid, std::process::ChildStdin, usize) {
    let trace = std::fs::read(net.trace(h)).unwrap();
    let c = net.agent_cmd(h, &net.url(), &format!("agent-{h}"), "7", &[]);
    let args: Vec<std::ffi::OsString> = c
        .get_args()
        .map(|a| {
            if a == net.trace(h).as_os_str() {
                "-".into()
            } else {
                a.to_owned()
            }
        })
        .collect();
    let mut kid = Kid(Command::new(BIN)
        .args(args)
        .args(["--format", "pcap"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap());
    let mut stdin = kid.0.stdin.take().unwrap();
    let cut = skip_records(&trace, 24, records);
    use std::io::Write;
    stdin.write_all(&trace[..cut]).unwrap();
    stdin.flush().unwrap();
    let end = std::time::Instant::now() + Duration::from_secs(20);
    while stored(net) < 1 {
        assert!(std::time::Instant::now() < end, "epoch 0 never published");
        std::thread::sleep(Duration::from_millis(50));
    }
    (trace, kid, stdin, cut)
}

/// Byte offset in a pcap `n` records after offset `at` (at most its end).
fn skip_records(b: &[u8], mut at: usize, n: usize) -> usize {
    for _ in 0..n {
        if at + 16 > b.len() {
            break;
        }
        let len = u32::from_le_bytes(b[at + 8..at + 12].try_into().unwrap()) as usize;
        at += 16 + len;
    }
    at
}

/// A connection as `user` (its credentials file in the test's directory) with reply subjects
/// under `inbox`, on a runtime of its own thread.
fn connect_as(net: &Net, user: &str, inbox: &str) -> (tokio::runtime::Runtime, async_nats::Client) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let b = netwide::creds::Broker {
        url: net.url(),
        creds: net.creds(user),
        tls_ca: net.ca.clone(),
        name: format!("test-{user}"),
        inbox: inbox.into(),
    };
    let c = rt
        .block_on(b.connect(Duration::from_secs(5), false))
        .unwrap();
    (rt, c)
}

/// Publish `payload` as host `h` (agent-h's credentials) on its subject with message id `id`;
/// true when JetStream acknowledged it.
fn publish_raw(net: &Net, h: &str, id: &str, payload: Vec<u8>) -> bool {
    let (rt, c) = connect_as(net, &format!("agent-{h}"), &netwide::agent_inbox(h));
    let _enter = rt.enter();
    let js = async_nats::jetstream::new(c);
    let msg = async_nats::jetstream::message::PublishMessage::build()
        .payload(payload.into())
        .message_id(id);
    rt.block_on(async {
        let ack = js.send_publish(netwide::subject(h), msg).await.ok()?;
        tokio::time::timeout(Duration::from_secs(5), ack)
            .await
            .ok()?
            .ok()
    })
    .is_some()
}

#[test]
fn a_host_cannot_erase_another_hosts_snapshots() {
    let Some(net) = Net::start("forged-id") else {
        return;
    };
    // Host a (allowed to publish on its own subject only) stores junk under the message ids b
    // would use: `b.<epoch>` (the old ids) and the new form with a guessed checksum. JetStream
    // de-duplicates per stream, so with guessable ids b's real snapshots would be dropped as
    // duplicates, and the epochs reported without b, never corrected.
    for e in 0..2u64 {
        for id in [format!("b.{e}"), format!("b.{e}.0000000000000000")] {
            assert!(publish_raw(&net, "a", &id, b"junk".to_vec()));
        }
    }
    // A well-formed snapshot under a foreign id is refused as forged: a's own epoch 0, with
    // b's id form.
    let st = Command::new(BIN)
        .arg("run")
        .arg(net.trace("a"))
        .args(Net::run_args("7"))
        .args(["--host", "a", "--snapshots"])
        .arg(net.dir.join("again"))
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let bytes = std::fs::read(net.dir.join("again").join(snapshot::file_name("a", 0))).unwrap();
    assert!(publish_raw(
        &net,
        "a",
        &netwide::message_id("b", 0, &bytes),
        bytes
    ));
    publish_all(&net);
    let (got, err) = reports(net.controller(&["--epochs", "2"]));
    assert_eq!(got.len(), 2, "{err}");
    assert!(err.contains("\"rejected_host\":1"), "{err}");
    for r in &got {
        assert_eq!(r["hosts"], serde_json::json!(["a", "b"]), "{r}");
        assert_eq!(r["missing"], serde_json::json!([]), "{r}");
    }
    // The junk is refused and named (its epoch unreadable: in the first report).
    assert!(err.contains("\"rejected_malformed\":4"), "{err}");
    let named: usize = got
        .iter()
        .map(|r| r["rejected"].as_array().map_or(0, |a| a.len()))
        .sum();
    assert_eq!(named, 5, "{got:?}");
    check_equal_to_merge(&net, &got);
}

#[test]
fn an_agent_cannot_read_what_is_delivered_to_others() {
    let Some(net) = Net::start("inbox") else {
        return;
    };
    // Host a's credentials try every subject that would carry another's data: the shared
    // inbox (`_INBOX.>`, what the controller's deliveries used), the controller's and b's own
    // inboxes, the snapshot subjects, everything.
    let (rt, spy) = connect_as(&net, "agent-a", &netwide::agent_inbox("a"));
    let got = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for subject in [
        "_INBOX.>",
        "_INBOX_controller.>",
        "_INBOX_b.>",
        "netsift.snapshots.>",
        "netsift.reports",
        ">",
    ] {
        let got = got.clone();
        let spy = spy.clone();
        rt.spawn(async move {
            use futures_util::StreamExt;
            let Ok(mut sub) = spy.subscribe(subject).await else {
                return;
            };
            while let Some(m) = sub.next().await {
                got.fetch_add(m.payload.len(), std::sync::atomic::Ordering::Relaxed);
            }
        });
    }
    std::thread::sleep(Duration::from_millis(300));
    publish(&net, "b");
    let (r, err) = reports(net.controller(&["--epochs", "2"]));
    assert_eq!(r.len(), 2, "{err}");
    assert!(r.iter().all(|r| r["hosts"] == serde_json::json!(["b"])));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        got.load(std::sync::atomic::Ordering::Relaxed),
        0,
        "host a received others' data"
    );
    // Host a's own agent still gets its acknowledgements on its own inbox.
    publish(&net, "a");
}

#[test]
fn the_controller_expects_its_own_configuration_not_the_first_hosts() {
    let Some(net) = Net::start("expect") else {
        return;
    };
    // Host c is misconfigured (another seed) and publishes first.
    let o = net.agent("c", &net.url(), "agent-c", "8");
    assert!(o.status.success(), "{}", stderr(&o));
    publish_all(&net);
    let mut c = Command::new(BIN);
    c.args(["controller", "--nats", &net.url(), "--hosts", "a,b,c"])
        .args(["--deadline-ms", "1000", "--epochs", "2", "--creds"])
        .arg(net.creds("controller"))
        .arg("--expect")
        .arg(&net.expect);
    let (got, err) = reports(c);
    assert!(err.contains("\"rejected_incompatible\":2"), "{err}");
    assert_eq!(got.len(), 2, "{err}");
    for r in &got {
        assert_eq!(r["hosts"], serde_json::json!(["a", "b"]), "{r}");
        let rejected = r["rejected"].as_array().unwrap();
        assert_eq!(rejected.len(), 1, "{r}");
        assert_eq!(rejected[0]["host"], "c");
        assert!(
            rejected[0]["reason"].as_str().unwrap().contains("seed 8"),
            "{r}"
        );
    }
    check_equal_to_merge(&net, &got);
    // An --expect that is neither a snapshot nor a configuration is refused at once, named.
    let bad = net.dir.join("bad.toml");
    std::fs::write(&bad, "epoch_packets = \"many\"\n").unwrap();
    let o = net
        .controller_expecting(&bad, &["--epochs", "0"])
        .output()
        .unwrap();
    failed_with(&o, "bad.toml");
}

#[test]
fn a_second_agent_with_the_same_host_is_refused() {
    let Some(net) = Net::start("lease") else {
        return;
    };
    // The first agent reads its trace from a pipe kept open: it runs until the pipe closes.
    // Its epoch 0 is published: it holds the lease.
    let (trace, mut first, mut stdin, cut) = stdin_agent(&net, "a", 12_000);
    use std::io::Write;
    // A second agent with --host a is refused, loudly, before publishing anything.
    let second = net
        .agent_cmd("a", &net.url(), "agent-a", "7", &[])
        .output()
        .unwrap();
    failed_with(&second, "another agent with --host a is running");
    assert_eq!(stored(&net), 1, "the second agent published");
    // The first goes on to the end of its trace and releases the lease: a restart takes it at
    // once.
    stdin.write_all(&trace[cut..]).unwrap();
    drop(stdin);
    let st = first.0.wait().unwrap();
    assert!(st.success());
    let t = std::time::Instant::now();
    publish(&net, "a");
    assert!(
        t.elapsed() < netwide::LEASE_TTL,
        "the released lease was waited for"
    );
}

/// The snapshot stream's (max age, max bytes, subjects).
fn stream_limits(net: &Net) -> (Duration, i64, Vec<String>) {
    let (rt, c) = connect_as(net, "controller", netwide::CONTROLLER_INBOX);
    let _enter = rt.enter();
    let js = async_nats::jetstream::new(c);
    let mut s = rt.block_on(js.get_stream(netwide::STREAM)).unwrap();
    let info = rt.block_on(s.info()).unwrap();
    let c = &info.config;
    (c.max_age, c.max_bytes, c.subjects.clone())
}

#[test]
fn the_snapshot_stream_is_bounded_in_age_and_bytes() {
    let Some(net) = Net::start("limits") else {
        return;
    };
    // Made by the first controller (--keep 16, packet-count epochs, hosts a and b): the
    // shortest age, and 18 epochs of 2 hosts' largest snapshots.
    let (age, bytes, subjects) = stream_limits(&net);
    assert_eq!(age, Duration::from_secs(600));
    assert_eq!(bytes, 18 * 2 * netwide::MAX_PAYLOAD as i64);
    assert_eq!(subjects, vec!["netsift.snapshots.>".to_string()]);
    // Another controller's limits replace them (a stream made by an earlier version, without
    // limits, is updated the same way).
    let o = net
        .controller(&[
            "--epochs",
            "0",
            "--stream-max-age",
            "900",
            "--stream-max-bytes",
            "3G",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let (age, bytes, _) = stream_limits(&net);
    assert_eq!((age, bytes), (Duration::from_secs(900), 3 << 30));
    // Time epochs of 1 min with --keep 20: 22 epochs and the deadline.
    let cfg = net.dir.join("minute.toml");
    std::fs::write(&cfg, "epoch_ms = 60000\nseed = 7\n").unwrap();
    let o = net
        .controller_expecting(&cfg, &["--epochs", "0", "--keep", "20"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let (age, _, _) = stream_limits(&net);
    assert_eq!(age, Duration::from_secs(22 * 60 + 1));
}

#[test]
fn a_forged_state_is_refused_and_the_rest_of_the_epoch_answered() {
    let Some(net) = Net::start("forged-state") else {
        return;
    };
    // Host b's epoch 0 with a valid checksum but an instance state that is not one.
    let st = Command::new(BIN)
        .arg("run")
        .arg(net.trace("b"))
        .args(Net::run_args("7"))
        .args(["--host", "b", "--snapshots"])
        .arg(net.dir.join("forge"))
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let mut s = snapshot::read(&net.dir.join("forge").join(snapshot::file_name("b", 0))).unwrap();
    let state = &mut s.instances[0].state;
    state.truncate(state.len() / 2);
    state.extend_from_slice(&[0xff; 9]);
    let bytes = snapshot::encode(&s);
    assert!(publish_raw(
        &net,
        "b",
        &netwide::message_id("b", 0, &bytes),
        bytes
    ));
    publish(&net, "a");
    let (got, err) = reports(net.controller(&["--epochs", "2"]));
    assert!(err.contains("\"rejected_malformed\":1"), "{err}");
    let mut got = got;
    got.sort_by_key(|r| r["epoch"].as_u64());
    assert_eq!(got.len(), 2, "{err}");
    assert_eq!(got[0]["hosts"], serde_json::json!(["a"]), "{}", got[0]);
    let rejected = got[0]["rejected"].as_array().unwrap();
    assert_eq!(rejected.len(), 1, "{}", got[0]);
    assert_eq!(rejected[0]["host"], "b");
    assert!(rejected[0]["reason"]
        .as_str()
        .unwrap()
        .contains(&s.instances[0].algorithm));
    // Acknowledged as refused: a restarted controller is not handed it again; b's real
    // snapshots then correct both epochs.
    publish(&net, "b");
    let (kid, rx) = lines_of(net.controller(&[]));
    corrected_with_b(&net, &rx);
    drop(kid);
}

#[test]
fn one_configuration_file_for_agents_and_controller() {
    let Some(net) = Net::start("config") else {
        return;
    };
    // The README's deployment: every agent measures with deploy.toml, the controller expects
    // it (its defaults and measures resolved as an agent's run resolves them).
    let cfg = net.dir.join("deploy.toml");
    std::fs::write(
        &cfg,
        "epoch_packets = 10000\nseed = 11\n\n[[measure]]\ntask = \"heavy_hitters\"\nalgo = \
         \"count_min\"\n\n[[measure]]\ntask = \"cardinality\"\nalgo = \"hyperloglog\"\n",
    )
    .unwrap();
    for h in HOSTS {
        let o = Command::new(BIN)
            .arg("agent")
            .arg(net.trace(h))
            .arg("--config")
            .arg(&cfg)
            .args(["--truth", "off", "--drain-timeout-ms", "5000"])
            .args(["--nats", &net.url(), "--host", h])
            .arg("--creds")
            .arg(net.creds(&format!("agent-{h}")))
            .arg("--spool")
            .arg(net.dir.join(format!("spool-{h}")))
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let (got, err) = reports(net.controller_expecting(&cfg, &["--epochs", "2"]));
    assert_eq!(got.len(), 2, "{err}");
    assert!(err.contains("\"rejected_incompatible\":0"), "{err}");
    for r in &got {
        assert_eq!(r["hosts"], serde_json::json!(["a", "b"]), "{r}");
    }
}
