"""OpenRLHF's remote reward model, answered by a served judge (``kernelgym serve``: ``POST /get_reward``).

Holds:
    reward_bodies: the judge requests (``/v1/evaluate`` bodies) of one OpenRLHF reward call.
    reward_reply: the reply to that call, from the verdicts.

OpenRLHF (``--remote_rm_url http://host:port/get_reward``) posts ``{"query": [...], "prompts": [...],
"labels": [...]}``: each query is a prompt with its response, each label names the task (``"<task_id>"`` of a
suite the server serves, or ``"<suite>:<task_id>"``), and the prompt, where given, is cut off the query's start so
that only the response is judged. The reply is ``{"rewards": [...], "scores": [...], "extra_logs": {...}}``, the
verifier's score per query. A verdict the judge failed to reach (``judge_error``) is never paid as a reward: the
whole call is answered ``503`` with the reason, and OpenRLHF's client asks again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kernelgym.errors import KernelGymError
from kernelgym.verifier.result import EvalResult

__all__ = ["reward_bodies", "reward_reply"]


def reward_bodies(body: Any, suites: Sequence[str]) -> list[dict[str, Any]]:
    """The ``/v1/evaluate`` bodies of one OpenRLHF reward call.

    Raises:
        KernelGymError: the body is not OpenRLHF's (``query`` a list of strings, ``labels`` one task per query,
            ``prompts`` absent or one string per query).

    Example:
        >>> reward_bodies({"query": ["P: relu?A: code"], "prompts": ["P: relu?"], "labels": ["level1/1_ReLU"]}, ["cpu"])
        [{'suite': 'cpu', 'task_id': 'level1/1_ReLU', 'answer': 'A: code'}]
    """
    if not isinstance(body, Mapping):
        raise KernelGymError("an OpenRLHF reward call is a JSON object with query, prompts and labels")
    queries, prompts, labels = body.get("query"), body.get("prompts"), body.get("labels")
    if not isinstance(queries, list) or not queries or not all(isinstance(q, str) for q in queries):
        raise KernelGymError('"query" must be a non-empty list of strings (each a prompt and its response)')
    if not isinstance(labels, list) or len(labels) != len(queries) or not all(isinstance(label, str) for label in labels):
        raise KernelGymError('"labels" must name the task of each query ("<task_id>" or "<suite>:<task_id>"); '
                             "set OpenRLHF's --label_key to a dataset column holding them")
    if prompts is not None and (not isinstance(prompts, list) or len(prompts) != len(queries)
                                or not all(isinstance(p, str) for p in prompts)):
        raise KernelGymError('"prompts", where given, must hold one string per query')
    bodies = []
    for index, (query, label) in enumerate(zip(queries, labels, strict=True)):
        suite, _, task_id = label.rpartition(":") if ":" in label else (suites[0] if suites else "", "", label)
        prompt = prompts[index] if prompts is not None else ""
        answer = query[len(prompt):] if prompt and query.startswith(prompt) else query
        bodies.append({"suite": suite, "task_id": task_id, "answer": answer})
    return bodies


def reward_reply(results: Sequence[EvalResult]) -> tuple[dict[str, Any], int]:
    """The reply (and its HTTP status) to an OpenRLHF reward call judged into ``results``.

    Example:
        >>> ok = EvalResult("level1/1_ReLU", "cpp", "ok", score=0.8)
        >>> reward_reply([ok])[0]["rewards"], reward_reply([ok.with_changes(status="judge_error")])[1]
        ([0.8], 503)
    """
    failed = [r for r in results if r.judge_error]
    if failed:
        return {"error": f"the judge failed on {len(failed)} answer(s) and paid no reward; ask again "
                         f"({failed[0].judge_reason or 'no reason given'})"}, 503
    scores = [r.score for r in results]
    logs = {"status": [r.status.value for r in results], "speedup": [r.speedup_eager for r in results]}
    return {"rewards": scores, "scores": scores, "extra_logs": logs}, 200
