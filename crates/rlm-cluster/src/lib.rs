//! `rlm-cluster`: stateless `rlm serve` nodes over PostgreSQL. With a
//! PostgreSQL store, the server's state — sessions (turns, titles,
//! findings), runs (status, answer record), run events (what the SSE
//! stream sends) — lives in the same database, behind `rlm-server`'s
//! [`rlm_server::state`] traits, so any node answers any question and
//! streams any run; cancel requests reach the node answering a run; a run
//! whose node died is marked failed once its lease expires; and model
//! calls share a cluster-wide limit per provider key.
//!
//! ```no_run
//! # fn demo(engine: rlm_engine::Engine, corpus: std::sync::Arc<rlm_engine::Corpus>) -> Result<(), Box<dyn std::error::Error>> {
//! let cluster = rlm_cluster::Cluster::connect(
//!     "postgres://rlm@127.0.0.1:5432/rlm",
//!     rlm_cluster::ClusterOptions::default(),
//! )?;
//! let app = rlm_server::App::with_state(engine, corpus, cluster.state(), Default::default(), None, None)?;
//! # Ok(()) }
//! ```
//!
//! - `schema.rs`: the cluster's tables, migrations of their own
//!   (`rlm_cluster_schema`, apart from the store's `rlm_schema`).
//! - `sessions.rs`: sessions, turns and findings.
//! - `runs.rs`: run records, events, leases, cancel requests.
//! - `limit.rs`: the model-call slots.

#![warn(missing_docs)]

mod conn;
mod error;
mod limit;
mod runs;
mod schema;
mod sessions;

use std::sync::Arc;
use std::time::Duration;

use rlm_llm::Provider;
use rlm_server::state::ServerState;
use rlm_store_pg::db::Db;

pub use error::ClusterError;
pub use limit::{ClusterLimited, slot_key};
pub use schema::CLUSTER_SCHEMA_VERSION;

/// Settings of a node.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterOptions {
    /// How long a node's lease on a run (and on a model-call slot) lasts
    /// without renewal; a node renews every quarter of it (at most every
    /// 500 ms). A run whose node stops renewing is marked failed this long
    /// after its last renewal (`--lease-secs`, default 10 s).
    pub lease: Duration,
    /// This node's name in the database (`rlm_runs.node`); made from the
    /// host name, the process id and a random suffix when `None`.
    pub node_id: Option<String>,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        ClusterOptions {
            lease: Duration::from_secs(10),
            node_id: None,
        }
    }
}

/// One node's connection to the cluster's state.
pub struct Cluster {
    db: Arc<conn::Conn>,
    node: String,
    lease: Duration,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("location", &self.db.location())
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

impl Cluster {
    /// Connects to the store's database and creates or upgrades the
    /// cluster's tables. A one-line error names what is wrong (the server
    /// unreachable, a newer cluster schema, a lease out of range).
    pub fn connect(url: &str, options: ClusterOptions) -> Result<Cluster, ClusterError> {
        if options.lease < Duration::from_millis(200) || options.lease > Duration::from_secs(3600) {
            return Err(ClusterError::LeaseOutOfRange(options.lease));
        }
        let node = options.node_id.unwrap_or_else(default_node_id);
        let application_name = format!("rlm serve {node}");
        let db = Db::connect(url, &application_name)?;
        schema::migrate(&db)?;
        Ok(Cluster {
            db: Arc::new(conn::Conn::new(url, application_name, db)),
            node,
            lease: options.lease,
        })
    }

    /// This node's name in the database.
    pub fn node_id(&self) -> &str {
        &self.node
    }

    /// The server state over the database, for
    /// [`rlm_server::App::with_state`].
    pub fn state(&self) -> ServerState {
        ServerState {
            sessions: Box::new(sessions::PgSessions {
                db: self.db.clone(),
            }),
            runs: Box::new(runs::PgRuns {
                db: self.db.clone(),
                node: self.node.clone(),
                lease: self.lease,
            }),
        }
    }

    /// `provider` with every call holding one of `slots` slots shared by
    /// all nodes calling with the same `key` ([`slot_key`]). Give every
    /// node the same number.
    pub fn limit_model_calls(
        &self,
        provider: Arc<dyn Provider>,
        key: String,
        slots: usize,
    ) -> Result<Arc<dyn Provider>, ClusterError> {
        Ok(Arc::new(ClusterLimited::new(
            provider,
            self.db.clone(),
            key,
            slots,
            self.node.clone(),
            self.lease,
        )?))
    }
}

/// A query parameter.
pub(crate) fn p<T: tokio_postgres::types::ToSql + Sync + Send + 'static>(
    value: T,
) -> rlm_store_pg::db::Param {
    Box::new(value)
}

/// `host:pid:random`: unique among the nodes of a cluster.
fn default_node_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "node".into());
    format!(
        "{host}:{}:{:06x}",
        std::process::id(),
        fastrand::u32(..0x100_0000)
    )
}
