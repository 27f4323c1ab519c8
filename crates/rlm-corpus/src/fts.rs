//! The full-text index over chunks (tantivy, BM25, English analyzer).

use std::borrow::Cow;
use std::path::Path;

use serde::{Deserialize, Serialize};
use tantivy::collector::TopDocs;
use tantivy::query::QueryParser;
use tantivy::schema::{
    Field, INDEXED, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions,
    Value,
};
use tantivy::snippet::SnippetGenerator;
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer,
};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term, doc};

use crate::error::CorpusError;

const ANALYZER: &str = "en_stem_stop";
/// Memory for the index writer, shared by its threads. Bounded so that
/// indexing a large corpus stays within a predictable footprint.
const WRITER_HEAP_BYTES: usize = 192 * 1024 * 1024;

/// Fields of the chunk index.
#[derive(Clone, Copy)]
struct Fields {
    chunk_id: Field,
    doc_id: Field,
    path: Field,
    ordinal: Field,
    text: Field,
}

/// One chunk to add to the index.
pub(crate) struct FtsChunk<'a> {
    pub chunk_id: &'a str,
    pub doc_id: &'a str,
    pub path: &'a str,
    pub ordinal: u32,
    pub text: &'a str,
}

/// One search result: a chunk found by BM25 in the full-text index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchHit {
    /// The chunk found.
    pub chunk_id: String,
    /// Its document.
    pub doc_id: String,
    /// The document's corpus-relative path.
    pub path: String,
    /// The chunk's ordinal in its document.
    pub ordinal: u32,
    /// BM25 score.
    pub score: f32,
    /// A short excerpt with matched terms marked `**like this**`.
    pub snippet: String,
    /// The chunk's full text.
    pub text: String,
}

/// The tantivy index of a store.
pub(crate) struct FullText {
    index: Index,
    reader: IndexReader,
    fields: Fields,
}

fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let text_opts = TextOptions::default()
        .set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(ANALYZER)
                .set_index_option(IndexRecordOption::WithFreqsAndPositions),
        )
        .set_stored();
    let fields = Fields {
        chunk_id: b.add_text_field("chunk_id", STRING | STORED),
        doc_id: b.add_text_field("doc_id", STRING | STORED),
        path: b.add_text_field("path", STORED),
        ordinal: b.add_u64_field("ordinal", INDEXED | STORED),
        text: b.add_text_field("text", text_opts),
    };
    (b.build(), fields)
}

fn analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser)
        .filter(StopWordFilter::new(Language::English).expect("tantivy ships English stopwords"))
        .filter(Stemmer::new(Language::English))
        .build()
}

impl FullText {
    /// Opens the index in `dir`, creating it when absent.
    pub fn open_or_create(dir: &Path) -> Result<FullText, CorpusError> {
        let (schema, fields) = schema();
        std::fs::create_dir_all(dir).map_err(|e| CorpusError::io(dir, e))?;
        let mmap = tantivy::directory::MmapDirectory::open(dir).map_err(CorpusError::index)?;
        let index = Index::open_or_create(mmap, schema).map_err(CorpusError::index)?;
        Self::over(index, fields)
    }

    /// An empty index held in memory (an in-memory store's).
    pub fn in_ram() -> Result<FullText, CorpusError> {
        let (schema, fields) = schema();
        Self::over(Index::create_in_ram(schema), fields)
    }

    fn over(index: Index, fields: Fields) -> Result<FullText, CorpusError> {
        index.tokenizers().register(ANALYZER, analyzer());
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(CorpusError::index)?;
        Ok(FullText {
            index,
            reader,
            fields,
        })
    }

    /// The generation recorded with the last commit (see `Store` for why).
    pub fn committed_generation(&self) -> Result<Option<u64>, CorpusError> {
        let metas = self.index.load_metas().map_err(CorpusError::index)?;
        Ok(metas.payload.and_then(|p| p.parse().ok()))
    }

    /// A writer; only one may exist, which the store lock already guarantees.
    pub fn writer(&self) -> Result<FtsWriter, CorpusError> {
        let threads = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            .clamp(1, 4);
        self.writer_with(threads, WRITER_HEAP_BYTES)
    }

    /// A writer with `threads` indexing threads sharing `heap_bytes` (tantivy
    /// needs at least 15 MB a thread).
    pub fn writer_with(&self, threads: usize, heap_bytes: usize) -> Result<FtsWriter, CorpusError> {
        let writer = self
            .index
            .writer_with_num_threads(threads, heap_bytes)
            .map_err(CorpusError::index)?;
        Ok(FtsWriter {
            writer,
            fields: self.fields,
        })
    }

    /// Makes the last commit visible to searches.
    pub fn reload(&self) -> Result<(), CorpusError> {
        self.reader.reload().map_err(CorpusError::index)
    }

    /// BM25 search; `k` best chunks with highlighted snippets.
    pub fn search(&self, query: &str, k: usize) -> Result<Vec<SearchHit>, CorpusError> {
        let searcher = self.reader.searcher();
        let parser = QueryParser::for_index(&self.index, vec![self.fields.text]);
        // Lenient: a user's stray quote or colon must not turn into a syntax error.
        let (query, _errors) = parser.parse_query_lenient(&bounded_nesting(query));
        // The collector allocates for `k` hits up front: never ask for more
        // than there are chunks (a huge `k` would abort on the allocation).
        let limit = k.clamp(
            1,
            usize::try_from(searcher.num_docs())
                .unwrap_or(usize::MAX)
                .max(1),
        );
        let top = searcher
            .search(&query, &TopDocs::with_limit(limit))
            .map_err(CorpusError::index)?;
        let mut snippets = SnippetGenerator::create(&searcher, &*query, self.fields.text)
            .map_err(CorpusError::index)?;
        snippets.set_max_num_chars(200);
        let mut hits = Vec::with_capacity(top.len());
        for (score, addr) in top {
            let d: TantivyDocument = searcher.doc(addr).map_err(CorpusError::index)?;
            let text_of = |f: Field| {
                d.get_first(f)
                    .and_then(|v| v.as_str())
                    .unwrap_or_default()
                    .to_string()
            };
            let text = text_of(self.fields.text);
            let snippet = render_snippet(&snippets.snippet(&text), &text);
            hits.push(SearchHit {
                chunk_id: text_of(self.fields.chunk_id),
                doc_id: text_of(self.fields.doc_id),
                path: text_of(self.fields.path),
                ordinal: d
                    .get_first(self.fields.ordinal)
                    .and_then(|v| v.as_u64())
                    .unwrap_or(0) as u32,
                score,
                snippet,
                text,
            });
        }
        Ok(hits)
    }

    /// Number of indexed chunks in the last visible commit.
    pub fn num_chunks(&self) -> u64 {
        self.reader.searcher().num_docs()
    }
}

/// Marks matched terms with `**` so the snippet reads well in a terminal and in Markdown.
fn render_snippet(snippet: &tantivy::snippet::Snippet, text: &str) -> String {
    let fragment = snippet.fragment();
    if fragment.is_empty() {
        // No term matched in a stored fragment (e.g. a pure phrase miss): show the start.
        let head: String = text.chars().take(160).collect();
        return head.split_whitespace().collect::<Vec<_>>().join(" ");
    }
    let mut out = String::with_capacity(fragment.len() + 16);
    let mut last = 0;
    for range in snippet.highlighted() {
        out.push_str(&fragment[last..range.start]);
        out.push_str("**");
        out.push_str(&fragment[range.clone()]);
        out.push_str("**");
        last = range.end;
    }
    out.push_str(&fragment[last..]);
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Writes to the full-text index; nothing is visible until `commit`.
pub(crate) struct FtsWriter {
    writer: IndexWriter,
    fields: Fields,
}

impl FtsWriter {
    pub fn add(&self, c: &FtsChunk<'_>) -> Result<(), CorpusError> {
        let f = self.fields;
        self.writer
            .add_document(doc!(
                f.chunk_id => c.chunk_id,
                f.doc_id => c.doc_id,
                f.path => c.path,
                f.ordinal => c.ordinal as u64,
                f.text => c.text,
            ))
            .map_err(CorpusError::index)?;
        Ok(())
    }

    pub fn delete_document(&self, doc_id: &str) {
        self.writer
            .delete_term(Term::from_field_text(self.fields.doc_id, doc_id));
    }

    pub fn delete_all(&mut self) -> Result<(), CorpusError> {
        self.writer
            .delete_all_documents()
            .map_err(CorpusError::index)?;
        Ok(())
    }

    /// Commits, recording `generation` as the commit payload.
    pub fn commit(mut self, generation: u64) -> Result<(), CorpusError> {
        let mut prepared = self.writer.prepare_commit().map_err(CorpusError::index)?;
        prepared.set_payload(&generation.to_string());
        prepared.commit().map_err(CorpusError::index)?;
        // Merges finish in the background threads; wait so files are settled on exit.
        self.writer
            .wait_merging_threads()
            .map_err(CorpusError::index)?;
        Ok(())
    }
}

/// Parentheses and `NOT`s a query may hold as syntax. tantivy's query
/// parser recurses once per nested group or chained `NOT`: a few thousand
/// overflow the thread's stack, which aborts the whole process (a question
/// of 20,000 `(` killed `rlm serve`; found by its body fuzz).
const MAX_QUERY_NESTING: usize = 32;

/// The query, or, when it holds more than [`MAX_QUERY_NESTING`] parentheses
/// and `NOT`s, its words without them (they still match).
fn bounded_nesting(query: &str) -> Cow<'_, str> {
    let nesting =
        query.matches('(').count() + query.split_whitespace().filter(|w| *w == "NOT").count();
    if nesting <= MAX_QUERY_NESTING {
        return Cow::Borrowed(query);
    }
    let words = query.replace(['(', ')'], " ");
    Cow::Owned(
        words
            .split_whitespace()
            .filter(|w| *w != "NOT")
            .collect::<Vec<_>>()
            .join(" "),
    )
}
