"""Container benchmark: image build time (cold, and after a one-line edit) and cold start.

    python benchmarks/bench_container.py [--env-dir environments/echo] [--runs 5] [--json]

Needs a container engine (see scripts/setup_container_engine.sh). The environment folder is
copied to a temporary folder first, so the one-line edit never touches the repository.

* cold build: empty wheel cache (a fresh OPENENV_CACHE_DIR) and no engine layer cache (the
  base image is re-labelled with a unique label, so its id, and every cache key, is new);
* rebuild after edit: one comment line appended to the environment's first Python file;
* cold start: `DockerProvider.start()` from `docker run` to the first 200 from `/health`,
  for each network policy (median of `--runs`).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import docker  # noqa: E402
from rich.console import Console  # noqa: E402

from openenv_sdk.build import build_image  # noqa: E402
from openenv_sdk.containers.engine import connect_engine  # noqa: E402
from openenv_sdk.containers.wheels import sdk_wheel  # noqa: E402
from openenv_sdk.providers import DockerProvider  # noqa: E402


def _fresh_base(engine: docker.DockerClient, base_image: str) -> str:
    """`base_image` under a unique label: a new image id, so no layer cache applies to it."""
    tag = f"localhost/openenv-bench-base:{uuid.uuid4().hex[:12]}"
    dockerfile = f"FROM {base_image}\nLABEL org.openenv.bench={tag.rsplit(':', 1)[1]}\n".encode()
    for _ in engine.api.build(fileobj=io.BytesIO(dockerfile), tag=tag, rm=True, decode=True):
        pass
    return tag


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env-dir", type=Path, default=REPO / "environments" / "echo")
    parser.add_argument("--base-image", default=os.environ.get("OPENENV_BASE_IMAGE", "localhost/openenv-base:bookworm"))
    parser.add_argument("--runs", type=int, default=5, help="cold starts per network policy")
    parser.add_argument("--json", action="store_true", help="print the results as one JSON object")
    args = parser.parse_args()

    engine = connect_engine()
    tag = "openenv-bench:latest"
    results: dict[str, object] = {
        "engine": engine.version().get("Components", [{}])[0].get("Name", "engine"),
        "env_dir": str(args.env_dir),
        "base_image": args.base_image,
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
            folder,
            tag=tag,
            base_image=base,
            engine=engine,
            output="full",
            console=console,
            sdk_wheel_path=sdk,
        )
        results["build_after_edit_s"] = round(time.perf_counter() - started, 2)
        log = console.export_text()
        steps = len(re.findall(r"step \d+/\d+", log)) - 1  # FROM is never "from cache"
        results["build_after_edit_steps_run"] = steps - log.lower().count("using cache")
        engine_s = re.search(r"built \S+ in ([\d.]+)s", log)
        results["build_after_edit_engine_s"] = float(engine_s.group(1)) if engine_s else None

    for policy in ("none", "bridge"):
        times = []
        for _ in range(args.runs):
            provider = DockerProvider(tag, network=policy, engine=engine)
            started = time.perf_counter()
            provider.start()
            times.append(time.perf_counter() - started)
            provider.stop()
        results[f"cold_start_{policy}_median_s"] = round(statistics.median(times), 2)
        results[f"cold_start_{policy}_range_s"] = [round(min(times), 2), round(max(times), 2)]
    results["image_size_mb"] = round(engine.images.get(tag).attrs["Size"] / 1e6, 1)
    engine.images.remove(tag, force=True)
    engine.images.remove(base, force=True)
    engine.close()

    if args.json:
        print(json.dumps(results))
        return
    print(f"environment            {results['env_dir']} on {results['base_image']} ({results['engine']})")
    print(f"build, cold            {results['build_cold_s']:6.2f} s  (no wheel cache, no layer cache)")
    print(
        f"build, after 1-line edit {results['build_after_edit_s']:4.2f} s  "
        f"(engine {results['build_after_edit_engine_s']} s, {results['build_after_edit_steps_run']} step(s) "
        "not from cache; the rest is preparing wheels and the context on the host)"
    )
    for policy in ("none", "bridge"):
        low, high = results[f"cold_start_{policy}_range_s"]  # type: ignore[misc]
        print(
            f"cold start to /health  {results[f'cold_start_{policy}_median_s']:6.2f} s  median of {args.runs}, "
            f"network={policy} (min {low}, max {high})"
        )
    print(f"image size             {results['image_size_mb']:6.1f} MB")


if __name__ == "__main__":
    main()
