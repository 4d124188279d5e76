"""Mixtures and curricula: the sampler's pass-rate rules, each batch's mix against the weights, and
the rollout worker on a Wordle + Guess mixture of real servers (benchmarks/bench_mixture.py in
its smallest setting), printing the zero-variance groups of uniform and curriculum sampling."""

from __future__ import annotations

import importlib.util
import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest
from openenv_trainers.mixture import Curriculum, EnvMixture, MixtureSource, TaskSampler, task_key
from openenv_trainers.sources import EnvSource
from openenv_trainers.tasks import task_row
from openenv_trainers.worker import EnvRolloutWorker

from openenv_sdk.evaluation import PassRateProfile, TaskPassRate

from .conftest import REPO, WORDLE_DIR, echo_rubric

BENCH = REPO / "benchmarks" / "bench_mixture.py"
NOWHERE = "http://127.0.0.1:9"  # never contacted: these tests only draw tasks


def _rows(n: int, **extra: Any) -> list[dict[str, Any]]:
    return [task_row([{"role": "user", "content": f"task {i}"}], task_id=i, **extra) for i in range(n)]


def test_a_rows_key_is_its_reset_arguments_whether_columns_or_carried_by_the_prompt() -> None:
    row = task_row([{"role": "user", "content": "x"}], task_id=3)
    assert task_key(row) == '{"task_id":3}'
    assert task_key({"prompt": row["prompt"]}) == '{"task_id":3}'  # a rollout_func sees only the prompt
    assert task_key({"prompt": [{"role": "user", "content": "x"}], "seed": 7}) == '{"seed":7}'


def test_the_sampler_skips_tasks_at_pass_rate_0_or_1_and_prefers_the_band() -> None:
    rows = _rows(4)
    sampler = TaskSampler(rows, curriculum=Curriculum(revisit_probability=0.0, out_of_band_weight=0.25), seed=1)
    keys = sampler.keys
    assert [sampler.kind(k) for k in keys] == ["unknown"] * 4
    sampler.rates.update(keys[0], attempts=4, passed=0)  # never passed
    sampler.rates.update(keys[1], attempts=4, passed=4)  # always
    sampler.rates.update(keys[2], attempts=4, passed=2)  # 0.5: in the band
    sampler.rates.update(keys[3], attempts=4, passed=3)  # 0.75: in the band
    assert [sampler.kind(k) for k in keys] == ["skipped", "skipped", "in_band", "in_band"]
    draws = [sampler.draw() for _ in range(400)]
    assert set(draws) == {2, 3}
    sampler.rates.update(keys[3], attempts=4, passed=4)  # decayed: 1.5 + 4 of 2 + 4 = 0.917, out of the band
    assert sampler.kind(keys[3]) == "out_of_band" and sampler.rates.rate(keys[3]) == pytest.approx(5.5 / 6)
    draws = [sampler.draw() for _ in range(2000)]
    assert 0.15 < draws.count(3) / len(draws) < 0.25  # weight 0.25 against 1.0: a fifth
    assert sampler.counts() == {"unknown": 0, "skipped": 2, "in_band": 1, "out_of_band": 1}

    # Decayed evidence never reaches 0: one pass long ago, none since, is 0 within skip_margin.
    for margin, kind in ((0.05, "skipped"), (0.0, "out_of_band")):
        sampler = TaskSampler(rows[:1], curriculum=Curriculum(skip_margin=margin))
        sampler.rates.prior(sampler.keys[0], attempts=8, passed=1)  # a profile's 1 of 8
        sampler.rates.update(sampler.keys[0], attempts=4, passed=0)
        sampler.rates.update(sampler.keys[0], attempts=4, passed=0)
        assert sampler.rates.rate(sampler.keys[0]) == pytest.approx(0.25 / 8)
        assert sampler.kind(sampler.keys[0]) == kind

    # Every task skipped: uniform, counted; and a skipped task is revisited now and then.
    sampler = TaskSampler(rows[:2], curriculum=Curriculum(revisit_probability=0.1), seed=2)
    for key in sampler.keys:
        sampler.rates.update(key, attempts=8, passed=8)
    assert {sampler.draw() for _ in range(50)} == {0, 1} and sampler.fallbacks > 0
    # No curriculum: in order, cycling, as a plain worker takes its dataset.
    plain = TaskSampler(rows)
    assert [plain.draw() for _ in range(6)] == [0, 1, 2, 3, 0, 1]


def test_bad_settings_are_refused_with_what_to_set() -> None:
    with pytest.raises(ValueError, match=r"band must be \(low, high\) with 0 <= low <= high <= 1"):
        Curriculum(band=(0.8, 0.2))
    with pytest.raises(ValueError, match=r"decay must be in \(0, 1\]"):
        Curriculum(decay=0)
    with pytest.raises(ValueError, match=r"skip_margin must be in \[0, 0.5\)"):
        Curriculum(skip_margin=0.5)
    with pytest.raises(ValueError, match="weight must be a positive number"):
        MixtureSource(name="a", sources=EnvSource(NOWHERE), tasks=_rows(1), weight=0)
    with pytest.raises(ValueError, match="without '/'"):
        MixtureSource(name="a/b", sources=EnvSource(NOWHERE), tasks=_rows(1))
    one = MixtureSource(name="a", sources=EnvSource(NOWHERE), tasks=_rows(1), rubric=echo_rubric())
    with pytest.raises(ValueError, match="names must be unique"):
        EnvMixture([one, one])
    with pytest.raises(ValueError, match="'b' has no tasks"):
        EnvMixture([one, MixtureSource(name="b", sources=EnvSource(NOWHERE), tasks=[], rubric=echo_rubric())])
    with pytest.raises(ValueError, match="not an environment folder: pass the grader"):
        EnvMixture([MixtureSource(name="b", sources=EnvSource(NOWHERE), tasks=_rows(1))])
    mixture = EnvMixture([one])
    with pytest.raises(ValueError, match="leave tasks= and rubric= out"):
        EnvRolloutWorker(sources=mixture, backend=object(), tokenizer=None, tasks=_rows(1))
    with pytest.raises(ValueError, match="needs tasks="):
        EnvRolloutWorker(sources=EnvSource(NOWHERE), backend=object(), tokenizer=None, rubric=echo_rubric())


def test_a_profile_seeds_the_pass_rates_matched_by_reset_arguments(tmp_path: Path) -> None:
    entries = [
        TaskPassRate(task_id=str(i), reset_kwargs={"task_id": i}, graded=10, passed=p, pass_rate=p / 10)
        for i, p in enumerate([0, 10, 5, 1])
    ]
    path = PassRateProfile(env="wordle", model="m", pass_threshold=1.0, tasks=entries).write(tmp_path / "profile.json")
    source = MixtureSource(name="wordle", sources=EnvSource(env_dir=WORDLE_DIR), tasks=_rows(5), profile=path)
    sampler = EnvMixture([source], curriculum=Curriculum()).sampler("wordle")
    assert [sampler.kind(k) for k in sampler.keys] == ["skipped", "skipped", "in_band", "out_of_band", "unknown"]
    with pytest.raises(ValueError, match=r"profile counted passes at reward >= 1, the source at >= 0.5: set "):
        EnvMixture([MixtureSource(name="w", sources=EnvSource(env_dir=WORDLE_DIR), tasks=_rows(5), profile=path,
                                  pass_threshold=0.5)])  # fmt: skip
    (tmp_path / "bad.json").write_text(json.dumps({"tasks": []}))
    with pytest.raises(ValueError, match="not a pass-rate profile"):
        EnvMixture(
            [MixtureSource(name="w", sources=EnvSource(env_dir=WORDLE_DIR), tasks=_rows(1), profile=tmp_path / "bad.json")]
        )


@pytest.mark.parametrize("weights", [(0.7, 0.3), (0.5, 0.3, 0.2), (0.9, 0.1), (1 / 3, 1 / 3, 1 / 3)])
def test_each_batch_of_delivered_groups_is_within_5_percent_of_the_weights(weights: tuple[float, ...]) -> None:
    """1,000 batches of 32 groups, 8 running at once, finishing in random order, and each source's
    groups dropped at its own rate (zero variance, failures): the groups the trainer gets, batch
    by batch, keep every source within 5 % of its weight."""
    names = [f"env{i}" for i in range(len(weights))]
    mixture = EnvMixture(
        [
            MixtureSource(name=n, sources=EnvSource(NOWHERE), tasks=_rows(10), weight=w, rubric=echo_rubric())
            for n, w in zip(names, weights, strict=True)
        ],
        curriculum=Curriculum(),
    )
    drop = {n: 0.1 + 0.4 * i / max(len(names) - 1, 1) for i, n in enumerate(names)}  # 10 % .. 50 %
    rng = random.Random(0)
    running: list[Any] = []
    waiting: list[Any] = []
    delivered: list[str] = []
    batch, batches = 32, 1000
    while len(delivered) < batch * batches:
        while len(running) < 8:
            running.append(mixture.draw())
        draw = running.pop(rng.randrange(len(running)))  # groups end in any order
        trained = rng.random() >= drop[draw.source]
        rewards = [1.0, 0.0, 1.0, 0.0] if trained else [1.0] * 4
        mixture.record(draw, rewards, trained=trained, zero_variance=not trained)
        if trained:
            waiting.append(draw)
        for held in list(waiting):  # what EnvMixture.turn does, polling
            if mixture.try_deliver(held):
                waiting.remove(held)
                delivered.append(held.source)
    errors = [
        max(abs(delivered[b * batch : (b + 1) * batch].count(n) / batch - w) for n, w in zip(names, weights, strict=True))
        for b in range(batches)
    ]
    print(f"weights {weights}: per-batch mix error max {max(errors):.1%}, mean {sum(errors) / len(errors):.1%}")
    assert max(errors) <= 0.05
    metrics = mixture.metrics()
    assert metrics[f"worker/source/{names[0]}/groups_delivered"] == delivered.count(names[0])
    assert metrics[f"worker/source/{names[0]}/holds_expired"] == 0
    assert metrics[f"worker/source/{names[-1]}/groups_zero_variance"] > 0


def _load_bench() -> Any:
    sys.path.insert(0, str(BENCH.parent))  # its sibling modules, as when it runs as a script
    spec = importlib.util.spec_from_file_location("bench_mixture", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.timeout(240)
def test_the_worker_on_a_wordle_and_guess_mixture_halves_zero_variance_groups(capsys: pytest.CaptureFixture[str]) -> None:
    """The benchmark in its smallest setting: real servers, the worker's real episode loop, the
    real graders; `openenv eval --profile` through the CLI. Uniform and curriculum side by side."""
    bench = _load_bench()
    report = bench.run(tasks=16, groups=64)
    with capsys.disabled():
        print("\n" + bench.table(report))
    uniform, online, profiled = report["results"]
    for r in report["results"]:
        assert r["groups"] >= 64 and r["failures"] == 0
        m = r["per_source"]
        for env in ("wordle", "guess"):
            assert m[f"worker/source/{env}/groups"] > 0
            assert f"worker/source/{env}/reward_mean" in m and f"worker/source/{env}/pass_rate" in m
            assert 0 < m[f"worker/source/{env}/share"] < 1
        assert abs(m["worker/source/wordle/share"] - 0.7) <= 0.05  # of the groups the trainer got
        if r["batches"]["count"]:
            assert r["batches"]["max_error"] <= 0.05
    assert uniform["zero_variance_fraction"] > 0.5  # most tasks are always or never solved
    assert profiled["reduction"] >= 0.5, bench.table(report)
    assert online["zero_variance_fraction"] < uniform["zero_variance_fraction"]
    assert "worker/source/wordle/tasks_skipped" in profiled["per_source"]
    assert profiled["per_source"]["worker/source/wordle/tasks_skipped"] > 0


@pytest.mark.timeout(120)
def test_the_warm_up_of_the_benchmarks_model_is_the_oracles_episodes_prompted_with_the_task(tmp_path: Path) -> None:
    """benchmarks/mixture_model.py: each oracle (Wordle's own, Guess's from the seed) wins its tasks
    through `openenv collect` (real servers), and each SFT example is that episode with the prompt
    the worker's rows carry (the task named), labelled on the policy's own tokens only."""
    from openenv_trainers.tiny_model import build_tiny_tokenizer

    _load_bench()  # puts benchmarks/ on the path
    import mixture_model

    tokenizer = build_tiny_tokenizer()
    words = (WORDLE_DIR / "answers.txt").read_text().split()
    for env in ("wordle", "guess"):
        records = mixture_model.collect(env, 3, tmp_path)
        assert sorted(mixture_model.task_index(r.task_id) for r in records) == [0, 1, 2]
        assert all(r.error is None and r.reward_components["solved"] > 0 for r in records), [
            (r.task_id, r.reward, r.error) for r in records
        ]
        examples = mixture_model.examples(tokenizer, env, records)
        assert len(examples) == 3
        for r, (ids, labels) in zip(records, examples, strict=True):
            task = mixture_model.task_index(r.task_id)
            text = tokenizer.decode(ids)
            assert (f"[wordle task {task}]" if env == "wordle" else f"[guess seed {task}]") in text
            assert "guesses_left" not in text and "Guess the 5-letter word" not in text  # not the reset observation
            sampled = tokenizer.decode([t for t, label in zip(ids, labels, strict=True) if label != -100])
            assert "<tool_call>" in sampled and "task" not in sampled and "<tool_response>" not in sampled
            if env == "wordle":
                assert f'"word": "{words[task]}"' in sampled


def test_a_source_whose_groups_are_all_dropped_starves_neither_generation_nor_the_trainer() -> None:
    """Every group of `hard` has zero variance (every task beyond the policy): it is admitted at its
    weight, not more (its dropped groups are no longer made up once it is starved), and `easy`'s
    groups go to the trainer at once instead of waiting for `hard`'s turn."""
    mixture = EnvMixture(
        [
            MixtureSource(name="easy", sources=EnvSource(NOWHERE), tasks=_rows(10), weight=0.5, rubric=echo_rubric()),
            MixtureSource(name="hard", sources=EnvSource(NOWHERE), tasks=_rows(10), weight=0.5, rubric=echo_rubric()),
        ]
    )
    admitted = []
    held = 0
    for _ in range(400):
        draw = mixture.draw()
        admitted.append(draw.source)
        trained = draw.source == "easy"
        mixture.record(draw, [1.0, 0.0] if trained else [0.0, 0.0], trained=trained, zero_variance=not trained)
        if trained and not mixture.try_deliver(draw):
            held += 1
            assert mixture.try_deliver(draw, force=True)
    assert 0.45 <= admitted.count("easy") / len(admitted) <= 0.55
    assert held <= 32  # only until `hard` counts as starved (its last 32 groups dropped)
    metrics = mixture.metrics()
    assert metrics["worker/source/hard/starved"] == 1.0 and metrics["worker/source/easy/starved"] == 0.0
    assert metrics["worker/source/easy/share"] == 1.0
