//! Runs in PostgreSQL: `rlm_runs` (the record as the API shows it, the
//! node answering it, its lease, a cancel request) and `rlm_run_events`
//! (each trace event as the SSE stream sends it).
//!
//! The node answering a run renews its lease with every heartbeat; any
//! node's heartbeat marks a run whose lease ended (its node died or lost
//! the database) failed, adding a last event that says why, in one
//! statement. A node whose run was marked so writes nothing more to it.

use crate::p;
use std::sync::Arc;
use std::time::Duration;

use crate::conn::Conn;
use rlm_engine::trace::{Trace, TraceEvent, TraceRecord, now_rfc3339};
use rlm_server::state::{EventCursor, EventLog, Heartbeat, RunBackend, StateError};
use rlm_server::{ApiError, RunStatus, RunSummary, RunView};

/// The runs of a cluster, as one node sees them.
pub(crate) struct PgRuns {
    pub(crate) db: Arc<Conn>,
    pub(crate) node: String,
    pub(crate) lease: Duration,
}

fn status_text(s: RunStatus) -> &'static str {
    match s {
        RunStatus::Running => "running",
        RunStatus::Done => "done",
        RunStatus::Failed => "failed",
        RunStatus::Cancelled => "cancelled",
    }
}

fn lease_ms(lease: Duration) -> i64 {
    lease.as_millis().min(i64::MAX as u128) as i64
}

fn parse_view(id: &str, text: &str) -> Result<RunView, ApiError> {
    serde_json::from_str(text).map_err(|e| {
        ApiError::gone(format!(
            "run {id} cannot be shown: its record is unreadable ({e})"
        ))
    })
}

impl PgRuns {
    /// Marks runs whose lease ended as failed, each with a last event
    /// saying why (both in one statement, so a stream never sees the
    /// status without the event). Returns how many.
    fn reap(&self) -> Result<usize, String> {
        let expired = self
            .db
            .query(
                "SELECT id, node, view,
                        (SELECT record FROM rlm_run_events e WHERE e.run_id = r.id
                         ORDER BY seq DESC LIMIT 1)
                 FROM rlm_runs r WHERE status = 'running' AND lease_until < now()",
                vec![],
            )
            .map_err(|e| e.to_string())?;
        let mut reaped = 0;
        for row in expired {
            let id: String = row.get(0);
            let node: String = row.get(1);
            let Ok(mut view) = serde_json::from_str::<RunView>(&row.get::<_, String>(2)) else {
                continue;
            };
            let last: Option<TraceRecord> = row
                .get::<_, Option<String>>(3)
                .and_then(|r| serde_json::from_str(&r).ok());
            let message = format!(
                "node lost: the node answering this run ({node}) stopped renewing its lease (killed, crashed or cut off from the database); marked failed by {}; its steps up to then are kept",
                self.node
            );
            let now = now_rfc3339();
            let record = TraceRecord {
                seq: last.as_ref().map_or(0, |r| r.seq + 1),
                t_ms: last.as_ref().map_or(0, |r| r.t_ms),
                ts: now.clone(),
                event: TraceEvent::Error {
                    agent: "0".into(),
                    message: message.clone(),
                },
            };
            view.run.status = RunStatus::Failed;
            view.run.finished_at = Some(last.map_or(now, |r| r.ts));
            view.error = Some(message);
            let n = self
                .db
                .execute(
                    "WITH dead AS (
                         UPDATE rlm_runs SET status = 'failed', view = $2
                         WHERE id = $1 AND status = 'running' AND lease_until < now()
                         RETURNING id)
                     INSERT INTO rlm_run_events (run_id, seq, record)
                     SELECT id, $3, $4 FROM dead ON CONFLICT DO NOTHING",
                    vec![
                        p(id.clone()),
                        p(serde_json::to_string(&view).map_err(|e| e.to_string())?),
                        p(record.seq as i64),
                        p(serde_json::to_string(&record).map_err(|e| e.to_string())?),
                    ],
                )
                .map_err(|e| e.to_string())?;
            if n > 0 {
                eprintln!("rlm serve: run {id} of node {node} marked failed: its lease expired");
                reaped += 1;
            }
        }
        Ok(reaped)
    }
}

/// Where a run's events go: inserted as they come, only while the run is
/// still this node's and running.
struct PgEventLog {
    db: Arc<Conn>,
    id: String,
    node: String,
    written: usize,
    error: Option<String>,
}

impl EventLog for PgEventLog {
    fn catch_up(&mut self, trace: &Trace) {
        let records = trace.records_from(self.written);
        if records.is_empty() {
            return;
        }
        let seqs: Vec<i64> = records.iter().map(|r| r.seq as i64).collect();
        let texts: Vec<String> = records
            .iter()
            .map(|r| serde_json::to_string(r).unwrap_or_default())
            .collect();
        let inserted = self.db.execute(
            "INSERT INTO rlm_run_events (run_id, seq, record)
             SELECT $1, x.seq, x.record FROM unnest($2::bigint[], $3::text[]) AS x(seq, record)
             WHERE EXISTS (SELECT 1 FROM rlm_runs WHERE id = $1 AND node = $4 AND status = 'running')
             ON CONFLICT DO NOTHING",
            vec![
                p(self.id.clone()),
                p(seqs),
                p(texts),
                p(self.node.clone()),
            ],
        );
        match inserted {
            // Kept for the next call, which sends them again.
            Err(e) => {
                self.error = Some(format!(
                    "the run's events after event {} ({e})",
                    self.written
                ))
            }
            Ok(_) => {
                self.written += records.len();
                self.error = None;
            }
        }
    }

    fn finish(&mut self, trace: &Trace) -> Result<(), StateError> {
        self.catch_up(trace);
        match self.error.take() {
            None => Ok(()),
            Some(e) => Err(e.into()),
        }
    }
}

/// A run's saved events, read in order a batch at a time.
struct PgCursor {
    db: Arc<Conn>,
    id: String,
}

impl EventCursor for PgCursor {
    fn next_batch(&mut self, from: u64, max: usize) -> Vec<TraceRecord> {
        let rows = self.db.query(
            "SELECT record FROM rlm_run_events WHERE run_id = $1 AND seq >= $2
             ORDER BY seq LIMIT $3",
            vec![p(self.id.clone()), p(from as i64), p(max as i64)],
        );
        rows.unwrap_or_default()
            .into_iter()
            .filter_map(|r| serde_json::from_str(&r.get::<_, String>(0)).ok())
            .collect()
    }
}

impl RunBackend for PgRuns {
    fn create(&self, view: &RunView) -> Result<Box<dyn EventLog>, StateError> {
        let text = serde_json::to_string(view).map_err(|e| e.to_string())?;
        self.db
            .execute(
                "INSERT INTO rlm_runs (id, session, status, node, lease_until, view)
                 VALUES ($1, $2, 'running', $3, now() + $4::float8 * interval '1 millisecond', $5)",
                vec![
                    p(view.run.id.clone()),
                    p(view.run.session.clone()),
                    p(self.node.clone()),
                    p(lease_ms(self.lease) as f64),
                    p(text),
                ],
            )
            .map_err(|e| format!("cannot record it in the database ({e})"))?;
        Ok(Box::new(PgEventLog {
            db: self.db.clone(),
            id: view.run.id.clone(),
            node: self.node.clone(),
            written: 0,
            error: None,
        }))
    }

    fn save(&self, view: &RunView) -> Result<(), StateError> {
        let text = serde_json::to_string(view).map_err(|e| e.to_string())?;
        let n = self
            .db
            .execute(
                "UPDATE rlm_runs SET status = $2, view = $3
                 WHERE id = $1 AND node = $4 AND status = 'running'",
                vec![
                    p(view.run.id.clone()),
                    p(status_text(view.run.status)),
                    p(text),
                    p(self.node.clone()),
                ],
            )
            .map_err(|e| format!("the run record ({e})"))?;
        if n == 0 {
            return Err(StateError::LeaseLost);
        }
        Ok(())
    }

    fn read(&self, id: &str) -> Result<Option<RunView>, ApiError> {
        let row = self
            .db
            .query_opt(
                "SELECT view FROM rlm_runs WHERE id = $1",
                vec![p(id.to_string())],
            )
            .map_err(|e| ApiError::internal(format!("cannot read run {id}: {e}")))?;
        row.map(|r| parse_view(id, &r.get::<_, String>(0)))
            .transpose()
    }

    fn list(
        &self,
        limit: usize,
        session: Option<&str>,
        skip: &dyn Fn(&str) -> bool,
    ) -> Vec<RunSummary> {
        let mut out = Vec::new();
        let mut offset = 0i64;
        let page = (limit as i64).clamp(1, 500) + 16;
        loop {
            let rows = self
                .db
                .query(
                    "SELECT id, view FROM rlm_runs WHERE $1::text IS NULL OR session = $1
                     ORDER BY started DESC, id DESC LIMIT $2 OFFSET $3",
                    vec![p(session.map(str::to_string)), p(page), p(offset)],
                )
                .unwrap_or_default();
            let n = rows.len() as i64;
            for r in rows {
                let id: String = r.get(0);
                if out.len() >= limit || skip(&id) {
                    continue;
                }
                if let Ok(v) = parse_view(&id, &r.get::<_, String>(1)) {
                    out.push(v.summary());
                }
            }
            offset += n;
            if out.len() >= limit || n < page {
                return out;
            }
        }
    }

    fn events(&self, id: &str) -> Box<dyn EventCursor> {
        Box::new(PgCursor {
            db: self.db.clone(),
            id: id.to_string(),
        })
    }

    fn last_event_ts(&self, id: &str) -> Option<String> {
        let row = self
            .db
            .query_opt(
                "SELECT record FROM rlm_run_events WHERE run_id = $1 ORDER BY seq DESC LIMIT 1",
                vec![p(id.to_string())],
            )
            .ok()??;
        serde_json::from_str::<TraceRecord>(&row.get::<_, String>(0))
            .ok()
            .map(|r| r.ts)
    }

    fn prune(&self, keep: usize, _in_use: &dyn Fn(&str) -> bool) -> Vec<String> {
        // Only finished runs are deleted (their events with them).
        self.db
            .query(
                "DELETE FROM rlm_runs WHERE id IN (
                     SELECT id FROM rlm_runs WHERE status <> 'running'
                     ORDER BY started DESC, id DESC OFFSET $1)
                 RETURNING id",
                vec![p(keep as i64)],
            )
            .map(|rows| rows.into_iter().map(|r| r.get(0)).collect())
            .unwrap_or_default()
    }

    fn orphaned_at_start(&self) -> Vec<String> {
        // Leases decide: a run of a dead node is marked failed once its
        // lease ends, by whichever node looks first.
        Vec::new()
    }

    fn single_node(&self) -> bool {
        false
    }

    fn request_cancel(&self, id: &str) -> Result<Option<RunView>, ApiError> {
        let row = self
            .db
            .query_opt(
                "UPDATE rlm_runs SET cancel_requested = true
                 WHERE id = $1 AND status = 'running' RETURNING view",
                vec![p(id.to_string())],
            )
            .map_err(|e| ApiError::internal(format!("cannot cancel run {id}: {e}")))?;
        row.map(|r| parse_view(id, &r.get::<_, String>(0)))
            .transpose()
    }

    fn heartbeat_every(&self) -> Option<Duration> {
        Some((self.lease / 4).clamp(Duration::from_millis(50), Duration::from_millis(500)))
    }

    fn heartbeat(&self, running: &[String]) -> Result<Heartbeat, StateError> {
        let ms = lease_ms(self.lease) as f64;
        let renewed = self
            .db
            .query(
                "UPDATE rlm_runs SET lease_until = now() + $2::float8 * interval '1 millisecond'
                 WHERE node = $1 AND status = 'running' RETURNING id, cancel_requested",
                vec![p(self.node.clone()), p(ms)],
            )
            .map_err(|e| e.to_string())?;
        // The model-call slots this node holds live as long as it does.
        self.db
            .execute(
                "UPDATE rlm_model_slots SET lease_until = now() + $2::float8 * interval '1 millisecond'
                 WHERE starts_with(holder, $1)",
                vec![p(format!("{}/", self.node)), p(ms)],
            )
            .map_err(|e| e.to_string())?;
        let mut beat = Heartbeat::default();
        let mut held = Vec::new();
        for r in renewed {
            let id: String = r.get(0);
            if r.get::<_, bool>(1) {
                beat.cancel.push(id.clone());
            }
            held.push(id);
        }
        beat.lost = running
            .iter()
            .filter(|id| !held.contains(id))
            .cloned()
            .collect();
        self.reap()?;
        Ok(beat)
    }

    fn location(&self) -> String {
        self.db.location().to_string()
    }
}
