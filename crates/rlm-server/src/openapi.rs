//! The OpenAPI 3.1 document of the API (`GET /api/openapi.json`), written by
//! hand next to the handlers it describes: every operation with an id, a
//! tag and every status it answers (those of the layers over the router
//! added in one place). A test checks that every route of the router is in
//! it and every documented one answers.

use rlm_engine::values::{Kind, table};
use serde_json::{Value, json};

fn error_response(description: &str) -> Value {
    json!({"description": description, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}})
}

fn json_response(description: &str, schema: &str) -> Value {
    json!({"description": description, "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{schema}")}}}})
}

/// An operation: its tag, id, summary and answers.
fn op(tag: &str, id: &str, summary: &str, responses: Value) -> Value {
    json!({"tags": [tag], "operationId": id, "summary": summary, "responses": responses})
}

fn with_params(mut op: Value, params: Value) -> Value {
    op["parameters"] = params;
    op
}

/// An operation taking a body: with the answers every body can get.
fn with_body(mut op: Value, body: Value) -> Value {
    op["requestBody"] = body;
    let binary = body_is_binary(&op);
    let r = &mut op["responses"];
    for (status, what) in [
        (
            "400",
            "The request is invalid (the message names the field)",
        ),
        ("408", "The body did not arrive within the body timeout"),
        (
            "413",
            "The body is larger than the server accepts (refused at once when its Content-Length says so)",
        ),
        ("415", "The body is not JSON (Content-Type)"),
    ] {
        if r.get(status).is_none() && !(status == "415" && binary) {
            r[status] = error_response(what);
        }
    }
    op
}

fn body_is_binary(op: &Value) -> bool {
    op["requestBody"]["content"]
        .get("application/octet-stream")
        .is_some()
}

fn json_body_of(schema: &str) -> Value {
    json!({"required": true, "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{schema}")}}}})
}

/// The answers every operation can get from the layers over the router:
/// 401 without the token (on guarded paths), 403 for another site's Host
/// or Origin, 500 when the store cannot be read.
fn add_layer_answers(doc: &mut Value) {
    let Some(paths) = doc["paths"].as_object_mut() else {
        return;
    };
    for (path, item) in paths.iter_mut() {
        let guarded = (path.starts_with("/api/") || path.starts_with("/v1/"))
            && !matches!(path.as_str(), "/api/openapi.json" | "/api/docs");
        for (method, op) in item.as_object_mut().into_iter().flatten() {
            if method == "parameters" {
                continue;
            }
            let changes = method != "get";
            let r = &mut op["responses"];
            if r.get("403").is_none() {
                r["403"] = error_response(if changes {
                    "The Host is not this server's (DNS rebinding guard) or the Origin is another site's"
                } else {
                    "The Host is not this server's (DNS rebinding guard)"
                });
            }
            if guarded {
                r["401"] = error_response(
                    "A token is required (rlm serve --token) and was missing or wrong; WWW-Authenticate: Bearer",
                );
                if path.starts_with("/api/") && r.get("500").is_none() {
                    r["500"] = error_response("The server failed (the message says what)");
                }
            }
        }
    }
}

fn path_param(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "path", "required": true, "description": description, "schema": {"type": "string"}})
}

/// The document.
pub fn document() -> Value {
    let mut paths = run_and_session_paths();
    paths.extend(store_paths());
    paths.extend(openai_paths());
    let mut doc = json!({
        "openapi": "3.1.0",
        "info": {
            "title": "rlm",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Questions over a document store, answered by Recursive Language Models: the corpus is a variable in a sandboxed REPL the model programs. Every step of a run streams as a server-sent event; answers cite chunks and the citations are verified."
        },
        "paths": paths,
        "components": {"schemas": schemas()}
    });
    add_layer_answers(&mut doc);
    doc
}

/// The web page, the server's information, runs and sessions.
fn run_and_session_paths() -> serde_json::Map<String, Value> {
    let ask_body = json_body_of("AskBody");
    object(json!({
        "/": {"get": op("page", "getPage", "The web UI (one page; its files are served at their paths under /)", json!({"200": {"description": "HTML page (gzip, ETag, Content-Security-Policy)", "content": {"text/html": {}}}, "304": {"description": "Not modified (If-None-Match matched the ETag)"}}))},
        "/api/info": {"get": op("info", "getInfo", "Store, models, default settings, limits, features, the sandbox back-ends (sandboxes: name, available, reason) and whether a token is required", json!({"200": {"description": "Server information", "content": {"application/json": {"schema": {"type": "object"}}}}}))},
        "/api/health": {"get": op("info", "getHealth", "Whether the model provider and the store work (cached 5 s)", json!({"200": json_response("ok or degraded", "Health"), "503": json_response("down: the model or the store does not work", "Health")}))},
        "/api/openapi.json": {"get": op("info", "getOpenApi", "This document", json!({"200": {"description": "OpenAPI 3.1", "content": {"application/json": {}}}}))},
        "/api/docs": {"get": op("info", "getDocs", "This document as one HTML page", json!({"200": {"description": "HTML page", "content": {"text/html": {}}}}))},
        "/api/runs": {
            "get": with_params(op("runs", "listRuns", "Runs, newest first", json!({"200": {"description": "Runs", "content": {"application/json": {"schema": {"type": "object", "properties": {"runs": {"type": "array", "items": {"$ref": "#/components/schemas/RunSummary"}}}}}}}})), json!([
                {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 500, "default": 50}},
                {"name": "session", "in": "query", "schema": {"type": "string"}, "description": "Only the runs of this session"}
            ])),
            "post": with_body(op("runs", "startRun", "Start answering a question; follow its steps at `events`", json!({
                "202": {"description": "Started", "content": {"application/json": {"schema": {"type": "object", "properties": {"id": {"type": "string"}, "status": {"const": "running"}, "url": {"type": "string"}, "events": {"type": "string"}}}}}},
                "429": error_response("Too many runs in progress; retry later (Retry-After)"),
                "507": error_response("The run's record cannot be saved (disk full); nothing was asked of the model")
            })), ask_body.clone())
        },
        "/api/chat": {"post": with_body(op("runs", "chat", "Answer a question and return when done (closing the connection cancels it)", json!({
            "200": json_response("The finished run with its answer", "RunView"),
            "429": error_response("Too many runs in progress; retry later (Retry-After)"),
            "507": error_response("Answered but not (all) saved, or not started for lack of space: `error.message` says what and why; `run` (RunView) is beside `error` when it was answered")
        })), ask_body)},
        "/api/runs/{id}": {
            "parameters": [path_param("id", "Run id")],
            "get": op("runs", "getRun", "A run and, once finished, its answer", json!({"200": json_response("The run", "RunView"), "404": error_response("No such run"), "410": error_response("The run's saved record is cut short or missing (a crash or a full disk)")})),
            "delete": op("runs", "cancelRun", "Cancel a running run (its answer becomes partial)", json!({"202": json_response("Cancelling", "RunView"), "404": error_response("No such run"), "409": error_response("Already finished"), "410": error_response("The run's saved record is cut short")}))
        },
        "/api/runs/{id}/events": {
            "parameters": [
                path_param("id", "Run id"),
                {"name": "Last-Event-ID", "in": "header", "required": false, "schema": {"type": "integer"}, "description": "Resume after this sequence number"},
                {"name": "access_token", "in": "query", "required": false, "schema": {"type": "string"}, "description": "The token, for EventSource (which cannot send headers); prefer the Authorization header"}
            ],
            "get": op("runs", "runEvents", "The run's steps as server-sent events: `trace` events (data: a TraceRecord, id: its sequence number) from the first (or after Last-Event-ID), live until the run ends, then one `end` event (data: RunView)", json!({"200": {"description": "Event stream", "content": {"text/event-stream": {"schema": {"$ref": "#/components/schemas/TraceRecord"}}}}, "404": error_response("No such run"), "410": error_response("The run's saved record is cut short")}))
        },
        "/api/sessions": {
            "get": op("sessions", "listSessions", "Sessions, most recently active first", json!({"200": {"description": "Sessions", "content": {"application/json": {"schema": {"type": "object", "properties": {"sessions": {"type": "array", "items": {"$ref": "#/components/schemas/SessionSummary"}}}}}}}})),
            "post": with_body(op("sessions", "createSession", "Create an empty session (an id is made when none is given)", json!({"201": json_response("Created", "SessionSummary"), "409": error_response("A session with this id exists")})), json_body_of("NewSession"))
        },
        "/api/sessions/{name}": {
            "parameters": [path_param("name", "Session id: 1-64 letters, digits, '-', '_' or '.'")],
            "get": with_params(op("sessions", "getSession", "One bounded page of a session: its newest turns before `before` (at most `limit` and 1 MiB of them), each with the run that answered it, and its kept findings", json!({"200": json_response("The page", "Session"), "404": error_response("No such session")})), json!([
                {"name": "before", "in": "query", "schema": {"type": "integer", "minimum": 0}, "description": "Turns before this position (0 = the oldest kept turn); default: the newest"},
                {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20}}
            ])),
            "patch": with_body(op("sessions", "renameSession", "Give a session a new free-text title", json!({"200": json_response("Renamed", "SessionSummary"), "404": error_response("No such session")})), json_body_of("Rename")),
            "delete": op("sessions", "deleteSession", "Delete a session", json!({"204": {"description": "Deleted"}, "404": error_response("No such session")}))
        }
    }))
}

/// Chunks, documents and indexing.
fn store_paths() -> serde_json::Map<String, Value> {
    object(json!({
        "/api/chunks/{id}": {
            "parameters": [path_param("id", "Chunk id (`<document id>-<n>`), as cited in answers")],
            "get": op("documents", "getChunk", "A chunk: its document, span and text (citations open it)", json!({"200": json_response("The chunk", "Chunk"), "404": error_response("No such chunk")}))
        },
        "/api/documents": {"get": with_params(op("documents", "listDocuments", "The store's documents: all by path, or those whose path or title contains `q`, then those whose text matches it", json!({"200": json_response("One page of documents", "DocumentList")})), json!([
            {"name": "q", "in": "query", "schema": {"type": "string", "maxLength": crate::documents::MAX_QUERY_CHARS}, "description": "Search text"},
            {"name": "offset", "in": "query", "schema": {"type": "integer", "minimum": 0, "default": 0}},
            {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 500, "default": 50}}
        ]))},
        "/api/documents/{id}": {
            "parameters": [path_param("id", "Document id")],
            "get": with_params(op("documents", "getDocument", "A document's metadata and one page of its extracted text (the text chunk offsets point into)", json!({"200": json_response("The document", "DocumentPage"), "404": error_response("No such document")})), json!([
                {"name": "offset", "in": "query", "schema": {"type": "integer", "minimum": 0, "default": 0}, "description": "Byte offset (moved back to a character boundary)"},
                {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 1048576, "default": 65536}, "description": "Bytes"}
            ]))
        },
        "/api/uploads": {"post": with_body(with_params(op("indexing", "uploadDocument", "Save a file in the upload folder and index it (rlm serve --allow-upload)", json!({
            "202": {"description": "Saved; indexing queued", "content": {"application/json": {"schema": {"type": "object", "properties": {"name": {"type": "string"}, "path": {"type": "string"}, "bytes": {"type": "integer"}, "job": {"$ref": "#/components/schemas/IndexJob"}}}}}},
            "403": error_response("Uploads are off, or the Host/Origin is not this server's"),
            "429": error_response("Too many indexing jobs waiting"),
            "507": error_response("The file cannot be saved")
        })), json!([{"name": "name", "in": "query", "required": true, "schema": {"type": "string", "maxLength": 1024}, "description": "Relative path in the upload folder, e.g. notes/a.md"}])), json!({"required": true, "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}))},
        "/api/index": {"post": with_body(op("indexing", "indexPath", "Index a file or folder on the server (rlm serve --allow-index-paths)", json!({
            "202": json_response("Indexing queued", "JobAnswer"),
            "403": error_response("Indexing paths is off, or the Host/Origin is not this server's"),
            "429": error_response("Too many indexing jobs waiting")
        })), json_body_of("IndexBody"))},
        "/api/reindex": {"post": op("indexing", "reindex", "Re-index every source the server knows (the original system's reload-context)", json!({
            "202": json_response("Indexing queued", "JobAnswer"),
            "409": error_response("No source is known (start rlm serve with --source PATH)"),
            "429": error_response("Too many indexing jobs waiting")
        }))},
        "/api/index/jobs": {"get": op("indexing", "listIndexJobs", "Indexing jobs, newest first (the last 20)", json!({"200": {"description": "Jobs", "content": {"application/json": {"schema": {"type": "object", "properties": {"jobs": {"type": "array", "items": {"$ref": "#/components/schemas/IndexJob"}}}}}}}}))},
        "/api/index/jobs/{id}": {
            "parameters": [path_param("id", "Job id")],
            "get": op("indexing", "getIndexJob", "One indexing job: poll it to follow its progress", json!({"200": json_response("The job", "IndexJob"), "404": error_response("No such job")}))
        }
    }))
}

/// The schemas the operations refer to (`#/components/schemas/...`).
fn schemas() -> Value {
    json!({
        "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "object", "properties": {"status": {"type": "integer"}, "message": {"type": "string"}}}, "run": {"$ref": "#/components/schemas/RunView"}}},
        "AskBody": {"type": "object", "required": ["question"], "additionalProperties": false, "properties": {
            "question": {"type": "string", "minLength": 1, "maxLength": 20000, "description": "At most --max-question-chars characters"},
            "session": {"type": "string", "pattern": "^[A-Za-z0-9._-]{1,64}$", "description": "Session id; created on its first turn, titled from the question"},
            "flow": {"enum": ["repl", "pipeline", "rag", "auto"]},
            "use_rlm": {"type": "boolean", "description": "RLM switch: true → the configured RLM flow, false → rag; ignored when flow is given"},
            "inspector": {"enum": ["iterative", "per-chunk", "hypothesis", "repl"]},
            "citations": {"enum": ["strict", "best_effort"]},
            "coverage": {"type": "boolean", "description": "also report the documents that match the question but back no claim (grounded.coverage)"},
            "response_schema": {"type": "object", "description": "A JSON Schema (type, enum, const, properties, required, additionalProperties false, items, min/maxItems, min/maxLength, anyOf, oneOf, $ref to #/$defs): the answer is also returned as JSON following it, in data.value, with each value's citations in data.citations (data.error says why when no reply followed it)"},
            "turn_format": {"enum": ["auto", "structured", "text"], "description": "How the agents reply each turn: structured (a JSON turn the provider constrains; sources may name only passages the run was shown), text (```repl blocks and FINAL) or auto (structured; text where the endpoint refuses the schema). RLM_TURN_FORMAT"},
            "subcall_cache": {"type": "boolean", "description": "false: make every model call afresh, without the store's reply cache (reproducible replies kept for reuse; RLM_SUBCALL_CACHE)"},
            "max_llm_calls": number_schema("RLM_MAX_LLM_CALLS"),
            "max_iterations": number_schema("RLM_MAX_ITERATIONS"),
            "max_depth": number_schema("RLM_MAX_DEPTH"),
            "max_cost_usd": number_schema("RLM_MAX_COST_USD"),
            "max_wall_secs": number_schema("RLM_MAX_WALL_SECS"),
            "sandbox": {"enum": ["monty", "cpython"], "description": "Which Python runs the REPL: monty (default, built in) or cpython (the server's Python and its packages under OS isolation; Linux with bubblewrap). RLM_SANDBOX"},
            "high_recall": {"type": "boolean", "description": "The pipeline's stage-1 retrieval: RLM_HIGH_RECALL_K (200) entry chunks when true, RLM_RAG_K (10) when false (RLM_LOW_RECALL_MODE inverted)"},
            "expand_files": {"type": "boolean", "description": "Expand entry chunks to whole files (the pipeline's stage): with no flow given, true picks pipeline and false rag; a conflicting flow or use_rlm is a 400"},
            "rlm_summarize": {"type": "boolean", "description": "Inspect and summarize each file with generated programs (the pipeline's stage): with no flow given, true picks pipeline and false rag; a conflicting flow or use_rlm is a 400"},
            "briefing": {"type": "string", "maxLength": 20000, "description": "Domain instructions (replace the server's --briefing); {date} becomes today's date; at most --max-briefing-chars characters"},
            "history_runs": {"type": "array", "items": {"type": "string"}, "maxItems": 200, "description": "With session: the session's turns the model is given, by the runs that answered them, oldest first (a branch: an edited question or a regenerated answer leaves out what it replaces); every turn when absent"}
        }},
        "RunStatus": {"enum": ["running", "done", "failed", "cancelled"]},
        "RunView": {"type": "object", "properties": {
            "id": {"type": "string"}, "question": {"type": "string"}, "session": {"type": ["string", "null"]},
            "flow": {"type": "string"}, "status": {"$ref": "#/components/schemas/RunStatus"},
            "started_at": {"type": "string", "format": "date-time"}, "finished_at": {"type": ["string", "null"]},
            "history_runs": {"type": "array", "items": {"type": "string"}, "description": "The session turns the question was asked after (its history_runs); absent: every earlier turn"},
            "answer": {"oneOf": [{"$ref": "#/components/schemas/Answer"}, {"type": "null"}]},
            "error": {"type": ["string", "null"]}
        }},
        "RunSummary": {"type": "object", "properties": {
            "id": {"type": "string"}, "question": {"type": "string"}, "session": {"type": ["string", "null"]},
            "flow": {"type": "string"}, "status": {"$ref": "#/components/schemas/RunStatus"},
            "started_at": {"type": "string"}, "finished_at": {"type": ["string", "null"]}, "partial": {"type": ["boolean", "null"]},
            "history_runs": {"type": "array", "items": {"type": "string"}}
        }},
        "Answer": {"type": "object", "description": "As `rlm ask --json` prints it", "properties": {
            "answer": {"type": "string", "description": "Text with citation markers [[chunk:ID \"quote\"]] / [[doc:N \"quote\"]]"},
            "partial": {"type": "boolean"}, "partial_reason": {"type": ["string", "null"]},
            "citations": {"type": "array", "items": {"$ref": "#/components/schemas/Citation"}},
            "verification": {"type": ["object", "null"]},
            "usage": {"type": "object", "properties": {"calls": {"type": "integer"}, "input_tokens": {"type": "integer"}, "output_tokens": {"type": "integer"}, "cached_input_tokens": {"type": "integer"}, "cost_usd": {"type": ["number", "null"]}, "wall_ms": {"type": "integer"}, "by_depth": {"type": "array"}}},
            "trace": {"type": "object"}, "findings": {"type": "array"},
            "findings_omitted": {"type": "integer", "description": "Findings beyond what a session turn keeps, left out"},
            "file_summaries": {"type": "array"}, "flow_report": {"type": "object"},
            "claims": {"type": "array", "description": "Each claim: text, support (supported: its passage entails it; related: a passage was found that the judge did not find states it; contradicted; unverified: no usable verdict; unsupported: no passage), quote_check apart (verified, not_found, engine, none), verdict, citations"},
            "grounded": {"type": ["object", "null"], "description": "Claims by outcome: claims, supported, engine_attached, related, contradicted, unverified, unsupported; semantic: the judge's verdicts, calls and tokens"},
            "sources": {"type": "array", "description": "The passages of the supported claims: {path, line, chunk_id, quote, attached_by_engine}"},
            "related_sources": {"type": "array", "description": "Passages found for claims they do not support (related, contradicted, unverified): never sources"}
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
            "type": {"enum": ["run_started", "llm_request", "llm_delta", "llm_response", "llm_retry", "llm_error", "cell", "cell_output", "subcall_start", "subcall_end", "finding", "final", "verification", "budget_exhausted", "error", "flow_step", "fallback", "run_finished"]},
            "agent": {"type": "string", "description": "Tree position: 0 is the root, 0.2 its third child"}
        }},
        "SessionSummary": {"type": "object", "properties": {"id": {"type": "string"}, "name": {"type": "string", "description": "The same as id (older clients)"}, "title": {"type": "string"}, "created_at": {"type": "string"}, "updated_at": {"type": "string"}, "turns": {"type": "integer"}, "findings": {"type": "integer"}}},
        "NewSession": {"type": "object", "additionalProperties": false, "properties": {"id": {"type": "string", "pattern": "^[A-Za-z0-9._-]{1,64}$"}, "title": {"type": "string", "maxLength": 200}}},
        "Rename": {"type": "object", "required": ["title"], "additionalProperties": false, "properties": {"title": {"type": "string", "minLength": 1, "maxLength": 200, "description": "Free text, one line"}}},
        "Session": {"type": "object", "properties": {
            "id": {"type": "string"}, "name": {"type": "string"}, "title": {"type": "string"}, "created_at": {"type": "string"}, "updated_at": {"type": "string"},
            "turns_total": {"type": "integer"}, "first": {"type": "integer", "description": "Position of history[0]; pass as `before` for older turns"},
            "findings_total": {"type": "integer"},
            "history": {"type": "array", "items": {"type": "object", "properties": {"question": {"type": "string"}, "answer": {"type": "string"}, "partial": {"type": "boolean"}, "citations": {"type": "array", "items": {"$ref": "#/components/schemas/Citation"}}, "run_id": {"type": ["string", "null"], "description": "The run that answered it (GET /api/runs/{id})"}, "created_at": {"type": "string"}}}},
            "findings": {"type": "array", "items": {"type": "object", "properties": {"text": {"type": "string"}, "source": {"type": ["string", "null"]}}}}
        }},
        "Document": {"type": "object", "properties": {"id": {"type": "string"}, "path": {"type": "string"}, "title": {"type": "string"}, "kind": {"type": "string"}, "size_bytes": {"type": "integer"}, "chars": {"type": "integer"}, "chunk_count": {"type": "integer"}, "match": {"enum": ["path", "text"]}, "snippet": {"type": "string"}}},
        "DocumentList": {"type": "object", "properties": {"total": {"type": "integer"}, "offset": {"type": "integer"}, "limit": {"type": "integer"}, "documents": {"type": "array", "items": {"$ref": "#/components/schemas/Document"}}}},
        "DocumentPage": {"type": "object", "properties": {"id": {"type": "string"}, "path": {"type": "string"}, "title": {"type": "string"}, "kind": {"type": "string"}, "size_bytes": {"type": "integer"}, "chars": {"type": "integer"}, "chunk_count": {"type": "integer"}, "hash": {"type": "string"},
            "text": {"type": "object", "properties": {"offset": {"type": "integer"}, "end": {"type": "integer"}, "total_bytes": {"type": "integer"}, "content": {"type": "string"}, "next_offset": {"type": ["integer", "null"]}}}}},
        "IndexBody": {"type": "object", "required": ["path"], "additionalProperties": false, "properties": {"path": {"type": "string", "description": "Absolute path on the server"}}},
        "JobAnswer": {"type": "object", "properties": {"job": {"$ref": "#/components/schemas/IndexJob"}}},
        "IndexJob": {"type": "object", "properties": {
            "id": {"type": "string"}, "kind": {"enum": ["upload", "path", "reindex"]}, "paths": {"type": "array", "items": {"type": "string"}},
            "status": {"enum": ["queued", "running", "done", "failed"]}, "phase": {"enum": ["queued", "waiting", "walking", "processing", "committing", "done"]},
            "files_found": {"type": "integer"}, "done_bytes": {"type": "integer"}, "total_bytes": {"type": "integer"},
            "started_at": {"type": ["string", "null"]}, "finished_at": {"type": ["string", "null"]},
            "report": {"type": ["object", "null"], "description": "{added, updated, unchanged, removed, chunks_written, skipped, errors, errors_total, missing_sources, pages_read_by_ocr, pages_without_text, ocr_available}"},
            "error": {"type": ["string", "null"]}, "documents": {"type": ["integer", "null"]}
        }},
        "Health": {"type": "object", "properties": {
            "status": {"enum": ["ok", "degraded", "down"]}, "checked_at": {"type": "string"},
            "model": {"type": "object", "properties": {"status": {"enum": ["ok", "degraded", "down", "unknown"]}, "provider": {"type": "string"}, "endpoint": {"type": "string"}, "root": {"type": "string"}, "sub": {"type": "string"}, "latency_ms": {"type": "integer"}, "loaded": {"type": "boolean"}, "message": {"type": "string"}}},
            "store": {"type": "object", "properties": {"status": {"enum": ["ok", "down"]}, "path": {"type": "string"}, "documents": {"type": "integer"}, "chunks": {"type": "integer"}, "message": {"type": "string"}}},
            "indexing": {"type": "object", "properties": {"running": {"type": "boolean"}, "job": {"oneOf": [{"$ref": "#/components/schemas/IndexJob"}, {"type": "null"}]}}}
        }},
        "Chunk": {"type": "object", "properties": {
            "id": {"type": "string"}, "doc_id": {"type": "string"}, "path": {"type": ["string", "null"]}, "ordinal": {"type": "integer"},
            "byte_start": {"type": "integer"}, "byte_end": {"type": "integer"}, "line_start": {"type": "integer"}, "line_end": {"type": "integer"},
            "page": {"type": ["integer", "null"]}, "heading": {"type": ["string", "null"]},
            "location": {"type": ["string", "null"], "description": "the place a person cites when it is not a page: `slide 4`, `sheet \"Q3\", rows 10–14`, `chapter 3`, `message of 2024-03-02 from …`"},
            "text": {"type": "string"}
        }}
    })
}

/// The map of a JSON object written with `json!`.
fn object(value: Value) -> serde_json::Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => serde_json::Map::new(),
    }
}

/// The OpenAI-compatible endpoints (`crate::openai`).
fn openai_paths() -> serde_json::Map<String, Value> {
    let paths = json!({
        "/v1/models": {
            "get": op("openai", "listModels", "OpenAI-compatible: the store as models, one per flow (rlm = the server's flow, rlm-repl, rlm-pipeline, rlm-rag, rlm-auto)", json!({"200": {"description": "{\"object\": \"list\", \"data\": [{\"id\", \"object\": \"model\", \"created\", \"owned_by\"}]}"}}))
        },
        "/v1/chat/completions": {
            "post": {
                "tags": ["openai"],
                "operationId": "createChatCompletion",
                "summary": "OpenAI-compatible chat completion: the last user message is the question, earlier user/assistant messages the conversation; the answer with its sources (passages that entail its claims) and related passages as Markdown, and in `rlm` each claim's entailment and quote check apart; stream: true sends chat.completion.chunk events and [DONE]. Errors in OpenAI's shape: {\"error\": {\"message\", \"type\", \"param\", \"code\"}}",
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["model", "messages"], "properties": {
                    "model": {"enum": ["rlm", "rlm-repl", "rlm-pipeline", "rlm-rag", "rlm-auto"]},
                    "messages": {"type": "array", "minItems": 1, "items": {"type": "object", "required": ["role"], "properties": {"role": {"enum": ["system", "developer", "user", "assistant", "tool"]}, "content": {"type": ["string", "array", "null"]}}}},
                    "stream": {"type": "boolean"},
                    "stream_options": {"type": "object", "properties": {"include_usage": {"type": "boolean"}}},
                    "sandbox": {"enum": ["monty", "cpython"], "description": "rlm's extension (extra_body in the SDKs): which Python runs the model's code, as the field sandbox of POST /api/runs. RLM_SANDBOX"},
                    "turn_format": {"enum": ["auto", "structured", "text"], "description": "rlm's extension (extra_body in the SDKs): how the agents reply each turn, as the field turn_format of POST /api/runs. RLM_TURN_FORMAT"},
                    "response_format": {"type": "object", "description": "{\"type\": \"json_schema\", \"json_schema\": {\"name\": ..., \"schema\": {...}}} or {\"type\": \"json_object\"}: the message content is the answer as JSON following the schema (response_schema of POST /api/runs); each value's citations in rlm.data_citations"}
                }}}}},
                "responses": {"200": {"description": "chat.completion, or a text/event-stream of chat.completion.chunk"}, "400": {"description": "invalid_request_error"}, "404": {"description": "model_not_found"}, "408": {"description": "invalid_request_error: the body did not arrive within the body timeout"}, "413": {"description": "invalid_request_error: the body is too large"}, "415": {"description": "invalid_request_error: the body is not JSON"}, "429": {"description": "rate_limit_error: the server's run limit"}, "500": {"description": "server_error"}, "507": {"description": "server_error: the answer could not be saved"}}
            }
        }
    });
    object(paths)
}

/// The schema of a numeric request field, from the engine's range for its
/// setting (the same range the server enforces).
fn number_schema(key: &str) -> Value {
    match table::by_env(key).map(|s| s.kind) {
        Some(Kind::Whole(min, max)) => json!({"type": "integer", "minimum": min, "maximum": max}),
        Some(Kind::Above(min, max)) => {
            json!({"type": "number", "exclusiveMinimum": min, "maximum": max})
        }
        Some(Kind::Between(min, max)) => json!({"type": "number", "minimum": min, "maximum": max}),
        _ => json!({"type": "number"}),
    }
}

#[cfg(test)]
mod tests {
    use rlm_engine::QuestionSettings;
    use rlm_engine::values::table;

    /// The request body names each per-question setting by the API field the
    /// settings table declares for it (`docs/configuration.md` lists them).
    #[test]
    fn request_fields_are_the_settings_api_names() {
        let doc = super::document();
        let props = doc["components"]["schemas"]["AskBody"]["properties"]
            .as_object()
            .expect("AskBody properties");
        // Fields that are the request itself, not settings.
        let request = [
            "question",
            "session",
            "briefing",
            "history",
            "history_runs",
            "response_schema",
        ];
        let settings: Vec<&str> = QuestionSettings::SETTINGS
            .iter()
            .copied()
            .chain([&table::FLOW, &table::ENABLED])
            .filter_map(|s| s.api)
            .collect();
        for key in props.keys() {
            assert!(
                request.contains(&key.as_str()) || settings.contains(&key.as_str()),
                "AskBody field {key:?} is neither part of the request nor a setting's API field"
            );
        }
        for field in [
            "max_iterations",
            "max_llm_calls",
            "inspector",
            "use_rlm",
            "flow",
        ] {
            assert!(props.contains_key(field), "AskBody lacks {field}");
        }
    }
}
