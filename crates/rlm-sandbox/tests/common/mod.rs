//! Shared helpers for the integration tests: a real worker process and a
//! scripted host handler.

#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rlm_sandbox::*;
use serde_json::{Value, json};

/// Config pointing at the worker binary cargo built for this package.
pub fn config() -> SandboxConfig {
    let mut c = SandboxConfig::new(WorkerCommand::new(env!("CARGO_BIN_EXE_rlm-sandbox-worker")));
    c.cell_time_limit = Duration::from_secs(5);
    c.kill_grace = Duration::from_secs(3);
    c.memory_limit_bytes = 512 << 20;
    c
}

/// Host functions of the tests: `echo` (sync), `aecho` (async, answers after a
/// delay in reverse order), `boom` (raises), `stop` (ends the cell), `wait`
/// (sync, answers after its argument's milliseconds).
#[derive(Default)]
pub struct TestHost {
    pub calls: AtomicU64,
    /// Calls being answered right now, and the most ever at once.
    pub in_flight: AtomicU64,
    pub max_in_flight: AtomicU64,
}

impl HostHandler for TestHost {
    async fn handle(&self, call: HostCall) -> Result<Value, HostError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        match call.name.as_str() {
            "echo" => Ok(call.args.first().cloned().unwrap_or(Value::Null)),
            "aecho" => {
                let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                self.max_in_flight.fetch_max(now, Ordering::SeqCst);
                let n = call.args.first().and_then(Value::as_u64).unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(50 * (5 - n.min(5)))).await;
                self.in_flight.fetch_sub(1, Ordering::SeqCst);
                Ok(json!(format!("answer {n}")))
            }
            "boom" => Err(HostError::Raise {
                exc_type: "ValueError".into(),
                message: "boom from the host".into(),
            }),
            "stop" => Err(HostError::EndCell("stopped by FINAL".into())),
            "noop" => Ok(Value::Null),
            "wait" => {
                let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                self.max_in_flight.fetch_max(now, Ordering::SeqCst);
                let ms = call.args.first().and_then(Value::as_u64).unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                self.in_flight.fetch_sub(1, Ordering::SeqCst);
                Ok(Value::Null)
            }
            other => Err(HostError::runtime(format!("unexpected host call {other}"))),
        }
    }
}

/// An interpreter with `context`, the test host functions, and the handler.
pub async fn interpreter_with(context: &str) -> (Interpreter, Arc<TestHost>) {
    start_with(&config(), context).await
}

/// Set (to anything) where the CPython back-end must be testable (CI installs
/// bubblewrap): its tests then fail instead of skipping when it cannot start.
pub const REQUIRE_CPYTHON_ENV: &str = "RLM_REQUIRE_CPYTHON_SANDBOX";

/// [`config`] on the CPython back-end, or `None` (after saying why) where it
/// cannot run: no bubblewrap, no user namespaces, not Linux.
pub fn cpython_config() -> Option<SandboxConfig> {
    match rlm_sandbox::cpython::launcher(None) {
        Ok(_) => {
            let mut c = config();
            c.backend = SandboxBackend::CPython;
            Some(c)
        }
        Err(e) if std::env::var_os(REQUIRE_CPYTHON_ENV).is_some() => {
            panic!("{REQUIRE_CPYTHON_ENV} is set but the CPython sandbox cannot start: {e}")
        }
        Err(e) => {
            eprintln!("skipped: {e}");
            None
        }
    }
}

/// The test spec ([`interpreter_with`]'s) started on `config`.
pub async fn start_with(config: &SandboxConfig, context: &str) -> (Interpreter, Arc<TestHost>) {
    let spec = InterpreterSpec::new()
        .input("context", InputValue::Text(context.to_string()))
        .function("echo", HostFunctionKind::Sync)
        .function("aecho", HostFunctionKind::Async)
        .function("boom", HostFunctionKind::Sync)
        .function("stop", HostFunctionKind::Sync)
        .function("noop", HostFunctionKind::Sync)
        .function("wait", HostFunctionKind::Sync);
    let interp = Interpreter::start(config, &spec)
        .await
        .expect("interpreter starts");
    (interp, Arc::new(TestHost::default()))
}
