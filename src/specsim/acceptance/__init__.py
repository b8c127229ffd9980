"""A serving engine's own metrics -> the best draft length at every batch size.

Engines expose acceptance counters, not draft probabilities; with a measured profile of step
latencies they give the speedup of every draft length K' at every batch size b
(:mod:`.schedule`), the schedule the engines' per-batch-size settings take (:mod:`.snippets`,
one module per engine in :mod:`.engines`, with the measurement plan that collects the engine's
own runs: :mod:`.engines.plan`).

- :mod:`.counts` -- the counters and the tokens per call they identify (with intervals);
- :mod:`.readers` -- every engine's metrics files (:mod:`.formats`: vLLM, llama-server and
  TensorRT-LLM scrapes, vLLM and llama.cpp log lines, vLLM and SGLang per-request JSON) ->
  :class:`~.counts.AcceptanceCounts` per draft length;
- :mod:`.latency` -- the latency profile T(role, batch, tokens per sequence);
- :mod:`.schedule` -- speedup(b, K'), the best K' per batch, the batch where speculation
  stops paying.
"""
