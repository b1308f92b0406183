"""Install kernelgym: ``pip install -e .`` (core) or ``pip install -e '.[dev]'`` (tests)."""

from pathlib import Path

from setuptools import find_packages, setup

EXTRAS = {
    "kernelbench": ["pyarrow>=14"],
    "triton": ["triton>=3.0"],
    "ray": ["ray[default]>=2.9"],
    "sb3": ["stable-baselines3>=2.3"],
    "hf": ["transformers>=4.40"],
    "verl": ["verl[verl-core]==0.9.1"],
    "trl": ["trl>=1.16"],  # brings datasets, transformers and accelerate
    "plots": ["matplotlib>=3.7"],
    "serve": ["aiohttp>=3.9"],
}
# CI runs the verl tests too (the small trainer's smoke test, the agent loop, the sampler): verl brings transformers;
# and TRL's GRPOTrainer with the kernelgym reward (two steps of a tiny model).
EXTRAS["ci"] = [*EXTRAS["triton"], *EXTRAS["ray"], *EXTRAS["sb3"], *EXTRAS["verl"], *EXTRAS["trl"], *EXTRAS["serve"]]
EXTRAS["dev"] = [
    "pytest>=8",
    "pytest-benchmark>=4",
    "hypothesis>=6",
    "ruff>=0.5",
    *EXTRAS["kernelbench"],
    *EXTRAS["plots"],
    *EXTRAS["serve"],  # docs/serve.md's snippets run in the README's test command
]

setup(
    name="kernelgym",
    version="0.1.0",
    description="Gymnasium environments and a strict, sandboxed judge for native GPU/CPU kernel generation",
    long_description=Path(__file__).with_name("README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(include=["kernelgym", "kernelgym.*"]),
    package_data={"kernelgym": ["tasks/suites/**/*.py", "tasks/suites/**/*.json", "training/configs/*.yaml"]},
    include_package_data=True,
    install_requires=[
        "torch>=2.4",
        "numpy>=1.24",
        "gymnasium>=1.0",
        "ninja>=1.11",
        "pybind11>=2.11",
        "tree-sitter>=0.23",
        "tree-sitter-python>=0.23",
        "tree-sitter-cpp>=0.23",
        "tqdm>=4.60",
        "pyyaml>=6",
    ],
    extras_require=EXTRAS,
    entry_points={
        "console_scripts": ["kernelgym=kernelgym.cli:main"],
        "verl.plugins": ["kernelgym = kernelgym.training.verl_plugin"],
    },
)
