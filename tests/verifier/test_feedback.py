"""Feedback: compile errors (the status first, then the first error with its code, no cache paths); a wrong output stated once."""

from __future__ import annotations

from kernelgym.backends.native import trim_compiler_log
from kernelgym.verifier.compare import Mismatch
from kernelgym.verifier.feedback import compose_feedback, conclude
from kernelgym.verifier.harness import mismatch_verdict
from kernelgym.verifier.result import Status

BUILD = "/home/user/.cache/kernelgym/builds/f8d76d544cef87a0ec0fbf6665bd1cdb"
GCC_LOG = f"""Error building extension 'kg_f8d76d544cef87a0ec0f': [1/2] c++ -MMD -MF main.o.d -O3 -fopenmp -c {BUILD}/main.cpp -o main.o
FAILED: main.o
c++ -MMD -MF main.o.d -O3 -fopenmp -c {BUILD}/main.cpp -o main.o
{BUILD}/main.cpp: In function 'at::Tensor relu(at::Tensor)':
{BUILD}/main.cpp:4:27: error: 'undefined_symbol_xyz' was not declared in this scope
    4 | static int kg_broken = undefined_symbol_xyz;
      |                        ^~~~~~~~~~~~~~~~~~~~
{BUILD}/main.cpp:9:5: error: expected ';' before 'return'
    9 |     return out
      |     ^~~~~~
ninja: build stopped: subcommand failed.
"""
NVCC_LOG = f"""[1/3] /usr/local/cuda/bin/nvcc -c {BUILD}/cuda.cu -o cuda.cuda.o
FAILED: cuda.cuda.o
{BUILD}/cuda.cu(12): error: identifier "blockIdy" is undefined
      int i = blockIdy.x;
              ^
1 error detected in the compilation of "{BUILD}/cuda.cu".
"""


def judge_style_feedback(log: str) -> list[str]:
    """The feedback lines, built the way the judge builds a compile-error verdict."""
    lines = trim_compiler_log(log).splitlines()
    return compose_feedback(Status.COMPILE_ERROR, ["\n".join(lines[1:]), "(native build failed)"], lead=lines[0]).splitlines()


def test_status_first_then_the_first_error_with_its_code() -> None:
    lines = judge_style_feedback(GCC_LOG)
    assert lines[0] == "Status: compile_error"
    assert lines[1] == "main.cpp:4:27: error: 'undefined_symbol_xyz' was not declared in this scope"
    assert lines[2] == "    4 | static int kg_broken = undefined_symbol_xyz;"
    assert lines[3].strip().startswith("|") and "^~~" in lines[3]
    assert lines[4].startswith("main.cpp:9:5: error:")
    assert lines[-1].startswith("Hint:")


def test_no_cache_path_and_no_build_commands() -> None:
    for log in (GCC_LOG, NVCC_LOG):
        text = "\n".join(judge_style_feedback(log))
        assert BUILD not in text and ".cache" not in text
        assert "FAILED:" not in text and "ninja" not in text and "-MMD" not in text


def test_nvcc_errors_are_relative_too() -> None:
    lines = judge_style_feedback(NVCC_LOG)
    assert lines[:3] == ["Status: compile_error", 'cuda.cu(12): error: identifier "blockIdy" is undefined', "      int i = blockIdy.x;"]


def test_a_log_without_diagnostics_keeps_its_last_lines() -> None:
    log = "ninja: build stopped\nlinker: cannot find -lfoo\n"
    assert trim_compiler_log(log) == "linker: cannot find -lfoo"


def test_a_wrong_output_is_stated_once_beside_its_rule() -> None:
    sentence = "the output differs from the reference in 3 of 8 elements: max abs error 0.5"
    verdict = mismatch_verdict(Mismatch("wrong-output", sentence), "trial 1 (seed 7, eval mode, grad off)", "wrong-output")
    result = conclude("level1/1_ReLU", "cpp", verdict.status, details=verdict.details, violations=verdict.violations,
                      compiled=True)
    assert result.status is Status.INCORRECT
    assert result.feedback.count(sentence) == 1
    assert f"- [wrong-output] runtime: trial 1 (seed 7, eval mode, grad off): {sentence}" in result.feedback.splitlines()
