"""A real serving engine under test (suite `serving`): an open-loop streaming client for
OpenAI-compatible servers, the Mooncake trace replayed to vLLM's prefix cache (C1 on an
engine), the semantic cache in front of the engine over HTTP (C2, C3 end to end), and the
harness's client held against vLLM's own benchmark client (the peer).

- client.py: the streaming client (aiohttp, asyncio): open loop, per-request TTFT, ITL, TPOT,
  end to end, the server's token counts (`usage`), errors / timeouts / cut-off streams as such,
  lateness of the schedule and the client's own overhead.
- summary.py: per-request rows to metrics (percentiles, error and lateness shares) and the
  raw CSV.
- engines.py: the engines a case measures (harness.infra.serving_engine reads their `/metrics`).
- replay.py: a Mooncake-format slice turned into token-id prompts and the engine blocks the
  simulator predicts on.
- prefix_case.py, semantic_case.py, peer_case.py: the cases (serving-prefix-cache,
  serving-semantic-e2e, serving-client-vs-vllm); drivers.py registers their drivers.

aiohttp is imported inside the client's functions (driver modules stay cheap to import).
"""
