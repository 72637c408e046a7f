//! A `nats-server` for the demo and the tests: its configuration (JetStream with file storage,
//! one user per agent allowed to publish only its host's subject, a controller that may consume
//! and report but not publish snapshots), and a child process killed when dropped.
//!
//! Permissions (nats-server's `authorization.users[].permissions`), least privilege: an agent
//! publishes `netsift.snapshots.<host>` and its lease `netsift.agents.<host>`, reads its own
//! lease record (a direct get of that subject) and subscribes to its own inbox
//! `_INBOX_<host>.>` (JetStream's acknowledgements are replies to it; `crate::agent_inbox`),
//! nothing else: not `_INBOX.>`, which would let it receive what is delivered to the
//! controller, every host's snapshots. The controller may use the JetStream API except deleting
//! or purging streams and messages, publish `netsift.reports` and its key-value bucket's
//! subjects, and acknowledge; it may not publish any `netsift.snapshots.>` nor a lease, and
//! subscribes to its own inbox `_INBOX_controller.>`.

use std::fmt::Write as _;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Who a user of the server is.
#[derive(Clone, Debug)]
pub enum Role {
    Agent { host: String },
    Controller,
}

/// How a user logs in (`crate::creds`).
#[derive(Clone, Debug)]
pub enum Login {
    Password(String),
    /// An NKEY: the server knows the public key (`U...`), the user's file holds the seed
    /// (`SU...`).
    Nkey {
        public: String,
        seed: String,
    },
}

#[derive(Clone, Debug)]
pub struct User {
    /// The user name (with a password), or only the name of the credentials file (NKEY).
    pub name: String,
    pub login: Login,
    pub role: Role,
}

impl User {
    /// The credentials file of this user (`crate::creds`), written into `dir` as
    /// `<name>.creds`, created with mode 600 ([`write_private`]).
    pub fn write_creds(&self, dir: &Path) -> std::io::Result<PathBuf> {
        let path = dir.join(format!("{}.creds", self.name));
        let text = match &self.login {
            Login::Password(p) => format!(
                "user = {}\npassword = {}\n",
                toml_str(&self.name),
                toml_str(p)
            ),
            Login::Nkey { seed, .. } => format!("nkey_seed = {}\n", toml_str(seed)),
        };
        write_private(&path, &text)?;
        Ok(path)
    }
}

/// Write `text` to `path` readable by its owner only: created with mode 600 (never readable by
/// others, even for a moment), or an existing file made 600 before it is truncated and
/// written. Credentials files and the server's configuration (it holds every password).
pub fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    let mut f = o.open(path)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    f.set_len(0)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()
}

fn toml_str(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// nats-server's configuration: listen on 127.0.0.1:`port`, JetStream storing under
/// `store_dir`, messages up to [`crate::MAX_PAYLOAD`], and `users` with their permissions.
pub fn config(port: u16, store_dir: &Path, users: &[User]) -> String {
    let q = |s: &str| serde_json::Value::String(s.to_string()).to_string();
    let mut c = String::new();
    let _ = writeln!(c, "listen: \"127.0.0.1:{port}\"");
    let _ = writeln!(c, "max_payload: {}", crate::MAX_PAYLOAD);
    let _ = writeln!(c, "max_pending: {}", 2 * crate::MAX_PAYLOAD);
    let _ = writeln!(
        c,
        "jetstream {{ store_dir: {} }}",
        q(&store_dir.display().to_string())
    );
    let _ = writeln!(c, "authorization {{ users = [");
    for u in users {
        let (publish, deny, subscribe) = match &u.role {
            Role::Agent { host } => (
                vec![
                    crate::subject(host),
                    crate::lease_subject(host),
                    format!(
                        "$JS.API.DIRECT.GET.{}.{}",
                        crate::AGENTS_STREAM,
                        crate::lease_subject(host)
                    ),
                ],
                vec![],
                vec![format!("{}.>", crate::agent_inbox(host))],
            ),
            Role::Controller => (
                vec![
                    "$JS.API.>".into(),
                    "$JS.ACK.>".into(),
                    format!("$KV.{}.>", crate::REPORTS_BUCKET),
                    crate::REPORTS_SUBJECT.into(),
                ],
                vec![
                    format!("{}.>", crate::SUBJECT_PREFIX),
                    format!("{}.>", crate::AGENTS_PREFIX),
                    "$JS.API.STREAM.DELETE.>".into(),
                    "$JS.API.STREAM.PURGE.>".into(),
                    "$JS.API.STREAM.MSG.DELETE.>".into(),
                ],
                vec![format!("{}.>", crate::CONTROLLER_INBOX)],
            ),
        };
        let list = |v: &[String]| v.iter().map(|s| q(s)).collect::<Vec<_>>().join(", ");
        let login = match &u.login {
            Login::Password(p) => format!("user: {}, password: {}", q(&u.name), q(p)),
            Login::Nkey { public, .. } => format!("nkey: {}", q(public)),
        };
        let _ = writeln!(
            c,
            "  {{ {login}, permissions: {{ publish: {{ allow: [{}], deny: [{}] }}, \
             subscribe: {{ allow: [{}] }} }} }}",
            list(&publish),
            list(&deny),
            list(&subscribe)
        );
    }
    let _ = writeln!(c, "] }}");
    c
}

/// `config` with TLS required of every client: the server's certificate chain and key (PEM).
/// Clients check the certificate against their `--tls-ca`.
pub fn with_tls(config: &str, cert: &Path, key: &Path) -> String {
    let q = |p: &Path| serde_json::Value::String(p.display().to_string()).to_string();
    format!(
        "{config}tls {{ cert_file: {}, key_file: {}, timeout: 5 }}\n",
        q(cert),
        q(key)
    )
}

/// A port free on 127.0.0.1 now (the OS's choice; another process may take it before the
/// server does, which the server's start then reports).
pub fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Whether a NATS server on `port` greets a new client with its `INFO` line (sent before any
/// TLS handshake): a connection accepted is not enough, one test's first client saw its
/// connection reset right after the port accepted (CI, `controller_and_server_restarts_lose_nothing`).
fn greets(port: u16) -> bool {
    use std::io::Read;
    let Ok(mut c) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = c.set_read_timeout(Some(Duration::from_millis(500)));
    let mut head = [0u8; 5];
    c.read_exact(&mut head).is_ok() && &head == b"INFO "
}

/// `nats-server` on the PATH, if any.
pub fn binary() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("nats-server"))
        .find(|p| p.is_file())
}

/// A running `nats-server`, killed (and waited for) when dropped.
pub struct Server {
    child: Child,
    pub port: u16,
    pub config: PathBuf,
}

impl Server {
    /// Start `nats-server -c <dir>/nats.conf` with `config`'s text (mode 600: it holds every
    /// user's password; its log in `<dir>/nats.log`) and wait, at most `timeout`, until it
    /// greets a client ([`greets`]).
    pub fn start(
        bin: &Path,
        dir: &Path,
        port: u16,
        config: &str,
        timeout: Duration,
    ) -> Result<Server, String> {
        let conf = dir.join("nats.conf");
        write_private(&conf, config).map_err(|e| format!("{}: {e}", conf.display()))?;
        let log = std::fs::File::create(dir.join("nats.log"))
            .map_err(|e| format!("{}: {e}", dir.join("nats.log").display()))?;
        let child = Command::new(bin)
            .arg("-c")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
        let mut s = Server {
            child,
            port,
            config: conf,
        };
        let end = Instant::now() + timeout;
        loop {
            if greets(port) {
                return Ok(s);
            }
            if let Ok(Some(st)) = s.child.try_wait() {
                return Err(format!(
                    "nats-server exited ({st}) at start; see {}",
                    dir.join("nats.log").display()
                ));
            }
            if Instant::now() >= end {
                return Err(format!(
                    "nats-server not listening on port {port} after {timeout:?}"
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Stop the server now (SIGKILL: no clean shutdown, as a crash).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn credentials_and_configuration_are_private() {
        let dir = std::env::temp_dir().join(format!("netwide-private-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let u = User {
            name: "agent-a".into(),
            login: Login::Password("pw".into()),
            role: Role::Agent { host: "a".into() },
        };
        let creds = u.write_creds(&dir).unwrap();
        assert_eq!(mode(&creds), 0o600);
        assert_eq!(crate::creds::readable_by_others(&creds), None);
        // An existing file readable by all is made private before it is written.
        let conf = dir.join("nats.conf");
        std::fs::write(&conf, "old").unwrap();
        std::fs::set_permissions(&conf, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(crate::creds::readable_by_others(&conf), Some(0o644));
        write_private(&conf, "new").unwrap();
        assert_eq!(mode(&conf), 0o600);
        assert_eq!(std::fs::read_to_string(&conf).unwrap(), "new");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Set in the child that [`a_credentials_file_is_created_600`] traces: the directory to write
    /// the file into.
    const CHILD: &str = "NETWIDE_TEST_WRITE_CREDS_INTO";

    #[test]
    fn a_credentials_file_is_created_600() {
        let u = User {
            name: "agent-a".into(),
            login: Login::Password("pw".into()),
            role: Role::Agent { host: "a".into() },
        };
        if let Some(dir) = std::env::var_os(CHILD) {
            u.write_creds(Path::new(&dir)).unwrap();
            return;
        }
        // This test again in a child under strace: the file's creation call carries its mode
        // (never a file readable by all until a chmod).
        let dir = std::env::temp_dir().join(format!("netwide-created-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("strace.txt");
        let st = Command::new("strace")
            .args(["-f", "-qq", "-e", "trace=open,openat,creat", "-o"])
            .arg(&log)
            .arg(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "server::tests::a_credentials_file_is_created_600",
            ])
            .args(["--test-threads", "1"])
            .env(CHILD, &dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        match st {
            Err(_) => println!("skip: strace not on PATH (apt-get install strace)"),
            Ok(s) if !s.success() || !log.exists() => {
                println!("skip: strace cannot trace here (ptrace not permitted?)")
            }
            Ok(_) => {
                let calls = std::fs::read_to_string(&log).unwrap();
                let open = calls
                    .lines()
                    .find(|l| l.contains("agent-a.creds\"") && l.contains("O_CREAT"))
                    .unwrap_or_else(|| panic!("no creation of agent-a.creds:\n{calls}"));
                assert!(open.contains(", 0600)"), "{open}");
                assert_eq!(mode(&dir.join("agent-a.creds")), 0o600);
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
