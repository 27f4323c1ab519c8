pub mod ask;
pub mod bench;
pub mod corpus;
pub mod llm;
pub mod model;
pub mod repl;
pub mod serve;
pub mod trace;
