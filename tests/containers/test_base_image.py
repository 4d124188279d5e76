"""Offline builds need no variables: where python:3.11-slim can be neither found nor pulled (this
machine reaches no registry), `build_image` says so and builds on the local base image, which it
makes with debootstrap when missing. Against a real engine."""

from __future__ import annotations

import io
import re
import uuid
from collections.abc import Iterator

import pytest
from rich.console import Console

from openenv_sdk.build import build_image
from openenv_sdk.containers.base_image import (
    BASE_PACKAGES,
    BASE_VERSION,
    LABEL_BASE_VERSION,
    LOCAL_BASE_IMAGE,
    build_local_base,
    has_image,
    try_pull,
)
from openenv_sdk.containers.dockerfile import DEFAULT_BASE_IMAGE

from .conftest import ECHO_DIR, REPO, requires_engine


def test_the_setup_script_makes_the_same_base() -> None:
    script = (REPO / "scripts" / "setup_container_engine.sh").read_text()
    assert re.search(r"^BASE_VERSION=(\S+)$", script, re.M).group(1) == BASE_VERSION  # type: ignore[union-attr]
    assert re.search(r"^BASE_PACKAGES=(\S+)$", script, re.M).group(1) == ",".join(BASE_PACKAGES)  # type: ignore[union-attr]
    assert f'"${{OPENENV_BASE_IMAGE:-{LOCAL_BASE_IMAGE}}}"' in script


@pytest.fixture
def remove_after(engine) -> Iterator[list[str]]:
    tags: list[str] = []
    yield tags
    for tag in tags:
        if has_image(engine, tag):
            engine.images.remove(tag, force=True)


@requires_engine
def test_an_offline_build_uses_the_local_base_and_says_so(engine, monkeypatch: pytest.MonkeyPatch,
                                                         remove_after: list[str]) -> None:
    monkeypatch.delenv("OPENENV_BASE_IMAGE", raising=False)
    if has_image(engine, DEFAULT_BASE_IMAGE) or try_pull(engine, DEFAULT_BASE_IMAGE) is None:
        pytest.fail(f"this test needs an engine that cannot pull {DEFAULT_BASE_IMAGE} (as CI's)")
    tag = f"openenv-test-offline-{uuid.uuid4().hex[:8]}:latest"
    remove_after.append(tag)
    log = io.StringIO()
    built = build_image(ECHO_DIR, tag=tag, engine=engine, console=Console(file=log, width=400), timeout_s=600)
    assert built == tag
    text = " ".join(log.getvalue().split())
    assert f"{DEFAULT_BASE_IMAGE} cannot be pulled (" in text
    assert f"building on the local base image {LOCAL_BASE_IMAGE}" in text
    assert engine.images.get(tag).labels[LABEL_BASE_VERSION] == BASE_VERSION  # inherited from the local base


@requires_engine
@pytest.mark.timeout(900)
def test_the_local_base_is_made_with_debootstrap(engine, remove_after: list[str]) -> None:
    tag = f"localhost/openenv-test-base-{uuid.uuid4().hex[:8]}:bookworm"
    remove_after.append(tag)
    assert build_local_base(engine, tag=tag) == tag
    output = engine.containers.run(tag, ["python3", "-c", "import sys, venv; print(sys.version_info[:2])"], remove=True)
    assert output.decode().strip() == "(3, 11)"
    assert engine.images.get(tag).labels[LABEL_BASE_VERSION] == BASE_VERSION
