//! A scripted model server for tests (feature `testing`).
//!
//! [`ScriptedServer`] is a real HTTP/1.1 server on `127.0.0.1:0` that speaks
//! the OpenAI Chat Completions (also Azure's deployment paths), Anthropic
//! Messages and `/v1/models` wire formats, and answers from a [`Script`]:
//!
//! - **rules** first: a [`Matcher`] on the request (last message substring or
//!   regex, system prompt, model) picks a reply; a rule answers forever or
//!   walks through a sequence;
//! - then the **ordered** replies, one per request;
//! - then the `otherwise` reply; with none, the request gets a non-retryable
//!   400 saying the script ran out.
//!
//! Replies are text (with reported, omitted or exact usage) or a [`Fault`]:
//! 429 with `Retry-After`, 500, 503, any status, a dropped connection, a hang,
//! malformed JSON, empty choices, a truncated body. Each may carry latency.
//! Every request is recorded ([`ScriptedServer::requests`]) with its arrival
//! and answer times, and the server tracks peak concurrency.
//!
//! ```no_run
//! # async fn demo() {
//! use rlm_llm::testing::{Fault, Matcher, Reply, Script, ScriptedServer};
//! use rlm_llm::ChatRequest;
//!
//! let server = ScriptedServer::start(
//!     Script::new()
//!         .reply("```repl\nprint(len(context))\n```")
//!         .reply(Fault::RateLimited { retry_after_secs: Some(0.01) })
//!         .reply("FINAL(42)")
//!         .on(Matcher::last_contains("Summarize"), Reply::text("a summary").with_latency_ms(50)),
//! )
//! .await;
//! let client = server.client();
//! let answer = client.chat(ChatRequest::user("hi")).await.unwrap();
//! assert!(answer.text.starts_with("```repl"));
//! assert_eq!(server.requests()[0].last_message(), "hi");
//! # }
//! ```

mod request;
mod responses;
mod script;
mod server;

pub use request::{ReceivedRequest, WireApi};
pub use responses::ScriptBody;
pub use script::{Fault, Matcher, Reply, ReplyUsage, Rule, Script, ScriptError};
pub use server::{ScriptedServer, TEST_API_KEY};
