"""Container benchmark: image build time (cold, and after a one-line edit) and cold start.

    python benchmarks/bench_container.py [--env-dir environments/echo] [--runs 10] [--json] [--write-docs]

Needs a container engine (see scripts/setup_container_engine.sh). The environment folder is
copied to a temporary folder first, so the one-line edit never touches the repository.

* cold build: empty wheel cache (a fresh OPENENV_CACHE_DIR) and no engine layer cache (the
  base image is re-labelled with a unique label, so its id, and every cache key, is new);
* rebuild after edit: one comment line appended to the environment's first Python file;
* cold start: `DockerProvider.start()` from `docker run` to the first 200 from `/health`, for
  each network policy, the policies interleaved run by run. Split into the provider's own
  calls to the engine before the run (image, network), the engine's create + start, and the
  rest (the container's process starting the server, until the first 200);
* cold start in a fresh process: the same, in a new Python process that also connects to the
  engine (`DockerProvider(image).start()` as a script would call it; imports not counted).

`--write-docs` replaces the "Containers" section of docs/benchmarks.md with the results.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import date
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import docker  # noqa: E402
from _docs import write_marked_section  # noqa: E402
from docker.models.containers import ContainerCollection  # noqa: E402
from rich.console import Console  # noqa: E402

from openenv_sdk.build import build_image  # noqa: E402
from openenv_sdk.containers.engine import connect_engine  # noqa: E402
from openenv_sdk.containers.wheels import sdk_wheel  # noqa: E402
from openenv_sdk.providers import DockerProvider  # noqa: E402

POLICIES = ("none", "bridge")
TARGET_S = 1.0  # issue 3: a container's cold start to its first healthy answer
DOCS_MD = REPO / "docs" / "benchmarks.md"
SECTION_BEGIN = "<!-- bench_container: begin -->"
SECTION_END = "<!-- bench_container: end -->"

# Timed in a new process: everything after the imports, the engine connection included.
_FRESH_PROCESS = """
import json, sys, time
from openenv_sdk.containers.engine import connect_engine
from openenv_sdk.providers import DockerProvider
started = time.perf_counter()
engine = connect_engine()
connected = time.perf_counter()
provider = DockerProvider(sys.argv[1], network=sys.argv[2], engine=engine)
provider.start()
healthy = time.perf_counter()
provider.stop()
print(json.dumps({"total": healthy - started, "connect": connected - started}))
"""


def _fresh_base(engine: docker.DockerClient, base_image: str) -> str:
    """`base_image` under a unique label: a new image id, so no layer cache applies to it."""
    tag = f"localhost/openenv-bench-base:{uuid.uuid4().hex[:12]}"
    dockerfile = f"FROM {base_image}\nLABEL org.openenv.bench={tag.rsplit(':', 1)[1]}\n".encode()
    for _ in engine.api.build(fileobj=io.BytesIO(dockerfile), tag=tag, rm=True, decode=True):
        pass
    return tag


class _RunTimer:
    """Records when the engine's create + start (`containers.run`) began and returned."""

    def __init__(self) -> None:
        self.began = self.returned = 0.0
        self._run = ContainerCollection.run

    def __enter__(self) -> _RunTimer:
        timer, original = self, self._run

        def run(collection: ContainerCollection, *args: Any, **kwargs: Any) -> Any:
            timer.began = time.perf_counter()
            try:
                return original(collection, *args, **kwargs)
            finally:
                timer.returned = time.perf_counter()

        ContainerCollection.run = run  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        ContainerCollection.run = self._run  # type: ignore[method-assign]


def _spread(values: list[float]) -> dict[str, float]:
    quartiles = statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else [values[0]] * 3
    return {
        "median": round(statistics.median(values), 3),
        "p25": round(quartiles[0], 3),
        "p75": round(quartiles[2], 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
    }


def _cold_starts(engine: docker.DockerClient, tag: str, runs: int) -> dict[str, Any]:
    phases: dict[str, dict[str, list[float]]] = {
        p: {"total": [], "before_run": [], "engine_run": [], "server": []} for p in POLICIES
    }
    with _RunTimer() as timer:
        for run in range(runs):
            for policy in POLICIES if run % 2 == 0 else POLICIES[::-1]:
                provider = DockerProvider(tag, network=policy, engine=engine)
                started = time.perf_counter()
                provider.start()
                healthy = time.perf_counter()
                provider.stop()
                phases[policy]["total"].append(healthy - started)
                phases[policy]["before_run"].append(timer.began - started)
                phases[policy]["engine_run"].append(timer.returned - timer.began)
                phases[policy]["server"].append(healthy - timer.returned)
    return {policy: {name: _spread(values) for name, values in p.items()} for policy, p in phases.items()}


def _fresh_process_starts(tag: str, runs: int) -> dict[str, Any]:
    times: dict[str, dict[str, list[float]]] = {p: {"total": [], "connect": []} for p in POLICIES}
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for run in range(runs):
        for policy in POLICIES if run % 2 == 0 else POLICIES[::-1]:
            out = subprocess.run(
                [sys.executable, "-c", _FRESH_PROCESS, tag, policy],
                env=env,
                cwd=REPO,  # `-c` puts the working folder first on sys.path: make it this checkout
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            for name, value in json.loads(out.strip().splitlines()[-1]).items():
                times[policy][name].append(value)
    return {policy: {name: _spread(values) for name, values in t.items()} for policy, t in times.items()}


def _machine(engine: docker.DockerClient) -> dict[str, Any]:
    cpu = "unknown"
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem_kb = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))  # type: ignore[union-attr]
    version, info = engine.version(), engine.info()
    component = (version.get("Components") or [{}])[0]
    rootless = any("rootless" in str(option) for option in info.get("SecurityOptions") or [])
    return {
        "date": date.today().isoformat(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(mem_kb / 2**20),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "engine": f"{component.get('Name', 'engine')} {version.get('Version', '')}".strip(),
        "engine_api": version.get("ApiVersion"),
        "engine_mode": f"{'rootless' if rootless else 'rootful'}, runtime {info.get('DefaultRuntime', 'unknown')}",
    }


def _loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env-dir", type=Path, default=REPO / "environments" / "echo")
    parser.add_argument("--base-image", default=os.environ.get("OPENENV_BASE_IMAGE", "localhost/openenv-base:bookworm"))
    parser.add_argument("--runs", type=int, default=10, help="cold starts per network policy (and per kind)")
    parser.add_argument("--no-fresh-process", action="store_true", help="skip the cold starts in fresh processes")
    parser.add_argument("--json", action="store_true", help="print the results as one JSON object")
    parser.add_argument("--write-docs", action="store_true", help="write the Containers section of docs/benchmarks.md")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")

    engine = connect_engine()
    tag = f"openenv-bench:{uuid.uuid4().hex[:8]}"
    results: dict[str, Any] = {
        "machine": _machine(engine),
        "env_dir": str(args.env_dir.resolve().relative_to(REPO) if args.env_dir.resolve().is_relative_to(REPO) else args.env_dir),
        "base_image": args.base_image,
        "runs": args.runs,
        "load_before": _loadavg(),
    }
    with tempfile.TemporaryDirectory(prefix="openenv-bench-") as tmp:
        folder = Path(tmp) / args.env_dir.name
        shutil.copytree(args.env_dir, folder, ignore=shutil.ignore_patterns("__pycache__", "tests"))
        os.environ["OPENENV_CACHE_DIR"] = str(Path(tmp) / "cache")  # empty wheel cache: truly cold

        base = _fresh_base(engine, args.base_image)
        started = time.perf_counter()
        sdk = sdk_wheel()  # pinned for both builds: only the environment's edit should count
        build_image(folder, tag=tag, base_image=base, engine=engine, output="quiet", sdk_wheel_path=sdk)
        results["build_cold_s"] = round(time.perf_counter() - started, 2)

        source = sorted(folder.glob("*.py"))[0]
        with source.open("a") as f:
            f.write("\n# one-line edit for the benchmark\n")
        console = Console(record=True, width=200, file=io.StringIO())
        started = time.perf_counter()
        build_image(
            folder, tag=tag, base_image=base, engine=engine, output="full", console=console, sdk_wheel_path=sdk
        )
        results["build_after_edit_s"] = round(time.perf_counter() - started, 2)
        log = console.export_text()
        steps = len(re.findall(r"step \d+/\d+", log)) - 1  # FROM is never "from cache"
        results["build_after_edit_steps_run"] = steps - log.lower().count("using cache")
        engine_s = re.search(r"built \S+ in ([\d.]+)s", log)
        results["build_after_edit_engine_s"] = float(engine_s.group(1)) if engine_s else None

    try:
        results["cold_start"] = _cold_starts(engine, tag, args.runs)
        if not args.no_fresh_process:
            results["cold_start_fresh_process"] = _fresh_process_starts(tag, args.runs)
        results["image_size_mb"] = round(engine.images.get(tag).attrs["Size"] / 1e6, 1)
    finally:
        engine.images.remove(tag, force=True)
        engine.images.remove(base, force=True)
        engine.close()
    results["load_after"] = _loadavg()

    if args.json:
        print(json.dumps(results))
    else:
        _print_human(results)
    if args.write_docs:
        _write_docs(results)
        print(f"wrote the Containers section of {DOCS_MD.relative_to(REPO)}", file=sys.stderr)


def _ms(spread: dict[str, float]) -> str:
    return f"{spread['median'] * 1000:.0f} ms"


def _print_human(results: dict[str, Any]) -> None:
    m = results["machine"]
    print(f"environment            {results['env_dir']} on {results['base_image']} ({m['engine']})")
    print(f"build, cold            {results['build_cold_s']:6.2f} s  (no wheel cache, no layer cache)")
    print(
        f"build, after 1-line edit {results['build_after_edit_s']:4.2f} s  "
        f"(engine {results['build_after_edit_engine_s']} s, {results['build_after_edit_steps_run']} step(s) "
        "not from cache; the rest is preparing wheels and the context on the host)"
    )
    for policy, phases in results["cold_start"].items():
        total = phases["total"]
        print(
            f"cold start to /health  {total['median']:6.2f} s  median of {results['runs']}, network={policy} "
            f"(p25 {total['p25']:.2f}, p75 {total['p75']:.2f}, min {total['min']:.2f}, max {total['max']:.2f}; "
            f"provider {_ms(phases['before_run'])} + engine create/start {_ms(phases['engine_run'])} "
            f"+ server up {_ms(phases['server'])})"
        )
    for policy, phases in results.get("cold_start_fresh_process", {}).items():
        total = phases["total"]
        print(
            f"  in a fresh process   {total['median']:6.2f} s  network={policy}, engine connection included "
            f"(min {total['min']:.2f}, max {total['max']:.2f}; connecting {_ms(phases['connect'])})"
        )
    print(f"image size             {results['image_size_mb']:6.1f} MB")
    print(f"load average           {results['load_before']} before, {results['load_after']} after ({m['cores']} cores)")


def _docs_section(results: dict[str, Any]) -> str:
    m, runs = results["machine"], results["runs"]
    cold, fresh = results["cold_start"], results.get("cold_start_fresh_process", {})

    def row(label: str, s: dict[str, float]) -> str:
        return f"| {label} | {s['median']:.2f} | {s['p25']:.2f} – {s['p75']:.2f} | {s['min']:.2f} – {s['max']:.2f} |"

    def target(label: str, median_s: float) -> str:
        return f"- {label}: {median_s:.2f} s, {'met' if median_s < TARGET_S else 'NOT met'}"

    lines = [
        SECTION_BEGIN,
        "## Containers",
        "",
        f"Generated by `benchmarks/bench_container.py --runs {runs} --write-docs` on {m['date']} "
        f"(`{results['env_dir']}` on `{results['base_image']}`); edit the script, not this section.",
        "",
        f"- Machine: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB; Linux {m['kernel']}; Python {m['python']}; "
        f"{m['engine']} (Docker API {m['engine_api']}; {m['engine_mode']}). It is shared with other work, so "
        f"timings are noisy: load average {results['load_before']} before the run, {results['load_after']} "
        "after it (1, 5, 15 min).",
        f"- **Cold start**: `DockerProvider(image, network=...).start()` on a connected engine, from `docker run` "
        f"to the first 200 from `/health`; {runs} runs per network policy, the two policies interleaved. `none` "
        "(the default) joins an internal network with no egress and the host reaches the container's IP; "
        "`bridge` publishes the port on 127.0.0.1. The image's layers are in the page cache (it was just built).",
        "- **Fresh process**: the same start in a new Python process that first connects to the engine "
        "(`connect_engine()`), as a one-off script does; its imports are not counted.",
        "- **Build**: `build_image` on a copy of the folder. *Cold*: an empty wheel cache (the SDK's and the "
        "dependencies' wheels are prepared on the host) and no layer cache (a freshly labelled base image). "
        "*After a one-line edit*: a comment line appended to the environment's module, everything else cached.",
        "",
        f"Target, a median cold start under {TARGET_S:.0f} s:",
        "",
        *(target(f"network `{policy}`", phases["total"]["median"]) for policy, phases in cold.items()),
        *(target(f"network `{policy}`, fresh process", phases["total"]["median"]) for policy, phases in fresh.items()),
        "",
        "| cold start (s) | median | p25 – p75 | min – max |",
        "| --- | ---: | ---: | ---: |",
        *(row(f"network `{policy}`", phases["total"]) for policy, phases in cold.items()),
        *(row(f"network `{policy}`, fresh process", phases["total"]) for policy, phases in fresh.items()),
        "",
        "Where a start's time goes (medians, ms). *Provider*: its calls to the engine before the run (the image's "
        "labels, the network). *Engine*: create + start. *Server*: the container's process (an init, then "
        "`openenv serve`: Python, its imports, uvicorn) until the first 200, polled every 20 ms. *Connect*: a "
        "fresh process's engine connection.",
        "",
        "| network | provider | engine | server | connect (fresh process) |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for policy, phases in cold.items():
        connect = fresh.get(policy, {}).get("connect")
        connect_ms = f"{connect['median'] * 1000:.0f}" if connect else "–"
        lines.append(
            f"| `{policy}` | {phases['before_run']['median'] * 1000:.0f} | {phases['engine_run']['median'] * 1000:.0f} "
            f"| {phases['server']['median'] * 1000:.0f} | {connect_ms} |"
        )
    engine_s = results["build_after_edit_engine_s"]
    engine_note = f"; the engine took {engine_s:.2f} s" if engine_s is not None else ""
    lines += [
        "",
        "| build | seconds |",
        "| --- | ---: |",
        f"| cold (no wheel cache, no layer cache) | {results['build_cold_s']:.2f} |",
        f"| after a one-line edit ({results['build_after_edit_steps_run']} step not from cache{engine_note}) "
        f"| {results['build_after_edit_s']:.2f} |",
        "",
        f"Image size: {results['image_size_mb']:.0f} MB.",
        "",
        "Reproduce (Podman, see `scripts/setup_container_engine.sh`):",
        "",
        "```bash",
        "bash scripts/setup_container_engine.sh",
        f"DOCKER_HOST=unix:///run/podman/podman.sock .venv/bin/python benchmarks/bench_container.py --runs {runs} "
        "--write-docs",
        "```",
        SECTION_END,
    ]
    return "\n".join(lines) + "\n"


def _write_docs(results: dict[str, Any]) -> None:
    write_marked_section(DOCS_MD, SECTION_BEGIN, SECTION_END, _docs_section(results))


if __name__ == "__main__":
    main()
