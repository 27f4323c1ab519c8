"""rlm_rs against the scripted model server: the reference call shape, the
result fields, contexts in memory and a store, streaming, callbacks, the GIL
released while the engine runs, and Ctrl-C cancelling a run."""

import _thread
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from conftest import CONTEXT, sigint_as_in_a_terminal
from rlm_rs import RLM, RLMCancelled, RLMChatCompletion, Source


def test_completion_over_a_list_context_has_the_reference_fields_and_checked_sources(backend):
    rlm = RLM(**backend)
    result = rlm.completion(CONTEXT, root_prompt="What is the secret code?")
    assert isinstance(result, RLMChatCompletion)
    assert "4721" in result.response
    assert str(result) == result.response
    assert result.prompt is CONTEXT
    assert result.root_model == "root-model"
    assert result.execution_time > 0
    assert not result.partial and result.partial_reason is None
    # Two root turns: a cell, then FINAL.
    root = result.usage_summary.model_usage_summaries["root-model"]
    assert root.total_calls == 2
    assert root.total_input_tokens > 0 and root.total_output_tokens > 0
    # No judge call: the claim is its passage word for word.
    assert result.usage["calls"] == 2
    assert "sub-model" not in result.usage_summary.model_usage_summaries
    # The model's citation was checked against document 1 of the list.
    assert result.sources == [
        Source(path="context[1]", line=2, chunk_id=result.sources[0].chunk_id, quote="The secret code is 4721", attached_by_engine=False)
    ]
    assert result.grounded["supported"] == result.grounded["claims"] == 1
    assert result.claims[0]["support"] == "supported"
    assert result.claims[0]["quote_check"] == "verified"
    assert result.related_sources == []
    assert result.citations[0]["status"] == "verified"
    assert result.run_id
    d = result.to_dict()
    for key in ("root_model", "prompt", "response", "usage_summary", "execution_time", "sources", "partial"):
        assert key in d
    assert d["usage_summary"]["model_usage_summaries"]["root-model"]["total_calls"] == 2
    json.dumps(d)


def test_output_schema_returns_the_answer_as_a_value_with_its_citations(backend):
    schema = {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"], "additionalProperties": False}
    rlm = RLM(**backend, output_schema=schema)
    result = rlm.completion(CONTEXT, root_prompt="What is the secret code?")
    assert result.data == {"code": "4721"}, result.data_error
    assert result.data_error is None
    assert result.data_citations[0]["path"] == "$.code"
    assert result.data_citations[0]["citations"][0]["quote"] == "The secret code is 4721"
    # Without output_schema there is no data.
    assert RLM(**backend).completion(CONTEXT, root_prompt="What is the secret code?").data is None


def test_a_str_context_is_one_document_and_a_dict_names_its_documents(backend):
    rlm = RLM(**backend)
    # One string: document 0 only, so the model's [[doc:1 ...]] cannot
    # verify; the claim is grounded by the engine on the text the cell printed.
    result = rlm.completion("Notes.\nThe secret code is 4721. Keep it safe.\n", root_prompt="What is the secret code?")
    assert "4721" in result.response
    assert [s.path for s in result.sources] == ["context"]
    assert result.sources[0].attached_by_engine
    result = rlm.completion(
        {"memo.txt": CONTEXT[0], "notes.txt": CONTEXT[1], "data.json": {"rows": [1, 2]}},
        root_prompt="What is the secret code?",
    )
    assert [s.path for s in result.sources] == ["notes.txt"]


def test_without_root_prompt_the_context_holds_the_task(backend):
    events = []
    rlm = RLM(**backend, on_event=events.append)
    result = rlm.completion(CONTEXT)
    assert "4721" in result.response
    started = [e for e in events if e.type == "run_started"][0]
    assert started.question == "Answer the prompt given in the context: do what it asks."
    assert started.documents == 3


def test_a_store_made_by_rlm_index_is_asked_by_path(backend, tmp_path):
    rlm_bin = os.environ.get("RLM_BIN")
    if not rlm_bin:
        pytest.skip("RLM_BIN is not set (scripts/python-client-test sets it)")
    docs = tmp_path / "docs"
    docs.mkdir()
    for i, text in enumerate(CONTEXT):
        (docs / f"{'abc'[i]}.txt").write_text(text)
    store = tmp_path / "store"
    subprocess.run([rlm_bin, "index", str(docs), "--store", str(store)], check=True, capture_output=True)
    rlm = RLM(**backend, store=store)
    result = rlm.completion("What is the secret code?")
    assert "4721" in result.response
    assert [s.path for s in result.sources] == ["docs/b.txt"]
    # The question may be given as root_prompt too.
    assert "4721" in rlm.completion(None, root_prompt="What is the secret code?").response


def test_stream_yields_the_steps_then_the_result(backend):
    rlm = RLM(**backend)
    with rlm.stream(CONTEXT, root_prompt="What is the secret code?") as run:
        events = list(run)
        result = run.result()
    types = [e.type for e in events]
    assert types[0] == "run_started" and types[-1] == "run_finished"
    for t in ("llm_request", "llm_response", "cell", "cell_output", "final", "verification"):
        assert t in types, types
    assert [e.seq for e in events] == list(range(len(events)))
    cell = [e for e in events if e.type == "cell_output"][0]
    assert "[DOCUMENT 0: context[0]]" in cell.stdout
    assert cell["agent"] == "0"
    assert run.done
    assert "4721" in result.response
    assert run.result() is result


def test_on_event_verbose_and_the_reference_callbacks(backend, capsys):
    calls = []
    rlm = RLM(
        **backend,
        verbose=True,
        on_event=lambda e: calls.append(("event", e.type)),
        on_iteration_start=lambda depth, i: calls.append(("iteration_start", depth, i)),
        on_iteration_complete=lambda depth, i, secs: calls.append(("iteration_complete", depth, i, secs >= 0)),
        on_subcall_start=lambda depth, model, preview: calls.append(("subcall_start", depth, model, preview)),
        on_subcall_complete=lambda depth, model, secs, err: calls.append(("subcall_complete", depth, model, err)),
    )
    result = rlm.completion(CONTEXT, root_prompt="SUBCALL: what is the secret code?")
    assert "4721" in result.response
    reference = [c for c in calls if c[0] != "event"]
    assert reference == [
        ("iteration_start", 0, 1),
        ("subcall_start", 1, "sub-model", "Say hello"),
        ("subcall_complete", 1, "sub-model", None),
        ("iteration_complete", 0, 1, True),
        ("iteration_start", 0, 2),
        ("iteration_complete", 0, 2, True),
    ]
    assert ("event", "run_finished") in calls
    err = capsys.readouterr().err
    assert "3 documents" in err and "final answer committed" in err and "finished: 3 calls" in err


def test_budgets_stop_the_run_with_a_partial_answer(backend):
    # One model call for the loop: its reply is a cell, then the budget is
    # spent and the answer is the synthesis of what was gathered.
    rlm = RLM(**backend, max_llm_calls=1)
    result = rlm.completion(CONTEXT, root_prompt="What is the secret code?")
    assert result.partial
    assert "call" in result.partial_reason, result.partial_reason
    assert rlm.settings["max_llm_calls"] == 1


def test_keyword_arguments_map_onto_the_engine_settings(backend):
    rlm = RLM(
        **backend,
        max_depth=1,
        max_iterations=7,
        max_budget=2.5,
        max_timeout=90,
        max_tokens=123456,
        max_errors=3,
        max_llm_calls=20,
        citations="strict",
        context_shape="list",
        flow="repl",
    )
    s = rlm.settings
    # The reference library's max_depth=1 (no recursion) is the engine's depth 0.
    assert s["max_depth"] == 0
    assert (s["max_iterations"], s["max_cost_usd"], s["max_wall_secs"]) == (7, 2.5, 90.0)
    assert (s["max_tokens"], s["max_errors"], s["max_llm_calls"]) == (123456, 3, 20)
    assert (s["citations"], s["context_shape"], s["flow"]) == ("strict", "list", "repl")
    assert rlm.root_model == "root-model" and rlm.sub_model == "sub-model"
    # The reference library's sub-call backend names the sub model.
    kwargs = dict(backend["backend_kwargs"])
    del kwargs["sub_model_name"]
    rlm = RLM(backend="openai", backend_kwargs=kwargs, other_backends=["openai"], other_backend_kwargs=[{"model_name": "small"}])
    assert rlm.sub_model == "small"


def test_a_trace_file_gets_every_step_as_jsonl(backend, tmp_path):
    path = tmp_path / "run.jsonl"
    rlm = RLM(**backend, trace=path)
    result = rlm.completion(CONTEXT, root_prompt="What is the secret code?")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0]["type"] == "run_started" and lines[-1]["type"] == "run_finished"
    assert lines[0]["run_id"] == result.run_id


def test_the_gil_is_released_while_the_engine_runs(slow_model_url):
    rlm = RLM(backend="openai", backend_kwargs={"base_url": slow_model_url, "api_key": "k", "model_name": "root-model"})
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.005)

    thread = threading.Thread(target=tick)
    thread.start()
    try:
        start = time.monotonic()
        # The model stalls its first reply for a second.
        result = rlm.completion(CONTEXT, root_prompt="STALL: what is the secret code?")
        end = time.monotonic()
    finally:
        stop.set()
        thread.join()
    assert "4721" in result.response
    during = [t for t in ticks if start < t < end]
    # The other thread kept running while completion() was inside the engine.
    assert len(during) > 10, (len(during), end - start)


def test_keyboard_interrupt_cancels_the_run_and_keeps_the_partial_answer(backend):
    armed = []

    def interrupt_when_the_model_is_asked(event):
        if event.type == "llm_request" and not armed:
            armed.append(threading.Timer(0.3, _thread.interrupt_main))
            armed[0].start()

    rlm = RLM(**backend, on_event=interrupt_when_the_model_is_asked)
    started = time.monotonic()
    with pytest.raises(RLMCancelled) as info:
        # The model stalls 60 s: only the cancel ends this early.
        rlm.completion(CONTEXT, root_prompt="STALL: what is the secret code?")
    assert time.monotonic() - started < 50
    assert isinstance(info.value, KeyboardInterrupt)
    partial = info.value.partial
    assert partial is not None and partial.partial
    assert "cancel" in partial.partial_reason
    # The engine is still usable.
    rlm = RLM(**backend)
    assert "4721" in rlm.completion(CONTEXT, root_prompt="What is the secret code?").response


def test_ctrl_c_in_a_python_program_cancels_its_question(model_url, tmp_path):
    script = tmp_path / "ask.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys
            from rlm_rs import RLM, RLMCancelled
            rlm = RLM(backend="openai", backend_kwargs={{"base_url": {model_url!r}, "api_key": "k"}},
                      on_event=lambda e: e.type == "llm_request" and print("asking", flush=True))
            try:
                rlm.completion(["The secret code is 4721."], root_prompt="STALL please")
            except RLMCancelled as e:
                print("cancelled:", e.partial.partial, e.partial.partial_reason, flush=True)
                sys.exit(130)
            """
        )
    )
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=sigint_as_in_a_terminal,
    )
    try:
        assert proc.stdout.readline().strip() == "asking"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=50)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "cancelled: True" in out, (out, err)
    assert "cancel" in out.split("cancelled: True", 1)[1]


def test_a_callback_that_raises_stops_the_run_and_its_error_goes_through(backend):
    class Boom(Exception):
        pass

    def explode(event):
        if event.type == "llm_request":
            raise Boom("from the callback")

    rlm = RLM(**backend, on_event=explode)
    with pytest.raises(Boom):
        rlm.completion(CONTEXT, root_prompt="STALL: what is the secret code?")


def test_two_threads_ask_at_once(backend):
    rlm = RLM(**backend)
    answers = {}

    def ask(i):
        answers[i] = rlm.completion(CONTEXT, root_prompt=f"Question {i}: what is the secret code?").response

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(answers) == [0, 1, 2]
    assert all("4721" in a for a in answers.values())


def test_the_sandbox_worker_is_this_package(backend):
    # The wheel ships no executable: the worker is Python running the extension.
    import rlm_rs._native as native

    assert Path(native.__file__).is_file()
    assert not native.has_local_model()


def test_environment_kwargs_pick_the_sandbox_back_end(backend):
    assert RLM(**backend).settings["sandbox"] == "monty"
    monty = RLM(**backend, environment_kwargs={"sandbox": "monty"})
    assert monty.settings["sandbox"] == "monty"
    assert "4721" in monty.completion(CONTEXT, root_prompt="What is the secret code?").response
    # The CPython back-end where bubblewrap runs (CI requires it).
    try:
        rlm = RLM(**backend, environment_kwargs={"sandbox": "cpython"})
    except Exception as e:
        if os.environ.get("RLM_REQUIRE_CPYTHON_SANDBOX"):
            raise
        pytest.skip(f"the CPython sandbox cannot start: {e}")
    assert rlm.settings["sandbox"] == "cpython"
    result = rlm.completion(CONTEXT, root_prompt="What is the secret code?")
    assert "4721" in result.response and not result.partial
