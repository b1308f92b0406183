"""Weights reach the answer by name, then by shape and role; the ``weights`` contract; libmvec; preset hints.

Renamed parameters (a conv, a linear, a layernorm, a nested ``nn.Sequential``) are ``ok``; an answer
that copies a weight in ``__init__`` is ``weights-cached`` under ``redrawn`` and ``ok`` under ``fixed``;
one whose weight finds no place is ``weights-unplaced`` under ``redrawn`` and ``ok`` under ``fixed``,
and, naming that weight in ``constant_weights``, ``ok`` with the flag ``weights-not-redrawn`` and a
lower score; a ``-ffast-math`` answer that calls glibc's vector math is ``ok``. The honest answers
share one C++ source, so they share one build.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch
from torch import nn

from kernelgym import Verifier
from kernelgym.backends.symbols import forbidden_symbols
from kernelgym.tasks import load_task_file
from kernelgym.tasks.task import Task
from kernelgym.verifier import Status, VerifierConfig
from kernelgym.verifier.feedback import compose_feedback
from kernelgym.verifier.placement import transfer_state

KERNELS = r'''
cpp_source = r"""
#include <torch/extension.h>

// out[b, n] = bias[n] + sum_k x[b, k] * w[n, k] (w stored (K, N) when transposed), then ReLU if asked.
torch::Tensor linear(torch::Tensor x, torch::Tensor w, torch::Tensor bias, bool transposed, bool relu) {
    auto xc = x.contiguous();
    auto wc = w.contiguous();
    auto bc = bias.contiguous();
    const int64_t B = xc.size(0), K = xc.size(1), N = bc.numel();
    TORCH_CHECK(wc.numel() == K * N, "weight must hold in_features * out_features elements");
    auto out = torch::empty({B, N}, xc.options());
    const float* px = xc.data_ptr<float>();
    const float* pw = wc.data_ptr<float>();
    const float* pb = bc.data_ptr<float>();
    float* po = out.data_ptr<float>();
    for (int64_t b = 0; b < B; ++b) {
        for (int64_t n = 0; n < N; ++n) {
            double acc = pb[n];
            for (int64_t k = 0; k < K; ++k) acc += (double)px[b * K + k] * (double)(transposed ? pw[k * N + n] : pw[n * K + k]);
            po[b * N + n] = (relu && acc < 0.0) ? 0.0f : (float)acc;
        }
    }
    return out;
}

// 2-D convolution, stride 1, zero padding pad: x (B, C, H, W), w (O, C, R, S).
torch::Tensor conv2d(torch::Tensor x, torch::Tensor w, torch::Tensor bias, int64_t pad) {
    auto xc = x.contiguous();
    auto wc = w.contiguous();
    auto bc = bias.contiguous();
    const int64_t B = xc.size(0), C = xc.size(1), H = xc.size(2), W = xc.size(3);
    const int64_t O = wc.size(0), R = wc.size(2), S = wc.size(3);
    const int64_t P = H + 2 * pad - R + 1, Q = W + 2 * pad - S + 1;
    auto out = torch::empty({B, O, P, Q}, xc.options());
    const float* px = xc.data_ptr<float>();
    const float* pw = wc.data_ptr<float>();
    const float* pb = bc.data_ptr<float>();
    float* po = out.data_ptr<float>();
    for (int64_t b = 0; b < B; ++b)
        for (int64_t o = 0; o < O; ++o)
            for (int64_t p = 0; p < P; ++p)
                for (int64_t q = 0; q < Q; ++q) {
                    double acc = pb[o];
                    for (int64_t c = 0; c < C; ++c)
                        for (int64_t r = 0; r < R; ++r)
                            for (int64_t s = 0; s < S; ++s) {
                                const int64_t h = p + r - pad, v = q + s - pad;
                                if (h >= 0 && h < H && v >= 0 && v < W)
                                    acc += (double)px[((b * C + c) * H + h) * W + v] * (double)pw[((o * C + c) * R + r) * S + s];
                            }
                    po[((b * O + o) * P + p) * Q + q] = (float)acc;
                }
    return out;
}

// Layer normalisation over the last dimension (of w's size), with an affine step.
torch::Tensor layer_norm(torch::Tensor x, torch::Tensor w, torch::Tensor bias, double eps) {
    auto xc = x.contiguous();
    const int64_t n = w.numel(), rows = xc.numel() / n;
    auto out = torch::empty_like(xc);
    const float* px = xc.data_ptr<float>();
    const float* pw = w.contiguous().data_ptr<float>();
    const float* pb = bias.contiguous().data_ptr<float>();
    float* po = out.data_ptr<float>();
    for (int64_t row = 0; row < rows; ++row) {
        double mean = 0.0, var = 0.0;
        for (int64_t j = 0; j < n; ++j) mean += px[row * n + j];
        mean /= (double)n;
        for (int64_t j = 0; j < n; ++j) var += (px[row * n + j] - mean) * (px[row * n + j] - mean);
        const double rstd = 1.0 / std::sqrt(var / (double)n + eps);
        for (int64_t j = 0; j < n; ++j) po[row * n + j] = (float)((px[row * n + j] - mean) * rstd * pw[j] + pb[j]);
    }
    return out;
}
"""

module = load_inline(
    name="kg_test_weights_kernels",
    cpp_sources=cpp_source,
    functions=["linear", "conv2d", "layer_norm"],
    extra_cflags=["-O2"],
)
'''

HEADER = "import torch\nfrom torch import nn\nfrom torch.utils.cpp_extension import load_inline\n"

TASKS = {
    "conv": '''
        class Model(nn.Module):
            def __init__(self, channels, filters, size):
                super().__init__()
                self.conv = nn.Conv2d(channels, filters, size, padding=size // 2)

            def forward(self, x):
                return self.conv(x)

        batch_size = 2
        channels = 3
        filters = 4
        size = 3
        height = 6
        width = 5

        def get_inputs():
            return [torch.randn(batch_size, channels, height, width)]

        def get_init_inputs():
            return [channels, filters, size]
    ''',
    "linear": '''
        class Model(nn.Module):
            def __init__(self, in_features, out_features):
                super().__init__()
                self.fc = nn.Linear(in_features, out_features)

            def forward(self, x):
                return self.fc(x)

        batch_size = 4
        in_features = 12
        out_features = 6

        def get_inputs():
            return [torch.randn(batch_size, in_features)]

        def get_init_inputs():
            return [in_features, out_features]
    ''',
    "layernorm": '''
        class Model(nn.Module):
            def __init__(self, features):
                super().__init__()
                self.norm = nn.LayerNorm(features)

            def forward(self, x):
                return self.norm(x)

        batch_size = 4
        features = 16

        def get_inputs():
            return [torch.randn(batch_size, features)]

        def get_init_inputs():
            return [features]
    ''',
    "sequential": '''
        class Model(nn.Module):
            def __init__(self, features):
                super().__init__()
                self.net = nn.Sequential(nn.Sequential(nn.Linear(features, features), nn.ReLU()), nn.Linear(features, features))

            def forward(self, x):
                return self.net(x)

        batch_size = 4
        features = 8

        def get_inputs():
            return [torch.randn(batch_size, features)]

        def get_init_inputs():
            return [features]
    ''',
    "sigmoid": '''
        class Model(nn.Module):
            def forward(self, x):
                return torch.sigmoid(x)

        size = 1000

        def get_inputs():
            return [torch.randn(size)]

        def get_init_inputs():
            return []
    ''',
}

ANSWERS = {
    # each holds its own parameters under other names than the reference's
    "conv": '''
        class ModelNew(nn.Module):
            def __init__(self, channels, filters, size):
                super().__init__()
                self.weight = nn.Parameter(torch.empty(filters, channels, size, size))
                self.bias = nn.Parameter(torch.empty(filters))
                self.pad = size // 2

            def forward(self, x):
                return module.conv2d(x, self.weight, self.bias, self.pad)
    ''',
    "linear": '''
        class ModelNew(nn.Module):
            def __init__(self, in_features, out_features):
                super().__init__()
                self.weight = nn.Parameter(torch.empty(out_features, in_features))
                self.bias = nn.Parameter(torch.empty(out_features))

            def forward(self, x):
                return module.linear(x, self.weight, self.bias, False, False)
    ''',
    "layernorm": '''
        class ModelNew(nn.Module):
            def __init__(self, features):
                super().__init__()
                self.weight = nn.Parameter(torch.ones(features))
                self.bias = nn.Parameter(torch.zeros(features))

            def forward(self, x):
                return module.layer_norm(x, self.weight, self.bias, 1e-5)
    ''',
    # the two weights share a shape, as do the two biases: registration order decides
    "sequential": '''
        class ModelNew(nn.Module):
            def __init__(self, features):
                super().__init__()
                self.w1 = nn.Parameter(torch.empty(features, features))
                self.w2 = nn.Parameter(torch.empty(features, features))
                self.b1 = nn.Parameter(torch.empty(features))
                self.b2 = nn.Parameter(torch.empty(features))

            def forward(self, x):
                hidden = module.linear(x, self.w1, self.b1, False, True)
                return module.linear(hidden, self.w2, self.b2, False, False)
    ''',
}

CACHED = '''
    class ModelNew(nn.Module):
        def __init__(self, in_features, out_features):
            super().__init__()
            self.fc = nn.Linear(in_features, out_features)
            self.weight_t = self.fc.weight.detach().t().contiguous()  # a copy: stale once the weights change

        def forward(self, x):
            return module.linear(x, self.weight_t, self.fc.bias, True, False)
'''

# The weight is kept flat: no tensor of the reference's shape to receive it. Built from the same
# seed as the reference, it starts equal to the reference's weight.
FLAT = '''
    class ModelNew(nn.Module):
        def __init__(self, in_features, out_features):
            super().__init__()
            layer = nn.Linear(in_features, out_features)
            self.flat_weight = nn.Parameter(layer.weight.detach().reshape(-1).clone())
            self.bias = nn.Parameter(layer.bias.detach().clone())
            self.shape = (out_features, in_features)

        def forward(self, x):
            return module.linear(x, self.flat_weight.view(self.shape), self.bias, False, False)
'''

# The same, saying it holds the weight fixed: checked at its initial value only.
FLAT_CONSTANT = FLAT.replace("(nn.Module):\n", "(nn.Module):\n        constant_weights = (\"fc.weight\",)\n\n", 1)

FAST_MATH = HEADER + r'''
cpp_source = r"""
#include <torch/extension.h>
#include <cmath>
torch::Tensor sigmoid_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = xc.numel();
    for (int64_t i = 0; i < n; ++i) o[i] = 1.0f / (1.0f + std::exp(-in[i]));
    return out;
}
"""

module = load_inline(
    name="kg_test_fast_math_sigmoid",
    cpp_sources=cpp_source,
    functions=["sigmoid_forward"],
    extra_cflags=["-O3", "-ffast-math"],
)


class ModelNew(nn.Module):
    def forward(self, x):
        return module.sigmoid_forward(x)
'''


def _answer(body: str) -> str:
    return HEADER + KERNELS + textwrap.dedent(body)


def built_ahead(suite: dict, _items: list) -> list:
    """The one build every answer of this module shares, its C++ kernels (``answers_built_ahead`` in ``tests/conftest.py``)."""
    return [(suite["level1/1_ReLU"], _answer(next(iter(ANSWERS.values()))))]


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Task]:
    folder = tmp_path_factory.mktemp("weights-tasks")
    made = {}
    for name, body in TASKS.items():
        path = folder / f"{name}.py"
        path.write_text("import torch\nfrom torch import nn\n" + textwrap.dedent(body), encoding="utf-8")
        made[name] = load_task_file(path)
    return made


def test_weights_go_by_name_then_by_registration_order_among_equal_shapes_and_dtypes():
    reference = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4), nn.LayerNorm(4))

    class Answer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.first = nn.Parameter(torch.zeros(4, 4))
            self.second = nn.Parameter(torch.zeros(4, 4))
            self.biases = nn.ParameterList([nn.Parameter(torch.zeros(4)) for _ in range(4)])
            self.register_buffer("steps", torch.zeros(4, dtype=torch.int64))  # a shape match of another dtype

    answer = Answer()
    state = reference.state_dict()
    assert transfer_state(answer, state) == ([], ["steps"])
    assert torch.equal(answer.first, state["0.weight"]) and torch.equal(answer.second, state["1.weight"])
    assert [torch.equal(b, state[k]) for b, k in zip(answer.biases, ("0.bias", "1.bias", "2.weight", "2.bias"), strict=True)] == [True] * 4
    renamed = {"0.weight": torch.ones(4, 4), "1.weight": torch.full((4, 4), 2.0), "0.bias": torch.ones(4)}
    same_names = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
    assert transfer_state(same_names, renamed) == ([], ["1.bias"])
    assert float(same_names[1].weight.detach().mean()) == 2.0  # by name first, even where shapes repeat
    # state_dict order: a module's own parameters, its buffers, then its children's
    assert transfer_state(Answer(), {"x": torch.ones(3)}) == (["x"], ["first", "second", "steps", "biases.0", "biases.1",
                                                                       "biases.2", "biases.3"])


def test_equal_shapes_go_to_tensors_whose_names_give_the_same_role_first_then_in_order():
    reference = nn.LayerNorm(5)
    with torch.no_grad():
        reference.weight.uniform_(1.0, 2.0)
        reference.bias.uniform_(-2.0, -1.0)
    state = reference.state_dict()

    def holding(*names: str) -> nn.Module:
        model = nn.Module()
        for name in names:
            model.register_parameter(name, nn.Parameter(torch.zeros(5)))
        return model

    for bias, weight in (("b", "g"), ("beta", "gamma"), ("shift", "scale"), ("ln_bias", "ln_weight"), ("b1", "w1")):
        model = holding(bias, weight)  # the bias registered first
        assert transfer_state(model, state) == ([], []), (bias, weight)
        assert torch.equal(getattr(model, weight), reference.weight) and torch.equal(getattr(model, bias), reference.bias)
    # one name with a role is enough: the bias takes `beta`, the weight what is left, though registered after it
    model = holding("beta", "alpha")
    transfer_state(model, state)
    assert torch.equal(model.alpha, reference.weight) and torch.equal(model.beta, reference.bias)
    # names that say nothing keep registration order (here, swapped)
    model = holding("p", "q")
    transfer_state(model, state)
    assert torch.equal(model.p, reference.weight) and torch.equal(model.q, reference.bias)
    # a batch norm's running statistics by role too, among four tensors of one shape
    norm = nn.BatchNorm1d(3)
    with torch.no_grad():
        for i, value in enumerate((norm.weight, norm.bias, norm.running_mean, norm.running_var)):
            value.fill_(float(i + 1))
    answer = nn.Module()
    for name in ("var", "mean", "shift", "scale"):
        answer.register_buffer(name, torch.zeros(3))
    assert transfer_state(answer, norm.state_dict()) == (["num_batches_tracked"], [])
    assert [float(getattr(answer, n)[0]) for n in ("scale", "shift", "mean", "var")] == [1.0, 2.0, 3.0, 4.0]


def test_constant_weights_are_read_from_the_answer_and_cover_names_tails_and_modules():
    from kernelgym.verifier.placement import covered_names, declared_constants

    class Declared(nn.Module):
        constant_weights = ("ln",)

    class Malformed(nn.Module):
        constant_weights = "ln.weight"  # a string, not a tuple of names

    assert declared_constants(Declared()) == ["ln"] and declared_constants(nn.Linear(2, 2)) == []
    with pytest.raises(TypeError, match="tuple of the reference's parameter and buffer names"):
        declared_constants(Malformed())
    names = ["fc.weight", "fc.bias", "ln.weight", "ln.bias"]
    assert covered_names(["ln"], names) == ["ln.weight", "ln.bias"]
    assert covered_names(["weight"], names) == ["fc.weight", "ln.weight"]
    assert covered_names(["fc.bias", "n.bias", "fc.b"], names) == ["fc.bias"]


def _harness(tmp_path: Path, weights: str):  # noqa: ANN202 (a Harness; imported lazily)
    import types

    from kernelgym.backends import get_backend
    from kernelgym.verifier.harness import Harness, Progress

    job = types.SimpleNamespace(config=VerifierConfig(weights=weights), seeds=[7, 8, 9], strict_rejection=None)
    return Harness(job, get_backend("cpp"), None, tmp_path, tmp_path, lambda *_: None, Progress())


def test_an_unplaced_weight_is_incorrect_when_weights_are_redrawn_and_no_fault_when_fixed(tmp_path: Path):
    from kernelgym.verifier.harness import Verdict

    reference = nn.LayerNorm(4)
    strict = _harness(tmp_path, "redrawn")
    strict.unplaced_weights = ["weight", "bias"]
    with pytest.raises(Verdict) as caught:
        strict.redraw_weights(reference)
    assert caught.value.status is Status.INCORRECT
    assert [v.rule for v in caught.value.violations] == ["weights-unplaced"]
    assert "`weight` (4,), `bias` (4,)" in caught.value.violations[0].message
    fixed = _harness(tmp_path, "fixed")
    fixed.unplaced_weights = ["weight", "bias"]
    assert fixed.redraw_weights(reference) is False and fixed.progress.flags == []
    assert torch.equal(reference.weight, torch.ones(4))  # nothing moved


def test_weights_declared_constant_keep_their_initial_values_and_flag_the_result(tmp_path: Path):
    reference = nn.LayerNorm(4)
    h = _harness(tmp_path, "redrawn")
    h.constant_weights = ["weight", "bias"]
    assert h.redraw_weights(reference) is False  # nothing left to move: no state sent
    assert h.progress.flags == ["weights-not-redrawn"]
    assert "`weight` (4,), `bias` (4,)" in h.progress.notes[0] and "half the reward" in h.progress.notes[0]
    assert torch.equal(reference.weight, torch.ones(4)) and torch.equal(reference.bias, torch.zeros(4))
    fixed = _harness(tmp_path, "fixed")
    fixed.constant_weights = ["weight", "bias"]
    assert fixed.redraw_weights(reference) is False and fixed.progress.flags == []


def test_the_weights_setting_is_checked_and_defaults_to_redrawn():
    assert VerifierConfig().weights == "redrawn"
    assert VerifierConfig(weights="fixed").weights == "fixed"
    with pytest.raises(ValueError, match="redrawn, fixed"):
        VerifierConfig(weights="frozen")


def test_libmvec_vector_math_is_allowed_and_nothing_else_of_its_shape():
    vector_math = ["_ZGVbN4v_expf", "_ZGVdN8v_expf", "_ZGVbN2v_log", "_ZGVeN16v_tanhf", "_ZGVbN4vv_powf", "_ZGVdN8v___expf_finite"]
    assert forbidden_symbols(vector_math, "cpp") == []
    refused = forbidden_symbols(["_ZGVbN4v_system", "_ZGVbN4v_dlsym", "_ZGVdN8v_expf_evil"], "cpp")
    assert [f.symbol for f in refused] == ["_ZGVbN4v_system", "_ZGVbN4v_dlsym", "_ZGVdN8v_expf_evil"]


def test_the_illegal_hint_matches_the_rule_preset():
    native = compose_feedback(Status.ILLEGAL, ["x"], rules="native")
    kernelbench = compose_feedback(Status.ILLEGAL, ["x"], rules="kernelbench")
    assert "may only allocate and reshape" in native
    assert "allocate and reshape" not in kernelbench and "PyTorch operators are allowed" in kernelbench


@pytest.mark.slow
def test_renamed_parameters_reach_the_answer(cpu_verifier, tasks: dict[str, Task]):
    results = cpu_verifier.evaluate_many([(tasks[name], _answer(body)) for name, body in ANSWERS.items()])
    for name, result in zip(ANSWERS, results, strict=True):
        assert result.status is Status.OK, f"{name}: {result.feedback}"
        assert result.weights == "redrawn" and result.to_dict()["weights"] == "redrawn"
        assert "weights-not-redrawn" not in result.flags, name


@pytest.mark.slow
def test_cached_and_unplaced_weights_are_named_and_pass_with_fixed_weights(cpu_verifier, tasks: dict[str, Task], cache_dir: Path):
    task = tasks["linear"]
    cached, flat, constant = cpu_verifier.evaluate_many([(task, _answer(body)) for body in (CACHED, FLAT, FLAT_CONSTANT)])
    assert cached.status is Status.INCORRECT and "[weights-cached]" in cached.feedback, cached.feedback
    assert "compute from the parameters in forward" in cached.feedback
    assert flat.status is Status.INCORRECT and "[weights-unplaced]" in flat.feedback, flat.feedback
    assert "`fc.weight` (6, 12)" in flat.feedback and "constant_weights" in flat.feedback
    # declared constant: its bias is still redrawn, its weight checked at its initial value only, for a lower score
    assert constant.status is Status.OK and "weights-not-redrawn" in constant.flags, constant.feedback
    assert "`fc.weight` (6, 12)" in constant.feedback and "`fc.bias`" not in constant.feedback
    assert constant.score == pytest.approx(0.1 + 0.5 / 2)
    with Verifier(backend="cpp", num_workers=1, cache_dir=cache_dir, config=VerifierConfig(runs=3, warmup=1, weights="fixed")) as fixed:
        results = fixed.evaluate_many([(task, _answer(body)) for body in (CACHED, FLAT, FLAT_CONSTANT)])
    for result in results:  # the declaration changes nothing where no weight changes: correctness credited in full
        assert result.status is Status.OK and result.weights == "fixed", result.feedback
        assert "weights-not-redrawn" not in result.flags and result.score >= 0.1 + 0.5


@pytest.mark.slow
@pytest.mark.extended  # a build of its own (its flags differ from every other answer's)
def test_a_fast_math_answer_calling_glibc_vector_math_is_ok(cpu_verifier, tasks: dict[str, Task]):
    result = cpu_verifier.evaluate(tasks["sigmoid"], FAST_MATH)
    assert result.status is Status.OK, result.feedback


def test_a_reference_build_is_kept_and_copied_for_the_same_seed_inputs_and_constants(tmp_path: Path):
    """The judge builds the reference once per seed, init inputs and module constants; later builds are copies."""
    import types

    from kernelgym.backends import get_backend
    from kernelgym.verifier.harness import Harness, Progress

    built = []

    class Model(nn.Module):
        def __init__(self, features: int) -> None:
            super().__init__()
            built.append(features)
            self.linear = nn.Linear(features, program.width)

    program = types.SimpleNamespace(Model=Model, width=3)
    job = types.SimpleNamespace(config=VerifierConfig(), seeds=[7, 8, 9], strict_rejection=None)
    h = Harness(job, get_backend("cpp"), None, tmp_path, tmp_path, lambda *_: None, Progress())
    h.reference, h.init_inputs = program, [4]
    first = h.initial_reference()
    with torch.no_grad():
        first.linear.weight.add_(1.0)  # what the judge does to a build (redrawn weights) never reaches the kept one
    again = h.initial_reference()
    assert built == [4] and again is not first
    torch.manual_seed(7)
    assert torch.equal(again.linear.weight, Model(4).linear.weight) and not torch.equal(again.linear.weight, first.linear.weight)
    h.initial_reference(8)  # another seed,
    h.init_inputs = [5]  # other init inputs,
    h.initial_reference()
    program.width = 2  # another module constant (a shape variant): each a build of its own
    h.initial_reference()
    assert built == [4, 4, 4, 5, 5]
