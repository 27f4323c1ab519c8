//! The configuration reference, generated from [`crate::table::ALL`]:
//! `docs/configuration.md` is this text (a test fails when they differ;
//! `RLM_BLESS=1 cargo test -p rlm-settings` rewrites the file).

use std::fmt::Write;

use crate::spec::{Group, Kind, OldName, Setting};
use crate::table;

/// The reference as Markdown.
pub fn markdown() -> String {
    let mut out = String::new();
    out.push_str(
        "# Configuration reference\n\n\
         <!-- Generated from crates/rlm-settings/src/table/; do not edit by hand. \
         Regenerate with: RLM_BLESS=1 cargo test -p rlm-settings -->\n\n\
         Every setting of `rlm`, each declared once. A setting may have a command-line \
         flag, an environment variable, a key in `rlm.toml` and a field in API requests \
         (`POST /api/runs`, the MCP `ask` tool, the Python package's keyword arguments); \
         all of its names are checked the same way.\n\n\
         Precedence: a question's own settings (flags, request fields) > environment > \
         `rlm.toml` (the file named by `--config`, else `./rlm.toml` when present) > \
         defaults. Blank environment variables count as unset. A value out of range is \
         an error naming the setting as you wrote it; a key in `rlm.toml` that no setting \
         has is an error too. Old names keep working and print a one-line warning.\n\n\
         Example `rlm.toml`:\n\n\
         ```toml\n\
         [llm]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:8088/v1\"\n\
         primary_model = \"qwen2.5-coder-1.5b\"\n\n\
         [llm.sub]\ntemperature = 0.0\n\n\
         [engine]\nmax_llm_calls = 80\nflow = \"pipeline\"\n\n\
         [store]\nlocation = \"stores/main\"\n\
         ```\n",
    );
    for group in Group::ALL {
        let _ = write!(out, "\n## {}\n\n", group.title());
        out.push_str(
            "| Setting | Flag | Environment | `rlm.toml` | API field | Values | Default |\n\
             |---|---|---|---|---|---|---|\n",
        );
        for s in table::ALL.iter().filter(|s| s.group == group) {
            row(&mut out, s);
        }
        out.push('\n');
        for s in table::ALL.iter().filter(|s| s.group == group) {
            let _ = writeln!(out, "- **{}**: {}", id(s), s.doc);
        }
        if group == Group::Models {
            out.push_str("\nStructured tables of `rlm.toml`:\n\n");
            for (_, doc) in table::STRUCTURED_TABLES {
                let _ = writeln!(out, "- {doc}");
            }
        }
    }
    out.push_str("\n## Old names\n\nStill read, with a one-line warning.\n\n| Old name | Use instead |\n|---|---|\n");
    for s in table::ALL {
        for old in s.old {
            let (was, now) = match old {
                OldName::Env(v) => (format!("`{v}`"), code(s.env)),
                OldName::Toml(k) => (
                    format!("`[{}] {k}`", s.table.unwrap_or("")),
                    code(s.toml_name().as_deref()),
                ),
            };
            let _ = writeln!(out, "| {was} | {now} |");
        }
    }
    out.push_str(&test_variables());
    out
}

fn id(s: &Setting) -> String {
    match s.table {
        Some(t) => format!("{t}.{}", s.key),
        None => s.key.to_string(),
    }
}

fn code(v: Option<&str>) -> String {
    v.map(|v| format!("`{v}`"))
        .unwrap_or_else(|| "—".to_string())
}

fn row(out: &mut String, s: &Setting) {
    let values = match s.kind {
        Kind::Choice(words) => words
            .iter()
            .map(|w| format!("`{w}`"))
            .collect::<Vec<_>>()
            .join(", "),
        kind => kind.describe(),
    };
    let _ = writeln!(
        out,
        "| {} | {} | {} | {} | {} | {} | {} |",
        id(s),
        code(s.flag),
        code(s.env),
        code(s.toml_name().as_deref()),
        code(s.api),
        values,
        s.default.replace('|', "\\|"),
    );
}

/// The test variables' section (appended to the reference).
pub fn test_variables() -> String {
    let mut out = String::from(
        "\n## Variables of the tests\n\nRead by the test suites and scripts, not by `rlm`.\n\n| Variable | Meaning |\n|---|---|\n",
    );
    for (name, doc) in table::TEST_VARIABLES {
        let _ = writeln!(out, "| `{name}` | {doc} |");
    }
    out
}
