"""Fixtures of both transports' tests: the scripted model and an indexed corpus."""

import subprocess
import sys

import pytest

from checks import DOCS, HERE, RLM, rlm_env


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
