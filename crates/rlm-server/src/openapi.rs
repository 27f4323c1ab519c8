//! The OpenAPI 3.1 document of the API (`GET /api/openapi.json`), written by
//! hand next to the handlers it describes; a test checks that every route
//! of the router is in it.

use rlm_engine::values::{NUMERIC_SETTINGS, Range};
use serde_json::{Value, json};

fn error_response(description: &str) -> Value {
    json!({"description": description, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}})
}

fn json_response(description: &str, schema: &str) -> Value {
    json!({"description": description, "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{schema}")}}}})
}

fn path_param(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "path", "required": true, "description": description, "schema": {"type": "string"}})
}

/// The document.
pub fn document() -> Value {
    let ask_body = json!({"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/AskBody"}}}});
    let mut doc = json!({
        "openapi": "3.1.0",
        "info": {
            "title": "rlm",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Questions over a document store, answered by Recursive Language Models: the corpus is a variable in a sandboxed REPL the model programs. Every step of a run streams as a server-sent event; answers cite chunks and the citations are verified."
        },
        "paths": {
            "/": {"get": {"summary": "The web UI", "responses": {"200": {"description": "HTML page", "content": {"text/html": {}}}}}},
            "/api/info": {"get": {"summary": "Store, models, default settings and limits", "responses": {"200": {"description": "Server information", "content": {"application/json": {"schema": {"type": "object"}}}}}}},
            "/api/openapi.json": {"get": {"summary": "This document", "responses": {"200": {"description": "OpenAPI 3.1", "content": {"application/json": {}}}}}},
            "/api/runs": {
                "get": {
                    "summary": "Runs, newest first",
                    "parameters": [{"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 500, "default": 50}}],
                    "responses": {"200": {"description": "Runs", "content": {"application/json": {"schema": {"type": "object", "properties": {"runs": {"type": "array", "items": {"$ref": "#/components/schemas/RunSummary"}}}}}}}}
                },
                "post": {
                    "summary": "Start answering a question; follow its steps at `events`",
                    "requestBody": ask_body,
                    "responses": {
                        "202": {"description": "Started", "content": {"application/json": {"schema": {"type": "object", "properties": {"id": {"type": "string"}, "status": {"const": "running"}, "url": {"type": "string"}, "events": {"type": "string"}}}}}},
                        "400": error_response("The request is invalid (the message names the field)"),
                        "413": error_response("The body is too large"),
                        "408": error_response("The body did not arrive within the body timeout"),
                        "415": error_response("The body is not JSON"),
                        "429": error_response("Too many runs in progress; retry later (Retry-After)"),
                        "507": error_response("The run's record cannot be saved (disk full); nothing was asked of the model")
                    }
                }
            },
            "/api/chat": {"post": {
                "summary": "Answer a question and return when done (closing the connection cancels it)",
                "requestBody": ask_body,
                "responses": {
                    "200": json_response("The finished run with its answer", "RunView"),
                    "400": error_response("The request is invalid"),
                    "408": error_response("The body did not arrive within the body timeout"),
                    "429": error_response("Too many runs in progress"),
                    "507": error_response("Answered but not (all) saved, or not started for lack of space: `error.message` says what and why; `run` (RunView) is beside `error` when it was answered")
                }
            }},
            "/api/runs/{id}": {
                "parameters": [path_param("id", "Run id")],
                "get": {"summary": "A run and, once finished, its answer", "responses": {"200": json_response("The run", "RunView"), "404": error_response("No such run"), "410": error_response("The run's saved record is cut short or missing (a crash or a full disk)")}},
                "delete": {"summary": "Cancel a running run (its answer becomes partial)", "responses": {"202": json_response("Cancelling", "RunView"), "404": error_response("No such run"), "409": error_response("Already finished")}}
            },
            "/api/runs/{id}/events": {
                "parameters": [path_param("id", "Run id"), {"name": "Last-Event-ID", "in": "header", "required": false, "schema": {"type": "integer"}, "description": "Resume after this sequence number"}],
                "get": {
                    "summary": "The run's steps as server-sent events: `trace` events (data: a TraceRecord, id: its sequence number) from the first (or after Last-Event-ID), live until the run ends, then one `end` event (data: RunView)",
                    "responses": {"200": {"description": "Event stream", "content": {"text/event-stream": {"schema": {"$ref": "#/components/schemas/TraceRecord"}}}}, "404": error_response("No such run")}
                }
            },
            "/api/sessions": {"get": {"summary": "Sessions, most recently used first", "responses": {"200": {"description": "Sessions", "content": {"application/json": {"schema": {"type": "object", "properties": {"sessions": {"type": "array", "items": {"$ref": "#/components/schemas/SessionSummary"}}}}}}}}}},
            "/api/sessions/{name}": {
                "parameters": [path_param("name", "Session name: 1-64 letters, digits, '-', '_' or '.'")],
                "get": {
                    "summary": "One bounded page of a session: its newest turns before `before` (at most `limit` and 1 MiB of them) and its kept findings",
                    "parameters": [
                        {"name": "before", "in": "query", "schema": {"type": "integer", "minimum": 0}, "description": "Turns before this position (0 = the oldest kept turn); default: the newest"},
                        {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20}}
                    ],
                    "responses": {"200": json_response("The page", "Session"), "400": error_response("Invalid name"), "404": error_response("No such session")}
                },
                "delete": {"summary": "Delete a session", "responses": {"204": {"description": "Deleted"}, "400": error_response("Invalid name"), "404": error_response("No such session")}}
            },
            "/api/chunks/{id}": {
                "parameters": [path_param("id", "Chunk id (`<document id>-<n>`), as cited in answers")],
                "get": {"summary": "A chunk: its document, span and text (citations open it)", "responses": {"200": json_response("The chunk", "Chunk"), "404": error_response("No such chunk")}}
            }
        },
        "components": {"schemas": {
            "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "object", "properties": {"status": {"type": "integer"}, "message": {"type": "string"}}}, "run": {"$ref": "#/components/schemas/RunView"}}},
            "AskBody": {"type": "object", "required": ["question"], "additionalProperties": false, "properties": {
                "question": {"type": "string", "minLength": 1},
                "session": {"type": "string", "pattern": "^[A-Za-z0-9._-]{1,64}$"},
                "flow": {"enum": ["repl", "pipeline", "rag", "auto"]},
                "use_rlm": {"type": "boolean", "description": "RLM switch: true → the configured RLM flow, false → rag; ignored when flow is given"},
                "inspector": {"enum": ["iterative", "per-chunk", "hypothesis", "repl"]},
                "citations": {"enum": ["strict", "best_effort"]},
                "coverage": {"type": "boolean", "description": "also report the documents that match the question but back no claim (grounded.coverage)"},
                "max_llm_calls": number_schema("RLM_MAX_LLM_CALLS"),
                "max_iterations": number_schema("RLM_MAX_CALLS"),
                "max_depth": number_schema("RLM_MAX_DEPTH"),
                "max_cost_usd": number_schema("RLM_MAX_COST_USD"),
                "max_wall_secs": number_schema("RLM_MAX_WALL_SECS"),
                "briefing": {"type": "string"}
            }},
            "RunStatus": {"enum": ["running", "done", "failed", "cancelled"]},
            "RunView": {"type": "object", "properties": {
                "id": {"type": "string"}, "question": {"type": "string"}, "session": {"type": ["string", "null"]},
                "flow": {"type": "string"}, "status": {"$ref": "#/components/schemas/RunStatus"},
                "started_at": {"type": "string", "format": "date-time"}, "finished_at": {"type": ["string", "null"]},
                "answer": {"oneOf": [{"$ref": "#/components/schemas/Answer"}, {"type": "null"}]},
                "error": {"type": ["string", "null"]}
            }},
            "RunSummary": {"type": "object", "properties": {
                "id": {"type": "string"}, "question": {"type": "string"}, "session": {"type": ["string", "null"]},
                "flow": {"type": "string"}, "status": {"$ref": "#/components/schemas/RunStatus"},
                "started_at": {"type": "string"}, "finished_at": {"type": ["string", "null"]}, "partial": {"type": ["boolean", "null"]}
            }},
            "Answer": {"type": "object", "description": "As `rlm ask --json` prints it", "properties": {
                "answer": {"type": "string", "description": "Text with citation markers [[chunk:ID \"quote\"]] / [[doc:N \"quote\"]]"},
                "partial": {"type": "boolean"}, "partial_reason": {"type": ["string", "null"]},
                "citations": {"type": "array", "items": {"$ref": "#/components/schemas/Citation"}},
                "verification": {"type": ["object", "null"]},
                "usage": {"type": "object", "properties": {"calls": {"type": "integer"}, "input_tokens": {"type": "integer"}, "output_tokens": {"type": "integer"}, "cached_input_tokens": {"type": "integer"}, "cost_usd": {"type": ["number", "null"]}, "wall_ms": {"type": "integer"}, "by_depth": {"type": "array"}}},
                "trace": {"type": "object"}, "findings": {"type": "array"},
                "findings_omitted": {"type": "integer", "description": "Findings beyond what a session turn keeps, left out"},
                "file_summaries": {"type": "array"}, "flow_report": {"type": "object"}
            }},
            "Citation": {"type": "object", "properties": {
                "marker": {"type": "string"}, "id": {"type": "string"}, "quote": {"type": ["string", "null"]},
                "chunk_id": {"type": ["string", "null"]}, "doc_id": {"type": ["string", "null"]}, "path": {"type": ["string", "null"]},
                "byte_start": {"type": ["integer", "null"]}, "byte_end": {"type": ["integer", "null"]},
                "status": {"enum": ["verified", "id_only", "unknown_id", "quote_not_found", "path_mismatch"]},
                "detail": {"type": ["string", "null"]}
            }},
            "TraceRecord": {"type": "object", "required": ["seq", "t_ms", "ts", "type"], "properties": {
                "seq": {"type": "integer"}, "t_ms": {"type": "integer"}, "ts": {"type": "string"},
                "type": {"enum": ["run_started", "llm_request", "llm_delta", "llm_response", "llm_error", "cell", "cell_output", "subcall_start", "subcall_end", "finding", "final", "verification", "budget_exhausted", "error", "flow_step", "fallback", "run_finished"]},
                "agent": {"type": "string", "description": "Tree position: 0 is the root, 0.2 its third child"}
            }},
            "SessionSummary": {"type": "object", "properties": {"name": {"type": "string"}, "turns": {"type": "integer"}, "findings": {"type": "integer"}, "updated_at": {"type": "string"}}},
            "Session": {"type": "object", "properties": {
                "name": {"type": "string"},
                "turns_total": {"type": "integer"}, "first": {"type": "integer", "description": "Position of history[0]; pass as `before` for older turns"},
                "findings_total": {"type": "integer"},
                "history": {"type": "array", "items": {"type": "object", "properties": {"question": {"type": "string"}, "answer": {"type": "string"}, "partial": {"type": "boolean"}, "citations": {"type": "array", "items": {"$ref": "#/components/schemas/Citation"}}}}},
                "findings": {"type": "array", "items": {"type": "object", "properties": {"text": {"type": "string"}, "source": {"type": ["string", "null"]}}}}
            }},
            "Chunk": {"type": "object", "properties": {
                "id": {"type": "string"}, "doc_id": {"type": "string"}, "path": {"type": ["string", "null"]}, "ordinal": {"type": "integer"},
                "byte_start": {"type": "integer"}, "byte_end": {"type": "integer"}, "line_start": {"type": "integer"}, "line_end": {"type": "integer"},
                "page": {"type": ["integer", "null"]}, "heading": {"type": ["string", "null"]}, "text": {"type": "string"}
            }}
        }}
    });
    if let Some(paths) = doc["paths"].as_object_mut() {
        paths.extend(openai_paths());
    }
    doc
}

/// The OpenAI-compatible endpoints (`crate::openai`).
fn openai_paths() -> serde_json::Map<String, Value> {
    let paths = json!({
        "/v1/models": {
            "get": {"summary": "OpenAI-compatible: the store as models, one per flow (rlm = the server's flow, rlm-repl, rlm-pipeline, rlm-rag, rlm-auto)", "responses": {"200": {"description": "{\"object\": \"list\", \"data\": [{\"id\", \"object\": \"model\", \"created\", \"owned_by\"}]}"}}}
        },
        "/v1/chat/completions": {
            "post": {
                "summary": "OpenAI-compatible chat completion: the last user message is the question, earlier user/assistant messages the conversation; the answer with its checked sources as Markdown; stream: true sends chat.completion.chunk events and [DONE]. Errors in OpenAI's shape: {\"error\": {\"message\", \"type\", \"param\", \"code\"}}",
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["model", "messages"], "properties": {
                    "model": {"enum": ["rlm", "rlm-repl", "rlm-pipeline", "rlm-rag", "rlm-auto"]},
                    "messages": {"type": "array", "minItems": 1, "items": {"type": "object", "required": ["role"], "properties": {"role": {"enum": ["system", "developer", "user", "assistant", "tool"]}, "content": {"type": ["string", "array", "null"]}}}},
                    "stream": {"type": "boolean"},
                    "stream_options": {"type": "object", "properties": {"include_usage": {"type": "boolean"}}}
                }}}}},
                "responses": {"200": {"description": "chat.completion, or a text/event-stream of chat.completion.chunk"}, "400": {"description": "invalid_request_error"}, "404": {"description": "model_not_found"}, "429": {"description": "rate_limit_error: the server's run limit"}}
            }
        }
    });
    match paths {
        Value::Object(map) => map,
        _ => serde_json::Map::new(),
    }
}

/// The schema of a numeric request field, from the engine's range for its
/// setting (the same range the server enforces).
fn number_schema(key: &str) -> Value {
    match NUMERIC_SETTINGS
        .iter()
        .find(|s| s.key == key)
        .map(|s| s.range)
    {
        Some(Range::Whole(min, max)) => json!({"type": "integer", "minimum": min, "maximum": max}),
        Some(Range::Above(min, max)) => {
            json!({"type": "number", "exclusiveMinimum": min, "maximum": max})
        }
        Some(Range::Between(min, max)) => json!({"type": "number", "minimum": min, "maximum": max}),
        None => json!({"type": "number"}),
    }
}
