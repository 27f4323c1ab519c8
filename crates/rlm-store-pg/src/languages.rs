//! The language of each document and the text search configuration its
//! chunks are analyzed with.
//!
//! A document's language is detected when it is indexed, by the detector
//! the folder store uses ([`rlm_corpus::language::detect`]), so both stores
//! agree; `rlm_documents.language` keeps its ISO 639-1 code (`und` when it
//! could not be told). Its chunks' `lang_cfg` is the PostgreSQL text search
//! configuration of that language (`german`), which the generated `tsv`
//! column analyzes the body with. A language PostgreSQL has no
//! configuration for, and undetermined text, is analyzed as `english`: what
//! every chunk got before languages were detected (an English store keeps
//! its ranking exactly, undetermined tables and code included) and what the
//! folder store does with them, so both stores search them alike.

use std::collections::HashSet;

use rlm_corpus::CorpusError;
use rlm_corpus::language::{LanguageShare, detect};

use crate::bm25;
use crate::db::{Db, Param};

/// The configuration of languages PostgreSQL has none for, and of text
/// whose language could not be told.
pub(crate) const FALLBACK: &str = "english";

/// PostgreSQL's text search configuration of each ISO 639-1 code (the
/// Snowball stemmers it ships; those added in later versions are used only
/// where the server has them, see [`Configurations`]).
const CONFIGURATIONS: [(&str, &str); 28] = [
    ("en", "english"),
    ("de", "german"),
    ("fr", "french"),
    ("es", "spanish"),
    ("it", "italian"),
    ("pt", "portuguese"),
    ("nl", "dutch"),
    ("sv", "swedish"),
    ("da", "danish"),
    ("no", "norwegian"),
    ("fi", "finnish"),
    ("hu", "hungarian"),
    ("ru", "russian"),
    ("ro", "romanian"),
    ("tr", "turkish"),
    ("ar", "arabic"),
    ("el", "greek"),
    ("ta", "tamil"),
    ("id", "indonesian"),
    ("lt", "lithuanian"),
    ("ne", "nepali"),
    ("sr", "serbian"),
    ("ga", "irish"),
    ("ca", "catalan"),
    ("hi", "hindi"),
    ("hy", "armenian"),
    ("yi", "yiddish"),
    ("eu", "basque"),
];

/// The configurations of [`CONFIGURATIONS`] this server has.
pub(crate) struct Configurations {
    available: HashSet<String>,
}

impl Configurations {
    /// The built-in configurations of the server at `db`.
    pub(crate) fn load(db: &Db) -> Result<Configurations, CorpusError> {
        let rows = db.query(
            "SELECT cfgname::text FROM pg_ts_config WHERE cfgnamespace = 'pg_catalog'::regnamespace",
            vec![],
        )?;
        Ok(Configurations {
            available: rows.iter().map(|r| r.get(0)).collect(),
        })
    }

    /// The configuration to analyze text in language `code` with.
    pub(crate) fn for_language(&self, code: &str) -> &'static str {
        CONFIGURATIONS
            .iter()
            .find(|(c, cfg)| *c == code && self.available.contains(*cfg))
            .map_or(FALLBACK, |(_, cfg)| cfg)
    }
}

/// The store's languages with their chunks, the most common first.
pub(crate) fn languages(db: &Db) -> Result<Vec<LanguageShare>, CorpusError> {
    let rows = db.query(
        "SELECT language, sum(chunk_count)::bigint FROM rlm_documents
         GROUP BY language HAVING sum(chunk_count) > 0 ORDER BY 2 DESC, 1",
        vec![],
    )?;
    Ok(rows
        .iter()
        .map(|r| LanguageShare::new(r.get(0), r.get::<_, i64>(1).max(0) as u64))
        .collect())
}

/// Documents read per round trip when detecting the stored ones' languages.
const DETECT_BATCH: i64 = 200;

/// Detects the language of every stored document that has none yet (a
/// store written before languages were detected) and re-analyzes the
/// chunks of those not in English with their language's configuration,
/// keeping the term statistics exact. Runs inside the migration's
/// transaction.
pub(crate) fn detect_stored(db: &Db) -> Result<(), CorpusError> {
    let configurations = Configurations::load(db)?;
    bm25::begin_counting(db)?;
    let mut after = String::new();
    loop {
        let rows = db.query(
            "SELECT d.id, coalesce(d.text,
                    (SELECT string_agg(c.body, '' ORDER BY c.ordinal) FROM rlm_chunks c
                     WHERE c.doc_id = d.id), '')
             FROM rlm_documents d WHERE d.id > $1 ORDER BY d.id LIMIT $2",
            vec![Box::new(after.clone()) as Param, Box::new(DETECT_BATCH)],
        )?;
        let Some(last) = rows.last() else { break };
        after = last.get(0);
        let (mut ids, mut codes) = (Vec::new(), Vec::new());
        let (mut moved, mut cfgs) = (Vec::new(), Vec::new());
        for r in &rows {
            let id: String = r.get(0);
            let code = detect(r.get::<_, &str>(1));
            let cfg = configurations.for_language(code);
            if cfg != FALLBACK {
                moved.push(id.clone());
                cfgs.push(cfg.to_string());
            }
            ids.push(id);
            codes.push(code.to_string());
        }
        db.execute(
            "UPDATE rlm_documents d SET language = t.code
             FROM unnest($1::text[], $2::text[]) AS t(id, code) WHERE d.id = t.id",
            vec![Box::new(ids) as Param, Box::new(codes)],
        )?;
        if !moved.is_empty() {
            bm25::count(db, &moved, -1)?;
            db.execute(
                "UPDATE rlm_chunks c SET lang_cfg = t.cfg::regconfig
                 FROM unnest($1::text[], $2::text[]) AS t(id, cfg) WHERE c.doc_id = t.id",
                vec![Box::new(moved.clone()) as Param, Box::new(cfgs)],
            )?;
            bm25::count(db, &moved, 1)?;
        }
    }
    bm25::finish_counting(db)?;
    db.batch("ALTER TABLE rlm_documents ALTER COLUMN language SET NOT NULL")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn languages_map_to_the_servers_configurations() {
        let configurations = Configurations {
            available: ["english", "german", "simple"]
                .into_iter()
                .map(String::from)
                .collect(),
        };
        assert_eq!(configurations.for_language("de"), "german");
        assert_eq!(configurations.for_language("en"), "english");
        // Known but missing on this server, unknown, undetermined: English.
        assert_eq!(configurations.for_language("fr"), FALLBACK);
        assert_eq!(configurations.for_language("pl"), FALLBACK);
        assert_eq!(configurations.for_language("und"), FALLBACK);
    }
}
