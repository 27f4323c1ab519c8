//! A node's connection to the database, made again after it broke (the
//! server restarted, or an administrator ended it): the call that meets the
//! broken connection fails (a 507 for a question, a missed heartbeat), the
//! next one connects anew. Nothing is retried, so no statement can run
//! twice. The store's connection is made again the same way: both are
//! `rlm_store_pg::db::Reconnecting`.

pub(crate) use rlm_store_pg::db::Reconnecting as Conn;
