"""Exercise evidence of engine-hotload's checks of an absence (issue 52): the counters that show
the dangerous situation happened in the judged run, each measured from outside the mechanism
(the clients' answers told apart by the model version's output, a second signature check, the
file on disk hashed when the deserializer runs), and each able to read 0."""

from __future__ import annotations

import numpy as np
import pytest

from harness.base.errors import HarnessError
from harness.experiments.engine_hotload.backend_ort import OrtEngine
from harness.experiments.engine_hotload.fingerprint import UNKNOWN, Fingerprints
from harness.experiments.engine_hotload.hot_swap_metrics import swap_exercise
from harness.experiments.engine_hotload.lifecycle import Bucket
from harness.experiments.engine_hotload.signed_load import (
    _Counter,
    answer_of,
    fails_independently,
    load_attempt,
    summarize,
)
from harness.experiments.engine_hotload.signing import (
    generate_keypair,
    sha256_bytes,
    sign_manifest,
    write_manifest,
)
from harness.experiments.engine_hotload.swap_stream import reported_facts
from harness.experiments.engine_hotload.workload import Request
from harness.mechanisms.onnx_models.export import perturbed_onnx, tiny_onnx

OLD, NEW = "v1.onnx", "v2.onnx"
SWAP = {"kind": "swap", "t_start_s": 1.0, "t_released_s": 2.0, "from_file": OLD, "to_file": NEW}
RESTART = {"kind": "restart", "t_start_s": 3.0, "t_released_s": 3.5, "from_file": NEW, "to_file": OLD}


def _r(t, ms, by, ok=True):
    return Request(t, ms, ok, 0, "b1x16", answered_by=by)


# ---- the hot swap: requests in flight across the switch, answers of the new engine -----------


def test_an_old_answer_that_came_after_the_new_engine_answered_was_in_flight_across_the_switch():
    recs = [
        _r(0.5, 10, OLD),
        _r(1.2, 600, OLD),  # the straddler: sent at 1.2, answered at 1.8
        _r(1.5, 20, NEW),
        _r(1.6, 20, NEW),
        _r(2.5, 10, NEW),
    ]
    ex = swap_exercise(recs, [SWAP, RESTART])
    assert ex["inflight"] == 1 and ex["swaps_with_inflight"] == 1
    assert ex["new_answers"] == 3 and ex["swaps_answered_by_new"] == 1
    assert ex["requests_across"] == 3  # those whose [sent, answered] overlaps [1.0, 2.0]


def test_no_request_in_flight_when_every_old_answer_came_before_the_new_engines_first():
    recs = [_r(1.1, 50, OLD), _r(1.2, 100, OLD), _r(1.4, 20, NEW), _r(1.5, 20, NEW)]
    ex = swap_exercise(recs, [SWAP, RESTART])
    assert ex["inflight"] == 0 and ex["swaps_with_inflight"] == 0
    assert ex["swaps_answered_by_new"] == 1


def test_a_slot_that_only_relabels_has_no_answer_of_the_new_engine_whatever_its_version_says():
    recs = [
        Request(t, 20, True, 0, "b1x16", version=1 if t > 1.5 else 0, answered_by=OLD)
        for t in (0.5, 1.2, 1.6, 1.9, 2.5)
    ]
    ex = swap_exercise(recs, [SWAP, RESTART])
    assert ex["new_answers"] == 0 and ex["swaps_answered_by_new"] == 0 and ex["inflight"] == 0


def test_answers_after_the_next_action_started_are_not_the_swaps():
    recs = [_r(1.2, 600, OLD), _r(3.1, 10, NEW)]  # the new version answered only after the restart began
    ex = swap_exercise(recs, [SWAP, RESTART])
    assert ex["swaps_answered_by_new"] == 0 and ex["inflight"] == 0


def test_a_request_that_failed_across_the_switch_was_in_flight_but_one_sent_after_it_was_not():
    recs = [
        _r(1.2, 600, "", ok=False),  # sent before the new engine's first answered request, failed after it
        _r(1.55, 300, "", ok=False),  # sent after it: not in flight at the switch
        _r(1.3, 10, UNKNOWN),
        _r(1.5, 20, NEW),
    ]
    ex = swap_exercise(recs, [SWAP, RESTART])
    assert ex["inflight"] == 1 and ex["unrecognised"] == 1 and ex["new_answers"] == 1


# ---- fingerprints: which model answered, from the answer -----------------------------------


def test_fingerprints_name_the_version_whose_answer_matches_and_refuse_versions_that_answer_alike():
    a, b = np.zeros((1, 4)), np.ones((1, 4))
    fp = Fingerprints({"a": {("b1x16", 0): a}, "b": {("b1x16", 0): b}})
    assert fp.which("b1x16", 0, {"out": a + 1e-6}) == "a"
    assert fp.which("b1x16", 8, {"out": b}) == "b"  # variants cycle as the requests' feeds do
    assert fp.which("b1x16", 0, {"out": np.full((1, 4), 0.5)}) == UNKNOWN
    assert fp.which("b1x16", 0, {"out": np.zeros((2, 4))}) == UNKNOWN  # another shape: neither

    class Same:
        def __init__(self):
            self.closed = False

        def io(self):
            return []

        def infer(self, feeds):
            return {"out": np.zeros((1, 4))}

        def close(self):
            self.closed = True

    class Feeds:
        def feeds(self, io, bucket, variant):
            return {}

    with pytest.raises(HarnessError, match="alike"):
        Fingerprints.build({"a": "x", "b": "y"}, [Bucket(1, 16)], Feeds(), lambda p: Same(), variants=1)


def test_the_second_model_version_has_the_same_io_and_other_answers(tmp_path):
    src = tiny_onnx(tmp_path / "m.onnx")
    v2 = perturbed_onnx(src, tmp_path / "m-v2.onnx")
    engines = []
    for f in (src, v2):
        e = OrtEngine()
        e.load(f)
        engines.append(e)
    try:
        assert [t.to_json() for t in engines[0].io()] == [t.to_json() for t in engines[1].io()]
        ids = np.arange(1, 17, dtype=np.int64).reshape(1, 16)
        outs = [next(iter(e.infer({"input_ids": ids, "attention_mask": np.ones_like(ids)}).values())) for e in engines]
        assert np.max(np.abs(outs[0] - outs[1])) > 1e-3
        assert reported_facts([e.reported() for e in engines])["engine.execution_provider"] == "CPUExecutionProvider"
    finally:
        for e in engines:
            e.close()


def test_engines_that_report_different_settings_meet_no_single_value():
    facts = reported_facts(
        [{"execution_provider": "CPUExecutionProvider"}, {"execution_provider": "CUDAExecutionProvider"}]
    )
    assert facts["engine.execution_provider"] == "CPUExecutionProvider | CUDAExecutionProvider"


# ---- signed loads: bad files confirmed apart from signing.py; a file changed after its check --


@pytest.fixture
def signed(tmp_path):
    tiny = tiny_onnx(tmp_path / "tiny.onnx")
    manifest = write_manifest([tiny], tmp_path / "manifest.json")
    keys = tmp_path / "keys"
    keys.mkdir()
    generate_keypair(keys / "signer.pem", tmp_path / "signer.pub.pem")
    generate_keypair(keys / "other.pem", tmp_path / "other.pub.pem")
    sign_manifest(manifest, keys / "signer.pem")
    other_model = tiny_onnx(tmp_path / "other" / "tiny.onnx", scale=-1.0)
    copy = tmp_path / "toctou" / "tiny.onnx"
    copy.parent.mkdir()
    copy.write_bytes(tiny.read_bytes())
    return {
        "dir": tmp_path,
        "tiny": tiny,
        "manifest": manifest,
        "pub": tmp_path / "signer.pub.pem",
        "other": tmp_path / "other.pub.pem",
        "other_model": other_model,
        "copy": copy,
    }


def test_the_independent_check_confirms_only_files_that_really_fail(signed):
    s = signed
    assert not fails_independently(s["manifest"], s["pub"], s["tiny"])  # intact: nothing to confirm
    flipped = s["dir"] / "flipped" / "tiny.onnx"
    flipped.parent.mkdir()
    data = bytearray(s["tiny"].read_bytes())
    data[len(data) // 2] ^= 1
    flipped.write_bytes(bytes(data))
    assert fails_independently(s["manifest"], s["pub"], flipped)
    assert fails_independently(s["manifest"], s["other"], s["tiny"])  # signed by another key
    unlisted = s["dir"] / "unlisted.onnx"
    unlisted.write_bytes(s["tiny"].read_bytes())
    assert fails_independently(s["manifest"], s["pub"], unlisted)
    assert not fails_independently(s["manifest"], s["pub"], s["dir"] / "missing" / "tiny.onnx")  # no file, no evidence
    assert sha256_bytes(bytes(data)) != sha256_bytes(s["tiny"].read_bytes())


def _toctou(s, replacement: bytes):
    return {
        "replacement": replacement,
        "answers": {"checked": answer_of(s["tiny"]), "replacement": answer_of(s["other_model"])},
    }


def test_a_file_replaced_after_its_check_is_seen_changed_and_the_checked_bytes_load(signed):
    s = signed
    a = load_attempt(
        "replaced after its check",
        "loaded",
        (s["manifest"], s["pub"]),
        s["copy"],
        _toctou(s, s["other_model"].read_bytes()),
    )
    assert a["changed_after_check"] and a["outcome"] == "loaded" and a["deserialized"] == 1
    assert s["copy"].read_bytes() == s["other_model"].read_bytes()  # the file on disk really changed
    counts = summarize([a])
    assert counts["toctou.changed_after_check"] == 1 and counts["wrong_verdicts"] == 0


def test_a_loader_that_reads_the_path_again_loads_the_changed_file_and_is_a_wrong_verdict(signed, monkeypatch):
    s = signed

    class RereadsThePath(OrtEngine):
        def _deserialize(self, data, path):
            _Counter.count += 1
            _Counter.disk_sha256 = sha256_bytes(path.read_bytes())
            super()._deserialize(path.read_bytes(), path)  # time of use: the bytes on disk now

    monkeypatch.setattr(_Counter, "engine", classmethod(lambda cls: RereadsThePath()))
    a = load_attempt(
        "replaced after its check",
        "loaded",
        (s["manifest"], s["pub"]),
        s["copy"],
        _toctou(s, s["other_model"].read_bytes()),
    )
    assert a["changed_after_check"] and a["outcome"] == "loaded the changed file"
    assert summarize([a])["wrong_verdicts"] == 1


def test_a_file_that_does_not_change_after_its_check_is_no_evidence(signed):
    s = signed
    a = load_attempt(
        "not replaced", "loaded", (s["manifest"], s["pub"]), s["copy"], _toctou(s, s["tiny"].read_bytes())
    )  # "replaced" by its own bytes
    assert a["outcome"] == "loaded" and not a["changed_after_check"]
    assert summarize([a])["toctou.changed_after_check"] == 0


def test_refusal_attempts_count_as_confirmed_only_where_the_file_is_really_bad(signed):
    s = signed
    bad = load_attempt("signed by another key", "refused", (s["manifest"], s["other"]), s["tiny"])
    missing = load_attempt("file missing", "refused", (s["manifest"], s["pub"]), s["dir"] / "nowhere" / "tiny.onnx")
    assert bad["outcome"] == "refused" and bad["confirmed_bad"]
    assert missing["deserialized"] == 0 and not missing["confirmed_bad"]
    counts = summarize([bad, missing])
    assert counts["refusal_cases"] == 2 and counts["bad_files_confirmed"] == 1 and counts["deserialized_refused"] == 0
