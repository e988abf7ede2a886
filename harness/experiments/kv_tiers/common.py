"""What the kv-tiers drivers share: parameters, the model (warmed once), the tiered store on
the target's cluster and a temporary LMDB folder."""

from __future__ import annotations

import functools
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import cast

from harness.base.errors import BadInput
from harness.experiments.kv_tiers import codecs, extract, tiers
from harness.experiments.kv_tiers.extract import DEFAULT_TEXT
from harness.experiments.kv_tiers.tiers import default_device
from harness.infra.model_wheels import smollm2
from harness.model.driver_contract import INPUT_FILE, CaseContext, Param, input_path
from harness.model.driver_helpers import torch_threads

COMMON = {
    "chunk_tokens": Param(int, 32, "tokens per KV chunk (every layer's K and V of this many tokens)", min=1),
    "torch_threads": Param(
        int, 0, "torch intra-op threads during the case (0 = torch's default); restored afterwards", min=0
    ),
    "text_path": Param(str, "", "JSON list of {origin: text}; empty = data/gptcache_mock_data.json", kind=INPUT_FILE),
}

BINARY_CODECS = ("aligned64", "aligned128", "raw")
CODECS = ("json",) + BINARY_CODECS


def in_torch_threads(fn):
    """A driver run with the case's torch_threads (restored afterwards)."""

    @functools.wraps(fn)
    def run(ctx: CaseContext):
        with torch_threads(ctx.params["torch_threads"]):
            return fn(ctx)

    return run


def text_path(p: dict) -> Path:

    return input_path(p["text_path"]) if p["text_path"] else DEFAULT_TEXT


def load_model(ctx: CaseContext):
    """(tokenizer, model, device), warmed up by one short forward pass."""
    import torch

    torch.set_grad_enabled(False)
    device = default_device()
    tok, model = smollm2(device)
    ids = extract.prompt_ids(tok, 64, text_path(ctx.params))
    _, cache = extract.prefill(model, ids[:48])
    extract.continue_from(model, cache, ids[48:])
    return tok, model, device


def check_prompt(where: str, p: dict) -> None:
    if p["prompt_tokens"] < p["chunk_tokens"]:
        raise BadInput(f"{where}.prompt_tokens: needs at least one whole chunk ({p['chunk_tokens']} tokens)")


def prompt_chunks(ctx: CaseContext) -> tuple[list[extract.Chunk], str]:
    """(the KV chunks of the case's real prompt of prompt_tokens, the device): the model
    loaded and warmed, the prompt prefilled and cut into chunks of chunk_tokens."""
    p = ctx.params
    tok, model, device = load_model(ctx)
    ids = extract.prompt_ids(tok, p["prompt_tokens"], text_path(p))
    _, cache = extract.prefill(model, ids)
    return extract.split_chunks(cache, ids, p["chunk_tokens"]), device


def env_note(device: str) -> str:
    import torch

    return f"model and L1 on {device}; torch {torch.__version__} with {torch.get_num_threads()} threads"


TIER_STORE_PARAMS = {
    "codec": Param(str, "aligned128", "codec of L2 and L3 values", CODECS),
    "l1_ttl_s": Param(float, 30.0, "L1 TTL in seconds", min=0.001),
    "l2_ttl_s": Param(float, 300.0, "L2 TTL in seconds", min=0.001),
    "l3_ttl_s": Param(float, 3600.0, "L3 TTL in seconds", min=0.001),
    "l1_max_mb": Param(int, 0, "L1 capacity in MiB (0 = unbounded)", min=0),
    "l3_map_mb": Param(int, 1024, "LMDB map size in MiB (the source's is in the lab-a100 profile)", min=1),
    "l3_dir": Param(str, "", "folder for the LMDB file; empty = a temporary folder on the disk, removed afterwards"),
    "write_behind_every": Param(int, 500, "L2 writes per write-behind batch to L3", min=1),
}


class Store:
    """A TieredStore on the target's cluster and a (temporary) LMDB folder; cleans up."""

    def __init__(self, ctx: CaseContext, shape, device: str):

        p = ctx.params
        # on a tmpfs there is no cold read: the L3 control (cold vs warm) then fails and says so
        self.tmp = None if p["l3_dir"] else tempfile.mkdtemp(prefix="kv-l3-")
        # self.tmp is a folder whenever l3_dir is empty
        l3_path = Path(p["l3_dir"] or cast(str, self.tmp)) / f"{ctx.case}-rep{ctx.repetition}-{uuid.uuid4().hex[:6]}"
        self.client = ctx.target.cluster_client(decode_responses=False)
        prefix = f"kv:{ctx.case}:{uuid.uuid4().hex[:8]}:"
        codec = codecs.make_codec(p["codec"], shape, "float32")
        self.store = tiers.TieredStore(
            tiers.L1(p["l1_ttl_s"], p["l1_max_mb"] << 20, device),
            tiers.L2(self.client, p["l2_ttl_s"], prefix),
            tiers.L3(l3_path, p["l3_map_mb"] << 20, p["l3_ttl_s"]),
            codec,
            p["write_behind_every"],
        )
        self.l3_path = l3_path
        self.keys: set[str] = set()

    def close(self) -> None:
        try:
            self.store.close()
            self.store.l2.delete(*self.keys)
            self.client.close()
        finally:
            shutil.rmtree(self.tmp or self.l3_path, ignore_errors=True)
