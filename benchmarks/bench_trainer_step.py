"""The async GRPO trainer's step against the bare forward+backward+optimizer step of the same tokens.

    .venv-trainers/bin/python benchmarks/bench_trainer_step.py                      # tiny shape, CPU
    python benchmarks/bench_trainer_step.py --model smollm2 --device cuda           # SmolLM2-135M's shape on a GPU
    python benchmarks/bench_trainer_step.py --model-dir /tmp/smollm2 --device cuda  # a save_pretrained folder
    python benchmarks/bench_trainer_step.py --model smollm2 --device cuda --gradient-checkpointing  # its cost

In one process, on one device, over the same packed tokens:

- **trainer**: TRL's `AsyncGRPOTrainer.train()` (`--trainer is`: the project's `ISAsyncGRPOTrainer`
  subclass, which scripts/gpu/async_grpo_guess.py now trains with) as the GPU run drives it:
  `use_sdpa_tree_attention()`, the token-budget planner and the prefix-trie packing, TRL's loss
  with its fused LM head, bf16 autocast over float32 weights, AdamW, gradient clipping, TRL's
  metrics and logging every step. Only the rollouts and the weight sync are left out: a stub
  worker hands out pre-made multi-turn samples (stamped with the current policy version, so none
  is dropped as stale) and the weight transfer does nothing. Each step is timed from one
  `on_step_end` to the next, the device synchronised.
- **bare**: the same model shape (same seed) fed the very rows the trainer's planner packs from
  the same samples, with the same dense boolean tree mask through
  `scaled_dot_product_attention` (masks built before timing, padded as the tree attention pads
  them, `--pad-multiple`), a plain next-token cross-entropy,
  `loss.backward()`, gradient clipping and `torch.optim.AdamW` (fused on CUDA) under the same
  bf16 autocast; no checkpointing.

The samples are synthetic but shaped like the guessing game's episodes: groups of
`--group-size` episodes that share a prompt (a system prompt common to all, then a task), then
`--turns` turns of sampled tokens and environment tokens, so the trie packing shares what a real
run shares. Weights are random unless `--model-dir` names a folder: a step's cost depends on
the shape, not on the values.

With `--accounting full|incremental`, a thread of the trainer's process does what the rollout
worker's accounting thread does in a real run while the trainer steps: it plays guessing-game
episodes through `TokenLedger` (SmolLM2-135M-Instruct's real tokenizer, from the test fixture,
with the tool template; `parse_assistant` on each sampled turn, then the tool result) at
`--accounting-turns-per-s` (130: the one-GPU run's 26 episodes/s of ~5 turns), whole
conversations re-tokenized each turn (`full`, as before issue 23) or only the new suffix
(`incremental`). It contends with the training loop for the GIL as the real worker does.

`--torch-profile` adds a `torch.profiler` table of two trainer steps and two bare steps (the top
operators by device time) to the JSON.

Prints forwarded tokens/s of each and their ratio; `--json` writes the figures (default under
benchmarks/results/gpu/ on a GPU).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import json
import math
import os
import platform
import queue
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO_ROOT / "trainers")]

SMOLLM2_135M = {
    "hidden_size": 576,
    "intermediate_size": 1536,
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "vocab_size": 49152,
    "max_position_embeddings": 8192,
    "rope_theta": 100000.0,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": True,
}
"""SmolLM2-135M(-Instruct)'s LlamaConfig (the shape the async GRPO run trains)."""

TINY = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 800,
    "max_position_embeddings": 8192,
    "tie_word_embeddings": True,
}


@dataclasses.dataclass(frozen=True)
class Shape:
    """What the synthetic episodes look like (token counts)."""

    group_size: int = 8
    system_tokens: int = 200
    task_tokens: int = 50
    turns: tuple[int, int] = (2, 6)
    sampled_tokens: tuple[int, int] = (15, 40)
    env_tokens: tuple[int, int] = (20, 35)


def synthetic_samples(count: int, vocab: int, shape: Shape, seed: int) -> list[dict[str, Any]]:
    """`count` rollout samples (TRL's `RolloutSample` fields) in groups that share their prompt."""
    import numpy as np

    rng = np.random.default_rng(seed)
    low = min(10, vocab // 2)
    system = rng.integers(low, vocab, shape.system_tokens).tolist()
    out: list[dict[str, Any]] = []
    group = 0
    while len(out) < count:
        prompt = system + rng.integers(low, vocab, shape.task_tokens).tolist()
        rewards = rng.random(shape.group_size)
        advantages = (rewards - rewards.mean()) / (rewards.std() + 1e-4)
        for i in range(shape.group_size):
            ids, mask = list(prompt), [0] * len(prompt)
            turns = int(rng.integers(shape.turns[0], shape.turns[1] + 1))
            for turn in range(turns):
                sampled = int(rng.integers(*shape.sampled_tokens))
                ids += rng.integers(low, vocab, sampled).tolist()
                mask += [1] * sampled
                if turn < turns - 1:
                    env = int(rng.integers(*shape.env_tokens))
                    ids += rng.integers(low, vocab, env).tolist()
                    mask += [0] * env
            logps = np.where(np.array(mask) == 1, -rng.random(len(ids)) * 2, math.nan).astype(np.float32)
            out.append({
                "input_ids": np.array(ids, dtype=np.int64),
                "completion_mask": np.array(mask, dtype=np.int64),
                "old_log_probs": logps,
                "advantage": float(advantages[i]),
                "group_id": group,
                "metrics": {"reward": float(rewards[i])},
            })
        group += 1
    return out[:count]


class _SampleQueue:
    """The stub worker's `rollout_buffer`: hands out the samples in order, cycling, each stamped with
    the live policy version (so the trainer drops none as stale)."""

    def __init__(self, samples: Sequence[dict[str, Any]], rollout_sample: type) -> None:
        self.samples = list(samples)
        self.rollout_sample = rollout_sample
        self.version = 0
        self.taken = 0

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        s = self.samples[self.taken % len(self.samples)]
        self.taken += 1
        return self.rollout_sample(prompt=[], completion=[], model_version=self.version, enqueued_at=time.time(), **s)

    def put_nowait(self, item: Any) -> None:
        raise NotImplementedError

    def qsize(self) -> int:
        return len(self.samples)


class StubWorker:
    """`RolloutWorkerProtocol` over pre-made samples (no generation, no environment)."""

    def __init__(self, samples: Sequence[dict[str, Any]]) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from trl.experimental.async_grpo.async_rollout_worker import RolloutSample
        self.rollout_buffer = _SampleQueue(samples, RolloutSample)
        self.metrics_queue: queue.Queue[dict[str, float]] = queue.Queue()

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def update_model_version(self, model_version: int) -> None:
        self.rollout_buffer.version = model_version

    def check_health(self, stale_after_s: float) -> None:
        pass


class NoTransfer:
    """`WeightTransferProtocol` that sends nothing (the weight sync is not what is measured)."""

    def init_weight_transfer(self) -> None:
        pass

    def pause(self) -> None:
        pass

    def send_weights(self, iterator: Iterator[tuple[str, Any]]) -> None:
        pass

    def resume(self) -> None:
        pass

    def destroy(self) -> None:
        pass


def planned_rows(samples: Sequence[dict[str, Any]], token_budget: int, count: int) -> list[dict[str, Any]]:
    """The first `count` packed rows TRL's token-budget planner makes of `samples` (one rank), as
    `TreeRow.pack()` gives them: the rows the trainer forwards, in its order."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from trl.experimental.async_grpo.async_grpo_trainer import TokenBudgetBatcher

    def cycle() -> Iterator[dict[str, Any]]:
        i = 0
        while True:
            yield samples[i % len(samples)]
            i += 1

    rows = []
    for micro_batch in TokenBudgetBatcher(cycle(), 1, token_budget, {"batch/dropped_oversize_total": []}):  # type: ignore[arg-type]
        rows.append(micro_batch[0].pack())
        if len(rows) == count:
            return rows
    raise AssertionError("unreachable: the sample stream is endless")


def build_model(args: argparse.Namespace, folder: Path, *, attn_implementation: str | None = None) -> Any:
    """The model of `--model`/`--model-dir`, random weights from `--seed` unless a folder is given."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    if args.model_dir:
        return AutoModelForCausalLM.from_pretrained(args.model_dir, dtype=torch.float32, attn_implementation=attn_implementation)
    torch.manual_seed(args.seed)
    config = LlamaConfig(**(SMOLLM2_135M if args.model == "smollm2" else TINY), bos_token_id=1, eos_token_id=2, pad_token_id=0)
    if attn_implementation:
        config._attn_implementation = attn_implementation
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    if folder is not None and not (folder / "config.json").exists():
        model.save_pretrained(folder)
    return model


def _tokenizer(vocab: int) -> Any:
    """A placeholder tokenizer: TRL's trainer reads only its pad and eos tokens (the samples are token ids)."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3}, unk_token="<unk>"))
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", bos_token="<s>", unk_token="<unk>")


class AccountingLoad:
    """A thread playing guessing-game episodes through `TokenLedger`, `turns_per_s` turns a second
    at most (as the rollout worker's accounting thread does in the trainer's process)."""

    def __init__(self, mode: str, turns_per_s: float) -> None:
        import gzip
        import threading

        from openenv_trainers.chat import use_tool_chat_template
        from tokenizers import Tokenizer
        from transformers import PreTrainedTokenizerFast

        fixture = REPO_ROOT / "trainers/tests/data/smollm2-135m-instruct-tokenizer.json.gz"
        backend = Tokenizer.from_str(gzip.decompress(fixture.read_bytes()).decode())
        tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|im_end|>")
        self.tokenizer = use_tool_chat_template(tokenizer)
        self.incremental = mode == "incremental"
        self.interval_s = 1.0 / turns_per_s
        self.turns = 0
        self.busy_s = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="openenv-accounting-load", daemon=True)

    def _run(self) -> None:
        from openenv_trainers.accounting import TokenLedger
        from openenv_trainers.chat import parse_assistant, tool_call_text
        from openenv_trainers.guess_task import guess_messages

        tool = {"type": "function", "function": {"name": "guess", "description": "Guess the number.", "parameters": {
            "type": "object", "properties": {"number": {"type": "integer", "description": "the guess"}}, "required": ["number"]}}}
        turns = [self.tokenizer(tool_call_text("guess", {"number": k}) + "<|im_end|>", add_special_tokens=False)["input_ids"] for k in range(1, 6)]
        next_at = time.perf_counter()
        while not self._stop.is_set():
            ledger = TokenLedger(self.tokenizer, guess_messages(), tools=[tool], incremental=self.incremental)
            for k, ids in enumerate(turns):
                now = time.perf_counter()
                if now < next_at:
                    self._stop.wait(next_at - now)
                next_at = max(next_at + self.interval_s, time.perf_counter() - 1.0)
                if self._stop.is_set():
                    return
                t0 = time.perf_counter()
                message = parse_assistant(self.tokenizer, ids, prefix=ledger.ids, tools=[tool])
                ledger.add_sampled(ids, [-0.5] * len(ids), message)
                if k < len(turns) - 1:
                    ledger.add_messages([{"role": "tool", "name": "guess", "content": "higher" if k % 2 else "lower"}])
                self.busy_s += time.perf_counter() - t0
                self.turns += 1

    def __enter__(self) -> AccountingLoad:
        self.started = time.perf_counter()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self.elapsed_s = time.perf_counter() - self.started


def _profile_table(prof: Any) -> str:
    key = "self_device_time_total"
    try:
        return str(prof.key_averages().table(sort_by=key, row_limit=25))
    except Exception:  # older torch names it cuda
        return str(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=25))


def _profiler(device: str) -> Any:
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    return profile(activities=activities)


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def bare_steps(args: argparse.Namespace, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """fwd+bwd+clip+AdamW over `rows`, `--rows-per-step` rows a step, with the dense tree mask."""
    import torch
    import torch.nn.functional as F
    from openenv_trainers.tree_attention import padded_length, padded_tree_mask
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    device = args.device
    current: dict[str, Any] = {}

    def dense_mask_sdpa(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, *, scaling: float | None = None, **kw: Any) -> tuple[Any, None]:
        key, value = key.to(query.dtype), value.to(query.dtype)
        if key.shape[1] != query.shape[1]:
            repeat = query.shape[1] // key.shape[1]
            key, value = key.repeat_interleave(repeat, dim=1), value.repeat_interleave(repeat, dim=1)
        n, padded = query.shape[2], current["mask"].shape[0]
        if padded > n:  # the same padding as the tree attention's (its module docstring says why)
            query, key, value = (F.pad(x, (0, 0, 0, padded - n)) for x in (query, key, value))
        out = F.scaled_dot_product_attention(query, key, value, attn_mask=current["mask"], scale=scaling)
        return out[:, :, :n].transpose(1, 2).contiguous(), None

    AttentionInterface.register("bench_dense_mask", dense_mask_sdpa)
    AttentionMaskInterface.register("bench_dense_mask", lambda **kwargs: None)
    model = build_model(args, None, attn_implementation="bench_dense_mask").to(device).train()  # type: ignore[arg-type]
    model.config.use_cache = False
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6, fused=device.startswith("cuda"))
    prepared = []
    for row in rows:
        prepared.append({
            "input_ids": row["input_ids"].to(device).unsqueeze(0),
            "position_ids": row["position_ids"].to(device).unsqueeze(0),
            "labels": row["shift_labels"].to(device),
            "mask": padded_tree_mask(
                len(row["input_ids"]), row["tree_kv_index"].to(device), row["tree_cu_seqlens_q"].to(device),
                row["tree_cu_seqlens_k"].to(device), padded=padded_length(len(row["input_ids"]), args.pad_multiple),
            ),
        })
    autocast = torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16, enabled=device.startswith("cuda"))
    times, tokens = [], []
    k = args.rows_per_step
    prof = None
    for step in range(args.warmup_steps + args.steps):
        if args.torch_profile and step == args.warmup_steps:
            prof = _profiler(device).__enter__()
        if prof is not None and step == args.warmup_steps + 2:
            prof.__exit__(None, None, None)
            current["profile"] = _profile_table(prof)
            prof = None
        batch = prepared[step * k : (step + 1) * k]
        _sync(device)
        t0 = time.perf_counter()
        n_trained = sum(int((b["labels"] != -100).sum()) for b in batch)
        for b in batch:
            current["mask"] = b["mask"]
            with autocast:
                logits = model(input_ids=b["input_ids"], position_ids=b["position_ids"]).logits[0]
            loss = F.cross_entropy(logits.float(), b["labels"], ignore_index=-100, reduction="sum") / n_trained
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        _sync(device)
        if step >= args.warmup_steps:
            times.append(time.perf_counter() - t0)
            tokens.append(sum(b["input_ids"].shape[1] for b in batch))
    if prof is not None:
        prof.__exit__(None, None, None)
        current["profile"] = _profile_table(prof)
    del model, optimizer, prepared
    out = _summary(times, tokens)
    if "profile" in current:
        out["torch_profile"] = current["profile"]
    return out


def trainer_steps(args: argparse.Namespace, samples: list[dict[str, Any]], work: Path) -> dict[str, Any]:
    """`AsyncGRPOTrainer.train()` for warm-up + measured steps; per-step times and forwarded tokens."""
    import torch
    from openenv_trainers import tree_attention
    from transformers import TrainerCallback

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import trl.experimental.async_grpo.async_grpo_trainer as agt
        from trl.experimental.async_grpo import AsyncGRPOConfig, AsyncGRPOTrainer

    device = args.device
    args_ = args
    cuda = device.startswith("cuda")
    model_dir = Path(args.model_dir) if args.model_dir else work / "model"
    if not args.model_dir:
        build_model(args, model_dir)
    if not cuda:  # TRL reads the GPU's peak FLOP/s for its MFU metric; a CPU has none
        agt.get_peak_flops_per_device = lambda *a, **k: None
    tree_attention.use_sdpa_tree_attention(pad_multiple=args.pad_multiple)
    ends: list[float] = []
    logs: list[dict[str, float]] = []
    profiled: dict[str, Any] = {}

    class Timer(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            _sync(device)
            ends.append(time.perf_counter())
            if args_.torch_profile and state.global_step == args_.warmup_steps:
                profiled["prof"] = _profiler(device).__enter__()
            elif "prof" in profiled and state.global_step == args_.warmup_steps + 2:
                prof = profiled.pop("prof")
                prof.__exit__(None, None, None)
                profiled["table"] = _profile_table(prof)

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            _sync(device)
            ends.append(time.perf_counter())

    config_cls, trainer_cls = AsyncGRPOConfig, AsyncGRPOTrainer
    if args.trainer == "is":  # the project's subclass that scripts/gpu/async_grpo_guess.py trains with
        from openenv_trainers.async_grpo import ISAsyncGRPOConfig, ISAsyncGRPOTrainer

        config_cls, trainer_cls = ISAsyncGRPOConfig, ISAsyncGRPOTrainer
    config = config_cls(
        output_dir=str(work / "trainer"), max_steps=args.warmup_steps + args.steps, learning_rate=1e-6,
        per_device_train_batch_size=8, gradient_accumulation_steps=args.rows_per_step, token_budget=args.token_budget,
        num_generations=args.shape.group_size, max_staleness=4, vllm_server_base_url="http://127.0.0.1:9",
        logging_steps=1, report_to=[], save_strategy="no", bf16=cuda, use_cpu=not cuda, dtype="float32",
        lr_scheduler_type="constant", gradient_checkpointing=args.gradient_checkpointing, disable_tqdm=True,
        seed=args.seed,
    )
    from datasets import Dataset

    trainer = trainer_cls(
        model=str(model_dir), args=config, train_dataset=Dataset.from_dict({"prompt": [[{"role": "user", "content": ""}]] * 8}),
        processing_class=_tokenizer(0), rollout_worker=StubWorker(samples), weight_transfer=NoTransfer(), callbacks=[Timer()],  # type: ignore[arg-type]
    )
    tree_attention.use_sdpa_tree_attention(pad_multiple=args.pad_multiple)
    original_log = trainer.log

    def log(entry: dict[str, float], start_time: float | None = None) -> None:
        original_log(entry, start_time)
        logs.append({k: v for k, v in entry.items() if isinstance(v, (int, float))})

    trainer.log = log  # type: ignore[method-assign,assignment]
    builds = tree_attention.mask_builds()
    load = AccountingLoad(args.accounting, args.accounting_turns_per_s) if args.accounting != "none" else None
    with load or contextlib.nullcontext():
        trainer.train()
    builds = tree_attention.mask_builds() - builds
    times = [b - a for a, b in zip(ends[:-1], ends[1:], strict=True)][args.warmup_steps :]
    step_logs = [entry for entry in logs if "batch/forwarded_tokens_per_step" in entry]
    tokens = [int(entry["batch/forwarded_tokens_per_step"]) for entry in step_logs][args.warmup_steps :]
    if len(tokens) != len(times):
        raise RuntimeError(f"{len(times)} timed steps but {len(tokens)} logged token counts")
    out = _summary(times, tokens)
    out["mask_builds_per_step"] = builds / (args.warmup_steps + args.steps)
    out["trl_fwd_bwd_s_median"] = statistics.median(e["perf/fwd_bwd_s"] for e in step_logs[args.warmup_steps :])
    out["trl_optimizer_s_median"] = statistics.median(e["perf/optimizer_s"] for e in step_logs[args.warmup_steps :])
    out["gpu_mem_peak_gb"] = torch.cuda.max_memory_allocated() / 2**30 if cuda else None
    if load is not None:
        out["accounting"] = {"mode": args.accounting, "target_turns_per_s": args.accounting_turns_per_s,
                             "turns_per_s": load.turns / load.elapsed_s, "busy_share": load.busy_s / load.elapsed_s}
    if "table" in profiled:
        out["torch_profile"] = profiled["table"]
    del trainer
    return out


def _summary(times: list[float], tokens: list[int]) -> dict[str, Any]:
    return {
        "steps": len(times),
        "step_s": times,
        "forwarded_tokens": tokens,
        "median_step_s": statistics.median(times),
        "forwarded_tokens_per_s": sum(tokens) / sum(times),
    }


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--model", choices=["tiny", "smollm2"], default="tiny", help="the shape (random weights)")
    p.add_argument("--model-dir", help="a save_pretrained folder instead (its weights and shape)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--token-budget", type=int, default=4096, help="unique tokens a packed row holds at most")
    p.add_argument("--rows-per-step", type=int, default=4, help="packed rows (micro-batches) per optimizer step")
    p.add_argument("--steps", type=int, default=5, help="measured steps")
    p.add_argument("--warmup-steps", type=int, default=2)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--gradient-checkpointing", action="store_true", help="the trainer recomputes activations (TRL's default)")
    p.add_argument("--trainer", choices=["trl", "is"], default="trl",
                   help="trl: TRL's AsyncGRPOTrainer; is: openenv_trainers.async_grpo.ISAsyncGRPOTrainer (TRL's defaults: IS correction on)")
    p.add_argument("--pad-multiple", type=int, default=256, help="attention rows padded to a multiple of this (both steps)")
    p.add_argument("--skip-bare", action="store_true")
    p.add_argument("--accounting", choices=["none", "full", "incremental"], default="none",
                   help="a thread doing the rollout worker's token accounting beside the trainer (see above)")
    p.add_argument("--accounting-turns-per-s", type=float, default=130.0)
    p.add_argument("--torch-profile", action="store_true", help="a torch.profiler table of two steps of each, in the JSON")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--torch-threads", type=int, default=0, help="CPU threads for torch (0: torch's default)")
    p.add_argument("--json", help="where to write the figures (default on a GPU: benchmarks/results/gpu/trainer-step-<device>-<date>.json)")
    args = p.parse_args(argv)
    args.shape = Shape(group_size=args.group_size)
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    import transformers

    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import trl
    cuda = args.device.startswith("cuda")
    vocab = int((SMOLLM2_135M if args.model == "smollm2" else TINY)["vocab_size"])
    if args.model_dir:
        vocab = transformers.AutoConfig.from_pretrained(args.model_dir).vocab_size
    total_rows = (args.warmup_steps + args.steps) * args.rows_per_step
    samples = synthetic_samples(max(256, total_rows * 24), vocab, args.shape, args.seed)
    rows = planned_rows(samples, args.token_budget, total_rows)
    print(f"{len(rows)} packed rows, {statistics.mean(len(r['input_ids']) for r in rows):.0f} tokens each on average", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = trainer_steps(args, samples, Path(tmp))
    expected = [sum(len(r["input_ids"]) for r in rows[s * args.rows_per_step : (s + 1) * args.rows_per_step]) for s in range(args.warmup_steps, args.warmup_steps + args.steps)]
    if trainer["forwarded_tokens"] != expected:
        raise RuntimeError(f"the trainer forwarded {trainer['forwarded_tokens']} tokens a step, the planned rows hold {expected}")
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    bare = None if args.skip_bare else bare_steps(args, rows)
    ratio = bare["forwarded_tokens_per_s"] / trainer["forwarded_tokens_per_s"] if bare else None
    result = {
        "date": datetime.date.today().isoformat(),
        "command": "python benchmarks/bench_trainer_step.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": {
            "device": torch.cuda.get_device_name(0) if cuda else platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "transformers": transformers.__version__,
            "trl": trl.__version__,
        },
        "config": {
            "model": args.model_dir or args.model, "weights": "folder" if args.model_dir else "random",
            "token_budget": args.token_budget, "rows_per_step": args.rows_per_step, "steps": args.steps,
            "pad_multiple": args.pad_multiple, "trainer": args.trainer,
            "warmup_steps": args.warmup_steps, "gradient_checkpointing": args.gradient_checkpointing,
            "accounting": args.accounting, "accounting_turns_per_s": args.accounting_turns_per_s,
            "shape": dataclasses.asdict(args.shape), "precision": "bf16 autocast, float32 weights" if cuda else "float32",
        },
        "trainer": trainer,
        "bare": bare,
        "forwarded_tokens_per_s": trainer["forwarded_tokens_per_s"],
        "bare_forwarded_tokens_per_s": bare["forwarded_tokens_per_s"] if bare else None,
        "bare_over_trainer": ratio,
    }
    line = f"trainer: {trainer['forwarded_tokens_per_s']:,.0f} forwarded tokens/s (median step {trainer['median_step_s']:.3f} s)"
    if "accounting" in trainer:
        line += f" beside {args.accounting} accounting at {trainer['accounting']['turns_per_s']:.0f} turns/s (busy {trainer['accounting']['busy_share']:.0%})"
    if bare:
        line += f"; bare: {bare['forwarded_tokens_per_s']:,.0f} tokens/s (median step {bare['median_step_s']:.3f} s); bare/trainer = {ratio:.2f}"
    print(line, flush=True)
    out = args.json or (str(REPO_ROOT / "benchmarks/results/gpu" / f"trainer-step-{result['date']}.json") if cuda else None)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(result, indent=1) + "\n")
        print("wrote", out)
    return result


if __name__ == "__main__":
    main()
