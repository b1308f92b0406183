"""The ``openai`` agent: any OpenAI-compatible chat endpoint (vLLM, SGLang, a hosted API).

Holds:
    OpenAIAgent: sends each request as one ``POST {base_url}/chat/completions``, several at once.

Only the standard library is used (``urllib``), so no extra is needed. The
conversation is :func:`~kernelgym.agents.base.chat_messages`: a system message,
the environment's task prompt, then each earlier answer as an ``assistant``
message followed by its feedback as a ``user`` message.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kernelgym.agents.base import (
    DEFAULT_SYSTEM_PROMPT,
    AgentError,
    AgentRequest,
    BaseAgent,
    chat_messages,
    register_agent,
    strip_reasoning,
)

__all__ = ["OpenAIAgent"]

_RETRY_STATUSES = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


@register_agent("openai")
class OpenAIAgent(BaseAgent):
    """A chat model behind an OpenAI-compatible HTTP endpoint, e.g. ``vllm serve MooreThreads/MusaCoder-27B``.

    One chat completion per request (``n = 1``), sent by ``concurrency`` threads
    at once; the request's seed is sent as ``seed`` so sampling servers that honour
    it (vLLM does) repeat a run exactly. Transient failures (connection errors,
    timeouts, HTTP 408/429/5xx) are retried with exponential backoff; anything
    else raises :class:`~kernelgym.agents.base.AgentError` with the server's message.

    Args:
        base_url: the API root, up to and including ``/v1``.
        model: the model name; ``None`` asks ``GET {base_url}/models`` and takes the first.
        api_key: bearer token; ``None`` reads the environment variable ``api_key_env``
            (no header when that is unset too, as a local vLLM server needs none).
        api_key_env: the environment variable holding the key.
        temperature: sampling temperature.
        top_p: nucleus sampling mass.
        max_tokens: most tokens per answer.
        concurrency: requests in flight at once.
        timeout: seconds one HTTP request may take.
        retries: extra tries after a transient failure.
        backoff: seconds before the first retry (doubled each time).
        system_prompt: the system message (``""``: none).
        strip_thinking: drop a leading ``<think>...</think>`` block from answers.
        extra_body: more JSON fields for every request (e.g. ``{"top_k": 20}``).

    Example:
        >>> agent = OpenAIAgent(base_url="http://127.0.0.1:8000/v1", model="MusaCoder-27B", concurrency=16)
        >>> agent.endpoint
        'http://127.0.0.1:8000/v1/chat/completions'
    """

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000/v1",
        model: str | None = None,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        temperature: float = 0.6,
        top_p: float = 0.95,
        max_tokens: int = 8192,
        concurrency: int = 8,
        timeout: float = 600.0,
        retries: int = 3,
        backoff: float = 1.0,
        system_prompt: str = DEFAULT_SYSTEM_PROMPT,
        strip_thinking: bool = True,
        extra_body: Mapping[str, Any] | None = None,
    ) -> None:
        if concurrency < 1 or retries < 0 or timeout <= 0 or max_tokens < 1:
            raise AgentError("openai agent: concurrency >= 1, retries >= 0, timeout > 0 and max_tokens >= 1 are required")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key if api_key is not None else os.environ.get(api_key_env) or None
        self.temperature = temperature
        self.top_p = top_p
        self.max_tokens = max_tokens
        self.concurrency = concurrency
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.system_prompt = system_prompt
        self.strip_thinking = strip_thinking
        self.extra_body = dict(extra_body or {})

    @property
    def endpoint(self) -> str:
        """The chat-completions URL."""
        return f"{self.base_url}/chat/completions"

    def act(self, requests: Sequence[AgentRequest]) -> list[str]:
        """One chat completion per request, ``concurrency`` at a time, answers in request order.

        Raises:
            AgentError: the endpoint failed after all retries, or refused a request.
        """
        if not requests:
            return []
        model = self.model or self._first_served_model()
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(requests))) as pool:
            return list(pool.map(lambda request: self._complete(model, request), requests))

    def _complete(self, model: str, request: AgentRequest) -> str:
        body = {
            "model": model,
            "messages": chat_messages(request, self.system_prompt),
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
            "n": 1,
            "seed": request.seed,
            **self.extra_body,
        }
        reply = self._call("POST", self.endpoint, body)
        try:
            content = reply["choices"][0]["message"].get("content") or ""
        except (KeyError, IndexError, TypeError, AttributeError):
            raise AgentError(f"{self.endpoint} answered without choices[0].message: {str(reply)[:300]}") from None
        return strip_reasoning(content) if self.strip_thinking else content

    def _first_served_model(self) -> str:
        reply = self._call("GET", f"{self.base_url}/models", None)
        try:
            self.model = str(reply["data"][0]["id"])
        except (KeyError, IndexError, TypeError):
            raise AgentError(f"{self.base_url}/models lists no model; pass model=... (--model)") from None
        return self.model

    def _call(self, method: str, url: str, body: Mapping[str, Any] | None) -> Any:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = None if body is None else json.dumps(body).encode("utf-8")
        problem = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            request = urllib.request.Request(url, data=data, headers=headers, method=method)
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    return json.loads(response.read().decode("utf-8"))
            except urllib.error.HTTPError as exc:
                detail = exc.read().decode("utf-8", "replace")[:500]
                problem = f"HTTP {exc.code}: {detail}"
                if exc.code not in _RETRY_STATUSES:
                    raise AgentError(f"{method} {url} was refused ({problem})") from None
            except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
                problem = str(getattr(exc, "reason", exc))
            except json.JSONDecodeError as exc:
                raise AgentError(f"{method} {url} answered with invalid JSON: {exc}") from None
        raise AgentError(f"{method} {url} failed {self.retries + 1} times; last problem: {problem}")
