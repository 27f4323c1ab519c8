"""What a question returns: the reference library's result fields
(``response``, ``usage_summary``, ``execution_time``, ``root_model``,
``prompt``) plus rlm's own (``partial``, ``sources``, ``claims``,
``grounded``, ``citations``, ``usage``), and the events of a run."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional


class Event(dict):
    """One step of a run, as the engine's trace records it: ``type``
    (``run_started``, ``llm_request``, ``llm_response``, ``llm_delta``,
    ``llm_retry``, ``llm_error``, ``cell``, ``cell_output``, ``subcall_start``, ``subcall_end``,
    ``finding``, ``final``, ``verification``, ``budget_exhausted``,
    ``error``, ``flow_step``, ``fallback``, ``run_finished``), ``seq``,
    ``t_ms`` (since the run started), ``ts``, and the fields of its type
    (``agent``, ``depth``, ``text``, ``code``, ``stdout``, ...). A dict whose
    keys are also attributes."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


@dataclass
class ModelUsageSummary:
    """One model's calls and tokens in a question (the reference library's
    fields, plus ``total_cost`` in USD when every call's price is known)."""

    total_calls: int = 0
    total_input_tokens: int = 0
    total_output_tokens: int = 0
    total_cost: Optional[float] = None

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


@dataclass
class UsageSummary:
    """Usage per model name, as the reference library reports it."""

    model_usage_summaries: Dict[str, ModelUsageSummary] = field(default_factory=dict)

    def to_dict(self) -> Dict[str, Any]:
        return {"model_usage_summaries": {m: u.to_dict() for m, u in self.model_usage_summaries.items()}}


@dataclass
class Source:
    """A passage of the answer: the quote was found verbatim (up to
    whitespace and case) in the cited chunk of the document at ``path``.
    In ``sources`` the passage also entails its claim (judged); in
    ``related_sources`` it does not, or was not judged: never support."""

    path: str
    line: Optional[int]
    chunk_id: Optional[str]
    quote: str
    attached_by_engine: bool
    #: Where the passage is, as a person cites it: ``page 12``, ``slide 4``,
    #: ``sheet "Q3", rows 10–14``, ``message of 2024-03-02 from …``.
    location: Optional[str] = None


@dataclass
class RLMChatCompletion:
    """The result of ``RLM.completion``.

    Reference fields: ``root_model``, ``prompt`` (what was passed),
    ``response`` (the answer text), ``usage_summary`` (per model),
    ``execution_time`` (seconds, the whole call), ``metadata`` (always None:
    use ``trace=`` or ``on_event=`` for the steps).

    rlm's own: ``partial`` and ``partial_reason`` (a budget, the wall clock
    or a cancel stopped the run; the answer is a synthesis of what was
    gathered), ``sources`` (the verified quotes of the passages that entail
    the answer's claims), ``related_sources`` (passages found for claims
    they were not judged to state: never support), ``claims`` (each
    sentence of the answer with its citations, ``support``: supported,
    related, contradicted, unverified or unsupported, and apart
    ``quote_check``: whether its quote is verbatim), ``grounded`` (the
    claims by outcome),
    ``citations`` (the citations written in the answer, each verified),
    ``usage`` (calls, tokens, cost, the engine's wall time, per depth),
    ``run_id``, ``findings``, and ``raw`` (the engine's whole answer as a
    dict, as ``rlm ask --json`` prints it). With ``output_schema=``:
    ``data`` (the answer as a value that follows the schema),
    ``data_citations`` (each value's citations by JSON path) and
    ``data_error`` (why ``data`` is None, when it is)."""

    root_model: str
    prompt: Any
    response: str
    usage_summary: UsageSummary
    execution_time: float
    partial: bool
    partial_reason: Optional[str]
    sources: List[Source]
    related_sources: List[Source]
    claims: List[Dict[str, Any]]
    grounded: Optional[Dict[str, Any]]
    citations: List[Dict[str, Any]]
    usage: Dict[str, Any]
    run_id: str
    findings: List[Dict[str, Any]]
    raw: Dict[str, Any] = field(repr=False)
    metadata: Any = None
    data: Any = None
    data_citations: List[Dict[str, Any]] = field(default_factory=list)
    data_error: Optional[str] = None

    def __str__(self) -> str:
        return self.response

    def to_dict(self) -> Dict[str, Any]:
        """The reference library's ``to_dict`` keys plus rlm's fields."""
        d = asdict(self)
        d["usage_summary"] = self.usage_summary.to_dict()
        return d

    @classmethod
    def _from_engine(cls, result: Dict[str, Any], prompt: Any, execution_time: float) -> "RLMChatCompletion":
        answer = result["answer"]
        usage = UsageSummary(
            {
                model: ModelUsageSummary(
                    total_calls=u["total_calls"],
                    total_input_tokens=u["total_input_tokens"],
                    total_output_tokens=u["total_output_tokens"],
                    total_cost=u.get("total_cost"),
                )
                for model, u in result.get("model_usage", {}).items()
            }
        )
        return cls(
            root_model=result.get("root_model", "unknown"),
            prompt=prompt,
            response=answer["answer"],
            usage_summary=usage,
            execution_time=execution_time,
            partial=bool(answer["partial"]),
            partial_reason=answer.get("partial_reason"),
            sources=[Source(**s) for s in result.get("sources", [])],
            related_sources=[Source(**s) for s in result.get("related_sources", [])],
            claims=answer.get("claims", []),
            grounded=answer.get("grounded"),
            citations=answer.get("citations", []),
            usage=answer["usage"],
            run_id=answer["trace"]["id"],
            findings=answer.get("findings", []),
            raw=answer,
            data=(answer.get("data") or {}).get("value"),
            data_citations=(answer.get("data") or {}).get("citations", []),
            data_error=(answer.get("data") or {}).get("error"),
        )
