"""vLLM's own benchmark client (`vllm.benchmarks.serve`) as the peer: run by the engine's
Python (`.harness/engine/venv`), never imported by the harness (it needs vllm, and only the
standard library besides).

    python vllm_peer.py CONFIG.json

CONFIG: {"mode": "prompts" | "bench", "base_url", "model", "tokenizer", "dataset" (a
Mooncake-format JSONL), "multiplier" (timestamp units to seconds), "num_prompts",
"chunk_tokens" (tokens per hash id), "seed", "out" (a JSON file to write), "result_dir",
and in bench mode optionally "prompts_out" (the prompts too)}.

- prompts: the requests vLLM's TimedTrace dataset builds from the file (token ids, send time,
  output length), so that the harness's client sends exactly the same ones. TimedTrace draws a
  hash id's tokens from Python's hash() of a string: PYTHONHASHSEED must be fixed (the harness
  sets it) for two processes to build the same prompts.
- bench: `serve.main(args)` with the same dataset options, timed by the trace
  (`--self-timed`), per-request details kept, `rounds` times in one process, each round when
  the harness says go (a file `go-K` in "handshake_dir"; `done-K` is written after it); the
  result dicts by round are written to `out`.
"""

from __future__ import annotations

import json
import sys


def cli(cfg: dict) -> list[str]:
    return [
        "--backend",
        "vllm",
        "--base-url",
        cfg["base_url"],
        "--model",
        cfg["model"],
        "--served-model-name",
        cfg["model"],
        "--tokenizer",
        cfg["tokenizer"],
        "--dataset-name",
        "timed_trace",
        "--dataset-path",
        cfg["dataset"],
        "--timed-trace-sec-multiplier",
        str(cfg["multiplier"]),
        "--timed-trace-chunk-hash-size",
        str(cfg["chunk_tokens"]),
        "--num-prompts",
        str(cfg["num_prompts"]),
        "--seed",
        str(cfg["seed"]),
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--metric-percentiles",
        "50,95",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        cfg["result_dir"],
        "--result-filename",
        cfg.get("result_file", "vllm_bench.json"),
        "--disable-tqdm",
    ]


def parse(cfg: dict):
    from vllm.benchmarks import serve
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser()
    serve.add_cli_args(parser)
    return parser.parse_args(cli(cfg))


def prompts(cfg: dict) -> list[dict]:
    from vllm.benchmarks.datasets.datasets import TimedTrace
    from vllm.tokenizers import get_tokenizer

    args = parse(cfg)
    tok = get_tokenizer(cfg["tokenizer"])
    ds = TimedTrace(**vars(args))
    out = []
    for s in ds.sample(tokenizer=tok, num_requests=args.num_prompts):
        out.append(
            {
                "prompt": list(s.prompt),
                "timestamp": s.timestamp,
                "output_len": s.expected_output_len,
                "prompt_len": s.prompt_len,
            }
        )
    return out


def _wait(path: str, timeout_s: float = 900.0) -> None:
    import os
    import time

    end = time.monotonic() + timeout_s
    while not os.path.exists(path):
        if time.monotonic() > end:
            raise SystemExit(f"no {path} within {timeout_s:.0f} s: the harness is gone")
        time.sleep(0.02)


def bench(cfg: dict) -> dict:
    """`rounds` runs of serve.main in this one process (vLLM's import is paid once), each
    started when the harness writes DIR/go-K and answered with DIR/done-K, so that the
    harness's own rounds can run between them."""
    from vllm.benchmarks import serve

    if cfg.get("prompts_out"):  # the same requests, for the harness's client
        with open(cfg["prompts_out"] + ".tmp", "w") as f:
            json.dump(prompts(cfg), f)
        import os

        os.replace(cfg["prompts_out"] + ".tmp", cfg["prompts_out"])
    hs, out = cfg.get("handshake_dir"), {}
    for k in range(int(cfg.get("rounds", 1))):
        if hs:
            _wait(f"{hs}/go-{k}")
        out[str(k)] = serve.main(parse({**cfg, "result_file": f"vllm_bench_{k}.json"}))
        if hs:
            open(f"{hs}/done-{k}", "w").close()
    return out


def main(argv: list[str]) -> int:
    cfg = json.loads(open(argv[1]).read())
    result = prompts(cfg) if cfg["mode"] == "prompts" else bench(cfg)
    with open(cfg["out"], "w") as f:
        json.dump(result, f, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
