"""The sampler-trainer mismatch metric and TRL's IS correction in `ISAsyncGRPOTrainer`, on the CPU.

The trainer is TRL's `AsyncGRPOTrainer` (tiny model, SDPA tree attention), fed a micro-batch packed
by TRL's own collator; the sampler logprobs are the trainer's own plus a known perturbation on the
sampled tokens, and garbage on the others (which must not be read).
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from openenv_trainers.mismatch import importance_weights, logprob_diff

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from trl.experimental.async_grpo.async_grpo_trainer import DataCollatorForRollout
    from trl.experimental.async_grpo.packing import TreeRow


class NoTransfer:
    """The weight transfer is never used here (no training loop runs)."""

    def init_weight_transfer(self) -> None: ...
    def pause(self) -> None: ...
    def send_weights(self, iterator: Any) -> None: ...
    def resume(self) -> None: ...
    def destroy(self) -> None: ...


class NoWorker:
    """Satisfies TRL's `RolloutWorkerProtocol`; never started here."""

    def __init__(self) -> None:
        import queue

        self.rollout_buffer: Any = queue.Queue()
        self.metrics_queue: Any = queue.Queue()

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def update_model_version(self, model_version: int) -> None: ...
    def check_health(self, stale_after_s: float) -> None: ...


def _trainer(tiny_model_dir: Path, tokenizer: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **settings: Any) -> Any:
    import trl.experimental.async_grpo.async_grpo_trainer as agt
    from datasets import Dataset
    from openenv_trainers.async_grpo import ISAsyncGRPOConfig, ISAsyncGRPOTrainer
    from openenv_trainers.tree_attention import use_sdpa_tree_attention

    monkeypatch.setattr(agt, "get_peak_flops_per_device", lambda *a, **k: None)  # reads the CUDA device name
    config = ISAsyncGRPOConfig(
        output_dir=str(tmp_path),
        use_cpu=True,
        bf16=False,
        report_to=[],
        save_strategy="no",
        max_steps=1,
        per_device_train_batch_size=4,
        token_budget=4096,
        dtype="float32",
        **settings,
    )
    use_sdpa_tree_attention()
    trainer = ISAsyncGRPOTrainer(
        model=str(tiny_model_dir),
        args=config,
        train_dataset=Dataset.from_dict({"prompt": [[{"role": "user", "content": "x"}]]}),
        processing_class=tokenizer,
        rollout_worker=NoWorker(),
        weight_transfer=NoTransfer(),
    )
    use_sdpa_tree_attention()
    trainer.current_gradient_accumulation_steps = 1  # set by the training loop, which does not run here
    return trainer


def _reference_logprobs(model: Any, ids: list[int]) -> np.ndarray:
    """The model's logprob of each token given the ones before (index p: token p; p = 0 has none)."""
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, :-1].float()
    out = np.full(len(ids), math.nan, dtype=np.float64)
    out[1:] = logits.log_softmax(-1)[torch.arange(len(ids) - 1), torch.tensor(ids[1:])].numpy()
    return out


def _samples(model: Any, seed: int = 0) -> tuple[list[dict[str, Any]], list[np.ndarray], list[np.ndarray]]:
    """Two groups of two samples: shared prompts, a tool result (mask 0) between two sampled runs."""
    rng = np.random.default_rng(seed)
    samples, reference, perturbation = [], [], []
    for group in range(2):
        prompt = rng.integers(5, 200, 6).tolist()
        for k in range(2):
            turn1, tool, turn2 = (rng.integers(5, 200, n).tolist() for n in (4, 3, 5))
            ids = prompt + turn1 + tool + turn2
            mask = np.array([0] * 6 + [1] * 4 + [0] * 3 + [1] * 5)
            ref = _reference_logprobs(model, ids)
            delta = np.where(mask == 1, rng.choice([-0.2, 0.1, 0.05], len(ids)), 0.0)
            old = np.where(mask == 1, ref + delta, 50.0)  # garbage where nothing was sampled
            samples.append(
                {
                    "input_ids": np.array(ids),
                    "completion_mask": mask,
                    "old_log_probs": old.astype(np.float32),
                    "advantage": (1.0 if k == 0 else -1.0) * (group + 1),
                    "group_id": group,
                    "metrics": {},
                }
            )
            reference.append(ref)
            perturbation.append(delta)
    return samples, reference, perturbation


def _inputs(trainer: Any, samples: list[dict[str, Any]]) -> dict[str, Any]:
    row = TreeRow()
    for sample in samples:
        row.add(sample)
    collator = DataCollatorForRollout(trainer.processing_class.pad_token_id, 1, metrics=trainer._metrics["train"])
    return collator.torch_call([[row]])


def _logged(trainer: Any) -> dict[str, float]:
    from trl.experimental.async_grpo.async_grpo_trainer import _reduce_metric

    return {k: _reduce_metric(k, v) for k, v in trainer._metrics["train"].items() if v}


def test_the_mismatch_metric_is_the_known_perturbation_on_the_sampled_tokens_only(
    tiny_model_dir: Path, tokenizer: Any, model: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    trainer = _trainer(tiny_model_dir, tokenizer, monkeypatch, tmp_path, vllm_importance_sampling_correction=False)
    samples, _, perturbation = _samples(model)
    trainer._metrics["train"].clear()
    trainer.compute_loss(trainer.model, _inputs(trainer, samples))
    logged = _logged(trainer)
    sampled = np.concatenate([np.abs(d[s["completion_mask"] == 1]) for d, s in zip(perturbation, samples, strict=True)])
    assert logged["logprob_diff/mean"] == pytest.approx(sampled.mean(), abs=1e-4)  # 50.0 garbage would show
    assert logged["logprob_diff/max"] == pytest.approx(0.2, abs=1e-4)
    assert "sampling/importance_sampling_ratio/mean" not in logged


def test_with_the_correction_the_loss_is_trls_is_weighted_loss_and_differs(
    tiny_model_dir: Path, tokenizer: Any, model: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    samples, reference, perturbation = _samples(model)
    trained = [s["completion_mask"] == 1 for s in samples]
    n_tokens = sum(int(m.sum()) for m in trained)
    losses = {}
    for mode in ("off", "sequence_mask", "token_truncate"):
        settings: dict[str, Any] = {"vllm_importance_sampling_correction": mode != "off"}
        if mode != "off":
            settings["vllm_importance_sampling_mode"] = mode
            settings["vllm_importance_sampling_clip_max"] = 1.2 if mode == "sequence_mask" else 1.1
        trainer = _trainer(tiny_model_dir, tokenizer, monkeypatch, tmp_path / mode, **settings)
        trainer._metrics["train"].clear()
        loss = trainer.compute_loss(trainer.model, _inputs(trainer, samples))
        loss.backward()
        losses[mode] = float(loss.detach())
        # the expected loss, by hand: per token -A * w(trainer - sampler) (TRL's GRPOTrainer with its IS ratio),
        # or TRL's async PPO term against the sampler when off; over the trained tokens
        expected = 0.0
        for sample, mask, delta in zip(samples, trained, perturbation, strict=True):
            diff = -delta[mask]  # trainer - sampler = -perturbation
            a = sample["advantage"]
            if mode == "off":
                ratio = np.exp(diff)
                expected += float(np.sum(-np.minimum(ratio * a, np.clip(ratio, 0.8, 1.2) * a)))
                continue
            if mode == "sequence_mask":
                w = np.exp(diff.sum())
                w = np.full(mask.sum(), 0.0 if w > 1.2 else w)
            else:
                w = np.minimum(np.exp(diff), 1.1)
            expected += float(np.sum(-a * w))
        assert losses[mode] == pytest.approx(expected / n_tokens, rel=1e-3, abs=1e-5), mode
        grads = [p.grad.norm() for p in trainer.model.parameters() if p.grad is not None]
        assert grads and all(torch.isfinite(g) for g in grads)
        if mode != "off":
            logged = _logged(trainer)
            assert 0 <= logged["sampling/importance_sampling_ratio/min"] <= logged["sampling/importance_sampling_ratio/max"]
            if mode == "sequence_mask":  # sequence ratios 1.49, 0.74, 1.57, 0.90 against a cap of 1.2
                assert logged["sampling/is_masked_frac"] == 0.5
    assert len({round(v, 6) for v in losses.values()}) == 3  # the correction changes the loss


def test_the_corrected_gradient_is_the_is_weighted_policy_gradient(
    tiny_model_dir: Path, tokenizer: Any, model: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """grad = -sum_t A w_t grad log p_t / n, with w from the sampler's logprobs (token_truncate, cap 1.1)."""
    samples, reference, perturbation = _samples(model)
    settings = {"vllm_importance_sampling_mode": "token_truncate", "vllm_importance_sampling_clip_max": 1.1}
    trainer = _trainer(tiny_model_dir, tokenizer, monkeypatch, tmp_path, **settings)
    trainer.compute_loss(trainer.model, _inputs(trainer, samples)).backward()
    ours = {name: p.grad.clone() for name, p in trainer.model.named_parameters() if p.grad is not None}

    from transformers import AutoModelForCausalLM

    plain = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32, attn_implementation="eager")
    n_tokens = sum(int((s["completion_mask"] == 1).sum()) for s in samples)
    total = torch.zeros(())
    for sample, delta in zip(samples, perturbation, strict=True):
        ids = torch.tensor(sample["input_ids"].tolist())
        logp = plain(ids[None]).logits[0, :-1].float().log_softmax(-1)[torch.arange(len(ids) - 1), ids[1:]]
        positions = torch.tensor(np.flatnonzero(sample["completion_mask"] == 1))
        w = torch.clamp(torch.exp(torch.tensor(-delta[positions.numpy()], dtype=torch.float32)), max=1.1)
        total = total + (-sample["advantage"] * w * logp[positions - 1]).sum()
    (total / n_tokens).backward()
    theirs = {name: p.grad for name, p in plain.named_parameters() if p.grad is not None}
    assert ours.keys() == theirs.keys()
    for name in ours:
        torch.testing.assert_close(ours[name], theirs[name], rtol=1e-3, atol=1e-6, msg=name)


def test_importance_weights_in_each_of_trls_modes() -> None:
    trainer = torch.tensor([-1.0, -2.0, -0.5, -0.1, float("nan")])
    sampler = torch.tensor([-1.5, -1.0, -0.5, -1.1, -3.0])
    segment = torch.tensor([0, 0, 1, 1, 1])
    token = np.exp([0.5, -1.0, 0.0, 1.0, 0.0])  # NaN: no difference
    sequence = np.exp([-0.5, -0.5, 1.0, 1.0, 1.0])

    def weights(mode: str, low: float | None, high: float | None) -> list[float]:
        return importance_weights(trainer, sampler, segment, mode=mode, clip_min=low, clip_max=high).tolist()

    assert weights("token_truncate", 0.5, 2.0) == pytest.approx(np.clip(token, 0.5, 2.0).tolist())
    assert weights("token_mask", 0.5, 2.0) == pytest.approx(np.where((token < 0.5) | (token > 2.0), 0, token).tolist())
    assert weights("sequence_truncate", None, 2.0) == pytest.approx(np.minimum(sequence, 2.0).tolist())
    assert weights("sequence_mask", None, 2.0) == pytest.approx(np.where(sequence > 2.0, 0, sequence).tolist())
    with pytest.raises(ValueError, match="vllm_importance_sampling_mode"):
        importance_weights(trainer, sampler, segment, mode="sequence", clip_min=None, clip_max=None)
    total, count, largest = logprob_diff(trainer, sampler)
    assert (total, count, largest) == pytest.approx((0.5 + 1.0 + 0.0 + 1.0, 4, 1.0))


def test_an_unknown_mode_is_refused_by_the_config(tmp_path: Path) -> None:
    from openenv_trainers.async_grpo import ISAsyncGRPOConfig

    with pytest.raises(ValueError, match="vllm_importance_sampling_mode must be one of"):
        ISAsyncGRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, vllm_importance_sampling_mode="tokens")
