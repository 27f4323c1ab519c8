"""Every error a Python user can hit: a typed exception (RLMArgumentError,
a ValueError; RLMRunError, a RuntimeError) with one line that names what was
wrong and what to pass."""

import socket

import pytest

from conftest import CONTEXT
from rlm_rs import RLM, RLMArgumentError, RLMError, RLMRunError


def refused(match, **kwargs):
    with pytest.raises(RLMArgumentError, match=match) as info:
        RLM(**kwargs)
    assert "\n" not in str(info.value), str(info.value)
    return info.value


def with_backend(backend, **extra):
    kwargs = {"backend": backend["backend"], "backend_kwargs": dict(backend["backend_kwargs"])}
    kwargs.update(extra)
    return kwargs


def test_the_exceptions_are_typed():
    assert issubclass(RLMArgumentError, RLMError) and issubclass(RLMArgumentError, ValueError)
    assert issubclass(RLMRunError, RLMError) and issubclass(RLMRunError, RuntimeError)


def test_bad_backends(backend):
    refused(r"backend='gemini' is not supported: use one of anthropic, azure_openai, local, openai, openrouter, vllm", backend="gemini")
    refused(r"backend='local': this build of rlm_rs has no embedded model", backend="local")
    refused(r"backend='vllm' needs backend_kwargs=\{'base_url'", backend="vllm", backend_kwargs={"api_key": "k"})
    refused(r"backend_kwargs must be a dict, got list", backend="openai", backend_kwargs=["x"])
    refused(r"backend_kwargs has no setting 'temperature'; it takes: model_name", **with_backend(backend, backend_kwargs={"temperature": 0.2}))
    refused(r"backend_kwargs\['timeout'\] must be a str or a number, got list", backend="openai", backend_kwargs={"timeout": [1]})
    kwargs = with_backend(backend)
    kwargs["backend_kwargs"]["timeout"] = "soon"
    refused(r'backend_kwargs\["timeout"\]="soon" is not a number of seconds', **kwargs)
    kwargs["backend_kwargs"]["timeout"] = -3
    refused(r'backend_kwargs\["timeout"\]="-3" is not a number more than 0', **kwargs)
    kwargs = with_backend(backend)
    kwargs["backend_kwargs"]["max_retries"] = "many"
    refused(r'backend_kwargs\["max_retries"\]="many" is not a whole number', **kwargs)
    kwargs = with_backend(backend)
    kwargs["backend_kwargs"]["base_url"] = "ftp://example"
    refused(r"base URL 'ftp://example' must start with http:// or https://", **kwargs)


def test_a_missing_api_key_names_both_ways_to_give_one(backend):
    kwargs = with_backend(backend)
    del kwargs["backend_kwargs"]["api_key"]
    refused(r"no API key for openai: pass backend_kwargs=\{\"api_key\": \.\.\.\} or set RLM_API_KEY or OPENAI_API_KEY", **kwargs)
    refused(r"no API key for anthropic", backend="anthropic")


def test_the_sub_call_backend_must_be_the_same_provider(backend):
    refused(r"other_backends must be \[backend\]", **with_backend(backend, other_backends=["anthropic"], other_backend_kwargs=[{"model_name": "m"}]))
    refused(r"other_backend_kwargs must be \[\{'model_name'", **with_backend(backend, other_backends=["openai"], other_backend_kwargs={"model_name": "m"}))
    refused(r"other_backend_kwargs takes only model_name", **with_backend(backend, other_backends=["openai"], other_backend_kwargs=[{"api_key": "k"}]))


def test_environments(backend):
    refused(r"environment='docker' is not supported: rlm_rs runs the model's code in its own sandbox", **with_backend(backend, environment="docker"))
    refused(r"environment='jail' is unknown", **with_backend(backend, environment="jail"))
    refused(r"environment_kwargs has no setting 'setup_code'", **with_backend(backend, environment_kwargs={"setup_code": 1}))
    refused(r"environment_kwargs has no setting 'setup_code'", **with_backend(backend, environment_kwargs={"setup_code": "import os"}))
    refused(r'environment_kwargs\["cell_timeout"\]="0" is not a whole number from 1 to 3600', **with_backend(backend, environment_kwargs={"cell_timeout": 0}))
    refused(r"environment_kwargs\['memory_mib'\] must be a number", **with_backend(backend, environment_kwargs={"memory_mib": "lots"}))
    refused(r'environment_kwargs\["sandbox"\]: unknown sandbox "jail": use monty \(the default\) or cpython', **with_backend(backend, environment_kwargs={"sandbox": "jail"}))
    refused(r"environment_kwargs\['sandbox'\] must be a str, got int", **with_backend(backend, environment_kwargs={"sandbox": 3}))


def test_budgets_and_settings_out_of_range(backend):
    refused(r"max_depth=0 is not a whole number from 1 to 11 \(the reference library's meaning", **with_backend(backend, max_depth=0))
    refused(r"max_depth=True is not a whole number", **with_backend(backend, max_depth=True))
    refused(r'max_iterations="0" is not a whole number from 1 to 1000', **with_backend(backend, max_iterations=0))
    refused(r"max_iterations must be a whole number, got 2.5", **with_backend(backend, max_iterations=2.5))
    refused(r'max_budget="-1" is not a number', **with_backend(backend, max_budget=-1))
    refused(r"max_timeout must be a number, got 'soon'", **with_backend(backend, max_timeout="soon"))
    refused(r'max_timeout="inf" is not a number', **with_backend(backend, max_timeout=float("inf")))
    refused(r'max_tokens="0" is not a whole number from 1', **with_backend(backend, max_tokens=0))
    refused(r'max_errors="0" is not a whole number from 1 to 1000', **with_backend(backend, max_errors=0))
    refused(r'max_llm_calls="0" is not a whole number', **with_backend(backend, max_llm_calls=0))
    refused(r"flow: unknown flow \"sideways\"", **with_backend(backend, flow="sideways"))
    refused(r"citations", **with_backend(backend, citations="loose"))
    refused(r"verify", **with_backend(backend, verify="maybe"))
    refused(r"context_shape", **with_backend(backend, context_shape="tree"))
    refused(r"coverage must be True or False, got 'yes'", **with_backend(backend, coverage="yes"))
    refused(r"flow must be a str, got int", **with_backend(backend, flow=3))
    refused(r"chunk_chars must be a whole number", **with_backend(backend, chunk_chars="big"))
    refused(r"custom_system_prompt must be a str", **with_backend(backend, custom_system_prompt=["x"]))
    refused(r"on_event must be callable", **with_backend(backend, on_event="print"))
    refused(r"turn_format", **with_backend(backend, turn_format="yaml"))
    refused(r"subcall_cache must be True or False, got 'off'", **with_backend(backend, subcall_cache="off"))
    refused(r"output_schema must be a JSON Schema dict, got str", **with_backend(backend, output_schema="{}"))
    refused(r"output_schema: unsupported JSON Schema keyword 'patternProperties'", **with_backend(backend, output_schema={"type": "object", "patternProperties": {}}))


def test_reference_features_rlm_rs_does_not_have_are_refused(backend):
    refused(r"custom_tools is not supported by rlm_rs", **with_backend(backend, custom_tools={"f": print}))
    refused(r"tool_code is not supported", **with_backend(backend, tool_code="x = 1"))
    refused(r"persistent is not supported", **with_backend(backend, persistent=True))
    refused(r"compaction is not supported", **with_backend(backend, compaction=True))
    refused(r"logger is not supported by rlm_rs: pass trace='run.jsonl'", **with_backend(backend, logger=object()))
    refused(r"depth is the reference library's internal recursion level", **with_backend(backend, depth=1))
    with pytest.raises(TypeError):
        RLM(**with_backend(backend, max_itrations=3))


def test_a_missing_config_file(backend, tmp_path):
    refused(r"cannot read config file", **with_backend(backend, config=tmp_path / "nope.toml"))
    bad = tmp_path / "rlm.toml"
    bad.write_text("[engine]\nmax_llm_cals = 5\n")
    refused(r'\[engine\] has no setting "max_llm_cals"', **with_backend(backend, config=bad))


def asks(rlm, match, prompt, root_prompt="What is the code?"):
    with pytest.raises(RLMArgumentError, match=match) as info:
        rlm.completion(prompt, root_prompt=root_prompt)
    assert "\n" not in str(info.value), str(info.value)


def test_bad_contexts_and_questions(backend):
    rlm = RLM(**backend)
    asks(rlm, r"prompt is None: pass the context", None)
    asks(rlm, r"prompt must be the context as a str, a list or a dict, got int", 42)
    asks(rlm, r"prompt is empty", [])
    asks(rlm, r"prompt is empty", {})
    asks(rlm, r"prompt holds no text", ["", "  "])
    asks(rlm, r"prompt\[0\] is bytes: decode it", [b"abc"])
    asks(rlm, r"prompt\[1\] is a object that is neither text nor JSON", ["ok", object()])
    asks(rlm, r"document 0's name \"a\\nb\" holds a control character", {"a\nb": "text"})
    asks(rlm, r"root_prompt must be a str, got int", CONTEXT, root_prompt=5)
    asks(rlm, r"the question is empty: pass root_prompt", CONTEXT, root_prompt="  ")
    small = RLM(**with_backend(backend, chunk_chars=10))
    asks(small, r"the context: invalid option: chunk size 10 is below the minimum of 64", CONTEXT)


def test_bad_store_use(backend, tmp_path):
    rlm = RLM(**with_backend(backend, store=tmp_path / "missing"))
    asks(rlm, r"store=.*missing: .* is not an rlm store: run `rlm index", "What is the code?", root_prompt=None)
    asks(rlm, r"with store=, the store is the context: pass the question as prompt or as root_prompt, not both", "q")
    asks(rlm, r"with store=, the question must be a str", ["q"], root_prompt=None)


def test_an_unwritable_trace_and_an_oversized_system_prompt(backend, tmp_path):
    rlm = RLM(**with_backend(backend, trace=tmp_path / "no" / "such" / "dir" / "run.jsonl"))
    asks(rlm, r"trace=.*run.jsonl: cannot write it", CONTEXT)
    rlm = RLM(**with_backend(backend, custom_system_prompt="x" * (1 << 20 | 1)))
    asks(rlm, r"custom_system_prompt is longer than 1 MiB", CONTEXT)


def test_a_model_that_never_answers_is_a_run_error(backend):
    # A port nothing listens on.
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    kwargs = with_backend(backend)
    kwargs["backend_kwargs"].update(base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
    rlm = RLM(**kwargs)
    with pytest.raises(RLMRunError) as info:
        rlm.completion(CONTEXT, root_prompt="What is the code?")
    assert "\n" not in str(info.value), str(info.value)
