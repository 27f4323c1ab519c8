//! `tally()`: counting, adding up and ranking every line a pattern matches,
//! done by the engine instead of by the model's code. A weak model writes
//! one call with two patterns far more reliably than a loop that parses
//! numbers (the commonest failure on counting and summing questions was
//! broken parsing code, not a wrong choice of lines).
//!
//! Numbers are read as people write them: `1,234.50`, `1.234,50`,
//! `1'234`, `12,5` and `12.5` (see [`read_number`]), and sums keep the
//! decimals of the numbers added, so `0.10 + 0.20` is `0.3`, not
//! `0.30000000000000004`.

use regex::Regex;
use serde_json::{Map, Value, json};

use super::{cut_line, each_line, keep_chunk};
use crate::corpus::{Corpus, DocumentError};

/// Most groups `by=` returns (the count of all groups is given too).
pub const MAX_GROUPS: usize = 1_000;

/// What `tally()` adds up: the patterns of one call.
pub struct TallySpec<'a> {
    /// Which lines count: those it matches...
    pub lines: &'a Regex,
    /// ...that every one of these matches too (a list of patterns: a line
    /// holding all of them, in any order).
    pub also: &'a [Regex],
    /// The number of a line: its first capture group; without one, the
    /// number the match holds or is written next to.
    pub number: Option<&'a Regex>,
    /// The group of a line: its first capture group; without one, the
    /// value written after the match (a field's name).
    pub by: Option<&'a Regex>,
}

/// The result of one `tally()` over the corpus (or some documents).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    /// Matching lines.
    pub lines: u64,
    /// Documents holding them.
    pub documents: usize,
    /// Chunks holding them (the first 200), to open.
    pub chunk_ids: Vec<String>,
    /// Lines whose number was read.
    pub numbered: u64,
    /// The sum of the numbers read.
    pub sum: f64,
    /// Most decimals of a number read (the sum is rounded to them).
    pub decimals: u32,
    /// The smallest and the largest number, with their lines.
    pub min: Option<(f64, String)>,
    /// See `min`.
    pub max: Option<(f64, String)>,
    /// Lines per group, and the sum of their numbers, in first-seen order.
    pub groups: Vec<(String, u64, f64)>,
    /// Matching lines the `by` pattern found no group in.
    pub ungrouped: u64,
    /// Lines grouped by the value written after the `by` match (a pattern
    /// without a group, or whose group captured nothing).
    pub grouped_after: u64,
    /// The first matching line (to show how the lines are written).
    pub first_line: Option<String>,
}

/// Tallies every line of the corpus (or of `only` documents) that
/// `spec.lines` matches.
pub fn tally(
    corpus: &Corpus,
    spec: &TallySpec<'_>,
    only: Option<&[usize]>,
) -> Result<Tally, DocumentError> {
    let mut t = Tally::default();
    let mut group_at = std::collections::HashMap::new();
    let mut last_document = None;
    each_counted_line(corpus, spec, only, |place, chunk_id, line| {
        if last_document != Some(place) {
            last_document = Some(place);
            t.documents += 1;
        }
        t.add_line(spec, line, &mut group_at);
        keep_chunk(&mut t.chunk_ids, chunk_id);
    })?;
    Ok(t)
}

/// Calls `on_line(document's place in the reading, chunk id, line)` for
/// each line of the corpus (or of `only` documents, each place counted
/// apart as before) that `spec.lines` and every one of `spec.also` match,
/// in order: the lines a tally counts.
fn each_counted_line(
    corpus: &Corpus,
    spec: &TallySpec<'_>,
    only: Option<&[usize]>,
    mut on_line: impl FnMut(usize, &str, &str),
) -> Result<(), DocumentError> {
    let all: Vec<usize> = (0..corpus.documents().len()).collect();
    for (place, &index) in only.unwrap_or(&all).iter().enumerate() {
        let text = corpus.document_text(index)?;
        if !spec.lines.is_match(&text) {
            continue;
        }
        let spans = corpus.chunk_starts(index)?;
        each_line(&text, &spans, spec.lines, |_, chunk_id, line| {
            if spec.also.iter().all(|re| re.is_match(line)) {
                on_line(place, chunk_id, line);
            }
        });
    }
    Ok(())
}

/// A word the counted lines write a value after (`user` in `user mila`,
/// `level` in `level=ERROR`): a field `by=` can group by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// The word as the first line holding it writes it.
    pub name: String,
    /// Counted lines holding it with a value after it.
    pub lines: u64,
    /// Distinct values after it (counted up to [`MAX_FIELD_VALUES`]).
    pub values: usize,
}

/// Distinct values counted per field word, enough to tell a field from a
/// fixed phrase and from a unique id.
const MAX_FIELD_VALUES: usize = 64;

/// The fields of the lines `spec` counts (its `number` and `by` are not
/// read), most lines first: words written before a value on at least half
/// of the counted lines, whose value varies but repeats (a field to group
/// by, not a fixed phrase, not an id). Read from how the lines are
/// written, so it holds in any language.
pub fn fields(
    corpus: &Corpus,
    spec: &TallySpec<'_>,
    only: Option<&[usize]>,
) -> Result<Vec<Field>, DocumentError> {
    // Per word (lowercase): its written form, lines, and values seen.
    let mut seen: Vec<(String, String, u64, Vec<String>)> = Vec::new();
    let mut lines = 0u64;
    each_counted_line(corpus, spec, only, |_, _, line| {
        lines += 1;
        let mut on_line: Vec<String> = Vec::new();
        for (word, value) in word_value_pairs(line) {
            let key = word.to_lowercase();
            if on_line.contains(&key) {
                continue;
            }
            on_line.push(key.clone());
            let at = match seen.iter().position(|s| s.0 == key) {
                Some(at) => at,
                None => {
                    seen.push((key, word.to_string(), 0, Vec::new()));
                    seen.len() - 1
                }
            };
            let entry = &mut seen[at];
            entry.2 += 1;
            if entry.3.len() < MAX_FIELD_VALUES && !entry.3.iter().any(|v| v == value) {
                entry.3.push(value.to_string());
            }
        }
    })?;
    let mut found: Vec<Field> = seen
        .into_iter()
        .filter(|(_, _, n, values)| {
            *n >= 2 && *n * 2 >= lines && values.len() >= 2 && (values.len() as u64) < *n
        })
        .map(|(_, name, n, values)| Field {
            name,
            lines: n,
            values: values.len(),
        })
        .collect();
    found.sort_by_key(|f| std::cmp::Reverse(f.lines));
    Ok(found)
}

/// Each word of `line` (letters only, two or more) and the value written
/// right after it, past blanks and one `:` or `=` (as [`group_of`] reads a
/// field's value).
fn word_value_pairs(line: &str) -> Vec<(&str, &str)> {
    let is_value_char = |c: char| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '@' | '/');
    let mut pairs = Vec::new();
    let mut rest = line;
    while let Some(start) = rest.find(char::is_alphanumeric) {
        let from = &rest[start..];
        let end = from
            .char_indices()
            .find(|(_, c)| !is_value_char(*c))
            .map_or(from.len(), |(i, _)| i);
        let word = &from[..end];
        let after = from[end..].trim_start_matches([' ', '\t']);
        let after = after
            .strip_prefix([':', '='])
            .unwrap_or(after)
            .trim_start_matches([' ', '\t']);
        let value_end = after
            .char_indices()
            .find(|(_, c)| !is_value_char(*c))
            .map_or(after.len(), |(i, _)| i);
        let value = after[..value_end].trim_end_matches(['.', '-', '/']);
        if word.chars().count() >= 2 && word.chars().all(char::is_alphabetic) && !value.is_empty() {
            pairs.push((word, value));
        }
        rest = &from[end..];
    }
    pairs
}

impl Tally {
    fn add_line(
        &mut self,
        spec: &TallySpec<'_>,
        line: &str,
        group_at: &mut std::collections::HashMap<String, usize>,
    ) {
        self.lines += 1;
        if self.first_line.is_none() {
            self.first_line = Some(cut_line(line));
        }
        let number = spec.number.and_then(|re| read_number(number_of(re, line)?));
        if let Some((n, decimals)) = number {
            self.numbered += 1;
            self.sum += n;
            self.decimals = self.decimals.max(decimals);
            if self.min.as_ref().is_none_or(|(m, _)| n < *m) {
                self.min = Some((n, cut_line(line)));
            }
            if self.max.as_ref().is_none_or(|(m, _)| n > *m) {
                self.max = Some((n, cut_line(line)));
            }
        }
        if let Some(by) = spec.by {
            match group_of(by, line).filter(|(k, _)| !k.is_empty()) {
                Some((key, after)) => {
                    self.grouped_after += u64::from(after);
                    let i = *group_at.entry(key.to_string()).or_insert_with(|| {
                        self.groups.push((key.to_string(), 0, 0.0));
                        self.groups.len() - 1
                    });
                    self.groups[i].1 += 1;
                    self.groups[i].2 += number.map_or(0.0, |(n, _)| n);
                }
                None => self.ungrouped += 1,
            }
        }
    }

    /// The sum as it is reported: rounded to the decimals of the numbers
    /// added (float addition leaves noise past them).
    pub fn rounded_sum(&self) -> f64 {
        round_to(self.sum, self.decimals)
    }

    /// The result `tally()` returns to Python: counts always; with a number
    /// pattern `sum`, `min`, `max`, `mean` and the lines of the extremes;
    /// with `by`, the groups most first (by sum when numbers are read, else
    /// by lines) and the `top` one.
    pub fn to_value(&self, numbers: bool, by: bool) -> Value {
        let mut out = Map::new();
        out.insert("lines".into(), json!(self.lines));
        out.insert("documents".into(), json!(self.documents));
        if numbers {
            out.insert("numbers_read".into(), json!(self.numbered));
            out.insert("sum".into(), number_value(self.rounded_sum()));
            if let (Some((min, min_line)), Some((max, max_line))) = (&self.min, &self.max) {
                let mean = self.sum / self.numbered as f64;
                out.insert("min".into(), number_value(*min));
                out.insert("max".into(), number_value(*max));
                out.insert(
                    "mean".into(),
                    number_value(round_to(mean, self.decimals + 2)),
                );
                out.insert("min_line".into(), json!(min_line));
                out.insert("max_line".into(), json!(max_line));
            }
        }
        if by {
            let mut groups = self.groups.clone();
            // Most first; ties in first-seen order (a stable sort).
            if numbers {
                groups.sort_by(|a, b| b.2.total_cmp(&a.2));
            } else {
                groups.sort_by_key(|g| std::cmp::Reverse(g.1));
            }
            if let Some(top) = groups.first() {
                out.insert("top".into(), json!(top.0));
            }
            out.insert("groups".into(), json!(groups.len()));
            let rows: Vec<Value> = groups
                .iter()
                .take(MAX_GROUPS)
                .map(|(key, lines, sum)| {
                    if numbers {
                        json!([key, lines, number_value(round_to(*sum, self.decimals))])
                    } else {
                        json!([key, lines])
                    }
                })
                .collect();
            out.insert("by".into(), Value::Array(rows));
            if self.ungrouped > 0 {
                out.insert("lines_without_group".into(), json!(self.ungrouped));
            }
        }
        Value::Object(out)
    }
}

/// A `number=` pattern for the first number of `line` that a word follows
/// (`321 EUR`, `12,5 kg`, `1532 ms`): how the amounts of such lines are
/// read. `None` when no number is followed by a word.
pub fn number_pattern_for(line: &str) -> Option<String> {
    let unit = units_in(line).into_iter().next()?;
    Some(format!(r#"r"{}""#, number_before(unit)))
}

/// The words written right after a number in `line`, in order: the units
/// of its amounts (`EUR` of `321 EUR`, `kg` of `12,5 kg`).
pub fn units_in(line: &str) -> Vec<&str> {
    static AMOUNT: std::sync::LazyLock<Regex> = std::sync::LazyLock::new(|| {
        Regex::new(r"(?:^|[^\w.,])\d+(?:[.,]\d+)?\s?([^\W\d_]+)").expect("a valid pattern")
    });
    AMOUNT
        .captures_iter(line)
        .filter_map(|c| c.get(1).map(|m| m.as_str()))
        .collect()
}

/// The `number=` pattern reading the number written before `unit`.
pub fn number_before(unit: &str) -> String {
    format!(r"(\d+(?:[.,]\d+)?)\s?{}", regex::escape(unit))
}

/// The number `re` finds in `line`: its first capture group; without a
/// group, the whole match when it holds a digit, else the number written
/// next to it (`number="EUR"` reads `153 EUR` and `EUR 153`, the way a
/// person reads "the EUR amount").
fn number_of<'t>(re: &Regex, line: &'t str) -> Option<&'t str> {
    let caps = re.captures(line)?;
    if let Some(group) = caps.get(1) {
        return Some(group.as_str());
    }
    let whole = caps.get(0)?;
    if whole.as_str().contains(|c: char| c.is_ascii_digit()) {
        return Some(whole.as_str());
    }
    let before = line[..whole.start()].trim_end();
    let number_chars = |c: char| c.is_ascii_digit() || matches!(c, ',' | '.' | '\'');
    if before.ends_with(|c: char| c.is_ascii_digit()) {
        let start = before
            .char_indices()
            .rev()
            .take_while(|(_, c)| number_chars(*c))
            .last()
            .map_or(before.len(), |(i, _)| i);
        return Some(&before[start..]);
    }
    let after = line[whole.end()..].trim_start_matches([' ', '\t', ':', '=']);
    after
        .starts_with(|c: char| c.is_ascii_digit() || c == '-')
        .then_some(after)
}

/// The group `re` finds in `line`, and whether it is the value after the
/// match: its first capture group; without a group, or when the group
/// captured nothing (`by=r"user (\b)"`), the value written after the match,
/// read as a field's name (`by="user"` groups `user mila` by `mila`, as
/// `level=ERROR` by `ERROR` and `host: db-01` by `db-01`).
fn group_of<'t>(re: &Regex, line: &'t str) -> Option<(&'t str, bool)> {
    let caps = re.captures(line)?;
    if re.captures_len() > 1 {
        let group = caps.get(1).or_else(|| caps.get(0))?.as_str().trim();
        if !group.is_empty() {
            return Some((group, false));
        }
    }
    let after = line[caps.get(0)?.end()..].trim_start_matches([' ', '\t']);
    let after = after
        .strip_prefix([':', '='])
        .unwrap_or(after)
        .trim_start_matches([' ', '\t']);
    let end = after
        .char_indices()
        .find(|(_, c)| !(c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '@' | '/')))
        .map_or(after.len(), |(i, _)| i);
    Some((after[..end].trim_end_matches(['.', '-', '/']), true))
}

/// The first number written in `text`, and how many decimals it has.
/// Group separators (`,` `.` `'`, spaces) are read as people write them:
/// with both `.` and `,`, the last one is the decimal mark; a lone `,`
/// followed by exactly three digits groups thousands (`1,234`), otherwise
/// it is a decimal comma (`12,5`); a lone `.` is a decimal point, several
/// group thousands (`1.234.567`).
pub fn read_number(text: &str) -> Option<(f64, u32)> {
    let start = text.find(|c: char| c.is_ascii_digit())?;
    let negative = text[..start].ends_with('-') || text[..start].ends_with('−');
    let token: String = text[start..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || matches!(c, ',' | '.' | '\'' | '\u{a0}' | '\u{202f}'))
        .collect();
    let token = token.trim_end_matches(|c: char| !c.is_ascii_digit());
    let token: String = token
        .chars()
        .filter(|c| !matches!(c, '\'' | '\u{a0}' | '\u{202f}'))
        .collect();
    let (dots, commas) = (token.matches('.').count(), token.matches(',').count());
    let decimal_mark = match (dots, commas) {
        (0, 0) => None,
        (_, 0) if dots > 1 => None,
        (1, 0) => Some('.'),
        (0, 1) => {
            let after = &token[token.find(',')? + 1..];
            (after.len() != 3).then_some(',')
        }
        (0, _) => None,
        _ => Some(if token.rfind('.') > token.rfind(',') {
            '.'
        } else {
            ','
        }),
    };
    let (whole, fraction) = match decimal_mark {
        Some(mark) => {
            let at = token.rfind(mark)?;
            (&token[..at], &token[at + 1..])
        }
        None => (token.as_str(), ""),
    };
    let whole: String = whole.chars().filter(char::is_ascii_digit).collect();
    let number: f64 = format!("{whole}.{fraction}0").parse().ok()?;
    Some((
        if negative { -number } else { number },
        fraction.len() as u32,
    ))
}

fn round_to(x: f64, decimals: u32) -> f64 {
    let scale = 10f64.powi(decimals.min(12) as i32);
    (x * scale).round() / scale
}

/// A whole number as a JSON integer (Python prints `6636`, not `6636.0`).
fn number_value(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 9.0e15 {
        json!(x as i64)
    } else {
        json!(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::compile;
    use rlm_corpus::MemoryDocument;

    fn corpus() -> Corpus {
        let ledger = |user: &str, city: &str, n: usize| {
            (0..n)
                .map(|i| {
                    let kind = if i % 3 == 0 { "refund" } else { "purchase" };
                    format!(
                        "T{i:03} | user {user} | {kind} | {}.50 EUR | {city}\n",
                        10 + i
                    )
                })
                .collect::<String>()
        };
        Corpus::in_memory(
            &[
                MemoryDocument::new("a.txt", ledger("ada", "Oslo", 30)),
                MemoryDocument::new("b.txt", ledger("bo", "Riga", 12)),
                MemoryDocument::new("c.txt", "no lines here\n"),
            ],
            300,
        )
        .unwrap()
    }

    fn run(lines: &str, number: Option<&str>, by: Option<&str>) -> Tally {
        let (l, n, b) = (
            compile(lines, true).unwrap(),
            number.map(|p| compile(p, true).unwrap()),
            by.map(|p| compile(p, true).unwrap()),
        );
        let spec = TallySpec {
            lines: &l,
            also: &[],
            number: n.as_ref(),
            by: b.as_ref(),
        };
        tally(&corpus(), &spec, None).unwrap()
    }

    #[test]
    fn lines_are_counted_summed_and_ranked_exactly() {
        // Refunds: i = 0, 3, ..., 27 in a (10) and 0, 3, 6, 9 in b (4).
        let t = run(r"\| refund \|", Some(r"(\d+(?:\.\d+)?) EUR"), None);
        assert_eq!((t.lines, t.documents, t.numbered), (14, 2, 14));
        // a: sum of (10 + i) + 0.5 over i = 0, 3, ..., 27; b: over 0, 3, 6, 9.
        let a: f64 = (0..30).step_by(3).map(|i| 10.5 + i as f64).sum();
        let b: f64 = (0..12).step_by(3).map(|i| 10.5 + i as f64).sum();
        assert_eq!(t.rounded_sum(), a + b);
        let v = t.to_value(true, false);
        assert_eq!(v["sum"], number_value(a + b));
        assert_eq!(v["max"], json!(37.5));
        assert_eq!(v["min"], json!(10.5));
        assert!(
            v["max_line"]
                .as_str()
                .unwrap()
                .starts_with("T027 | user ada")
        );
        assert_eq!(v.get("by"), None);
        // Per group: lines most first, the top one named.
        let g = run("purchase", None, Some(r"user (\w+)")).to_value(false, true);
        assert_eq!(g["by"], json!([["ada", 20], ["bo", 8]]));
        assert_eq!(
            (g["top"].clone(), g["groups"].clone()),
            (json!("ada"), json!(2))
        );
        assert_eq!(g["lines"], json!(28));
        // Per group with numbers: by sum.
        let s = run("EUR", Some(r"(\d+\.\d+) EUR"), Some(r"\| (\w+)$")).to_value(true, true);
        assert_eq!(s["top"], json!("Oslo"));
        assert_eq!(s["by"][1][0], json!("Riga"));
        assert_eq!(s["by"][1][1], json!(12));
        // A group pattern some lines lack is counted apart.
        let u = run("EUR", None, Some("user (bo)")).to_value(false, true);
        assert_eq!(u["lines_without_group"], json!(30));
        // A list of patterns: lines holding all of them, in any order.
        let (l, also) = (
            compile("ada", true).unwrap(),
            [compile("refund", true).unwrap()],
        );
        let spec = TallySpec {
            lines: &l,
            also: &also,
            number: None,
            by: None,
        };
        let both = tally(&corpus(), &spec, None).unwrap();
        assert_eq!((both.lines, both.documents), (10, 1));
        // Nothing matches: zero, no extremes.
        let none = run("nowhere", Some(r"\d+"), None).to_value(true, false);
        assert_eq!(
            (none["lines"].clone(), none["sum"].clone()),
            (json!(0), json!(0))
        );
        assert_eq!(none.get("max"), None);
    }

    #[test]
    fn fields_are_the_words_the_lines_write_a_varying_value_after() {
        let (l, none) = (compile("refund", true).unwrap(), None);
        let spec = TallySpec {
            lines: &l,
            also: &[],
            number: none,
            by: none,
        };
        // `user` precedes ada or bo; `EUR` and `refund` precede a `|`.
        let found = fields(&corpus(), &spec, None).unwrap();
        assert_eq!(
            found,
            vec![Field {
                name: "user".into(),
                lines: 14,
                values: 2
            }]
        );
        // Prose: "in" precedes a city that repeats; a fixed phrase ("the
        // user") and a unique id ("order 7") are no fields.
        let prose: String = (0..12)
            .map(|i| {
                let city = ["Oslo", "Riga", "Bergen"][i % 3];
                format!("The user Ada paid order {i} in {city}.\n")
            })
            .collect();
        let corpus = Corpus::in_memory(&[MemoryDocument::new("p.txt", prose)], 300).unwrap();
        let l = compile("paid", true).unwrap();
        let spec = TallySpec {
            lines: &l,
            also: &[],
            number: None,
            by: None,
        };
        let names: Vec<String> = fields(&corpus, &spec, None)
            .unwrap()
            .into_iter()
            .map(|f| f.name)
            .collect();
        assert_eq!(names, ["in"]);
    }

    #[test]
    fn a_number_pattern_is_suggested_from_a_line() {
        let line = "T100151 | 2024-04-28 | user ravi | refund | 321 EUR | Lisbon";
        let p = number_pattern_for(line).unwrap();
        assert_eq!(p, r#"r"(\d+(?:[.,]\d+)?)\s?EUR""#);
        let re = compile(&p[2..p.len() - 1], true).unwrap();
        assert_eq!(number_of(&re, line), Some("321"));
        assert_eq!(
            number_pattern_for("Lieferung wog 12,5 kg, Nummer 7").as_deref(),
            Some(r#"r"(\d+(?:[.,]\d+)?)\s?kg""#)
        );
        assert_eq!(number_pattern_for("2024-01-02 | 17 | x9"), None);
    }

    #[test]
    fn a_pattern_without_a_group_reads_the_value_next_to_it() {
        let re = |p: &str| compile(p, true).unwrap();
        // number=: the match's own digits, else the number before or after it.
        let line = "T1 | user ravi | refund | 1,321.50 EUR | Lisbon";
        assert_eq!(number_of(&re("EUR"), line), Some("1,321.50"));
        assert_eq!(number_of(&re(r"\d+ EUR"), "x | 321 EUR"), Some("321 EUR"));
        assert_eq!(number_of(&re("latency"), "latency: 153 ms"), Some("153 ms"));
        assert_eq!(number_of(&re("Lisbon"), line), None);
        // by=: the value after a field's name, past one `:` or `=`.
        let group = |p: &str, line| group_of(&re(p), line).map(|(g, _)| g);
        assert_eq!(group("user", line), Some("ravi"));
        assert_eq!(group("level", "x level=ERROR y"), Some("ERROR"));
        assert_eq!(group("host", "host: db-01."), Some("db-01"));
        assert_eq!(group("Lisbon", line), Some(""));
        assert_eq!(group_of(&re(r"user (\w+)"), line), Some(("ravi", false)));
        // A group that captured nothing: the value after the match too.
        assert_eq!(group_of(&re(r"user (\b\b)"), line), Some(("ravi", true)));
        // Over the corpus: by the field, summing the amount next to EUR.
        let t = run("purchase", Some("EUR"), Some("user"));
        assert_eq!(t.lines, t.numbered);
        let names: Vec<&str> = t.groups.iter().map(|g| g.0.as_str()).collect();
        assert_eq!(names, ["ada", "bo"]);
        assert_eq!(t.ungrouped, 0);
    }

    #[test]
    fn numbers_are_read_as_people_write_them() {
        let n = |s: &str| read_number(s).map(|(x, _)| x);
        assert_eq!(n("6,636 EUR"), Some(6636.0));
        assert_eq!(n("1.234.567"), Some(1_234_567.0));
        assert_eq!(n("1.234,50 €"), Some(1234.5));
        assert_eq!(n("1,234.50"), Some(1234.5));
        assert_eq!(n("12,5 kg"), Some(12.5));
        assert_eq!(n("12.5"), Some(12.5));
        assert_eq!(n("1'234'000 CHF"), Some(1_234_000.0));
        assert_eq!(n("12\u{202f}345"), Some(12_345.0));
        assert_eq!(n("balance -40"), Some(-40.0));
        assert_eq!(n("42."), Some(42.0));
        assert_eq!(n("no digits"), None);
        assert_eq!(read_number("0.10"), Some((0.1, 2)));
        // Sums keep the decimals of what they add.
        let mut t = Tally {
            sum: 0.1 + 0.2,
            decimals: 2,
            ..Tally::default()
        };
        assert_eq!(t.rounded_sum(), 0.3);
        t.sum = 6636.0;
        assert_eq!(number_value(t.rounded_sum()), json!(6636));
    }
}
