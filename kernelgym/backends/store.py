"""The judge's content-addressed store of built extensions: published by the trusted side, read-only to candidates.

Holds:
    StoreRecord: what the judge recorded when it published one extension (its hash and linked symbols).
    BuildFailure: what the judge recorded when a build request did not compile (its message and compiler log).
    ExtensionStore: where entries and their records live; publish one, look one up, verify a mapped file.
    judge_dir: the judge's own directory beside a cache (records, locks, baselines, the toolchain floor).
    file_digest: the sha256 of a file.

Layout: ``<cache>/builds/<key>/<module>.so`` is one published extension (candidates
may read and load it, never write it); its record lives in the judge's directory,
``<cache>.trusted/store/<key>.json``, with the library's sha256 and the symbols it
imports and defines. A request that did not compile is recorded there too,
``<cache>.trusted/store/<key>.failed.json`` (its message and compiler log), so the same
request is answered at once with the same log instead of compiling again. A library is trusted only while its bytes hash to its record:
a lookup that finds them changed treats the entry as absent (it is rebuilt), and the
worker's check of the libraries mapped into a candidate calls anything else in the
store unverified.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["BuildFailure", "ExtensionStore", "StoreRecord", "file_digest", "judge_dir"]


def judge_dir(cache_dir: Path) -> Path:
    """The judge's own directory beside ``cache_dir`` (``<cache>.trusted``): no candidate may write there."""
    return cache_dir.with_name(cache_dir.name + ".trusted")


def file_digest(path: Path) -> str:
    """The sha256 of ``path``'s bytes, in hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass(frozen=True)
class StoreRecord:
    """The judge's record of one published extension.

    Attributes:
        key: the build's content address (hash of sources, flags, toolchain).
        module: the extension's module name (its file is ``<module>.so``).
        sha256: the hash of the published file.
        imported: the symbols it imports.
        exported: the symbols it defines.
    """

    key: str
    module: str
    sha256: str
    imported: tuple[str, ...]
    exported: tuple[str, ...]


@dataclass(frozen=True)
class BuildFailure:
    """The judge's record of a build request that did not compile (written by the trusted build step only).

    Attributes:
        key: the request's content address.
        message: the one-line reason.
        log: the compiler's log, as it was reported the first time.
    """

    key: str
    message: str
    log: str


class ExtensionStore:
    """The store of one build root (``<cache>/builds``).

    Args:
        build_root: where published extensions live (candidates read them from here).

    Example:
        >>> import tempfile
        >>> store = ExtensionStore(Path(tempfile.mkdtemp()) / "builds")
        >>> store.lookup("0" * 64) is None
        True
    """

    def __init__(self, build_root: Path) -> None:
        self.build_root = build_root
        self.records = judge_dir(build_root.parent) / "store"
        self._real_root = Path(os.path.realpath(build_root))

    def library(self, key: str, module: str) -> Path:
        """Where the extension of ``key`` is published."""
        return self.build_root / key[:32] / f"{module}.so"

    def record_path(self, key: str) -> Path:
        """Where the judge keeps the record of ``key``."""
        return self.records / f"{key[:32]}.json"

    def _read(self, record_path: Path) -> StoreRecord | None:
        try:
            data = json.loads(record_path.read_text())
            return StoreRecord(str(data["key"]), str(data["module"]), str(data["sha256"]),
                               tuple(data["imported"]), tuple(data["exported"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def lookup(self, key: str) -> StoreRecord | None:
        """The record of ``key`` when its published library exists and still hashes to it."""
        record = self._read(self.record_path(key))
        if record is None or record.key != key:
            return None
        try:
            return record if file_digest(self.library(key, record.module)) == record.sha256 else None
        except OSError:
            return None

    def failure_path(self, key: str) -> Path:
        """Where the judge keeps the record of ``key``'s failed build."""
        return self.records / f"{key[:32]}.failed.json"

    def failure(self, key: str) -> BuildFailure | None:
        """The record of ``key``'s failed build, if the trusted build step recorded one."""
        try:
            data = json.loads(self.failure_path(key).read_text())
            failure = BuildFailure(str(data["key"]), str(data["message"]), str(data["log"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return failure if failure.key == key else None

    def record_failure(self, key: str, message: str, log: str) -> BuildFailure:
        """Record that ``key`` did not compile; the caller holds the key's build lock."""
        failure = BuildFailure(key, message, log)
        self.records.mkdir(parents=True, exist_ok=True)
        staged = self.failure_path(key).with_suffix(f".{os.getpid()}.partial")
        staged.write_text(json.dumps(asdict(failure)))
        os.replace(staged, self.failure_path(key))
        return failure

    def verified(self, path: Path) -> StoreRecord | None:
        """The record of the store entry ``path`` is, when ``path`` is one and its bytes hash to the record."""
        path = Path(os.path.realpath(path))
        if path.parent.parent != self._real_root:
            return None
        record = self._read(self.records / f"{path.parent.name}.json")
        if record is None or path.name != f"{record.module}.so" or record.key[:32] != path.parent.name:
            return None
        try:
            return record if file_digest(path) == record.sha256 else None
        except OSError:
            return None

    def publish(self, key: str, module: str, built: Path, imported: list[str], exported: list[str]) -> StoreRecord:
        """Copy ``built`` into the store and record its hash; the caller holds the key's build lock.

        The file is written beside its final name and renamed over it, so a reader (or a process that
        mapped the previous file) never sees a half-written library.
        """
        target = self.library(key, module)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
        shutil.copyfile(built, partial)
        os.chmod(partial, 0o555)
        os.replace(partial, target)
        record = StoreRecord(key, module, file_digest(target), tuple(imported), tuple(exported))
        self.records.mkdir(parents=True, exist_ok=True)
        staged = self.record_path(key).with_suffix(f".{os.getpid()}.partial")
        staged.write_text(json.dumps(asdict(record)))
        os.replace(staged, self.record_path(key))
        return record

    def forget(self, entry: str) -> None:
        """Drop the record of the entry folder named ``entry`` (its files are being removed)."""
        with contextlib.suppress(OSError):
            (self.records / f"{entry}.json").unlink()
