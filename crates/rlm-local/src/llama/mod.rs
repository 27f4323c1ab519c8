//! In-process inference with llama.cpp: one worker thread owns the model and
//! its context and decodes every admitted request together (continuous
//! batching over parallel sequences of one unified KV cache).
//!
//! On a CPU, generating one token for four sequences costs little more than
//! for one (the weights are read once per step), so `llm_query_batched`
//! fan-out runs at several times the single-request rate. Requests beyond
//! the parallel slots, or whose prompt plus answer would not fit the free
//! cache, wait in a FIFO queue.

mod batcher;
mod calibrate;
mod draft;
mod model;
mod prefix;
mod prompt;
mod request;

pub use calibrate::measure_draft;
pub use model::LocalModel;
pub use request::{Finish, GenerateRequest, Generation, LocalModelOptions, Turn};
