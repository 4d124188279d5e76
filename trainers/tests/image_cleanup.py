"""A test session removes the images it built and the containers made from them, and nothing else.

Shared by trainers/tests and trainers/adapter_tests (each checks its own conftest): a child pytest
session, given the suite's conftest as a plugin, builds one image and leaves a container of it
running (as a test that failed half-way would); when that session has ended, neither is left,
while an image built outside it (the control) is untouched.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

TRAINERS = Path(__file__).resolve().parents[1]
BASE_IMAGE = os.environ.get("OPENENV_BASE_IMAGE", "localhost/openenv-base:bookworm")
CHILD_TIMEOUT_S = 600

CHILD_TEST = """
import json, os
from openenv_sdk.build import BUILD_LABELS_ENV, build_image
from openenv_sdk.containers.engine import connect_engine


def test_build_one_image_and_leave_a_container_running(tmp_path):
    (tmp_path / "Dockerfile").write_text('FROM {base}\\nCMD ["sleep", "600"]\\n')
    (tmp_path / "openenv.yaml").write_text("name: cleanup-probe\\nport: 8000\\n")
    engine = connect_engine()
    tag = build_image(tmp_path, tag="openenv-cleanup-probe:{run}", engine=engine, output="quiet")
    container = engine.containers.run(tag, detach=True)
    image = engine.images.get(tag)
    print("PROBE " + json.dumps({{"image": image.id, "container": container.id, "labels": image.labels}}))
"""


def check_a_session_removes_what_it_made(conftest: str, tmp_path: Path) -> None:
    """Run the child session with `conftest` (a module, `tests.conftest`) and check what is left."""
    from openenv_sdk.build import BUILD_LABELS_ENV
    from openenv_sdk.containers.engine import connect_engine
    from openenv_sdk.testing import remove_labelled

    run = uuid.uuid4().hex[:12]
    probe, control = f"org.openenv.cleanup-probe={run}", f"org.openenv.cleanup-control={run}"
    engine = connect_engine()
    try:
        # someone else's image (built outside the child session, straight through the engine): it must survive
        (tmp_path / "control").mkdir()
        (tmp_path / "control" / "Dockerfile").write_text(f'FROM {BASE_IMAGE}\nCMD ["true"]\n')
        key, _, value = control.partition("=")
        engine.images.build(path=str(tmp_path / "control"), tag=f"openenv-cleanup-control:{run}", labels={key: value})
        child = tmp_path / "child" / "test_cleanup_probe.py"
        child.parent.mkdir()
        child.write_text(textwrap.dedent(CHILD_TEST.format(base=BASE_IMAGE, run=run)))
        env = {**os.environ, BUILD_LABELS_ENV: probe}  # every image the child builds also carries this, to find it after
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", conftest, str(child), "-q", "-s", "-p", "no:cacheprovider",
             "-c", str(TRAINERS / "pyproject.toml"), "--rootdir", str(TRAINERS)],
            cwd=TRAINERS, env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S,
        )  # fmt: skip
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        [line] = [line for line in result.stdout.splitlines() if line.startswith("PROBE ")]
        made = json.loads(line.removeprefix("PROBE "))
        assert made["labels"]["org.openenv.cleanup-probe"] == run

        left_containers = engine.containers.list(all=True, filters={"label": probe})
        left_images = engine.images.list(filters={"label": probe})
        assert [c.id for c in left_containers] == [], "the container of the session's image was left"
        assert [i.id for i in left_images] == [], "the image the session built was left"
        assert "org.openenv.test-session" in made["labels"], "the session gave its image no label of its own"
        assert engine.images.list(filters={"label": control}) != [], "an image the session did not build was removed"
    finally:
        remove_labelled(probe)  # only what this test made, had the session left it
        remove_labelled(control)
        engine.close()
