//! The reply cache in PostgreSQL: every process on the store (two nodes
//! here, each with its own connection) reads and fills one cache, and the
//! least recently used replies go first past the cap.

use std::path::Path;

use rlm_corpus::{CachedReply, CorpusStore, IndexOptions};
use rlm_store_pg::PgStore;
use rlm_store_pg::testing::test_database;

fn reply(text: &str) -> CachedReply {
    CachedReply {
        text: text.into(),
        model: "sub-model".into(),
        finish_reason: "stop".into(),
        input_tokens: 120,
        output_tokens: 7,
    }
}

fn indexed(url: &str, dir: &Path) {
    std::fs::write(dir.join("a.txt"), "The vault code is 8316.\n").unwrap();
    PgStore::index(
        url,
        &[dir.to_path_buf()],
        &IndexOptions::default(),
        &mut |_| {},
    )
    .unwrap();
}

#[test]
fn two_nodes_share_one_reply_cache() {
    let Some(db) = test_database() else { return };
    let docs = tempfile::tempdir().unwrap();
    indexed(db.url(), docs.path());
    let node_a = PgStore::open(db.url()).unwrap();
    let node_b = PgStore::open(db.url()).unwrap();
    let cache_a = node_a
        .reply_cache()
        .unwrap()
        .expect("PostgreSQL keeps replies");
    let cache_b = node_b.reply_cache().unwrap().unwrap();
    assert_eq!(cache_b.get("k").unwrap(), None);
    cache_a.put("k", &reply("8316"), 1 << 20).unwrap();
    assert_eq!(cache_b.get("k").unwrap(), Some(reply("8316")));
    // A second put under the key replaces the reply.
    cache_b.put("k", &reply("8316, again"), 1 << 20).unwrap();
    assert_eq!(cache_a.get("k").unwrap(), Some(reply("8316, again")));
    assert_eq!(cache_a.stats().unwrap().entries, 1);
    // Re-indexing leaves the cache alone: a reply's key is its whole prompt.
    indexed(db.url(), docs.path());
    assert_eq!(cache_b.get("k").unwrap(), Some(reply("8316, again")));
    assert_eq!(cache_a.clear().unwrap(), 1);
    assert_eq!(cache_b.get("k").unwrap(), None);
}

#[test]
fn the_least_recently_used_replies_go_first_past_the_cap() {
    let Some(db) = test_database() else { return };
    let docs = tempfile::tempdir().unwrap();
    indexed(db.url(), docs.path());
    let store = PgStore::open(db.url()).unwrap();
    let other = PgStore::open(db.url()).unwrap();
    let (cache, other) = (
        store.reply_cache().unwrap().unwrap(),
        other.reply_cache().unwrap().unwrap(),
    );
    let one = reply(&"x".repeat(200));
    let cap = one.bytes("k1") * 3;
    for k in ["k1", "k2", "k3"] {
        cache.put(k, &one, cap).unwrap();
    }
    // Used again on the other node: k2 is now the least recently used.
    assert!(other.get("k1").unwrap().is_some());
    other.put("k4", &one, cap).unwrap();
    assert_eq!(cache.get("k2").unwrap(), None, "k2 evicted");
    for k in ["k1", "k3", "k4"] {
        assert!(cache.get(k).unwrap().is_some(), "{k} kept");
    }
    let stats = cache.stats().unwrap();
    assert_eq!(stats.entries, 3);
    assert!(stats.bytes <= cap);
    // Larger than the whole cap: not kept, nothing evicted for it.
    cache.put("big", &reply(&"y".repeat(2000)), cap).unwrap();
    assert_eq!(cache.get("big").unwrap(), None);
    assert_eq!(cache.stats().unwrap().entries, 3);
}
