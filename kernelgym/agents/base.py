"""The Agent protocol the benchmark drives, and the registry of agents.

Holds:
    Exchange: one earlier attempt of an episode and the feedback it got.
    AgentRequest: what an agent is asked for one attempt (task, prompt, history, sample, turn, seed).
    Agent: the protocol: a ``name`` and ``act(requests) -> answers``.
    BaseAgent: a convenient base class (``close``, ``skip_reason``, context manager).
    AgentError: an agent could not produce answers (endpoint down, bad option, ...).
    DEFAULT_SYSTEM_PROMPT: the system message chat agents send (``kernelgym.envs.prompt.SYSTEM_PROMPT``).
    chat_messages: an episode so far as OpenAI-style chat messages (``kernelgym.envs.prompt.conversation``).
    strip_reasoning: drop a leading ``<think>...</think>`` block from a model's answer.
    register_agent: class decorator adding an agent to the registry.
    make_agent: build a registered agent (or ``module:Class``) by name with keyword options.
    agent_names: the registered names.

An agent answers a *batch* of requests at once, so a model server or a local
model can work on all of them together; each request carries its own episode
history, so the same agent serves single-turn and multi-turn runs.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

from kernelgym.envs.prompt import SYSTEM_PROMPT, conversation
from kernelgym.errors import KernelGymError
from kernelgym.registry import Registry
from kernelgym.tasks.task import Task

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "Exchange",
    "AgentRequest",
    "Agent",
    "BaseAgent",
    "AgentError",
    "chat_messages",
    "strip_reasoning",
    "register_agent",
    "make_agent",
    "agent_names",
]

DEFAULT_SYSTEM_PROMPT = SYSTEM_PROMPT


class AgentError(KernelGymError):
    """An agent could not produce answers: an unreachable endpoint, a bad option, a wrong answer count."""


@dataclass(frozen=True)
class Exchange:
    """One earlier attempt of an episode.

    Attributes:
        response: the agent's answer text.
        feedback: the verifier's feedback on it (as the environment shows it).
    """

    response: str
    feedback: str


@dataclass(frozen=True)
class AgentRequest:
    """What an agent is asked for one attempt.

    Attributes:
        task: the task (its id, level, reference source and bundled solutions).
        backend: the backend the answer must target (``"cpp"``, ``"cuda"``, ...).
        prompt: the environment's task prompt (the first user message).
        history: the episode's earlier attempts with their feedback, oldest first.
        sample: index of the episode among the task's ``k`` samples (0-based).
        turn: the attempt asked for, 1-based (``len(history) + 1``).
        seed: a seed derived from the run seed, task, sample and turn; sampling agents use it
            so that a rerun asks the same questions with the same seeds.
    """

    task: Task
    backend: str
    prompt: str
    history: tuple[Exchange, ...] = ()
    sample: int = 0
    turn: int = 1
    seed: int = 0

    @property
    def task_id(self) -> str:
        """The task's id."""
        return self.task.id


def chat_messages(request: AgentRequest, system_prompt: str | None = DEFAULT_SYSTEM_PROMPT) -> list[dict[str, str]]:
    """The episode so far as chat messages: system, the task prompt, then answer/feedback pairs.

    The one conversation format of kernelgym (:func:`kernelgym.envs.prompt.conversation`):
    each earlier attempt becomes an ``assistant`` message and its feedback a
    ``user`` message asking for a fixed or faster version.

    Example:
        >>> task = Task(id="level1/1_ReLU", name="ReLU", level=1, problem_id=1, source="...")
        >>> request = AgentRequest(task, "cpp", "Write ModelNew.", (Exchange("v1", "incorrect"),), turn=2)
        >>> [m["role"] for m in chat_messages(request)]
        ['system', 'user', 'assistant', 'user']
    """
    return conversation(request.prompt, ((e.response, e.feedback) for e in request.history), system_prompt)


_REASONING = re.compile(r"^.*?</think>", re.DOTALL)


def strip_reasoning(text: str) -> str:
    """Drop everything up to a closing ``</think>`` (a reasoning model's thoughts may hold draft code blocks).

    Example:
        >>> strip_reasoning("<think>try ```x```</think>\\nanswer")
        '\\nanswer'
        >>> strip_reasoning("no thoughts")
        'no thoughts'
    """
    return _REASONING.sub("", text, count=1)


@runtime_checkable
class Agent(Protocol):
    """What the benchmark drives: a name and a batched ``act``.

    ``act`` gets the requests of one step (any mix of tasks, samples and turns)
    and returns one answer text per request, in order. An agent keeps no
    per-episode state of its own: everything it may use is in the request.
    """

    name: str

    def act(self, requests: Sequence[AgentRequest]) -> list[str]:
        """Answer each request (same order, same length)."""
        ...


class BaseAgent:
    """Optional base class: a ``name`` set by :func:`register_agent`, a no-op :meth:`close`, ``with`` support.

    Example:
        >>> class Echo(BaseAgent):
        ...     name = "echo"
        ...     def act(self, requests):
        ...         return [r.prompt for r in requests]
        >>> with Echo() as agent:
        ...     isinstance(agent, Agent)
        True
    """

    name: ClassVar[str] = ""

    def act(self, requests: Sequence[AgentRequest]) -> list[str]:
        """Answer each request (same order, same length)."""
        raise NotImplementedError

    def skip_reason(self, task: Task, backend: str) -> str | None:
        """Why this agent cannot answer ``task`` for ``backend`` at all (``None``: it can; the default).

        A benchmark lists such a task as skipped, with this reason, instead of asking for it.
        """
        return None

    def close(self) -> None:
        """Release what the agent holds (connections, a model); the default holds nothing."""

    def __enter__(self) -> BaseAgent:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


_REGISTRY: Registry[Callable[..., Agent]] = Registry("agent")


def register_agent(name: str) -> Callable[[type], type]:
    """Class decorator registering an agent class under ``name`` (and setting its ``name``).

    Raises:
        DuplicateNameError: another agent is registered as ``name``.

    Example:
        >>> @register_agent("doc-echo")
        ... class DocEcho(BaseAgent):
        ...     def act(self, requests):
        ...         return ["" for _ in requests]
        >>> make_agent("doc-echo").name
        'doc-echo'
    """

    def decorate(cls: type) -> type:
        cls.name = name
        return _REGISTRY.add(name, cls)

    return decorate


def _load_builtin_agents() -> None:
    # Importing the modules runs their @register_agent decorators; heavy imports inside them are lazy.
    from kernelgym.agents import hf_agent, identity_agent, kernel_lm, openai_agent, random_agent, solutions  # noqa: F401


def agent_names() -> list[str]:
    """Registered agent names, sorted.

    Example:
        >>> {"solutions", "random", "openai", "hf", "kernel-lm"} <= set(agent_names())
        True
    """
    _load_builtin_agents()
    return _REGISTRY.names()


def _import_spec(spec: str) -> Callable[..., Agent]:
    """``"package.module:Class"`` or ``"path/to/file.py:Class"`` -> the class."""
    where, _, attr = spec.rpartition(":")
    try:
        if where.endswith(".py"):
            path = Path(where).expanduser().resolve()
            module_name = f"kernelgym_user_agent_{path.stem}"
            loader_spec = importlib.util.spec_from_file_location(module_name, path)
            if loader_spec is None or loader_spec.loader is None or not path.is_file():
                raise AgentError(f"no agent file {path}")
            module = importlib.util.module_from_spec(loader_spec)
            sys.modules[module_name] = module
            loader_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(where)
    except ImportError as exc:
        raise AgentError(f"cannot import agent module {where!r}: {exc}") from None
    factory = getattr(module, attr, None)
    if factory is None or not callable(factory):
        raise AgentError(f"{where!r} has no agent class {attr!r}")
    return factory


def make_agent(name: str, **options: Any) -> Agent:
    """Build the agent registered as ``name``, or the class a ``"module:Class"`` / ``"file.py:Class"`` spec names.

    Args:
        name: a registered name (see :func:`agent_names`) or an import spec.
        **options: keyword arguments of the agent's constructor.

    Raises:
        AgentError: unknown name, an option the agent does not take, or an object that is not an Agent.

    Example:
        >>> make_agent("random", seed=3).name
        'random'
    """
    _load_builtin_agents()
    if name in _REGISTRY:
        factory = _REGISTRY[name]
    elif ":" in name:
        factory = _import_spec(name)
    else:
        raise AgentError(
            f"unknown agent {name!r}; choose one of: {', '.join(_REGISTRY.names())}, "
            "or give your own class as 'package.module:Class' or 'path/to/file.py:Class'"
        )
    params = inspect.signature(factory).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    unknown = sorted(set(options) - set(params)) if not takes_any else []
    if unknown:
        accepted = [p for p, v in params.items() if v.kind in (v.POSITIONAL_OR_KEYWORD, v.KEYWORD_ONLY)]
        raise AgentError(
            f"agent {name!r} takes no option {', '.join(map(repr, unknown))}; "
            f"its options are: {', '.join(accepted) or 'none'}"
        )
    agent = factory(**options)
    if not isinstance(agent, Agent):
        raise AgentError(f"{name!r} built a {type(agent).__name__}, which has no `name` and `act(requests)`")
    return agent
