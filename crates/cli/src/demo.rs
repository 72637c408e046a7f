//! `netsift demo network`: the network-wide deployment on one machine. A `nats-server` with
//! JetStream (file storage) and per-host users in a temporary directory, a trace cut into
//! flow-disjoint parts (a seeded hash of each packet's 5-tuple picks its host), one `netsift
//! agent` per part, a `netsift controller`; then the controller's reports, and the merged
//! answers scored against the exact truth of the whole trace. Everything is removed at the end.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use netwide::server::{Login, Role, Server, User};

use crate::flags;
use crate::out::Out;

#[derive(Subcommand)]
pub enum DemoCmd {
    /// Agents on flow partitions of a trace and a controller over a local NATS JetStream.
    Network(NetworkArgs),
}

#[derive(Args)]
pub struct NetworkArgs {
    /// Number of hosts (agents), 1..=32.
    #[arg(long, default_value_t = 3, allow_negative_numbers = true,
          value_parser = flags::whole::<usize>(1..=32))]
    pub hosts: usize,
    /// A classic pcap file to partition (`netsift gen` writes one). Default: generated, 600,000
    /// packets at 1 Mpps (three epochs of 200 ms).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Epoch length in ms of capture time (every host's epochs must cover the same time).
    #[arg(long, default_value_t = 200, allow_negative_numbers = true,
          value_parser = flags::whole::<u64>(1..=u64::MAX))]
    pub epoch_ms: u64,
    /// Tasks for the agents (as `run --task`), default heavy_hitters,heavy_changers,cardinality.
    #[arg(long, default_value = "heavy_hitters,heavy_changers,cardinality")]
    pub task: String,
}

/// Cut a classic pcap (either byte order, µs or ns) into `n` pcaps of disjoint flows: the host
/// of a packet is a seeded xxh3 of its 5-tuple (`key::HashFn`) reduced to `n`
/// (`key::reduce`). Packets without a 5-tuple go to host 0.
pub fn partition_pcap(bytes: &[u8], n: usize, seed: u64) -> Result<Vec<Vec<u8>>> {
    let Some(head) = bytes.get(..24) else {
        bail!("not a pcap file: shorter than its 24-byte header");
    };
    let big = match head[..4] {
        [0xd4, 0xc3, 0xb2, 0xa1] | [0x4d, 0x3c, 0xb2, 0xa1] => false,
        [0xa1, 0xb2, 0xc3, 0xd4] | [0xa1, 0xb2, 0x3c, 0x4d] => true,
        _ => bail!("not a classic pcap file (the demo cuts pcap; `netsift gen` writes one)"),
    };
    let u32_at = |b: &[u8]| {
        let a = [b[0], b[1], b[2], b[3]];
        if big {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        }
    };
    let link = u32_at(&head[20..24]);
    let hash = key::HashFn::new(seed);
    let mut parts = vec![head.to_vec(); n];
    let mut at = 24;
    while at + 16 <= bytes.len() {
        let len = u32_at(&bytes[at + 8..at + 12]) as usize;
        let Some(rec) = bytes.get(at..at + 16 + len) else {
            bail!("pcap record at offset {at} is cut short");
        };
        let v = wire::parse_with(link, &rec[16..], wire::Tunnel::Outer);
        let host = if engine::packet::keyed(v.class) {
            let t = &v.tuple;
            let mut k = [0u8; 37];
            k[..16].copy_from_slice(&t.src);
            k[16..32].copy_from_slice(&t.dst);
            k[32..34].copy_from_slice(&t.sport.to_be_bytes());
            k[34..36].copy_from_slice(&t.dport.to_be_bytes());
            k[36] = t.proto;
            key::reduce(hash.hash_bytes(&k), n)
        } else {
            0
        };
        parts[host].extend_from_slice(rec);
        at += 16 + len;
    }
    Ok(parts)
}

/// A local `nats-server` with JetStream storing in `dir/jetstream`, a user per host
/// (`agent-H`, publishing `netsift.snapshots.H` only) and `controller`, their credentials files
/// in `dir` (`agent-H.creds`, `controller.creds`): the demo's and `bench netwide`'s.
pub fn local_server(
    bin: &std::path::Path,
    dir: &std::path::Path,
    hosts: &[String],
) -> Result<Server> {
    // Passwords differ per run and per user; they only guard the demo's temporary server.
    let password = |i: usize| format!("{:016x}", key::mix64(std::process::id() as u64 ^ i as u64));
    let mut users: Vec<User> = hosts
        .iter()
        .enumerate()
        .map(|(i, h)| User {
            name: format!("agent-{h}"),
            login: Login::Password(password(i)),
            role: Role::Agent { host: h.clone() },
        })
        .collect();
    users.push(User {
        name: "controller".into(),
        login: Login::Password(password(usize::MAX)),
        role: Role::Controller,
    });
    for u in &users {
        u.write_creds(dir)?;
    }
    let port = netwide::server::free_port()?;
    let config = netwide::server::config(port, &dir.join("jetstream"), &users);
    Server::start(bin, dir, port, &config, Duration::from_secs(5)).map_err(anyhow::Error::msg)
}

/// A temporary directory removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// A new directory `<temp>/<prefix>-<pid>-<n>`, mode 700 (it holds the server's
    /// configuration with every password, and the credentials files): never one that existed
    /// before (another user's, or a link), a fresh name instead.
    pub fn fresh(prefix: &str) -> Result<TempDir> {
        use std::os::unix::fs::DirBuilderExt;
        let base = std::env::temp_dir();
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        for i in 0..1000u64 {
            let n = key::mix64(seed ^ i) & 0xffff_ffff;
            let p = base.join(format!("{prefix}-{}-{n:08x}", std::process::id()));
            match std::fs::DirBuilder::new().mode(0o700).create(&p) {
                Ok(()) => return Ok(TempDir(p)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e).with_context(|| format!("{}", p.display())),
            }
        }
        bail!("no fresh directory {prefix}-* in {}", base.display())
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A child process killed when dropped.
struct Kid(Child);

/// A line of agent `host`'s stderr as the demo prints it: under the process's prefix
/// (`netsift: warning: ...` becomes `netsift: warning: agent h2: ...`), unchanged when the agent
/// named itself already.
fn from_agent(host: &str, line: &str) -> String {
    let me = format!("agent {host}:");
    if line.contains(&me) {
        return line.to_string();
    }
    for prefix in ["netsift: error: ", "netsift: warning: ", "netsift: "] {
        if let Some(rest) = line.strip_prefix(prefix) {
            return format!("{prefix}{me} {rest}");
        }
    }
    format!("netsift: {me} {line}")
}

impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn cmd_network(a: NetworkArgs, out: &mut Out) -> Result<bool> {
    let Some(bin) = netwide::server::binary() else {
        bail!("nats-server not found on PATH: install it (apt-get install nats-server)");
    };
    let exe = std::env::current_exe().context("demo: the netsift binary's path")?;
    let dir = TempDir::fresh("netsift-demo")?;
    let d = dir.0.as_path();
    let trace = match &a.trace {
        Some(p) => std::fs::read(p).with_context(|| format!("{}", p.display()))?,
        None => {
            let spec = gen::Spec {
                packets: 600_000,
                snaplen: 64,
                ..gen::Spec::default()
            };
            let mut buf = vec![];
            gen::write(&spec, gen::OutFormat::Pcap, &mut buf).context("generating the trace")?;
            buf
        }
    };
    let all = d.join("all.pcap");
    std::fs::write(&all, &trace).with_context(|| format!("{}", all.display()))?;
    let hosts: Vec<String> = (1..=a.hosts).map(|i| format!("h{i}")).collect();
    for (h, part) in hosts.iter().zip(partition_pcap(&trace, a.hosts, 0x5eed)?) {
        let f = d.join(format!("{h}.pcap"));
        std::fs::write(&f, part).with_context(|| format!("{}", f.display()))?;
    }
    drop(trace);
    let server = local_server(&bin, d, &hosts)?;
    let store = d.join("jetstream");
    crate::say!(
        "netsift: demo: nats-server on {} (JetStream in {}), {}, one controller",
        server.url(),
        store.display(),
        measure::report::count(a.hosts as u64, "agent", "agents")
    );
    let url = server.url();
    let started = Instant::now();
    // The configuration the controller expects: a snapshot of the agents' own flags (a short
    // local run), as docs/netwide.md tells a deployment to make it.
    let reference = d.join("expected");
    let st = Command::new(&exe)
        .arg("run")
        .arg(d.join(format!("{}.pcap", hosts[0])))
        .args(["--task", &a.task, "--epoch-ms", &a.epoch_ms.to_string()])
        .args(["--truth", "off", "--workers", "1", "--host", "expected"])
        .arg("--snapshots")
        .arg(&reference)
        .stdout(Stdio::null())
        .stdin(Stdio::null())
        .status()
        .context("writing the expected configuration's snapshot")?;
    let expect = std::fs::read_dir(&reference)
        .ok()
        .and_then(|mut r| r.find_map(|e| e.ok().map(|e| e.path())))
        .filter(|_| st.success())
        .context("the expected configuration's snapshot was not written")?;
    let mut controller = Kid(Command::new(&exe)
        .args([
            "controller",
            "--nats",
            &url,
            "--deadline-ms",
            "10000",
            "--hosts",
        ])
        .arg(hosts.join(","))
        .arg("--expect")
        .arg(&expect)
        .arg("--creds")
        .arg(d.join("controller.creds"))
        .stdout(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .context("starting the controller")?);
    let (tx, rx) = mpsc::channel::<String>();
    let stdout = controller
        .0
        .stdout
        .take()
        .context("the controller's output")?;
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut agents = vec![];
    for h in &hosts {
        agents.push(Kid(Command::new(&exe)
            .arg("agent")
            .arg(d.join(format!("{h}.pcap")))
            .args(["--nats", &url, "--host", h, "--task", &a.task, "--json"])
            .args(["--epoch-ms", &a.epoch_ms.to_string(), "--truth", "off"])
            .arg("--creds")
            .arg(d.join(format!("agent-{h}.creds")))
            .arg("--spool")
            .arg(d.join(format!("spool-{h}")))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .stdin(Stdio::null())
            .spawn()
            .context("starting an agent")?));
        // The agents share this terminal: each line says which agent it comes from (issue
        // 34.9: a warning of one agent among three was anyone's).
        if let Some(err) = agents.last_mut().and_then(|k| k.0.stderr.take()) {
            let h = h.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(err).lines().map_while(Result::ok) {
                    crate::say!("{}", from_agent(&h, &line));
                }
            });
        }
    }
    for (h, k) in hosts.iter().zip(&mut agents) {
        let st = k.0.wait()?;
        if !st.success() {
            bail!("agent {h} failed ({st})");
        }
    }
    // Every epoch the hosts published, from the stream itself.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let reader = netwide::creds::Broker {
        url: url.clone(),
        creds: d.join("controller.creds"),
        tls_ca: None,
        name: "netsift-demo".into(),
        inbox: netwide::CONTROLLER_INBOX.into(),
    };
    // The JetStream context spawns its acknowledgement task on the runtime.
    let _enter = rt.enter();
    let js =
        async_nats::jetstream::new(rt.block_on(reader.connect(Duration::from_secs(5), false))?);
    let stored = rt.block_on(netwide::stored_snapshots(&js, Duration::from_secs(5)))?;
    let mut names = vec![];
    let mut snaps = vec![];
    for (n, s) in stored {
        snaps.push(s.map_err(anyhow::Error::msg)?);
        names.push(PathBuf::from(n));
    }
    let mut epochs: Vec<u64> = snaps.iter().map(|s| s.epoch.index).collect();
    epochs.sort();
    epochs.dedup();
    let mut reported = std::collections::BTreeSet::new();
    let end = Instant::now() + Duration::from_secs(60);
    while reported.len() < epochs.len() && Instant::now() < end {
        let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) else {
            if let Some(st) = controller.0.try_wait()? {
                bail!("the controller stopped ({st})");
            }
            continue;
        };
        let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
        let e = v["epoch"].as_u64().unwrap_or(u64::MAX);
        reported.insert(e);
        writeln!(
            out,
            "controller: epoch {e} revision {} hosts {} missing {} ({:.2} s after the start)",
            v["revision"],
            v["hosts"],
            v["missing"],
            started.elapsed().as_secs_f64()
        )?;
    }
    drop(controller);
    if reported.len() < epochs.len() {
        bail!(
            "the controller reported epochs {reported:?} of {epochs:?} within 60 s; see {}",
            d.join("nats.log").display()
        );
    }
    // The same merge as the controller's, over every epoch, scored against the whole trace.
    let truth = [all.display().to_string()];
    let merge = engine::merge::Snapshots {
        truth: truth.to_vec(),
        ..engine::merge::Snapshots::of(names, snaps)
    };
    let (report, outcome) = engine::Run::merge(merge)?.report()?;
    let err = outcome.read_error;
    writeln!(
        out,
        "\nnetwork-wide answers of {} hosts, scored against the whole trace:",
        a.hosts
    )?;
    crate::table::print_report(&report, false, crate::table::DEFAULT_TOP, out)?;
    drop(server);
    if let Some(e) = err {
        bail!("{e}");
    }
    Ok(true)
}

#[derive(Args)]
pub struct BenchNetwideArgs {
    /// A snapshot (`netsift run --snapshots DIR --host ID`) every simulated agent sends a copy
    /// of, as its own host, epoch after epoch.
    pub snapshot: PathBuf,
    /// Numbers of simulated agents, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "3,32",
          value_parser = flags::whole::<usize>(1..=256))]
    pub agents: Vec<usize>,
    /// Epochs per agent count (the costs are their means).
    #[arg(long, default_value_t = 5, allow_negative_numbers = true,
          value_parser = flags::whole::<usize>(1..=1000))]
    pub epochs: usize,
}

/// `netsift bench netwide`: what the network-wide path costs per epoch for N simulated agents
/// sending copies of one snapshot: encoding and decoding, the controller's merge and answers
/// (`engine::merge::epoch_report`, in process), and with `nats-server` on the PATH, through a local
/// broker: each agent's publication until acknowledged, and the delay from the last agent's
/// acknowledgement to the controller's report.
pub fn cmd_bench_netwide(a: BenchNetwideArgs, out: &mut Out) -> Result<bool> {
    let base = snapshot::read(&a.snapshot)?;
    let bytes = snapshot::encode(&base);
    let rounds = a.epochs;
    let t = Instant::now();
    for _ in 0..rounds {
        std::hint::black_box(snapshot::encode(std::hint::black_box(&base)));
    }
    let enc = t.elapsed().as_secs_f64() * 1e3 / rounds as f64;
    let t = Instant::now();
    for _ in 0..rounds {
        std::hint::black_box(
            snapshot::decode(std::hint::black_box(&bytes)).map_err(anyhow::Error::msg)?,
        );
    }
    let dec = t.elapsed().as_secs_f64() * 1e3 / rounds as f64;
    let algos: Vec<String> = base.instances.iter().map(|i| i.algorithm.clone()).collect();
    writeln!(
        out,
        "snapshot {}: {} bytes, instances {}; encode {enc:.2} ms, decode {dec:.2} ms",
        a.snapshot.display(),
        bytes.len(),
        algos.join(",")
    )?;
    writeln!(
        out,
        "{:>6} {:>16} {:>18} {:>22}",
        "agents", "merge ms/epoch", "publish ms/agent", "ack-to-report ms"
    )?;
    let bin = netwide::server::binary();
    if bin.is_none() {
        crate::say!("netsift: bench netwide: nats-server not on PATH: broker columns skipped");
    }
    for &n in &a.agents {
        let hosts: Vec<String> = (0..n).map(|i| format!("h{i}")).collect();
        let parts: Vec<(PathBuf, snapshot::Snapshot)> = hosts
            .iter()
            .map(|h| {
                let mut s = base.clone();
                s.host = h.clone();
                (PathBuf::from(h), s)
            })
            .collect();
        let method = visor::Method::Sketchvisor;
        let t = Instant::now();
        for _ in 0..rounds {
            engine::merge::epoch_report(base.epoch.index, &[], &parts, method)
                .map_err(anyhow::Error::msg)?;
        }
        let merge = t.elapsed().as_secs_f64() * 1e3 / rounds as f64;
        let (publish, delay) = match &bin {
            Some(bin) => {
                let (p, d) = broker_costs(bin, &hosts, &base, rounds)?;
                (format!("{p:.2}"), format!("{d:.1}"))
            }
            None => ("-".into(), "-".into()),
        };
        writeln!(out, "{n:>6} {merge:>16.1} {publish:>18} {delay:>22}")?;
    }
    Ok(true)
}

/// Through a local broker, `rounds` epochs of every host's copy of `base`: mean ms per
/// acknowledged publication, and mean ms from an epoch's last acknowledgement to its report.
fn broker_costs(
    bin: &std::path::Path,
    hosts: &[String],
    base: &snapshot::Snapshot,
    rounds: usize,
) -> Result<(f64, f64)> {
    let dir = TempDir::fresh("netsift-bench-nw")?;
    let server = local_server(bin, &dir.0, hosts)?;
    let url = server.url();
    let broker = |user: &str, inbox: &str| netwide::creds::Broker {
        url: url.clone(),
        creds: dir.0.join(format!("{user}.creds")),
        tls_ca: None,
        name: user.to_string(),
        inbox: inbox.to_string(),
    };
    // The controller on its own thread and runtime, as its own process would be.
    let (tx, rx) = mpsc::channel::<(u64, Instant)>();
    let ctl = broker("controller", netwide::CONTROLLER_INBOX);
    let nhosts = hosts.len();
    // The bench's own snapshot is the configuration every copy agrees with.
    let expected = (PathBuf::from("bench"), base.clone());
    let list = hosts.iter().cloned().collect();
    let want = rounds as u64;
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    let controller = std::thread::spawn(move || -> Result<()> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let _enter = rt.enter();
        let js =
            async_nats::jetstream::new(rt.block_on(ctl.connect(Duration::from_secs(5), false))?);
        let limits = netwide::controller::Limits::derive(4, None, Duration::from_secs(30), nhosts);
        rt.block_on(netwide::controller::setup(
            &js,
            Duration::from_secs(30),
            limits,
        ))?;
        let _ = ready_tx.send(());
        let opts = netwide::controller::Options {
            expected,
            max_memory: None,
            limits,
            hosts: netwide::controller::Hosts::List(list),
            deadline: Duration::from_secs(30),
            epochs: Some(want),
            keep: 4,
        };
        let mut merge =
            |e: u64, p: &[(PathBuf, snapshot::Snapshot)], c: &[(PathBuf, snapshot::Snapshot)]| {
                engine::merge::epoch_report(e, p, c, visor::Method::Sketchvisor)
            };
        let mut on_report = |r: &netwide::controller::NetReport| {
            let _ = tx.send((r.epoch, Instant::now()));
        };
        rt.block_on(netwide::controller::run(
            &js,
            &opts,
            &mut merge,
            &mut on_report,
            &|| false,
        ))?;
        Ok(())
    });
    ready_rx
        .recv_timeout(Duration::from_secs(10))
        .context("the bench's controller did not start")?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let _enter = rt.enter();
    let mut agents = vec![];
    for h in hosts {
        let c = rt.block_on(
            broker(&format!("agent-{h}"), &netwide::agent_inbox(h))
                .connect(Duration::from_secs(5), false),
        )?;
        agents.push(async_nats::jetstream::new(c));
    }
    let (mut publish, mut delay) = (0.0, 0.0);
    for e in 0..rounds as u64 {
        let mut acked = Instant::now();
        for (h, js) in hosts.iter().zip(&agents) {
            let mut s = base.clone();
            s.host = h.clone();
            s.epoch.index = e;
            let payload = snapshot::encode(&s);
            let t = Instant::now();
            let id = netwide::message_id(h, e, &payload);
            let msg = async_nats::jetstream::message::PublishMessage::build()
                .payload(payload.into())
                .message_id(id);
            rt.block_on(async {
                js.send_publish(netwide::subject(h), msg)
                    .await?
                    .await
                    .map(|_| ())
            })
            .map_err(|e| anyhow::anyhow!("publishing: {e}"))?;
            acked = Instant::now();
            publish += (acked - t).as_secs_f64() * 1e3;
        }
        let (re, at) = rx
            .recv_timeout(Duration::from_secs(60))
            .context("no report within 60 s")?;
        if re != e {
            bail!("report of epoch {re}, expected {e}");
        }
        delay += at.saturating_duration_since(acked).as_secs_f64() * 1e3;
    }
    controller
        .join()
        .map_err(|_| anyhow::anyhow!("the bench's controller panicked"))??;
    drop(server);
    let n = (rounds * hosts.len()) as f64;
    Ok((publish / n, delay / rounds as f64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_lines_name_their_agent_once() {
        assert_eq!(
            from_agent(
                "h2",
                "netsift: warning: epoch 1, heavy_hitters by count_min: x"
            ),
            "netsift: warning: agent h2: epoch 1, heavy_hitters by count_min: x"
        );
        assert_eq!(
            from_agent("h2", "netsift: error: cannot open x"),
            "netsift: error: agent h2: cannot open x"
        );
        let own = "netsift: agent h2: 3 snapshots published";
        assert_eq!(from_agent("h2", own), own);
        assert_eq!(
            from_agent("h1", "thread panicked"),
            "netsift: agent h1: thread panicked"
        );
    }

    #[test]
    fn a_fresh_private_directory_each_time() {
        use std::os::unix::fs::PermissionsExt;
        let (a, b) = (
            TempDir::fresh("netsift-test-fresh").unwrap(),
            TempDir::fresh("netsift-test-fresh").unwrap(),
        );
        assert_ne!(a.0, b.0);
        for d in [&a, &b] {
            let mode = std::fs::metadata(&d.0).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o700, "{}", d.0.display());
        }
        let kept = a.0.clone();
        drop(a);
        assert!(!kept.exists());
    }
}
