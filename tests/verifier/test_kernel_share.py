"""The profiling share: which kernels are the answer's own, the share, the flag, the reward term and its bounds.

The profile itself is taken on a device (``tests/gpu/test_gpu_kernel_share.py``); here, the names a profiler
reports for PyTorch's kernels, cuBLAS's, Inductor's and an answer's are classified as they come.
"""

from __future__ import annotations

import pytest

from kernelgym.tasks import load_suite
from kernelgym.verifier import Status, VerifierConfig
from kernelgym.verifier.config import check_bounds
from kernelgym.verifier.kernel_share import kernel_base_name, kernel_share, own_kernel_names
from kernelgym.verifier.reward import RewardSpec
from kernelgym.verifier.static import run_static_stages

CUDA_ANSWER = r'''
cuda_source = """
namespace fused {
template <typename scalar_t>
__global__ void __launch_bounds__(256) bias_gelu_kernel(const scalar_t* x, scalar_t* y, int n) {}
}
__global__ void row_softmax(const float* x, float* y, int rows, int cols) {}
static __global__ void helper_kernel() {}
"""
'''

TRITON_ANSWER = '''
@triton.autotune(configs=[], key=["n"])
@triton.jit
def fused_add_relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pass

@jit
def scale_rows(x_ptr):
    pass

def launch():  # not a kernel
    pass
'''


def test_own_kernel_names_reads_cuda_and_triton_definitions() -> None:
    assert own_kernel_names(CUDA_ANSWER) == {"bias_gelu_kernel", "row_softmax", "helper_kernel"}
    assert own_kernel_names(TRITON_ANSWER) == {"fused_add_relu", "scale_rows"}
    assert own_kernel_names("y = torch.relu(x)") == frozenset()


@pytest.mark.parametrize(("name", "base"), [
    ("void fused::bias_gelu_kernel<float>(float const*, float*, int)", "fused::bias_gelu_kernel"),
    ("void at::native::(anonymous namespace)::softmax_warp_forward<float, float, float, 10, false>(float*, float const*, int)",
     "at::native::anonymous::softmax_warp_forward"),
    ("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1", "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1"),
    ("fused_add_relu", "fused_add_relu"),
    ("Memcpy DtoD (Device -> Device)", "DtoD"),
])
def test_kernel_base_name(name: str, base: str) -> None:
    assert kernel_base_name(name) == base


def test_share_counts_only_the_answers_kernels_outside_torchs_namespaces() -> None:
    own = own_kernel_names(CUDA_ANSWER) | {"triton_poi_fused_add_0", "vectorized_elementwise_kernel"}
    profile = {
        "void fused::bias_gelu_kernel<float>(float const*, float*, int)": 20.0,  # the answer's, in its own namespace
        "void row_softmax(float const*, float*, int, int)": 10.0,
        "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32": 60.0,  # cuBLAS's GEMM: PyTorch's matmul
        # Names the answer defines too, but PyTorch's: in ATen's namespace, or Inductor's generated kernels.
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int, float)": 5.0,
        "triton_poi_fused_add_0": 5.0,
    }
    share = kernel_share(profile, own)
    assert share.own_us == 30.0 and share.total_us == 100.0 and share.share == pytest.approx(0.3)
    assert share.foreign[0][0].startswith("sm90_xmma_gemm")
    assert "30%" in share.sentence() and "sm90_xmma_gemm" in share.sentence()
    assert kernel_share({}, own).share is None


def test_reward_term_and_flag_threshold() -> None:
    plain = RewardSpec()
    assert plain.score(Status.OK, compiled=True, correct=True, speedup=1.0, timing_meaningful=True, own_kernel_share=0.1) == 0.6
    spec = RewardSpec(correct_weight=0.4, own_share_weight=0.1)
    assert spec.score(Status.OK, compiled=True, correct=True, speedup=1.0, timing_meaningful=True, own_kernel_share=1.0) == 0.6
    assert spec.score(Status.OK, compiled=True, correct=True, speedup=1.0, timing_meaningful=True, own_kernel_share=0.25) == 0.525
    assert spec.score(Status.OK, compiled=True, correct=True, speedup=1.0, timing_meaningful=True) == 0.5  # not measured
    assert spec.score(Status.INCORRECT, compiled=True, correct=False, speedup=None, timing_meaningful=False, own_kernel_share=1.0) == 0.1
    with pytest.raises(ValueError):
        RewardSpec(own_share_weight=0.5)  # the weights would sum beyond 1
    with pytest.raises(ValueError):
        VerifierConfig(lazy_share=1.5)
    with pytest.raises(ValueError, match="profile_calls"):
        check_bounds(VerifierConfig(profile_calls=1000))


@pytest.mark.parametrize("rules", ["native", "kernelbench"])
def test_an_answer_naming_the_profiler_breaks_a_rule(rules: str) -> None:
    code = '''
import torch
import torch.profiler

class ModelNew(torch.nn.Module):
    def forward(self, x):
        torch.profiler.profile = None
        return torch.relu(x)
'''
    outcome = run_static_stages(load_suite("cpu")["level1/1_ReLU"], f"```python\n{code}\n```", "cpp", rules=rules)
    assert outcome.rejection is not None
    assert "harness-introspection" in {v.rule for v in outcome.rejection.violations}


def test_bench_metrics_average_the_share_of_passing_episodes() -> None:
    from kernelgym.bench.metrics import Attempt, metric_set

    episodes = {("a", 0): [Attempt("a", 1, 0, 1, "ok", 1.5, own_kernel_share=0.9)],
                ("b", 0): [Attempt("b", 1, 0, 1, "ok", 1.1, own_kernel_share=0.1)],
                ("c", 0): [Attempt("c", 1, 0, 1, "incorrect", own_kernel_share=None)]}
    metrics = metric_set(episodes, ["a", "b", "c"], k=1)
    assert metrics.own_kernel_share == pytest.approx(0.5) and metrics.lazy == pytest.approx(0.5)
    assert metric_set({("c", 0): episodes[("c", 0)]}, ["c"], k=1).own_kernel_share is None


@pytest.mark.slow
def test_on_a_host_the_share_comes_from_the_samples_when_the_reward_uses_it(cache_dir, cpu_suite) -> None:
    from kernelgym import Verifier
    from kernelgym.agents.identity_agent import identity_answer

    task = cpu_suite["level1/16_Conv1D"]
    reward = RewardSpec(correct_weight=0.4, own_share_weight=0.1)
    config = VerifierConfig(rules="kernelbench", runs=5, warmup=1, reward=reward)
    with Verifier(backend="cpp", num_workers=1, cache_dir=cache_dir, config=config) as verifier:
        own = verifier.evaluate(task, task.solution("cpp"))
        lazy = verifier.evaluate(task, identity_answer(task.source))  # PyTorch's conv1d: no kernel of its own
    assert own.status is Status.OK and lazy.status is Status.OK, (own.feedback, lazy.feedback)
    assert own.own_kernel_share is not None and own.own_kernel_share >= 0.5 and "lazy-optimization" not in own.flags
    assert lazy.own_kernel_share == 0.0 and "lazy-optimization" in lazy.flags
    for result in (own, lazy):  # the score carries the share's term
        assert result.score == pytest.approx(reward.score(Status.OK, compiled=True, correct=True, speedup=result.speedup_eager,
                                                          timing_meaningful=result.timing_meaningful,
                                                          own_kernel_share=result.own_kernel_share))
    # Without the reward term the kernelbench preset does not sample: nothing is measured, nothing costs.
    with Verifier(backend="cpp", num_workers=1, cache_dir=cache_dir,
                  config=VerifierConfig(rules="kernelbench", runs=5, warmup=1)) as verifier:
        plain = verifier.evaluate(task, identity_answer(task.source))
    assert plain.status is Status.OK and plain.own_kernel_share is None
