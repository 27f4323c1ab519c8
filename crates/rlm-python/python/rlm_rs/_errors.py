"""The exceptions of rlm_rs: one base class, one for bad arguments, one for
questions that cannot be attempted, and the interrupt that carries the
partial answer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from ._types import RLMChatCompletion


class RLMError(Exception):
    """Base class of rlm_rs's errors."""


class RLMArgumentError(RLMError, ValueError):
    """A bad argument or setting: the message names it and what to pass."""


class RLMRunError(RLMError, RuntimeError):
    """A question that could not be attempted at all (the sandbox did not
    start, the model never answered). Budgets running out, model failures
    after some progress and cancellation are not errors: they give a partial
    answer (``result.partial``)."""


class RLMCancelled(KeyboardInterrupt):
    """Ctrl-C (KeyboardInterrupt) arrived while a question ran: the run was
    cancelled (its model calls abandoned, its sandbox cell stopped) and
    ``partial`` holds what it had gathered, marked partial. A subclass of
    KeyboardInterrupt, so ``except KeyboardInterrupt`` still catches it."""

    def __init__(self, partial: Optional["RLMChatCompletion"]):
        super().__init__("the question was cancelled (KeyboardInterrupt); .partial holds the partial answer")
        self.partial = partial
