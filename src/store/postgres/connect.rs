//! Reaching PostgreSQL: the URL, the one connect path, and the pool of connections.
//!
//! Owns: what names a PostgreSQL store ([`is_postgres_url`]) and how it is named without
//! its password ([`redact_url`]); [`Target`], the parsed URL with its TLS settings and
//! the only place a connection is opened (the pool, the writer's reconnect and the
//! listener all call [`Target::connect`], with TLS as the URL's `sslmode` says:
//! [`super::tls`]); what a connection uses of TLS ([`tls_state`], for `doctor`); [`Pool`]
//! (idle connections, a dead one replaced once before a transaction has sent anything) and
//! [`Pooled`], a connection out of it; [`blocking`], how a driver call runs beside tokio.
//! Must not: run a ledger query or know a table (the read and write views do).

use super::error::{PgError, connection_lost, query_error};
use super::tls::{self, SslMode, TlsSettings};
use crate::store::StoreError;
use postgres::config::Host;
use postgres::{Client, NoTls};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_postgres_rustls::MakeRustlsConnect;

/// Longest a connection attempt waits for the server before the call fails.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Idle connections kept for reads and the writer; more are opened when needed and
/// closed when returned past this many.
pub(crate) const POOL_IDLE_LIMIT: usize = 8;

/// The `application_name` the server shows for our connections (unless the URL names one).
const APPLICATION_NAME: &str = "reasoning-ledger";

/// Whether `text` names a PostgreSQL store (`postgres://…` or `postgresql://…`).
pub(crate) fn is_postgres_url(text: &str) -> bool {
    text.starts_with("postgres://") || text.starts_with("postgresql://")
}

/// The URL without its password, to name the ledger in messages and logs.
pub(crate) fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (authority, tail) = match rest.find('/') {
        Some(slash) => rest.split_at(slash),
        None => (rest, ""),
    };
    let tail = redact_query_password(tail);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _password)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => format!("{scheme}://{userinfo}@{host}{tail}"),
        },
        None => format!("{scheme}://{authority}{tail}"),
    }
}

fn redact_query_password(tail: &str) -> String {
    let Some((path, query)) = tail.split_once('?') else {
        return tail.to_string();
    };
    let query: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}=***"),
            _ => pair.to_string(),
        })
        .collect();
    format!("{path}?{}", query.join("&"))
}

/// Runs a blocking driver call. The `postgres` client drives its connection on a runtime
/// of its own, which panics on a thread already running async tasks: the store's callers
/// keep reads off the async workers (`spawn_blocking`, the writer thread), and this steps
/// aside with `block_in_place` should one still run on a multi-threaded runtime's worker.
pub(crate) fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// How to reach the database, shared by the pool and the listener.
pub(crate) struct Target {
    config: postgres::Config,
    /// The URL's `sslmode`, `sslrootcert` and `sslsni`.
    tls_settings: TlsSettings,
    /// The TLS connector (`None`: no TLS, by `sslmode=disable` or over a Unix socket).
    tls: Option<MakeRustlsConnect>,
    /// The URL without its password.
    label: String,
}

impl Target {
    /// Parses `url` and prepares its TLS (the root certificates are read here: a missing
    /// `sslrootcert` fails at start, not at the first connection).
    pub(crate) fn parse(url: &str) -> Result<Target, PgError> {
        let (tls_settings, driver_url) = TlsSettings::take_from_url(url)?;
        let mut config: postgres::Config = driver_url
            .parse()
            .map_err(|e: postgres::Error| PgError::BadUrl(format!("{}: {e}", redact_url(url))))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name(APPLICATION_NAME);
        }
        // As libpq: no TLS over a Unix-domain socket (the server refuses it there).
        let tls = if over_socket_only(&config) {
            config.ssl_mode(postgres::config::SslMode::Disable);
            None
        } else {
            config.ssl_mode(tls_settings.driver_mode());
            tls::connector(&tls_settings)?
        };
        Ok(Target {
            config,
            tls_settings,
            tls,
            label: redact_url(url),
        })
    }

    /// Opens a connection: every connection of this backend is opened here. Under
    /// `sslmode=prefer` a failed TLS handshake is followed by a plain attempt, as libpq
    /// does (the TLS failure is logged).
    pub(crate) fn connect(&self) -> Result<Client, PgError> {
        let connected = self.connect_once();
        crate::store::health::store_connected(connected.is_ok());
        connected
    }

    /// One attempt to connect (two under `prefer`): [`Target::connect`] without the count.
    fn connect_once(&self) -> Result<Client, PgError> {
        let Some(tls) = &self.tls else {
            return self
                .config
                .connect(NoTls)
                .map_err(|source| self.connect_error(source));
        };
        let source = match self.config.connect(tls.clone()) {
            Ok(client) => return Ok(client),
            Err(source) => source,
        };
        if self.tls_settings.mode == SslMode::Prefer
            && let Some(cause) = tls::failure(&source, &self.tls_settings)
        {
            tracing::warn!(
                store = %self.label,
                %cause,
                "TLS failed under sslmode=prefer; connecting without TLS, as libpq does"
            );
            let mut plain = self.config.clone();
            plain.ssl_mode(postgres::config::SslMode::Disable);
            return plain
                .connect(NoTls)
                .map_err(|source| self.connect_error(source));
        }
        Err(self.connect_error(source))
    }

    /// A failed connection's error: TLS, the server's refusal, or not reached.
    fn connect_error(&self, source: postgres::Error) -> PgError {
        if let Some(cause) = tls::failure(&source, &self.tls_settings) {
            return PgError::Tls {
                target: self.label.clone(),
                cause,
            };
        }
        // Class 28: invalid authorization (pg_hba.conf, password).
        if source
            .as_db_error()
            .is_some_and(|db| db.code().code().starts_with("28"))
        {
            let asked_plain_over_tcp =
                self.tls_settings.mode == SslMode::Disable && !over_socket_only(&self.config);
            let hint = if asked_plain_over_tcp {
                "; sslmode=disable asked for no TLS, which a server that accepts this user \
                 only over TLS refuses: use sslmode=verify-full"
            } else {
                ""
            };
            return PgError::Refused {
                target: self.label.clone(),
                source,
                hint,
            };
        }
        PgError::Connect {
            target: self.label.clone(),
            source,
        }
    }
}

/// Whether every host of `config` is a Unix-domain socket.
fn over_socket_only(config: &postgres::Config) -> bool {
    !config.get_hosts().is_empty()
        && config.get_hostaddrs().is_empty()
        && config
            .get_hosts()
            .iter()
            .all(|host| matches!(host, Host::Unix(_)))
}

/// What a connection to a PostgreSQL store uses of TLS (for `doctor`).
pub(crate) struct TlsState {
    /// The TCP hosts of the URL (empty: Unix sockets only).
    pub(crate) tcp_hosts: Vec<String>,
    /// The protocol and cipher when the connection is encrypted.
    pub(crate) encrypted: Option<String>,
    /// What is checked of the server's certificate.
    pub(crate) checks: String,
}

/// Opens one connection to `url` and asks the server whether it is encrypted
/// (`pg_stat_ssl`).
pub(crate) fn tls_state(url: &str) -> Result<TlsState, PgError> {
    let target = Target::parse(url)?;
    let tcp_hosts = target
        .config
        .get_hosts()
        .iter()
        .filter_map(|host| match host {
            Host::Tcp(name) => Some(name.clone()),
            Host::Unix(_) => None,
        })
        .collect();
    let mut client = blocking(|| target.connect())?;
    let row = blocking(|| {
        client.query_one(
            "SELECT ssl, coalesce(version, ''), coalesce(cipher, '') FROM pg_stat_ssl \
             WHERE pid = pg_backend_pid()",
            &[],
        )
    })
    .map_err(|source| PgError::Query {
        what: "reading pg_stat_ssl",
        source,
    })?;
    let encrypted = row
        .get::<_, bool>(0)
        .then(|| format!("{} ({})", row.get::<_, String>(1), row.get::<_, String>(2)));
    Ok(TlsState {
        tcp_hosts,
        encrypted,
        checks: target.tls_settings.checks(),
    })
}

/// The backend's connections: the target and the idle ones, up to [`POOL_IDLE_LIMIT`].
pub(super) struct Pool {
    pub(super) target: Arc<Target>,
    idle: Mutex<Vec<Client>>,
}

impl Pool {
    /// A pool holding `first` (the connection the backend was opened with).
    pub(super) fn new(target: Arc<Target>, first: Client) -> Pool {
        Pool {
            target,
            idle: Mutex::new(vec![first]),
        }
    }

    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<Client>> {
        self.idle
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Closes the idle connections: one was found dead, and the others were opened to the
    /// same server, so they likely are too.
    fn forget_idle(&self) {
        crate::store::health::store_connection_lost();
        self.idle().clear();
    }

    /// An idle connection, or a new one.
    pub(super) fn client(&self) -> Result<Pooled<'_>, StoreError> {
        let idle = self.idle().pop();
        let client = match idle {
            Some(client) if !client.is_closed() => client,
            _ => blocking(|| self.target.connect()).map_err(StoreError::backend)?,
        };
        Ok(Pooled {
            client: Some(client),
            pool: self,
        })
    }

    /// Takes a connection and begins a transaction with `sql`. A pooled connection that
    /// turns out dead (the server restarted, the connection was cut) is replaced by a new
    /// one and the transaction begun again: nothing had been done on it yet.
    pub(super) fn begin(
        &self,
        what: &'static str,
        sql: &str,
    ) -> Result<(Pooled<'_>, Vec<postgres::SimpleQueryMessage>), StoreError> {
        let mut retried = false;
        loop {
            let mut pooled = self.client()?;
            match blocking(|| pooled.get().simple_query(sql)) {
                Ok(messages) => return Ok((pooled, messages)),
                Err(error) => {
                    pooled.discard();
                    let dead = error.is_closed() || connection_lost(&error);
                    if dead && !retried {
                        tracing::info!(%error, "a pooled PostgreSQL connection was dead; reconnecting");
                        self.forget_idle();
                        retried = true;
                        continue;
                    }
                    return Err(query_error(what)(error));
                }
            }
        }
    }
}

/// A connection out of the pool; goes back when dropped unless it failed.
pub(crate) struct Pooled<'p> {
    client: Option<Client>,
    pool: &'p Pool,
}

impl Pooled<'_> {
    pub(crate) fn get(&mut self) -> &mut Client {
        self.client.as_mut().expect("held until dropped")
    }

    /// Whether the connection is still held (not discarded).
    pub(super) fn is_held(&self) -> bool {
        self.client.is_some()
    }

    /// Drops the connection instead of pooling it (its state is unknown).
    pub(crate) fn discard(&mut self) {
        self.client = None;
    }

    /// Replaces a connection found dead before its transaction sent anything with a new
    /// one (the idle ones are closed too: likely dead as well).
    pub(super) fn reconnect(&mut self) -> Result<(), PgError> {
        self.pool.forget_idle();
        let client = blocking(|| self.pool.target.connect())?;
        self.client = Some(client);
        Ok(())
    }
}

impl Drop for Pooled<'_> {
    fn drop(&mut self) {
        if let Some(client) = self.client.take()
            && !client.is_closed()
        {
            let mut idle = self.pool.idle();
            if idle.len() < POOL_IDLE_LIMIT {
                idle.push(client);
            }
        }
    }
}
