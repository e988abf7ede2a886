"""Suite specs: every field checked, unknown fields refused, with file, field and fix."""

import copy

import pytest
import yaml

from harness.base.errors import BadInput
from harness.base.paths import suite_spec
from harness.model import ledger_parse, spec, yaml_fields

BASE = {
    "name": "demo",
    "description": "d",
    "claim": {"section": "2.5", "text": "t", "ids": ["C12"]},
    "target": "cluster",
    "cases": [{"name": "rb", "driver": "redis-cluster-benchmark", "params": {"tests": ["get"]}}],
    "profiles": {
        "local": {
            "repetitions": 2,
            "params": {"rb": {"requests": 1000}},
            "thresholds": [{"case": "rb", "metric": "GET.p99_ms", "op": "<", "value": 5, "unit": "ms", "reason": "r"}],
        }
    },
}


def parse(mutate=None):
    d = copy.deepcopy(BASE)
    if mutate:
        mutate(d)
    return spec.parse_suite(d)


def test_valid_spec_resolves_params_with_defaults():
    s = parse()
    params = s.case_params(s.case("rb"), "local")
    assert params["requests"] == 1000 and params["clients"] == 50 and params["tests"] == ["get"]


@pytest.mark.parametrize(
    "mutate,needle",
    [
        (lambda d: d.update(descripton="x"), "unknown field 'descripton' (did you mean 'description'?)"),
        (lambda d: d["cases"][0].update(parms={}), "unknown field 'parms' (did you mean 'params'?)"),
        (
            lambda d: d["cases"][0]["params"].update(client=3),
            "unknown parameter 'client' for driver 'redis-cluster-benchmark' (did you mean 'clients'?)",
        ),
        (lambda d: d["cases"][0]["params"].update(clients="many"), "expected int, got str"),
        (lambda d: d["cases"][0]["params"].update(tests=["gett"]), "'gett' is not one of"),
        (lambda d: d["profiles"]["local"]["thresholds"][0].update(op="=<"), "'=<' is not one of"),
        (lambda d: d["profiles"]["local"]["thresholds"][0].pop("reason"), "give the threshold a reason"),
        (
            lambda d: d["profiles"]["local"]["thresholds"][0].update(case="rbb"),
            "no case named 'rbb' (did you mean 'rb'?)",
        ),
        (lambda d: d["profiles"]["local"].update(repetitions=0), "must be between 1 and 1000"),
        (
            lambda d: d["profiles"]["local"].update(case_repetitions={"rb": 3}),
            "case_repetitions.rb: give a whole number from 1 to the profile's repetitions (2), got 3",
        ),
        (lambda d: d["profiles"]["local"].update(case_repetitions={"rb": "one"}), "got 'one'"),
        (
            lambda d: d["profiles"]["local"].update(case_repetitions={"rbb": 1}),
            "case_repetitions: no case named 'rbb' (did you mean 'rb'?)",
        ),
        (lambda d: d["cases"][0].update(driver="redis-bench"), "unknown driver 'redis-bench'"),
        (lambda d: d.update(target="none"), "needs a cluster; set target: cluster"),
        (lambda d: d.pop("cases"), "field 'cases' is missing"),
        (lambda d: d["profiles"]["local"]["params"].update(nosuch={}), "no case named 'nosuch'"),
        (lambda d: d["profiles"]["local"].update(cases=["rbb"]), "cases: no case named 'rbb' (did you mean 'rb'?)"),
        (lambda d: d["profiles"]["local"].update(cases=[]), "name at least one case"),
        (lambda d: d["profiles"]["local"].update(leaves_out="why"), "leaves_out: only with cases"),
        (
            lambda d: (
                d["cases"].append({"name": "rb2", "driver": "redis-cluster-benchmark"}),
                d["profiles"]["local"].update(cases=["rb2"], leaves_out="slow"),
            ),
            "'rb' is not one of the profile's cases (rb2); add it to",
        ),
        (
            lambda d: (
                d["cases"].append({"name": "rb2", "driver": "redis-cluster-benchmark"}),
                d["profiles"]["local"].update(cases=["rb"]),
            ),
            "leaves_out: say why the profile leaves out rb2",
        ),
    ],
)
def test_spec_errors_name_the_field_and_the_fix(mutate, needle):
    with pytest.raises(BadInput) as e:
        parse(mutate)
    assert needle in str(e.value)


def test_a_profile_that_leaves_out_a_case_says_why_and_suite_slash_case_still_runs_it():
    from harness.run.selection import plan

    lines = []
    (p,) = plan(["semantic-cache"], profile="local", log=lines.append)
    names = [c.name for c in p.suite.cases]
    assert "ttft" not in names and names == ["semantic", "gptcache", "embed-perf", "memory", "entity-keys"]
    assert not any(t.case == "ttft" for t in p.run.thresholds)
    assert any("leaves out ttft (the in-process TTFT stream" in m and "select semantic-cache/ttft" in m for m in lines)
    (one,) = plan(["semantic-cache/ttft"], profile="local", log=lines.append)
    assert [c.name for c in one.suite.cases] == ["ttft"] and one.run.cases[0].params["queries"] == 10
    (lab,) = plan(["semantic-cache"], profile="lab-a100", log=lines.append)
    assert "ttft" in [c.name for c in lab.suite.cases]  # the lab's profile runs it (on its GPU)


def test_unknown_profile_lists_the_known_ones():
    s = parse()
    with pytest.raises(BadInput, match="has no profile 'lab'.*its profiles: local"):
        s.profile("lab")


def test_every_shipped_suite_and_the_claims_ledger_validate():
    lines = ledger_parse.validate_paths([])
    assert any("redis-cluster" in line for line in lines)
    assert lines[-1].endswith("claims)")


def test_the_ledger_refuses_a_check_on_an_unknown_case(tmp_path):
    (tmp_path / "demo.yaml").write_text(yaml.safe_dump(BASE))
    (tmp_path / "claims.yaml").write_text(
        yaml.safe_dump(
            {
                "claims": [
                    {
                        "id": "C1",
                        "section": "1",
                        "text": "t",
                        "checks": [{"suite": "demo", "case": "nope", "metric": "m", "op": "<", "value": 1}],
                    }
                ]
            }
        )
    )
    with pytest.raises(BadInput, match="suite 'demo' has no case 'nope'"):
        ledger_parse.load_claims(tmp_path)


def test_redis_cluster_profiles_carry_the_source_numbers_verbatim():
    s = spec.load_suite_file(suite_spec("redis-cluster"))
    lab = s.profile("lab-a100")
    rb = s.case_params(s.case("redis-benchmark"), "lab-a100")
    assert rb["clients"] == 200 and rb["requests"] == 1000000 and rb["tests"] == ["get", "set"]
    mt = s.case_params(s.case("memtier"), "lab-a100")
    assert (mt["clients"], mt["threads"], mt["ratio"]) == (32, 8, "1:1")
    limits = {(t.metric, t.op, t.value) for t in lab.thresholds}
    assert ("GET.p99_ms", "<", 1.2) in limits and ("Totals.ops_per_sec", ">", 1800000) in limits
    assert all(t.reason for p in s.profiles.values() for t in p.thresholds)


def test_a_claimed_point_is_a_band_threshold(tmp_path):
    """lab-a100's verbatim points: `band: [low, high]` passes inside only (a one-sided point
    would pass a refuting value: c7.uniform <= 0.51 passed 0.4)."""
    import pytest as _pytest

    from harness.base.errors import BadInput
    from harness.model.spec import load_suite_file

    base = (
        "name: s\ndescription: d\nclaim: {section: '1', text: t, ids: [C1]}\ntarget: none\ncases:\n  - {name: c, driver: eviction-simulate}\n"
        "profiles:\n  local:\n    thresholds:\n      - {case: c, metric: m, %s, reason: r}\n"
    )
    (tmp_path / "s.yaml").write_text(base % "band: [0.46, 0.56]")
    t = load_suite_file(tmp_path / "s.yaml").profiles["local"].thresholds[0]
    assert [t.holds(x) for x in (0.4, 0.46, 0.51, 0.56, 0.6)] == [False, True, True, True, False]
    assert t.text() == "in [0.46, 0.56]"
    for bad, message in (
        ("band: [0.6, 0.5]", "above high"),
        ("band: [1, 2], op: '<', value: 3", "not both"),
        ("band: [1]", "expected \\[low, high\\]"),
    ):
        (tmp_path / "s.yaml").write_text(base % bad)
        with _pytest.raises(BadInput, match=message):
            load_suite_file(tmp_path / "s.yaml")


def test_loaded_specs_are_kept_until_a_file_changes_and_callers_get_their_own_copy(tmp_path):
    """spec's cache (harness.base.file_cache): a second load is the kept one, a rewrite of the
    same size right away is read again, and what a caller changes reaches no other caller."""
    from harness.base import file_cache

    path = tmp_path / "demo.yaml"
    path.write_text(yaml.safe_dump(BASE))
    (tmp_path / "claims.yaml").write_text(
        yaml.safe_dump(
            {
                "claims": [
                    {
                        "id": "C1",
                        "section": "1",
                        "text": "t",
                        "checks": [
                            {
                                "suite": "demo",
                                "case": "rb",
                                "metric": "GET.p99_ms",
                                "op": "<",
                                "value": 1,
                                "instrument": {"metric": "GET.rps", "op": ">", "value": 0, "text": "i"},
                                "better": "lower",
                                "observed": "o",
                                "no_mechanism_off": "r",
                            }
                        ],
                    }
                ]
            }
        )
    )
    first = spec.load_all_suites(tmp_path)
    first["demo"].cases.clear()  # a caller's change
    claims = ledger_parse.load_claims(tmp_path)
    claims[0].checks.clear()
    assert [c.name for c in spec.load_all_suites(tmp_path)["demo"].cases] == ["rb"]
    assert len(ledger_parse.load_claims(tmp_path)[0].checks) == 1
    assert any(k[0] == "suites" and k[1] == str(tmp_path.resolve()) for k in file_cache._KEPT)
    text = path.read_text()
    path.write_text(text.replace("description: d", "description: e"))  # same size, same timestamp tick
    assert spec.load_all_suites(tmp_path)["demo"].description == "e"


def test_specs_are_parsed_with_libyaml_where_it_is_installed():
    assert yaml_fields._LOADER is (yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader)
    with pytest.raises(yaml_fields.AliasRefused, match=r"aliases \(\*a\).*line 2"):
        yaml_fields.parse_yaml_text("x: &a [1]\ny: *a\n", "t")


def test_a_case_the_profile_repeats_less_runs_its_own_repetitions_unless_repeat_is_given():
    """serving's local profile runs the load sweep once and its other cases twice; --repeat
    gives every case the same number; the stored suite keeps the case's own number."""
    from harness.run.selection import plan

    (p,) = plan(["serving"], profile="local", log=lambda m: None)
    assert p.reps("sweep") == 1 and p.reps("prefix-cache") == 2 and p.repetitions == 2
    assert spec.SuiteRun.from_json("serving", p.run.to_json()).reps(p.run.cases[-1]) == 1
    (again,) = plan(["serving"], profile="local", repeat=3, log=lambda m: None)
    assert again.reps("sweep") == 3 and again.reps("prefix-cache") == 3
    s = parse(lambda d: d["profiles"]["local"].update(case_repetitions={"rb": 1}))
    assert s.as_run("local", 2, {"rb": {}}).cases[0].repetitions == 1
