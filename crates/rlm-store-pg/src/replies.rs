//! The store's reply cache in PostgreSQL (`rlm_replies`): every node of a
//! cluster, and every `rlm ask` on the store, reads and fills one cache.

use std::sync::Arc;

use rlm_corpus::{CachedReply, CorpusError, ReplyCache, ReplyCacheStats};

use crate::db::Reconnecting;

/// Model replies kept in the store's database.
#[derive(Debug)]
pub(crate) struct PgReplyCache {
    pub(crate) db: Arc<Reconnecting>,
}

impl std::fmt::Debug for Reconnecting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reconnecting")
            .field("location", &self.location())
            .finish_non_exhaustive()
    }
}

/// Keeps the most recently used replies whose sizes add up to at most the
/// cap (`$1`) and drops the rest.
const EVICT: &str = "DELETE FROM rlm_replies WHERE key IN (
    SELECT key FROM (
        SELECT key, sum(bytes) OVER (ORDER BY last_used DESC) AS kept FROM rlm_replies
    ) AS t WHERE kept > $1::bigint
)";

impl ReplyCache for PgReplyCache {
    fn get(&self, key: &str) -> Result<Option<CachedReply>, CorpusError> {
        let row = self.db.query_opt(
            "UPDATE rlm_replies SET last_used = nextval('rlm_reply_use') WHERE key = $1 RETURNING reply",
            vec![Box::new(key.to_string())],
        )?;
        Ok(row.and_then(|r| CachedReply::decode(&r.get::<_, String>(0))))
    }

    fn put(&self, key: &str, reply: &CachedReply, cap_bytes: u64) -> Result<(), CorpusError> {
        let bytes = reply.bytes(key);
        if bytes > cap_bytes {
            return Ok(());
        }
        let json = reply.encode();
        self.db.execute(
            "INSERT INTO rlm_replies (key, reply, bytes, last_used) VALUES ($1, $2, $3, nextval('rlm_reply_use'))
             ON CONFLICT (key) DO UPDATE SET reply = excluded.reply, bytes = excluded.bytes,
             last_used = excluded.last_used",
            vec![
                Box::new(key.to_string()),
                Box::new(json),
                Box::new(bytes as i64),
            ],
        )?;
        self.db
            .execute(EVICT, vec![Box::new(cap_bytes.min(i64::MAX as u64) as i64)])?;
        Ok(())
    }

    fn stats(&self) -> Result<ReplyCacheStats, CorpusError> {
        let row = self.db.query_opt(
            "SELECT count(*), coalesce(sum(bytes), 0)::bigint FROM rlm_replies",
            vec![],
        )?;
        Ok(row
            .map(|r| ReplyCacheStats {
                entries: r.get::<_, i64>(0) as u64,
                bytes: r.get::<_, i64>(1) as u64,
            })
            .unwrap_or_default())
    }

    fn clear(&self) -> Result<u64, CorpusError> {
        self.db.execute("DELETE FROM rlm_replies", vec![])
    }
}
