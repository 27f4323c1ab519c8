//! MCP sessions over HTTP with limits that hold: at most [`MAX_SESSIONS`]
//! open at once, and a session that sees no traffic (no request, nothing
//! streamed back) for [`SESSION_IDLE`] is closed; its id then answers 404,
//! and the client starts a new one. The SDK's session manager does the rest.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{Stream, StreamExt};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{ServerSseMessage, SessionId};

/// Most sessions open at once.
pub const MAX_SESSIONS: usize = 256;
/// A session without traffic for this long is closed.
pub const SESSION_IDLE: Duration = Duration::from_secs(300);

/// Why a session could not be used.
#[derive(Debug, thiserror::Error)]
pub enum SessionsError {
    /// The SDK's own error.
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
    /// No room for another session.
    #[error(
        "the server has {MAX_SESSIONS} MCP sessions open, its limit: close one (DELETE /mcp with its Mcp-Session-Id) or retry when an idle one has ended"
    )]
    Full,
}

/// The SDK's session manager with a cap and an idle expiry.
#[derive(Default)]
pub struct Sessions {
    inner: LocalSessionManager,
    /// When each open session last saw traffic.
    seen: Arc<Mutex<HashMap<SessionId, Instant>>>,
}

impl Sessions {
    /// Sessions open now.
    pub fn open(&self) -> usize {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Closes the sessions idle past [`SESSION_IDLE`] (`idle` to test).
    async fn close_idle(&self, idle: Duration) {
        let expired: Vec<SessionId> = {
            let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            let ids: Vec<SessionId> = seen
                .iter()
                .filter(|(_, at)| at.elapsed() >= idle)
                .map(|(id, _)| id.clone())
                .collect();
            for id in &ids {
                seen.remove(id);
            }
            ids
        };
        for id in expired {
            let _ = self.inner.close_session(&id).await;
        }
    }

    /// Records traffic on `id`; false when the session is not open (or
    /// has just expired).
    async fn touch(&self, id: &SessionId) -> bool {
        self.close_idle(SESSION_IDLE).await;
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        match seen.get_mut(id) {
            Some(at) => {
                *at = Instant::now();
                true
            }
            None => false,
        }
    }

    /// `stream` with each item counted as traffic of `id` (a long answer
    /// streaming progress keeps its session open).
    fn watched<S>(
        &self,
        id: &SessionId,
        stream: S,
    ) -> impl Stream<Item = ServerSseMessage> + Send + Sync + 'static
    where
        S: Stream<Item = ServerSseMessage> + Send + Sync + 'static,
    {
        let (seen, id) = (self.seen.clone(), id.clone());
        stream.inspect(move |_| {
            if let Some(at) = seen.lock().unwrap_or_else(|p| p.into_inner()).get_mut(&id) {
                *at = Instant::now();
            }
        })
    }

    fn not_found(id: &SessionId) -> SessionsError {
        SessionsError::Local(LocalSessionManagerError::SessionNotFound(id.clone()))
    }
}

impl SessionManager for Sessions {
    type Error = SessionsError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        self.close_idle(SESSION_IDLE).await;
        // Checked and reserved under one lock (the id is known only after).
        let reserved = SessionId::from(format!("reserved-{}", uuid_like()));
        {
            let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            if seen.len() >= MAX_SESSIONS {
                return Err(SessionsError::Full);
            }
            seen.insert(reserved.clone(), Instant::now());
        }
        let created = self.inner.create_session().await;
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.remove(&reserved);
        let (id, transport) = created?;
        seen.insert(id.clone(), Instant::now());
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        if !self.touch(id).await {
            return Err(Self::not_found(id));
        }
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        Ok(self.touch(id).await && self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
        Ok(self.inner.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        if !self.touch(id).await {
            return Err(Self::not_found(id));
        }
        let stream = self.inner.create_stream(id, message).await?;
        Ok(self.watched(id, stream))
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        if !self.touch(id).await {
            return Err(Self::not_found(id));
        }
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        if !self.touch(id).await {
            return Err(Self::not_found(id));
        }
        let stream = self.inner.create_standalone_stream(id).await?;
        Ok(self.watched(id, stream))
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        if !self.touch(id).await {
            return Err(Self::not_found(id));
        }
        let stream = self.inner.resume(id, last_event_id).await?;
        Ok(self.watched(id, stream))
    }
}

/// A unique placeholder id for a session being created.
fn uuid_like() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sessions_are_capped_and_idle_ones_end() {
        let sessions = Sessions::default();
        let mut ids = Vec::new();
        for _ in 0..MAX_SESSIONS {
            ids.push(sessions.create_session().await.unwrap().0);
        }
        assert!(matches!(
            sessions.create_session().await,
            Err(SessionsError::Full)
        ));
        match sessions.create_session().await {
            Err(e) => assert!(e.to_string().contains("limit"), "{e}"),
            Ok(_) => panic!("a session past the cap"),
        }
        // Closing one makes room.
        sessions.close_session(&ids[0]).await.unwrap();
        let fresh = sessions.create_session().await.unwrap().0;
        assert!(sessions.has_session(&fresh).await.unwrap());
        // Idle ones end: their ids are no longer sessions.
        sessions.close_idle(Duration::ZERO).await;
        assert_eq!(sessions.open(), 0);
        assert!(!sessions.has_session(&fresh).await.unwrap());
        assert!(!sessions.has_session(&ids[1]).await.unwrap());
    }
}
