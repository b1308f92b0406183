"""One-time builds, done ahead of the first judgement (``kernelgym prepare``).

Holds:
    OneTimeBuild: one build every worker of a backend needs, once per machine, toolchain and cache.
    one_time_builds: those a backend needs, each able to say whether it is already done.
    pending_builds: the names of those not done yet (what a first judgement would wait for).
    prepare: do the pending ones side by side, saying what is built and how long each took.

A worker does these itself at start-up when they are missing (each under its own
lock, so several workers wait for one build instead of repeating it); afterwards a
worker starts in seconds. Doing them ahead, at install time or before a benchmark,
keeps their minutes out of the first verdict.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

__all__ = ["OneTimeBuild", "one_time_builds", "pending_builds", "prepare"]


@dataclass(frozen=True)
class OneTimeBuild:
    """A build a worker needs once per machine, toolchain and cache.

    Attributes:
        name: what it is, for a progress line.
        about: how long it takes on the 2-core reference machine, for a progress line.
        done: whether it is already in the cache.
        run: build it (a no-op when done).
        after_header: it is compiled with the precompiled header, so it is built after it.
    """

    name: str
    about: str
    done: Callable[[], bool]
    run: Callable[[], object]
    after_header: bool = False


def one_time_builds(backend: str, cache_dir: Path) -> list[OneTimeBuild]:
    """The one-time builds of ``backend`` with the build cache ``cache_dir``."""
    from kernelgym.backends.aten_observer import load_observer, observer_built
    from kernelgym.backends.native import ensure_pch, floor_record, floor_stores, pch_target, prepare_floor

    build_root = cache_dir / "builds"

    def header_done(cuda: bool) -> bool:
        target = pch_target(build_root, cuda)
        return target is None or target.exists()

    def floor_done() -> bool:
        record = floor_record(backend, floor_stores(cache_dir)[0])
        return record is None or record.exists()

    builds = [OneTimeBuild("precompiled torch/extension.h", "about 1 min", lambda: header_done(False),
                           lambda: ensure_pch(build_root))]
    if backend == "cuda":
        builds.append(OneTimeBuild("precompiled torch/extension.h for device builds", "about 1 min",
                                   lambda: header_done(True), lambda: ensure_pch(build_root, cuda=True)))
    builds.append(OneTimeBuild("ATen observer (the guard below Python)", "about 1 min",
                               lambda: observer_built(build_root), lambda: load_observer(build_root), after_header=True))
    builds.append(OneTimeBuild("toolchain floor of the symbol check", "about 1 min", floor_done,
                               lambda: prepare_floor(backend, cache_dir)))
    return builds


def pending_builds(backend: str, cache_dir: Path) -> list[str]:
    """The names of ``backend``'s one-time builds not yet in ``cache_dir`` (empty when a worker starts in seconds)."""
    try:
        return [build.name for build in one_time_builds(backend, cache_dir) if not build.done()]
    except Exception:  # noqa: BLE001 (only a progress message depends on it)
        return []


def prepare(backend: str, cache_dir: Path, say: Callable[[str], None] = print) -> list[str]:
    """Do ``backend``'s pending one-time builds side by side; return what could not be built.

    Each build says when it starts (with about how long it takes) and when it is done (with how long it took).
    A build that fails is reported and left to the workers, which fall back as they do without it.
    """
    cache_dir.mkdir(parents=True, exist_ok=True)
    builds = one_time_builds(backend, cache_dir)
    pending = [build for build in builds if not build.done()]
    for build in builds:
        if build not in pending:
            say(f"{build.name}: already built")
    failed: list[str] = []

    def timed(build: OneTimeBuild) -> float:
        start = time.monotonic()
        build.run()
        return time.monotonic() - start

    # The observer is compiled with the precompiled header: it waits for the first wave.
    waves = [[b for b in pending if not b.after_header], [b for b in pending if b.after_header]]
    with ThreadPoolExecutor(max_workers=max(1, len(pending))) as pool:
        for wave in waves:
            _run_wave(pool, wave, timed, failed, say)
    return failed


def _run_wave(pool: ThreadPoolExecutor, wave: list[OneTimeBuild], timed: Callable[[OneTimeBuild], float],
              failed: list[str], say: Callable[[str], None]) -> None:
    futures = {}
    for build in wave:
        say(f"{build.name}: building ({build.about})")
        futures[pool.submit(timed, build)] = build
    for future in as_completed(futures):
        build = futures[future]
        try:
            seconds = future.result()
        except Exception as exc:  # noqa: BLE001 (reported; the workers build or do without it)
            failed.append(build.name)
            say(f"{build.name}: failed ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})")
            continue
        if build.done():
            say(f"{build.name}: built in {seconds:.0f} s")
        else:
            failed.append(build.name)
            say(f"{build.name}: could not be built here ({seconds:.0f} s); workers go on without it")
