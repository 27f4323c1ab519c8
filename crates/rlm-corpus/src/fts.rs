//! The full-text index over chunks (tantivy, BM25): each chunk in the field
//! of its document's language, analyzed by that language's stemmer and stop
//! words (see [`crate::language`]); a query is analyzed for every language
//! present in the store, and in compounding languages widened to compounds
//! that hold its words and to the parts of its compound words.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use tantivy::collector::{Count, TopDocs};
use tantivy::query::{
    BooleanQuery, BoostQuery, DisjunctionMaxQuery, Occur, Query, QueryParser, TermQuery,
};
use tantivy::schema::{
    Field, INDEXED, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions,
    Value,
};
use tantivy::snippet::SnippetGenerator;
use tantivy::tokenizer::{
    LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer,
    TokenStream,
};
use tantivy::{
    Index, IndexReader, IndexWriter, ReloadPolicy, Searcher, TantivyDocument, Term, doc,
};

use crate::compound::{self, COMPOUND_BOOST};
use crate::error::CorpusError;
use crate::language::{ANALYSES, Analysis, analysis_for};
use crate::snippet::{self, Matched};

/// Longest snippet of a hit, in bytes.
const SNIPPET_BYTES: usize = 200;

/// Memory for the index writer, shared by its threads. Bounded so that
/// indexing a large corpus stays within a predictable footprint.
const WRITER_HEAP_BYTES: usize = 192 * 1024 * 1024;

/// One clause of a boolean query.
type Clause = (Occur, Box<dyn Query>);

/// Fields of the chunk index.
#[derive(Clone)]
struct Fields {
    chunk_id: Field,
    doc_id: Field,
    path: Field,
    ordinal: Field,
    /// The chunk's text, stored (the language fields are indexed only).
    body: Field,
    /// The language code of the chunk's document (`de`, `und`).
    lang: Field,
    /// One indexed text field per analysis, in [`ANALYSES`] order.
    text: Vec<Field>,
}

impl Fields {
    fn text_for(&self, analysis: &Analysis) -> Field {
        let i = ANALYSES
            .iter()
            .position(|a| a == analysis)
            .unwrap_or_default();
        self.text[i]
    }
}

/// One chunk to add to the index.
pub(crate) struct FtsChunk<'a> {
    pub chunk_id: &'a str,
    pub doc_id: &'a str,
    pub path: &'a str,
    pub ordinal: u32,
    pub text: &'a str,
    /// Its document's language code (see [`crate::language::detect`]).
    pub language: &'a str,
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
    let indexed = |analyzer: &str| {
        TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(analyzer)
                .set_index_option(IndexRecordOption::WithFreqsAndPositions),
        )
    };
    let fields = Fields {
        chunk_id: b.add_text_field("chunk_id", STRING | STORED),
        doc_id: b.add_text_field("doc_id", STRING | STORED),
        path: b.add_text_field("path", STORED),
        ordinal: b.add_u64_field("ordinal", INDEXED | STORED),
        body: b.add_text_field("body", STORED),
        lang: b.add_text_field("lang", STRING | STORED),
        text: ANALYSES
            .iter()
            .map(|a| b.add_text_field(a.field, indexed(a.analyzer)))
            .collect(),
    };
    (b.build(), fields)
}

fn analyzer(analysis: &Analysis) -> TextAnalyzer {
    let builder = TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser)
        .dynamic();
    let builder = match StopWordFilter::new(analysis.stemming) {
        Some(stop) => builder.filter_dynamic(stop),
        None => builder,
    };
    builder
        .filter_dynamic(Stemmer::new(analysis.stemming))
        .build()
}

impl FullText {
    /// Opens the index in `dir`, creating it when absent.
    pub fn open_or_create(dir: &Path) -> Result<FullText, CorpusError> {
        let (schema, fields) = schema();
        std::fs::create_dir_all(dir).map_err(|e| CorpusError::io(dir, e))?;
        let mmap = tantivy::directory::MmapDirectory::open(dir).map_err(CorpusError::index)?;
        if Index::exists(&mmap).map_err(CorpusError::index)? {
            let index = Index::open(mmap).map_err(CorpusError::index)?;
            if index.schema() != schema {
                return Err(CorpusError::FulltextOutdated(dir.to_path_buf()));
            }
            return Self::over(index, fields);
        }
        let index = Index::create(mmap, schema, Default::default()).map_err(CorpusError::index)?;
        Self::over(index, fields)
    }

    /// An empty index held in memory (an in-memory store's).
    pub fn in_ram() -> Result<FullText, CorpusError> {
        let (schema, fields) = schema();
        Self::over(Index::create_in_ram(schema), fields)
    }

    fn over(index: Index, fields: Fields) -> Result<FullText, CorpusError> {
        for analysis in &ANALYSES {
            index
                .tokenizers()
                .register(analysis.analyzer, analyzer(analysis));
        }
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
            fields: self.fields.clone(),
        })
    }

    /// Makes the last commit visible to searches.
    pub fn reload(&self) -> Result<(), CorpusError> {
        self.reader.reload().map_err(CorpusError::index)
    }

    /// BM25 search; `k` best chunks with highlighted snippets.
    pub fn search(&self, query: &str, k: usize) -> Result<Vec<SearchHit>, CorpusError> {
        let searcher = self.reader.searcher();
        let analyses = self.analyses_present(&searcher)?;
        let fields: Vec<Field> = analyses.iter().map(|a| self.fields.text_for(a)).collect();
        let parser = QueryParser::for_index(&self.index, fields);
        // Lenient: a user's stray quote or colon must not turn into a syntax error.
        let (parsed, _errors) = parser.parse_query_lenient(&bounded_nesting(query));
        let mut clauses: Vec<Clause> = vec![(Occur::Should, parsed)];
        for analysis in analyses.iter().filter(|a| a.compounds) {
            clauses.extend(self.compound_clauses(&searcher, analysis, query)?);
        }
        let query: Box<dyn Query> = if clauses.len() == 1 {
            clauses.pop().map(|(_, q)| q).expect("one clause")
        } else {
            Box::new(BooleanQuery::new(clauses))
        };
        // The collector allocates for `k` hits up front: never ask for more
        // than there are chunks (a huge `k` would abort on the allocation).
        let limit = k.clamp(
            1,
            usize::try_from(searcher.num_docs())
                .unwrap_or(usize::MAX)
                .max(1),
        );
        let top = searcher
            .search(&*query, &TopDocs::with_limit(limit))
            .map_err(CorpusError::index)?;
        let terms = weighted_terms(&searcher, &*query);
        let mut analyzers: HashMap<Field, TextAnalyzer> = HashMap::new();
        let mut snippets: HashMap<Field, SnippetGenerator> = HashMap::new();
        let mut hits = Vec::with_capacity(top.len());
        for (score, addr) in top {
            let d: TantivyDocument = searcher.doc(addr).map_err(CorpusError::index)?;
            let text_of = |f: Field| {
                d.get_first(f)
                    .and_then(|v| v.as_str())
                    .unwrap_or_default()
                    .to_string()
            };
            let text = text_of(self.fields.body);
            let field = self
                .fields
                .text_for(analysis_for(&text_of(self.fields.lang)));
            let field_terms = terms.get(&field).map(Vec::as_slice).unwrap_or_default();
            let analyzer = match analyzers.entry(field) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => e.insert(
                    self.index
                        .tokenizer_for_field(field)
                        .map_err(CorpusError::index)?,
                ),
            };
            let matched = matched_terms(analyzer, &text, field_terms);
            let weights: Vec<f32> = field_terms.iter().map(|(_, w)| *w).collect();
            let snippet = match snippet::passage(&text, &matched, &weights, SNIPPET_BYTES) {
                Some(passage) => passage,
                // No term of the field (a phrase, a compound part): tantivy's.
                None => {
                    let generator = match snippets.entry(field) {
                        std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                        std::collections::hash_map::Entry::Vacant(e) => {
                            let mut g = SnippetGenerator::create(&searcher, &*query, field)
                                .map_err(CorpusError::index)?;
                            g.set_max_num_chars(SNIPPET_BYTES);
                            e.insert(g)
                        }
                    };
                    render_snippet(&generator.snippet(&text), &text)
                }
            };
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

    /// The analyses of the languages present in the index (English alone
    /// for an empty index), each once.
    fn analyses_present(&self, searcher: &Searcher) -> Result<Vec<&'static Analysis>, CorpusError> {
        let mut out: Vec<&'static Analysis> = Vec::new();
        for (code, _) in self.languages_in(searcher)? {
            let analysis = analysis_for(&code);
            if !out.contains(&analysis) {
                out.push(analysis);
            }
        }
        if out.is_empty() {
            out.push(&ANALYSES[0]);
        }
        Ok(out)
    }

    /// Each language code in the index with its number of chunks, the most
    /// common first.
    pub fn languages(&self) -> Result<Vec<(String, u64)>, CorpusError> {
        self.languages_in(&self.reader.searcher())
    }

    fn languages_in(&self, searcher: &Searcher) -> Result<Vec<(String, u64)>, CorpusError> {
        let mut codes = std::collections::BTreeSet::new();
        for segment in searcher.segment_readers() {
            let inverted = segment
                .inverted_index(self.fields.lang)
                .map_err(CorpusError::index)?;
            let mut terms = inverted.terms().stream().map_err(CorpusError::index)?;
            while terms.advance() {
                codes.insert(String::from_utf8_lossy(terms.key()).into_owned());
            }
        }
        let mut out = Vec::new();
        for code in codes {
            let term = TermQuery::new(
                Term::from_field_text(self.fields.lang, &code),
                IndexRecordOption::Basic,
            );
            // Counted through a search so deleted chunks are not counted.
            let n = searcher.search(&term, &Count).map_err(CorpusError::index)? as u64;
            if n > 0 {
                out.push((code, n));
            }
        }
        out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        Ok(out)
    }

    /// Clauses that widen `query` in a compounding language: each word also
    /// finds indexed compounds that hold it (the best-scoring one counts, so
    /// a word inside many compounds does not add up), and a compound word
    /// the pair of indexed words it is made of (both required), at
    /// [`COMPOUND_BOOST`].
    fn compound_clauses(
        &self,
        searcher: &Searcher,
        analysis: &Analysis,
        query: &str,
    ) -> Result<Vec<Clause>, CorpusError> {
        let field = self.fields.text_for(analysis);
        let mut tokenizer = self
            .index
            .tokenizer_for_field(field)
            .map_err(CorpusError::index)?;
        let mut stem = |word: &str| {
            let mut stream = tokenizer.token_stream(word);
            let mut out = None;
            while stream.advance() {
                out = Some(stream.token().text.clone());
            }
            out
        };
        let words: Vec<String> = query
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect();
        let stems: Vec<String> = words.iter().filter_map(|w| stem(w)).collect();
        let term = |t: &str| Term::from_field_text(field, t);
        let boosted = |q: Box<dyn Query>| -> Clause {
            (Occur::Should, Box::new(BoostQuery::new(q, COMPOUND_BOOST)))
        };
        let mut clauses = Vec::new();
        let mut finder = compound::CompoundFinder::new(&stems);
        if !finder.is_empty() {
            for segment in searcher.segment_readers() {
                let inverted = segment.inverted_index(field).map_err(CorpusError::index)?;
                let mut terms = inverted.terms().stream().map_err(CorpusError::index)?;
                while terms.advance() {
                    if let Ok(word) = std::str::from_utf8(terms.key()) {
                        finder.offer(word, u64::from(terms.value().doc_freq));
                    }
                }
            }
        }
        for (_, compounds) in finder.finish() {
            let each: Vec<Box<dyn Query>> = compounds
                .iter()
                .map(|w| -> Box<dyn Query> {
                    Box::new(TermQuery::new(term(w), IndexRecordOption::WithFreqs))
                })
                .collect();
            clauses.push(boosted(Box::new(DisjunctionMaxQuery::new(each))));
        }
        let frequency = |t: &str| searcher.doc_freq(&term(t)).unwrap_or(0);
        for word in &words {
            if let Some(parts) = compound::split_compound(word, &mut stem, frequency) {
                let both: Vec<Clause> = parts
                    .iter()
                    .map(|p| {
                        let q: Box<dyn Query> =
                            Box::new(TermQuery::new(term(p), IndexRecordOption::WithFreqs));
                        (Occur::Must, q)
                    })
                    .collect();
                clauses.push(boosted(Box::new(BooleanQuery::new(both))));
            }
        }
        Ok(clauses)
    }

    /// Number of indexed chunks in the last visible commit.
    pub fn num_chunks(&self) -> u64 {
        self.reader.searcher().num_docs()
    }
}

/// The text terms of `query` by field, each once, with its weight (how
/// rare it is among the index's chunks): what a hit's snippet shows.
fn weighted_terms(searcher: &Searcher, query: &dyn Query) -> HashMap<Field, Vec<(String, f32)>> {
    let docs = searcher.num_docs();
    let mut terms: HashMap<Field, Vec<(String, f32)>> = HashMap::new();
    query.query_terms(&mut |term, _| {
        let value = term.value();
        let Some(text) = value.as_str() else {
            return;
        };
        let list = terms.entry(term.field()).or_default();
        if !list.iter().any(|(t, _)| t == text) {
            let weight = snippet::weight(searcher.doc_freq(term).unwrap_or(0), docs);
            list.push((text.to_string(), weight));
        }
    });
    terms
}

/// The tokens of `text` (as `analyzer` cuts them) that are one of `terms`.
fn matched_terms(analyzer: &mut TextAnalyzer, text: &str, terms: &[(String, f32)]) -> Vec<Matched> {
    let mut out = Vec::new();
    if terms.is_empty() {
        return out;
    }
    let mut stream = analyzer.token_stream(text);
    while stream.advance() {
        let token = stream.token();
        if let Some(term) = terms.iter().position(|(t, _)| *t == token.text) {
            out.push(Matched {
                from: token.offset_from,
                to: token.offset_to,
                term,
            });
        }
    }
    out
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
        let f = &self.fields;
        self.writer
            .add_document(doc!(
                f.chunk_id => c.chunk_id,
                f.doc_id => c.doc_id,
                f.path => c.path,
                f.ordinal => c.ordinal as u64,
                f.body => c.text,
                f.lang => c.language,
                f.text_for(analysis_for(c.language)) => c.text,
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
