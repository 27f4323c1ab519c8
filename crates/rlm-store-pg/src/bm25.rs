//! BM25 over PostgreSQL's text search, and the term statistics it needs.
//!
//! PostgreSQL's `ts_rank` has no inverse document frequency, and it ranks
//! every chunk that holds any word of the question: at 29,083 chunks a
//! question of common words read and ranked all of them (163 ms). Here:
//!
//! - **Languages**: each chunk is analyzed with its document's text search
//!   configuration ([`crate::languages`]). A question is analyzed with every
//!   configuration in the store; a term is one lexeme of one configuration
//!   and counts only in chunks of that configuration (as each language has
//!   its own field in the folder store's index). A store of one
//!   configuration (an English one) is scored exactly as before languages.
//! - **Compounds**: in a configuration whose language compounds, the
//!   question also gets the folder store's compound terms
//!   ([`crate::compounds`]): the best of the lexemes holding a word, and
//!   the two parts of a compound word when a chunk holds both, each at
//!   [`COMPOUND_BOOST`]. Each term has a tsquery condition and a bound
//!   like a word's, so the candidates below stay exact.
//! - **Statistics**: `rlm_lexemes` holds, per configuration and lexeme, how
//!   many chunks hold it; `rlm_configurations` the number of chunks of each
//!   configuration and the sum of their lengths (BM25 sees each
//!   configuration's chunks as a collection of their own, as tantivy sees
//!   each language's field: a German question's words analyzed as English
//!   are rare among a few English chunks only if they are); `rlm_meta` the
//!   same totals over all chunks (`chunks`, `chunk_lexemes`). An indexing
//!   run keeps them exact in its own transaction: the lexemes of the chunks
//!   it deletes and inserts are counted into temporary tables, merged once
//!   before the commit.
//! - **Score**: BM25 (k1 = 1.2, b = 0.75, tantivy's defaults) with
//!   idf = ln(1 + (N − df + 0.5) / (df + 0.5)), tf = the lexeme's positions
//!   in the chunk (`ts_rank_cd` of the single lexeme with weight 1 counts
//!   them; PostgreSQL keeps at most 255 per lexeme) and the chunk's length
//!   = its number of distinct lexemes (`length(tsv)`; tantivy counts tokens).
//! - **Candidates**: a term contributes at most idf · (k1 + 1), so a chunk
//!   can reach a score only if the bounds of the terms it holds add up to
//!   it (MaxScore). The first pass scores the chunks holding the rarest
//!   terms, as many of them as hold together at most
//!   [`Budget::first_pass`] chunks (when even the rarest is more common:
//!   that many chunks holding all the terms); the k-th score found is a
//!   floor for the true top k. When the terms left out could not reach it
//!   together, the first pass is already exact. Otherwise the second pass
//!   scores the chunks whose terms' bounds reach the floor — a boolean
//!   tsquery the GIN index answers — up to [`Budget::max_candidates`]
//!   chunks. Only a question whose words are all common (its candidates
//!   exceed that cap) gets an approximate top k: the best of the first
//!   chunks found. [`Ranked::exact`] says which.

use rlm_corpus::CorpusError;
use rlm_corpus::compound::COMPOUND_BOOST;

use crate::compounds::{self, Widening};
use crate::db::{Db, Param};
use crate::languages;

/// BM25's term-frequency saturation (tantivy's default).
const K1: f64 = 1.2;
/// BM25's length normalization (tantivy's default).
const B: f64 = 0.75;
/// Most nodes of the second pass's boolean query; past it, the plainer
/// MaxScore condition (any of the terms that must be present) is used.
const MAX_QUERY_NODES: usize = 256;

/// How many chunks a search may score.
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    /// Chunks the first pass may score (those holding the rarest terms).
    pub first_pass: u64,
    /// Chunks the second pass may score; past it the ranking is approximate.
    pub max_candidates: u64,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            first_pass: 2_000,
            max_candidates: 10_000,
        }
    }
}

impl Budget {
    /// No limit: every chunk holding any term is scored (for measuring how
    /// far the bounded search is from the exhaustive one).
    pub const EXHAUSTIVE: Budget = Budget {
        first_pass: u64::MAX / 4,
        max_candidates: u64::MAX / 4,
    };
}

/// The top chunks of a search, best first.
#[derive(Debug, Clone)]
pub struct Ranked {
    /// Chunk ids with their BM25 scores, best first (ties by id).
    pub hits: Vec<(String, f64)>,
    /// The OR of the question's lexemes as tsquery text (for snippets).
    pub any_term: String,
    /// True when these are exactly the top k of BM25 over all chunks.
    pub exact: bool,
    /// Chunks scored, both passes together.
    pub scored: u64,
}

/// One lexeme of one text search configuration, scored by BM25 in the
/// chunks analyzed with that configuration.
#[derive(Debug, Clone)]
struct Atom {
    /// The configuration (`german`).
    cfg: String,
    /// The lexeme as tsquery text (quoted, escaped).
    literal: String,
    idf: f64,
    /// The average length of the configuration's chunks.
    avgdl: f64,
}

/// What a term of the question scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Its one lexeme's BM25.
    Word,
    /// The best of its lexemes (the compounds holding a query word), at
    /// [`COMPOUND_BOOST`].
    Compounds,
    /// Its two lexemes together (the parts of a compound query word), only
    /// when a chunk holds both, at [`COMPOUND_BOOST`].
    Parts,
}

/// One term of the question: a lexeme in one configuration, or a
/// compound widening of it ([`crate::compounds`]).
#[derive(Debug, Clone)]
struct Term {
    kind: Kind,
    atoms: Vec<Atom>,
    /// What a chunk must match to score from it, as tsquery text.
    literal: String,
    /// Chunks that may match it, at most.
    df: u64,
    /// Its most a chunk can get from it (a word: idf · (k1 + 1)).
    bound: f64,
}

impl Term {
    /// The term of a lexeme of collection `c` that `df` of its chunks hold.
    fn word(c: &Collection, lexeme: &str, df: u64) -> Term {
        let idf = idf(c.n, df);
        let literal = literal(lexeme);
        Term {
            kind: Kind::Word,
            atoms: vec![Atom {
                cfg: c.cfg.clone(),
                literal: literal.clone(),
                idf,
                avgdl: c.avgdl,
            }],
            literal,
            df,
            bound: idf * (K1 + 1.0),
        }
    }

    /// The term of a widening in collection `c`.
    fn widening(c: &Collection, widening: Widening) -> Term {
        let (kind, lexemes, op) = match widening {
            Widening::Compounds(lexemes) => (Kind::Compounds, lexemes, " | "),
            Widening::Parts(parts) => (Kind::Parts, parts.to_vec(), " & "),
        };
        let atoms: Vec<Atom> = lexemes
            .iter()
            .map(|(l, df)| Atom {
                cfg: c.cfg.clone(),
                literal: literal(l),
                idf: idf(c.n, *df),
                avgdl: c.avgdl,
            })
            .collect();
        let dfs = lexemes.iter().map(|(_, df)| *df);
        let (df, bound) = if kind == Kind::Compounds {
            let best = atoms.iter().map(|a| a.idf).fold(0.0, f64::max);
            (dfs.sum(), best)
        } else {
            (dfs.min().unwrap_or(0), atoms.iter().map(|a| a.idf).sum())
        };
        let literals: Vec<&str> = atoms.iter().map(|a| a.literal.as_str()).collect();
        Term {
            kind,
            literal: format!("({})", literals.join(op)),
            atoms,
            df,
            bound: f64::from(COMPOUND_BOOST) * bound * (K1 + 1.0),
        }
    }
}

/// BM25's inverse document frequency of a lexeme `df` of `n` chunks hold.
fn idf(n: f64, df: u64) -> f64 {
    let df = df as f64;
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// The `k` best chunks for `question` by BM25 within `budget`.
pub(crate) fn rank(
    db: &Db,
    question: &str,
    k: usize,
    budget: Budget,
) -> Result<Ranked, CorpusError> {
    let k = k.max(1);
    let Question { terms, gated } = question_of(db, question)?;
    let any_term = any_lexeme(&terms);
    if terms.is_empty() {
        return Ok(Ranked {
            hits: Vec::new(),
            any_term,
            exact: true,
            scored: 0,
        });
    }
    // Rarest first: the prefix whose chunks fit the first pass.
    let mut prefix = 0;
    let mut held = 0u64;
    while prefix < terms.len() && held.saturating_add(terms[prefix].df) <= budget.first_pass {
        held += terms[prefix].df;
        prefix += 1;
    }
    let first = if prefix > 0 {
        score(db, &terms, gated, &or(&terms[..prefix]), None, k)?
    } else {
        score(db, &terms, gated, &and(&terms), Some(budget.first_pass), k)?
    };
    if prefix == terms.len() {
        return Ok(Ranked {
            hits: first.hits,
            any_term,
            exact: true,
            scored: first.candidates,
        });
    }
    let floor = if first.hits.len() >= k {
        first.hits[k - 1].1
    } else {
        0.0
    };
    // A little under the floor, so rounding never drops a tie.
    let need = floor * (1.0 - 1e-9);
    let rest: f64 = terms[prefix..].iter().map(|t| t.bound).sum();
    if prefix > 0 && floor > 0.0 && rest < need {
        return Ok(Ranked {
            hits: first.hits,
            any_term,
            exact: true,
            scored: first.candidates,
        });
    }
    let condition = reaching(&terms, need).unwrap_or_else(|| any_term.clone());
    let second = score(
        db,
        &terms,
        gated,
        &condition,
        Some(budget.max_candidates),
        k,
    )?;
    let exact = second.candidates < budget.max_candidates;
    // Both passes' scores are exact: the best of both is never worse than
    // the first pass alone (which matters when the second was cut short).
    let mut hits = first.hits;
    for hit in second.hits {
        if !hits.iter().any(|(id, _)| *id == hit.0) {
            hits.push(hit);
        }
    }
    hits.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    hits.truncate(k);
    Ok(Ranked {
        hits,
        any_term,
        exact,
        scored: first.candidates + second.candidates,
    })
}

/// A question analyzed for the store's configurations.
struct Question {
    /// Its distinct lexemes that some chunk holds, rarest first.
    terms: Vec<Term>,
    /// True when the store holds chunks of several configurations: a term
    /// then counts only in chunks of its own.
    gated: bool,
}

/// The statistics of one configuration's chunks: BM25 sees each
/// configuration's chunks as a collection of their own (as tantivy sees
/// each language's field), so a term's rarity is measured among the chunks
/// it can occur in.
struct Collection {
    cfg: String,
    /// Its chunks.
    n: f64,
    /// Their average length.
    avgdl: f64,
}

/// The text search configurations of the store's chunks, with their
/// statistics (`rlm_configurations`, kept by every index run).
fn collections(db: &Db) -> Result<Vec<Collection>, CorpusError> {
    let rows = db.query(
        "SELECT cfg::text, chunks, chunk_lexemes FROM rlm_configurations WHERE chunks > 0",
        vec![],
    )?;
    Ok(rows
        .iter()
        .map(|r| {
            let n = r.get::<_, i64>(1).max(1) as f64;
            let lexemes = r.get::<_, i64>(2) as f64;
            Collection {
                cfg: r.get(0),
                n,
                avgdl: (lexemes / n).max(1.0),
            }
        })
        .collect())
}

/// The question's lexemes in each configuration of the store that some
/// chunk of it holds, with their statistics, and in configurations whose
/// language compounds its widenings; rarest first.
fn question_of(db: &Db, question: &str) -> Result<Question, CorpusError> {
    let collections = collections(db)?;
    let names: Vec<String> = collections.iter().map(|c| c.cfg.clone()).collect();
    let rows = db.query(
        "SELECT k.cfg, q.l, x.chunks
         FROM unnest($2::text[]) AS k(cfg)
         CROSS JOIN LATERAL unnest(tsvector_to_array(to_tsvector(k.cfg::regconfig, $1))) AS q(l)
         JOIN rlm_lexemes x ON x.cfg = k.cfg::regconfig AND x.lexeme = q.l
         WHERE x.chunks > 0
         ORDER BY x.chunks, q.l, k.cfg",
        vec![Box::new(question.to_string()), Box::new(names)],
    )?;
    let collection = |cfg: &str| collections.iter().find(|c| c.cfg == cfg);
    let mut terms: Vec<Term> = rows
        .iter()
        .filter_map(|r| {
            let df = r.get::<_, i64>(2).max(0) as u64;
            Some(Term::word(collection(r.get(0))?, r.get(1), df))
        })
        .collect();
    for c in collections.iter().filter(|c| languages::compounds(&c.cfg)) {
        for widening in compounds::widen(db, &c.cfg, question)? {
            terms.push(Term::widening(c, widening));
        }
    }
    // Stable: the words keep their order (the database's), as before.
    terms.sort_by_key(|t| t.df);
    Ok(Question {
        terms,
        gated: collections.len() > 1,
    })
}

/// A lexeme as tsquery text: quoted, so operators and spaces in it are
/// characters, never syntax (quotes doubled, backslashes escaped).
fn literal(lexeme: &str) -> String {
    format!("'{}'", lexeme.replace('\\', "\\\\").replace('\'', "''"))
}

fn or(terms: &[Term]) -> String {
    join(terms, " | ")
}

fn and(terms: &[Term]) -> String {
    join(terms, " & ")
}

/// The terms' conditions joined by `op`, each once (the same lexeme may be
/// a term of two configurations).
fn join(terms: &[Term], op: &str) -> String {
    let mut literals: Vec<&str> = Vec::with_capacity(terms.len());
    for t in terms {
        if !literals.contains(&t.literal.as_str()) {
            literals.push(&t.literal);
        }
    }
    literals.join(op)
}

/// The OR of every lexeme of the terms, each once (for snippets).
fn any_lexeme(terms: &[Term]) -> String {
    let mut literals: Vec<&str> = Vec::with_capacity(terms.len());
    for a in terms.iter().flat_map(|t| &t.atoms) {
        if !literals.contains(&a.literal.as_str()) {
            literals.push(&a.literal);
        }
    }
    literals.join(" | ")
}

/// A boolean query true of the chunks whose terms' bounds add up to at
/// least `need`; `None` when it would be too large (then the caller ORs all
/// terms, a weaker but still complete condition).
fn reaching(terms: &[Term], need: f64) -> Option<String> {
    if need <= 0.0 {
        return None;
    }
    // suffix[i]: the most the terms from i on can add.
    let mut suffix = vec![0.0; terms.len() + 1];
    for i in (0..terms.len()).rev() {
        suffix[i] = suffix[i + 1] + terms[i].bound;
    }
    let mut nodes = 0;
    match reach(terms, &suffix, 0, need, &mut nodes)? {
        Node::True => None,
        // No chunk can reach the floor: only the first pass's can.
        Node::False => Some(and(terms)),
        Node::Query(q) => Some(q),
    }
}

enum Node {
    True,
    False,
    Query(String),
}

/// Terms `i..` holding at least `need` of bounds: (term i and the rest
/// holding need − its bound) or (the rest holding need).
fn reach(terms: &[Term], suffix: &[f64], i: usize, need: f64, nodes: &mut usize) -> Option<Node> {
    if need <= 0.0 {
        return Some(Node::True);
    }
    if suffix[i] < need {
        return Some(Node::False);
    }
    *nodes += 1;
    if *nodes > MAX_QUERY_NODES {
        return None;
    }
    let t = &terms[i].literal;
    let with = match reach(terms, suffix, i + 1, need - terms[i].bound, nodes)? {
        Node::True => Some(t.clone()),
        Node::False => None,
        Node::Query(q) => Some(format!("{t} & ({q})")),
    };
    let without = match reach(terms, suffix, i + 1, need, nodes)? {
        Node::True => return Some(Node::True),
        Node::False => None,
        Node::Query(q) => Some(q),
    };
    Some(match (with, without) {
        (None, None) => Node::False,
        (Some(q), None) | (None, Some(q)) => Node::Query(q),
        (Some(a), Some(b)) => Node::Query(format!("({a}) | ({b})")),
    })
}

/// One scoring pass.
struct Pass {
    hits: Vec<(String, f64)>,
    candidates: u64,
}

/// Scores the chunks matching `condition` (at most `limit` of them, the
/// first the index finds) with BM25 over all `terms`; the `k` best that
/// score at all (a chunk may hold a lexeme only of another configuration
/// than the term's). `gated`: [`Question::gated`].
fn score(
    db: &Db,
    terms: &[Term],
    gated: bool,
    condition: &str,
    limit: Option<u64>,
    k: usize,
) -> Result<Pass, CorpusError> {
    // Parameters: $1 condition, $2 k, then each lexeme's tsquery, idf and
    // average length (and configuration, when gated). `ts_rank_cd` of one
    // lexeme with weight 1 is the number of its positions in the chunk.
    let mut params: Vec<Param> = vec![
        Box::new(condition.to_string()),
        Box::new(i64::try_from(k).unwrap_or(i64::MAX)),
    ];
    let (tfs, sum) = expressions(terms, gated, &mut params);
    // OFFSET 0 keeps the inner query a query of its own, so each term's
    // count is computed once per chunk (inlined, the outer formula's two
    // uses of it would compute it twice).
    let limit = match limit {
        Some(l) => format!("LIMIT {} OFFSET 0", i64::try_from(l).unwrap_or(i64::MAX)),
        None => "OFFSET 0".to_string(),
    };
    let sql = format!(
        "SELECT id, score, count(*) OVER () FROM (
            SELECT x.id, {score} AS score FROM (
                SELECT c.id, length(c.tsv)::float8 AS dl{tfs}
                FROM rlm_chunks c WHERE c.tsv @@ $1::text::tsquery {limit}
            ) x
         ) s ORDER BY score DESC, id LIMIT $2",
        score = sum.join(" + ")
    );
    let rows = db.query(sql, params)?;
    let candidates = rows.first().map_or(0, |r| r.get::<_, i64>(2).max(0) as u64);
    Ok(Pass {
        hits: rows
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .filter(|(_, score): &(String, f64)| *score > 0.0)
            .collect(),
        candidates,
    })
}

/// The SQL of a pass's scores: each distinct lexeme's count in the chunk
/// (`tN`, a column of the inner query: `, … AS t0, … AS t1`) and each
/// term's BM25 from them (to be added up); their parameters go to `params`.
fn expressions(terms: &[Term], gated: bool, params: &mut Vec<Param>) -> (String, Vec<String>) {
    let mut tfs = String::new();
    // Per distinct (configuration, lexeme): its column and idf parameter.
    let mut columns: Vec<(&Atom, usize)> = Vec::new();
    for a in terms.iter().flat_map(|t| &t.atoms) {
        if columns
            .iter()
            .any(|(b, _)| b.cfg == a.cfg && b.literal == a.literal)
        {
            continue;
        }
        let i = columns.len();
        let q = params.len() + 1;
        params.push(Box::new(a.literal.clone()));
        params.push(Box::new(a.idf));
        params.push(Box::new(a.avgdl));
        let tf =
            format!("ts_rank_cd('{{1,1,1,1}}'::float4[], c.tsv, ${q}::text::tsquery, 0)::float8");
        if gated {
            params.push(Box::new(a.cfg.clone()));
            let cfg = q + 3;
            tfs.push_str(&format!(
                ", CASE WHEN c.lang_cfg = ${cfg}::text::regconfig THEN {tf} ELSE 0 END AS t{i}"
            ));
        } else {
            tfs.push_str(&format!(", {tf} AS t{i}"));
        }
        columns.push((a, q + 1));
    }
    let column = |a: &Atom| {
        columns
            .iter()
            .position(|(b, _)| b.cfg == a.cfg && b.literal == a.literal)
            .map(|i| (i, columns[i].1))
            .unwrap_or_default()
    };
    let bm25 = |a: &Atom| {
        let (i, idf) = column(a);
        let avgdl = idf + 1;
        format!(
            "${idf}::float8 * x.t{i} * {k1p} / (x.t{i} + {K1} * ({nb} + {B} * x.dl / ${avgdl}::float8))",
            k1p = K1 + 1.0,
            nb = 1.0 - B,
        )
    };
    let boost = f64::from(COMPOUND_BOOST);
    let sum = terms
        .iter()
        .map(|t| match t.kind {
            Kind::Word => bm25(&t.atoms[0]),
            Kind::Compounds => {
                let each: Vec<String> = t.atoms.iter().map(bm25).collect();
                format!("{boost} * GREATEST({})", each.join(", "))
            }
            Kind::Parts => {
                let held: Vec<String> = t
                    .atoms
                    .iter()
                    .map(|a| format!("x.t{} > 0", column(a).0))
                    .collect();
                let each: Vec<String> = t.atoms.iter().map(bm25).collect();
                format!(
                    "{boost} * CASE WHEN {} THEN {} ELSE 0 END",
                    held.join(" AND "),
                    each.join(" + ")
                )
            }
        })
        .collect();
    (tfs, sum)
}

/// Starts counting an indexing run's lexemes (in its transaction).
pub(crate) fn begin_counting(db: &Db) -> Result<(), CorpusError> {
    db.batch(
        "CREATE TEMP TABLE rlm_lexeme_delta (cfg regconfig NOT NULL, lexeme text NOT NULL, chunks bigint NOT NULL) ON COMMIT DROP;
         CREATE TEMP TABLE rlm_chunk_delta (cfg regconfig NOT NULL, chunks bigint NOT NULL, chunk_lexemes bigint NOT NULL) ON COMMIT DROP",
    )
}

/// Counts the lexemes of the documents `doc_ids`' chunks as added
/// (`sign` 1, after inserting them) or removed (−1, before deleting them).
pub(crate) fn count(db: &Db, doc_ids: &[String], sign: i64) -> Result<(), CorpusError> {
    if doc_ids.is_empty() {
        return Ok(());
    }
    db.execute(
        "INSERT INTO rlm_lexeme_delta (cfg, lexeme, chunks)
         SELECT c.lang_cfg, l, $2 * count(*) FROM rlm_chunks c, unnest(tsvector_to_array(c.tsv)) AS l
         WHERE c.doc_id = ANY($1) GROUP BY c.lang_cfg, l",
        vec![Box::new(doc_ids.to_vec()) as Param, Box::new(sign)],
    )?;
    db.execute(
        "INSERT INTO rlm_chunk_delta (cfg, chunks, chunk_lexemes)
         SELECT c.lang_cfg, $2 * count(*), $2 * sum(length(c.tsv)) FROM rlm_chunks c
         WHERE c.doc_id = ANY($1) GROUP BY c.lang_cfg",
        vec![Box::new(doc_ids.to_vec()) as Param, Box::new(sign)],
    )?;
    Ok(())
}

/// Merges the run's counts into `rlm_lexemes`, `rlm_configurations` and
/// `rlm_meta` (before its commit). The lengths' sum moves by the counts' sum (a chunk's length is
/// its number of distinct lexemes, each counted once for it); the number
/// of chunks is read from the documents.
pub(crate) fn finish_counting(db: &Db) -> Result<(), CorpusError> {
    db.batch(
        "UPDATE rlm_meta SET value = (value::bigint
            + (SELECT coalesce(sum(chunks), 0) FROM rlm_lexeme_delta))::text
         WHERE key = 'chunk_lexemes';
         UPDATE rlm_meta SET value = (SELECT coalesce(sum(chunk_count), 0) FROM rlm_documents)::text
         WHERE key = 'chunks';
         INSERT INTO rlm_lexemes AS x (cfg, lexeme, chunks)
            SELECT cfg, lexeme, sum(chunks) FROM rlm_lexeme_delta
            GROUP BY cfg, lexeme HAVING sum(chunks) <> 0
            ON CONFLICT (cfg, lexeme) DO UPDATE SET chunks = x.chunks + EXCLUDED.chunks;
         DELETE FROM rlm_lexemes WHERE chunks <= 0 AND (cfg, lexeme) IN
            (SELECT cfg, lexeme FROM rlm_lexeme_delta GROUP BY cfg, lexeme HAVING sum(chunks) < 0);
         INSERT INTO rlm_configurations AS x (cfg, chunks, chunk_lexemes)
            SELECT cfg, sum(chunks), sum(chunk_lexemes) FROM rlm_chunk_delta GROUP BY cfg
            ON CONFLICT (cfg) DO UPDATE SET chunks = x.chunks + EXCLUDED.chunks,
                chunk_lexemes = x.chunk_lexemes + EXCLUDED.chunk_lexemes;
         DELETE FROM rlm_configurations WHERE chunks <= 0;
         DROP TABLE rlm_lexeme_delta, rlm_chunk_delta",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn term(name: &str, bound: f64) -> Term {
        let english = Collection {
            cfg: "english".to_string(),
            n: 1.0,
            avgdl: 1.0,
        };
        let mut t = Term::word(&english, name, 0);
        t.bound = bound;
        t
    }

    #[test]
    fn lexemes_are_quoted_as_characters() {
        assert_eq!(literal("it's"), "'it''s'");
        assert_eq!(literal("a\\b"), "'a\\\\b'");
        assert_eq!(literal("x | y"), "'x | y'");
    }

    #[test]
    fn the_second_pass_keeps_only_term_sets_that_can_reach_the_floor() {
        let terms = [term("r", 5.0), term("m", 3.0), term("c", 1.0)];
        // 5.5: r and (m or c), or nothing else.
        assert_eq!(
            reaching(&terms, 5.5).as_deref(),
            Some("'r' & (('m') | ('c'))")
        );
        // 3.5: r alone, or m and c.
        assert_eq!(
            reaching(&terms, 3.5).as_deref(),
            Some("('r') | ('m' & ('c'))")
        );
        // Nothing to reach: no condition beyond holding a term.
        assert_eq!(reaching(&terms, 0.0), None);
        // Out of reach for any chunk.
        assert_eq!(reaching(&terms, 10.0).as_deref(), Some("'r' & 'm' & 'c'"));
    }
}
