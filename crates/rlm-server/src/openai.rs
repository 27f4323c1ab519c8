//! The OpenAI-compatible surface, for chat apps and SDKs that speak the
//! OpenAI API (Open WebUI, LibreChat, LangChain, the `openai` SDKs):
//! `GET /v1/models` lists the store as models, one per flow, and
//! `POST /v1/chat/completions` (streamed or not) answers the last user
//! message over the store. Earlier user/assistant messages are the
//! conversation (used like a session's history, saved nowhere); the answer's
//! checked sources are appended as Markdown; usage is the run's real usage.
//! Errors have OpenAI's shape (`{"error": {"message", "type", "param",
//! "code"}}`) and the statuses its SDKs map to exceptions.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, StreamExt};
use rlm_engine::{Answer, Turn};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::app::{App, AskBody, Run, RunStatus};
use crate::error::ApiError;

/// The models the store is offered as: `rlm` (the server's configured flow)
/// and one per flow.
pub(crate) const MODELS: [(&str, Option<&str>); 5] = [
    ("rlm", None),
    ("rlm-repl", Some("repl")),
    ("rlm-pipeline", Some("pipeline")),
    ("rlm-rag", Some("rag")),
    ("rlm-auto", Some("auto")),
];

/// An error in OpenAI's shape.
#[derive(Debug)]
pub(crate) struct OpenAiError {
    status: StatusCode,
    message: String,
    kind: &'static str,
    param: Option<&'static str>,
    code: Option<&'static str>,
    /// Answered with `Connection: close` (the request body was left unread).
    close: bool,
}

impl OpenAiError {
    /// A refusal of the access layer (401: `invalid_api_key`; 403).
    pub(crate) fn access(status: StatusCode, message: String) -> Self {
        let unauthorized = status == StatusCode::UNAUTHORIZED;
        OpenAiError {
            status,
            message,
            kind: if unauthorized {
                "authentication_error"
            } else {
                "permission_error"
            },
            param: None,
            code: unauthorized.then_some("invalid_api_key"),
            close: false,
        }
    }

    fn invalid(message: impl Into<String>, param: Option<&'static str>) -> Self {
        OpenAiError {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
            kind: "invalid_request_error",
            param,
            code: None,
            close: false,
        }
    }
}

impl From<ApiError> for OpenAiError {
    fn from(e: ApiError) -> Self {
        let kind = match e.status.as_u16() {
            400 | 404 | 409 | 410 | 413 | 415 | 422 => "invalid_request_error",
            429 => "rate_limit_error",
            _ => "server_error",
        };
        OpenAiError {
            close: e.closes(),
            status: e.status,
            message: e.message,
            kind,
            param: None,
            code: None,
        }
    }
}

impl IntoResponse for OpenAiError {
    fn into_response(self) -> Response {
        let body = json!({"error": {
            // One line of bounded length, as the API's messages: a model
            // name or a role is quoted as sent.
            "message": crate::error::one_line(self.message),
            "type": self.kind,
            "param": self.param,
            "code": self.code,
        }});
        let mut response = (self.status, Json(body)).into_response();
        if self.close {
            response.headers_mut().insert(
                axum::http::header::CONNECTION,
                axum::http::HeaderValue::from_static("close"),
            );
        }
        response
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `GET /v1/models`.
pub(crate) async fn list_models() -> Json<Value> {
    let created = unix_now();
    let data: Vec<Value> = MODELS
        .iter()
        .map(|(id, _)| json!({"id": id, "object": "model", "created": created, "owned_by": "rlm"}))
        .collect();
    Json(json!({"object": "list", "data": data}))
}

/// A message of a chat completion request. `content` is a string or a list
/// of parts (only text parts are read).
#[derive(Debug, Deserialize)]
struct ChatMessage {
    role: String,
    #[serde(default)]
    content: Value,
}

/// The fields of a chat completion request that matter here; the sampling
/// fields (temperature, max_tokens, …) are accepted and ignored: the
/// engine's budgets decide.
#[derive(Debug, Deserialize)]
pub(crate) struct ChatCompletionRequest {
    model: String,
    messages: Vec<ChatMessage>,
    #[serde(default)]
    stream: bool,
    #[serde(default)]
    stream_options: Option<StreamOptions>,
    /// rlm's extension (the SDKs' `extra_body={"sandbox": "cpython"}`):
    /// which Python runs the model's code, as the API field `sandbox`.
    #[serde(default)]
    sandbox: Option<String>,
    /// rlm's extension: how the agents reply each turn (`turn_format`).
    #[serde(default)]
    turn_format: Option<String>,
    /// `{"type": "json_schema", "json_schema": {"schema": ...}}` or
    /// `{"type": "json_object"}`: the reply's content is then the answer as
    /// JSON following the schema (the run's typed answer).
    #[serde(default)]
    response_format: Option<Value>,
}

/// The schema a request's `response_format` asks the answer in: `None` for
/// text, `{"type": "object"}` for `json_object`.
fn answer_schema(format: Option<&Value>) -> Result<Option<Value>, OpenAiError> {
    let invalid = |message: String| OpenAiError::invalid(message, Some("response_format"));
    let Some(format) = format.filter(|f| !f.is_null()) else {
        return Ok(None);
    };
    match format.get("type").and_then(Value::as_str) {
        Some("text") => Ok(None),
        Some("json_object") => Ok(Some(json!({"type": "object"}))),
        Some("json_schema") => match format.pointer("/json_schema/schema") {
            Some(schema) if schema.is_object() => Ok(Some(schema.clone())),
            _ => Err(invalid(
                "response_format of type json_schema needs json_schema.schema, a JSON Schema object".into(),
            )),
        },
        _ => Err(invalid(
            "response_format.type must be text, json_object or json_schema".into(),
        )),
    }
}

/// The reply's content: the answer's Markdown, or with a `response_format`
/// schema the typed answer's JSON (an error when no reply followed it).
fn reply_content(answer: &Answer, typed: bool) -> Result<String, OpenAiError> {
    if !typed {
        return Ok(answer_markdown(answer));
    }
    match answer.data.as_ref().and_then(|d| d.value.as_ref()) {
        Some(value) => Ok(value.to_string()),
        None => Err(OpenAiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: format!(
                "the answer could not be put into the response_format schema: {}",
                answer
                    .data
                    .as_ref()
                    .and_then(|d| d.error.as_deref())
                    .unwrap_or("no typed answer")
            ),
            kind: "server_error",
            param: Some("response_format"),
            code: None,
            close: false,
        }),
    }
}

#[derive(Debug, Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: bool,
}

/// The text of a message's content: a string, or the text parts joined.
fn content_text(content: &Value) -> Result<String, OpenAiError> {
    match content {
        Value::String(s) => Ok(s.clone()),
        Value::Null => Ok(String::new()),
        Value::Array(parts) => Ok(parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n")),
        _ => Err(OpenAiError::invalid(
            "a message's content must be a string or a list of parts",
            Some("messages"),
        )),
    }
}

/// The question (the last message, which must be the user's) and the
/// conversation before it as turns: each user message with the assistant
/// reply that followed it. System, developer and tool messages are left out:
/// the server's own briefing instructs the model.
fn question_and_history(messages: &[ChatMessage]) -> Result<(String, Vec<Turn>), OpenAiError> {
    let Some(last) = messages.last() else {
        return Err(OpenAiError::invalid(
            "messages is empty; send at least one user message with the question",
            Some("messages"),
        ));
    };
    if last.role != "user" {
        return Err(OpenAiError::invalid(
            format!(
                "the last message must be the user's question (it is a '{}' message)",
                last.role.chars().take(40).collect::<String>()
            ),
            Some("messages"),
        ));
    }
    let question = content_text(&last.content)?;
    let mut history = Vec::new();
    let mut pending: Option<String> = None;
    for m in &messages[..messages.len() - 1] {
        match m.role.as_str() {
            "user" => {
                if let Some(q) = pending.take() {
                    history.push(turn(q, String::new()));
                }
                pending = Some(content_text(&m.content)?);
            }
            "assistant" => {
                let answer = content_text(&m.content)?;
                history.push(turn(pending.take().unwrap_or_default(), answer));
            }
            "system" | "developer" | "tool" | "function" => {}
            other => {
                return Err(OpenAiError::invalid(
                    format!(
                        "unknown message role '{}': use system, user or assistant",
                        other.chars().take(40).collect::<String>()
                    ),
                    Some("messages"),
                ));
            }
        }
    }
    if let Some(q) = pending {
        history.push(turn(q, String::new()));
    }
    Ok((question, history))
}

fn turn(question: String, answer: String) -> Turn {
    Turn {
        question,
        answer,
        partial: false,
        citations: Vec::new(),
    }
}

/// The reply's Markdown: the answer, a partial answer's reason, the
/// numbered sources (the passages that entail the answer's claims), then
/// the related passages (found, but not judged to state their claim: never
/// sources), and how many claims each kind of passage backs.
pub(crate) fn answer_markdown(answer: &Answer) -> String {
    let sources = answer.sources();
    let related = answer.related_sources();
    let numbered: Vec<rlm_engine::Source> = sources.iter().chain(&related).cloned().collect();
    let mut out = with_reference_numbers(answer, &numbered);
    out.truncate(out.trim_end().len());
    if answer.partial {
        let why = answer
            .partial_reason
            .as_deref()
            .unwrap_or("a budget ran out");
        out.push_str(&format!("\n\n*Partial answer: {why}.*"));
    }
    passage_list(&mut out, "**Sources**", &sources, 0);
    passage_list(
        &mut out,
        "**Related passages** (found, but not judged to state their claim; not sources)",
        &related,
        sources.len(),
    );
    if let Some(g) = &answer.grounded
        && g.claims > 0
    {
        out.push_str(&format!(
            "\n\n*{} of {} claims entailed by their passage; {} related, {} contradicted, {} unverified, {} without a passage.*\n",
            g.supported, g.claims, g.related, g.contradicted, g.unverified, g.unsupported
        ));
    }
    out
}

/// A numbered Markdown list of passages under `title`, from `after + 1`.
fn passage_list(out: &mut String, title: &str, passages: &[rlm_engine::Source], after: usize) {
    if passages.is_empty() {
        return;
    }
    out.push_str(&format!("\n\n{title}\n"));
    for (i, s) in passages.iter().enumerate() {
        let place = match (&s.location, s.line, &s.chunk_id) {
            (None, None, None) => String::new(),
            (location, line, id) => format!(
                ", {}",
                rlm_engine::citations::place_words(location.as_deref(), line, id.as_deref())
            ),
        };
        let quote: String = s.quote.split_whitespace().collect::<Vec<_>>().join(" ");
        out.push_str(&format!(
            "{}. `{}`{place}: \"{}\"\n",
            after + i + 1,
            s.path.replace('`', "'"),
            quote.replace('"', "'")
        ));
    }
}

/// What the reply carries beyond OpenAI's fields (`rlm`): each claim with
/// whether its passage entails it and, apart, its quote check, numbered
/// into the sources and related passages of the Markdown.
fn grounding_json(answer: &Answer) -> Value {
    json!({
        "claims": answer.claim_summaries(),
        "sources": answer.sources(),
        "related_sources": answer.related_sources(),
        "grounded": answer.grounded,
        "counted": answer.counted,
    })
}

/// The answer with each citation marker the model wrote (`[[doc:1 "…"]]`)
/// replaced by the number of its passage (`[1]`) in the lists below it,
/// and markers that point to no checked passage removed: chat apps render
/// the text, and a raw marker means nothing to a reader.
fn with_reference_numbers(answer: &Answer, passages: &[rlm_engine::Source]) -> String {
    let mut text = answer.answer.clone();
    let mut markers: Vec<_> = answer.citations.iter().collect();
    markers.sort_by_key(|c| std::cmp::Reverse(c.answer_offset));
    for c in markers {
        let (start, end) = (c.answer_offset, c.answer_offset + c.marker.len());
        if text.get(start..end) != Some(c.marker.as_str()) {
            continue;
        }
        let number = c.status.is_valid().then(|| {
            passages.iter().position(|s| {
                Some(&s.path) == c.path.as_ref() && Some(&s.quote) == c.quote.as_ref()
            })
        });
        let replacement = match number.flatten() {
            Some(i) => format!("[{}]", i + 1),
            None => String::new(),
        };
        text.replace_range(start..end, &replacement);
    }
    text
}

/// What a finished run gives the client: its answer, or the error.
fn finished_answer(run: &Run) -> Result<Answer, OpenAiError> {
    let view = run.view();
    match (view.run.status, view.answer) {
        (RunStatus::Failed, _) | (_, None) => Err(OpenAiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: view
                .error
                .unwrap_or_else(|| "the question could not be answered".into()),
            kind: "server_error",
            param: None,
            code: None,
            close: false,
        }),
        (_, Some(value)) => serde_json::from_value(value).map_err(|e| OpenAiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: format!("the answer could not be read back: {e}"),
            kind: "server_error",
            param: None,
            code: None,
            close: false,
        }),
    }
}

fn usage_json(answer: &Answer) -> Value {
    let u = &answer.usage;
    json!({
        "prompt_tokens": u.input_tokens,
        "completion_tokens": u.output_tokens,
        "total_tokens": u.input_tokens + u.output_tokens,
        "prompt_tokens_details": {"cached_tokens": u.cached_input_tokens},
    })
}

fn finish_reason(answer: &Answer) -> &'static str {
    if answer.partial { "length" } else { "stop" }
}

/// `POST /v1/chat/completions`.
pub(crate) async fn chat_completions(
    State(app): State<Arc<App>>,
    body: Result<Json<ChatCompletionRequest>, JsonRejection>,
) -> Result<Response, OpenAiError> {
    let request = crate::body::json_body(
        body,
        "{\"model\": \"rlm\", \"messages\": [{\"role\": \"user\", \"content\": \"...\"}]} (GET /v1/models lists the models)",
    )?;
    let Some((_, flow)) = MODELS.iter().find(|(id, _)| *id == request.model) else {
        return Err(OpenAiError {
            status: StatusCode::NOT_FOUND,
            message: format!(
                "the model '{}' does not exist; GET /v1/models lists them ({})",
                request.model.chars().take(80).collect::<String>(),
                MODELS.map(|(id, _)| id).join(", ")
            ),
            kind: "invalid_request_error",
            param: Some("model"),
            code: Some("model_not_found"),
            close: false,
        });
    };
    let (question, history) = question_and_history(&request.messages)?;
    let schema = answer_schema(request.response_format.as_ref())?;
    let typed = schema.is_some();
    let ask = AskBody {
        response_schema: schema,
        question,
        flow: flow.map(str::to_string),
        history,
        sandbox: request.sandbox.clone(),
        turn_format: request.turn_format.clone(),
        ..AskBody::default()
    };
    let run = app.start_run(ask)?;
    let id = run.view().run.id;
    let guard = crate::app::CancelOnDrop(Some((app.clone(), id.clone())));
    let completion_id = format!("chatcmpl-{id}");
    let model = request.model.clone();
    let created = unix_now();
    if !request.stream {
        run.until_finished(|| {}).await;
        std::mem::forget(guard);
        let answer = finished_answer(&run)?;
        let body = json!({
            "id": completion_id,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": reply_content(&answer, typed)?},
                "finish_reason": finish_reason(&answer),
            }],
            "usage": usage_json(&answer),
            "rlm": grounding_json(&answer),
        });
        let mut body = body;
        if let Some(data) = answer.data.as_ref().filter(|_| typed) {
            // rlm's extension: each value's citations (SDKs keep unknown fields).
            body["rlm"] = json!({"data_citations": data.citations});
        }
        return Ok(Json(body).into_response());
    }

    // Streamed: the role at once, the answer when the run is done (the
    // engine commits an answer whole), then the finish, usage if asked, and
    // [DONE]. Keep-alive comments hold idle proxies open meanwhile.
    let include_usage = request.stream_options.is_some_and(|o| o.include_usage);
    let chunk = move |delta: Value, finish: Option<&str>| {
        json!({
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        })
    };
    let first = chunk(json!({"role": "assistant", "content": ""}), None);
    let rest = async move {
        run.until_finished(|| {}).await;
        std::mem::forget(guard);
        let mut events = Vec::new();
        match finished_answer(&run).and_then(|a| reply_content(&a, typed).map(|c| (a, c))) {
            Ok((answer, content)) => {
                events.push(chunk(json!({"content": content}), None));
                let mut last = chunk(json!({}), Some(finish_reason(&answer)));
                last["rlm"] = grounding_json(&answer);
                if include_usage {
                    last["usage"] = Value::Null;
                }
                events.push(last);
                if include_usage {
                    let mut usage = chunk(json!({}), None);
                    usage["choices"] = json!([]);
                    usage["usage"] = usage_json(&answer);
                    events.push(usage);
                }
            }
            // Headers are sent: the error goes in the stream, as OpenAI's does.
            Err(e) => events.push(json!({"error": {
                "message": e.message, "type": e.kind, "param": null, "code": null,
            }})),
        }
        stream::iter(
            events
                .into_iter()
                .map(|v| Event::default().data(v.to_string())),
        )
    };
    let events = stream::once(async move { Event::default().data(first.to_string()) })
        .chain(stream::once(rest).flatten())
        .chain(stream::once(async { Event::default().data("[DONE]") }))
        .map(Ok::<_, Infallible>);
    Ok(Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(10)))
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(role: &str, content: Value) -> ChatMessage {
        ChatMessage {
            role: role.into(),
            content,
        }
    }

    #[test]
    fn the_last_user_message_is_the_question_and_earlier_pairs_the_history() {
        let (q, history) = question_and_history(&[
            msg("system", json!("be brief")),
            msg("user", json!("Who signed it?")),
            msg("assistant", json!("Alice.")),
            msg(
                "user",
                json!([{"type": "text", "text": "When?"}, {"type": "image_url", "image_url": {}}]),
            ),
        ])
        .unwrap();
        assert_eq!(q, "When?");
        assert_eq!(history.len(), 1);
        assert_eq!(history[0].question, "Who signed it?");
        assert_eq!(history[0].answer, "Alice.");
    }

    #[test]
    fn bad_conversations_are_refused_with_what_to_send() {
        let e = question_and_history(&[]).unwrap_err();
        assert!(e.message.contains("messages is empty"), "{}", e.message);
        let e = question_and_history(&[msg("assistant", json!("hi"))]).unwrap_err();
        assert!(
            e.message.contains("must be the user's question"),
            "{}",
            e.message
        );
        let e = question_and_history(&[msg("wizard", json!("x")), msg("user", json!("q"))])
            .unwrap_err();
        assert!(e.message.contains("unknown message role"), "{}", e.message);
        let e = question_and_history(&[msg("user", json!(42))]).unwrap_err();
        assert!(
            e.message.contains("string or a list of parts"),
            "{}",
            e.message
        );
    }
}
