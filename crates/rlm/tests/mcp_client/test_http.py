"""`rlm serve`'s MCP endpoint (`/mcp`, streamable HTTP) driven by the official
MCP Python SDK (PyPI `mcp`): the SDK's streamable HTTP client
(`mcp.client.streamable_http`) connects to the real server and runs the checks
test_stdio.py runs over stdio (checks.py: tools, resources, an answer with
progress, bad arguments, cancellation), in the legacy (session) and the
discover (stateless) modes; and it is refused without the server's token.

Run by run.sh (a venv with pinned `mcp` and `pytest`, the rlm binary built).
"""

import subprocess

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from checks import RLM, a_cancelled_ask_frees_the_only_run_slot, bad_arguments_are_tool_errors, rlm_env
from checks import tools_resources_and_an_answer

TOKEN = "mcp-test-token"


class Serve:
    """A running `rlm serve` on 127.0.0.1:0."""

    def __init__(self, workdir, model_url, *extra):
        self.proc = subprocess.Popen(
            [RLM, "serve", "--store", "store", "--addr", "127.0.0.1:0", *extra],
            cwd=workdir,
            env=rlm_env(workdir, model_url),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        line = self.proc.stdout.readline()
        assert line.startswith("listening on http://"), line
        self.base = line.split("listening on ", 1)[1].strip()
        self.url = self.base + "/mcp"

    def stop(self):
        self.proc.terminate()
        assert self.proc.wait(timeout=30) == 0


@pytest.fixture
def serve(workdir, model_url):
    started = []

    def start(*extra):
        s = Serve(workdir, model_url, *extra)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


def client(url, token=None, **kw):
    """The SDK's client over its streamable HTTP transport (the token as a Bearer header)."""
    if token is None:
        return Client(url, **kw)
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    return Client(streamable_http_client(url, http_client=http), **kw)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_tools_resources_and_an_answer_with_progress_over_http(serve, mode):
    server = serve()

    async def run():
        async with client(server.url, mode=mode, read_timeout_seconds=120) as c:
            return (await tools_resources_and_an_answer(c))["run_id"]

    run_id = anyio.run(run)
    # The answer is one of the server's runs, as the HTTP API shows them.
    run = httpx2.get(f"{server.base}/api/runs/{run_id}").json()
    assert run["status"] == "done", run


def test_a_bad_argument_over_http_is_a_tool_error(serve):
    server = serve()

    async def run():
        async with client(server.url, mode="legacy") as c:
            await bad_arguments_are_tool_errors(c)
            with pytest.raises(Exception, match="POST /api/reindex"):
                await c.call_tool("index", {"paths": ["docs"]})

    anyio.run(run)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_cancelling_a_running_ask_over_http_frees_the_server(serve, mode):
    server = serve("--max-runs", "1")

    async def run():
        async with client(server.url, mode=mode, read_timeout_seconds=120) as c:
            await a_cancelled_ask_frees_the_only_run_slot(c)

    anyio.run(run)
    runs = httpx2.get(f"{server.base}/api/runs").json()["runs"]  # newest first
    assert [r["status"] for r in runs[:2]] == ["done", "cancelled"], runs


def test_the_token_guards_mcp(serve):
    server = serve("--token", TOKEN)

    refused = httpx2.post(
        server.url,
        json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        headers={"Accept": "application/json, text/event-stream"},
    )
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"].startswith("Bearer")

    async def run():
        with pytest.raises(Exception):
            async with client(server.url, mode="legacy") as c:
                await c.list_tools()
        with pytest.raises(Exception):
            async with client(server.url, token="wrong", mode="legacy") as c:
                await c.list_tools()
        async with client(server.url, token=TOKEN, mode="legacy") as c:
            docs = await c.call_tool("list_documents", {})
            assert docs.structured_content["total"] == 3

    anyio.run(run)
