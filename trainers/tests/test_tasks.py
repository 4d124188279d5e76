"""Dataset rows that carry a task for both adapters, through an Arrow dataset and back."""

from __future__ import annotations

import pytest
from openenv_trainers.echo_task import echo_messages, echo_rows
from openenv_trainers.tasks import TASK_KEY, split_task, task_prompt, task_row


def test_a_task_survives_an_arrow_dataset_in_the_prompt_and_in_the_columns() -> None:
    from datasets import Dataset

    rows = [task_row(echo_messages("a b"), text="a b", task_id=3), task_row(echo_messages("c"), text="c", task_id=4)]
    back = list(Dataset.from_list(rows))
    assert [(r["text"], r["task_id"]) for r in back] == [("a b", 3), ("c", 4)]
    messages, task = split_task(back[0]["prompt"])
    assert task == {"task_id": 3, "text": "a b"}
    assert messages == echo_messages("a b")
    assert all(TASK_KEY not in m for m in messages)


def test_a_prompt_without_a_task() -> None:
    assert split_task(echo_messages("x")) == (echo_messages("x"), None)


def test_bad_tasks_are_refused() -> None:
    with pytest.raises(ValueError, match="JSON-serialisable"):
        task_prompt(echo_messages("x"), thing=object())
    with pytest.raises(ValueError, match="cannot be named 'prompt'"):
        task_row(echo_messages("x"), prompt="no")
    with pytest.raises(ValueError, match="at least one message"):
        task_prompt([], text="x")


def test_echo_rows_are_seeded() -> None:
    assert echo_rows(5, seed=1) == echo_rows(5, seed=1)
    assert echo_rows(5, seed=1) != echo_rows(5, seed=2)
