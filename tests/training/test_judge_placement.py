"""Judge placement: judges go where the user says, never silently onto the training GPUs; tested on a local Ray."""

from __future__ import annotations

import pytest

from kernelgym.training.judge_placement import (
    JUDGE_RESOURCE,
    PLACEMENT_ENV_VAR,
    JudgePlacement,
    JudgePlacementError,
    install_from_env,
)


def test_local_judges_are_refused_for_a_gpu_backend():
    with pytest.raises(JudgePlacementError, match="training GPUs"):
        JudgePlacement.from_spec("local", "cuda")
    assert JudgePlacement.from_spec("colocated", "cuda").mode == "colocated"  # the explicit opt-in
    assert JudgePlacement.from_spec("local", "cpp").executor_kwargs() == {"executor": "local", "cache_dir": None}


@pytest.mark.parametrize("spec", ["gpu", "local:x", "ray:r:two", "ray:r:0"])
def test_malformed_specs_say_what_is_wrong(spec):
    with pytest.raises(JudgePlacementError):
        JudgePlacement.from_spec(spec, "cpp")


def test_the_placement_travels_in_the_environment(monkeypatch):
    from kernelgym.training import reward as verl_reward

    placement = JudgePlacement.from_spec("ray:judges:3", "cuda", cache_dir="/shared/cache")
    assert JudgePlacement.from_env(placement.to_env()) == placement
    monkeypatch.setenv(PLACEMENT_ENV_VAR, placement.to_env())
    monkeypatch.setattr(verl_reward, "_VERIFIERS", {})
    assert install_from_env() == placement
    placed = verl_reward.shared_verifier("cuda")
    assert placed.placement == placement and placed._verifier is None  # nothing starts before the first answer
    monkeypatch.setenv(PLACEMENT_ENV_VAR, "{not json")
    with pytest.raises(JudgePlacementError, match=PLACEMENT_ENV_VAR):
        install_from_env()


@pytest.fixture
def local_ray():
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        pytest.skip("another test's Ray instance is running")
    yield ray
    ray.shutdown()


def test_ray_judges_need_a_node_that_offers_the_resource(local_ray):
    local_ray.init(num_cpus=2, include_dashboard=False)
    with pytest.raises(JudgePlacementError, match="ray start"):
        JudgePlacement.from_spec("ray", "cpp").executor_kwargs()


@pytest.mark.slow
def test_ray_judges_start_only_where_the_resource_is(local_ray):
    local_ray.init(num_cpus=2, resources={JUDGE_RESOURCE: 1}, include_dashboard=False)
    placement = JudgePlacement.from_spec("ray", "cpp")
    kwargs = placement.executor_kwargs()
    assert kwargs["resources"] == {JUDGE_RESOURCE: 1} and kwargs["num_workers"] == 1
    with pytest.raises(JudgePlacementError, match="only 1 units"):
        JudgePlacement.from_spec("ray::2", "cpp").executor_kwargs()

    verifier = placement.verifier()
    try:
        actors = verifier.executor.actors(timeout=120)
        assert [a.role for a in actors] == ["judge"]
        # the one judge holds the node's one unit of the resource, so none is left for anything else
        assert local_ray.available_resources().get(JUDGE_RESOURCE, 0) == 0
    finally:
        verifier.close()
