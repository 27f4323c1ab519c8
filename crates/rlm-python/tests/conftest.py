"""Fixtures of the rlm_rs tests: the installed wheel, the scripted
OpenAI-compatible model server (the MCP client test's, a real socket on
127.0.0.1) and an environment free of the developer's RLM_* settings."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SCRIPTED_MODEL = HERE.parents[1] / "rlm" / "tests" / "mcp_client" / "scripted_model.py"

# Document 1 holds the fact the scripted model's FINAL cites ([[doc:1 "..."]]).
CONTEXT = [
    "This memo describes the office move.\nNothing secret here at all.\n",
    "Meeting notes from Tuesday.\nThe secret code is 4721. Keep it safe.\nEnd of notes.\n",
    "Miscellaneous remarks about lunch options and parking spaces.\n",
]


def serve_model(stall_secs):
    """Runs the scripted model (STALL questions wait `stall_secs`); yields its URL."""
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPTED_MODEL), "--port", "0", "--stall-secs", str(stall_secs)],
        stdout=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline().strip()
    assert line.startswith("listening on "), line
    try:
        yield line.split()[-1]
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def model_url():
    """A scripted model whose STALL questions wait 60 s (for cancellation)."""
    yield from serve_model(60)


@pytest.fixture(scope="session")
def slow_model_url():
    """A scripted model whose STALL questions wait 1 s (for the GIL test)."""
    yield from serve_model(1.0)


def default_sigint():
    """Ctrl-C raises KeyboardInterrupt, as in a terminal. A shell starting
    a command in the background without job control (`cmd &` in a script,
    as CI runners and `nohup` do) starts it with SIGINT ignored, and Python
    then installs no handler: `_thread.interrupt_main` and a real SIGINT do
    nothing, so the Ctrl-C tests would test the harness, not rlm_rs."""
    signal.signal(signal.SIGINT, signal.default_int_handler)


def sigint_as_in_a_terminal():
    """`preexec_fn` of a child Python program: SIGINT back to its default,
    so the child's interpreter installs its KeyboardInterrupt handler."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


default_sigint()


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch, tmp_path):
    """No RLM_* variable, provider key or ./rlm.toml of the developer's."""
    for name in list(os.environ):
        if name.startswith("RLM_") or name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AZURE_OPENAI_API_KEY", "OPENROUTER_API_KEY"):
            if name not in ("RLM_BIN", "RLM_REQUIRE_CPYTHON_SANDBOX"):
                monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def backend(model_url):
    """Keyword arguments of an RLM on the scripted model."""
    return {
        "backend": "openai",
        "backend_kwargs": {
            "base_url": model_url,
            "api_key": "test-key",
            "model_name": "root-model",
            "sub_model_name": "sub-model",
        },
    }
