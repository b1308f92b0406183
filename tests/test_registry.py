"""Registries refuse a second object under a taken name (backends, executors, agents, rules, templates)."""

from __future__ import annotations

import dataclasses

import pytest

from kernelgym.agents.base import BaseAgent, agent_names, register_agent
from kernelgym.backends import Backend, backend_names, register_backend
from kernelgym.envs.templates import get_template, register_template
from kernelgym.executor import executor_names, register_executor
from kernelgym.registry import DuplicateNameError, Registry


def test_registry_keeps_objects_and_refuses_a_different_one_under_a_taken_name() -> None:
    registry: Registry[object] = Registry("widget")

    def first() -> None: ...

    def second() -> None: ...

    assert registry.add("w", first) is first
    assert registry.add("w", first) is first  # the same object again is not a duplicate
    with pytest.raises(DuplicateNameError, match="a widget named 'w' is already registered"):
        registry.add("w", second)
    assert registry["w"] is first and "w" in registry and registry.names() == ["w"] and len(registry) == 1
    registry.remove("w")
    assert registry.get("w") is None and registry.values() == []


def test_the_same_definition_run_again_replaces_the_older_copy() -> None:
    registry: Registry[type] = Registry("class")
    namespace: dict[str, object] = {}
    for _ in range(2):  # as when a module is imported twice under one name
        exec("class Thing:\n    pass\n", namespace)
        registry.add("thing", namespace["Thing"])  # type: ignore[arg-type]
    assert registry["thing"] is namespace["Thing"]


def test_backend_names_are_unique() -> None:
    assert "cpp" in backend_names()  # the built-in backends are registered
    with pytest.raises(DuplicateNameError, match="backend named 'cpp'"):
        @register_backend("cpp")
        class OtherCpp(Backend):
            language = "C++"


def test_executor_names_are_unique() -> None:
    assert "local" in executor_names()
    with pytest.raises(DuplicateNameError, match="executor named 'local'"):
        register_executor("local")(lambda settings: None)


def test_agent_names_are_unique() -> None:
    assert "random" in agent_names()  # the bundled agents are registered
    with pytest.raises(DuplicateNameError, match="agent named 'random'"):
        @register_agent("random")
        class OtherRandom(BaseAgent):
            def act(self, requests):
                return ["" for _ in requests]


def test_template_keys_are_unique() -> None:
    template = get_template("level1/14_Small_Matmul", "cpp")
    assert register_template(template) is template
    with pytest.raises(DuplicateNameError, match="tuning template"):
        register_template(dataclasses.replace(template, source=template.source + "\n"))
