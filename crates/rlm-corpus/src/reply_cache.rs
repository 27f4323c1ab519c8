//! A store's cache of model replies: a call whose model, parameters and
//! whole prompt were answered before, by a provider that answers the same
//! request the same way (temperature 0 or a fixed seed), is served from here
//! instead of the model. The key is computed by the caller (`rlm-llm`'s
//! `ChatModel::reply_key`); a store only keeps replies under it.
//!
//! The folder store keeps them in `replies.sqlite` beside `store.sqlite` (a
//! file of its own: `rlm ask` is a reader of the index, and a cache write
//! must never wait for, or block, the index writer's lock). PostgreSQL keeps
//! them in a table, so every node of a cluster shares one cache. Both evict
//! the least recently used replies past a size cap.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rusqlite::{Connection, OptionalExtension, params};

use crate::error::CorpusError;

/// The file of a folder store's reply cache.
pub const REPLY_CACHE_FILE: &str = "replies.sqlite";

/// Default size cap of a reply cache (`RLM_SUBCALL_CACHE_MB`).
pub const DEFAULT_REPLY_CACHE_BYTES: u64 = 256 * 1024 * 1024;

/// One model reply as it was first received.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
pub struct CachedReply {
    /// The reply's text.
    pub text: String,
    /// The model that answered, as the provider named it.
    pub model: String,
    /// Why the model stopped (`stop`, `length`, ...).
    pub finish_reason: String,
    /// Prompt tokens the first call cost.
    pub input_tokens: u64,
    /// Generated tokens the first call cost.
    pub output_tokens: u64,
}

impl CachedReply {
    /// The reply as stored (JSON).
    pub fn encode(&self) -> String {
        serde_json::json!({
            "text": self.text,
            "model": self.model,
            "finish_reason": self.finish_reason,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
        })
        .to_string()
    }

    /// A stored reply; `None` for one this build cannot read (a miss, which
    /// the next put replaces).
    pub fn decode(stored: &str) -> Option<CachedReply> {
        serde_json::from_str(stored).ok()
    }

    /// What the entry costs the cap: its text and its key's share.
    pub fn bytes(&self, key: &str) -> u64 {
        (key.len() + self.text.len() + self.model.len() + self.finish_reason.len() + 16) as u64
    }
}

/// What a reply cache holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReplyCacheStats {
    /// Replies kept.
    pub entries: u64,
    /// Bytes they count against the cap.
    pub bytes: u64,
}

/// Where a store keeps model replies. Every method blocks (a database
/// round trip): call them off the async workers.
pub trait ReplyCache: Send + Sync + std::fmt::Debug {
    /// The reply kept under `key`, marked as just used.
    fn get(&self, key: &str) -> Result<Option<CachedReply>, CorpusError>;

    /// Keeps `reply` under `key` (replacing what was there), then evicts
    /// the least recently used replies until the cache holds at most
    /// `cap_bytes`. A reply larger than the cap is not kept.
    fn put(&self, key: &str, reply: &CachedReply, cap_bytes: u64) -> Result<(), CorpusError>;

    /// Entries and bytes held.
    fn stats(&self) -> Result<ReplyCacheStats, CorpusError>;

    /// Drops every reply; returns how many there were.
    fn clear(&self) -> Result<u64, CorpusError>;
}

/// A folder store's reply cache: `<store>/replies.sqlite`.
#[derive(Debug)]
pub struct FolderReplyCache {
    path: PathBuf,
    db: Mutex<Connection>,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS replies (
    key TEXT PRIMARY KEY,
    reply TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    last_used INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS replies_last_used ON replies (last_used);
";

impl FolderReplyCache {
    /// Opens (creating if needed) the reply cache of the store folder `dir`.
    pub fn open(dir: &Path) -> Result<FolderReplyCache, CorpusError> {
        let path = dir.join(REPLY_CACHE_FILE);
        let conn = Connection::open(&path)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.execute_batch(SCHEMA)?;
        Ok(FolderReplyCache {
            path,
            db: Mutex::new(conn),
        })
    }

    /// The cache's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.db.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Keeps the most recently used replies whose sizes add up to at most the
/// cap (`?1`), and drops the rest.
const EVICT: &str = "DELETE FROM replies WHERE key IN (
    SELECT key FROM (
        SELECT key, SUM(bytes) OVER (ORDER BY last_used DESC) AS kept FROM replies
    ) WHERE kept > ?1
)";

/// The next use stamp: one more than the newest (a counter, not a clock,
/// so the order of uses is exact).
const NEXT_USE: &str = "(SELECT COALESCE(MAX(last_used), 0) + 1 FROM replies)";

impl ReplyCache for FolderReplyCache {
    fn get(&self, key: &str) -> Result<Option<CachedReply>, CorpusError> {
        let conn = self.conn();
        let found: Option<String> = conn
            .query_row(
                "SELECT reply FROM replies WHERE key = ?1",
                params![key],
                |r| r.get(0),
            )
            .optional()?;
        let Some(json) = found else {
            return Ok(None);
        };
        conn.execute(
            &format!("UPDATE replies SET last_used = {NEXT_USE} WHERE key = ?1"),
            params![key],
        )?;
        Ok(CachedReply::decode(&json))
    }

    fn put(&self, key: &str, reply: &CachedReply, cap_bytes: u64) -> Result<(), CorpusError> {
        let bytes = reply.bytes(key);
        if bytes > cap_bytes {
            return Ok(());
        }
        let json = reply.encode();
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        tx.execute(
            &format!(
                "INSERT INTO replies (key, reply, bytes, last_used) VALUES (?1, ?2, ?3, {NEXT_USE})
                 ON CONFLICT (key) DO UPDATE SET reply = excluded.reply, bytes = excluded.bytes,
                 last_used = excluded.last_used"
            ),
            params![key, json, bytes as i64],
        )?;
        tx.execute(EVICT, params![cap_bytes as i64])?;
        tx.commit()?;
        Ok(())
    }

    fn stats(&self) -> Result<ReplyCacheStats, CorpusError> {
        let (entries, bytes): (i64, i64) = self.conn().query_row(
            "SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM replies",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        Ok(ReplyCacheStats {
            entries: entries as u64,
            bytes: bytes as u64,
        })
    }

    fn clear(&self) -> Result<u64, CorpusError> {
        Ok(self.conn().execute("DELETE FROM replies", [])? as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(text: &str) -> CachedReply {
        CachedReply {
            text: text.into(),
            model: "m".into(),
            finish_reason: "stop".into(),
            input_tokens: 10,
            output_tokens: 2,
        }
    }

    #[test]
    fn replies_come_back_by_key_and_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let cache = FolderReplyCache::open(dir.path()).unwrap();
        assert_eq!(cache.get("k1").unwrap(), None);
        cache.put("k1", &reply("one"), 1 << 20).unwrap();
        cache.put("k1", &reply("one again"), 1 << 20).unwrap();
        drop(cache);
        let cache = FolderReplyCache::open(dir.path()).unwrap();
        assert_eq!(cache.get("k1").unwrap(), Some(reply("one again")));
        assert_eq!(cache.stats().unwrap().entries, 1);
        assert_eq!(cache.clear().unwrap(), 1);
        assert_eq!(cache.get("k1").unwrap(), None);
    }

    #[test]
    fn the_least_recently_used_go_first_past_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let cache = FolderReplyCache::open(dir.path()).unwrap();
        let one = reply(&"x".repeat(100));
        let cap = one.bytes("k1") * 3;
        for k in ["k1", "k2", "k3"] {
            cache.put(k, &one, cap).unwrap();
        }
        // k1 is used again, so k2 is now the least recently used.
        assert!(cache.get("k1").unwrap().is_some());
        cache.put("k4", &one, cap).unwrap();
        assert!(cache.get("k2").unwrap().is_none(), "k2 evicted");
        for k in ["k1", "k3", "k4"] {
            assert!(cache.get(k).unwrap().is_some(), "{k} kept");
        }
        assert!(cache.stats().unwrap().bytes <= cap);
        // A reply larger than the whole cap is not kept, and evicts nothing.
        cache.put("big", &reply(&"y".repeat(1000)), cap).unwrap();
        assert!(cache.get("big").unwrap().is_none());
        assert_eq!(cache.stats().unwrap().entries, 3);
    }
}
