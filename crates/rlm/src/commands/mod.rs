pub mod corpus;
pub mod repl;
