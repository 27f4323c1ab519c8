"""rlm_rs: Recursive Language Models over large contexts and document
stores, with checked citations — the ``rlm`` engine (Rust) behind the
reference RLM library's call shape::

    from rlm_rs import RLM

    rlm = RLM(backend="openai", backend_kwargs={"model_name": "gpt-4.1"})
    result = rlm.completion(long_text, root_prompt="What is the notice period?")
    print(result.response)
    for s in result.sources:
        print(s.path, s.line, s.quote)
"""

from ._errors import RLMArgumentError, RLMCancelled, RLMError, RLMRunError
from ._rlm import DEFAULT_QUESTION, RLM, RLMRun
from ._types import Event, ModelUsageSummary, RLMChatCompletion, Source, UsageSummary

__all__ = [
    "RLM",
    "RLMRun",
    "RLMChatCompletion",
    "UsageSummary",
    "ModelUsageSummary",
    "Source",
    "Event",
    "RLMError",
    "RLMArgumentError",
    "RLMRunError",
    "RLMCancelled",
    "DEFAULT_QUESTION",
]
