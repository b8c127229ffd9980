"""A reference of vLLM's pure-torch rejection sampler, for ``bench_verify.py`` only.

It follows ``vllm/model_executor/layers/rejection_sampler.py`` (class ``RejectionSampler``, its
torch path, not the FlashInfer kernel) and ``spec_decode_base_sampler.py``
(``_create_output``) of vllm-project/vllm (v0.6 line, Apache-2.0), written anew here step by
step so the benchmark times the same tensor work without importing vLLM:

1. ``_get_accepted``: gather p(x) and q(x) at the drafted tokens, draw ``torch.rand(batch, k)``
   and accept where ``u < min(1, p(x) / q(x))``;
2. ``_get_recovered_probs``: for *every* drafted position, ``f = clamp(p - q,
   min=tiny)`` and ``f / f.sum(-1)`` -- the (batch, k, V) residuals, used or not;
3. ``_multinomial``: one draw per residual row by the exponential race
   (``probs.div_(exponential).argmax()``), as vLLM's sampler does without seeded sequences;
4. ``_create_output``: the first rejection, the accepted drafts, the recovered token after
   them, the bonus token when all were accepted, -1 after the last emitted token.

vLLM takes the bonus token from its main sampler; here it is drawn from p[:, k] by the same
exponential race inside the call, so the work matches what ``specsim.verify`` does. Inputs are
probabilities (vLLM's ``target_with_bonus_probs`` (batch, k+1, V), ``draft_probs``
(batch, k, V)), float32 or float64, used as they are: no checks (vLLM's ``strict_mode`` off).
"""

from __future__ import annotations

import torch


def _exponential_race(probs: torch.Tensor) -> torch.Tensor:
    """One draw per row of ``probs`` (rows, V): argmax of probs / Exp(1) (modifies probs)."""
    race = torch.empty_like(probs).exponential_(1.0)
    return probs.div_(race).argmax(dim=-1)


def rejection_sample(target_with_bonus_probs: torch.Tensor, draft_probs: torch.Tensor,
                     draft_token_ids: torch.Tensor) -> torch.Tensor:
    """Output token ids (batch, k+1), -1 after the last emitted token."""
    batch, k, vocab = draft_probs.shape
    target = target_with_bonus_probs[:, :-1]
    rows = torch.arange(batch)[:, None]
    cols = torch.arange(k)
    p_x = target[rows, cols, draft_token_ids]
    q_x = draft_probs[rows, cols, draft_token_ids]
    uniform = torch.rand(batch, k, dtype=draft_probs.dtype)
    accepted = uniform < torch.minimum(p_x / q_x, torch.ones(1, dtype=draft_probs.dtype))

    tiny = torch.finfo(draft_probs.dtype).tiny
    f = torch.clamp(target - draft_probs, min=tiny)
    recovered_probs = (f / f.sum(dim=-1, keepdim=True)).reshape(batch * k, vocab)
    recovered = _exponential_race(recovered_probs).reshape(batch, k)
    bonus = _exponential_race(target_with_bonus_probs[:, -1].clone())

    rejected = accepted == 0
    limits = rejected.max(1).indices
    limits[~rejected.any(1)] = k
    idx = torch.arange(k)[None, :]
    accepted_mask = idx < limits[:, None]
    after_false_mask = idx == limits[:, None]
    out = -torch.ones((batch, k + 1), dtype=torch.long)
    drafts = out[:, :k]
    drafts[:, :] = torch.where(accepted_mask, draft_token_ids, -torch.ones_like(draft_token_ids))
    out[:, -1] = torch.where(drafts[:, -1] != -1, bonus, -1)
    drafts.mul_(~after_false_mask).add_(recovered.mul(after_false_mask))
    return out
