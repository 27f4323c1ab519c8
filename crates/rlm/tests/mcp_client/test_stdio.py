"""`rlm mcp` driven by the official MCP Python SDK (PyPI `mcp`): the SDK's
`Client` starts the real binary as a stdio server and calls its tools, reads
its resources, follows an answer's progress, cancels a running question and
sends a bad argument. The model is scripted_model.py beside this file.

Run by run.sh (a venv with pinned `mcp` and `pytest`, the rlm binary built);
RLM_BIN names the binary (default: target/debug/rlm of this repository).
"""

import os
import pathlib
import subprocess
import sys
import time

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[3]
RLM = str(pathlib.Path(os.environ.get("RLM_BIN") or REPO / "target" / "debug" / "rlm").resolve())

DOCS = {
    "a_intro.txt": "This memo describes the office move.\n",
    "b_notes.txt": "Meeting notes.\nThe secret code is 4721. Keep it safe.\n",
    "c_misc.txt": "Lunch options and parking spaces.\n",
}
QUESTION = "What is the secret code?"


@pytest.fixture(scope="module")
def model_url():
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "scripted_model.py"), "--port", "0", "--stall-secs", "60"],
        stdout=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline()
    assert line.startswith("listening on "), line
    yield line.split("listening on ", 1)[1].strip()
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, model_url):
    d = tmp_path_factory.mktemp("mcp")
    (d / "docs").mkdir()
    for name, text in DOCS.items():
        (d / "docs" / name).write_text(text)
    out = subprocess.run(
        [RLM, "index", "docs", "--store", "store"], cwd=d, env=rlm_env(d, model_url), capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    return d


def rlm_env(d, model_url):
    """What rlm sees: the scripted model, no local model, nothing of the caller's RLM_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RLM_") and not k.endswith("_API_KEY")}
    env.update(
        RLM_PROVIDER="openai",
        RLM_BASE_URL=model_url,
        RLM_API_KEY="test-key",
        RLM_PRIMARY_MODEL="root-model",
        RLM_SUB_MODEL="sub-model",
        RLM_AUTO_PULL="off",
        RLM_MODELS_DIR=str(d / ".no-models"),
    )
    return env


def server(workdir, model_url, *extra):
    return StdioServerParameters(
        command=RLM,
        args=["mcp", "--store", "store", *extra],
        env=rlm_env(workdir, model_url),
        cwd=str(workdir),
    )


def text_of(result):
    return result.content[0].text


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_tools_resources_and_an_answer_with_progress(workdir, model_url, mode):
    async def run():
        async with Client(server(workdir, model_url), mode=mode, read_timeout_seconds=120) as client:
            tools = await client.list_tools()
            assert [t.name for t in tools.tools] == ["ask", "search", "show", "list_documents"]

            docs = await client.call_tool("list_documents", {})
            assert not docs.is_error, text_of(docs)
            assert docs.structured_content["total"] == 3

            found = await client.call_tool("search", {"query": "secret code", "k": 3})
            hit = found.structured_content["hits"][0]
            assert hit["path"] == "docs/b_notes.txt"
            chunk = await client.call_tool("show", {"id": hit["chunk_id"]})
            assert "The secret code is 4721" in text_of(chunk)

            listed = await client.list_resources()
            uris = {r.name: r.uri for r in listed.resources}
            assert set(uris) == {"docs/a_intro.txt", "docs/b_notes.txt", "docs/c_misc.txt"}
            assert str(uris["docs/b_notes.txt"]) == f"rlm://doc/{hit['doc_id']}"
            read = await client.read_resource(uris["docs/b_notes.txt"])
            assert read.contents[0].text == DOCS["b_notes.txt"]

            progress = []

            async def on_progress(value, total, message):
                progress.append((value, message))

            answer = await client.call_tool("ask", {"question": QUESTION}, progress_callback=on_progress)
            assert not answer.is_error, text_of(answer)
            s = answer.structured_content
            assert "4721" in s["answer"]
            assert s["partial"] is False
            assert s["sources"][0] == {
                "chunk_id": hit["chunk_id"],
                "doc_id": hit["doc_id"],
                "path": "docs/b_notes.txt",
                "line": 2,
                "quote": "The secret code is 4721",
                "origin": "model",
            }
            assert "**Sources**" in text_of(answer)
            assert len(progress) >= 4, progress
            values = [v for v, _ in progress]
            assert values == sorted(values)
            assert "started" in progress[0][1] and "finished" in progress[-1][1], progress

    anyio.run(run)


def test_a_bad_argument_is_a_tool_error_and_the_server_goes_on(workdir, model_url):
    async def run():
        async with Client(server(workdir, model_url), mode="legacy") as client:
            bad = await client.call_tool("search", {"query": "secret", "k": 0})
            assert bad.is_error
            assert "`k` must be a whole number from 1 to 10000, got 0" in text_of(bad)
            bad = await client.call_tool("ask", {"question": "q", "max_depth": "deep"})
            assert bad.is_error and "max_depth" in text_of(bad), text_of(bad)
            with pytest.raises(Exception, match="unknown tool"):
                await client.call_tool("no_such_tool", {})
            with pytest.raises(Exception, match="indexing is off"):
                await client.call_tool("index", {"paths": ["docs"]})
            ok = await client.call_tool("search", {"query": "secret"})
            assert not ok.is_error

    anyio.run(run)


def test_cancelling_a_running_ask_frees_the_server(workdir, model_url):
    async def run():
        # One question at a time: the second is answered only once the
        # cancelled one (its model reply stalls 60 s) has really stopped.
        async with Client(
            server(workdir, model_url, "--max-runs", "1"), mode="legacy", read_timeout_seconds=120
        ) as client:
            started = anyio.Event()

            async def on_progress(value, total, message):
                started.set()

            async def stalled():
                await client.call_tool(
                    "ask", {"question": "STALL: what is the secret code?"}, progress_callback=on_progress
                )
                raise AssertionError("the cancelled call returned")

            async with anyio.create_task_group() as tg:
                tg.start_soon(stalled)
                with anyio.fail_after(60):
                    await started.wait()
                await anyio.sleep(0.5)  # the model has the stalled request
                tg.cancel_scope.cancel()  # the SDK sends notifications/cancelled
            t0 = time.monotonic()
            with anyio.fail_after(30):
                answer = await client.call_tool("ask", {"question": QUESTION})
            assert "4721" in answer.structured_content["answer"]
            assert time.monotonic() - t0 < 30

    anyio.run(run)
