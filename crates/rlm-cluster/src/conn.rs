//! A node's connection to the database, made again after it broke (the
//! server restarted, or an administrator ended it): the call that meets the
//! broken connection fails (a 507 for a question, a missed heartbeat), the
//! next one connects anew. Nothing is retried, so no statement can run
//! twice.

use std::sync::{Arc, Mutex};

use rlm_corpus::CorpusError;
use rlm_store_pg::db::{Db, Param};
use tokio_postgres::Row;

/// The connection of one node.
pub(crate) struct Conn {
    url: String,
    application_name: String,
    current: Mutex<Arc<Db>>,
    location: String,
}

impl Conn {
    pub(crate) fn new(url: &str, application_name: String, db: Db) -> Conn {
        Conn {
            url: url.to_string(),
            location: db.location().to_string(),
            application_name,
            current: Mutex::new(Arc::new(db)),
        }
    }

    /// The connection to use: the current one, or a new one when it has
    /// ended (a failure to connect is the call's error).
    fn db(&self) -> Result<Arc<Db>, CorpusError> {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if current.is_closed() {
            let fresh = Db::connect(&self.url, &self.application_name)?;
            eprintln!(
                "rlm serve: the connection to {} had ended; connected again",
                self.location
            );
            *current = Arc::new(fresh);
        }
        Ok(current.clone())
    }

    /// Rows of `sql` with `params`.
    pub(crate) fn query(
        &self,
        sql: impl Into<String>,
        params: Vec<Param>,
    ) -> Result<Vec<Row>, CorpusError> {
        self.db()?.query(sql, params)
    }

    /// At most one row of `sql`.
    pub(crate) fn query_opt(
        &self,
        sql: impl Into<String>,
        params: Vec<Param>,
    ) -> Result<Option<Row>, CorpusError> {
        self.db()?.query_opt(sql, params)
    }

    /// Rows changed by `sql` with `params`.
    pub(crate) fn execute(
        &self,
        sql: impl Into<String>,
        params: Vec<Param>,
    ) -> Result<u64, CorpusError> {
        self.db()?.execute(sql, params)
    }

    /// The URL without its password.
    pub(crate) fn location(&self) -> &str {
        &self.location
    }
}
