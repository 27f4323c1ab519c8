"""``RLM``: the reference RLM library's call shape over the rlm engine."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Union

from . import _native
from ._context import documents
from ._errors import RLMArgumentError, RLMCancelled, RLMRunError
from ._events import ReferenceCallbacks, dispatcher
from ._types import Event, RLMChatCompletion

#: The question when ``root_prompt`` is not given: the context holds the task.
DEFAULT_QUESTION = "Answer the prompt given in the context: do what it asks."

#: Reference backends → (our provider, default base URL, key variable).
BACKENDS = {
    "openai": ("openai", None, None),
    "vllm": ("openai", None, None),
    "openrouter": ("openai", "https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
    "anthropic": ("anthropic", None, None),
    "azure_openai": ("azure", None, None),
    "local": ("local", None, None),
}

#: backend_kwargs keys, each with the engine setting it fills.
BACKEND_KWARGS = {
    "model_name": "model_name",
    "sub_model_name": "sub_model_name",
    "api_key": "api_key",
    "base_url": "base_url",
    "timeout": "timeout",
    "max_retries": "max_retries",
    "max_concurrent": "max_concurrent",
    "azure_endpoint": "base_url",
    "azure_deployment": "model_name",
    "api_version": "api_version",
}

#: Sandboxes of the reference library that rlm_rs does not run code in.
OTHER_ENVIRONMENTS = ("docker", "modal", "prime", "daytona", "e2b")

#: How often a wait wakes to let Python deliver KeyboardInterrupt.
_POLL_SECS = 0.1

# The sandbox worker: this Python, isolated (-I: no environment, no user
# site; -S: no site), loads the extension by path and becomes the worker.
_WORKER_CODE = (
    "import sys, importlib.util as u\n"
    "s = u.spec_from_file_location('rlm_rs._native', sys.argv[1])\n"
    "m = u.module_from_spec(s)\n"
    "s.loader.exec_module(m)\n"
    "m.sandbox_worker(sys.argv[2:])\n"
)


def _worker_command() -> List[str]:
    if not sys.executable:
        raise RLMRunError("cannot start the sandbox: sys.executable is empty (an embedded Python); run from a python executable")
    return [sys.executable, "-I", "-S", "-c", _WORKER_CODE, _native.__file__]


def _setting(name: str, value: Any, kind: str) -> Optional[str]:
    """A keyword argument as the engine reads it (text), its type checked."""
    if value is None:
        return None
    if kind == "text":
        if not isinstance(value, str):
            raise RLMArgumentError(f"{name} must be a str, got {type(value).__name__}")
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise RLMArgumentError(f"{name} must be True or False, got {value!r}")
        return "true" if value else "false"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RLMArgumentError(f"{name} must be a number, got {value!r}")
    if kind == "whole" and isinstance(value, float):
        if not value.is_integer():
            raise RLMArgumentError(f"{name} must be a whole number, got {value!r}")
        value = int(value)
    return str(value)


def _refuse(name: str, value: Any, why: str) -> None:
    if value is not None and value is not False and value != {} and value != []:
        raise RLMArgumentError(f"{name} is not supported by rlm_rs: {why}")


class RLM:
    """A Recursive Language Model over a context or a store, with the call
    shape of the reference RLM library::

        rlm = RLM(backend="openai", backend_kwargs={"model_name": "gpt-4.1"})
        result = rlm.completion(huge_text, root_prompt="What is the notice period?")
        print(result.response, result.sources)

    The context (``prompt``: a str, a list or a dict) is chunked and indexed
    in memory; the model reads it through code in rlm's sandbox (``context``,
    ``documents``, ``search``, ``llm_query``, ``rlm_query``, ``FINAL``) and
    every claim of the answer is checked against it. Settings not given here
    come from the ``RLM_*`` environment variables, then ``rlm.toml``
    (``config=``), as for ``rlm ask``. See the README for the mapping of each
    reference parameter.
    """

    def __init__(
        self,
        backend: str = "openai",
        backend_kwargs: Optional[Dict[str, Any]] = None,
        environment: str = "local",
        environment_kwargs: Optional[Dict[str, Any]] = None,
        depth: int = 0,
        max_depth: Optional[int] = None,
        max_iterations: Optional[int] = None,
        max_budget: Optional[float] = None,
        max_timeout: Optional[float] = None,
        max_tokens: Optional[int] = None,
        max_errors: Optional[int] = None,
        custom_system_prompt: Optional[str] = None,
        tool_prompts: Any = None,
        tool_code: Optional[str] = None,
        other_backends: Optional[List[str]] = None,
        other_backend_kwargs: Optional[List[Dict[str, Any]]] = None,
        logger: Any = None,
        verbose: bool = False,
        persistent: bool = False,
        custom_tools: Any = None,
        custom_sub_tools: Any = None,
        compaction: bool = False,
        compaction_threshold_pct: Optional[float] = None,
        on_subcall_start: Optional[Callable[..., Any]] = None,
        on_subcall_complete: Optional[Callable[..., Any]] = None,
        on_iteration_start: Optional[Callable[..., Any]] = None,
        on_iteration_complete: Optional[Callable[..., Any]] = None,
        *,
        store: Union[str, "os.PathLike[str]", None] = None,
        flow: Optional[str] = None,
        inspector: Optional[str] = None,
        citations: Optional[str] = None,
        verify: Optional[str] = None,
        coverage: Optional[bool] = None,
        context_shape: Optional[str] = None,
        turn_format: Optional[str] = None,
        subcall_cache: Optional[bool] = None,
        output_schema: Optional[Dict[str, Any]] = None,
        max_llm_calls: Optional[int] = None,
        chunk_chars: int = _native.DEFAULT_CHUNK_CHARS,
        trace: Union[str, "os.PathLike[str]", None] = None,
        config: Union[str, "os.PathLike[str]", None] = None,
        on_event: Optional[Callable[[Event], Any]] = None,
    ):
        # What the reference library has and rlm_rs does not: refused, so
        # nobody believes a setting applied that did not.
        _refuse("tool_prompts", tool_prompts, "the sandbox has rlm's own functions only")
        _refuse("tool_code", tool_code, "the sandbox runs only the model's code")
        _refuse("custom_tools", custom_tools, "the sandbox cannot call Python functions of this process")
        _refuse("custom_sub_tools", custom_sub_tools, "the sandbox cannot call Python functions of this process")
        _refuse("compaction", compaction, "the engine bounds each turn's output instead (RLM_TRUNCATE_LEN)")
        _refuse("compaction_threshold_pct", compaction_threshold_pct, "there is no compaction")
        _refuse("persistent", persistent, "each completion() is its own run; pass earlier results in the context")
        _refuse(
            "logger",
            logger,
            "pass trace='run.jsonl' (every step as JSONL; `rlm trace export --format rlm-logger` converts it) or on_event=callback",
        )
        if depth != 0:
            raise RLMArgumentError("depth is the reference library's internal recursion level: leave it at 0")
        if backend not in BACKENDS:
            raise RLMArgumentError(
                f"backend={backend!r} is not supported: use one of {', '.join(sorted(BACKENDS))}"
                " (any OpenAI-compatible server: backend='openai' with backend_kwargs={'base_url': ...})"
            )
        provider, default_url, key_var = BACKENDS[backend]
        if provider == "local" and not _native.has_local_model():
            raise RLMArgumentError(
                "backend='local': this build of rlm_rs has no embedded model; use a hosted or OpenAI-compatible backend"
            )
        llm = self._backend_settings(backend, backend_kwargs)
        if default_url and "base_url" not in llm:
            llm["base_url"] = default_url
        if key_var and "api_key" not in llm and os.environ.get(key_var):
            llm["api_key"] = os.environ[key_var]
        if backend == "vllm" and "base_url" not in llm:
            raise RLMArgumentError("backend='vllm' needs backend_kwargs={'base_url': 'http://HOST:PORT/v1'}")
        self._other_backends(backend, other_backends, other_backend_kwargs, llm)
        if environment in OTHER_ENVIRONMENTS:
            raise RLMArgumentError(
                f"environment={environment!r} is not supported: rlm_rs runs the model's code in its own sandbox "
                "(the Monty interpreter in a separate worker process, no files or network); use environment='local'"
            )
        if environment not in ("local", "sandbox"):
            raise RLMArgumentError(f"environment={environment!r} is unknown: use 'local' (rlm's sandbox)")
        sandbox = {}
        for k, v in (environment_kwargs or {}).items():
            if k not in ("cell_timeout", "memory_mib", "sandbox"):
                # Named before its value is checked: a string for an unknown
                # key is not "not a number", it is not a setting at all.
                raise RLMArgumentError(
                    f"environment_kwargs has no setting {str(k)!r}; it takes cell_timeout (seconds per cell), "
                    "memory_mib (sandbox memory, 0 = unlimited) and sandbox (monty or cpython)"
                )
            kind = "text" if k == "sandbox" else "whole"
            sandbox[str(k)] = _setting(f"environment_kwargs[{k!r}]", v, kind) or ""
        if max_depth is not None:
            if isinstance(max_depth, bool) or not isinstance(max_depth, int) or not 1 <= max_depth <= 11:
                raise RLMArgumentError(
                    f"max_depth={max_depth!r} is not a whole number from 1 to 11 "
                    "(the reference library's meaning: 1 = the root alone, its sub-calls plain model calls)"
                )
        settings = {
            "flow": _setting("flow", flow, "text"),
            "inspector": _setting("inspector", inspector, "text"),
            "citations": _setting("citations", citations, "text"),
            "verify": _setting("verify", verify, "text"),
            "coverage": _setting("coverage", coverage, "bool"),
            "context_shape": _setting("context_shape", context_shape, "text"),
            "turn_format": _setting("turn_format", turn_format, "text"),
            "subcall_cache": _setting("subcall_cache", subcall_cache, "bool"),
            "max_llm_calls": _setting("max_llm_calls", max_llm_calls, "whole"),
            "max_iterations": _setting("max_iterations", max_iterations, "whole"),
            # The engine counts depth from the root (0 = no recursion).
            "max_depth": None if max_depth is None else str(max_depth - 1),
            "max_budget": _setting("max_budget", max_budget, "number"),
            "max_timeout": _setting("max_timeout", max_timeout, "number"),
            "max_tokens": _setting("max_tokens", max_tokens, "whole"),
            "max_errors": _setting("max_errors", max_errors, "whole"),
        }
        settings = {k: v for k, v in settings.items() if v is not None}
        if custom_system_prompt is not None and not isinstance(custom_system_prompt, str):
            raise RLMArgumentError(f"custom_system_prompt must be a str, got {type(custom_system_prompt).__name__}")
        if output_schema is not None:
            if not isinstance(output_schema, dict):
                raise RLMArgumentError(
                    f"output_schema must be a JSON Schema dict, got {type(output_schema).__name__}"
                )
            try:
                _native.check_schema(json.dumps(output_schema))
            except (TypeError, ValueError) as e:
                raise RLMArgumentError(f"output_schema: {e}") from None
        if isinstance(chunk_chars, bool) or not isinstance(chunk_chars, int):
            raise RLMArgumentError(f"chunk_chars must be a whole number, got {chunk_chars!r}")
        for name, fn in (
            ("on_event", on_event),
            ("on_subcall_start", on_subcall_start),
            ("on_subcall_complete", on_subcall_complete),
            ("on_iteration_start", on_iteration_start),
            ("on_iteration_complete", on_iteration_complete),
        ):
            if fn is not None and not callable(fn):
                raise RLMArgumentError(f"{name} must be callable, got {type(fn).__name__}")
        self.backend = backend
        self.backend_kwargs = backend_kwargs
        self.environment = environment
        self.store = None if store is None else os.fspath(store)
        self.chunk_chars = chunk_chars
        self.trace = None if trace is None else os.fspath(trace)
        self.custom_system_prompt = custom_system_prompt
        self.output_schema = output_schema
        self.verbose = bool(verbose)
        self._on_event = on_event
        self._reference = (on_iteration_start, on_iteration_complete, on_subcall_start, on_subcall_complete)
        try:
            self._engine = _native.Engine(
                provider,
                llm,
                settings,
                sandbox,
                _worker_command(),
                None if config is None else os.fspath(config),
            )
        except _native.ArgumentError as e:
            raise RLMArgumentError(str(e)) from None
        except _native.RunError as e:
            raise RLMRunError(str(e)) from None
        self.settings = json.loads(self._engine.settings_json())

    @staticmethod
    def _backend_settings(backend: str, kwargs: Optional[Dict[str, Any]]) -> Dict[str, str]:
        if kwargs is None:
            return {}
        if not isinstance(kwargs, dict):
            raise RLMArgumentError(f"backend_kwargs must be a dict, got {type(kwargs).__name__}")
        llm: Dict[str, str] = {}
        for key, value in kwargs.items():
            if key not in BACKEND_KWARGS:
                raise RLMArgumentError(
                    f"backend_kwargs has no setting {key!r}; it takes: {', '.join(BACKEND_KWARGS)}"
                )
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                raise RLMArgumentError(f"backend_kwargs[{key!r}] must be a str or a number, got {type(value).__name__}")
            llm[BACKEND_KWARGS[key]] = str(value)
        return llm

    @staticmethod
    def _other_backends(backend: str, others: Any, other_kwargs: Any, llm: Dict[str, str]) -> None:
        """The reference library's sub-call model: here the same provider's
        other model (``sub_model_name``)."""
        if not others and not other_kwargs:
            return
        if not isinstance(others, list) or len(others) != 1 or others[0] != backend:
            raise RLMArgumentError(
                "other_backends must be [backend] (one provider serves both roles here); "
                "its model goes in other_backend_kwargs=[{'model_name': ...}]"
            )
        if not isinstance(other_kwargs, list) or len(other_kwargs) != 1 or not isinstance(other_kwargs[0], dict):
            raise RLMArgumentError("other_backend_kwargs must be [{'model_name': ...}], matching other_backends")
        extra = set(other_kwargs[0]) - {"model_name"}
        if extra:
            raise RLMArgumentError(
                f"other_backend_kwargs takes only model_name here (the provider and key are backend_kwargs'), got {sorted(extra)}"
            )
        if other_kwargs[0].get("model_name"):
            llm["sub_model_name"] = str(other_kwargs[0]["model_name"])

    @property
    def root_model(self) -> str:
        """The root model's name."""
        return self._engine.root_model

    @property
    def sub_model(self) -> str:
        """The sub-calls' model name."""
        return self._engine.sub_model

    def _start(self, prompt: Any, root_prompt: Optional[str]) -> "RLMRun":
        if root_prompt is not None and not isinstance(root_prompt, str):
            raise RLMArgumentError(f"root_prompt must be a str, got {type(root_prompt).__name__}")
        started = time.perf_counter()
        try:
            if self.store is not None:
                if prompt is not None and root_prompt is not None:
                    raise RLMArgumentError(
                        "with store=, the store is the context: pass the question as prompt or as root_prompt, not both"
                    )
                question = root_prompt if root_prompt is not None else prompt
                if not isinstance(question, str):
                    raise RLMArgumentError(
                        f"with store=, the question must be a str (prompt or root_prompt), got {type(question).__name__}"
                    )
                corpus = _native.Corpus.open(self.store)
            else:
                corpus = _native.Corpus.from_texts(documents(prompt), self.chunk_chars)
                question = root_prompt if root_prompt is not None else DEFAULT_QUESTION
            schema = None if self.output_schema is None else json.dumps(self.output_schema)
            native = self._engine.start(corpus, question, self.custom_system_prompt, self.trace, schema)
        except _native.ArgumentError as e:
            raise RLMArgumentError(str(e)) from None
        return RLMRun(native, prompt, started)

    def completion(self, prompt: Any, root_prompt: Optional[str] = None) -> RLMChatCompletion:
        """Answers ``root_prompt`` over the context ``prompt`` (a str, a list
        or a dict; with ``store=``, the question alone). Blocks until the
        answer (the GIL is released meanwhile); ``on_event``, ``verbose`` and
        the reference callbacks are called from this thread as steps happen.
        Ctrl-C cancels the run and raises :class:`RLMCancelled` (a
        KeyboardInterrupt) holding the partial answer."""
        run = self._start(prompt, root_prompt)
        dispatch = dispatcher(self._on_event, self.verbose, ReferenceCallbacks(*self._reference))
        return run._finish(dispatch)

    def stream(self, prompt: Any, root_prompt: Optional[str] = None) -> "RLMRun":
        """Starts the question and returns at once: iterate the returned run
        for its steps (:class:`Event`), then call ``result()``::

            with rlm.stream(text, root_prompt="...") as run:
                for event in run:
                    print(event.type)
                result = run.result()
        """
        return self._start(prompt, root_prompt)


class RLMRun:
    """A question in progress: iterate it for its events, ``result()`` for
    the answer, ``cancel()`` to stop it. Leaving a ``with`` block (or
    dropping the object) before it ended cancels it."""

    def __init__(self, native: Any, prompt: Any, started: float):
        self._native = native
        self._prompt = prompt
        self._started = started
        self._result: Optional[RLMChatCompletion] = None

    def __iter__(self) -> Iterator[Event]:
        try:
            while True:
                lines, ended = self._native.poll(_POLL_SECS)
                for line in lines:
                    yield Event(json.loads(line))
                if ended:
                    return
        except KeyboardInterrupt:
            raise self._interrupted() from None

    @property
    def done(self) -> bool:
        """True once the run has ended."""
        return self._native.done

    def cancel(self) -> None:
        """Stops the run; ``result()`` then gives the partial answer."""
        self._native.cancel()

    def result(self) -> RLMChatCompletion:
        """Waits for the run to end and returns its answer."""
        return self._finish(None)

    def _finish(self, dispatch: Optional[Callable[[Event], None]]) -> RLMChatCompletion:
        if self._result is not None:
            return self._result
        try:
            if dispatch is None:
                while not self._native.wait(_POLL_SECS):
                    pass
            else:
                ended = False
                while not ended:
                    lines, ended = self._native.poll(_POLL_SECS)
                    for line in lines:
                        dispatch(Event(json.loads(line)))
        except KeyboardInterrupt:
            raise self._interrupted() from None
        except BaseException:
            # A callback raised: stop the run, then let its error through.
            self._stop()
            raise
        return self._completed()

    def _stop(self) -> None:
        self._native.cancel()
        while not self._native.wait(1.0):
            pass

    def _interrupted(self) -> RLMCancelled:
        self._stop()
        try:
            partial: Optional[RLMChatCompletion] = self._completed()
        except RLMRunError:
            partial = None
        return RLMCancelled(partial)

    def _completed(self) -> RLMChatCompletion:
        try:
            raw = self._native.result()
        except _native.RunError as e:
            raise RLMRunError(str(e)) from None
        self._result = RLMChatCompletion._from_engine(json.loads(raw), self._prompt, time.perf_counter() - self._started)
        return self._result

    def __enter__(self) -> "RLMRun":
        return self

    def __exit__(self, *exc: Any) -> None:
        if not self._native.done:
            self._stop()
