"""RayExecutor on a local two-CPU Ray instance: same results as LocalExecutor, actor deaths, clean shutdown."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from kernelgym import Verifier  # noqa: E402
from kernelgym.executor import PoolSettings, ray_pool  # noqa: E402
from kernelgym.executor.ray_pool import ActorInfo, RayExecutor  # noqa: E402
from kernelgym.tasks import TaskSuite  # noqa: E402
from kernelgym.verifier import VerifierConfig  # noqa: E402
from kernelgym.verifier.config import StageTimeouts  # noqa: E402
from kernelgym.verifier.job import JudgeJob  # noqa: E402
from kernelgym.verifier.result import Status  # noqa: E402

pytestmark = pytest.mark.slow

WORKER_MODULE = "kernelgym.executor.worker"

COMPILE_ERROR = '''
from torch import nn
from torch.utils.cpp_extension import load_inline

module = load_inline(name="broken", cpp_sources="torch::Tensor f(torch::Tensor x) { return undefined_name; }", functions=["f"])

class ModelNew(nn.Module):
    def forward(self, x):
        return module.f(x)
'''

INIT_RAISES = '''
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        raise ValueError("the candidate refuses to start")

    def forward(self, x):
        return module.relu_forward(x)
'''

# Calls its (cached, shared with the reference solution) kernel forever.
LOOPS_FOREVER = '''
class ModelNew(nn.Module):
    def forward(self, x):
        out = module.relu_forward(x)
        while out.numel() > 0:
            out = module.relu_forward(x)
        return out
'''


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    """A local Ray instance with two CPUs (the last test shuts it down itself)."""
    ray.init(num_cpus=2, include_dashboard=False)
    yield
    if ray.is_initialized():
        ray.shutdown()


def _relu_module_prefix(cpu_suite: TaskSuite) -> str:
    """The ReLU solution up to its ModelNew: imports and the (cached) ``module`` extension."""
    return cpu_suite["level1/1_ReLU"].solution("cpp").split("class ModelNew")[0]


def _worker_processes(marker: str) -> dict[int, list[str]]:
    """pid -> argv of the sandboxed worker processes whose command line mentions ``marker``."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if WORKER_MODULE in argv and any(marker in arg for arg in argv) and _alive(int(entry.name)):
            found[int(entry.name)] = argv
    return found


def _stat(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name (state, ppid, ...); empty when gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return []


def _parent(pid: int) -> int:
    fields = _stat(pid)
    return int(fields[1]) if fields else 0


def _alive(pid: int) -> bool:
    fields = _stat(pid)
    return bool(fields) and fields[0] != "Z"


def _wait_for(condition: Callable[[], object], what: str, timeout: float = 300.0) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _kill_judge_while_judging(executor: RayExecutor, task_id: str, cache_dir: Path, replacements: int) -> int:
    """Wait until the judge actor runs ``task_id`` inside its worker, kill the actor; return the worker's pid."""

    def judging() -> tuple[ActorInfo, int] | None:
        for info in executor.actors():
            if info.role != "judge" or info.task_id != task_id or info.replacements != replacements:
                continue
            for pid, argv in _worker_processes(str(cache_dir)).items():
                # argv: python -m kernelgym.executor.worker FD WORK_DIR ...; the worker makes
                # WORK_DIR/job<N>/ when it starts judging a job.
                if _parent(pid) == info.pid and any(Path(argv[4]).glob("job*")):
                    return info, pid
        return None

    info, worker = _wait_for(judging, f"{task_id} to be judged")  # type: ignore[misc]
    time.sleep(1.0)  # into the candidate's endless forward
    ray.kill(info.actor)
    return worker


def test_ray_and_local_executors_agree_on_the_same_candidates(ray_cluster: None, cache_dir: Path, cpu_suite: TaskSuite) -> None:
    relu = cpu_suite["level1/1_ReLU"]
    prefix = _relu_module_prefix(cpu_suite)
    pairs = [
        (relu, "no code in this answer"),
        (relu, relu.solution("cpp")),
        (cpu_suite["level1/2_Sigmoid"], relu.solution("cpp")),
        (relu, prefix + INIT_RAISES),
        (relu, COMPILE_ERROR),
        (relu, "```python\nfrom torch import nn\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x.relu()\n```"),
    ]
    config = VerifierConfig(seed=7, runs=3, warmup=1)
    with Verifier(backend="cpp", executor="local", num_workers=2, cache_dir=cache_dir, config=config) as local:
        expected = local.evaluate_many(pairs)
    with Verifier(backend="cpp", executor="ray", num_workers=1, num_builders=1, cache_dir=cache_dir, config=config) as remote:
        assert isinstance(remote.executor, RayExecutor)
        got = remote.evaluate_many(pairs)

    assert [r.status for r in expected] == [
        Status.FORMAT_ERROR, Status.OK, Status.INCORRECT, Status.RUNTIME_ERROR, Status.COMPILE_ERROR, Status.ILLEGAL,
    ]
    for mine, theirs in zip(got, expected, strict=True):
        assert (mine.task_id, mine.status, mine.parsed, mine.legal, mine.compiled, mine.correct) == (
            theirs.task_id, theirs.status, theirs.parsed, theirs.legal, theirs.compiled, theirs.correct,
        )
        assert [v.rule for v in mine.violations] == [v.rule for v in theirs.violations]
        assert mine.seeds == theirs.seeds
        assert mine.custom_kernel_calls == theirs.custom_kernel_calls
    # The builds made by the local run are cache hits for the Ray actors.
    assert got[1].cache_hit


@pytest.mark.extended
def test_without_build_ahead_and_one_candidate_in_flight_results_keep_their_order(
    ray_cluster: None, cache_dir: Path, cpu_suite: TaskSuite
) -> None:
    relu, sigmoid = cpu_suite["level1/1_ReLU"], cpu_suite["level1/2_Sigmoid"]
    pairs = [(relu, relu.solution("cpp")), (sigmoid, relu.solution("cpp")), (relu, relu.solution("cpp"))]
    jobs = [Verifier(backend="cpp", config=VerifierConfig(runs=3, warmup=1)).prepare(t, text) for t, text in pairs]
    assert all(isinstance(job, JudgeJob) for job in jobs)
    executor = RayExecutor(PoolSettings(backend="cpp", num_workers=2, cache_dir=cache_dir), num_builders=0, max_in_flight=1)
    try:
        results = executor.run_many(jobs)  # type: ignore[arg-type]
        assert [a.role for a in executor.actors()] == ["judge", "judge"]
    finally:
        executor.close()
    assert [(r.task_id, r.status) for r in results] == [
        ("level1/1_ReLU", Status.OK), ("level1/2_Sigmoid", Status.INCORRECT), ("level1/1_ReLU", Status.OK),
    ]


def _endless(cpu_suite: TaskSuite, check_seconds: float) -> JudgeJob:
    """A job whose forward never returns; its check stage gives up after ``check_seconds``."""
    config = VerifierConfig(runs=3, warmup=1, timeouts=StageTimeouts(check=check_seconds))
    job = Verifier(backend="cpp", config=config).prepare(cpu_suite["level1/1_ReLU"], _relu_module_prefix(cpu_suite) + LOOPS_FOREVER)
    assert isinstance(job, JudgeJob)
    return job


@pytest.fixture
def endless_job(cpu_suite: TaskSuite) -> JudgeJob:
    return _endless(cpu_suite, 5.0)


@pytest.mark.extended
def test_a_judge_actor_killed_mid_evaluation_is_replaced_and_its_candidate_retried(
    ray_cluster: None, cache_dir: Path, endless_job: JudgeJob
) -> None:
    # Built ahead by the build actor, then judged by the judge actor (as on a GPU cluster).
    executor = RayExecutor(PoolSettings(backend="cpp", num_workers=1, cache_dir=cache_dir), num_builders=1, judges_build_when_idle=False)
    try:
        with ThreadPoolExecutor(1) as pool:
            future = pool.submit(executor.run_many, [endless_job])
            worker = _kill_judge_while_judging(executor, endless_job.task.id, cache_dir, replacements=0)
            (result,) = future.result(timeout=600)
        judges = [a for a in executor.actors() if a.role == "judge"]
    finally:
        executor.close()
    # The retry ran the candidate to the end: its endless forward hit the check budget.
    assert result.status is Status.TIMEOUT
    assert "check stage exceeded" in result.feedback
    assert [j.replacements for j in judges] == [1]
    # The killed actor's worker died with it.
    _wait_for(lambda: worker not in _worker_processes(str(cache_dir)), "the killed actor's worker to exit", 30)


@pytest.mark.extended
def test_a_candidate_whose_actor_dies_twice_is_a_runtime_error_with_the_reason(
    ray_cluster: None, cache_dir: Path, endless_job: JudgeJob
) -> None:
    # Built ahead by the build actor, then judged by the judge actor (as on a GPU cluster).
    executor = RayExecutor(PoolSettings(backend="cpp", num_workers=1, cache_dir=cache_dir), num_builders=1, judges_build_when_idle=False)
    try:
        with ThreadPoolExecutor(1) as pool:
            future = pool.submit(executor.run_many, [endless_job])
            first = _kill_judge_while_judging(executor, endless_job.task.id, cache_dir, replacements=0)
            second = _kill_judge_while_judging(executor, endless_job.task.id, cache_dir, replacements=1)
            (result,) = future.result(timeout=600)
        # The pool is whole again and still judges.
        assert [a.replacements for a in executor.actors() if a.role == "judge"] == [2]
    finally:
        executor.close()
    assert result.status is Status.RUNTIME_ERROR
    assert result.compiled and not result.correct
    assert "checking and timing it died 2 times" in result.feedback and "ray.kill" in result.feedback
    for worker in (first, second):
        _wait_for(lambda w=worker: w not in _worker_processes(str(cache_dir)), "the killed actors' workers to exit", 30)


@pytest.mark.extended
def test_answers_submitted_one_by_one_share_the_pipeline(ray_cluster: None, cache_dir: Path, cpu_suite: TaskSuite) -> None:
    """A ``submit`` per answer (as ``Verifier.submit`` makes): the build actor builds the next one while the judge judges."""
    sigmoid = cpu_suite["level1/2_Sigmoid"]
    job = Verifier(backend="cpp", config=VerifierConfig(runs=3, warmup=1)).prepare(sigmoid, sigmoid.solution("cpp"))
    # Endless for 30 s: long enough on a loaded machine for the second answer's (cached) build to finish meanwhile.
    endless_job = _endless(cpu_suite, 30.0)
    assert isinstance(job, JudgeJob)
    executor = RayExecutor(PoolSettings(backend="cpp", num_workers=1, cache_dir=cache_dir), num_builders=1, judges_build_when_idle=False)
    try:
        # Once through, so that the second answer's build below is a cache hit whatever ran before.
        assert executor.run_many([job])[0].status is Status.OK
        endless = executor.submit(endless_job)
        _wait_for(lambda: any(a.role == "judge" and a.task_id == endless_job.task.id for a in executor.actors()), "the endless job's judging")
        second = executor.submit(job)

        # Submitted while the judge is busy, the second answer is built meanwhile and waits for the judge (before, each
        # submit waited for the last). Both facts last until the endless job ends, so a slow poll cannot miss them.
        def built_beside_the_judging() -> bool:
            judging = [a.task_id for a in executor.actors() if a.role == "judge"]
            return executor.queued()["built"] == 1 and judging == [endless_job.task.id]

        _wait_for(built_beside_the_judging, "the second answer's build beside the first one's judging", 25)
        assert endless.result(timeout=600).status is Status.TIMEOUT
        result = second.result(timeout=600)
    finally:
        executor.close()
    assert result.status is Status.OK and result.task_id == job.task.id


def test_build_actors_read_the_architecture_here_only_on_a_cluster_of_this_node_alone(ray_cluster: None) -> None:
    """A local Ray's judges run on this machine: the build actors' architecture is read here and they start beside the
    judges. On a cluster of several nodes it is read where a judge runs."""
    assert ray_pool._only_this_node(ray)

    class TwoNodes:
        @staticmethod
        def nodes() -> list[dict]:
            return [*ray.nodes(), {"NodeID": "another", "Alive": True}]

        get_runtime_context = staticmethod(ray.get_runtime_context)

    assert not ray_pool._only_this_node(TwoNodes)


def test_close_and_ray_shutdown_leave_no_worker_or_actor_process(ray_cluster: None, cache_dir: Path, cpu_suite: TaskSuite) -> None:
    """Runs last in this module: it shuts Ray down."""
    relu = cpu_suite["level1/1_ReLU"]
    # Workers of other session-wide verifiers share the cache directory (and so the marker): leave them out.
    others = set(_worker_processes(str(cache_dir)))
    executor = RayExecutor(PoolSettings(backend="cpp", num_workers=1, cache_dir=cache_dir), num_builders=1)
    job = Verifier(backend="cpp", config=VerifierConfig(runs=3, warmup=1)).prepare(relu, relu.solution("cpp"))
    assert isinstance(job, JudgeJob)
    assert executor.run_many([job, job])[0].status is Status.OK
    actor_pids = [a.pid for a in executor.actors()]
    assert set(_worker_processes(str(cache_dir))) - others, "the actors' sandboxed workers should be running"

    executor.close()
    ray.shutdown()

    _wait_for(lambda: not set(_worker_processes(str(cache_dir))) - others, "every sandboxed worker to exit", 30)
    _wait_for(lambda: not any(_alive(pid) for pid in actor_pids), "the actor processes to exit", 30)
    with pytest.raises(RuntimeError, match="closed"):
        executor.run_many([job])


def test_each_actor_pins_its_worker_to_cpus_of_its_own(cache_dir: Path) -> None:
    """Ray binds an actor to no CPU: judge i's worker gets the i-th CPU, a build actor's every CPU after the judges'.

    Each actor starts its worker as it is made, not at its first job (actors closed at once stop theirs mid-start).
    """
    from kernelgym.executor.ray_pool import _SandboxedWorkerActor

    cpus = len(os.sched_getaffinity(0))
    settings = PoolSettings(backend="cpp", cache_dir=cache_dir)
    placed = {}
    for role, index in (("judge", 0), ("judge", 1), ("build", 0), ("build", 3)):
        actor = _SandboxedWorkerActor(settings, role, index, 1)
        try:
            (worker,) = actor._executor._judges.workers
            placed[role, index] = (worker.policy.cpu, worker.policy.cpu_count)
            assert worker.policy.builds_only is (role == "build")  # a build actor's candidates are never judged
            assert actor._executor._builders is None  # the pool builds ahead; an actor has no build workers of its own
            if (role, index) == ("judge", 0):
                actor._executor._judges.threads.submit(lambda: None).result(timeout=300)  # queued behind the start
                assert worker.process is not None and worker.process.poll() is None
        finally:
            actor.close()
    assert placed[("judge", 0)] == (0, 1) and placed[("judge", 1)] == (1 % cpus, 1)
    assert placed[("build", 0)] == placed[("build", 3)] == (1 % cpus, max(1, cpus - 1))


def test_an_actor_given_its_gpu_makes_its_executor_without_importing_torch(tmp_path: Path) -> None:
    """A judge actor of a GPU backend is told its device (Ray assigned it): its worker starts without the actor first
    importing torch to count devices (3 s an actor on an H200 host, before the worker could start)."""
    code = (
        "import sys\n"
        "from kernelgym.executor import PoolSettings\n"
        "from kernelgym.executor.local import LocalExecutor\n"
        "ex = LocalExecutor(PoolSettings(backend='cuda', num_workers=1, cache_dir=sys.argv[1]), build_workers=0, devices=1)\n"
        "workers = ex._judges.workers\n"
        "ex.close()\n"
        "print(len(workers), 'torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split()[-2:] == ["1", "False"]


@pytest.mark.parametrize("backend", ["cuda", "triton"])
def test_a_judge_actor_starts_its_worker_without_importing_torch(backend: str, tmp_path: Path) -> None:
    """What a Ray judge actor does before its worker's process starts (the executor, the worker's environment, with
    the GPU Ray named in ``CUDA_VISIBLE_DEVICES``) imports no torch: each import cost seconds per batch on an H100 host."""
    code = (
        "import sys\n"
        "from kernelgym.backends import get_backend\n"
        "from kernelgym.executor import PoolSettings\n"
        "from kernelgym.executor.local import LocalExecutor\n"
        f"ex = LocalExecutor(PoolSettings(backend={backend!r}, num_workers=1, cache_dir=sys.argv[1]), build_workers=0, devices=1)\n"
        "worker = ex._judges.workers[0]\n"
        "env = get_backend(worker.backend).worker_environment(worker.device_index)\n"
        "ex.close()\n"
        "print(env.get('CUDA_VISIBLE_DEVICES'), worker.policy.memory_gb, 'torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120, check=True,
                         env={**os.environ, "CUDA_VISIBLE_DEVICES": "3"})
    assert out.stdout.split()[-3:] == ["3", "None", "False"]


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two CPUs to restrict the process to one")
def test_a_local_ray_started_under_a_cpu_restriction_counts_only_the_allowed_cpus(tmp_path: Path) -> None:
    """Ray counts the machine's CPUs; under ``taskset`` (or a scheduler's cpuset) the executor's own Ray instance gets
    the process's CPUs instead, so it does not place more actors than the process has cores."""
    code = (
        "import os, sys\n"
        "os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})\n"
        "import ray\n"
        "from kernelgym.executor import PoolSettings\n"
        "from kernelgym.executor.ray_pool import RayExecutor\n"
        "ex = RayExecutor(PoolSettings(backend='cpp', num_workers=1, cache_dir=sys.argv[1]), num_builders=0)\n"
        "cpus = ray.cluster_resources().get('CPU')\n"
        "ex.close()\n"
        "print(cpus, ray.is_initialized())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=300, check=True,
                         env=env)
    assert out.stdout.split()[-2:] == ["1.0", "False"]
