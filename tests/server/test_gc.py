"""The garbage collector's policy while a server runs (`ServerConfig.gc_full_interval_s`)."""

from __future__ import annotations

import gc

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from openenv_sdk import EnvClient, Environment, ServerConfig, create_app, tool
from openenv_sdk.server._gc import FULL_COLLECTION_THRESHOLD, full_collections
from openenv_sdk.testing import serve_app
from tests.fixtures.servers import wait_until


class NoteEnvironment(Environment):
    """Keeps one note."""

    note = ""

    @tool
    def write(self, text: str) -> str:
        """Replace the note."""
        self.note = text
        return self.note


@pytest.fixture
def thresholds() -> tuple[int, int, int]:
    before = gc.get_threshold()
    yield before
    gc.set_threshold(*before)


def test_a_running_server_collects_on_a_timer_and_rarely_on_allocation(thresholds: tuple[int, int, int]) -> None:
    with serve_app(create_app(NoteEnvironment, config=ServerConfig(gc_full_interval_s=0.2))) as url:
        assert gc.get_threshold() == (thresholds[0], thresholds[1], FULL_COLLECTION_THRESHOLD)
        with EnvClient(url, env_cls=NoteEnvironment) as env:  # and it serves as before
            assert env.reset().done is False
        start = full_collections()
        # the timer runs one full collection each 0.2 s in which none ran
        assert wait_until(lambda: full_collections() >= start + 3, timeout_s=10)
    assert gc.get_threshold() == thresholds  # put back when the server stops
    after = full_collections()
    wait_until(lambda: False, timeout_s=0.6)
    assert full_collections() == after  # and the timer stopped with it


def test_none_leaves_the_collector_alone(thresholds: tuple[int, int, int]) -> None:
    gc.set_threshold(900, 11, 12)
    with serve_app(create_app(NoteEnvironment, config=ServerConfig(gc_full_interval_s=None))) as url:
        with EnvClient(url, env_cls=NoteEnvironment) as env:
            env.reset()
        assert gc.get_threshold() == (900, 11, 12)
    assert gc.get_threshold() == (900, 11, 12)


def test_the_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="gc_full_interval_s"):
        ServerConfig(gc_full_interval_s=0)


def test_collections_and_their_pauses_are_in_the_metrics() -> None:
    def scrape(url: str) -> dict[tuple[str, str], float]:
        text = httpx.get(f"{url}/metrics").text
        return {
            (sample.name, sample.labels.get("generation", "")): sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name.startswith("openenv_gc_")
        }

    with serve_app(create_app(NoteEnvironment, config=ServerConfig(gc_full_interval_s=None))) as url:
        before = scrape(url)
        gc.collect()
        gc.collect()
        after = scrape(url)
    assert after[("openenv_gc_collections_total", "2")] >= before[("openenv_gc_collections_total", "2")] + 2
    assert after[("openenv_gc_pause_seconds_total", "2")] > before[("openenv_gc_pause_seconds_total", "2")]
    assert 0 < after[("openenv_gc_longest_pause_seconds", "2")] <= after[("openenv_gc_pause_seconds_total", "2")]
