"""Tests of kernelgym.tasks loaders and the bundled suites (fast: nothing is compiled)."""

from __future__ import annotations

import ast
import json
import pickle
from pathlib import Path

import pytest

from kernelgym.errors import TaskError
from kernelgym.tasks import (
    TaskSuite,
    bundled_suites,
    load_kernelbench_dir,
    load_kernelbench_parquet,
    load_suite,
    load_task_file,
)
from kernelgym.tasks.loaders import SUITES_DIR

CPU_IDS = [
    "level1/1_ReLU",
    "level1/2_Sigmoid",
    "level1/3_Tanh",
    "level1/4_GELU",
    "level1/5_Add",
    "level1/6_Scale_Shift",
    "level1/7_Sum_Reduction_Over_Dim",
    "level1/8_Mean_Reduction_Over_Dim",
    "level1/9_Max_Reduction_Over_Dim",
    "level1/10_Softmax",
    "level1/11_LogSoftmax",
    "level1/12_LayerNorm",
    "level1/13_RMSNorm",
    "level1/14_Small_Matmul",
    "level1/15_Matrix_Vector_Multiplication",
    "level1/16_Conv1D",
    "level1/17_MSELoss",
    "level1/18_CrossEntropyLoss",
    "level1/19_HuberLoss",
    "level1/20_Cumsum",
    "level2/1_Linear_ReLU",
    "level2/2_Scale_Tanh_Add",
    "level2/3_Matmul_Sigmoid_Sum",
]

TASK_TEXT = """import torch
from torch import nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2


size = 8


def get_inputs():
    return [torch.randn(size)]


def get_init_inputs():
    return []
"""


def write(path: Path, text: str = TASK_TEXT) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def module_level_names(source: str) -> set[str]:
    tree = ast.parse(source)
    return {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)}


def test_cpu_suite_has_the_listed_tasks_in_order(cpu_suite: TaskSuite):
    assert cpu_suite.name == "cpu"
    assert cpu_suite.ids() == CPU_IDS
    assert all(t.suite == "cpu" for t in cpu_suite)


def test_cpu_suite_tasks_have_an_honest_cpp_solution(cpu_suite):
    for task in cpu_suite:
        answer = task.solution("cpp")
        assert "class ModelNew(nn.Module)" in answer, task.id
        assert "load_inline(" in answer, task.id
        assert "def get_inputs" not in answer, task.id


def test_task_fields_come_from_the_file_name(cpu_suite):
    task = cpu_suite["level1/15_Matrix_Vector_Multiplication"]
    assert (task.level, task.problem_id, task.name) == (1, 15, "Matrix_Vector_Multiplication")
    assert "class Model(nn.Module)" in task.source


def test_every_cpu_task_has_an_odd_variant_over_module_level_names(cpu_suite):
    for task in cpu_suite:
        assert task.variants, task.id
        names = module_level_names(task.source)
        for variant in task.variants:
            assert set(variant) <= names, (task.id, variant)
        odd = [v for v in task.variants if any(isinstance(x, int) and x % 8 for x in v.values())]
        assert odd, f"{task.id} has no variant with a size that is not a multiple of 8"


def test_tolerance_overrides_say_why():
    manifest = json.loads((SUITES_DIR / "cpu" / "manifest.json").read_text())["tasks"]
    overridden = {tid: entry for tid, entry in manifest.items() if "atol" in entry or "rtol" in entry}
    assert overridden
    for tid, entry in overridden.items():
        assert entry.get("why"), tid


def test_manifest_tolerances_reach_the_task(cpu_suite):
    manifest = json.loads((SUITES_DIR / "cpu" / "manifest.json").read_text())["tasks"]
    for task in cpu_suite:
        entry = manifest.get(task.id, {})
        assert task.atol == entry.get("atol")
        assert task.rtol == entry.get("rtol")


def test_cpu_references_run_on_every_shape(cpu_suite):
    torch = pytest.importorskip("torch")
    for task in cpu_suite:
        for variant in ({}, *task.variants):
            namespace: dict = {}
            exec(compile(task.source, task.id, "exec"), namespace)
            namespace.update(variant)
            inputs = namespace["get_inputs"]()
            model = namespace["Model"](*namespace["get_init_inputs"]())
            assert all(x.device.type == "cpu" for x in inputs if isinstance(x, torch.Tensor))
            assert inputs[0].dtype == torch.float32
            with torch.no_grad():
                out = model(*inputs)
            assert out.dtype == torch.float32 and torch.isfinite(out).all(), (task.id, variant)


def test_lookup_by_id_short_id_and_name(cpu_suite):
    task = cpu_suite["level1/1_ReLU"]
    assert cpu_suite["1_ReLU"] is task
    assert cpu_suite["ReLU"] is task
    with pytest.raises(TaskError, match="no task 'NoSuchOp'"):
        cpu_suite["NoSuchOp"]


def test_filter_by_level_and_limit(cpu_suite):
    assert cpu_suite.filter(level=2).ids() == CPU_IDS[20:]
    assert cpu_suite.filter(level=1, limit=3).ids() == CPU_IDS[:3]


def test_missing_solution_backend_names_the_available_ones(cpu_suite):
    with pytest.raises(TaskError, match="has: cpp"):
        cpu_suite["level1/1_ReLU"].solution("musa")


def test_tasks_pickle_and_hash(cpu_suite):
    task = cpu_suite["level1/16_Conv1D"]
    clone = pickle.loads(pickle.dumps(task))
    assert clone == task
    assert clone.variants == task.variants
    assert clone.solution("cpp") == task.solution("cpp")
    assert len({task, clone}) == 1


def test_bundled_suites_lists_cpu():
    assert "cpu" in bundled_suites()


# ids avoid the bare word "gpu", which the conftest reads as the `gpu` marker
@pytest.mark.parametrize("name", bundled_suites(), ids=lambda name: f"suite-{name}")
def test_every_bundled_suite_loads(name):
    suite = load_suite(name)
    assert len(suite) > 0
    assert all(t.id == f"level{t.level}/{t.problem_id}_{t.name}" for t in suite)


def test_unknown_suite_lists_the_bundled_ones():
    with pytest.raises(TaskError, match=r"unknown task suite 'nope'.*cpu"):
        load_suite("nope")


def test_missing_path_raises(tmp_path):
    with pytest.raises(TaskError, match="no such"):
        load_suite(str(tmp_path / "absent"))
    with pytest.raises(TaskError, match="no such"):
        load_suite(f"kernelbench:{tmp_path / 'absent.parquet'}:1")


def test_kernelbench_directory(tmp_path):
    write(tmp_path / "KernelBench" / "level1" / "2_Bar.py")
    write(tmp_path / "KernelBench" / "level1" / "10_Baz.py")
    write(tmp_path / "KernelBench" / "level1" / "1_Foo.py")
    write(tmp_path / "KernelBench" / "level2" / "1_Fused_Op.py")
    write(tmp_path / "KernelBench" / "level1" / "__init__.py", "")
    for root in (tmp_path, tmp_path / "KernelBench"):
        suite = load_kernelbench_dir(root)
        assert suite.ids() == ["level1/1_Foo", "level1/2_Bar", "level1/10_Baz", "level2/1_Fused_Op"]
        assert suite["Fused_Op"].level == 2
        assert suite["1_Foo"].solutions == {}
    assert load_kernelbench_dir(tmp_path, level=2).ids() == ["level2/1_Fused_Op"]
    assert load_suite(f"kernelbench:{tmp_path}:1").ids() == ["level1/1_Foo", "level1/2_Bar", "level1/10_Baz"]
    assert len(load_suite(str(tmp_path))) == 4
    with pytest.raises(TaskError, match="no task files"):
        load_kernelbench_dir(tmp_path, level=3)


def test_directory_without_levels_is_rejected(tmp_path):
    with pytest.raises(TaskError, match="no level<N>/ folders"):
        load_kernelbench_dir(tmp_path)
    with pytest.raises(TaskError, match="neither a KernelBench directory"):
        load_suite(str(tmp_path))


def test_suite_dir_with_manifest_and_solutions(tmp_path):
    write(tmp_path / "level1" / "1_Double.py")
    write(tmp_path / "solutions" / "cpp" / "level1" / "1_Double.py", "class ModelNew: ...\n")
    write(tmp_path / "solutions" / "triton" / "level1" / "1_Double.py", "class ModelNew: pass\n")
    manifest = {"tasks": {"level1/1_Double": {"atol": 0.001, "why": "test", "variants": [{"size": 13}]}}}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    task = load_kernelbench_dir(tmp_path, name="mine")["level1/1_Double"]
    assert task.suite == "mine"
    assert (task.atol, task.rtol) == (0.001, None)
    assert task.variants == ({"size": 13},)
    assert sorted(task.solutions) == ["cpp", "triton"]
    assert task.solution("triton") == "class ModelNew: pass\n"


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        ({"tasks": {"level1/1_Double": {"atoll": 1e-3}}}, "unknown keys"),
        ({"tasks": {"level1/9_Missing": {}}}, "no reference file"),
        ({"tasks": {"level1/1_Double": {"variants": {"size": 3}}}}, "must be a list"),
        ({"tasks": {"level1/1_Double": {"rtol": "big"}}}, "non-negative number"),
        ({"tasks": []}, "must map task ids"),
    ],
)
def test_bad_manifest_is_rejected(tmp_path, manifest, message):
    write(tmp_path / "level1" / "1_Double.py")
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(TaskError, match=message):
        load_kernelbench_dir(tmp_path)


def test_flat_manifest_is_accepted(tmp_path):
    write(tmp_path / "level1" / "1_Double.py")
    (tmp_path / "manifest.json").write_text(json.dumps({"level1/1_Double": {"rtol": 0.01}}))
    assert load_kernelbench_dir(tmp_path)["Double"].rtol == 0.01


def test_solution_without_reference_is_rejected(tmp_path):
    write(tmp_path / "level1" / "1_Double.py")
    write(tmp_path / "solutions" / "cpp" / "level1" / "2_Orphan.py", "class ModelNew: pass\n")
    with pytest.raises(TaskError, match="2_Orphan"):
        load_kernelbench_dir(tmp_path)


def test_load_task_file(tmp_path):
    task = load_task_file(write(tmp_path / "level3" / "7_Tiny_Net.py"), suite="s")
    assert (task.id, task.name, task.level, task.problem_id, task.suite) == ("level3/7_Tiny_Net", "Tiny_Net", 3, 7, "s")
    assert task.source == TASK_TEXT


def test_load_task_file_does_not_run_the_file(tmp_path):
    sentinel = tmp_path / "ran"
    text = f"open({str(sentinel)!r}, 'w').close()\n" + TASK_TEXT
    load_task_file(write(tmp_path / "level1" / "1_Side_Effect.py", text))
    assert not sentinel.exists()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (TASK_TEXT.replace("class Model(", "class Other("), "does not define `class Model`"),
        (TASK_TEXT.replace("def get_inputs(", "def make_inputs("), "does not define `def get_inputs`"),
        (TASK_TEXT.replace("def get_init_inputs(", "def init("), "does not define `def get_init_inputs`"),
        ("class Model(:\n", "not valid Python"),
    ],
)
def test_bad_task_file_says_what_is_missing(tmp_path, text, message):
    with pytest.raises(TaskError, match=message):
        load_task_file(write(tmp_path / "level1" / "1_Bad.py", text))


def test_nested_definitions_do_not_count(tmp_path):
    text = "def outer():\n    class Model: ...\n    def get_inputs(): ...\n    def get_init_inputs(): ...\n"
    with pytest.raises(TaskError, match="at module level"):
        load_task_file(write(tmp_path / "level1" / "1_Nested.py", text))


@pytest.mark.parametrize(
    ("rel", "expected"),
    [
        ("my_task.py", ("my_task", "my_task", 0, 0)),
        ("misc/19_ReLU.py", ("19_ReLU", "ReLU", 0, 19)),
        ("level2/ReLU.py", ("level2/ReLU", "ReLU", 2, 0)),
        ("level1/1_ReLU.txt", ("level1/1_ReLU", "ReLU", 1, 1)),
    ],
)
def test_any_task_file_loads(tmp_path, rel, expected):
    task = load_task_file(write(tmp_path / rel))
    assert (task.id, task.name, task.level, task.problem_id) == expected


def test_missing_task_file_is_rejected(tmp_path):
    with pytest.raises(TaskError, match="cannot read task file"):
        load_task_file(tmp_path / "level1" / "1_Gone.py")


def write_parquet(path: Path, rows: list[dict]) -> Path:
    pa = pytest.importorskip("pyarrow", reason="pyarrow is needed to write a parquet fixture")
    pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow is needed to write a parquet fixture")
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = {key: [row[key] for row in rows] for key in rows[0]}
    pq.write_table(pa.table(columns), path)
    return path


PARQUET_ROWS = [
    {"code": TASK_TEXT, "level": 1, "name": "1_Square_matrix_multiplication_.py", "problem_id": 1},
    {"code": TASK_TEXT, "level": 1, "name": "Plain_Name", "problem_id": 3},
    {"code": TASK_TEXT, "level": 1, "name": "2_No_Suffix", "problem_id": 2},
    {"code": TASK_TEXT, "level": 2, "name": "1_Conv_ReLU.py", "problem_id": 1},
]


def test_kernelbench_parquet(tmp_path):
    path = write_parquet(tmp_path / "kb.parquet", PARQUET_ROWS)
    suite = load_kernelbench_parquet(path)
    assert suite.ids() == [
        "level1/1_Square_matrix_multiplication_",
        "level1/2_No_Suffix",
        "level1/3_Plain_Name",
        "level2/1_Conv_ReLU",
    ]
    assert suite["Plain_Name"].source == TASK_TEXT
    assert load_kernelbench_parquet(path, level=2).ids() == ["level2/1_Conv_ReLU"]
    assert load_suite(f"kernelbench:{path}:1").ids() == suite.ids()[:3]
    assert load_suite(str(path)).ids() == suite.ids()


def test_kernelbench_parquet_folder_like_the_hf_export(tmp_path):
    write_parquet(tmp_path / "data" / "level_1-00000-of-00001.parquet", PARQUET_ROWS[:3])
    write_parquet(tmp_path / "data" / "level_2-00000-of-00001.parquet", PARQUET_ROWS[3:])
    assert len(load_kernelbench_parquet(tmp_path)) == 4
    assert load_suite(f"kernelbench:{tmp_path}:2").ids() == ["level2/1_Conv_ReLU"]


def test_parquet_without_the_columns_is_rejected(tmp_path):
    path = write_parquet(tmp_path / "other.parquet", [{"code": TASK_TEXT, "title": "x"}])
    with pytest.raises(TaskError, match="lacks column"):
        load_kernelbench_parquet(path)


def test_parquet_row_that_is_not_a_task_is_rejected(tmp_path):
    rows = [{"code": "x = 1\n", "level": 1, "name": "5_Broken.py", "problem_id": 5}]
    path = write_parquet(tmp_path / "bad.parquet", rows)
    with pytest.raises(TaskError, match=r"problem 5.*does not define `class Model`"):
        load_kernelbench_parquet(path)

