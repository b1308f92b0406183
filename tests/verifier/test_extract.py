"""Tests of kernelgym.verifier.extract: taking the ModelNew program out of LLM responses."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelgym.verifier.extract import MAX_RESPONSE_BYTES, FormatError, extract_program

PROGRAM = "import torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n"
CPP = "#include <torch/extension.h>\ntorch::Tensor f(torch::Tensor x) { return x; }\n"


def fenced(body: str, tag: str = "python", fence: str = "```") -> str:
    return f"{fence}{tag}\n{body}{fence}\n"


@pytest.mark.parametrize("tag", ["python", "py", "", "Python3", "python title='answer.py'"])
def test_fenced_block_with_any_python_tag(tag):
    text = "Here is the faster version.\n\n" + fenced(PROGRAM, tag) + "\nIt uses a custom kernel."
    assert extract_program(text) == PROGRAM


def test_tilde_fence_and_unclosed_last_fence():
    assert extract_program(fenced(PROGRAM, "python", "~~~")) == PROGRAM
    assert extract_program("Answer:\n```python\n" + PROGRAM) == PROGRAM


def test_block_defining_modelnew_wins_over_other_blocks():
    other = "import torch\nprint(torch.__version__)\n" * 5
    text = fenced(CPP, "cpp") + fenced(other) + fenced(PROGRAM) + fenced("pip install torch\n", "bash")
    assert extract_program(text) == PROGRAM


def test_last_defining_block_wins():
    first = PROGRAM.replace("return x", "return x  # first draft")
    text = fenced(first) + "Actually, better:\n" + fenced(PROGRAM)
    assert extract_program(text) == PROGRAM


def test_without_modelnew_the_longest_python_block_is_judged_and_rejected():
    text = fenced("x = 1\n") + fenced("import torch\nclass Model(torch.nn.Module):\n    pass\n")
    with pytest.raises(FormatError, match="does not define `class ModelNew"):
        extract_program(text)


def test_indented_fence_inside_a_list_item_is_dedented():
    body = "".join("    " + line + "\n" if line else "\n" for line in PROGRAM.splitlines())
    text = "1. The code:\n\n    ```python\n" + body + "    ```\n"
    assert extract_program(text) == PROGRAM


def test_bare_code_and_bare_code_after_prose():
    assert extract_program(PROGRAM) == PROGRAM
    assert extract_program("Sure! Here is my answer.\n" + PROGRAM) == PROGRAM


@pytest.mark.parametrize("text", ["", "   \n\t\n", "```python\n```\n"])
def test_empty_response(text):
    with pytest.raises(FormatError, match="empty|no code|does not define"):
        extract_program(text)


def test_prose_without_code():
    with pytest.raises(FormatError, match="contains no code"):
        extract_program("I would write a ModelNew class with a fused CUDA kernel for this.")


def test_syntax_error_names_the_line():
    broken = PROGRAM.replace("return x", "return x +")
    with pytest.raises(FormatError, match=r"syntax error at line 6") as info:
        extract_program(fenced(broken))
    assert "return x +" in str(info.value)


def test_compile_time_errors_are_syntax_errors():
    with pytest.raises(FormatError, match="syntax error"):
        extract_program(PROGRAM + "return 1\n")


@pytest.mark.parametrize(
    ("code", "match"),
    [
        ("import torch\nModelNew = torch.nn.Identity\n", "must be a class"),
        ("def ModelNew():\n    return None\n", "must be a class"),
        ("from somewhere import ModelNew\n", "must be a class"),
        ("import torch\nif True:\n    class ModelNew(torch.nn.Module):\n        pass\n", "top level"),
        ("class ModelNew:\n    pass\n", "no base class"),
        ("class ModelNew():\n    pass\n", "no base class"),
        ("import torch\nclass Model(torch.nn.Module):\n    pass\n", "does not define"),
    ],
)
def test_modelnew_must_be_a_top_level_class_with_a_base(code, match):
    with pytest.raises(FormatError, match=match):
        extract_program(fenced(code))


def test_modelnew_may_inherit_from_any_base_here():
    code = "import torch\nclass ModelNew(torch.nn.Module):\n    pass\n"
    assert extract_program(code) == code


def test_code_is_never_executed():
    code = "raise SystemExit('executed')\nimport torch.nn as nn\nclass ModelNew(nn.Module):\n    pass\n"
    assert extract_program(fenced(code)) == code


def test_oversized_and_binary_responses():
    with pytest.raises(FormatError, match="larger than"):
        extract_program(PROGRAM + "#" * (MAX_RESPONSE_BYTES + 1))
    with pytest.raises(FormatError, match="NUL"):
        extract_program(PROGRAM + "\x00")
    with pytest.raises(FormatError):
        extract_program(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "code",
    [
        "import torch\nx = " + "-" * 200_000 + "1\nclass ModelNew(torch.nn.Module):\n    pass\n",
        "import torch\nx = " + "(" * 300 + ")" * 300 + "\nclass ModelNew(torch.nn.Module):\n    pass\n",
        "import torch\n" + "".join(" " * i + "if x:\n" for i in range(150)) + " " * 150 + "pass\n",
    ],
)
def test_deep_nesting_is_a_format_error(code):
    with pytest.raises(FormatError, match="nested|syntax error"):
        extract_program(code)


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_gives_code_or_format_error(text):
    try:
        code = extract_program(text)
    except FormatError as exc:
        assert str(exc).strip()
    else:
        assert "ModelNew" in code
        compile(code, "<extracted>", "exec")


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_characters="`~\x00"), max_size=80), st.sampled_from(["", "py"]))
def test_prose_around_a_fenced_program_is_ignored(prose, tag):
    assert extract_program(prose + "\n" + fenced(PROGRAM, tag) + prose) == PROGRAM


@pytest.mark.parametrize("cookie", ["# -*- coding: utf-7 -*-", "# vim: set fileencoding=latin-1 :", "#coding=cp1252"])
def test_a_coding_cookie_other_than_utf8_is_a_format_error(cookie):
    with pytest.raises(FormatError, match="only UTF-8"):
        extract_program(fenced(cookie + "\n" + PROGRAM))


def test_a_utf8_cookie_is_kept_and_a_byte_order_mark_refused():
    assert extract_program(fenced("# coding: utf-8\n" + PROGRAM)).startswith("# coding: utf-8\n")
    with pytest.raises(FormatError, match="byte-order mark"):
        extract_program(fenced("\ufeff" + PROGRAM))


def test_a_lone_carriage_return_ends_a_line_for_the_rules_too():
    # Python ends a line at a lone CR; the extracted text makes that visible to every static rule.
    code = extract_program(fenced("# note\rimport os\n" + PROGRAM))
    assert "\nimport os\n" in code and "\r" not in code


def test_lone_surrogates_are_refused():
    with pytest.raises(FormatError, match="not valid Unicode"):
        extract_program(fenced("# \udc80\n" + PROGRAM))
