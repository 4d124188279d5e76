"""Build failures against a real engine: the error carries the log's tail and a hint."""

from __future__ import annotations

from pathlib import Path

import pytest

from openenv_sdk.build import build_image
from openenv_sdk.containers.errors import BuildError

from .conftest import ECHO_DIR, requires_engine

pytestmark = requires_engine


def test_a_failing_step_reports_the_tail_of_its_log(engine, tmp_path: Path) -> None:
    (tmp_path / "openenv.yaml").write_text("name: failing\nport: 8000\n")
    (tmp_path / "Dockerfile").write_text(
        "FROM localhost/openenv-base:bookworm\nRUN echo 'output-before-failure' && exit 3\n"
    )
    with pytest.raises(BuildError) as info:
        build_image(tmp_path, engine=engine, output="quiet")
    assert info.value.tag == "openenv-failing:latest"
    assert "output-before-failure" in str(info.value)
    assert any("output-before-failure" in line for line in info.value.log_tail)


def test_a_missing_base_image_gets_a_hint(engine) -> None:
    with pytest.raises(BuildError, match="OPENENV_BASE_IMAGE"):
        build_image(
            ECHO_DIR,
            tag="openenv-test-nobase:latest",
            base_image="localhost/openenv-no-such-base:1",
            engine=engine,
            output="quiet",
            timeout_s=120,
        )
