//! The `rag` flow (RLM off: the product behaves as plain retrieval-augmented
//! answering): top-k retrieval, one answer call, citations checked under the
//! claim-by-claim policy.

use rlm_llm::{Message, ModelRole};
use serde_json::json;

use crate::answer::{Answer, FlowReport, RetrievalReport, RouteDecision};
use crate::citations::{CitationPolicy, CitationSource, SourceChunk};
use crate::grounding;
use crate::notices::{Notice, write};
use crate::parse;
use crate::prompts::render;
use crate::request::AskRequest;
use crate::retrieval::{FileChunk, Hit, excerpts, stage1};
use crate::run::{Finished, ROOT_AGENT, Run};
use crate::trace::CallPurpose;

/// Prompt of the answer call.
pub const RAG_PROMPT: &str = include_str!("../../prompts/pipeline/rag_answer.md");
/// The one retry after a reply that is not an answer.
pub const RAG_RETRY: &str = include_str!("../../prompts/pipeline/rag_retry.md");

/// The one second look after a reply that says the passages do not answer.
pub const RAG_LOOK_AGAIN: &str = include_str!("../../prompts/pipeline/rag_look_again.md");

/// Sentences shown in the second look.
const LOOK_AGAIN_SENTENCES: usize = 5;

/// Characters of each passage in the prompt.
const PASSAGE_CHARS: usize = 4000;

/// Runs `rag`.
pub(crate) async fn run(
    fx: &Run,
    req: &AskRequest,
    route: Option<RouteDecision>,
    policy: CitationPolicy,
) -> Answer {
    let k = fx.config().flows.rag_k;
    let mut report = FlowReport {
        flow: "rag".into(),
        route,
        intent: None,
        retrieval: None,
        expansion: None,
        inspector: None,
        citation_policy: policy,
        dropped_claims: Vec::new(),
        unsupported_claims: Vec::new(),
    };
    let (hits, retrieval) = match stage1(
        fx,
        &req.question,
        k,
        false,
        req.pipeline.embedder.as_deref(),
    ) {
        Ok(r) => r,
        Err(e) => {
            let reason = e.to_string();
            fx.fallback(ROOT_AGENT, "retrieval", &reason);
            report.retrieval = Some(RetrievalReport::failed(&reason));
            let text = write(Notice::NoAnswer, fx.notice_language, &reason, "");
            return finish(fx, text, Some(reason), report).await;
        }
    };
    fx.step(
        ROOT_AGENT,
        "retrieval",
        format!(
            "Retrieval ({}, k = {k}): {} chunks",
            retrieval.mode,
            hits.len()
        ),
        json!(retrieval),
    );
    report.retrieval = Some(retrieval);
    if hits.is_empty() {
        let text = write(Notice::NoPassageMatched, fx.notice_language, "", "");
        return finish(fx, text, None, report).await;
    }
    let prompt = render(
        RAG_PROMPT,
        &[("question", &req.question), ("chunks", &listing(&hits))],
    );
    let mut messages = vec![Message::user(prompt)];
    let mut r = answer_call(fx, &messages).await;
    // A reply that is not an answer (only markers, an internal id, a
    // placeholder, the question again) is sent back once with what was
    // wrong; if the second is no better, it is committed as partial.
    let mut not_answer = None;
    if let Ok(reply) = &r
        && let Some(why) = parse::not_an_answer(reply, &req.question)
    {
        messages.push(Message::assistant(reply.clone()));
        messages.push(Message::user(render(
            RAG_RETRY,
            &[("why", &why), ("question", &req.question)],
        )));
        r = answer_call(fx, &messages).await;
        not_answer = r
            .as_ref()
            .ok()
            .and_then(|reply| parse::not_an_answer(reply, &req.question));
    }
    // A reply that says the passages do not answer, or whose claims no
    // sentence of them backs, gets one second look at the sentences sharing
    // most of the question's words, when there are such (small models
    // overlook a fact in a long passage, or answer from memory).
    if let Ok(reply) = &r
        && not_answer.is_none()
        && let Some(second) = second_look(fx, req, &hits, &mut messages, reply).await
    {
        r = Ok(second);
    }
    let (text, partial) = answer_text(fx, r, not_answer, &hits);
    finish(fx, text, partial, report).await
}

/// The retrieved passages as the answer prompt lists them.
fn listing(hits: &[Hit]) -> String {
    hits.iter()
        .map(|h| {
            let text: String = h.text.chars().take(PASSAGE_CHARS).collect();
            format!("[chunk:{}] ({})\n{}\n", h.chunk_id, h.path, text.trim_end())
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The answer text and why it is partial: the reply (partial when it is not
/// an answer, `not_answer` says why), or, when there is none, the retrieved
/// passages.
fn answer_text(
    fx: &Run,
    reply: Result<String, crate::run::CallError>,
    not_answer: Option<String>,
    hits: &[Hit],
) -> (String, Option<String>) {
    match reply {
        Ok(t) if !t.trim().is_empty() => {
            let partial = not_answer.map(|why| {
                fx.fallback(ROOT_AGENT, "rag_answer", &format!("not an answer: {why}"));
                format!("the answer is not an answer: {why}")
            });
            (t.trim().to_string(), partial)
        }
        other => {
            let reason = match &other {
                Err(e) => e.to_string(),
                Ok(_) => "the answer reply was empty".to_string(),
            };
            fx.fallback(
                ROOT_AGENT,
                "rag_answer",
                &format!("{reason}; the answer lists the retrieved passages"),
            );
            let chunks: Vec<FileChunk> = hits
                .iter()
                .map(|h| FileChunk {
                    id: h.chunk_id.clone(),
                    ordinal: h.ordinal,
                    text: h.text.clone(),
                    entry: true,
                })
                .collect();
            (
                format!(
                    "{}\n{}",
                    write(Notice::NoAnswerWritten, fx.notice_language, &reason, ""),
                    excerpts(&chunks)
                ),
                Some(reason),
            )
        }
    }
}

/// The second look: `None` when the reply needs none, no sentence shares
/// enough of the question, or the second reply is no better — the first
/// stands then. After an abstention any answer is taken; after an answer no
/// passage backs, only one a passage backs.
async fn second_look(
    fx: &Run,
    req: &AskRequest,
    hits: &[Hit],
    messages: &mut Vec<Message>,
    reply: &str,
) -> Option<String> {
    let corpus = fx.corpus();
    let shown: Vec<SourceChunk> = hits
        .iter()
        .filter_map(|h| corpus.chunk(&h.chunk_id))
        .collect();
    let abstained = parse::abstains(reply);
    if !abstained && grounding::backs_a_claim(reply, &req.question, &shown, corpus) {
        return None;
    }
    let best = grounding::question_sentences(&req.question, &shown, LOOK_AGAIN_SENTENCES);
    if best.is_empty() {
        return None;
    }
    // What the model is told, and what the trace says.
    let (why, seen) = if abstained {
        (
            "Your reply says the passages do not answer the question.",
            "the reply says the passages do not answer",
        )
    } else {
        (
            "No sentence of the passages states what your reply says.",
            "no passage backs the reply",
        )
    };
    fx.fallback(
        ROOT_AGENT,
        "rag_answer",
        &format!(
            "{seen}; shown again the {} sentences sharing most of the question's words",
            best.len()
        ),
    );
    let listing = best
        .iter()
        .map(|(id, sentence)| format!("[chunk:{id}] {sentence}"))
        .collect::<Vec<_>>()
        .join("\n");
    messages.push(Message::assistant(reply.to_string()));
    messages.push(Message::user(render(
        RAG_LOOK_AGAIN,
        &[
            ("why", why),
            ("sentences", &listing),
            ("question", &req.question),
        ],
    )));
    let second = answer_call(fx, messages).await.ok()?;
    let usable = !second.trim().is_empty()
        && parse::not_an_answer(&second, &req.question).is_none()
        && (abstained || grounding::backs_a_claim(&second, &req.question, &shown, corpus));
    usable.then_some(second)
}

/// One answer call of the root, on the conversation so far.
async fn answer_call(fx: &Run, messages: &[Message]) -> Result<String, crate::run::CallError> {
    fx.call(
        ROOT_AGENT,
        0,
        ModelRole::Root,
        messages,
        None,
        CallPurpose::Answer,
    )
    .await
}

async fn finish(
    fx: &Run,
    text: String,
    partial_reason: Option<String>,
    report: FlowReport,
) -> Answer {
    fx.finish(Finished {
        text,
        partial_reason,
        report: Some(report),
        file_summaries: Vec::new(),
    })
    .await
}
