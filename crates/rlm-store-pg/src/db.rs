//! One PostgreSQL connection with a blocking API: the connection lives on a
//! one-thread tokio runtime owned by the store, and each call hands its
//! future to that runtime and waits for the answer on a channel. So the
//! store can be called from plain threads and from inside another tokio
//! runtime alike (the engine calls stores from both), as the SQLite store is.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use rlm_corpus::CorpusError;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Config, NoTls, Row};

/// A query parameter that can travel to the runtime's thread.
pub type Param = Box<dyn ToSql + Sync + Send>;

/// How long a connection attempt may take when the URL does not say
/// (`connect_timeout=`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// True when `store` names a PostgreSQL store (`postgres://…` or
/// `postgresql://…`) rather than a folder.
pub fn is_postgres_url(store: &str) -> bool {
    let lower = store.trim_start().to_ascii_lowercase();
    lower.starts_with("postgres://") || lower.starts_with("postgresql://")
}

/// The URL without its password, for messages and `rlm serve`'s info.
pub(crate) fn redacted(config: &Config) -> String {
    let user = config.get_user().unwrap_or("");
    let host = config
        .get_hosts()
        .first()
        .map(|h| match h {
            tokio_postgres::config::Host::Tcp(name) => name.clone(),
            tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
        })
        .unwrap_or_default();
    let port = config
        .get_ports()
        .first()
        .map(|p| format!(":{p}"))
        .unwrap_or_default();
    let db = config.get_dbname().unwrap_or("");
    let at = if user.is_empty() { "" } else { "@" };
    format!("postgres://{user}{at}{host}{port}/{db}")
}

/// A connection and the runtime that drives it.
pub struct Db {
    runtime: Option<tokio::runtime::Runtime>,
    client: Arc<Client>,
    location: String,
    /// A call's error showed the connection ended (the client may not
    /// have noticed yet): [`Db::is_closed`] says so at once.
    ended: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("location", &self.location)
            .finish_non_exhaustive()
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        // Dropping a runtime blocks, which tokio forbids inside another
        // runtime; closing in the background works from anywhere. The
        // connection closes with it (an open transaction rolls back).
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl Db {
    /// Connects to `url`; `application_name` shows in `pg_stat_activity`
    /// (unless the URL sets one).
    pub fn connect(url: &str, application_name: &str) -> Result<Db, CorpusError> {
        let mut config: Config = url.trim().parse().map_err(|e| {
            CorpusError::Backend(format!(
                "{:?} is not a PostgreSQL URL ({e}): write postgres://USER:PASSWORD@HOST:PORT/DATABASE",
                url.split('@').next_back().unwrap_or(url)
            ))
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name(application_name);
        }
        let location = redacted(&config);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("rlm-postgres")
            .enable_all()
            .build()
            .map_err(|e| {
                CorpusError::Backend(format!("cannot start the PostgreSQL client: {e}"))
            })?;
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        runtime.spawn(async move {
            let result = match config.connect(NoTls).await {
                Ok((client, connection)) => {
                    tokio::spawn(async move {
                        // Its end shows as an error on the next query.
                        let _ = connection.await;
                    });
                    Ok(client)
                }
                Err(e) => Err(e),
            };
            let _ = tx.send(result);
        });
        let client = rx
            .recv()
            .map_err(|_| CorpusError::Backend("the PostgreSQL client stopped".into()))?
            .map_err(|e| {
                CorpusError::Backend(format!(
                    "cannot connect to the PostgreSQL store {location}: {}: check that PostgreSQL runs there (scripts/start-postgres starts one) and the URL's user, password and database",
                    error_text(&e)
                ))
            })?;
        Ok(Db {
            runtime: Some(runtime),
            client: Arc::new(client),
            location,
            ended: Default::default(),
        })
    }

    /// True once the connection has ended (the server closed it, or it
    /// broke): every call fails from then on.
    pub fn is_closed(&self) -> bool {
        self.client.is_closed() || self.ended.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The URL without its password.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// Runs `f` with the client on the store's runtime and waits for it.
    pub fn run<T, F, Fut>(&self, f: F) -> Result<T, CorpusError>
    where
        T: Send + 'static,
        F: FnOnce(Arc<Client>) -> Fut,
        Fut: Future<Output = Result<T, tokio_postgres::Error>> + Send + 'static,
    {
        let Some(runtime) = &self.runtime else {
            return Err(CorpusError::Backend("the PostgreSQL client stopped".into()));
        };
        let fut = f(self.client.clone());
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        runtime.spawn(async move {
            let _ = tx.send(fut.await);
        });
        rx.recv()
            .map_err(|_| CorpusError::Backend("the PostgreSQL client stopped mid-query".into()))?
            .map_err(|e| self.error(&e))
    }

    /// Rows of `sql` with `params`.
    pub fn query(
        &self,
        sql: impl Into<String>,
        params: Vec<Param>,
    ) -> Result<Vec<Row>, CorpusError> {
        let sql = sql.into();
        self.run(move |c| async move { c.query(sql.as_str(), &refs(&params)).await })
    }

    /// At most one row of `sql`.
    pub fn query_opt(
        &self,
        sql: impl Into<String>,
        params: Vec<Param>,
    ) -> Result<Option<Row>, CorpusError> {
        Ok(self.query(sql, params)?.into_iter().next())
    }

    /// Runs `sql` (no parameters, any number of statements).
    pub fn batch(&self, sql: impl Into<String>) -> Result<(), CorpusError> {
        let sql = sql.into();
        self.run(move |c| async move { c.batch_execute(&sql).await })
    }

    /// Rows changed by `sql` with `params`.
    pub fn execute(&self, sql: impl Into<String>, params: Vec<Param>) -> Result<u64, CorpusError> {
        let sql = sql.into();
        self.run(move |c| async move { c.execute(sql.as_str(), &refs(&params)).await })
    }

    /// `COPY … FROM STDIN` of `data` (text format rows) into `target`
    /// (`table (columns)`); returns the rows copied.
    pub fn copy_in(&self, target: &str, data: Vec<u8>) -> Result<u64, CorpusError> {
        use futures_util::SinkExt;
        let sql = format!("COPY {target} FROM STDIN");
        self.run(move |c| async move {
            let sink: tokio_postgres::CopyInSink<bytes::Bytes> = c.copy_in(sql.as_str()).await?;
            let mut sink = Box::pin(sink);
            sink.send(bytes::Bytes::from(data)).await?;
            sink.as_mut().finish().await
        })
    }

    /// A one-line message for a failed query, naming the store.
    pub fn error(&self, e: &tokio_postgres::Error) -> CorpusError {
        // Closed, or ended by the server (class 57P: an administrator's
        // pg_terminate_backend, a shutdown): the next call must not wait
        // for the client to notice.
        let ended = e.is_closed() || e.code().is_some_and(|c| c.code().starts_with("57P"));
        if ended {
            self.ended.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        CorpusError::Backend(format!(
            "PostgreSQL store {}: {}",
            self.location,
            error_text(e)
        ))
    }
}

/// The parameters as the client takes them.
fn refs(params: &[Param]) -> Vec<&(dyn ToSql + Sync)> {
    params
        .iter()
        .map(|p| p.as_ref() as &(dyn ToSql + Sync))
        .collect()
}

/// The server's message when there is one (without the "db error:"
/// prefix), else the client's with its cause.
fn error_text(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut text = db.message().to_string();
        if let Some(detail) = db.detail() {
            text.push_str(" (");
            text.push_str(detail);
            text.push(')');
        }
        return one_line(&text);
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    one_line(&text)
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A connection made again after it ended (PostgreSQL restarted, or an
/// administrator ended it): the call that meets the ended connection fails,
/// the next one connects anew. Nothing is retried, so no statement runs
/// twice, and a call holds one [`Db`] throughout ([`Reconnecting::get`]),
/// so its statements never straddle two connections. For the store's
/// lookups and an `rlm serve` node's state; not for a transaction spanning
/// calls (indexing holds its own [`Db`]).
pub struct Reconnecting {
    url: String,
    application_name: String,
    current: std::sync::Mutex<Arc<Db>>,
    location: String,
}

impl Reconnecting {
    /// Starts with `db`, connected to `url` as `application_name`.
    pub fn new(url: &str, application_name: String, db: Db) -> Reconnecting {
        Reconnecting {
            url: url.to_string(),
            location: db.location().to_string(),
            application_name,
            current: std::sync::Mutex::new(Arc::new(db)),
        }
    }

    /// The connection to use: the current one, or a new one when it has
    /// ended (a failure to connect is the call's error).
    pub fn get(&self) -> Result<Arc<Db>, CorpusError> {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if current.is_closed() {
            let fresh = Db::connect(&self.url, &self.application_name)?;
            eprintln!(
                "rlm: the connection to {} had ended; connected again",
                self.location
            );
            *current = Arc::new(fresh);
        }
        Ok(current.clone())
    }

    /// Rows of `sql` with `params`.
    pub fn query(
        &self,
        sql: impl Into<String>,
        params: Vec<Param>,
    ) -> Result<Vec<Row>, CorpusError> {
        self.get()?.query(sql, params)
    }

    /// At most one row of `sql`.
    pub fn query_opt(
        &self,
        sql: impl Into<String>,
        params: Vec<Param>,
    ) -> Result<Option<Row>, CorpusError> {
        self.get()?.query_opt(sql, params)
    }

    /// Rows changed by `sql` with `params`.
    pub fn execute(&self, sql: impl Into<String>, params: Vec<Param>) -> Result<u64, CorpusError> {
        self.get()?.execute(sql, params)
    }

    /// The URL without its password.
    pub fn location(&self) -> &str {
        &self.location
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_told_from_folders_and_passwords_never_shown() {
        assert!(is_postgres_url("postgres://u@h/db"));
        assert!(is_postgres_url("PostgreSQL://u@h/db"));
        assert!(!is_postgres_url("./.rlm"));
        assert!(!is_postgres_url("postgres"));
        let c: Config = "postgres://alice:secret@db.example:5433/corpus"
            .parse()
            .unwrap();
        assert_eq!(redacted(&c), "postgres://alice@db.example:5433/corpus");
    }

    #[test]
    fn a_malformed_url_is_one_clear_line_without_its_password() {
        let e = Db::connect("postgres://alice:secret@host:notaport/db", "t").unwrap_err();
        let text = e.to_string();
        assert!(text.contains("is not a PostgreSQL URL"), "{text}");
        assert!(!text.contains("secret"), "{text}");
        assert!(!text.contains('\n'));
    }
}
