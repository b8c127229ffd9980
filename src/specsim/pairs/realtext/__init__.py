"""Speculative sampling with real language models: character n-grams trained on real English.

The target is the order-5 interpolated Witten-Bell model of :mod:`specsim.ngram`, the drafts are
the same family at orders 1-4, all trained on the standard library's own English text. Each
experiment is a step of ``specsim realtext`` (one Snakemake rule each, workflow/rules/stages.smk):

* ``model`` -- held-out perplexity per order and the per-context beta = sum min(p, q) over
  held-out text (:mod:`.experiments`);
* ``speculative`` -- Leviathan Alg. 1 over real held-out prompts, vectorised over chains:
  acceptance, tokens per target call with 95% CIs, Eq. 1 at the mean beta beside the observed
  tokens (Jensen's gap on real data) (:mod:`.experiments`);
* ``lossless`` -- the exact law of the next two characters, p(c1|h) p(c2|h c1) by enumeration,
  against Monte Carlo counts of speculative sampling (G-test, sampling floor, verdict) for the
  correct rule and a broken one (:mod:`.experiments`);
* ``costs`` -- wall time of a target call verifying k = 1..17 positions and of a draft step,
  hence the measured c and T(k)/T(1), and the measured speedup beside [L] Thm 3.8 with the
  measured c. Timings are not deterministic: they live in their own table and nothing asserts
  on them (:mod:`.costs`).

One round (:mod:`.rounds`) uses the shared pieces: drafts are drawn one position at a time with
the inverse-CDF sampler of :mod:`specsim.sampling`, the target is called once on all γ+1
contexts, and :func:`specsim.engine.verify_round` hands acceptance, first rejection and the
residual (or bonus) token to the verification core :func:`specsim.verify.verify_uniforms`, the
same code :func:`specsim.engine.iid_round` runs -- the tests check they agree draw for draw.

:mod:`specsim.realtext_settings` (the ``realtext:`` config section, and the tables, figures and
steps the workflow lists) imports nothing heavy: Snakemake reads it every time it parses the
workflow.
This ``__init__`` imports nothing at all, for the same reason.
"""
