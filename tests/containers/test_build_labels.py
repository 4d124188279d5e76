"""$OPENENV_BUILD_LABELS labels every image built (generated Dockerfile or the folder's own), which
is how the test session finds, and removes at its end, exactly the images it built."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from openenv_sdk.build import BUILD_LABELS_ENV, build_image, build_labels_from_env
from openenv_sdk.containers.errors import BuildError

from .conftest import TEST_BASE_IMAGE, make_env_dir, requires_engine

TEST_SESSION_LABEL = "org.openenv.test-session"  # tests/conftest.py


def test_the_variable_is_parsed_and_checked() -> None:
    assert build_labels_from_env({BUILD_LABELS_ENV: " a=1, b.c=x=y ,,"}) == {"a": "1", "b.c": "x=y"}
    assert build_labels_from_env({}) == {}
    with pytest.raises(ValueError, match=r"^\$OPENENV_BUILD_LABELS: 'oops' is not KEY=VALUE"):
        build_labels_from_env({BUILD_LABELS_ENV: "a=1,oops"})


@requires_engine
def test_every_image_this_session_builds_carries_its_label(engine, tmp_path: Path) -> None:
    [session] = [item for item in os.environ[BUILD_LABELS_ENV].split(",") if item.startswith(TEST_SESSION_LABEL)]
    key, _, value = session.partition("=")
    folder = make_env_dir(tmp_path / "labelled", dockerfile=f"FROM {TEST_BASE_IMAGE}\nCMD [\"true\"]\n",
                          manifest="name: labelled\nport: 8000\n")
    tag = build_image(folder, tag="openenv-test-labelled:latest", engine=engine, output="quiet")
    labels = engine.images.get(tag).labels
    assert labels[key] == value
    assert labels["org.openenv.name"] == "labelled"  # the manifest's labels are kept beside it


@requires_engine
def test_a_malformed_variable_is_refused_before_building(engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BUILD_LABELS_ENV, "nolabel")
    folder = make_env_dir(tmp_path / "bad", dockerfile=f"FROM {TEST_BASE_IMAGE}\n", manifest="name: bad\nport: 8000\n")
    with pytest.raises(BuildError, match="is not KEY=VALUE"):
        build_image(folder, engine=engine, output="quiet")
