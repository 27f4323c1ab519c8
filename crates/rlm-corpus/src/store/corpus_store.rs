//! The local store as a [`CorpusStore`]: every method is the inherent one
//! of [`Store`] (SQLite lookups, tantivy BM25, vectors loaded from SQLite).

use std::any::Any;
use std::sync::Arc;

use super::Store;
use crate::backend::{CorpusStore, TextPage};
use crate::embed::Embedder;
use crate::error::CorpusError;
use crate::fts::SearchHit;
use crate::language::LanguageShare;
use crate::records::{Chunk, Document, StoreStats};
use crate::vector::{EmbedOptions, EmbedProgress, EmbedReport, RetrievalError, VectorStatus};

impl CorpusStore for Store {
    fn location(&self) -> String {
        self.dir().display().to_string()
    }

    fn into_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
        self
    }

    fn stats(&self) -> Result<StoreStats, CorpusError> {
        Store::stats(self)
    }

    fn languages(&self) -> Result<Vec<LanguageShare>, CorpusError> {
        Store::languages(self)
    }

    fn reply_cache(&self) -> Result<Option<Arc<dyn crate::ReplyCache>>, CorpusError> {
        Store::reply_cache(self)
    }

    fn documents(&self) -> Result<Vec<Document>, CorpusError> {
        Store::documents(self)
    }

    fn document(&self, doc_id: &str) -> Result<Option<Document>, CorpusError> {
        Store::document(self, doc_id)
    }

    fn document_by_path(&self, path: &str) -> Result<Option<Document>, CorpusError> {
        Store::document_by_path(self, path)
    }

    fn document_text(&self, doc_id: &str) -> Result<String, CorpusError> {
        Store::document_text(self, doc_id)
    }

    fn chunks_of(&self, doc_id: &str) -> Result<Vec<Chunk>, CorpusError> {
        Store::chunks_of(self, doc_id)
    }

    fn chunk(&self, chunk_id: &str) -> Result<Option<Chunk>, CorpusError> {
        Store::chunk(self, chunk_id)
    }

    fn search(&self, query: &str, k: usize) -> Result<Vec<SearchHit>, CorpusError> {
        Store::search(self, query, k)
    }

    fn embedding_model(&self) -> Result<Option<(String, usize)>, RetrievalError> {
        Store::embedding_model(self)
    }

    fn vector_status(&self) -> Result<VectorStatus, RetrievalError> {
        Store::vector_status(self)
    }

    fn search_vector(
        &self,
        query: &[f32],
        k: usize,
        min_similarity: f32,
    ) -> Result<Vec<(String, f32)>, RetrievalError> {
        Store::search_vector(self, query, k, min_similarity)
    }

    fn searchable_vectors(&self) -> Result<Option<u64>, RetrievalError> {
        // The loaded matrix holds exactly the current vectors; counting
        // them in SQLite on every query would cost more than the scan.
        Ok(self.vector_matrix()?.map(|m| m.ids.len() as u64))
    }

    fn embed_chunks(
        &self,
        embedder: &dyn Embedder,
        opts: &EmbedOptions,
        progress: &mut dyn FnMut(EmbedProgress),
    ) -> Result<EmbedReport, RetrievalError> {
        Store::embed_chunks(self, embedder, opts, progress)
    }

    fn slice(&self, doc_id: &str, start: u64, end: u64) -> Result<String, CorpusError> {
        Store::slice(self, doc_id, start, end)
    }

    fn text_page(&self, doc_id: &str, offset: u64, limit: u64) -> Result<TextPage, CorpusError> {
        Store::text_page(self, doc_id, offset, limit)
    }
}
