"""The reference library's ``prompt`` (the context: a str, a list or a dict)
as named documents for the engine's in-memory corpus."""

from __future__ import annotations

import json
from typing import Any, List, Tuple

from ._errors import RLMArgumentError


def _text(value: Any, where: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        raise RLMArgumentError(f"{where} is bytes: decode it to str first (e.g. data.decode('utf-8'))")
    # A chat message ({"role", "content"}) reads as its content, as in the
    # reference library's context metadata.
    if isinstance(value, dict) and set(value) <= {"role", "content", "name"} and isinstance(value.get("content"), str):
        return value["content"]
    try:
        return json.dumps(value, ensure_ascii=False, indent=1)
    except (TypeError, ValueError) as e:
        raise RLMArgumentError(
            f"{where} is a {type(value).__name__} that is neither text nor JSON ({e}): pass str, or lists and dicts of plain values"
        ) from None


def documents(prompt: Any) -> List[Tuple[str, str]]:
    """``(name, text)`` pairs: a str is one document ``context``; a list's
    items are ``context[0]``, ``context[1]``, ...; a dict's values are
    documents named by their keys. Items that are not str are written as
    JSON (a chat message as its content)."""
    if isinstance(prompt, str):
        docs = [("context", prompt)]
    elif isinstance(prompt, (list, tuple)):
        docs = [(f"context[{i}]", _text(v, f"prompt[{i}]")) for i, v in enumerate(prompt)]
    elif isinstance(prompt, dict):
        docs = []
        for k, v in prompt.items():
            name = k if isinstance(k, str) else repr(k)
            docs.append((name, _text(v, f"prompt[{k!r}]")))
    elif prompt is None:
        raise RLMArgumentError(
            "prompt is None: pass the context (a str, a list or a dict), or create the RLM with store=DIR"
        )
    else:
        raise RLMArgumentError(
            f"prompt must be the context as a str, a list or a dict, got {type(prompt).__name__}"
        )
    if not docs:
        raise RLMArgumentError("prompt is empty: pass some context (a str, a list or a dict)")
    if all(not text.strip() for _, text in docs):
        raise RLMArgumentError("prompt holds no text: every document of the context is empty")
    return docs
