//! What can go wrong connecting a node to the cluster's state. Each message
//! is one line that says what is wrong and what to do.

use std::time::Duration;

use rlm_corpus::CorpusError;

use crate::schema::CLUSTER_SCHEMA_VERSION;

/// Errors of [`Cluster::connect`](crate::Cluster::connect) and
/// [`Cluster::limit_model_calls`](crate::Cluster::limit_model_calls).
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The lease is shorter than 0.2 s or longer than an hour.
    #[error(
        "the lease {:.1} s is out of range: use 0.2 to 3600 seconds (--lease-secs)",
        .0.as_secs_f64()
    )]
    LeaseOutOfRange(Duration),
    /// The database could not be reached or failed (its own message names
    /// the store without its password).
    #[error("{0}")]
    Database(CorpusError),
    /// The cluster's tables were written by a newer rlm.
    #[error(
        "PostgreSQL store {location} has cluster schema version {found}, this rlm knows versions up to {}: it was written by a newer rlm serve; upgrade rlm on every node (nothing was changed)",
        CLUSTER_SCHEMA_VERSION
    )]
    NewerSchema {
        /// The store, without its password.
        location: String,
        /// The version found.
        found: i32,
    },
    /// The rows of the model-call limit could not be written.
    #[error("cannot set up the cluster's model-call slots: {0}")]
    Slots(CorpusError),
}

// Not `#[from]`: the database's message is the whole message, not a cause
// to be repeated after it.
impl From<CorpusError> for ClusterError {
    fn from(e: CorpusError) -> Self {
        ClusterError::Database(e)
    }
}
