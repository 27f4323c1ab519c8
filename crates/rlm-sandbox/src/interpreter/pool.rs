//! A pool of warm workers.

use std::sync::{Arc, Mutex};

use super::config::{SandboxBackend, SandboxConfig};
use super::spec::{InterpreterSpec, SandboxError};
use super::{Interpreter, Worker};

/// Keeps a few spawned workers warm so an interpreter starts in milliseconds.
#[derive(Debug, Clone)]
pub struct WorkerPool {
    config: SandboxConfig,
    idle: Arc<Mutex<Vec<Worker>>>,
    size: usize,
}

impl WorkerPool {
    /// Spawns `size` workers (at least one) and keeps that many idle.
    pub async fn new(config: SandboxConfig, size: usize) -> Result<Self, SandboxError> {
        let size = size.max(1);
        let mut idle = Vec::with_capacity(size);
        for _ in 0..size {
            idle.push(Worker::spawn(&config).await?);
        }
        Ok(Self {
            config,
            idle: Arc::new(Mutex::new(idle)),
            size,
        })
    }

    /// Starts an interpreter on a warm worker (or a fresh one when none is idle),
    /// then refills the pool in the background.
    pub async fn start_interpreter(
        &self,
        spec: &InterpreterSpec,
    ) -> Result<Interpreter, SandboxError> {
        spec.validate()?;
        let warm = loop {
            let candidate = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
            match candidate {
                Some(mut w) => {
                    if w.is_alive() {
                        break Some(w);
                    }
                }
                None => break None,
            }
        };
        let worker = match warm {
            Some(w) => w,
            None => Worker::spawn(&self.config).await?,
        };
        self.refill();
        worker.start_interpreter(&self.config, spec).await
    }

    /// Starts an interpreter on `backend`: a warm worker when it is the pool's
    /// back-end, else a fresh worker of that back-end with the pool's limits
    /// (a question may ask for the other one).
    pub async fn start_interpreter_on(
        &self,
        backend: SandboxBackend,
        spec: &InterpreterSpec,
    ) -> Result<Interpreter, SandboxError> {
        if backend == self.config.backend {
            return self.start_interpreter(spec).await;
        }
        let mut config = self.config.clone();
        config.backend = backend;
        Interpreter::start(&config, spec).await
    }

    /// Idle workers right now.
    pub fn idle_count(&self) -> usize {
        self.idle.lock().map(|v| v.len()).unwrap_or(0)
    }

    /// The configuration every interpreter of the pool gets.
    pub fn config(&self) -> &SandboxConfig {
        &self.config
    }

    fn refill(&self) {
        let missing = self.size.saturating_sub(self.idle_count());
        for _ in 0..missing {
            let idle = self.idle.clone();
            let config = self.config.clone();
            let size = self.size;
            tokio::spawn(async move {
                if let Ok(w) = Worker::spawn(&config).await {
                    let mut idle = idle.lock().unwrap_or_else(|e| e.into_inner());
                    if idle.len() < size {
                        idle.push(w);
                    }
                }
            });
        }
    }
}
