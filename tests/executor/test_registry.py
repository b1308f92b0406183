"""The executor contract: PoolSettings, the registry, make_executor, the shared command-line options."""

from __future__ import annotations

import argparse

import pytest

from kernelgym.errors import KernelGymError
from kernelgym.executor import LocalExecutor, PoolSettings, make_executor
from kernelgym.executor.arguments import add_executor_arguments, executor_kwargs


def test_split_separates_the_common_settings_from_an_executors_own_options() -> None:
    settings, options = PoolSettings.split({"backend": "cuda", "num_workers": 3, "ray_address": "auto"})
    assert settings == PoolSettings(backend="cuda", num_workers=3)
    assert options == {"ray_address": "auto"}


def test_make_executor_builds_a_registered_executor_from_settings(tmp_path) -> None:
    executor = make_executor("local", PoolSettings(backend="cpp", num_workers=2, cache_dir=tmp_path))
    try:
        assert isinstance(executor, LocalExecutor)
        assert executor.num_workers == 2 and executor.cache_dir == tmp_path
    finally:
        executor.close()


def test_make_executor_names_the_choices_for_an_unknown_name() -> None:
    with pytest.raises(KernelGymError, match="unknown executor 'nope'; choose one of: local, ray"):
        make_executor("nope")


def test_executor_options_become_verifier_keywords() -> None:
    parser = argparse.ArgumentParser()
    add_executor_arguments(parser)
    local = executor_kwargs(parser.parse_args(["--ray-address", "auto"]))
    assert local == {"executor": "local", "num_workers": None, "cache_dir": None}
    ray = executor_kwargs(parser.parse_args(["--executor", "ray", "--ray-address", "auto", "--workers", "2"]))
    assert ray == {"executor": "ray", "num_workers": 2, "cache_dir": None, "ray_address": "auto"}
    with pytest.raises(SystemExit):
        parser.parse_args(["--executor", "nope"])
