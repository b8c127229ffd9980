"""Engine configurations for a schedule of best draft lengths by batch size, one module per
engine, each following that engine's source at a named commit (its docstring says which):

- :mod:`.vllm` -- ``num_speculative_tokens_per_batch_size`` triples;
- :mod:`.tensorrt_llm` -- ``draft_len_schedule`` (``max_concurrency`` where speculation stops);
- :mod:`.sglang` -- the static ``--speculative-*`` flags and a ``--speculative-adaptive-config``;
- :mod:`.llama_cpp` -- ``llama-server``'s ``--spec-*`` flags (one value);
- :mod:`.ranges` -- the schedule's ranges and the :class:`~.ranges.Snippet` record;
- :mod:`.plan` -- the measurement plan: the commands that collect counters and runs.
"""
