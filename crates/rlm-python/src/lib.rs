//! `rlm_rs._native`: the engine of `rlm` for Python (PyPI `rlm-rs`).
//!
//! The Python package (`python/rlm_rs/`) gives it the reference RLM
//! library's call shape (`RLM(...).completion(prompt, root_prompt=...)`);
//! this module is what it calls: [`corpus::Corpus`] (texts in memory or a
//! store folder), [`run::Engine`] (a model client, a warm sandbox worker and
//! the checked settings) and [`run::Run`] (one question running on the
//! engine's tokio runtime: its trace events, its cancel token, its answer).
//! Every wait releases the GIL, so other Python threads run meanwhile.
//!
//! The sandbox worker is this same library: a Python interpreter started
//! with `-I -S` loads it by path and calls [`sandbox_worker`], which runs
//! `rlm_sandbox::worker::run_worker` (as `rlm __sandbox-worker` does), so the
//! wheel ships no executable of its own.

#![warn(missing_docs)]

use pyo3::prelude::*;

mod corpus;
mod run;
mod settings;

/// Counts every allocation so a sandbox worker's memory limit can be
/// enforced; outside a worker (the Python process) it only counts.
#[global_allocator]
static ALLOCATOR: rlm_sandbox::LimitedAllocator = rlm_sandbox::LimitedAllocator;

pyo3::create_exception!(
    _native,
    ArgumentError,
    pyo3::exceptions::PyValueError,
    "A bad argument or setting (the Python package raises it as RLMArgumentError)."
);
pyo3::create_exception!(
    _native,
    RunError,
    pyo3::exceptions::PyRuntimeError,
    "A question that could not be attempted (the Python package raises it as RLMRunError)."
);

/// Runs this process as a sandbox worker with the worker's arguments
/// (`--parent-pid`, `--memory-limit`) and ends it with the worker's exit
/// code; never returns. Started by the engine, not by hand.
#[pyfunction]
fn sandbox_worker(py: Python<'_>, args: Vec<String>) -> PyResult<()> {
    let code = py.detach(|| rlm_sandbox::worker::run_worker(&args));
    // The worker closed every inherited descriptor and owns stdin/stdout:
    // end here, without Python's own shutdown.
    std::process::exit(code)
}

/// Whether this build has the embedded local model (`backend="local"`).
#[pyfunction]
fn has_local_model() -> bool {
    cfg!(feature = "local-model")
}

/// Checks the JSON text of an `output_schema`: a JSON Schema of the subset
/// every provider can be constrained to; `ValueError` says what is wrong.
#[pyfunction]
fn check_schema(schema_json: &str) -> PyResult<()> {
    parse_schema(schema_json).map(drop)
}

/// The schema of `output_schema`'s JSON text, checked.
pub(crate) fn parse_schema(schema_json: &str) -> PyResult<serde_json::Value> {
    let schema: serde_json::Value = serde_json::from_str(schema_json)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("not JSON: {e}")))?;
    rlm_engine::check_answer_schema(&schema)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
    Ok(schema)
}

/// The module `rlm_rs._native`.
#[pymodule]
#[pyo3(name = "_native")]
fn native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("ArgumentError", m.py().get_type::<ArgumentError>())?;
    m.add("RunError", m.py().get_type::<RunError>())?;
    m.add_function(wrap_pyfunction!(sandbox_worker, m)?)?;
    m.add_function(wrap_pyfunction!(has_local_model, m)?)?;
    m.add_function(wrap_pyfunction!(check_schema, m)?)?;
    m.add_class::<corpus::Corpus>()?;
    m.add_class::<run::Engine>()?;
    m.add_class::<run::Run>()?;
    m.add("DEFAULT_CHUNK_CHARS", rlm_corpus::DEFAULT_CHUNK_CHARS)?;
    Ok(())
}
