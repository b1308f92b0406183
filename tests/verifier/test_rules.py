"""The rule catalogue: every rule registered once, where it is checked, and documented in docs/hacks.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernelgym.registry import DuplicateNameError
from kernelgym.verifier.inspect import RULES
from kernelgym.verifier.rules import Findings, catalogue, rule
from kernelgym.verifier.rules.runtime import (
    aten_fallback,
    decoy_kernel,
    global_state_changed,
    inherits_model,
    input_mutation,
    output_violation,
)

HACKS_DOC = Path(__file__).resolve().parents[2] / "docs" / "hacks.md"


def _doc_table(heading: str) -> set[str]:
    """The rule ids in the first column of the table under ``heading`` in docs/hacks.md."""
    text = HACKS_DOC.read_text(encoding="utf-8")
    section = text[text.index(heading):]
    section = section[: section.index("\n#", 1)] if "\n#" in section[1:] else section
    return set(re.findall(r"^\| `([a-z0-9-]+)` \|", section, re.M))


def test_docs_static_table_matches_the_catalogue() -> None:
    static = {r.id for r in catalogue().values() if r.stage != "runtime"}
    assert _doc_table("### Static rules") == static


def test_docs_runtime_table_matches_the_catalogue() -> None:
    assert _doc_table("### Runtime rules") == set(catalogue("runtime"))


def test_every_rule_is_registered_in_the_module_of_its_stage() -> None:
    modules = {"python": {"python", "forward"}, "native": {"cpp"}, "runtime": {"runtime"}}
    for entry in catalogue().values():
        assert entry.module.rsplit(".", 1)[-1] in modules[entry.stage], entry
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", entry.id) and entry.summary


def test_static_rules_view_is_the_catalogue_without_runtime_rules() -> None:
    assert set(RULES) == {r.id for r in catalogue().values() if r.stage in ("python", "native")}
    assert not set(RULES) & set(catalogue("runtime"))


def test_a_second_rule_with_a_taken_id_is_refused() -> None:
    with pytest.raises(DuplicateNameError, match="torch-compute-in-forward"):
        rule("torch-compute-in-forward", "something else", stage="python")(lambda: None)


def test_an_unknown_stage_is_refused() -> None:
    with pytest.raises(ValueError, match="stage"):
        rule("test-rule-bad-stage", "summary", stage="compile")  # type: ignore[arg-type]


def test_findings_refuse_an_unregistered_rule() -> None:
    findings = Findings()
    with pytest.raises(KeyError, match="not registered"):
        findings.add("no-such-rule", 1, "message")


def test_findings_keep_one_violation_per_rule_line_and_place() -> None:
    findings = Findings()
    findings.add("threading", 3, "first")
    findings.add("threading", 3, "second")
    findings.add("native-file", 1, "native", where="cpp")
    assert [(v.rule, v.line, v.message) for v in findings.result()] == [("native-file", 1, "native"), ("threading", 3, "first")]


def test_runtime_violations_carry_registered_ids() -> None:
    violations = [
        aten_fallback("aten.add"), decoy_kernel(), input_mutation(), global_state_changed(["threads 1 -> 4"]),
        output_violation("stale-output", "output 0 replays an earlier call"),
    ]
    assert all(v.where == "runtime" and v.line == 0 for v in violations)
    assert {v.rule for v in violations} <= set(catalogue("runtime"))
    assert inherits_model().rule in catalogue("python")
    assert "aten.add" in violations[0].message and violations[3].message == "threads 1 -> 4"


def test_output_violation_refuses_a_non_output_rule() -> None:
    with pytest.raises(ValueError, match="not an output rule"):
        output_violation("aten-fallback", "x")
