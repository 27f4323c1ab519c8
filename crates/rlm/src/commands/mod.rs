pub mod corpus;
pub mod llm;
pub mod repl;
