"""The prompt text and the sanitising of texts shown to the agent."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kernelgym.backends import backend_language
from kernelgym.envs.prompt import CODE_CHARSET, build_prompt, sanitize

from .fakes import toy_suite


@given(st.text(max_size=3000), st.integers(min_value=0, max_value=2000))
def test_sanitize_stays_in_charset_and_budget(text, max_chars):
    clean = sanitize(text, max_chars)
    assert set(clean) <= set(CODE_CHARSET)
    assert len(clean) <= max_chars


@given(st.text(alphabet=CODE_CHARSET, max_size=500))
def test_sanitize_keeps_text_that_already_fits(text):
    assert sanitize(text, 500) == text


def test_sanitize_keeps_head_and_tail_and_counts_what_it_dropped():
    text = "HEAD" + "".join(str(i % 10) for i in range(10_000)) + "TAIL"
    clean = sanitize(text, 300)
    assert len(clean) == 300
    assert clean.startswith("HEAD") and clean.endswith("TAIL")
    head, marker, tail = clean.partition("\n[... ")
    omitted = int(tail.split(" characters omitted")[0])
    kept = len(head) + len(tail.split("...]\n", 1)[1])
    assert omitted == len(text) - kept


def test_sanitize_replaces_foreign_characters():
    assert sanitize("a\u00e9b\x00c\r\nd\u2014e") == "a?b?c\nd-e"


def test_prompt_states_task_target_contract_and_rules():
    task = toy_suite()["level1/1_ReLU"]
    language = backend_language("cpp")
    prompt = build_prompt(task, language)
    assert task.source.strip() in prompt
    assert language in prompt
    for phrase in ("replace the PyTorch operators", "ModelNew", "same constructor arguments", "No fallbacks",
                   "```python"):
        assert phrase in prompt
    assert set(prompt) <= set(CODE_CHARSET)
