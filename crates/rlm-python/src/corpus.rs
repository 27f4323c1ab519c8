//! [`Corpus`]: what a question is asked over, built from texts in memory
//! (the reference library's `context`) or opened from a store folder.

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::prelude::*;
use rlm_corpus::{MemoryDocument, Store};

use crate::ArgumentError;

/// The documents of one question: texts given in memory, chunked and indexed
/// in memory, or a store made by `rlm index`.
#[pyclass(frozen, module = "rlm_rs._native")]
pub struct Corpus {
    pub(crate) inner: Arc<rlm_engine::Corpus>,
}

#[pymethods]
impl Corpus {
    /// A corpus over `(name, text)` pairs, in that order, chunked at
    /// `chunk_chars` characters and indexed for search, all in memory.
    #[staticmethod]
    #[pyo3(signature = (documents, chunk_chars = rlm_corpus::DEFAULT_CHUNK_CHARS))]
    fn from_texts(
        py: Python<'_>,
        documents: Vec<(String, String)>,
        chunk_chars: usize,
    ) -> PyResult<Corpus> {
        let docs: Vec<MemoryDocument> = documents
            .into_iter()
            .map(|(path, text)| MemoryDocument { path, text })
            .collect();
        let corpus = py
            .detach(|| rlm_engine::Corpus::in_memory(&docs, chunk_chars))
            .map_err(|e| ArgumentError::new_err(format!("the context: {e}")))?;
        Ok(Corpus {
            inner: Arc::new(corpus),
        })
    }

    /// The store in folder `path` (made by `rlm index`).
    #[staticmethod]
    fn open(py: Python<'_>, path: PathBuf) -> PyResult<Corpus> {
        let corpus = py
            .detach(|| {
                let store = Store::open(&path)?;
                rlm_engine::Corpus::load(Arc::new(store))
            })
            .map_err(|e| ArgumentError::new_err(format!("store={}: {e}", path.display())))?;
        if corpus.documents().is_empty() {
            return Err(ArgumentError::new_err(format!(
                "store={}: the store has no documents; add some with `rlm index PATH --store {}`",
                path.display(),
                path.display()
            )));
        }
        Ok(Corpus {
            inner: Arc::new(corpus),
        })
    }

    /// Number of documents.
    #[getter]
    fn documents(&self) -> usize {
        self.inner.documents().len()
    }

    /// Characters over all documents.
    #[getter]
    fn chars(&self) -> u64 {
        self.inner.total_chars()
    }

    /// The documents' names (paths), in order.
    #[getter]
    fn names(&self) -> Vec<String> {
        self.inner
            .documents()
            .iter()
            .map(|d| d.path.clone())
            .collect()
    }

    fn __repr__(&self) -> String {
        format!(
            "Corpus({} documents, {} characters)",
            self.inner.documents().len(),
            self.inner.total_chars()
        )
    }
}
