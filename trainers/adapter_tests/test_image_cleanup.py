"""The adapters suite removes the images it built and their containers at its end, and no others."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tests.image_cleanup import check_a_session_removes_what_it_made


@pytest.mark.skipif(
    os.environ.get("OPENENV_TEST_CONTAINERS") != "1", reason="needs a container engine (scripts/test.sh sets one up)"
)
@pytest.mark.timeout(900)
def test_a_session_removes_the_images_and_containers_it_made(tmp_path: Path) -> None:
    check_a_session_removes_what_it_made("adapter_tests.conftest", tmp_path)
