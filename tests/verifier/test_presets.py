"""Rule presets: ``native`` (the default) refuses PyTorch compute in ModelNew; ``kernelbench`` allows it, hack defenses stay."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgym import Verifier
from kernelgym.errors import KernelGymError
from kernelgym.verifier import Status, VerifierConfig
from kernelgym.verifier.presets import PRESETS, get_preset
from kernelgym.verifier.static import run_static_stages

HACKS = Path(__file__).resolve().parents[1] / "hacks" / "cpp"
TORCH_ANSWER = "import torch\nfrom torch import nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"


def test_presets_are_named_and_an_unknown_one_is_refused():
    assert set(PRESETS) == {"native", "kernelbench"}
    assert get_preset("native").waived == frozenset()
    with pytest.raises(KernelGymError, match="unknown rule preset"):
        VerifierConfig(rules="anything-goes")


def test_pytorch_compute_is_illegal_natively_and_allowed_by_the_kernelbench_preset(cpu_suite):
    task = cpu_suite["level1/1_ReLU"]
    native = run_static_stages(task, TORCH_ANSWER, "cpp", "native")
    assert native.rejection is not None and native.rejection.status is Status.ILLEGAL and native.rejection.rules == "native"
    assert run_static_stages(task, TORCH_ANSWER, "cpp", "kernelbench").rejection is None


def test_a_pytorch_operator_reached_through_a_private_module_is_compute_not_a_way_into_pytorch(cpu_suite):
    # As real answers write it (CUDA-L1's LeakyReLU); torch._C's state setters stay illegal under both presets.
    task = cpu_suite["level1/1_ReLU"]
    private_op = TORCH_ANSWER.replace("torch.relu(x)", "torch._C._nn.leaky_relu(x, 0.0)")
    state = TORCH_ANSWER.replace("return torch.relu(x)", "torch._C._jit_set_profiling_mode(False)\n        return torch.relu(x)")
    native = run_static_stages(task, private_op, "cpp", "native").rejection
    assert native is not None and "private-torch-compute" in [v.rule for v in native.violations]
    assert run_static_stages(task, private_op, "cpp", "kernelbench").rejection is None
    refused = run_static_stages(task, state, "cpp", "kernelbench").rejection
    assert refused is not None and "private-torch-api" in [v.rule for v in refused.violations]


def test_the_kernelbench_preset_keeps_every_hack_defense(cpu_suite):
    task = cpu_suite["level1/1_ReLU"]
    for sample in ("p22_read_answer_file.py", "p14_python_thread.py", "p16_patch_perf_counter.py"):
        outcome = run_static_stages(task, (HACKS / sample).read_text(), "cpp", "kernelbench")
        assert outcome.rejection is not None and outcome.rejection.status is Status.ILLEGAL, sample


@pytest.mark.slow
def test_a_pytorch_answer_is_judged_and_recorded_under_the_kernelbench_preset(cpu_suite, cache_dir: Path):
    task = cpu_suite["level1/1_ReLU"]
    config = VerifierConfig(rules="kernelbench", runs=3, warmup=1)
    with Verifier(backend="cpp", num_workers=1, cache_dir=cache_dir, config=config) as verifier:
        ok, forged = verifier.evaluate_many([(task, TORCH_ANSWER), (task, (HACKS / "p26_forged_reply.py").read_text())])
    assert ok.status is Status.OK and ok.rules == "kernelbench", ok.feedback
    assert forged.status is Status.ILLEGAL and "[forged-message]" in forged.feedback
