"""Tree attention for TRL's `AsyncGRPOTrainer` without FlashAttention-3, on PyTorch's SDPA.

`AsyncGRPOTrainer` packs each micro-batch into a prefix trie (`trl.experimental.async_grpo.packing`)
and runs the model with the attention implementation `"tree_fa3"`: each segment of the trie attends
to the K/V of its root-to-segment path, through `flash_attn_varlen_func` of the FlashAttention-3
kernel that it downloads from the Hugging Face hub (`kernels.get_kernel("kernels-community/flash-attn3")`).
Where the hub cannot be reached (the GPU machines here have no network) and no FA3 build with a
backward pass can be installed (vLLM's bundled FA3 is forward-only), `use_sdpa_tree_attention()`
puts this implementation in its place: the same visibility rule written as one boolean mask over
the packed tokens and one `torch.nn.functional.scaled_dot_product_attention` call per layer.

Visibility (FlashAttention's varlen `causal=True`, aligned bottom-right): a query at offset `t` of a
segment whose K/V path has `Lk` entries, `Lq` of them the segment itself, sees the first
`Lk - Lq + t + 1` entries of its path: every ancestor segment, then its own segment up to itself.

It is exact, but dense: the mask is `N x N` for `N` unique packed tokens (built once per forward and
shared by all layers), so memory grows with the square of the micro-batch's unique tokens. Keep
`token_budget` (or the fixed micro-batch) to a few thousand tokens.
"""

from __future__ import annotations

from typing import Any

__all__ = ["sdpa_tree_attention", "tree_mask", "use_sdpa_tree_attention"]

_cache: list[Any] = [None, None]  # [the tree_kv_index tensor the mask was built for, the mask]


def tree_mask(n: int, kv_index: list[int], cu_q: list[int], cu_k: list[int]) -> Any:
    """The `n x n` boolean mask (True = may attend) of a packed trie, on the CPU."""
    import torch

    mask = torch.zeros((n, n), dtype=torch.bool)
    for s in range(len(cu_q) - 1):
        qs, qe, ks, ke = cu_q[s], cu_q[s + 1], cu_k[s], cu_k[s + 1]
        lq, lk = qe - qs, ke - ks
        if lq <= 0:
            continue
        if lk < lq or kv_index[ke - lq : ke] != list(range(qs, qe)):
            raise ValueError(f"segment {s}: its K/V path does not end with the segment itself")
        ancestors = kv_index[ks : ke - lq]
        if ancestors:
            mask[qs:qe, torch.tensor(ancestors)] = True
        mask[qs:qe, qs:qe] = torch.ones((lq, lq), dtype=torch.bool).tril()
    return mask


def sdpa_tree_attention(
    module: Any,
    query: Any,
    key: Any,
    value: Any,
    attention_mask: Any,
    *,
    tree_kv_index: Any,
    tree_cu_seqlens_q: Any,
    tree_cu_seqlens_k: Any,
    tree_max_seqlen_q: int | None = None,
    tree_max_seqlen_k: int | None = None,
    scaling: float | None = None,
    sliding_window: int | None = None,
    softcap: float | None = None,
    **kwargs: Any,
) -> tuple[Any, None]:
    """A drop-in for `trl.experimental.async_grpo.packing.tree_attention` (same arguments and output)."""
    import torch.nn.functional as F

    if sliding_window or softcap:
        raise NotImplementedError("sdpa_tree_attention supports neither sliding windows nor softcapping")
    if query.shape[0] != 1:
        raise ValueError(f"tree attention takes one packed row (batch 1), got a batch of {query.shape[0]}")
    n = query.shape[2]
    if _cache[0] is not tree_kv_index:
        mask = tree_mask(n, tree_kv_index.tolist(), tree_cu_seqlens_q.tolist(), tree_cu_seqlens_k.tolist())
        _cache[0], _cache[1] = tree_kv_index, mask.to(query.device, non_blocking=True)
    mask = _cache[1]
    if mask.shape[0] != n:
        raise ValueError(f"the tree mask covers {mask.shape[0]} tokens, the query {n}")
    key, value = key.to(query.dtype), value.to(query.dtype)
    if key.shape[1] != query.shape[1]:  # grouped-query attention: repeat K/V (SDPA's GQA flag rules out its fused kernels)
        repeat = query.shape[1] // key.shape[1]
        key, value = key.repeat_interleave(repeat, dim=1), value.repeat_interleave(repeat, dim=1)
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=scaling)
    return out.transpose(1, 2).contiguous(), None


def use_sdpa_tree_attention() -> None:
    """Make TRL's `"tree_fa3"` attention this SDPA implementation (before or after the trainer is built)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface
    from trl.experimental.async_grpo import packing

    packing.tree_attention = sdpa_tree_attention  # what register_tree_attention() registers
    AttentionInterface.register(packing.TREE_ATTENTION, sdpa_tree_attention)
    AttentionMaskInterface.register(packing.TREE_ATTENTION, lambda **kwargs: None)
