//! The structured turn protocol and the extraction call, against the
//! scripted model server (real HTTP), real sandbox workers and a real store.

use crate::common;

use common::*;
use rlm_engine::citations::{CitationOrigin, CitationStatus};
use rlm_engine::{Answer, EngineConfig, TraceEvent, TurnFormat};
use rlm_llm::testing::{ReceivedRequest, Script, ScriptedServer};
use serde_json::{Value, json};

/// The chunk of the needle document (`b_notes.txt` of [`needle_store`]).
fn needle_ref() -> String {
    let doc = rlm_corpus::document_id("docs/b_notes.txt");
    format!("chunk:{}", rlm_corpus::chunk_id(&doc, 0))
}

fn turn(step: Value) -> String {
    json!({"thought": "next", "step": step}).to_string()
}

fn code(code: &str) -> String {
    turn(json!({"code": code}))
}

/// A root's first turn that declares the answer needs every line and runs
/// `code`.
fn counting_first_turn(code: &str) -> String {
    json!({"thought": "count them", "needs": "every line", "step": {"code": code}}).to_string()
}

fn answer(text: &str, source: Option<(&str, &str)>) -> String {
    let source = source.map_or(Value::Null, |(r, q)| json!({"ref": r, "quote": q}));
    turn(json!({"answer": [{"text": text, "source": source}]}))
}

/// The `ref` values a request's schema admits.
fn admitted_refs(body: &Value) -> Vec<String> {
    let schema = &body["response_format"]["json_schema"]["schema"];
    let steps = schema["properties"]["step"]["anyOf"].as_array().unwrap();
    let answer = steps
        .iter()
        .find(|s| s["properties"].get("answer").is_some())
        .unwrap();
    let source = &answer["properties"]["answer"]["items"]["properties"]["source"];
    source["anyOf"][1]["properties"]["ref"]["enum"]
        .as_array()
        .map(|a| a.iter().map(|v| v.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

fn finals(trace: &[rlm_engine::TraceRecord]) -> Vec<(String, String)> {
    trace
        .iter()
        .filter_map(|r| match &r.event {
            TraceEvent::Final { via, answer, .. } => Some((via.to_string(), answer.clone())),
            _ => None,
        })
        .collect()
}

/// What the model saw pasted back as its "answer": the engine's own
/// search lead, document header and chunk marker.
fn paste() -> String {
    format!(
        "Full-text search for the question found these passages (a lead, not proof: check them):\n[[{}]] in [DOCUMENT 1: docs/b_notes.txt]\n    The secret code is 4721. Keep it safe.",
        needle_ref()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_structured_turn_runs_code_then_commits_an_answer_with_the_models_own_source() {
    let ts = needle_store();
    let needle = needle_ref();
    let server = ScriptedServer::start(Script::new().on_sequence(
        root(),
        [
            code("for h in search(\"secret code\", 3):\n    print(h[\"chunk_id\"], h[\"text\"][:200])"),
            answer(
                "Der geheime Code lautet 4721.",
                Some((&needle, "The secret code is 4721")),
            ),
        ],
    ))
    .await;
    let engine = engine(&server, config()).await;
    let (answer, trace) = ask(&engine, &ts, "What is the secret code?").await;
    assert!(!answer.partial, "{answer:?}");
    assert!(
        answer.answer.starts_with("Der geheime Code lautet 4721."),
        "{}",
        answer.answer
    );
    assert_eq!(answer.citations.len(), 1, "{:?}", answer.citations);
    let cite = &answer.citations[0];
    assert_eq!(cite.status, CitationStatus::Verified);
    assert_eq!(cite.origin, CitationOrigin::Model, "the model wrote it");
    assert_eq!(
        finals(&trace),
        [("structured".to_string(), answer.answer.clone())]
    );

    let reqs: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| !is_judge(r))
        .collect();
    assert_eq!(reqs.len(), 2);
    // Each turn asks for the JSON turn; its sources may name only what the
    // run has shown: the inspection printed the needle's chunk.
    for r in &reqs {
        assert_eq!(
            r.body["response_format"]["type"], "json_schema",
            "{}",
            r.body
        );
        assert!(
            r.body.get("stop").is_none(),
            "no stop sequence cuts a JSON turn"
        );
    }
    let first = admitted_refs(&reqs[0].body);
    assert!(first.contains(&needle), "{first:?}");
    assert!(
        first
            .iter()
            .all(|r| r.starts_with("chunk:") || r.starts_with("doc:"))
    );
    let second = admitted_refs(&reqs[1].body);
    assert!(
        first.iter().all(|r| second.contains(r)),
        "the list only grows"
    );
    // The prompts teach the JSON turn, not FINAL.
    let system = reqs[0].system();
    assert!(system.contains("\"step\""), "{system}");
    assert!(!system.contains("FINAL("), "{system}");
    assert!(reqs[1].last_message().contains("4721"), "the cell ran");
}

/// The `citations` steps that anchored a source, as their JSON.
fn anchorings(trace: &[rlm_engine::TraceRecord]) -> Vec<Value> {
    trace
        .iter()
        .filter_map(|r| match &r.event {
            TraceEvent::FlowStep { step, data, .. } if step == "citations" => {
                data.get("anchored").cloned()
            }
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_source_naming_the_wrong_document_or_drifting_from_its_quote_is_anchored() {
    let ts = needle_store();
    let needle = needle_ref();
    let statements = json!([
        // The quote is verbatim, but from document 1, not 0.
        {"text": "The code is 4721.", "source": {"ref": "doc:0", "quote": "The secret code is 4721."}},
        // The quote starts verbatim, then goes on in the model's words.
        {"text": "It must be kept safe.", "source": {"ref": &needle,
            "quote": "The secret code is 4721. Keep it safe from the visitors"}},
    ]);
    let server = ScriptedServer::start(Script::new().on_sequence(
        root(),
        [
            code("print(search(\"secret code\", 3)[0][\"text\"])"),
            turn(json!({"answer": statements})),
        ],
    ))
    .await;
    let engine = engine(&server, config()).await;
    let (answer, trace) = ask(&engine, &ts, "What is the secret code?").await;
    assert!(!answer.partial, "{answer:?}");
    assert_eq!(answer.citations.len(), 2, "{:?}", answer.citations);
    let doc = rlm_corpus::document_id("docs/b_notes.txt");
    for c in &answer.citations {
        assert_eq!(c.status, CitationStatus::Verified, "{c:?}");
        assert_eq!(c.origin, CitationOrigin::Model, "{c:?}");
        assert_eq!(c.doc_id.as_deref(), Some(doc.as_str()), "{c:?}");
    }
    assert_eq!(
        answer.citations[1].quote.as_deref(),
        Some("The secret code is 4721. Keep it safe"),
        "only the verbatim words stay a quote"
    );
    let steps = anchorings(&trace);
    assert_eq!(steps.len(), 1, "{steps:?}");
    let repairs = steps[0].as_array().unwrap();
    assert_eq!(repairs[0]["moved"]["from"], "doc:0", "{repairs:?}");
    assert_eq!(repairs[0]["moved"]["to"], needle.as_str(), "{repairs:?}");
    assert_eq!(
        repairs[1]["cut"]["quote"],
        "The secret code is 4721. Keep it safe from the visitors"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_quote_nothing_the_run_saw_holds_stays_unverified() {
    let ts = needle_store();
    let server = ScriptedServer::start(Script::new().on_sequence(
        root(),
        [answer(
            "The code is 9999.",
            Some((
                "doc:1",
                "The vault combination is 9999, written on the wall",
            )),
        )],
    ))
    .await;
    let engine = engine(&server, config()).await;
    let (answer, trace) = ask(&engine, &ts, "What is the secret code?").await;
    assert_eq!(answer.citations.len(), 1, "{:?}", answer.citations);
    assert_eq!(answer.citations[0].status, CitationStatus::QuoteNotFound);
    assert!(anchorings(&trace).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_text_protocol_sends_no_schema() {
    let ts = needle_store();
    let server = ScriptedServer::start(Script::new().on(
        root(),
        "FINAL(The secret code is 4721 [[doc:1 \"The secret code is 4721\"]])",
    ))
    .await;
    let engine = engine(
        &server,
        EngineConfig {
            turn_format: TurnFormat::Text,
            ..config()
        },
    )
    .await;
    let (answer, _) = ask(&engine, &ts, "What is the secret code?").await;
    assert!(answer.answer.contains("4721"), "{}", answer.answer);
    let reqs = server.requests();
    assert!(
        reqs[0].body.get("response_format").is_none(),
        "{}",
        reqs[0].body
    );
    assert!(reqs[0].system().contains("FINAL("));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reply_that_is_not_a_structured_turn_is_read_by_the_text_protocol() {
    let ts = needle_store();
    let server = ScriptedServer::start(Script::new().on_sequence(
        root(),
        [
            repl("print(context.count('secret'))"),
            "FINAL(The secret code is 4721 [[doc:1 \"The secret code is 4721\"]])".to_string(),
        ],
    ))
    .await;
    let engine = engine(&server, config()).await;
    let (answer, trace) = ask(&engine, &ts, "What is the secret code?").await;
    assert!(!answer.partial);
    assert!(answer.answer.contains("4721"));
    let fallbacks: Vec<String> = trace
        .iter()
        .filter_map(|r| match &r.event {
            TraceEvent::Fallback { kind, .. } => Some(kind.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(fallbacks, ["structured_reply"], "noted once");
}

/// Whatever the protocol, a model that only ever pastes the engine's search
/// output ends with a partial answer that is not the paste.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_whose_model_only_pastes_the_search_output_ends_partial_not_with_the_paste() {
    for format in [TurnFormat::Text, TurnFormat::Structured] {
        let ts = needle_store();
        let pasted = match format {
            TurnFormat::Text => paste(),
            _ => answer(&paste(), None),
        };
        let server = ScriptedServer::start(Script::new().otherwise(pasted)).await;
        let engine = engine(
            &server,
            EngineConfig {
                turn_format: format,
                ..config()
            },
        )
        .await;
        let (answer, trace) = ask(&engine, &ts, "What is the secret code?").await;
        assert!(answer.partial, "{format:?}: {answer:?}");
        assert!(
            !rlm_engine::parse::holds_engine_output(&answer.answer),
            "{format:?}: {}",
            answer.answer
        );
        assert!(
            answer.answer.contains("docs/b_notes.txt"),
            "it says where it looked: {}",
            answer.answer
        );
        let vias: Vec<String> = finals(&trace).into_iter().map(|(v, _)| v).collect();
        assert_eq!(vias, ["extraction"], "{format:?}");
        // The extraction call was asked for a structured answer over the
        // passages, the needle among them.
        let reqs = server.requests();
        let extraction = reqs
            .iter()
            .find(|r| {
                r.last_message()
                    .contains("A research run on the question below")
            })
            .expect("an extraction call");
        assert!(
            extraction
                .last_message()
                .contains("The secret code is 4721"),
            "{}",
            extraction.last_message()
        );
        assert!(admitted_refs(&extraction.body).contains(&needle_ref()));
    }
}

/// A tally's note copied back, as an answer or as what was not found, is
/// the engine's output too: refused, and never the outcome.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_whose_model_pastes_a_tally_note_ends_partial_not_with_the_note() {
    let ts = needle_store();
    let copied = "If the question asks for a fact stated in a passage rather than a count, search for it instead.";
    let server = ScriptedServer::start(
        Script::new()
            .on(synthesis(), turn(json!({"not_found": copied})))
            .on_sequence(
                root(),
                [
                    code("print(tally('no such word anywhere'))"),
                    answer(copied, None),
                ],
            )
            .on(root(), turn(json!({"not_found": copied}))),
    )
    .await;
    let engine = engine(&server, config()).await;
    let (answer, trace) = ask(&engine, &ts, "What is the secret code?").await;
    assert!(answer.partial, "{answer:?}");
    assert!(
        !answer.answer.contains("rather than a count"),
        "{}",
        answer.answer
    );
    assert!(
        answer.answer.contains("docs/"),
        "it says where it looked: {}",
        answer.answer
    );
    let reqs = server.requests();
    let told = reqs
        .iter()
        .any(|r| r.last_message().contains("the notes its functions print"));
    assert!(told, "the copied answer was sent back");
    let vias: Vec<String> = finals(&trace).into_iter().map(|(v, _)| v).collect();
    assert_eq!(vias, ["extraction"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_extraction_call_answers_when_the_last_turn_gives_only_prose() {
    let ts = needle_store();
    let needle = needle_ref();
    let server = ScriptedServer::start(
        Script::new()
            .on(
                synthesis(),
                answer(
                    "The secret code is 4721.",
                    Some((&needle, "The secret code is 4721")),
                ),
            )
            .on(root(), "I am not sure yet what to do about this."),
    )
    .await;
    let engine = engine(
        &server,
        EngineConfig {
            turn_format: TurnFormat::Text,
            ..config()
        },
    )
    .await;
    let (answer, trace) = ask(&engine, &ts, "What is the secret code?").await;
    assert!(
        !answer.partial,
        "an extracted answer is an answer: {answer:?}"
    );
    assert!(answer.answer.starts_with("The secret code is 4721."));
    assert_eq!(answer.citations[0].status, CitationStatus::Verified);
    let vias: Vec<String> = finals(&trace).into_iter().map(|(v, _)| v).collect();
    assert_eq!(vias, ["extraction"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn not_found_asks_the_extraction_call_and_its_not_found_is_partial() {
    let ts = needle_store();
    let not_found = turn(json!({"not_found": "Die Dokumente nennen keinen Code."}));
    let server = ScriptedServer::start(
        Script::new()
            .on(synthesis(), not_found.clone())
            .on(root(), not_found),
    )
    .await;
    let engine = engine(&server, config()).await;
    // Asked in German: an answer in another language would be rewritten.
    let (answer, _) = ask(
        &engine,
        &ts,
        "Wie lautet der geheime Code in den Dokumenten?",
    )
    .await;
    assert!(answer.partial);
    assert_eq!(answer.answer, "Die Dokumente nennen keinen Code.");
    assert!(
        answer
            .partial_reason
            .as_deref()
            .unwrap()
            .contains("do not answer"),
        "{answer:?}"
    );
    assert_eq!(server.requests().len(), 2, "one turn, one extraction call");
}

/// A server that refuses `response_format`: the first request is sent again
/// without it, later ones go without it straight away, the run answers and
/// the trace says why the replies were text.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_endpoint_that_refuses_the_schema_gets_text_turns_with_a_trace_note() {
    let ts = needle_store();
    let server = ScriptedServer::start(Script::new().reject_schemas().on_sequence(
        root(),
        [
            repl("print(context.count('secret'))"),
            "FINAL(The secret code is 4721 [[doc:1 \"The secret code is 4721\"]])".to_string(),
        ],
    ))
    .await;
    let engine = engine(&server, config()).await;
    let (answer, trace) = ask(&engine, &ts, "What is the secret code?").await;
    assert!(!answer.partial, "{answer:?}");
    assert!(answer.answer.contains("4721"));
    // The root model's first request is refused, later ones go without
    // the schema (the judge's model is another: it is refused on its own).
    let reqs: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.model == "root-model")
        .collect();
    let outcomes: Vec<&str> = reqs.iter().map(|r| r.outcome.as_str()).collect();
    assert_eq!(outcomes, ["schema_rejected", "text", "text"]);
    assert!(reqs.last().unwrap().body.get("response_format").is_none());
    let notes: Vec<String> = trace
        .iter()
        .filter_map(|r| match &r.event {
            TraceEvent::Fallback { kind, reason, .. } if kind == "structured_reply" => {
                Some(reason.clone())
            }
            _ => None,
        })
        .collect();
    assert!(
        notes.iter().any(|n| n.contains("refused the reply schema")),
        "{notes:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_roots_first_turn_declares_what_the_answer_needs_and_partial_reads_are_named() {
    let ts = needle_store();
    let first = counting_first_turn("print(len(search('secret', 3)))");
    let server = ScriptedServer::start(Script::new().on_sequence(
        root(),
        [
            first,
            code("print(tally('secret'))"),
            code("print(tally('secret'))"),
            answer("There is 1 line about the code.", None),
        ],
    ))
    .await;
    let engine = engine(&server, config()).await;
    let (answer, trace) = ask(&engine, &ts, "How many lines mention the secret?").await;
    assert_eq!(answer.answer, "There is 1 line about the code.");
    let reqs: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| !is_judge(r))
        .collect();
    // Only the first turn asks what the answer needs, after its thought.
    let schema = |i: usize| reqs[i].body["response_format"]["json_schema"]["schema"].clone();
    assert_eq!(
        schema(0)["required"],
        json!(["thought", "needs", "step"]),
        "{}",
        schema(0)
    );
    assert_eq!(
        schema(0)["properties"]["needs"]["enum"],
        json!(["one passage", "every line"])
    );
    assert!(schema(1)["properties"].get("needs").is_none());
    assert!(reqs[0].first_user().contains("\"needs\": \"one passage\""));
    // Code that reads part of the corpus after "every line" is named; code
    // that reads it all is not.
    let turn2 = reqs[1].last_message();
    assert!(
        turn2.contains("you said the answer needs every line, and this code read only part"),
        "{turn2}"
    );
    assert!(!reqs[2].last_message().contains("you said the answer needs"));
    // The same count again is the answer's evidence: the last turn, which
    // restates it.
    let turn4 = reqs[3].last_message();
    assert!(turn4.contains("Your last count: "), "{turn4}");
    let declared: Vec<String> = trace
        .iter()
        .filter_map(|r| match &r.event {
            TraceEvent::FlowStep { step, message, .. } if step == "strategy" => {
                Some(message.clone())
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        declared,
        ["The root declared that the answer needs every line"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_answer_that_needs_every_line_is_refused_once_until_a_line_is_counted() {
    let ts = needle_store();
    let first = counting_first_turn("print(tally('no such word anywhere'))");
    let server = ScriptedServer::start(Script::new().on_sequence(
        root(),
        [
            first,
            // A number no code of the model counted: refused once.
            answer("There are 7 lines about the code.", None),
            code("print(tally('secret'))"),
            answer("There is 1 line about the code.", None),
        ],
    ))
    .await;
    let engine = engine(&server, config()).await;
    let (answer, _) = ask(&engine, &ts, "How many lines mention the secret?").await;
    assert_eq!(answer.answer, "There is 1 line about the code.");
    assert!(
        answer.partial_reason.is_none(),
        "{:?}",
        answer.partial_reason
    );
    let reqs: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| !is_judge(r))
        .collect();
    let turn3 = reqs[2].last_message();
    assert!(
        turn3.contains("you said it needs every line, but no code of yours has counted a line yet"),
        "{turn3}"
    );
    // Counted now: the next answer is taken without that note.
    assert!(
        !reqs[3]
            .last_message()
            .contains("no code of yours has counted")
    );
}

/// A run that counts every line of "secret", then gives `answers` in turn:
/// the answer and the requests (the judge's aside).
async fn count_then_answer(answers: [&str; 2]) -> (Answer, Vec<ReceivedRequest>) {
    let ts = needle_store();
    let first = counting_first_turn("print(tally('secret'))");
    let server = ScriptedServer::start(Script::new().on_sequence(
        root(),
        [first, answer(answers[0], None), answer(answers[1], None)],
    ))
    .await;
    let engine = engine(&server, config()).await;
    let (answer, _) = ask(&engine, &ts, "How many lines mention the secret?").await;
    let reqs = server
        .requests()
        .into_iter()
        .filter(|r| !is_judge(r))
        .collect();
    (answer, reqs)
}

/// A counted answer whose number nothing showed is refused once, with the
/// count it printed taken next; a model that insists has its number taken (the note is no
/// loop).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_counted_answer_with_a_number_never_shown_is_refused_once() {
    let (answer, reqs) = count_then_answer([
        "There are 7777 lines about the code.",
        "There is 1 line about the code.",
    ])
    .await;
    assert_eq!(answer.answer, "There is 1 line about the code.");
    assert!(
        answer.partial_reason.is_none(),
        "{:?}",
        answer.partial_reason
    );
    assert_eq!(reqs.len(), 3);
    let turn3 = reqs[2].last_message();
    assert!(
        turn3.contains("it states 7777, but no output above printed 7777"),
        "{turn3}"
    );
    let (answer, _) = count_then_answer([
        "There are 7777 lines about the code.",
        "There are 7778 lines about the code.",
    ])
    .await;
    assert_eq!(answer.answer, "There are 7778 lines about the code.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_last_turn_after_every_line_restates_the_last_count() {
    let ts = needle_store();
    let first = counting_first_turn("print(tally('secret'))");
    let server = ScriptedServer::start(Script::new().on_sequence(
        root(),
        [
            first,
            code("print('looking again')"),
            answer("There is 1 line about the code.", None),
        ],
    ))
    .await;
    let mut two_turns = config();
    two_turns.budget.max_iterations = 2;
    let engine = engine(&server, two_turns).await;
    let (answer, _) = ask(&engine, &ts, "How many lines mention the secret?").await;
    assert_eq!(answer.answer, "There is 1 line about the code.");
    let reqs: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| !is_judge(r))
        .collect();
    let last = reqs[2].last_message();
    assert!(
        last.contains("Your last count: tally(\"secret\"): 2 lines in 2 documents."),
        "{last}"
    );
    // Turns before the last one carry no such reminder.
    assert!(!reqs[1].last_message().contains("Your last count"));
}
