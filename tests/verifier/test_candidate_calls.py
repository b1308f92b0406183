"""Tests of the calls the harness makes into a candidate's objects (kernelgym.verifier.candidate_side).

Nothing of the candidate's may run outside the watched and timed region: its mode is set without calling
it, its outputs are read without calling them (a container or tensor that is not plain is refused unread),
and what a call returned is let go in the next call, never in a probe, unless letting go of it runs nothing.
"""

from __future__ import annotations

import sys
import weakref

import pytest
import torch

from kernelgym.backends import get_backend
from kernelgym.verifier.candidate_objects import NotPlainOutput, plain_leaves, set_mode
from kernelgym.verifier.candidate_side import CandidateSide


class _Trap:
    """Records that candidate code ran."""

    def __init__(self) -> None:
        self.ran: list[str] = []


def _side(tmp_path, model: torch.nn.Module) -> CandidateSide:
    side = CandidateSide(get_backend("cpp"), tmp_path, tmp_path)
    side.model = model
    side.inputs, side.outputs = [torch.ones(8)], [torch.zeros(8)]
    return side


def test_set_mode_calls_nothing_of_the_model():
    trap = _Trap()

    class Hooked(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout())

        def train(self, mode: bool = True):  # noqa: ANN201
            trap.ran.append("train")
            return self

        def modules(self):  # noqa: ANN201
            trap.ran.append("modules")
            return iter(())

        def children(self):  # noqa: ANN201
            trap.ran.append("children")
            return iter(())

        def __setattr__(self, name: str, value: object) -> None:
            if name == "training":
                trap.ran.append("__setattr__")
            super().__setattr__(name, value)

    model = Hooked()
    trap.ran.clear()
    set_mode(model, False)
    assert trap.ran == []
    assert [m.training for m in torch.nn.Module.modules(model)] == [False] * 4
    set_mode(model, True)
    assert [m.training for m in torch.nn.Module.modules(model)] == [True] * 4 and trap.ran == []


def test_set_mode_refuses_what_is_not_a_module():
    with pytest.raises(TypeError, match="not an nn.Module"):
        set_mode(object(), True)  # type: ignore[arg-type]


def test_plain_outputs_are_read_in_order():
    a, b, c = torch.zeros(1), torch.ones(2), torch.full((3,), 2.0)
    assert [x is y for x, y in zip(plain_leaves((a, [b, {"z": 1, "y": c}])), [a, b, c, 1], strict=True)] == [True] * 4
    values, indices = torch.max(torch.arange(6.0).reshape(2, 3), dim=1)  # torch's own named tuple
    assert [v.tolist() for v in plain_leaves(torch.max(torch.arange(6.0).reshape(2, 3), dim=1))] == [values.tolist(), indices.tolist()]


def test_outputs_that_are_not_plain_are_refused_without_running_their_code():
    trap = _Trap()

    class Meta(type):
        def __instancecheck__(cls, instance: object) -> bool:
            trap.ran.append("__instancecheck__")
            return True

        def __eq__(cls, other: object) -> bool:
            trap.ran.append("__eq__")
            return True

        __hash__ = type.__hash__

    class LazyList(list, metaclass=Meta):
        def __iter__(self):  # noqa: ANN204
            trap.ran.append("__iter__")
            return iter([torch.zeros(1)])

    class Subclass(torch.Tensor):
        pass

    with_attribute = torch.zeros(1)
    with_attribute.detach = lambda: trap.ran.append("detach")  # type: ignore[method-assign]
    cases = [
        (LazyList(), "output-not-plain-container"),
        ((torch.zeros(1), LazyList()), "output-not-plain-container"),
        ({1: torch.zeros(1)}, "output-not-plain-container"),
        (torch.zeros(1).as_subclass(Subclass), "output-not-plain-tensor"),
        ([with_attribute], "output-not-plain-tensor"),
        (object(), "output-not-plain-tensor"),
    ]
    for output, rule in cases:
        with pytest.raises(NotPlainOutput) as caught:
            plain_leaves(output)
        assert caught.value.rule == rule, output
    assert trap.ran == []


def test_a_call_never_calls_train_and_refuses_a_lazy_container(tmp_path):
    trap = _Trap()

    class LazyList(list):
        def __iter__(self):  # noqa: ANN204
            trap.ran.append("__iter__")
            return iter([torch.zeros(8)])

    class Lazy(torch.nn.Module):
        def train(self, mode: bool = True):  # noqa: ANN201
            trap.ran.append("train")
            return self

        def forward(self, x):  # noqa: ANN001, ANN201
            return LazyList()

    reply = _side(tmp_path, Lazy()).cmd_call(True, False)
    assert reply["ok"] is False and reply["error"] == "illegal" and reply["rule"] == "output-not-plain-container"
    assert trap.ran == []


def test_outputs_carrying_finalizers_are_let_go_in_the_next_call_not_in_a_probe(tmp_path):
    """A probe measures the harness alone: an output whose release runs code (here a weak reference's callback)
    is kept past it and let go in the next call, inside the region the judge measures and watches."""
    finalized: list[int] = []

    class Finalized(torch.nn.Module):
        def forward(self, x):  # noqa: ANN001, ANN201
            out = x * 2
            weakref.finalize(out, finalized.append, 1)
            return out

    side = _side(tmp_path, Finalized())
    assert side.cmd_call(False, False)["ok"]
    assert side.cmd_probe(False, False)["ok"]
    assert finalized == []
    assert side.cmd_call(False, False)["ok"]
    assert finalized == [1]


def test_plain_outputs_are_let_go_in_a_probe(tmp_path):
    """What a plain output's release runs is torch's own: a probe lets it go as a call would (same memory after it)."""

    class Double(torch.nn.Module):
        def forward(self, x):  # noqa: ANN001, ANN201
            return x * 2

    side = _side(tmp_path, Double())
    assert side.cmd_call(False, False)["ok"]
    output = side.kept[0]
    assert side.cmd_probe(False, False)["ok"]
    assert side.held == [] and sys.getrefcount(output) == 2  # this test's reference and the argument's: the side let it go


def test_reuse_is_a_host_request_that_needs_the_observer(tmp_path):
    """Without the native observer (whose allocator hands freed host memory out again) the request changes nothing."""

    class Double(torch.nn.Module):
        def forward(self, x):  # noqa: ANN001, ANN201
            return x * 2

    side = _side(tmp_path, Double())
    assert side.cmd_reuse() == {"ok": True, "reusing": False}
    assert side.cmd_call(False, False)["ok"]


@pytest.mark.parametrize("tf32", [True, False])
def test_load_sets_the_judges_convolution_precision_before_the_answer_runs_and_counts_it_as_found(tmp_path, tf32: bool):
    saved = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = not tf32  # the process's own, as the candidate factory left it
    try:
        side = CandidateSide(get_backend("cpp"), tmp_path, tmp_path)
        code = "import torch\nfrom torch import nn\nseen = torch.backends.cudnn.allow_tf32\n\nclass ModelNew(nn.Module):\n    pass\n"
        reply = side.cmd_load(code, tf32)
        assert reply["ok"] and side.module.seen is tf32  # what the answer found at import
        assert reply["state"] == []  # the judge's setting is not the answer's change
    finally:
        torch.backends.cudnn.allow_tf32 = saved
