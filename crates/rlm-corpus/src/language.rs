//! The language of a document, detected at index time, and how the
//! full-text index analyzes each language (stemmer, stop words, compounds).
//!
//! Every document's chunks go into the full-text field of its language,
//! analyzed by that language's stemmer; a query is analyzed once for each
//! language present in the store. Languages without a stemmer here, and
//! text too short or too mixed to tell, are analyzed as English: what every
//! store got before languages were detected.

use tantivy::tokenizer::Language as Stemming;

/// One language of a store: how many of its chunks are in it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LanguageShare {
    /// ISO 639-1 code, or `und` for text whose language could not be told.
    pub code: String,
    /// English name (`German`; `undetermined` for `und`).
    pub name: String,
    /// Chunks of documents in this language.
    pub chunks: u64,
}

impl LanguageShare {
    /// The share of `code` with `chunks` chunks.
    pub fn new(code: &str, chunks: u64) -> LanguageShare {
        let name = if code == UNDETERMINED {
            "undetermined".to_string()
        } else {
            language_name(code).to_string()
        };
        LanguageShare {
            code: code.to_string(),
            name,
            chunks,
        }
    }
}

/// "German (120 chunks), English (4 chunks)": a store's languages in one line.
pub fn describe(shares: &[LanguageShare]) -> String {
    shares
        .iter()
        .map(|s| {
            let unit = if s.chunks == 1 { "chunk" } else { "chunks" };
            format!("{} ({} {unit})", s.name, s.chunks)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// How the full-text index analyzes one language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Analysis {
    /// ISO 639-1 code (`"de"`).
    pub code: &'static str,
    /// English name (`"German"`).
    pub name: &'static str,
    /// The full-text field holding this language's chunks.
    pub field: &'static str,
    /// The tokenizer registered for the field.
    pub analyzer: &'static str,
    /// Its Snowball stemmer.
    pub stemming: Stemming,
    /// True where words are freely compounded (`Kündigungsfrist`): a query
    /// word then also finds compounds that hold it, and a compound query
    /// word the parts it is made of.
    pub compounds: bool,
}

const fn analysis(
    code: &'static str,
    name: &'static str,
    field: &'static str,
    analyzer: &'static str,
    stemming: Stemming,
    compounds: bool,
) -> Analysis {
    Analysis {
        code,
        name,
        field,
        analyzer,
        stemming,
        compounds,
    }
}

/// English: the field and analyzer every store used before languages were
/// detected (so an English store searches exactly as it did).
pub const ENGLISH: Analysis = analysis(
    "en",
    "English",
    "text",
    "en_stem_stop",
    Stemming::English,
    false,
);

/// Every language the full-text index analyzes on its own (the Snowball
/// stemmers tantivy ships), English first.
pub const ANALYSES: [Analysis; 18] = [
    ENGLISH,
    analysis(
        "de",
        "German",
        "text_de",
        "de_stem_stop",
        Stemming::German,
        true,
    ),
    analysis(
        "fr",
        "French",
        "text_fr",
        "fr_stem_stop",
        Stemming::French,
        false,
    ),
    analysis(
        "es",
        "Spanish",
        "text_es",
        "es_stem_stop",
        Stemming::Spanish,
        false,
    ),
    analysis(
        "it",
        "Italian",
        "text_it",
        "it_stem_stop",
        Stemming::Italian,
        false,
    ),
    analysis(
        "pt",
        "Portuguese",
        "text_pt",
        "pt_stem_stop",
        Stemming::Portuguese,
        false,
    ),
    analysis(
        "nl",
        "Dutch",
        "text_nl",
        "nl_stem_stop",
        Stemming::Dutch,
        true,
    ),
    analysis(
        "sv",
        "Swedish",
        "text_sv",
        "sv_stem_stop",
        Stemming::Swedish,
        true,
    ),
    analysis(
        "da",
        "Danish",
        "text_da",
        "da_stem_stop",
        Stemming::Danish,
        true,
    ),
    analysis(
        "no",
        "Norwegian",
        "text_no",
        "no_stem_stop",
        Stemming::Norwegian,
        true,
    ),
    analysis(
        "fi",
        "Finnish",
        "text_fi",
        "fi_stem_stop",
        Stemming::Finnish,
        true,
    ),
    analysis(
        "hu",
        "Hungarian",
        "text_hu",
        "hu_stem_stop",
        Stemming::Hungarian,
        true,
    ),
    analysis(
        "ru",
        "Russian",
        "text_ru",
        "ru_stem_stop",
        Stemming::Russian,
        false,
    ),
    analysis(
        "ro",
        "Romanian",
        "text_ro",
        "ro_stem",
        Stemming::Romanian,
        false,
    ),
    analysis(
        "tr",
        "Turkish",
        "text_tr",
        "tr_stem",
        Stemming::Turkish,
        false,
    ),
    analysis(
        "ar",
        "Arabic",
        "text_ar",
        "ar_stem",
        Stemming::Arabic,
        false,
    ),
    analysis("el", "Greek", "text_el", "el_stem", Stemming::Greek, false),
    analysis("ta", "Tamil", "text_ta", "ta_stem", Stemming::Tamil, false),
];

/// The analysis for a language code; English for a language without its
/// own (or an unknown code).
pub fn analysis_for(code: &str) -> &'static Analysis {
    ANALYSES.iter().find(|a| a.code == code).unwrap_or(&ENGLISH)
}

/// The English name of a language code (`"de"` → `"German"`), the code
/// itself for a language without a name here.
pub fn language_name(code: &str) -> &str {
    ANALYSES
        .iter()
        .find(|a| a.code == code)
        .map(|a| a.name)
        .or_else(|| {
            whatlang::Lang::all()
                .iter()
                .find(|l| iso_639_1(**l) == Some(code))
                .map(|l| l.eng_name())
        })
        .unwrap_or(code)
}

/// Characters sampled for detection: three windows (start, middle, end) of
/// this many bytes each. Detection costs time in proportion to the text,
/// and a long document's language shows in a few thousand characters.
const SAMPLE_BYTES: usize = 1_500;

/// Letters a text needs before its language is trusted.
const MIN_LETTERS: usize = 40;

/// The language code of `text` (`"de"`), or `"und"` (undetermined) when
/// it is too short, not words, or too mixed to tell reliably.
pub fn detect(text: &str) -> &'static str {
    let sample = sample(text);
    if sample.chars().filter(|c| c.is_alphabetic()).count() < MIN_LETTERS {
        return UNDETERMINED;
    }
    match whatlang::detect(&sample) {
        Some(info) if info.is_reliable() => iso_639_1(info.lang()).unwrap_or(UNDETERMINED),
        _ => UNDETERMINED,
    }
}

/// The language code of a short `text` (a claim, a question, an answer),
/// where [`detect`]'s trigram statistics are unsure: the detector's answer
/// when it is reliable, else the language whose stop words the text holds
/// most (at least two, more than any other language's), else `"und"`.
/// Function words tell a short sentence's language better than letter
/// trigrams ("Welche Option von ls zeigt versteckte Dateien an?" reads as
/// Dutch by trigrams, as German by its stop words).
pub fn guess(text: &str) -> &'static str {
    if text.chars().filter(|c| c.is_alphabetic()).count() < 8 {
        return UNDETERMINED;
    }
    if let Some(info) = whatlang::detect(text)
        && info.is_reliable()
        && let Some(code) = iso_639_1(info.lang())
    {
        return code;
    }
    let words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .take(STOP_VOTE_WORDS)
        .map(str::to_lowercase)
        .collect();
    let mut votes: Vec<(usize, &'static str)> = ANALYSES
        .iter()
        .map(|a| {
            (
                words.iter().filter(|w| is_stop_word(w, a.code)).count(),
                a.code,
            )
        })
        .collect();
    votes.sort_by_key(|v| std::cmp::Reverse(v.0));
    match votes.as_slice() {
        [(first, code), (second, _), ..] if *first >= 2 && first > second => code,
        _ => UNDETERMINED,
    }
}

/// Words of a short text that vote for its language by their stop words.
const STOP_VOTE_WORDS: usize = 80;

/// True when `word` (lower-cased) is a stop word of language `code`, by the
/// list its full-text analyzer drops (false for a language without one).
pub fn is_stop_word(word: &str, code: &str) -> bool {
    use std::sync::{Mutex, OnceLock};
    use tantivy::tokenizer::{SimpleTokenizer, StopWordFilter, TextAnalyzer};
    static FILTERS: OnceLock<Vec<(&'static str, Mutex<TextAnalyzer>)>> = OnceLock::new();
    let filters = FILTERS.get_or_init(|| {
        ANALYSES
            .iter()
            .filter_map(|a| {
                let stop = StopWordFilter::new(a.stemming)?;
                let analyzer = TextAnalyzer::builder(SimpleTokenizer::default())
                    .filter(stop)
                    .build();
                Some((a.code, Mutex::new(analyzer)))
            })
            .collect()
    });
    let Some((_, analyzer)) = filters.iter().find(|(c, _)| *c == code) else {
        return false;
    };
    let mut analyzer = analyzer.lock().unwrap_or_else(|p| p.into_inner());
    let mut stream = analyzer.token_stream(word);
    !stream.advance()
}

/// The code of a text whose language could not be told.
pub const UNDETERMINED: &str = "und";

/// Start, middle and end of a long text (each cut at a character boundary).
fn sample(text: &str) -> std::borrow::Cow<'_, str> {
    if text.len() <= 3 * SAMPLE_BYTES {
        return std::borrow::Cow::Borrowed(text);
    }
    let window = |from: usize| {
        let start = (from..text.len())
            .find(|i| text.is_char_boundary(*i))
            .unwrap_or(text.len());
        let end = (start + SAMPLE_BYTES..text.len())
            .find(|i| text.is_char_boundary(*i))
            .unwrap_or(text.len());
        &text[start..end]
    };
    let middle = text.len() / 2 - SAMPLE_BYTES / 2;
    std::borrow::Cow::Owned(
        [window(0), window(middle), window(text.len() - SAMPLE_BYTES)].join("\n"),
    )
}

/// ISO 639-1 codes of the languages the detector knows that have one.
fn iso_639_1(lang: whatlang::Lang) -> Option<&'static str> {
    use whatlang::Lang::*;
    Some(match lang {
        Eng => "en",
        Deu => "de",
        Fra => "fr",
        Spa => "es",
        Ita => "it",
        Por => "pt",
        Nld => "nl",
        Swe => "sv",
        Dan => "da",
        Nob => "no",
        Fin => "fi",
        Hun => "hu",
        Rus => "ru",
        Ron => "ro",
        Tur => "tr",
        Ara => "ar",
        Ell => "el",
        Tam => "ta",
        Pol => "pl",
        Ces => "cs",
        Slk => "sk",
        Slv => "sl",
        Hrv => "hr",
        Srp => "sr",
        Bul => "bg",
        Ukr => "uk",
        Bel => "be",
        Lit => "lt",
        Lav => "lv",
        Est => "et",
        Cmn => "zh",
        Jpn => "ja",
        Kor => "ko",
        Heb => "he",
        Hin => "hi",
        Ben => "bn",
        Pes => "fa",
        Urd => "ur",
        Vie => "vi",
        Tha => "th",
        Ind => "id",
        Cat => "ca",
        Epo => "eo",
        Lat => "la",
        Afr => "af",
        Aka => "ak",
        Amh => "am",
        Aze => "az",
        Guj => "gu",
        Jav => "jv",
        Kan => "kn",
        Kat => "ka",
        Khm => "km",
        Mal => "ml",
        Mar => "mr",
        Mkd => "mk",
        Mya => "my",
        Nep => "ne",
        Ori => "or",
        Pan => "pa",
        Sin => "si",
        Sna => "sn",
        Tel => "te",
        Tgl => "tl",
        Tuk => "tk",
        Uzb => "uz",
        Yid => "yi",
        Zul => "zu",
        Hye => "hy",
        Cym => "cy",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_the_languages_it_analyzes() {
        let german = "Die Kündigungsfrist beträgt drei Monate zum Ende eines Kalendervierteljahres. \
                      Eine Kündigung muss schriftlich erfolgen und ist an die Geschäftsführung zu richten.";
        let english = "The termination notice period is three months to the end of a calendar quarter. \
                       A notice must be given in writing and sent to the management.";
        let french = "Le délai de préavis est de trois mois à compter de la fin du trimestre civil. \
                      La résiliation doit être notifiée par écrit à la direction.";
        assert_eq!(detect(german), "de");
        assert_eq!(detect(english), "en");
        assert_eq!(detect(french), "fr");
        assert_eq!(analysis_for("de").field, "text_de");
        assert_eq!(analysis_for("pl").field, ENGLISH.field);
        assert_eq!(analysis_for(UNDETERMINED), &ENGLISH);
    }

    #[test]
    fn short_or_wordless_text_is_undetermined() {
        assert_eq!(detect(""), UNDETERMINED);
        assert_eq!(detect("id,amount\n1,20\n2,30\n"), UNDETERMINED);
        assert_eq!(detect("Hallo Welt"), UNDETERMINED);
    }

    #[test]
    fn a_long_text_is_sampled_at_character_boundaries() {
        let text = "Größenordnung über Äpfel und Öl. ".repeat(500);
        let s = sample(&text);
        assert!(s.len() < text.len());
        assert_eq!(detect(&text), "de");
    }

    #[test]
    fn stop_words_are_per_language_and_short_texts_are_guessed() {
        assert!(is_stop_word("der", "de") && is_stop_word("und", "de"));
        assert!(!is_stop_word("frist", "de"));
        assert!(is_stop_word("the", "en") && !is_stop_word("der", "en"));
        assert!(is_stop_word("les", "fr"));
        assert!(!is_stop_word("der", "ta") && !is_stop_word("der", UNDETERMINED));
        assert_eq!(
            guess("Die Frist beträgt drei Monate, und sie ist nicht verlängerbar."),
            "de"
        );
        assert_eq!(
            guess("Welche Option von ls zeigt versteckte Dateien an?"),
            "de"
        );
        assert_eq!(
            guess("The secret code written in the notes is 4721, as the second document says."),
            "en"
        );
        assert_eq!(guess("Frist beträgt Monate"), UNDETERMINED);
        assert_eq!(guess("ok"), UNDETERMINED);
    }

    #[test]
    fn every_analysis_has_its_own_field_and_analyzer() {
        let mut fields: Vec<_> = ANALYSES.iter().map(|a| a.field).collect();
        fields.sort_unstable();
        fields.dedup();
        assert_eq!(fields.len(), ANALYSES.len());
        assert_eq!(language_name("de"), "German");
        assert_eq!(language_name("pl"), "Polish");
    }
}
