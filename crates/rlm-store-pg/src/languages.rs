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
use rlm_corpus::language::{LanguageShare, analysis_for};

use crate::db::Db;

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

/// True when the language of configuration `cfg` writes compounds as one
/// word (German, Dutch, the Scandinavian languages, Finnish, Hungarian),
/// as [`rlm_corpus::language::Analysis::compounds`] says.
pub(crate) fn compounds(cfg: &str) -> bool {
    CONFIGURATIONS
        .iter()
        .find(|(_, c)| *c == cfg)
        .is_some_and(|(code, _)| analysis_for(code).compounds)
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
        assert!(compounds("german") && compounds("dutch") && compounds("swedish"));
        assert!(!compounds("english") && !compounds("french") && !compounds("simple"));
    }
}
