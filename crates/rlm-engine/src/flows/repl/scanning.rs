//! `grep()`, `grep_count()` and `chunks()`: the REPL's exhaustive reading
//! (`crate::scan`).
//! Both run off the async runtime (a scan reads every document) and count
//! against the cell's time like `search()`.

use std::sync::Arc;

use regex::Regex;
use rlm_sandbox::{HostCall, HostError};
use serde_json::{Value, json};

use super::host_args::{arg, type_error, value_error};
use crate::corpus::{Corpus, DocumentError};
use crate::run::Run;
use crate::scan::{self, CountedSet, DEFAULT_MATCHES, MAX_MATCHES};

/// Most chunks one `chunks()` returns.
pub(crate) const MAX_CHUNKS: usize = 20_000;

/// `grep(pattern, text=None, limit=10000, ignore_case=True, doc=None)`:
/// every matching line, as dicts; when more lines match than `limit`, the
/// returned list is cut and the note (for the cell's output) gives the true
/// total. A scan of the corpus is recorded as a set the answer may be
/// computed from.
pub(crate) async fn grep(
    run: &Arc<Run>,
    agent: &str,
    call: &HostCall,
) -> Result<(Value, Option<String>), HostError> {
    // A number in second place is `search(query, k)`'s habit: here it would
    // cut the list that a count is taken of.
    if call.args.get(1).is_some_and(Value::is_number) {
        return Err(type_error(
            "grep(pattern, N): grep() has no k; it returns every matching line, so len() is the count: call grep(pattern) (or grep_count(pattern)); limit=N cuts the list to its first N lines".into(),
        ));
    }
    let limit = match call.kwargs.get("limit").filter(|v| !v.is_null()) {
        None => DEFAULT_MATCHES,
        Some(v) => v
            .as_u64()
            .filter(|n| (1..=MAX_MATCHES as u64).contains(n))
            .ok_or_else(|| {
                type_error(format!(
                    "grep(pattern, limit=N): limit must be an integer between 1 and {MAX_MATCHES}"
                ))
            })? as usize,
    };
    let (pattern, found) = scan_for(run, agent, call, "grep", limit).await?;
    let note = (found.total > found.matches.len() as u64).then(|| {
        format!(
            "Note: grep({pattern:?}) matched {} lines; it returned the first {} (limit={limit}), so len() of its result is not the total. Count with the total {}, or narrow the pattern.",
            found.total,
            found.matches.len(),
            found.total
        )
    });
    let value = serde_json::to_value(&found.matches).unwrap_or(Value::Null);
    Ok((value, note))
}

/// `grep_count(pattern, text=None, ignore_case=True, doc=None)`: how many
/// lines match.
pub(crate) async fn grep_count(
    run: &Arc<Run>,
    agent: &str,
    call: &HostCall,
) -> Result<Value, HostError> {
    let (_, found) = scan_for(run, agent, call, "grep_count", 0).await?;
    Ok(Value::from(found.total))
}

/// Reads the pattern, the text, `ignore_case` and `doc=` of a scanning
/// call and scans off the async runtime: the corpus (or the documents
/// named, or the one whose text was given), recorded; or a given text that
/// is no document, not recorded.
async fn scan_for(
    run: &Arc<Run>,
    agent: &str,
    call: &HostCall,
    function: &str,
    limit: usize,
) -> Result<(String, scan::Scan), HostError> {
    let pattern = match arg(call, 0, "pattern") {
        Some(Value::String(p)) => p.clone(),
        _ => {
            return Err(type_error(format!(
                "{function}(pattern) needs a pattern string, e.g. {function}(\"overdue\") or {function}(r\"amount: \\d+\")"
            )));
        }
    };
    // As in `re.findall(pattern, text)`: a text to read instead of the corpus.
    let text = match arg(call, 1, "text") {
        Some(Value::String(t)) => Some(t.clone()),
        _ => None,
    };
    let ignore_case = match call.kwargs.get("ignore_case").or(call
        .args
        .iter()
        .skip(1)
        .find(|v| v.is_boolean()))
    {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            return Err(type_error(format!(
                "{function}(): ignore_case must be True or False"
            )));
        }
    };
    let given_text = text.is_some();
    let mut only = documents_arg(run, call, "doc")?;
    let re = scan::compile(&pattern, ignore_case).map_err(value_error)?;
    let corpus = run.corpus.clone();
    let scope = only.clone();
    let (found, given_doc) = tokio::task::spawn_blocking(move || {
        let given_doc = match &text {
            Some(t) => match corpus.document_with_text(t) {
                Some(i) => Some(i),
                None => return Ok((scan::grep_text(t, &re, limit), None)),
            },
            None => None,
        };
        let scope = given_doc.map(|i| vec![i]).or(scope);
        scan::grep(&corpus, &re, limit, scope.as_deref()).map(|s| (s, given_doc))
    })
    .await
    .map_err(|e| HostError::runtime(format!("{function} failed: {e}")))?
    .map_err(|e| HostError::runtime(format!("{function} failed: {e}")))?;
    if !given_text || given_doc.is_some() {
        if let Some(i) = given_doc {
            only = Some(vec![i]);
        }
        record(
            run,
            CountedSet::of(agent, &pattern, ignore_case, only.as_deref(), &found),
        );
    }
    Ok((pattern, found))
}

/// `tally(pattern, number=None, by=None, ignore_case=True, doc=None)`:
/// counts every line of the corpus `pattern` matches; with `number=` adds
/// up the number each line holds (its first capture group); with `by=`
/// counts (or adds up) per group. Recorded as a set the answer may be
/// computed from, with its sum. The note (for the cell's output) says when
/// a pattern found nothing to read, and how to write it.
pub(crate) async fn tally(
    run: &Arc<Run>,
    agent: &str,
    question: Option<&str>,
    call: &HostCall,
) -> Result<(Value, Option<String>, Option<String>), HostError> {
    let TallyArgs {
        mut patterns,
        number,
        mut by,
        ignore_case,
    } = tally_args(call)?;
    let only = documents_arg(run, call, "doc")?;
    let compile_part = |p: &Option<String>, name: &str| {
        p.as_deref()
            .map(|p| {
                scan::compile(p, ignore_case).map_err(|e| value_error(format!("{name}=: {e}")))
            })
            .transpose()
    };
    let number_re = compile_part(&number, "number")?;
    let by_re = compile_part(&by, "by")?;
    // Without a group, `by=` names a field (the group is the value after
    // it) and `number=` the number written next to it; said in the note.
    let by_field = by_re.as_ref().is_some_and(|re| re.captures_len() < 2);
    let number_beside = number_re.as_ref().is_some_and(|re| re.captures_len() < 2);
    let mut parts = (number_re, by_re, ignore_case, only.clone());
    let mut found = scan_tally(run, &patterns, &parts).await?;
    let (written_first, each_word) = apart(run, &mut patterns, &mut found, &parts).await?;
    // A field that names no value on any counted line: read as the lines
    // allow ([`by_without_value`]). With no line at all, the lines are
    // what to fix first: the note says so.
    let mut by_read = None;
    if by_field
        && found.groups.is_empty()
        && found.lines > 0
        && let Some(asked) = by.take()
    {
        let counted = Counted {
            patterns: &patterns,
            rest: "",
            found: &found,
            parts: &parts,
        };
        let (reading, now) = by_without_value(run, question, &asked, &counted).await?;
        (patterns, by, parts, found) = now;
        by_read = Some(reading);
    }
    let mut rest = String::new();
    if let Some(n) = &number {
        rest.push_str(&format!(", number={n:?}"));
    }
    if let Some(b) = &by {
        rest.push_str(&format!(", by={b:?}"));
    }
    let written = match patterns.as_slice() {
        [one] => format!("tally({one:?}{rest})"),
        many => format!("tally({many:?}{rest})"),
    };
    record(
        run,
        CountedSet::of_tally(
            agent,
            written.clone(),
            &patterns,
            number.as_deref(),
            ignore_case,
            only.as_deref(),
            &found,
        ),
    );
    let mut notes: Vec<String> = Vec::new();
    notes.extend(by_read.map(|r| r.note(&written)));
    if let Some(first) = written_first {
        notes.push(format!(
            "Note: no line holds {:?} as written (its words side by side), so this counted the lines that hold each of its words anywhere: {written}.",
            first.join(" ")
        ));
    }
    notes.extend(reading_note(
        number
            .as_deref()
            .filter(|_| number_beside && found.numbered > 0),
        by.as_deref()
            .filter(|_| found.lines > 0 && (by_field || found.grouped_after > 0)),
    ));
    notes.extend(
        tally_note(&written, &found, number.is_some(), by.is_some()).map(|note| {
            match (found.lines, split_words(&patterns)) {
                (0, Some(words)) => format!(
                    "{note} No line holds all of {words:?} anywhere either; lines holding each word: {}. Leave out the words the lines do not use.",
                    each_word.join(", ")
                ),
                _ => note,
            }
        }),
    );
    if found.lines == 0 {
        notes.extend(no_line_notes(run, &patterns).await?);
    }
    if let Some(question) = question.filter(|_| found.lines > 0) {
        let counted = Counted {
            patterns: &patterns,
            rest: &rest,
            found: &found,
            parts: &parts,
        };
        let named: Vec<String> = number.iter().chain(by.iter()).cloned().collect();
        notes.extend(question_notes(run, question, &counted, &named).await?);
    }
    let note = (!notes.is_empty()).then(|| notes.join(" "));
    let value = found.to_value(number.is_some(), by.is_some());
    let summary = (found.lines > 0).then(|| count_summary(&written, &value));
    Ok((value, note, summary))
}

/// What a root's tally is told from its question: the question's words
/// its patterns left out that only some counted lines hold, and the total
/// of the amounts the counted lines hold when it read no number
/// (`named`: its `number=` and `by=`).
async fn question_notes(
    run: &Arc<Run>,
    question: &str,
    counted: &Counted<'_>,
    named: &[String],
) -> Result<Vec<String>, HostError> {
    let (patterns, lines) = (counted.patterns, counted.found.lines);
    let mut all_parts = patterns.to_vec();
    all_parts.extend(named.iter().cloned());
    let left_out =
        left_out_words(run, question, patterns, &all_parts, counted.parts, lines).await?;
    let mut notes: Vec<String> = left_out_note(&left_out, lines, patterns, counted.rest)
        .into_iter()
        .collect();
    if counted.parts.1.is_none()
        && let Some(field) =
            field_named(question, &scan_fields(run, patterns, counted.parts).await?)
    {
        // "Which user made the most …" counted without groups: the field
        // the question names is on these lines; the call that ranks it.
        let rest = format!("{}, by={:?}", counted.rest, field.name);
        let call = match patterns {
            [one] => format!("tally({one:?}{rest})"),
            many => format!("tally({many:?}{rest})"),
        };
        notes.push(format!(
            "Note: the question names {:?}, and these lines write a value after it ({} values): {call} counts the lines per value, most first.",
            field.name, field.values
        ));
    }
    if counted.parts.0.is_none() {
        // Over the lines that also hold the question's left-out words,
        // when there are such: the total the question asks for.
        let also: Vec<String> = left_out.iter().map(|w| regex::escape(&w.written)).collect();
        notes.extend(amount_note(run, question, counted, &also).await?);
    }
    Ok(notes)
}

/// Plain words side by side that no line holds ("EUR Oslo" over
/// "EUR | Oslo") meant the lines holding each word: counted so (the
/// patterns and what was found are replaced; the patterns as written are
/// returned, to say so). When no line holds them even apart: how many lines
/// hold each word, and the best count of all but one, to leave out the
/// ones the lines do not use.
async fn apart(
    run: &Arc<Run>,
    patterns: &mut Vec<String>,
    found: &mut scan::Tally,
    parts: &TallyParts,
) -> Result<(Option<Vec<String>>, Vec<String>), HostError> {
    let mut each_word = Vec::new();
    let Some(words) = split_words(patterns).filter(|_| found.lines == 0) else {
        return Ok((None, each_word));
    };
    let again = scan_tally(run, &words, parts).await?;
    if again.lines > 0 {
        *found = again;
        return Ok((Some(std::mem::replace(patterns, words)), each_word));
    }
    let alone = (None, None, parts.2, parts.3.clone());
    for word in &words {
        let lines = scan_tally(run, std::slice::from_ref(word), &alone)
            .await?
            .lines;
        each_word.push(format!("{word:?}: {lines}"));
    }
    each_word.extend(all_but_one(run, &words, &alone).await?);
    Ok((None, each_word))
}

/// How a `by=` without a group was read when no value follows it on any
/// counted line.
enum ByReading {
    /// Some counted lines hold it: a filter, the way people say it
    /// ("refunds by Bergen").
    Filter(String),
    /// No counted line holds it ("by='transaction'"): grouped instead by
    /// the field of the lines the question names.
    Field { asked: String, field: String },
    /// No counted line holds it, and the question names none of the
    /// lines' fields: counted without groups; the fields the lines have.
    Missing {
        asked: String,
        fields: Vec<scan::Field>,
    },
}

impl ByReading {
    fn note(&self, written: &str) -> String {
        match self {
            ByReading::Filter(filter) => format!(
                "Note: by={filter:?} has no group in parentheses and no value follows it on these lines, so it was read as a filter: {written} counted the lines that also hold it. To count per group, give by= a group, e.g. by=r\"user (\\w+)\"."
            ),
            ByReading::Field { asked, field } => format!(
                "Note: no counted line holds {asked:?}, so by={asked:?} named no group; the lines write a value after {field:?}, which the question names, so they were grouped by it: {written}."
            ),
            ByReading::Missing { asked, fields } if fields.is_empty() => format!(
                "Note: no counted line holds {asked:?}, so by={asked:?} named no group and {written} counted the lines without groups. To count per group, give by= a group that captures the value, e.g. by=r\"user (\\w+)\"."
            ),
            ByReading::Missing { asked, fields } => format!(
                "Note: no counted line holds {asked:?}, so by={asked:?} named no group and {written} counted the lines without groups. The lines write a value after {}: by= one of them groups by that value.",
                fields
                    .iter()
                    .take(5)
                    .map(|f| format!("{:?} ({} lines, {} values)", f.name, f.lines, f.values))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// The first of `fields` the question names: one of its words, or the
/// word with up to two more letters ("users" for `user`).
fn field_named<'f>(question: &str, fields: &'f [scan::Field]) -> Option<&'f scan::Field> {
    let words: Vec<String> = crate::text::words(question).collect();
    fields.iter().find(|f| {
        let name = f.name.to_lowercase();
        words.iter().any(|w| {
            w == &name || (w.starts_with(&name) && w.chars().count() <= name.chars().count() + 2)
        })
    })
}

/// The tally's patterns, `by=`, parts and result after [`ByReading`].
type ByOutcome = (Vec<String>, Option<String>, TallyParts, scan::Tally);

/// Reads a `by=` word that no counted line writes a value after
/// ([`ByReading`]), and counts again as it was read.
async fn by_without_value(
    run: &Arc<Run>,
    question: Option<&str>,
    asked: &str,
    counted: &Counted<'_>,
) -> Result<(ByReading, ByOutcome), HostError> {
    let mut parts = counted.parts.clone();
    parts.1 = None;
    let mut filtered = counted.patterns.to_vec();
    filtered.push(asked.to_string());
    let found = scan_tally(run, &filtered, &parts).await?;
    if found.lines > 0 {
        return Ok((
            ByReading::Filter(asked.into()),
            (filtered, None, parts, found),
        ));
    }
    let patterns = counted.patterns.to_vec();
    let fields = scan_fields(run, &patterns, &parts).await?;
    if let Some(field) = question.and_then(|q| field_named(q, &fields)) {
        let pattern = format!(r"\b{}\b", regex::escape(&field.name));
        parts.1 = Some(scan::compile(&pattern, parts.2).map_err(value_error)?);
        let found = scan_tally(run, &patterns, &parts).await?;
        let reading = ByReading::Field {
            asked: asked.into(),
            field: field.name.clone(),
        };
        return Ok((reading, (patterns, Some(field.name.clone()), parts, found)));
    }
    let reading = ByReading::Missing {
        asked: asked.into(),
        fields,
    };
    Ok((reading, (patterns, None, parts, counted.found.clone())))
}

/// One line saying what a tally found, for a last turn's reminder: its
/// call, lines and documents, and the sum, the largest and the most
/// frequent group when it has them.
fn count_summary(written: &str, value: &Value) -> String {
    let mut said = format!(
        "{written}: {} lines in {} documents",
        value["lines"], value["documents"]
    );
    if let Some(sum) = value.get("sum") {
        said.push_str(&format!(", sum {sum}"));
    }
    if let (Some(max), Some(line)) = (value.get("max"), value["max_line"].as_str()) {
        said.push_str(&format!(", largest {max} on the line {line:?}"));
    }
    if let (Some(top), Some(first)) = (value["top"].as_str(), value["by"].get(0)) {
        said.push_str(&format!(", most frequent {top:?} ({} lines)", first[1]));
    }
    said
}

/// Most words of the question checked against a tally's lines.
const WORDS_CHECKED: usize = 5;

/// A word of the question that some, not all, of a tally's lines hold:
/// the word as asked, as the lines write it, and how many of them do.
struct LeftOut {
    asked: String,
    written: String,
    lines: u64,
}

/// The words of `question` (content words of four letters or more) that
/// the call's patterns (`all_parts`: the line patterns, `number=`, `by=`)
/// do not name, and that some but not all of the `counted` lines hold:
/// each may be a condition of the question the patterns left out (the
/// "purchases" of "the total of all purchases made in Oslo" when every Oslo
/// line was added up). A word the lines write shorter ("purchase") is
/// found by cutting its last one or two letters.
async fn left_out_words(
    run: &Arc<Run>,
    question: &str,
    patterns: &[String],
    all_parts: &[String],
    parts: &TallyParts,
    counted: u64,
) -> Result<Vec<LeftOut>, HostError> {
    let language = rlm_corpus::language::guess(question);
    let named = all_parts.join(" ").to_lowercase();
    let mut asked: Vec<String> = Vec::new();
    for w in crate::text::words(question) {
        if w.chars().count() >= 4
            && !crate::text::is_stop_word(&w, language)
            && !named.contains(&w)
            && !asked.contains(&w)
        {
            asked.push(w);
        }
    }
    let alone = (None, None, parts.2, parts.3.clone());
    let mut found = Vec::new();
    for word in asked.into_iter().take(WORDS_CHECKED) {
        let chars: Vec<char> = word.chars().collect();
        let forms = (0..=2usize)
            .filter(|cut| *cut == 0 || chars.len() - cut >= 5)
            .map(|cut| chars[..chars.len() - cut].iter().collect::<String>());
        for form in forms {
            let pattern = regex::escape(&form);
            if scan_tally(run, std::slice::from_ref(&pattern), &alone)
                .await?
                .lines
                == 0
            {
                continue;
            }
            let mut narrowed = patterns.to_vec();
            narrowed.push(pattern);
            let lines = scan_tally(run, &narrowed, &alone).await?.lines;
            if lines > 0 && lines < counted {
                found.push(LeftOut {
                    asked: word.clone(),
                    written: form,
                    lines,
                });
            }
            break;
        }
    }
    Ok(found)
}

/// The sum of the amounts the counted lines hold, when a tally without
/// `number=` counted lines that each write a number before a unit the
/// question names (`166 EUR` for "the total in EUR"): the model asked for a
/// total often counts the lines instead. `None` when the question names no
/// unit of the first line or some counted line has no such amount.
async fn amount_note(
    run: &Arc<Run>,
    question: &str,
    counted: &Counted<'_>,
    also: &[String],
) -> Result<Option<String>, HostError> {
    let Counted {
        found, rest, parts, ..
    } = counted;
    let mut patterns = counted.patterns.to_vec();
    patterns.extend(also.iter().cloned());
    let Some(line) = found.first_line.as_deref() else {
        return Ok(None);
    };
    let asked: Vec<String> = crate::text::words(question).collect();
    let Some(unit) = scan::units_in(line)
        .into_iter()
        .find(|u| asked.contains(&u.to_lowercase()))
    else {
        return Ok(None);
    };
    let pattern = scan::number_before(unit);
    let number_re = scan::compile(&pattern, parts.2).map_err(value_error)?;
    let with_number = (Some(number_re), parts.1.clone(), parts.2, parts.3.clone());
    let summed = scan_tally(run, &patterns, &with_number).await?;
    if summed.numbered == 0 || summed.numbered != summed.lines {
        return Ok(None);
    }
    let value = summed.to_value(true, false);
    let (sum, min, max) = (&value["sum"], &value["min"], &value["max"]);
    let call = match patterns.as_slice() {
        [one] => format!("tally({one:?}{rest}, number=r\"{pattern}\")"),
        many => format!("tally({many:?}{rest}, number=r\"{pattern}\")"),
    };
    let which = if summed.lines == found.lines {
        format!("each of these {} lines", found.lines)
    } else {
        format!(
            "each of the {} of these lines that also hold {also:?}",
            summed.lines
        )
    };
    Ok(Some(format!(
        "Note: {which} has a number written before {unit:?} (as in {line:?}); added up they make {sum} (smallest {min}, largest {max}). `lines` counts the lines; to have the total in the result: {call}.",
    )))
}

/// The note naming the question's words a tally's patterns left out.
fn left_out_note(
    left_out: &[LeftOut],
    counted: u64,
    patterns: &[String],
    rest: &str,
) -> Option<String> {
    let first = left_out.first()?;
    let said: Vec<String> = left_out
        .iter()
        .map(|w| {
            if w.asked == w.written {
                format!(
                    "{:?}: {} of these {counted} lines hold it",
                    w.asked, w.lines
                )
            } else {
                format!(
                    "{:?}: {} of these {counted} lines hold {:?}",
                    w.asked, w.lines, w.written
                )
            }
        })
        .collect();
    let mut with = patterns.to_vec();
    with.push(first.written.clone());
    Some(format!(
        "Note: the question also says {}. If only the lines holding such a word count, add it to the patterns, e.g. tally({with:?}{rest}).",
        said.join("; ")
    ))
}

/// A tally as the model wrote it: its line patterns, the rest of its
/// call as written, what it found and its compiled parts.
struct Counted<'a> {
    patterns: &'a [String],
    rest: &'a str,
    found: &'a scan::Tally,
    parts: &'a TallyParts,
}

/// The best count of the lines holding all of `words` but one, when no
/// line holds them all: said as `all but "w": N (tally([...]))`, so the
/// word the lines do not use is found (three words or more).
async fn all_but_one(
    run: &Arc<Run>,
    words: &[String],
    alone: &TallyParts,
) -> Result<Option<String>, HostError> {
    if words.len() < 3 {
        return Ok(None);
    }
    let mut best: Option<(u64, &String, Vec<String>)> = None;
    for (skip, left_out) in words.iter().enumerate() {
        let rest: Vec<String> = (0..words.len())
            .filter(|i| *i != skip)
            .map(|i| words[i].clone())
            .collect();
        let lines = scan_tally(run, &rest, alone).await?.lines;
        if lines > 0 && best.as_ref().is_none_or(|(b, ..)| lines > *b) {
            best = Some((lines, left_out, rest));
        }
    }
    Ok(best.map(|(lines, left_out, rest)| {
        format!("all of them but {left_out:?}: {lines} (tally({rest:?}))")
    }))
}

/// The compiled `number=`, `by=`, `ignore_case=` and `doc=` of a `tally()`.
type TallyParts = (Option<Regex>, Option<Regex>, bool, Option<Vec<usize>>);

/// Runs one tally of the lines matching all of `patterns` over the corpus,
/// off the async runtime.
async fn scan_tally(
    run: &Arc<Run>,
    patterns: &[String],
    parts: &TallyParts,
) -> Result<scan::Tally, HostError> {
    scan_lines(run, patterns, parts, scan::tally).await
}

/// The fields of the lines matching all of `patterns` ([`scan::fields`]).
async fn scan_fields(
    run: &Arc<Run>,
    patterns: &[String],
    parts: &TallyParts,
) -> Result<Vec<scan::Field>, HostError> {
    scan_lines(run, patterns, parts, scan::fields).await
}

/// [`scan::typical_line`], off the async runtime.
async fn typical_line(run: &Arc<Run>) -> Result<Option<String>, HostError> {
    let corpus = run.corpus.clone();
    off_runtime(move || scan::typical_line(&corpus)).await
}

/// Runs a read of the corpus off the async runtime; its failure is the
/// cell's `tally failed` error.
async fn off_runtime<T: Send + 'static>(
    read: impl FnOnce() -> Result<T, DocumentError> + Send + 'static,
) -> Result<T, HostError> {
    tokio::task::spawn_blocking(read)
        .await
        .map_err(|e| HostError::runtime(format!("tally failed: {e}")))?
        .map_err(|e| HostError::runtime(format!("tally failed: {e}")))
}

/// A scan of the lines a [`scan::TallySpec`] picks ([`scan::tally`],
/// [`scan::fields`]).
type LineScan<T> = fn(&Corpus, &scan::TallySpec<'_>, Option<&[usize]>) -> Result<T, DocumentError>;

/// Runs `read` over the lines matching all of `patterns`, off the async
/// runtime.
async fn scan_lines<T: Send + 'static>(
    run: &Arc<Run>,
    patterns: &[String],
    (number_re, by_re, ignore_case, only): &TallyParts,
    read: LineScan<T>,
) -> Result<T, HostError> {
    let mut line_res = patterns
        .iter()
        .map(|p| scan::compile(p, *ignore_case).map_err(value_error))
        .collect::<Result<Vec<_>, _>>()?;
    let lines_re = line_res.remove(0);
    let (number_re, by_re, only) = (number_re.clone(), by_re.clone(), only.clone());
    let corpus = run.corpus.clone();
    off_runtime(move || {
        let spec = scan::TallySpec {
            lines: &lines_re,
            also: &line_res,
            number: number_re.as_ref(),
            by: by_re.as_ref(),
        };
        read(&corpus, &spec, only.as_deref())
    })
    .await
}

/// The arguments of a `tally()` call, checked: the patterns of the lines
/// (one, or a list a line must all match), `number=`, `by=` and
/// `ignore_case=` (`doc=` is read with the other scanners').
struct TallyArgs {
    patterns: Vec<String>,
    number: Option<String>,
    by: Option<String>,
    ignore_case: bool,
}

fn tally_args(call: &HostCall) -> Result<TallyArgs, HostError> {
    let text_arg = |index: usize, name: &str| match arg(call, index, name) {
        None => Ok(None),
        Some(Value::String(p)) => Ok(Some(p.clone())),
        Some(_) => Err(type_error(format!(
            "tally(): {name}= must be a regular expression string, e.g. tally(r\"paid\", number=r\"(\\d+) EUR\", by=r\"client (\\w+)\")"
        ))),
    };
    const KNOWN: [&str; 5] = ["pattern", "number", "by", "ignore_case", "doc"];
    if let Some(unknown) = call.kwargs.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        return Err(type_error(format!(
            "tally() got an unexpected keyword argument '{unknown}': it takes pattern, number=, by=, ignore_case= and doc= (it always reads the corpus; to read a text of your own, use grep(pattern, text))"
        )));
    }
    if call.args.len() > 3 {
        return Err(type_error(format!(
            "tally() takes at most 3 positional arguments (pattern, number, by) but {} were given",
            call.args.len()
        )));
    }
    // A list of patterns: the lines holding all of them, in any order.
    let patterns: Vec<String> = match arg(call, 0, "pattern") {
        Some(Value::String(p)) => vec![p.clone()],
        Some(Value::Array(items))
            if !items.is_empty() && items.len() <= 20 && items.iter().all(Value::is_string) =>
        {
            items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        }
        _ => {
            return Err(type_error(
                "tally(pattern) needs the pattern of the lines to count (a regular expression, or a list of up to 20 that a line must all match), e.g. tally(r\"refund\") or tally([\"refund\", \"Oslo\"])".into(),
            ));
        }
    };
    let (number, by) = (text_arg(1, "number")?, text_arg(2, "by")?);
    let ignore_case = match call.kwargs.get("ignore_case") {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            return Err(type_error(
                "tally(): ignore_case must be True or False".into(),
            ));
        }
    };
    Ok(TallyArgs {
        patterns,
        number,
        by,
        ignore_case,
    })
}

/// The words of patterns that hold several plain words (`"EUR Oslo"`), as
/// a list of patterns a line must all match; `None` when no pattern has
/// more than one word or any is a regular expression.
fn split_words(patterns: &[String]) -> Option<Vec<String>> {
    let plain = |p: &String| {
        p.chars()
            .all(|c| c.is_alphanumeric() || c.is_whitespace() || c == '-')
    };
    let words: Vec<String> = patterns
        .iter()
        .flat_map(|p| p.split_whitespace().map(str::to_string))
        .collect();
    (patterns.iter().all(plain) && words.len() > patterns.len()).then_some(words)
}

/// What a tally that matched no line is also told: a typical line of the
/// corpus (how lines are written), and the search to run if the question
/// asks for a fact (a first turn that declared "every line" must tally; a
/// question whose words no line holds together may be a lookup).
async fn no_line_notes(run: &Arc<Run>, patterns: &[String]) -> Result<Vec<String>, HostError> {
    let mut notes = Vec::new();
    if let Some(line) = typical_line(run).await? {
        notes.push(format!(
            "A line of the corpus reads: {line:?}. Count with words written like these."
        ));
    }
    notes.push(format!(
        "If the question asks for a fact stated in a passage rather than a count, search for it instead: for h in search({:?}, 5): print(h['chunk_id'], h['snippet'])",
        search_words(patterns)
    ));
    Ok(notes)
}

/// The words of a tally's patterns as a search query: what is left of
/// them with the regular expression's syntax taken out.
fn search_words(patterns: &[String]) -> String {
    let words: Vec<&str> = patterns
        .iter()
        .flat_map(|p| p.split(|c: char| !(c.is_alphanumeric() || c == '-')))
        .filter(|w| w.chars().any(char::is_alphabetic))
        .collect();
    words.join(" ")
}

/// How a `number=` or `by=` without a group in parentheses was read, so
/// the model sees what was added up or grouped (and how to write it).
fn reading_note(number: Option<&str>, by: Option<&str>) -> Option<String> {
    let mut read = Vec::new();
    if let Some(n) = number {
        read.push(format!(
            "number={n:?} has no group in parentheses, so each line's number is the one it holds or the one written next to it"
        ));
    }
    if let Some(b) = by {
        read.push(format!(
            "by={b:?} has no group in parentheses that captures a value, so it is read as a field's name: each line's group is the value written after it (like by=r\"user\\s*(\\w+)\" for lines saying user NAME)"
        ));
    }
    (!read.is_empty()).then(|| format!("Note: {}.", read.join("; ")))
}

/// What to tell the model when a `tally()` found nothing to read: no line,
/// no number on its lines, or no group.
fn tally_note(written: &str, t: &scan::Tally, number: bool, by: bool) -> Option<String> {
    let lines = t.lines;
    if lines == 0 {
        return Some(format!(
            "Note: {written} matched no line of the corpus. Try one shorter word of the lines you mean (grep_count() tells how many lines hold it), or print a few lines with grep(word, limit=3) to see how they are written."
        ));
    }
    let mut why: Vec<String> = Vec::new();
    if number && t.numbered == 0 {
        let example = t
            .first_line
            .as_deref()
            .and_then(scan::number_pattern_for)
            .unwrap_or_else(|| r#"r"(\d+) EUR""#.to_string());
        why.push(format!(
            "number= read no number on them (its first group must capture the digits, e.g. number={example})"
        ));
    }
    if by && t.groups.is_empty() {
        why.push(
            "by= found no group on them (its first group must capture the name, e.g. by=r\"user (\\w+)\")"
                .to_string(),
        );
    }
    let unread = (!why.is_empty()).then(|| {
        format!(
            "Note: {written} matched {lines} lines, and `lines` counts them; {}.",
            why.join("; ")
        )
    });
    let cut = (by && t.groups.len() > scan::MAX_GROUPS).then(|| {
        format!(
            "Note: {written} found {} groups; its `by` lists the first {} (most first), so len() of `by` is not the number of groups: `groups` is.",
            t.groups.len(),
            scan::MAX_GROUPS
        )
    });
    // No group at all and more groups than listed never come together.
    unread.or(cut)
}

/// Keeps one record per distinct scan (the latest count; the agent's own
/// scan replaces the engine's).
fn record(run: &Run, set: CountedSet) {
    let mut scans = run.scans.lock().unwrap_or_else(|e| e.into_inner());
    scans.retain(|s| !s.same_scan(&set));
    scans.push(set);
}

/// `chunks(doc=None)`: every chunk of the corpus (or of the documents named)
/// as dicts with `chunk_id`, `doc_index`, `path` and `text`, in order: for
/// mapping `llm_query_batched` over everything that must be read, not matched.
pub(crate) async fn chunks(run: &Arc<Run>, call: &HostCall) -> Result<Value, HostError> {
    let only = documents_arg(run, call, "doc")?;
    let corpus = run.corpus.clone();
    tokio::task::spawn_blocking(move || {
        let all: Vec<usize> = (0..corpus.documents().len()).collect();
        let mut out = Vec::new();
        for &index in only.as_deref().unwrap_or(&all) {
            let d = &corpus.documents()[index];
            let chunks = corpus
                .store()
                .chunks_of(&d.id)
                .map_err(|e| HostError::runtime(format!("chunks() failed: {e}")))?;
            if out.len() + chunks.len() > MAX_CHUNKS {
                return Err(value_error(format!(
                    "chunks() would return more than {MAX_CHUNKS} chunks: pass doc= with fewer documents, or grep() for the lines that matter"
                )));
            }
            out.extend(chunks.into_iter().map(|c| {
                json!({"chunk_id": c.id, "doc_index": index, "path": d.path, "text": c.text})
            }));
        }
        Ok(Value::Array(out))
    })
    .await
    .map_err(|e| HostError::runtime(format!("chunks() failed: {e}")))?
}

/// The `doc=` argument: one document index or a list of them, checked.
fn documents_arg(run: &Run, call: &HostCall, name: &str) -> Result<Option<Vec<usize>>, HostError> {
    let count = run.corpus.documents().len();
    let index = |v: &Value| {
        v.as_u64()
            .map(|i| i as usize)
            .filter(|i| *i < count)
            .ok_or_else(|| {
                value_error(format!(
                    "{name}= takes document indexes from 0 to {} (documents[i]['index']); got {v}",
                    count.saturating_sub(1)
                ))
            })
    };
    match call.kwargs.get(name).filter(|v| !v.is_null()) {
        None => Ok(None),
        Some(Value::Array(items)) => items.iter().map(index).collect::<Result<_, _>>().map(Some),
        Some(v) => index(v).map(|i| Some(vec![i])),
    }
}
