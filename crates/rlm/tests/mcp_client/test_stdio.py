"""`rlm mcp` driven by the official MCP Python SDK (PyPI `mcp`): the SDK's
`Client` starts the real binary as a stdio server and calls its tools, reads
its resources, follows an answer's progress, cancels a running question and
sends a bad argument (checks.py, shared with test_http.py). The model is
scripted_model.py beside this file.

Run by run.sh (a venv with pinned `mcp` and `pytest`, the rlm binary built);
RLM_BIN names the binary (default: target/debug/rlm of this repository).
"""

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from checks import RLM, a_cancelled_ask_frees_the_only_run_slot, bad_arguments_are_tool_errors, rlm_env
from checks import tools_resources_and_an_answer


def server(workdir, model_url, *extra):
    return StdioServerParameters(
        command=RLM,
        args=["mcp", "--store", "store", *extra],
        env=rlm_env(workdir, model_url),
        cwd=str(workdir),
    )


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_tools_resources_and_an_answer_with_progress(workdir, model_url, mode):
    async def run():
        async with Client(server(workdir, model_url), mode=mode, read_timeout_seconds=120) as client:
            await tools_resources_and_an_answer(client)

    anyio.run(run)


def test_a_bad_argument_is_a_tool_error_and_the_server_goes_on(workdir, model_url):
    async def run():
        async with Client(server(workdir, model_url), mode="legacy") as client:
            await bad_arguments_are_tool_errors(client)
            with pytest.raises(Exception, match="indexing is off"):
                await client.call_tool("index", {"paths": ["docs"]})

    anyio.run(run)


def test_cancelling_a_running_ask_frees_the_server(workdir, model_url):
    async def run():
        async with Client(
            server(workdir, model_url, "--max-runs", "1"), mode="legacy", read_timeout_seconds=120
        ) as client:
            await a_cancelled_ask_frees_the_only_run_slot(client)

    anyio.run(run)
