//! The MCP handler: which tools and resources `rlm mcp` offers and which
//! function answers each request.

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
use super::state::McpState;
use super::{ask, docs, tools};

/// The `rlm mcp` server.
#[derive(Clone)]
pub(super) struct RlmServer {
    state: Arc<McpState>,
}

impl RlmServer {
    pub(super) fn new(state: Arc<McpState>) -> Self {
        RlmServer { state }
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
        )))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.as_ref();
        let known = match name {
            "ask" => tools::ASK_ARGS,
            "search" => tools::SEARCH_ARGS,
            "show" => tools::SHOW_ARGS,
            "list_documents" => tools::LIST_ARGS,
            "index" if self.state.allow_index => tools::INDEX_ARGS,
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
