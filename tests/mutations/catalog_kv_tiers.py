"""Mutations of the kv-tiers suite: claims C15 (the 128-byte aligned chunk layout decodes far
faster than compact JSON, for more QPS) and C17 (the tiers' access latencies).

The codecs case takes about 45 s here (model load, calibration, interleaved decodes, the QPS
loop through the run's Redis Cluster). C17's kv-tiers checks need a GPU (L1), a separate load
generator (L2) and an NVMe disk (L3): on a machine without them every check is `not comparable
here` and the framework skips the mutation with that reason (they are judged on the lab).
"""

from __future__ import annotations

from tests.mutations.framework import Edit, Mutation

CODECS = "harness/experiments/kv_tiers/codecs.py"
CODECS_CASE = "harness/experiments/kv_tiers/codecs_case.py"
TIERS = "harness/experiments/kv_tiers/tiers.py"
TIERS_CASE = "harness/experiments/kv_tiers/tiers_case.py"
DECODE = "kv-tiers/codecs sized.decode_speedup.aligned128_vs_json"
QPS = "kv-tiers/codecs qps_gain_pct.aligned128_vs_json"
ALIGNED = '    if name.startswith("aligned"):\n        try:\n'

MUTATIONS = [
    Mutation(
        name="kv-tiers/aligned-decode-memoized",
        claim="C15",
        kind="broken",
        what="the aligned codec's decode remembers its result per buffer object: a repeated decode of the same "
        "bytes does no work (found by the red team: the speedup read exceeded)",
        edits=(
            Edit(
                "harness/experiments/kv_tiers/codecs.py",
                "    def decode(self, buf, copy: bool = True) -> tuple[np.ndarray, str]:\n"
                "        length, a, dtype, shape = parse_aligned_header(buf)\n",
                "    _memo: dict = {}\n\n    def decode(self, buf, copy: bool = True) -> tuple[np.ndarray, str]:\n"
                "        hit = self._memo.get(id(buf))\n        if hit is not None and hit[0] is buf:\n"
                "            return hit[1]\n        out = self._decode(buf, copy)\n"
                "        self._memo[id(buf)] = (buf, out)\n        return out\n\n"
                "    def _decode(self, buf, copy: bool = True):\n"
                "        length, a, dtype, shape = parse_aligned_header(buf)\n",
            ),
        ),
        run="kv-tiers/codecs",
        checks=("kv-tiers/codecs sized.decode_speedup.aligned128_vs_json",),
        timeout_s=300,
    ),
    Mutation(
        name="kv-tiers/aligned-codec-is-json",
        claim="C15",
        kind="stand-in",
        what="the aligned codec replaced by compact JSON (make_codec returns the JSON codec for alignedN)",
        edits=(
            Edit(CODECS, ALIGNED, '    if name.startswith("aligned"):\n        return JsonCodec()\n        try:\n'),
        ),
        run="kv-tiers/codecs",
        checks=(DECODE, QPS),
        timeout_s=300,
    ),
    Mutation(
        name="kv-tiers/aligned-codec-is-raw",
        claim="C15",
        kind="stand-in",
        what="the aligned layout replaced by the raw tensor bytes (no header, no alignment): a cheaper binary "
        "layout under the aligned codec's name",
        edits=(
            Edit(
                CODECS,
                ALIGNED,
                '    if name.startswith("aligned"):\n        return RawCodec(shape, dtype)\n        try:\n',
            ),
        ),
        run="kv-tiers/codecs",
        checks=(DECODE,),
        timeout_s=300,
    ),
    Mutation(
        name="kv-tiers/raw-standin-sleeps",
        claim="C15",
        kind="weakened",
        what="the raw-bytes stand-in pauses 0.1 ms in every decode: a slower stand-in (the sized chunk's raw decode "
        "takes about 5 us), so the aligned layout beats it and the speedup would read attributable (issue 52)",
        edits=(
            Edit(
                CODECS,
                "        arr = np.frombuffer(buf, dtype=np_dtype(self.dtype)).reshape(self.shape)\n",
                "        __import__('time').sleep(1e-4)  # mutation\n"
                "        arr = np.frombuffer(buf, dtype=np_dtype(self.dtype)).reshape(self.shape)\n",
            ),
        ),
        run="kv-tiers/codecs",
        checks=(DECODE, QPS),
        timeout_s=300,
    ),
    Mutation(
        name="kv-tiers/decode-timer-blinded",
        claim="C15",
        kind="blinded",
        what="the interleaved decode timer reads a constant 1 us for every decode, whatever the codec",
        edits=(
            Edit(
                CODECS_CASE,
                "                out[name].append(time.perf_counter() - t0)\n",
                "                out[name].append(1e-6)\n",
            ),
        ),
        run="kv-tiers/codecs",
        checks=(DECODE,),
        timeout_s=300,
    ),
    Mutation(
        name="kv-tiers/l1-served-from-l2",
        claim="C17",
        kind="broken",
        what="L1 holds nothing of its own: its fetch is answered by L2's GET and decode",
        edits=(
            Edit(
                TIERS_CASE,
                '        got["L1"] = store.l1.get(k).clone()\n',
                '        got["L1"] = decode_tensor(store.codec, store.l2.get(k))\n',
            ),
        ),
        run="kv-tiers/tiers",
        checks=("kv-tiers/tiers L1.fetch_copy.p50_us",),
        timeout_s=300,
    ),
    Mutation(
        name="kv-tiers/l3-pages-not-dropped",
        claim="C17",
        kind="blinded",
        what="the cold L3 read keeps the page cache (posix_fadvise DONTNEED not called): cold reads are warm ones",
        edits=(Edit(TIERS, "            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)\n", "            pass\n"),),
        run="kv-tiers/tiers",
        checks=("kv-tiers/tiers L3.cold.p50_us",),
        timeout_s=300,
    ),
    Mutation(
        name="kv-tiers/l2-fetch-is-small-get",
        claim="C17",
        kind="blinded",
        what="the L2 measure times a 64-byte GET instead of the chunk's GET and decode",
        edits=(
            Edit(
                TIERS_CASE,
                '        got["L2"] = decode_tensor(store.codec, store.l2.get(k))\n',
                '        store.l2.get("absent-small")\n        got["L2"] = store.l1.get(k).clone()\n',
            ),
        ),
        run="kv-tiers/tiers",
        checks=("kv-tiers/tiers L2.fetch_decode.p50_us",),
        timeout_s=300,
    ),
]
