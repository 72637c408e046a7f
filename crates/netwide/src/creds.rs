//! Credentials come from a file, never from the command line (a flag's value is visible to every
//! user in `ps`). The file is TOML with exactly one of two forms:
//!
//! ```toml
//! user = "agent-h1"
//! password = "..."
//! ```
//!
//! or an NKEY seed (the user's private key; the server knows its public key `U...`):
//!
//! ```toml
//! nkey_seed = "SUA..."
//! ```
//!
//! Unknown fields are refused. Keep the file readable by its user only (`chmod 600`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::Error;

/// The contents of a credentials file as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    user: Option<String>,
    password: Option<String>,
    nkey_seed: Option<String>,
}

/// A checked credentials file.
pub enum Creds {
    User { user: String, password: String },
    Nkey { seed: String },
}

impl Creds {
    /// Read and check `path`: user with password, or an NKEY seed, not both.
    pub fn read(path: &Path) -> Result<Creds, Error> {
        let err = |r: String| Error::Creds(format!("credentials file {}: {r}", path.display()));
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        if let Some(mode) = readable_by_others(path) {
            tracing::warn!(
                "credentials file {}: mode {mode:03o} lets other users read it; chmod 600 {}",
                path.display(),
                path.display()
            );
        }
        let c: File = toml::from_str(&text)
            .map_err(|e| err(e.message().lines().next().unwrap_or("bad TOML").to_string()))?;
        match (c.user, c.password, c.nkey_seed) {
            (Some(user), Some(password), None) => Ok(Creds::User { user, password }),
            (None, None, Some(seed)) => Ok(Creds::Nkey { seed }),
            (Some(_), None, None) => Err(err("`user` without `password`".into())),
            (None, Some(_), None) => Err(err("`password` without `user`".into())),
            (None, None, None) => Err(err("give `user` and `password`, or `nkey_seed`".into())),
            _ => Err(err(
                "give `user` and `password` or `nkey_seed`, not both".into()
            )),
        }
    }
}

/// The permission bits of `path` when its group or other users may read or write it.
pub fn readable_by_others(path: &Path) -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o777;
        (mode & 0o066 != 0).then_some(mode)
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

/// How to reach the broker.
#[derive(Clone, Debug)]
pub struct Broker {
    /// `nats://host:port` (or `tls://`).
    pub url: String,
    pub creds: PathBuf,
    /// A CA certificate (PEM): TLS is then required and the server's certificate checked
    /// against it.
    pub tls_ca: Option<PathBuf>,
    /// Name the connection carries (shows in the server's monitoring).
    pub name: String,
    /// The prefix of this client's reply subjects (`crate::agent_inbox`,
    /// `crate::CONTROLLER_INBOX`): the server lets each user subscribe to its own only.
    pub inbox: String,
}

impl Broker {
    /// Connect, failing after `timeout` when the server cannot be reached, or at once with
    /// [`Error::Refused`] when it refuses the credentials. With `retry` a server that cannot be
    /// reached is not an error: the client keeps trying in the background (an agent spools
    /// meanwhile). Once connected the client reconnects by itself; every operation has its
    /// own timeout.
    pub async fn connect(
        &self,
        timeout: Duration,
        retry: bool,
    ) -> Result<async_nats::Client, Error> {
        self.connect_watched(timeout, retry, None).await
    }

    /// [`Broker::connect`], the server's asynchronous errors going to `errors` (an agent's
    /// publisher: a permissions violation comes as `-ERR`, never as a publication's error).
    pub async fn connect_watched(
        &self,
        timeout: Duration,
        retry: bool,
        errors: Option<&ServerErrors>,
    ) -> Result<async_nats::Client, Error> {
        let mut opts = match Creds::read(&self.creds)? {
            Creds::User { user, password } => {
                async_nats::ConnectOptions::with_user_and_password(user, password)
            }
            Creds::Nkey { seed } => async_nats::ConnectOptions::with_nkey(seed),
        };
        if let Some(ca) = &self.tls_ca {
            if !ca.is_file() {
                return Err(Error::Creds(format!(
                    "--tls-ca {}: no such file",
                    ca.display()
                )));
            }
            opts = opts.add_root_certificates(ca.clone()).require_tls(true);
        }
        if retry {
            opts = opts.retry_on_initial_connect();
        }
        if let Some(errors) = errors {
            opts = errors.install(opts);
        }
        let opts = opts
            .name(&self.name)
            .custom_inbox_prefix(&self.inbox)
            .connection_timeout(timeout)
            .request_timeout(Some(timeout));
        let conn = tokio::time::timeout(timeout, opts.connect(self.url.as_str()));
        let err = |reason: String| Error::Connect {
            url: self.url.clone(),
            reason,
        };
        match conn.await {
            Ok(Ok(client)) => Ok(client),
            Ok(Err(e)) if e.kind() == async_nats::ConnectErrorKind::AuthorizationViolation => {
                Err(Error::Refused {
                    url: self.url.clone(),
                    creds: self.creds.display().to_string(),
                })
            }
            Ok(Err(e)) if tls_failure(&e) => Err(Error::Tls {
                url: self.url.clone(),
                reason: e.to_string(),
            }),
            Ok(Err(e)) => Err(err(e.to_string())),
            Err(_) => Err(err(format!("no answer within {timeout:?}"))),
        }
    }
}

/// The server's asynchronous errors (`-ERR '...'` after the connection is up: a permissions
/// violation for a publication or a subscription), the latest kept.
#[derive(Clone, Debug)]
pub struct ServerErrors(tokio::sync::watch::Sender<Option<String>>);

impl Default for ServerErrors {
    fn default() -> Self {
        ServerErrors(tokio::sync::watch::channel(None).0)
    }
}

impl ServerErrors {
    /// The latest error, and every one after it as it comes.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<Option<String>> {
        self.0.subscribe()
    }

    /// Record an error (what the connection's event callback does). A permissions violation
    /// stays: a later error of another kind does not hide it.
    pub fn record(&self, error: String) {
        self.0.send_if_modified(|last| {
            let keep = last.as_deref().is_some_and(is_permission_violation)
                && !is_permission_violation(&error);
            if !keep {
                *last = Some(error);
            }
            !keep
        });
    }

    fn install(&self, opts: async_nats::ConnectOptions) -> async_nats::ConnectOptions {
        let me = self.clone();
        opts.event_callback(move |event| {
            if let async_nats::Event::ServerError(e) = event {
                me.record(e.to_string());
            }
            std::future::ready(())
        })
    }
}

/// Whether a server error says the user may not do what it did (a permissions violation):
/// no retry can help.
pub fn is_permission_violation(error: &str) -> bool {
    error.to_ascii_lowercase().contains("permissions violation")
}

/// Whether a connection failed on TLS: its setup, or the handshake (a certificate that does
/// not chain to the CA: rustls's error inside the I/O error the handshake returns). Retrying
/// cannot help, unlike a server that is away.
fn tls_failure(e: &async_nats::ConnectError) -> bool {
    if e.kind() == async_nats::ConnectErrorKind::Tls {
        return true;
    }
    let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(c) = cause {
        let rustls = c
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .is_some_and(|inner| inner.is::<async_nats::rustls::Error>());
        if rustls || c.is::<async_nats::rustls::Error>() {
            return true;
        }
        cause = c.source();
    }
    false
}
