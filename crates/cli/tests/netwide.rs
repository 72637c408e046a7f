//! The network-wide deployment over a real `nats-server` (started here on 127.0.0.1, a free
//! port, in a temporary directory, killed at the end even on failure): agents, controller,
//! restarts, authentication, rejection. Without `nats-server` on the PATH each test prints one
//! `skip:` line. Every wait is bounded.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use netwide::server::{Role, Server, User};

const BIN: &str = env!("CARGO_BIN_EXE_netsift");
const HOSTS: [&str; 2] = ["a", "b"];

/// A temporary directory, a server and the users' credentials; the server is killed and the
/// directory removed on drop.
struct Net {
    dir: PathBuf,
    bin: PathBuf,
    config: String,
    server: Option<Server>,
}

impl Net {
    fn start(name: &str) -> Option<Net> {
        let Some(bin) = netwide::server::binary() else {
            println!("skip: nats-server not on PATH (apt-get install nats-server)");
            return None;
        };
        let dir = std::env::temp_dir().join(format!("netsift-nw-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut users: Vec<User> = ["a", "b", "c"]
            .iter()
            .map(|h| User {
                name: format!("agent-{h}"),
                password: format!("pw-{h}"),
                role: Role::Agent {
                    host: h.to_string(),
                },
            })
            .collect();
        users.push(User {
            name: "controller".into(),
            password: "pw-c".into(),
            role: Role::Controller,
        });
        for u in &users {
            u.write_creds(&dir).unwrap();
        }
        let port = netwide::server::free_port().unwrap();
        let config = netwide::server::config(port, &dir.join("js"), &users);
        let mut net = Net {
            dir,
            bin,
            config,
            server: None,
        };
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
            .args(extra)
            .stdin(Stdio::null());
        c
    }

    fn controller(&self, extra: &[&str]) -> Command {
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
        .args(extra)
        .stdin(Stdio::null());
        c
    }
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
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _enter = rt.enter();
    let b = netwide::creds::Broker {
        url: net.url(),
        creds: net.creds("controller"),
        tls_ca: None,
        name: "test".into(),
    };
    let c = rt
        .block_on(b.connect(Duration::from_secs(5), false))
        .unwrap();
    let js = async_nats::jetstream::new(c);
    rt.block_on(netwide::stored_snapshots(&js, Duration::from_secs(5)))
        .unwrap()
        .len()
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
    let o = net.agent("a", &net.url(), "agent-a", "7");
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("2 snapshots published, "),
        "{}",
        stderr(&o)
    );
    let o = net.agent("b", &net.url(), "agent-b", "7");
    assert!(o.status.success(), "{}", stderr(&o));
    // The stream holds each (host, epoch) once.
    assert_eq!(stored(&net), 4);
    let (got, err) = reports(net.controller(&["--epochs", "2"]));
    assert!(err.contains("\"accepted\":4"), "{err}");
    assert!(got
        .iter()
        .all(|r| r["revision"] == 1 && r["missing"].as_array().unwrap().is_empty()));
    check_equal_to_merge(&net, &got);
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
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("refused the credentials"),
        "{}",
        stderr(&o)
    );
    // An agent whose user may not publish another host's subject gets no acknowledgement.
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
    assert!(!o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("0 snapshots published"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn corrupted_and_incompatible_snapshots_are_rejected() {
    let Some(net) = Net::start("reject") else {
        return;
    };
    for h in HOSTS {
        let o = net.agent(h, &net.url(), &format!("agent-{h}"), "7");
        assert!(o.status.success(), "{}", stderr(&o));
    }
    // Host c: another seed (incompatible), and a corrupted file in its spool.
    let spool = net.dir.join("spool-c");
    std::fs::create_dir_all(&spool).unwrap();
    std::fs::write(
        spool.join(snapshot::file_name("c", 9)),
        b"NSIFTSNP not a snapshot",
    )
    .unwrap();
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
    for h in HOSTS {
        let o = net.agent(h, &net.url(), &format!("agent-{h}"), "7");
        assert!(o.status.success(), "{}", stderr(&o));
    }
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

/// Lines of a child's standard output, each waited for at most `secs`.
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
    let o = net.agent("a", &net.url(), "agent-a", "7");
    assert!(o.status.success(), "{}", stderr(&o));
    let mut kid = Kid(net
        .controller(&[])
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
    // Past the deadline (1 s): both epochs without b.
    for e in 0..2 {
        let r = next_line(&rx, 20);
        assert_eq!(r["epoch"], e);
        assert_eq!(r["revision"], 1);
        assert_eq!(r["hosts"], serde_json::json!(["a"]));
        assert_eq!(r["missing"], serde_json::json!(["b"]));
    }
    // b arrives late: each epoch corrected, revision 2, as merge of both hosts.
    let o = net.agent("b", &net.url(), "agent-b", "7");
    assert!(o.status.success(), "{}", stderr(&o));
    let mut fixed = vec![next_line(&rx, 20), next_line(&rx, 20)];
    fixed.sort_by_key(|r| r["epoch"].as_u64());
    for r in &fixed {
        assert_eq!(r["revision"], 2);
        assert_eq!(r["hosts"], serde_json::json!(["a", "b"]));
        assert_eq!(r["missing"], serde_json::json!([]));
    }
    drop(kid);
    check_equal_to_merge(&net, &fixed);
}
