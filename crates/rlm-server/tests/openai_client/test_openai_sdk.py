"""`rlm serve`'s OpenAI-compatible endpoint driven by the official `openai`
Python SDK: list the models, ask streamed and not, carry a conversation, and
check that errors arrive as the SDK's own exceptions. The model behind rlm is
the scripted OpenAI-compatible stub of the MCP client test
(crates/rlm/tests/mcp_client/scripted_model.py).

Run by run.sh (a venv with the pinned `openai` and `pytest`, the rlm binary
built); RLM_BIN names the binary (default: target/debug/rlm).
"""

import os
import pathlib
import subprocess
import sys

import openai
import pytest

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[3]
RLM = str(pathlib.Path(os.environ.get("RLM_BIN") or REPO / "target" / "debug" / "rlm").resolve())
STUB = REPO / "crates" / "rlm" / "tests" / "mcp_client" / "scripted_model.py"

DOCS = {
    "a_intro.txt": "This memo describes the office move.\n",
    "b_notes.txt": "Meeting notes.\nThe secret code is 4721. Keep it safe.\n",
    "c_misc.txt": "Lunch options and parking spaces.\n",
}


def started(cmd, **kw):
    """A process whose first stdout line is `listening on URL`, and that URL."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, **kw)
    line = proc.stdout.readline()
    assert line.startswith("listening on "), line
    return proc, line.split("listening on ", 1)[1].strip()


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    model, model_url = started([sys.executable, str(STUB), "--port", "0"])
    d = tmp_path_factory.mktemp("openai")
    (d / "docs").mkdir()
    for name, text in DOCS.items():
        (d / "docs" / name).write_text(text)
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
    out = subprocess.run([RLM, "index", "docs", "--store", "store"], cwd=d, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    serve, base = started([RLM, "serve", "--store", "store", "--addr", "127.0.0.1:0"], cwd=d, env=env)
    # Any key: the SDK insists on one; rlm serve has its own auth settings.
    yield openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0, timeout=60)
    serve.terminate()
    serve.wait(timeout=30)
    model.terminate()
    model.wait(timeout=10)


def test_the_store_is_listed_as_models(client):
    ids = [m.id for m in client.models.list()]
    assert ids == ["rlm", "rlm-repl", "rlm-pipeline", "rlm-rag", "rlm-auto"]


def test_a_completion_answers_with_numbered_checked_sources(client):
    r = client.chat.completions.create(
        model="rlm",
        messages=[
            {"role": "system", "content": "You are helpful."},
            {"role": "user", "content": "Where is the office moving?"},
            {"role": "assistant", "content": "To the fourth floor."},
            {"role": "user", "content": "What is the secret code?"},
        ],
    )
    assert r.object == "chat.completion"
    choice = r.choices[0]
    assert choice.finish_reason == "stop"
    assert choice.message.role == "assistant"
    text = choice.message.content
    assert text.startswith("The secret code is 4721 [1]"), text
    assert "**Sources**" in text and '"The secret code is 4721"' in text, text
    assert "b_notes.txt" in text, text
    assert r.usage.prompt_tokens > 0 and r.usage.completion_tokens > 0
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_a_streamed_completion_adds_up_to_the_answer(client):
    stream = client.chat.completions.create(
        model="rlm-repl",
        messages=[{"role": "user", "content": "What is the secret code?"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    text, finish, usage = "", [], None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            text += c.delta.content or ""
            if c.finish_reason:
                finish.append(c.finish_reason)
    assert text.startswith("The secret code is 4721 [1]"), text
    assert finish == ["stop"]
    assert usage is not None and usage.total_tokens > 0


def test_errors_are_the_sdks_exceptions(client):
    with pytest.raises(openai.NotFoundError) as e:
        client.chat.completions.create(model="gpt-4", messages=[{"role": "user", "content": "q"}])
    assert "GET /v1/models" in str(e.value)
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="rlm", messages=[])
    assert "messages is empty" in str(e.value)
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="rlm", messages=[{"role": "user", "content": "   "}])
    assert "question is empty" in str(e.value)
