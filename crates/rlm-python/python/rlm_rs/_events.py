"""Turning the engine's trace events into what callers asked for: the
reference library's four callbacks, ``verbose`` lines on stderr, and
``on_event``."""

from __future__ import annotations

import sys
from typing import Any, Callable, Dict, List, Optional, Tuple

from ._types import Event


class ReferenceCallbacks:
    """``on_iteration_start(depth, iteration)``, ``on_iteration_complete(depth,
    iteration, seconds)``, ``on_subcall_start(depth, model, prompt_preview)``,
    ``on_subcall_complete(depth, model, seconds, error_or_none)`` from the
    events of one run. An iteration is one model turn of an agent and the
    cells of its reply: it completes when the agent's next turn starts, when
    it commits an answer, or when the run ends."""

    def __init__(
        self,
        on_iteration_start: Optional[Callable[..., Any]],
        on_iteration_complete: Optional[Callable[..., Any]],
        on_subcall_start: Optional[Callable[..., Any]],
        on_subcall_complete: Optional[Callable[..., Any]],
    ):
        self.iteration_start = on_iteration_start
        self.iteration_complete = on_iteration_complete
        self.subcall_start = on_subcall_start
        self.subcall_complete = on_subcall_complete
        self.sub_model = "unknown"
        # agent id → (depth, iteration, t_ms at its start)
        self.open: Dict[str, Tuple[int, int, int]] = {}

    def any(self) -> bool:
        return any((self.iteration_start, self.iteration_complete, self.subcall_start, self.subcall_complete))

    def _close(self, agent: str, t_ms: int) -> None:
        started = self.open.pop(agent, None)
        if started and self.iteration_complete:
            depth, iteration, t0 = started
            self.iteration_complete(depth, iteration, (t_ms - t0) / 1000.0)

    def __call__(self, ev: Event) -> None:
        kind, t_ms = ev.get("type"), ev.get("t_ms", 0)
        if kind == "run_started":
            self.sub_model = ev.get("sub_model", "unknown")
        elif kind == "llm_request" and ev.get("iteration", 0) > 0:
            agent = ev["agent"]
            self._close(agent, t_ms)
            self.open[agent] = (ev["depth"], ev["iteration"], t_ms)
            if self.iteration_start:
                self.iteration_start(ev["depth"], ev["iteration"])
        elif kind == "final" and not ev.get("deferred"):
            self._close(ev["agent"], t_ms)
        elif kind == "subcall_start" and self.subcall_start:
            self.subcall_start(ev["depth"], self.sub_model, ev.get("prompt_preview", ""))
        elif kind == "subcall_end" and self.subcall_complete:
            error = None if ev.get("ok") else (ev.get("result") or "the sub-call failed")
            self.subcall_complete(ev["depth"], self.sub_model, ev.get("elapsed_ms", 0) / 1000.0, error)
        elif kind == "run_finished":
            for agent in list(self.open):
                self._close(agent, t_ms)


def _first_line(text: Any, limit: int = 160) -> str:
    line = str(text or "").splitlines()[0] if str(text or "").strip() else ""
    return line[:limit]


def verbose_line(ev: Event) -> Optional[str]:
    """The line ``verbose=True`` prints for an event (None: nothing)."""
    kind = ev.get("type")
    t = f"[{ev.get('t_ms', 0) / 1000.0:6.1f}s]"
    agent = ev.get("agent", "")
    if kind == "run_started":
        return f"{t} {ev['documents']} documents, {ev['context_chars']} characters; model {ev['root_model']}"
    if kind == "llm_response":
        return f"{t} [{agent}] model replied: {ev['input_tokens']} in / {ev['output_tokens']} out, {ev['latency_ms']} ms"
    if kind == "cell_output":
        status = f"error: {_first_line(ev['error'])}" if ev.get("error") else "ok"
        return f"{t} [{agent}] cell ran in {ev['elapsed_ms']} ms: {status}"
    if kind == "subcall_start":
        return f"{t} [{agent}] {ev.get('kind', 'sub-call')}: {_first_line(ev.get('prompt_preview'), 80)}"
    if kind == "final" and agent == "0":
        what = "FINAL deferred (sub-call results not seen yet)" if ev.get("deferred") else "final answer committed"
        return f"{t} [0] {what} ({ev.get('via')})"
    if kind == "budget_exhausted":
        return f"{t} [{agent}] stopped: {ev.get('reason')}"
    if kind == "llm_error":
        return f"{t} [{agent}] model error: {_first_line(ev.get('message'))}"
    if kind in ("flow_step", "error"):
        return f"{t} [{agent}] {_first_line(ev.get('message'))}"
    if kind == "run_finished":
        u = ev.get("usage", {})
        partial = f", partial: {ev.get('reason')}" if ev.get("partial") else ""
        return f"{t} finished: {u.get('calls', 0)} calls, {u.get('input_tokens', 0)} input / {u.get('output_tokens', 0)} output tokens{partial}"
    return None


def dispatcher(
    on_event: Optional[Callable[[Event], Any]],
    verbose: bool,
    reference: ReferenceCallbacks,
) -> Optional[Callable[[Event], None]]:
    """One function that hands each event to every consumer asked for, or
    None when nobody listens (the run is then only waited for)."""
    sinks: List[Callable[[Event], Any]] = []
    if on_event is not None:
        sinks.append(on_event)
    if reference.any():
        sinks.append(reference)
    if verbose:

        def show(ev: Event) -> None:
            line = verbose_line(ev)
            if line:
                print(line, file=sys.stderr, flush=True)

        sinks.append(show)
    if not sinks:
        return None

    def dispatch(ev: Event) -> None:
        for sink in sinks:
            sink(ev)

    return dispatch
