//! The MCP handler: which tools and resources the server offers (`rlm mcp`
//! over stdio, `rlm serve` at `/mcp`) and which function answers each request.

use std::sync::Arc;

use rmcp::ErrorData;
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};

use super::args::ToolArgs;
use super::state::{Backend, McpState};
use super::{ask, docs, served, tools};

/// The MCP server (one per session; they share the state).
#[derive(Clone)]
pub(super) struct RlmServer {
    state: Arc<McpState>,
}

impl RlmServer {
    pub(super) fn new(state: Arc<McpState>) -> Self {
        RlmServer { state }
    }

    /// Runs inside `rlm serve`.
    fn served(&self) -> bool {
        matches!(self.state.backend, Backend::Served(_))
    }
}

const INSTRUCTIONS: &str = "rlm answers questions over an indexed document collection far larger \
than a model's context. `ask` runs a Recursive Language Model over the whole collection and returns \
an answer with verified citations (slow: seconds to minutes; progress is reported). `search` finds \
chunks fast, `show` reads a chunk or document, `list_documents` lists the collection; documents are \
also resources (rlm://doc/<id>).";

impl ServerHandler for RlmServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
        .with_server_info(
            Implementation::new("rlm", env!("CARGO_PKG_VERSION"))
                .with_title("rlm: Recursive Language Models over your documents"),
        )
        .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools::list(
            self.state.allow_index,
            self.served(),
        )))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.as_ref();
        let ask_args = tools::ask_args(self.served());
        let known = match name {
            "ask" => ask_args.as_slice(),
            "search" => tools::SEARCH_ARGS,
            "show" => tools::SHOW_ARGS,
            "list_documents" => tools::LIST_ARGS,
            "index" if self.state.allow_index => tools::INDEX_ARGS,
            "index" if self.served() => {
                return Err(ErrorData::invalid_params(
                    "unknown tool `index`: rlm serve indexes through its own API (the page's uploads, POST /api/index with --allow-index-paths, POST /api/reindex); these tools see the new documents once it is done",
                    None,
                ));
            }
            "index" => {
                return Err(ErrorData::invalid_params(
                    "unknown tool `index`: indexing is off on this server (start it with `rlm mcp --allow-index`)",
                    None,
                ));
            }
            other => {
                return Err(ErrorData::invalid_params(
                    format!(
                        "unknown tool {other:?}; the tools are ask, search, show, list_documents{} (tools/list)",
                        if self.state.allow_index {
                            ", index"
                        } else {
                            ""
                        }
                    ),
                    None,
                ));
            }
        };
        let args = match ToolArgs::new(name, request.arguments, known) {
            Ok(a) => a,
            Err(e) => return Ok(ask::tool_error(format!("invalid arguments: {}", e.0)).into()),
        };
        let state = self.state.clone();
        let result = match name {
            "ask" if self.served() => served::ask(state, args, &context).await?,
            "ask" => ask::run(state, args, &context).await?,
            "search" => docs::search(state, args).await,
            "show" => docs::show(state, args).await,
            "list_documents" => docs::list_documents(state, args).await,
            _ => docs::index(state, args).await,
        };
        Ok(result.into())
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        docs::list_resources(self.state.clone(), request.and_then(|r| r.cursor)).await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(docs::resource_templates())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        Ok(docs::read_resource(self.state.clone(), request.uri)
            .await?
            .into())
    }
}
