"""The SDPA tree attention (FlashAttention-3's stand-in for AsyncGRPOTrainer) against plain causal attention."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from openenv_trainers.tree_attention import mask_builds, sdpa_tree_attention, tree_mask, use_sdpa_tree_attention


def _packing():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from trl.experimental.async_grpo.packing import TreeRow
    return TreeRow


def _samples(rng: np.random.Generator) -> list[dict]:
    prompt = rng.integers(0, 50, 7).tolist()
    out = []
    for g in range(2):  # two groups: shared prompts, branching completions, one shared mid-conversation
        p = prompt if g == 0 else rng.integers(0, 50, 5).tolist()
        shared = rng.integers(0, 50, 3).tolist()
        for _ in range(3):
            ids = p + shared + rng.integers(0, 50, int(rng.integers(1, 6))).tolist()
            mask = [0] * len(p) + [1] * (len(ids) - len(p))
            out.append({
                "input_ids": np.array(ids), "completion_mask": np.array(mask),
                "old_log_probs": np.zeros(len(ids), dtype=np.float32), "advantage": 0.0, "group_id": g,
            })
    return out


@pytest.fixture(params=[1, 8, 256], ids=lambda m: f"pad{m}")
def pad_multiple(request: pytest.FixtureRequest) -> Iterator[int]:
    use_sdpa_tree_attention(pad_multiple=request.param)
    yield request.param
    use_sdpa_tree_attention()


def test_tree_attention_equals_causal_attention_per_sample(pad_multiple: int) -> None:
    TreeRow = _packing()
    rng = np.random.default_rng(0)
    samples = _samples(rng)
    row = TreeRow()
    for s in samples:
        row.add(s)
    packed = row.pack()
    n = len(packed["input_ids"])
    assert n < sum(len(s["input_ids"]) for s in samples)  # something is shared
    heads, kv_heads, dim = 4, 2, 8
    # per-token q/k/v depend only on the token and its position, as in a real first layer
    table = torch.randn(50, 64, 3, heads, dim, generator=torch.Generator().manual_seed(1), dtype=torch.float64)

    def qkv(ids: list[int], pos: list[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        x = table[torch.tensor(ids), torch.tensor(pos)]  # (N, 3, H, D)
        q = x[:, 0].permute(1, 0, 2).unsqueeze(0)
        k = x[:, 1, :kv_heads].permute(1, 0, 2).unsqueeze(0)
        v = x[:, 2, :kv_heads].permute(1, 0, 2).unsqueeze(0)
        return q, k, v

    q, k, v = qkv(packed["input_ids"].tolist(), packed["position_ids"].tolist())
    out, _ = sdpa_tree_attention(
        None, q, k, v, None, tree_kv_index=packed["tree_kv_index"], tree_cu_seqlens_q=packed["tree_cu_seqlens_q"],
        tree_cu_seqlens_k=packed["tree_cu_seqlens_k"], scaling=dim**-0.5,
    )
    assert out.shape == (1, n, heads, dim)
    for s, nodes in zip(row.samples, row.sample_nodes, strict=True):
        ids = s["input_ids"].tolist()
        sq, sk, sv = qkv(ids, list(range(len(ids))))
        ref = F.scaled_dot_product_attention(sq, sk, sv, is_causal=True, scale=dim**-0.5, enable_gqa=True)
        ref = ref.transpose(1, 2)[0]
        pos = [row_pos for row_pos in (_packed_positions(row)[node] for node in nodes)]
        torch.testing.assert_close(out[0, pos], ref, rtol=1e-10, atol=1e-10)


def _packed_positions(row) -> dict[int, int]:
    """Trie node -> packed position, by replaying pack()'s DFS order on the tokens."""
    order, stack = [], list(reversed(row.roots.values()))
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(reversed(row.children[node].values()))
    return {node: i for i, node in enumerate(order)}


def _loop_mask(n: int, kv_index: list[int], cu_q: list[int], cu_k: list[int]) -> torch.Tensor:
    """The visibility rule written out segment by segment (the reference the vectorised mask must equal)."""
    mask = torch.zeros((n, n), dtype=torch.bool)
    for s in range(len(cu_q) - 1):
        qs, qe, ks, ke = cu_q[s], cu_q[s + 1], cu_k[s], cu_k[s + 1]
        lq, lk = qe - qs, ke - ks
        for t in range(lq):  # query t sees the first lk - lq + t + 1 entries of its path
            for j in range(ks, ks + lk - lq + t + 1):
                mask[qs + t, kv_index[j]] = True
    return mask


def _branching_samples(rng: np.random.Generator, groups: int, depth: int) -> list[dict]:
    """Conversations that fork at several depths (a shared system prompt, then group prompts, then turns)."""
    system = rng.integers(0, 30, 4).tolist()
    out = []
    for g in range(groups):
        stems = [system + rng.integers(0, 30, int(rng.integers(1, 4))).tolist()]
        for level in range(depth):
            forks = 2 if level == 0 else int(rng.integers(1, 3))
            stems = [s + rng.integers(0, 30, int(rng.integers(1, 4))).tolist() for s in stems for _ in range(forks)]
        for ids in stems:
            mask = [0] * len(system) + [1] * (len(ids) - len(system))
            out.append({
                "input_ids": np.array(ids), "completion_mask": np.array(mask),
                "old_log_probs": np.zeros(len(ids), dtype=np.float32), "advantage": 0.0, "group_id": g,
            })
    return out


@pytest.mark.parametrize("seed", range(12))
def test_the_vectorised_mask_equals_the_segment_by_segment_rule(seed: int) -> None:
    TreeRow = _packing()
    rng = np.random.default_rng(seed)
    row = TreeRow()
    for s in _branching_samples(rng, groups=int(rng.integers(2, 4)), depth=int(rng.integers(1, 4))):
        row.add(s)
    packed = row.pack()
    n = len(packed["input_ids"])
    args = [packed[k].tolist() for k in ("tree_kv_index", "tree_cu_seqlens_q", "tree_cu_seqlens_k")]
    assert len(args[1]) > 3  # several segments
    expected = _loop_mask(n, *args)
    assert torch.equal(tree_mask(n, *args), expected)
    assert torch.equal(tree_mask(n, *(torch.tensor(a) for a in args)), expected)


def test_a_hand_made_path_with_partial_ancestors_and_an_empty_segment() -> None:
    # segment 0: tokens 0-2; segment 1: tokens 3-4, seeing token 1 only of segment 0; segment 2: no queries
    kv_index, cu_q, cu_k = [0, 1, 2, 1, 3, 4, 0], [0, 3, 5, 5], [0, 3, 6, 7]
    expected = _loop_mask(5, kv_index, cu_q, cu_k)
    assert expected[4].tolist() == [False, True, False, True, True]
    assert torch.equal(tree_mask(5, kv_index, cu_q, cu_k), expected)


def test_tree_mask_refuses_a_path_that_does_not_end_with_its_segment() -> None:
    with pytest.raises(ValueError, match="does not end with the segment"):
        tree_mask(3, [0, 2, 1], [0, 3], [0, 3])
    with pytest.raises(ValueError, match="does not end with the segment"):
        tree_mask(3, [0, 1], [0, 3], [0, 2])  # the path is shorter than the segment


@pytest.mark.parametrize(
    ("kv_index", "cu_q", "cu_k", "match"),
    [
        ([0, 1, 5], [0, 3], [0, 3], "outside the 3 packed tokens"),
        ([0, 1, 2], [0, 4], [0, 3], "inconsistent tree boundaries"),
        ([0, 1, 2], [0, 3], [0, 2], "inconsistent tree boundaries"),
        ([0, 1, 2], [0, 3], [0, 1, 3], "must be equal 1-D boundaries"),
    ],
)
def test_tree_mask_refuses_inconsistent_packings(kv_index: list[int], cu_q: list[int], cu_k: list[int], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        tree_mask(3, kv_index, cu_q, cu_k)


def test_one_mask_per_micro_batch_for_every_layer_and_the_checkpointed_recomputation() -> None:
    """Through a real model with TRL's `"tree_fa3"` attention: a forward and a backward with gradient
    checkpointing build the mask once, and a new packing builds a new one."""
    from transformers import LlamaConfig, LlamaForCausalLM

    TreeRow = _packing()
    use_sdpa_tree_attention()
    config = LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    config._attn_implementation = "tree_fa3"
    model = LlamaForCausalLM(config).train()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    counted = []
    for seed in (0, 1):
        row = TreeRow()
        for s in _samples(np.random.default_rng(seed)):
            row.add(s)
        packed = row.pack()
        tree = {f"tree_{k}": packed[f"tree_{k}"] for k in ("kv_index", "cu_seqlens_q", "cu_seqlens_k")}
        before = mask_builds()
        out = model(input_ids=packed["input_ids"][None], position_ids=packed["position_ids"][None], **tree)
        out.logits.sum().backward()
        counted.append(mask_builds() - before)
    assert counted == [1, 1]


def test_padding_the_row_changes_neither_the_output_nor_the_gradients() -> None:
    """The padded attention (a bucket of 64 for a row of ~30 tokens) against the unpadded one, forward and backward."""
    TreeRow = _packing()
    row = TreeRow()
    for s in _branching_samples(np.random.default_rng(3), groups=2, depth=2):
        row.add(s)
    packed = row.pack()
    n = len(packed["input_ids"])
    assert n % 64
    tree = {f"tree_{k}": packed[f"tree_{k}"] for k in ("kv_index", "cu_seqlens_q", "cu_seqlens_k")}
    gen = torch.Generator().manual_seed(0)
    base = [torch.randn(1, h, n, 8, generator=gen, dtype=torch.float64) for h in (4, 2, 2)]
    results = []
    for multiple in (1, 64):
        use_sdpa_tree_attention(pad_multiple=multiple)
        q, k, v = (x.clone().requires_grad_(True) for x in base)
        out, _ = sdpa_tree_attention(None, q, k, v, None, **tree, scaling=0.3)
        (out * torch.linspace(-1, 1, out.numel(), dtype=torch.float64).view_as(out)).sum().backward()
        results.append((out.detach(), q.grad, k.grad, v.grad))
    use_sdpa_tree_attention()
    for a, b in zip(*results, strict=True):
        assert torch.isfinite(b).all()
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_pad_multiple_must_be_positive() -> None:
    with pytest.raises(ValueError, match="pad_multiple must be at least 1"):
        use_sdpa_tree_attention(pad_multiple=0)
