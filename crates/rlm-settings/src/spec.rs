//! What a setting is: its names on each surface, its kind (type and range),
//! its default and what it does. The table of every setting is
//! [`crate::table`]; this module only describes one entry.

/// Where a setting belongs; the configuration reference has one section per group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Group {
    /// The model provider and its client (`[llm]`).
    Models,
    /// The embedded model run in-process by llama.cpp.
    EmbeddedModel,
    /// Limits shared by a question's call tree (`[engine]`).
    Budgets,
    /// The REPL loop, its sandbox and how answers are checked (`[engine]`).
    Answering,
    /// Retrieval and the pipeline flow's inspectors (`[engine]`).
    Pipeline,
    /// The store, indexing and embeddings.
    Store,
    /// `rlm serve`, PostgreSQL nodes and `rlm mcp`.
    Serving,
}

impl Group {
    /// Every group, in the order of the reference.
    pub const ALL: [Group; 7] = [
        Group::Models,
        Group::EmbeddedModel,
        Group::Budgets,
        Group::Answering,
        Group::Pipeline,
        Group::Store,
        Group::Serving,
    ];

    /// The section title in the reference.
    pub fn title(self) -> &'static str {
        match self {
            Group::Models => "Models",
            Group::EmbeddedModel => "The embedded model",
            Group::Budgets => "Budgets",
            Group::Answering => "Answering and checking",
            Group::Pipeline => "Retrieval and the pipeline flow",
            Group::Store => "Store, indexing and embeddings",
            Group::Serving => "Serving, nodes and MCP",
        }
    }
}

/// The type and accepted values of a setting.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// A whole number from `.0` to `.1`.
    Whole(u64, u64),
    /// A number more than `.0` (exclusive) and at most `.1`.
    Above(f64, f64),
    /// A number from `.0` to `.1` (inclusive).
    Between(f64, f64),
    /// `true`/`false` (also `on`/`off`, `yes`/`no`, `1`/`0`).
    Bool,
    /// One of the words listed (the setting's own parser may accept aliases).
    Choice(&'static [&'static str]),
    /// Free text (a model name, an address).
    Text,
    /// A file or folder; in `rlm.toml`, relative to the file's folder.
    Path,
    /// A secret: never printed, never accepted as a flag.
    Secret,
}

impl Kind {
    /// The accepted values in words, for errors and the reference.
    pub fn describe(self) -> String {
        match self {
            Kind::Whole(lo, hi) => format!("a whole number from {lo} to {hi}"),
            Kind::Above(lo, hi) => format!("a number more than {lo} and at most {hi}"),
            Kind::Between(lo, hi) => format!("a number from {lo} to {hi}"),
            Kind::Bool => "true or false".to_string(),
            Kind::Choice(words) => format!("one of {}", words.join(", ")),
            Kind::Text => "text".to_string(),
            Kind::Path => "a path".to_string(),
            Kind::Secret => "a secret".to_string(),
        }
    }
}

/// A name a setting had before; still read, with a one-line deprecation warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OldName {
    /// An environment variable.
    Env(&'static str),
    /// A key of the setting's `rlm.toml` table.
    Toml(&'static str),
}

impl OldName {
    /// True when this is environment variable `name`.
    pub fn is_env(&self, name: &str) -> bool {
        matches!(self, OldName::Env(v) if *v == name)
    }

    /// True when this is `rlm.toml` key `key`.
    pub fn is_toml(&self, key: &str) -> bool {
        matches!(self, OldName::Toml(k) if *k == key)
    }
}

/// One setting, declared once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Setting {
    /// Its `rlm.toml` table (`engine`, `llm`, `llm.root`, `embeddings`, `store`), or
    /// `None` when the file cannot set it.
    pub table: Option<&'static str>,
    /// Its key: in the `rlm.toml` table, and the unique name of the setting
    /// within its table.
    pub key: &'static str,
    /// Its environment variable.
    pub env: Option<&'static str>,
    /// Its command-line flag (with the dashes), where one exists.
    pub flag: Option<&'static str>,
    /// Its field in an API request (`POST /api/runs`, MCP `ask`, the Python
    /// package's keyword arguments), where a question can set it.
    pub api: Option<&'static str>,
    /// Type and range.
    pub kind: Kind,
    /// The default, as the reference shows it.
    pub default: &'static str,
    /// What it does, one or two sentences.
    pub doc: &'static str,
    /// Names it had before.
    pub old: &'static [OldName],
    /// Its section of the reference.
    pub group: Group,
}

impl Setting {
    /// A setting of `table` read from `env`; the other names are added with
    /// the builder methods below.
    pub const fn new(
        group: Group,
        table: Option<&'static str>,
        key: &'static str,
        env: Option<&'static str>,
        kind: Kind,
        default: &'static str,
        doc: &'static str,
    ) -> Self {
        Setting {
            table,
            key,
            env,
            flag: None,
            api: None,
            kind,
            default,
            doc,
            old: &[],
            group,
        }
    }

    /// With a command-line flag.
    pub const fn flag(mut self, flag: &'static str) -> Self {
        self.flag = Some(flag);
        self
    }

    /// With an API request field.
    pub const fn api(mut self, field: &'static str) -> Self {
        self.api = Some(field);
        self
    }

    /// With names it had before.
    pub const fn old(mut self, old: &'static [OldName]) -> Self {
        self.old = old;
        self
    }

    /// The name of its `rlm.toml` entry, e.g. `[engine] max_depth`.
    pub fn toml_name(&self) -> Option<String> {
        self.table.map(|t| format!("[{t}] {}", self.key))
    }

    /// A name for messages: the environment variable, else the file key.
    pub fn label(&self) -> String {
        match (self.env, self.toml_name()) {
            (Some(env), _) => env.to_string(),
            (None, Some(t)) => t,
            (None, None) => self.key.to_string(),
        }
    }
}
