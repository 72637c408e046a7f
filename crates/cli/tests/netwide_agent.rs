//! The agent's side of the network-wide deployment over a real `nats-server` (started here on
//! 127.0.0.1, a free port, in a temporary directory, killed at the end even on failure): a
//! broker away at the start, a snapshot over the server's limit, a full spool disk, a user
//! denied its subject, foreign and corrupt spool files, private credentials. Without
//! `nats-server` on the PATH each test prints one `skip:` line; the full-disk test needs root
//! (a tmpfs mount) and says so with one `skip:` line otherwise. Every wait is bounded.

use std::io::{BufRead, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use netwide::server::{Login, Role, Server, User};

const BIN: &str = env!("CARGO_BIN_EXE_netsift");

/// A temporary directory, a server (running or not yet) and the users' credentials; the server
/// is killed and the directory removed on drop.
struct Net {
    dir: PathBuf,
    bin: PathBuf,
    port: u16,
    config: String,
    server: Option<Server>,
}

impl Net {
    /// Users `agent-a`, `agent-b` (each publishing its host's subject) and `controller`; the
    /// server started when `up` (and the stream made), else only its port chosen.
    fn new(name: &str, up: bool) -> Option<Net> {
        Net::with_config(name, up, |c| c)
    }

    /// [`Net::new`] with the server's configuration changed by `edit`.
    fn with_config(name: &str, up: bool, edit: impl Fn(String) -> String) -> Option<Net> {
        let Some(bin) = netwide::server::binary() else {
            println!("skip: nats-server not on PATH (apt-get install nats-server)");
            return None;
        };
        let dir = testkit::scratch("nwa").join(name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut users: Vec<User> = ["a", "b"]
            .iter()
            .map(|h| User {
                name: format!("agent-{h}"),
                login: Login::Password(format!("pw-{h}")),
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
        let config = edit(netwide::server::config(port, &dir.join("js"), &users));
        let mut net = Net {
            dir,
            bin,
            port,
            config,
            server: None,
        };
        if up {
            net.start_server();
        }
        Some(net)
    }

    /// Start the server and make the stream (the controller makes it; agents may not).
    fn start_server(&mut self) {
        let s = Server::start(
            &self.bin,
            &self.dir,
            self.port,
            &self.config,
            Duration::from_secs(5),
        )
        .unwrap();
        self.server = Some(s);
        // Only the stream is wanted: any expected configuration will do.
        let expect = self.dir.join("expect.toml");
        std::fs::write(&expect, "seed = 7\n").unwrap();
        let o = Command::new(BIN)
            .args(["controller", "--nats", &self.url(), "--hosts", "a,b"])
            .args(["--epochs", "0", "--creds"])
            .arg(self.creds("controller"))
            .arg("--expect")
            .arg(&expect)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
    }

    fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    fn creds(&self, user: &str) -> PathBuf {
        self.dir.join(format!("{user}.creds"))
    }

    fn spool(&self, host: &str) -> PathBuf {
        self.dir.join(format!("spool-{host}"))
    }

    /// A trace of `packets` packets (2,000 flows), made once.
    fn trace(&self, packets: u64) -> PathBuf {
        let p = self.dir.join(format!("t{packets}.pcap"));
        if !p.exists() {
            let st = Command::new(BIN)
                .args(["gen", "--packets", &packets.to_string(), "--flows", "2000"])
                .args(["--seed", "97", "--out"])
                .arg(&p)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .unwrap();
            assert!(st.success());
        }
        p
    }

    /// `netsift agent` of host `host` logged in as `user` over `trace` (`-`: stdin, pcap),
    /// epochs of 10,000 packets; `tasks` None: every default task (snapshots of about 2.5 MB).
    fn agent(&self, host: &str, user: &str, trace: &Path, tasks: Option<&str>) -> Command {
        let mut c = Command::new(BIN);
        c.arg("agent").arg(trace);
        if trace == Path::new("-") {
            c.args(["--format", "pcap"]);
        }
        if let Some(t) = tasks {
            c.args(["--task", t]);
        }
        c.args(["--epoch-packets", "10000", "--workers", "1", "--seed", "7"])
            .args(["--truth", "off", "--nats", &self.url(), "--host", host])
            .arg("--creds")
            .arg(self.creds(user))
            .arg("--spool")
            .arg(self.spool(host))
            .stdin(Stdio::null());
        c
    }

    /// The snapshots the stream holds, as (host, epoch), oldest first.
    fn stored(&self) -> Vec<(String, u64)> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _enter = rt.enter();
        let b = netwide::creds::Broker {
            url: self.url(),
            creds: self.creds("controller"),
            tls_ca: None,
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
            .map(|(name, s)| {
                let s = s.unwrap_or_else(|e| panic!("{name}: {e}"));
                (s.host, s.epoch.index)
            })
            .collect()
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

/// A child killed on drop (a test that fails leaves nothing running), its standard error
/// read line by line as it comes.
struct Kid {
    child: Child,
    lines: mpsc::Receiver<String>,
    err: Vec<String>,
}

impl Kid {
    fn spawn(mut c: Command) -> Kid {
        let mut child = c
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, lines) = mpsc::channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for l in std::io::BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        Kid {
            child,
            lines,
            err: vec![],
        }
    }

    /// Wait at most `secs` for a line of standard error containing `what`.
    fn wait_for(&mut self, what: &str, secs: u64) {
        let end = Instant::now() + Duration::from_secs(secs);
        while !self.err.iter().any(|l| l.contains(what)) {
            let left = end.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => self.err.push(l),
                Err(_) => panic!("no {what:?} within {secs} s: {}", self.err.join("\n")),
            }
        }
    }

    /// Wait at most `secs` for the end: its exit code and its whole standard error.
    fn end(mut self, secs: u64) -> (Option<i32>, String) {
        let end = Instant::now() + Duration::from_secs(secs);
        let status = loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                break st;
            }
            assert!(
                Instant::now() < end,
                "did not end within {secs} s: {}",
                self.err.join("\n")
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        // The reader thread ends with the pipe.
        while let Ok(l) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.err.push(l);
        }
        (status.code(), self.err.join("\n"))
    }
}

impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// The snapshot files in `dir` (names), sorted.
fn files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.map_while(Result::ok)
                .filter(|e| e.path().is_file())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn epochs_of(host: &str, n: u64) -> Vec<(String, u64)> {
    (0..n).map(|e| (host.to_string(), e)).collect()
}

#[test]
fn a_broker_away_at_the_start_loses_no_snapshot_over_1_mib() {
    let Some(mut net) = Net::new("outage", false) else {
        return;
    };
    // Four epochs of every default task: about 2.5 MB each, over the client's 1 MiB default.
    let trace = net.trace(40_000);
    let mut c = net.agent("a", "agent-a", &trace, None);
    c.args(["--drain-timeout-ms", "60000", "--ack-timeout-ms", "5000"]);
    let mut kid = Kid::spawn(c);
    kid.wait_for("spooling and retrying", 30);
    // The run writes its epochs into the spool while the broker is away.
    let end = Instant::now() + Duration::from_secs(60);
    while files(&net.spool("a")).len() < 4 {
        assert!(
            Instant::now() < end,
            "the spool never held 4 snapshots: {:?}",
            files(&net.spool("a"))
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let big = std::fs::metadata(net.spool("a").join(snapshot::file_name("a", 0)))
        .unwrap()
        .len();
    assert!(big > 1 << 20, "{big} bytes");
    // Still all there a moment later: nothing judged too large against the client's default.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(files(&net.spool("a")).len(), 4);
    net.start_server();
    let (code, err) = kid.end(90);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("4 snapshots published"), "{err}");
    assert!(err.contains(" 0 too large"), "{err}");
    assert_eq!(net.stored(), epochs_of("a", 4));
    assert!(files(&net.spool("a")).is_empty());
}

#[test]
fn a_snapshot_over_the_servers_limit_is_kept_named_and_fails_the_agent() {
    // A server taking at most 64 KB: every snapshot of the run (about 300 KB) is over it.
    let Some(net) = Net::with_config("limit", true, |c| {
        c.replace(
            &format!("max_payload: {}", netwide::MAX_PAYLOAD),
            "max_payload: 65536",
        )
    }) else {
        return;
    };
    let trace = net.trace(20_000);
    let mut c = net.agent("a", "agent-a", &trace, Some("heavy_hitters,cardinality"));
    c.args(["--drain-timeout-ms", "20000"]);
    let (code, err) = Kid::spawn(c).end(60);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("2 too large"), "{err}");
    let kept: Vec<String> = (0..2)
        .map(|e| format!("{}.too-large", snapshot::file_name("a", e)))
        .collect();
    assert_eq!(files(&net.spool("a")), kept);
    for k in &kept {
        assert!(err.contains(k.as_str()), "{k} not named: {err}");
        // Kept whole: it decodes.
        snapshot::decode(&std::fs::read(net.spool("a").join(k)).unwrap()).unwrap();
    }
    assert!(err.contains("65536"), "the server's limit not named: {err}");
    assert!(net.stored().is_empty());
}

#[test]
fn another_hosts_credentials_say_permissions_violation_at_once() {
    let Some(net) = Net::new("denied", true) else {
        return;
    };
    // Host b logged in as agent-a (allowed netsift.snapshots.a only).
    let trace = net.trace(20_000);
    let mut c = net.agent("b", "agent-a", &trace, Some("heavy_hitters,cardinality"));
    c.args(["--drain-timeout-ms", "60000", "--ack-timeout-ms", "20000"]);
    let started = Instant::now();
    let (code, err) = Kid::spawn(c).end(60);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("Permissions Violation for "), "{err}");
    // The first thing it may not do, whichever the server judges first: subscribe to host b's
    // reply inbox, or read host b's lease (then publish b's snapshots). Both name host b.
    assert!(
        err.contains("Subscription to \"_INBOX_b.")
            || (err.contains("Publish to \"") && err.contains("netsift.agents.b\"")),
        "{err}"
    );
    assert!(err.contains("check that --creds are host b's"), "{err}");
    assert!(!err.contains("acknowledgement"), "{err}");
    // Neither the acknowledgement timeout (20 s) nor the drain (60 s) was waited for.
    assert!(started.elapsed() < Duration::from_secs(15), "{err}");
    assert!(net.stored().is_empty());
}

#[test]
fn foreign_and_corrupt_spool_files_are_set_aside_and_block_nothing() {
    let Some(net) = Net::new("aside", true) else {
        return;
    };
    let spool = net.spool("a");
    std::fs::create_dir_all(&spool).unwrap();
    // Epoch 1 of host b (a valid snapshot, another host), a corrupt epoch 7 of a, and a's
    // epoch 0 under epoch 9's name: none may be published, none may hold up a's epochs.
    let local = net.dir.join("local");
    let st = Command::new(BIN)
        .arg("run")
        .arg(net.trace(20_000))
        .args([
            "--epoch-packets",
            "10000",
            "--task",
            "heavy_hitters,cardinality",
        ])
        .args([
            "--workers",
            "1",
            "--seed",
            "7",
            "--truth",
            "off",
            "--host",
            "b",
        ])
        .arg("--snapshots")
        .arg(&local)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let foreign = snapshot::file_name("b", 1);
    std::fs::copy(local.join(&foreign), spool.join(&foreign)).unwrap();
    let corrupt = snapshot::file_name("a", 7);
    let mut bytes = std::fs::read(local.join(snapshot::file_name("b", 0))).unwrap();
    let n = bytes.len();
    bytes[n / 2] ^= 0xff;
    std::fs::write(spool.join(&corrupt), &bytes).unwrap();
    let misnamed = snapshot::file_name("a", 9);
    let mut s = snapshot::read(&local.join(snapshot::file_name("b", 0))).unwrap();
    s.host = "a".into();
    let p = snapshot::write(&local, &s).unwrap();
    std::fs::rename(p, spool.join(&misnamed)).unwrap();
    // Credentials readable by all: a warning naming the file and its mode.
    let creds = net.creds("agent-a");
    std::fs::set_permissions(&creds, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut c = net.agent(
        "a",
        "agent-a",
        &net.trace(20_000),
        Some("heavy_hitters,cardinality"),
    );
    c.args(["--drain-timeout-ms", "20000"]);
    let (code, err) = Kid::spawn(c).end(60);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("2 snapshots published"), "{err}");
    assert!(err.contains("3 rejected"), "{err}");
    assert!(err.contains(" 0 left in"), "{err}");
    let rejected = spool.join(netwide::publish::REJECTED_DIR);
    let mut want = vec![corrupt, foreign, misnamed];
    want.sort();
    assert_eq!(files(&rejected), want);
    for f in &want {
        assert!(err.contains(f.as_str()), "{f} not named: {err}");
    }
    assert!(files(&spool).is_empty(), "{:?}", files(&spool));
    assert_eq!(net.stored(), epochs_of("a", 2));
    assert!(
        err.contains(&format!("credentials file {}: mode 644", creds.display())),
        "{err}"
    );
    // The server's configuration holds every password: its owner's alone.
    let conf = std::fs::metadata(net.dir.join("nats.conf")).unwrap();
    assert_eq!(conf.permissions().mode() & 0o777, 0o600);
    let mode = std::fs::metadata(net.creds("agent-b")).unwrap();
    assert_eq!(mode.permissions().mode() & 0o777, 0o600);
}

#[test]
fn a_snapshot_that_cannot_be_written_is_counted_and_the_run_goes_on() {
    let Some(net) = Net::new("unwritable", true) else {
        return;
    };
    // A directory where epoch 1's temporary file goes: its write fails (as root too).
    let spool = net.spool("a");
    std::fs::create_dir_all(spool.join(format!(".{}.tmp", snapshot::file_name("a", 1)))).unwrap();
    let mut c = net.agent(
        "a",
        "agent-a",
        &net.trace(30_000),
        Some("heavy_hitters,cardinality"),
    );
    c.args(["--drain-timeout-ms", "20000"]);
    let (code, err) = Kid::spawn(c).end(60);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("epoch 1: snapshot not written"), "{err}");
    assert!(err.contains("1 not written (epochs [1]"), "{err}");
    assert!(err.contains("2 snapshots published"), "{err}");
    assert_eq!(net.stored(), vec![("a".into(), 0), ("a".into(), 2)]);
}

/// A tmpfs of `size` mounted on `dir` (root only), unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Result<Tmpfs, String> {
        let uid = Command::new("id")
            .arg("-u")
            .output()
            .map_err(|e| e.to_string())?;
        if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
            return Err("not root (a tmpfs mount needs it)".into());
        }
        std::fs::create_dir_all(dir).unwrap();
        let o = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output()
            .map_err(|e| format!("mount: {e}"))?;
        if !o.status.success() {
            return Err(format!("mount -t tmpfs failed: {}", stderr(&o).trim()));
        }
        Ok(Tmpfs(dir.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_full_spool_disk_drops_the_new_epochs_and_capture_goes_on_until_space_returns() {
    let Some(net) = Net::new("enospc", true) else {
        return;
    };
    let spool = net.spool("a");
    let fs = match Tmpfs::mount(&spool, "2m") {
        Ok(fs) => fs,
        Err(why) => {
            println!("skip: {why}");
            return;
        }
    };
    // The disk full: a filler takes every block.
    let filler = spool.join("filler");
    {
        let mut f = std::fs::File::create(&filler).unwrap();
        let block = vec![0u8; 64 << 10];
        while f.write_all(&block).is_ok() {}
    }
    // The trace comes on stdin: epochs 0 and 1 (and the first packet of 2, which closes 1)
    // while the disk is full, then space returns, then epochs 2 and 3.
    let trace = std::fs::read(net.trace(40_000)).unwrap();
    let mut c = net.agent(
        "a",
        "agent-a",
        Path::new("-"),
        Some("heavy_hitters,cardinality"),
    );
    c.args(["--drain-timeout-ms", "20000"])
        .stdin(Stdio::piped());
    let mut kid = Kid::spawn(c);
    let mut stdin = kid.child.stdin.take().unwrap();
    let cut = skip_records(&trace, 24, 20_001);
    stdin.write_all(&trace[..cut]).unwrap();
    stdin.flush().unwrap();
    kid.wait_for("epoch 1: snapshot not written", 30);
    assert!(
        kid.err.iter().any(|l| l.contains("disk full")),
        "{:?}",
        kid.err
    );
    assert!(kid.child.try_wait().unwrap().is_none(), "the agent ended");
    std::fs::remove_file(&filler).unwrap();
    stdin.write_all(&trace[cut..]).unwrap();
    drop(stdin);
    let (code, err) = kid.end(60);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("2 not written (epochs [0, 1]"), "{err}");
    assert!(err.contains("No space left on device"), "{err}");
    assert!(err.contains("2 snapshots published"), "{err}");
    assert_eq!(net.stored(), vec![("a".into(), 2), ("a".into(), 3)]);
    drop(fs);
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

#[test]
fn a_spooled_snapshot_is_flushed_to_disk_then_renamed_then_its_directory_flushed() {
    // The calls as `strace` sees them (`-y`: each descriptor's path).
    let dir = testkit::scratch("nwa").join("fsync");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("t.pcap");
    let st = Command::new(BIN)
        .args(["gen", "--packets", "2000", "--flows", "100", "--out"])
        .arg(&trace)
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let log = dir.join("strace.txt");
    let spool = dir.join("spool");
    let traced = Command::new("strace")
        .args([
            "-f",
            "-y",
            "-qq",
            "-e",
            "trace=fsync,fdatasync,rename,renameat,renameat2",
        ])
        .arg("-o")
        .arg(&log)
        .args([BIN, "run"])
        .arg(&trace)
        .args([
            "--task",
            "cardinality",
            "--truth",
            "off",
            "--host",
            "a",
            "--snapshots",
        ])
        .arg(&spool)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    match traced {
        Err(_) => {
            println!("skip: strace not on PATH (apt-get install strace)");
            let _ = std::fs::remove_dir_all(&dir);
            return;
        }
        Ok(s) if !s.success() || !log.exists() => {
            println!("skip: strace cannot trace here (ptrace not permitted?)");
            let _ = std::fs::remove_dir_all(&dir);
            return;
        }
        Ok(_) => {}
    }
    let calls = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = calls.lines().collect();
    let name = snapshot::file_name("a", 0);
    let at = |what: &dyn Fn(&str) -> bool| {
        lines
            .iter()
            .position(|l| what(l))
            .unwrap_or_else(|| panic!("not in the trace:\n{calls}"))
    };
    let spool = spool.canonicalize().unwrap();
    let file = at(&|l| l.contains("sync(") && l.contains(&format!("/.{name}.tmp>")));
    let renamed = at(&|l| l.contains("rename") && l.contains(&format!("/{name}\"")));
    let dir_synced = at(&|l| l.contains("sync(") && l.contains(&format!("<{}>)", spool.display())));
    assert!(file < renamed && renamed < dir_synced, "{calls}");
    let _ = std::fs::remove_dir_all(&dir);
}
