"""What `rlm mcp` (stdio) and `rlm serve`'s `/mcp` (streamable HTTP) must both
do, checked through a connected `mcp.Client` of the official SDK; the corpus,
the question and the environment the rlm processes get."""

import os
import pathlib
import time

import anyio
import pytest

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[3]
RLM = str(pathlib.Path(os.environ.get("RLM_BIN") or REPO / "target" / "debug" / "rlm").resolve())

DOCS = {
    "a_intro.txt": "This memo describes the office move.\n",
    "b_notes.txt": "Meeting notes.\nThe secret code is 4721. Keep it safe.\n",
    "c_misc.txt": "Lunch options and parking spaces.\n",
}
QUESTION = "What is the secret code?"


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


def text_of(result):
    return result.content[0].text


async def tools_resources_and_an_answer(client):
    """The four tools, the documents as resources, and an answer with its
    progress; returns the answer's structured content."""
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
    # Whether the passage entails the claim, and apart the quote check.
    assert s["claims"][0]["support"] == "supported", s["claims"]
    assert s["claims"][0]["quote_check"] == "verified", s["claims"]
    assert s["related_sources"] == []
    assert len(progress) >= 4, progress
    values = [v for v, _ in progress]
    assert values == sorted(values)
    assert "started" in progress[0][1] and "finished" in progress[-1][1], progress
    return s


async def bad_arguments_are_tool_errors(client):
    """Bad arguments come back as tool errors naming the argument, an unknown
    tool as a protocol error, and the server goes on."""
    bad = await client.call_tool("search", {"query": "secret", "k": 0})
    assert bad.is_error
    assert "`k` must be a whole number from 1 to 10000, got 0" in text_of(bad)
    bad = await client.call_tool("ask", {"question": "q", "max_depth": "deep"})
    assert bad.is_error and "max_depth" in text_of(bad), text_of(bad)
    bad = await client.call_tool("ask", {"question": "   "})
    assert bad.is_error and "`question` is empty" in text_of(bad), text_of(bad)
    with pytest.raises(Exception, match="unknown tool"):
        await client.call_tool("no_such_tool", {})
    ok = await client.call_tool("search", {"query": "secret"})
    assert not ok.is_error


async def a_cancelled_ask_frees_the_only_run_slot(client):
    """With one run slot (--max-runs 1), a question whose model reply stalls
    60 s is cancelled through the SDK (notifications/cancelled); the next
    question is answered at once, so the cancelled run really stopped."""
    started = anyio.Event()

    async def on_progress(value, total, message):
        started.set()

    async def stalled():
        await client.call_tool("ask", {"question": "STALL: what is the secret code?"}, progress_callback=on_progress)
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
    assert not answer.is_error, text_of(answer)
    assert "4721" in answer.structured_content["answer"]
    assert time.monotonic() - t0 < 30
