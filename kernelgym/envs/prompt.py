"""The text an agent reads: the system prompt, the task prompt, the conversation, and the charset every text obeys.

Holds:
    CODE_CHARSET: printable ASCII plus newline and tab, the charset of actions and text observations.
    SYSTEM_PROMPT: the one system message of every chat (benchmark agents, chat wrapper, training rows).
    sanitize: map a text into ``CODE_CHARSET`` and cut it to a length, keeping its head and tail.
    build_prompt: the task prompt (reference program, target, ``ModelNew`` contract, anti-fallback rules).
    repair_message: the user message that hands an attempt's feedback back to the model.
    conversation: the chat messages of an episode: system, task prompt, then attempt/feedback pairs.

Every conversation kernelgym builds goes through :func:`conversation`, so a model
trained through kernelgym (``kernelgym.training``) sees exactly the messages it
is benchmarked with (``kernelgym.bench``, ``kernelgym.agents``) and that the chat
wrapper (``kernelgym.wrappers.ChatObservation``) shows.
"""

from __future__ import annotations

from collections.abc import Iterable

from kernelgym.tasks.task import Task

__all__ = ["CODE_CHARSET", "SYSTEM_PROMPT", "build_prompt", "conversation", "repair_message", "sanitize"]

SYSTEM_PROMPT = (
    "You are an expert in writing high-performance native kernels (CUDA, MUSA, Triton, C++). "
    "You replace PyTorch operators with your own kernels that compile, give the same results "
    "and run faster, and you never fall back to PyTorch compute. Answer with one complete Python "
    "program that defines `class ModelNew(nn.Module)`, in a single fenced code block."
)

_REPAIR_INSTRUCTION = (
    "Fix every problem above (or, if the answer was correct, make it faster) and output the complete "
    "new code in one ```python code block."
)

CODE_CHARSET = "".join(chr(c) for c in range(0x20, 0x7F)) + "\n\t"

_ALLOWED = frozenset(CODE_CHARSET)
# Compilers and tracebacks print typographic quotes and dashes; an ASCII twin reads better than "?".
_ASCII_TWINS = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "-", "\r": ""})


def sanitize(text: str, max_chars: int | None = None) -> str:
    """Map ``text`` into :data:`CODE_CHARSET` and cut it to at most ``max_chars`` characters.

    Characters outside the charset become ``"?"`` (typographic quotes and
    dashes become their ASCII twins, carriage returns are dropped). A text that
    is too long keeps its head and its tail around a marker saying how much was
    left out, because a compiler log's first errors and a traceback's last lines
    are the parts worth reading.

    Example:
        >>> sanitize("caf\u00e9 \u2018ok\u2019")
        "caf? 'ok'"
        >>> len(sanitize("x" * 1000, max_chars=100))
        100
    """
    clean = "".join(c if c in _ALLOWED else "?" for c in text.translate(_ASCII_TWINS))
    if max_chars is None or len(clean) <= max_chars:
        return clean
    marker = _omission_marker(len(clean) - max_chars)
    if max_chars <= 2 * len(marker):
        return clean[:max_chars]
    # The marker takes room too, so the count it states includes the characters it displaces.
    marker = _omission_marker(len(clean) - max_chars + len(marker))
    room = max_chars - len(marker)
    head = (room * 3) // 5
    return clean[:head] + marker + clean[len(clean) - (room - head):]


def _omission_marker(omitted: int) -> str:
    return f"\n[... {omitted} characters omitted ...]\n"


def build_prompt(task: Task, language: str) -> str:
    """The prompt for one task: what to write, in which language, and the rules the verifier enforces.

    Args:
        task: the task whose reference program is to be replaced.
        language: how answers must be written (``kernelgym.verifier.backend_language(name)``).

    Returns:
        The prompt, in :data:`CODE_CHARSET`.

    Example:
        >>> from kernelgym.tasks.task import Task
        >>> task = Task(id="level1/1_ReLU", name="ReLU", level=1, problem_id=1, source="class Model: ...")
        >>> "ModelNew" in build_prompt(task, "C++")
        True
    """
    text = f"""You write custom kernels to replace the PyTorch operators in the given architecture to get speedups.

Target: {language.rstrip('. ')}.

You may replace any or all of the operators, fuse several into one kernel (for example matmul + relu), or change the
algorithm (for example an online softmax). Here is the reference architecture (task {task.id}):

```python
{task.source.rstrip()}
```

Optimize the architecture named Model with custom kernels. Name your optimized output architecture ModelNew.

Rules (an answer that breaks one scores 0):
- ModelNew(nn.Module) takes the same constructor arguments as Model and returns the same outputs (shapes, dtypes,
  values within tolerance) for the inputs of get_inputs(); do not modify the inputs in place.
- The computation runs in your own native kernels: no torch / torch.nn.functional / ATen compute in
  ModelNew.forward, and no torch:: or at:: compute ops in native code (allocating outputs is allowed).
- No fallbacks: no try/except around kernels, no calling or subclassing Model, no code path that skips the kernel.
- No streams or threads of your own (std::thread, threading), no timers, no file, network or process access,
  no monkey-patching.

Output the complete new code (imports, kernel sources, the code that builds them, and class ModelNew) in one
```python code block. Just output the code, no testing code and no other text.
"""
    return sanitize(text)


def repair_message(feedback: str) -> str:
    """The user message that hands the verifier's ``feedback`` on an attempt back to the model.

    Example:
        >>> repair_message("Status: incorrect").splitlines()[:3]
        ['Your answer was judged. Feedback:', '', 'Status: incorrect']
    """
    shown = feedback.strip() or "(no feedback)"
    return f"Your answer was judged. Feedback:\n\n{shown}\n\n{_REPAIR_INSTRUCTION}"


def conversation(
    prompt: str, turns: Iterable[tuple[str, str]] = (), system_prompt: str | None = SYSTEM_PROMPT
) -> list[dict[str, str]]:
    """The chat messages of an episode: the system message, the task prompt, then each attempt and its feedback.

    Each earlier attempt becomes an ``assistant`` message and its feedback a ``user``
    message (:func:`repair_message`), so the last message is always the user's.

    Args:
        prompt: the task prompt (``obs["prompt"]``).
        turns: ``(attempt, feedback)`` of the earlier turns, oldest first.
        system_prompt: the system message (``None`` or ``""``: none).

    Example:
        >>> [m["role"] for m in conversation("Write ModelNew.", [("attempt 1", "does not compile")])]
        ['system', 'user', 'assistant', 'user']
    """
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    messages.append({"role": "user", "content": prompt})
    for attempt, feedback in turns:
        messages.append({"role": "assistant", "content": attempt})
        messages.append({"role": "user", "content": repair_message(feedback)})
    return messages
