//! The store, indexing and embeddings; `rlm serve`, PostgreSQL nodes and `rlm mcp`.

use crate::spec::{Group, Kind, Setting};

use super::{EMBEDDINGS, ENV_ONLY, STORE_TABLE};
use Group::{Serving, Store};

// ---- Store, indexing, embeddings ------------------------------------------

/// The store.
pub const STORE: Setting = Setting::new(
    Store,
    STORE_TABLE,
    "location",
    Some("RLM_STORE"),
    Kind::Path,
    "./.rlm",
    "The store every command uses: a folder, or a `postgres://` URL. In `rlm.toml`, a folder is relative to the file.",
)
.flag("--store");
/// Chunk size.
pub const CHUNK_CHARS: Setting = Setting::new(
    Store,
    ENV_ONLY,
    "chunk_chars",
    Some("RLM_CHUNK_CHARS"),
    Kind::Whole(1, 100_000_000),
    "2000",
    "Target chunk size of `rlm index`, in characters.",
)
.flag("--chunk-chars");
/// Embeddings of `rlm index`.
pub const EMBEDDINGS_CHOICE: Setting = Setting::new(
    Store,
    ENV_ONLY,
    "embeddings",
    Some("RLM_EMBEDDINGS"),
    Kind::Choice(&["none", "local", "provider"]),
    "none",
    "Vectors `rlm index` computes: `local` (a model on the CPU, see `embeddings.local_model`), `provider` (the configured /v1/embeddings), or `none`.",
)
.flag("--embeddings");
/// Search ranking.
pub const SEARCH_MODE: Setting = Setting::new(
    Store,
    ENV_ONLY,
    "search_mode",
    Some("RLM_SEARCH_MODE"),
    Kind::Choice(&["bm25", "vector", "hybrid"]),
    "bm25",
    "Ranking of `rlm search`: full text, embeddings, or both fused.",
)
.flag("--mode");
/// Local embedding model files.
pub const EMBED_MODEL: Setting = Setting::new(
    Store,
    EMBEDDINGS,
    "model_path",
    Some("RLM_EMBED_MODEL"),
    Kind::Path,
    "none",
    "Folder of the local all-MiniLM-L6-v2 files.",
);
/// Which local embedding model.
pub const EMBED_LOCAL_MODEL: Setting = Setting::new(
    Store,
    EMBEDDINGS,
    "local_model",
    Some("RLM_EMBED_LOCAL_MODEL"),
    Kind::Choice(&["minilm", "e5-small", "auto"]),
    "auto",
    "Model of `--embeddings local`: `minilm` (all-MiniLM-L6-v2, English), `e5-small` (multilingual-e5-small, about 100 languages), or `auto` (by the documents' languages where the caller knows them, else `minilm`). A store keeps the model it was embedded with.",
);
/// multilingual-e5-small's files.
pub const EMBED_E5_MODEL: Setting = Setting::new(
    Store,
    EMBEDDINGS,
    "e5_model_path",
    Some("RLM_EMBED_E5_MODEL"),
    Kind::Path,
    "none",
    "Folder of multilingual-e5-small's `e5-small-q4.bin` (`crates/rlm-corpus/scripts/fetch-e5.sh` fetches it).",
);
/// Provider embedding model.
pub const EMBED_PROVIDER_MODEL: Setting = Setting::new(
    Store,
    EMBEDDINGS,
    "provider_model",
    Some("RLM_EMBED_PROVIDER_MODEL"),
    Kind::Text,
    "text-embedding-3-small",
    "Embedding model asked of the provider.",
);
/// Texts per provider request.
pub const EMBED_BATCH: Setting = Setting::new(
    Store,
    EMBEDDINGS,
    "batch_size",
    Some("RLM_EMBED_BATCH"),
    Kind::Whole(1, 100_000),
    "64",
    "Texts per provider embedding request.",
);
/// OCR of scanned PDF pages.
pub const OCR: Setting = Setting::new(
    Store,
    ENV_ONLY,
    "ocr",
    Some("RLM_OCR"),
    Kind::Choice(&["auto", "off"]),
    "auto",
    "Scanned PDF pages (no text layer) are read by Tesseract when it is installed (`auto`), or never (`off`); without it `rlm index` says how many pages had no text.",
);
/// The OCR program.
pub const TESSERACT: Setting = Setting::new(
    Store,
    ENV_ONLY,
    "tesseract",
    Some("RLM_TESSERACT"),
    Kind::Path,
    "tesseract",
    "The OCR program: `tesseract` on the `PATH`, or a path to it.",
);
/// The languages of OCR.
pub const OCR_LANGUAGES: Setting = Setting::new(
    Store,
    ENV_ONLY,
    "ocr_languages",
    Some("RLM_OCR_LANGUAGES"),
    Kind::Text,
    "every language installed",
    "Languages OCR reads, in Tesseract's form (`deu+eng`).",
);

// ---- Serving, nodes, MCP --------------------------------------------------

/// Listen address.
pub const SERVE_ADDR: Setting = Setting::new(
    Serving,
    ENV_ONLY,
    "serve_addr",
    Some("RLM_SERVE_ADDR"),
    Kind::Text,
    "127.0.0.1:8080",
    "Address `rlm serve` listens on; port 0 picks a free one.",
)
.flag("--addr");
/// Questions at once.
pub const SERVE_MAX_RUNS: Setting = Setting::new(
    Serving,
    ENV_ONLY,
    "serve_max_runs",
    Some("RLM_SERVE_MAX_RUNS"),
    Kind::Whole(1, 1_024),
    "2",
    "Questions `rlm serve` answers at once; more get 429.",
)
.flag("--max-runs");
/// Bearer token.
pub const SERVE_TOKEN: Setting = Setting::new(
    Serving,
    ENV_ONLY,
    "serve_token",
    Some("RLM_SERVE_TOKEN"),
    Kind::Secret,
    "none (required on a non-loopback address)",
    "Bearer token every /api, /v1 and /mcp request must carry.",
)
.flag("--token");
/// Extra host names.
pub const SERVE_ALLOWED_HOSTS: Setting = Setting::new(
    Serving,
    ENV_ONLY,
    "serve_allowed_hosts",
    Some("RLM_SERVE_ALLOWED_HOSTS"),
    Kind::Text,
    "none",
    "Host names the server also answers to (comma-separated), e.g. behind a proxy.",
)
.flag("--allowed-host");
/// Lease of a run.
pub const CLUSTER_LEASE_SECS: Setting = Setting::new(
    Serving,
    ENV_ONLY,
    "cluster_lease_secs",
    Some("RLM_CLUSTER_LEASE_SECS"),
    Kind::Above(0.0, 86_400.0),
    "10",
    "With a PostgreSQL store: seconds a node's lease on a run lasts without renewal.",
)
.flag("--lease-secs");
/// Calls at once across nodes.
pub const CLUSTER_MAX_CONCURRENT: Setting = Setting::new(
    Serving,
    ENV_ONLY,
    "cluster_max_concurrent",
    Some("RLM_CLUSTER_MAX_CONCURRENT"),
    Kind::Whole(1, 100_000),
    "--max-concurrent",
    "With a PostgreSQL store: model calls at once across every node sharing a provider key.",
)
.flag("--cluster-max-concurrent");
/// Node name.
pub const NODE_ID: Setting = Setting::new(
    Serving,
    ENV_ONLY,
    "node_id",
    Some("RLM_NODE_ID"),
    Kind::Text,
    "host:pid:random",
    "With a PostgreSQL store: this node's name in the database.",
)
.flag("--node-id");
/// MCP questions at once.
pub const MCP_MAX_RUNS: Setting = Setting::new(
    Serving,
    ENV_ONLY,
    "mcp_max_runs",
    Some("RLM_MCP_MAX_RUNS"),
    Kind::Whole(1, 1_024),
    "2",
    "Questions `rlm mcp` answers at once.",
)
.flag("--max-runs");
