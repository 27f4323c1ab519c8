//! The cluster-wide limit on concurrent model calls per provider key: `N`
//! rows of `rlm_model_slots` per key, each free or held by one call of one
//! node until its lease ends. A call takes a free slot (one statement,
//! `FOR UPDATE SKIP LOCKED`, so two nodes never take the same one), calls
//! the provider, and frees it; while it runs, the node's heartbeat renews
//! the lease, so the slots of a node that dies are free again once its
//! lease ends. With no free slot a call waits, looking again every 10 ms,
//! backing off to 100 ms.

use crate::p;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::ClusterError;
use crate::conn::Conn;
use rlm_llm::provider::{BoxFuture, Provider};
use rlm_llm::{LlmError, ModelReply, ModelRequest};
use rlm_server::state::off_runtime;
use sha2::{Digest, Sha256};

/// A provider whose calls take one of the cluster's slots for its key.
pub struct ClusterLimited {
    inner: Arc<dyn Provider>,
    db: Arc<Conn>,
    key: String,
    slots: i32,
    node: String,
    lease: Duration,
    taken: AtomicU64,
}

/// The key slots are counted under: a hash of the provider, its endpoint
/// and its API key (never stored as itself), so every node with the same
/// key shares the same slots.
pub fn slot_key(provider: &str, endpoint: &str, api_key: Option<&str>) -> String {
    let mut h = Sha256::new();
    for part in [provider, endpoint, api_key.unwrap_or("")] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    let digest = h.finalize();
    format!(
        "{provider}:{}",
        digest[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    )
}

impl ClusterLimited {
    pub(crate) fn new(
        inner: Arc<dyn Provider>,
        db: Arc<Conn>,
        key: String,
        slots: usize,
        node: String,
        lease: Duration,
    ) -> Result<Self, ClusterError> {
        let slots = i32::try_from(slots.clamp(1, 100_000)).unwrap_or(100_000);
        db.execute(
            "INSERT INTO rlm_model_slots (key, slot) SELECT $1, g FROM generate_series(0, $2 - 1) g
             ON CONFLICT DO NOTHING",
            vec![p(key.clone()), p(slots)],
        )
        .map_err(ClusterError::Slots)?;
        Ok(ClusterLimited {
            inner,
            db,
            key,
            slots,
            node,
            lease,
            taken: AtomicU64::new(0),
        })
    }

    /// Takes a free slot for `holder`; `None` when all are held.
    fn try_take(&self, holder: &str) -> Result<Option<i32>, LlmError> {
        let row = self
            .db
            .query_opt(
                "UPDATE rlm_model_slots SET holder = $2,
                        lease_until = now() + $3::float8 * interval '1 millisecond'
                 WHERE (key, slot) = (
                     SELECT key, slot FROM rlm_model_slots
                     WHERE key = $1 AND slot < $4 AND (holder IS NULL OR lease_until < now())
                     ORDER BY slot LIMIT 1 FOR UPDATE SKIP LOCKED)
                 RETURNING slot",
                vec![
                    p(self.key.clone()),
                    p(holder.to_string()),
                    p(self.lease.as_millis() as f64),
                    p(self.slots),
                ],
            )
            .map_err(|e| {
                LlmError::Config(format!(
                    "the cluster-wide model-call limit cannot be checked: {e}"
                ))
            })?;
        Ok(row.map(|r| r.get(0)))
    }

    async fn take(&self) -> Result<Slot, LlmError> {
        let holder = format!(
            "{}/{}",
            self.node,
            self.taken.fetch_add(1, Ordering::Relaxed)
        );
        let mut wait = Duration::from_millis(10);
        loop {
            if let Some(slot) = off_runtime(|| self.try_take(&holder))? {
                return Ok(Slot {
                    db: self.db.clone(),
                    key: self.key.clone(),
                    slot,
                    holder,
                });
            }
            // A little jitter so waiting calls of several nodes do not look
            // in lockstep.
            let jitter = Duration::from_millis(fastrand::u64(0..5));
            tokio::time::sleep(wait + jitter).await;
            wait = (wait * 3 / 2).min(Duration::from_millis(100));
        }
    }
}

/// A held slot, freed when dropped (also when the call is cancelled).
struct Slot {
    db: Arc<Conn>,
    key: String,
    slot: i32,
    holder: String,
}

impl Drop for Slot {
    fn drop(&mut self) {
        // A failure leaves the slot held until its lease ends.
        let holder = std::mem::take(&mut self.holder);
        let _ = off_runtime(|| {
            self.db.execute(
                "UPDATE rlm_model_slots SET holder = NULL, lease_until = NULL
             WHERE key = $1 AND slot = $2 AND holder = $3",
                vec![p(self.key.clone()), p(self.slot), p(holder)],
            )
        });
    }
}

impl Provider for ClusterLimited {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn endpoint(&self) -> &str {
        self.inner.endpoint()
    }

    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelReply, LlmError>> {
        Box::pin(async move {
            let _slot = self.take().await?;
            self.inner.complete(request).await
        })
    }

    fn list_models(&self) -> BoxFuture<'_, Result<Vec<String>, LlmError>> {
        self.inner.list_models()
    }

    fn reproducible(&self, request: &ModelRequest) -> bool {
        self.inner.reproducible(request)
    }

    fn reply_identity(&self) -> String {
        self.inner.reply_identity()
    }
}
