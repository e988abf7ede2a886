"""Issue 40, class 2 "Secrets leave" (all but HTTP redirects): a password in an endpoint URL,
a query key, an Authorization header or an API key in the environment reaches no refusal
line, no kept command line and no raw file, the peer's (vLLM's `bench serve` client) own
output included.

Passwords are generated (hypothesis) as marker tokens `PW<6 digits>` joined by what breaks
naive URL handling (unencoded '#', '?', '/', '@', '%', ':', spaces, quotes, unicode): no
message may hold a marker, so not even a piece of a password is shown.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path
from urllib.parse import quote, unquote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.base.errors import BadInput
from harness.experiments.serving import peer_case
from harness.infra import secret_store, url_redaction
from harness.infra.process import run_tool
from harness.infra.redaction import redact, redact_command
from harness.infra.secret_store import REDACTED
from harness.infra.serving_engine import external
from harness.infra.target import LlmEndpoint
from harness.infra.url_redaction import url_for_display
from tests import TESTS

MARK = "PW"
TOKEN = st.integers(100000, 999999).map(lambda n: f"{MARK}{n}")
HOSTILE = st.one_of(
    st.sampled_from(
        [
            "#",
            "?",
            "/",
            "@",
            "%",
            ":",
            " ",
            "é",
            "%40",
            "%2F",
            "%23",
            "%zz",
            "&",
            "=",
            "'",
            '"',
            "\\",
            "\uff20",
            "://",
            ";",
            "",
            "\t",
            "[",
            "]",
            "?api_key=",
            "#@",
        ]
    ),
    st.text(max_size=3),
)
PASSWORD = st.lists(st.tuples(TOKEN, HOSTILE), min_size=1, max_size=4).map(lambda xs: "".join(t + s for t, s in xs))
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# Every way HARNESS_LLM_URL / HARNESS_LLM_MODEL is refused, each with the password in it
# (bad scheme, bad port, port 0, a query, a fragment, a bad host, no scheme, a lone token,
# a space in the path, a model with spaces, no model), and accepted ones (no port, IPv6).
REFUSALS = [
    ("ftp://user:{pw}@127.0.0.1:8000", "smollm2"),
    ("http://user:{pw}@127.0.0.1:99999", "smollm2"),
    ("http://user:{pw}@127.0.0.1:8x0", "smollm2"),
    ("http://user:{pw}@127.0.0.1:0", "smollm2"),
    ("http://user:{pw}@127.0.0.1:8000/v1?api_key={pw}", "smollm2"),
    ("http://user:{pw}@127.0.0.1:8000/#{pw}", "smollm2"),
    ("http://user:{pw}@-oProxy:8000", "smollm2"),
    ("user:{pw}@127.0.0.1:8000", "smollm2"),
    ("http://{token}@127.0.0.1:8000", "smollm2"),
    ("http://user:{pw}@127.0.0.1:8000/base path", "smollm2"),
    ("http://user:{pw}@127.0.0.1:8000", "bad model; rm -rf"),
    ("http://user:{pw}@127.0.0.1:8000", ""),
    ("http://user:{pw}@127.0.0.1", ""),
    ("HTTPS://user:{pw}@[::1]:8000/", ""),
]


@pytest.fixture(autouse=True)
def _own_secrets(monkeypatch):
    """Each test starts with no secret remembered (and none from the environment)."""
    monkeypatch.setattr(secret_store, "_SECRETS", set())
    for name in secret_store.SECRET_ENV + ("OPENAI_API_KEY", "VLLM_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        monkeypatch.delenv(name, raising=False)


def assert_hidden(text: str, secret: str) -> None:
    """Neither the secret (as given, percent-encoded or decoded) nor any piece of it."""
    for form in {secret, quote(secret), quote(secret, safe=""), unquote(secret)}:
        assert form not in text, (form, text)
    assert MARK not in text, text


def _url(template: str, password: str) -> str:
    """The template with the password in it; a lone token (`http://TOKEN@host`) has no ':'
    (before a ':' is a user name, which a URL shows: `http://user:***@host`)."""
    return template.format(pw=password, token=password.replace(":", "%3A"))


def _what_is_said(url: str, model: str) -> str:
    """The line a refusal prints, or what is shown of an accepted endpoint."""
    try:
        found = external.from_env({"HARNESS_LLM_URL": url, "HARNESS_LLM_MODEL": model})
    except BadInput as e:
        return str(e)
    return url_for_display(found["external"].base_url)


@SETTINGS
@given(password=PASSWORD)
@pytest.mark.parametrize("template, model", REFUSALS)
def test_no_refusal_line_shows_a_password(template, model, password):
    """The issue's example: `http://user:pa#ss@host:8000` was printed whole (the parser ends the
    host part at '#', so the password was not taken for one); a port error echoed the
    password's first part. Now only scheme://***@host, or no part of the URL at all."""
    said = _what_is_said(_url(template, password), model)
    assert said
    assert_hidden(said, password)


@SETTINGS
@given(password=PASSWORD)
def test_the_validator_shows_only_scheme_and_host(password):
    from harness.infra.target import check_llm_url

    for template, _ in REFUSALS:
        try:
            url = check_llm_url(_url(template, password), "HARNESS_LLM_URL")
        except BadInput as e:
            assert_hidden(str(e), password)
            assert "user:" not in str(e)  # no part of the userinfo: not even the user name
        else:
            assert_hidden(url_for_display(url), password)
            assert_hidden(redact(f"GET {url}/v1/models failed"), password)  # remembered as a secret


@pytest.mark.parametrize(
    "url",
    [
        "http://user:PW1#PW2@host:8000",
        "http://user:PW1/PW2?PW3@host",
        "http://user:12/PW1@127.0.0.1",
        "http://us@PW1:PW2#PW3@127.0.0.1:8000/v1",
        "http://user:PW1@PW2#@127.0.0.1:8000/v1?api_key=PW3@PW4#",
        "http://PW1://@127.0.0.1:8000",
    ],
)
def test_the_issue_examples_are_refused_without_their_password(url):
    """A password with an unencoded '#', '?', '/' (or '@', '://'): refused, and no piece of it shown."""
    with pytest.raises(BadInput, match="percent-encode") as e:
        external.from_env({"HARNESS_LLM_URL": url, "HARNESS_LLM_MODEL": "m"})
    assert MARK not in str(e.value) and "12/" not in str(e.value)


QUERY_NAMES = [
    "api_key",
    "key",
    "token",
    "access_token",
    "password",
    "secret",
    "sig",
    "X-Amz-Signature",
    "apiKey",
    "client_secret",
    "auth",
]


@SETTINGS
@given(value=TOKEN, name=st.sampled_from(QUERY_NAMES))
def test_a_query_key_is_never_printed(value, name):
    """`?api_key=` and its kind: never in a refusal line, a displayed URL or redacted text."""
    url = f"http://127.0.0.1:8000/v1?model=m&{name}={value}"
    with pytest.raises(BadInput, match="query") as e:
        external.from_env({"HARNESS_LLM_URL": url, "HARNESS_LLM_MODEL": "m"})
    assert_hidden(str(e.value), value)
    assert_hidden(url_for_display(url), value)
    assert url_for_display(url).endswith(f"{name}={REDACTED}") and "model=m" in url_for_display(url)
    secret_store._SECRETS.clear()
    assert_hidden(redact(f"error: GET {url} answered 401"), value)
    assert_hidden(redact(f"GET /v1/models?{name}={value} HTTP/1.1"), value)


def test_a_count_of_tokens_is_no_secret():
    text = "max_tokens=16 num_prompts=12 tokenizer='/m' session_fraction=0.004 ?max_tokens=5&model=m"
    assert redact(text) == text


@pytest.mark.parametrize(
    "text, secret",
    [
        ("Authorization: Bearer sk-live-1234567890", "sk-live-1234567890"),
        ("headers={'Authorization': 'Basic dXNlcjpwYXNz'}", "dXNlcjpwYXNz"),
        ("curl -H 'X-Api-Key: k-0987654321' http://h:1", "k-0987654321"),
        ("sending with bearer tok_abcdefghij", "tok_abcdefghij"),
        ("Namespace(base_url='http://127.0.0.1:8000', api_key='sk-abcdef', max_tokens=16)", "sk-abcdef"),
        ("OPENAI_API_KEY=sk-envvalue HF_TOKEN=hf_tokvalue", "sk-envvalue"),
        ('{"password": "hunter2-long", "model": "m"}', "hunter2-long"),
    ],
)
def test_headers_and_named_secrets_are_hidden(text, secret):
    assert secret not in redact(text) and REDACTED in redact(text)


def test_api_keys_in_the_environment_are_known_secrets(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")
    assert redact("the client sent sk-from-the-environment") == f"the client sent {REDACTED}"
    assert "sk-from-the-environment" not in " ".join(redact_command(["vllm", "--api-key", "sk-from-the-environment"]))


def test_an_endpoint_remembers_its_password_in_every_process():
    """A case's own process builds the endpoint from its job (LlmEndpoint.from_json): the
    password is a secret there too, so what a child echoes of it is hidden."""
    LlmEndpoint.from_json({"base_url": "http://user:S3cr%23t-pw@127.0.0.1:8000", "model": "m"})
    assert redact("auth failed: S3cr#t-pw / S3cr%23t-pw") == f"auth failed: {REDACTED} / {REDACTED}"


def test_a_tool_run_keeps_neither_its_password_nor_its_key(tmp_path, monkeypatch):
    """run_tool: the kept command line and the tool's echoed argv and environment."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-tool-key-42")
    url = "http://user:Tool%2FPw-77@127.0.0.1:9"
    LlmEndpoint(url, "m")
    cmd = [
        sys.executable,
        "-c",
        "import os, sys; print(sys.argv); print(os.environ['OPENAI_API_KEY'], file=sys.stderr)",
        "--base-url",
        url,
        "--header",
        "Authorization: Bearer sk-header-1234567",
    ]
    res = run_tool(cmd, tmp_path, "echo", 20, env=dict(os.environ))
    assert res.ok
    kept = "".join(f.read_text() for f in res.files)
    assert "--base-url" in kept and "127.0.0.1:9" in kept  # the echo is there
    for secret in ("Tool%2FPw-77", "Tool/Pw-77", "sk-tool-key-42", "sk-header-1234567"):
        assert secret not in kept and secret not in res.stdout + res.stderr + res.command


# ---- the peer: vLLM's benchmark client -------------------------------------------------------
# A stand-in for harness/experiments/serving/vllm_peer.py that ONLY echoes what it was given
# (its argv, the config it read, the API key in its environment) on stdout, on stderr and in
# the files the real one writes, as vLLM's client prints its arguments; it follows the
# harness's own handshake (prompts file, go-K/done-K, result file) so that the Peer runs
# whole. It invents no vLLM output beyond that echo.
FAKE_PEER = textwrap.dedent("""
    import json, os, sys, time
    cfg = json.load(open(sys.argv[1]))
    echo = {"argv": sys.argv, "config": cfg, "OPENAI_API_KEY": os.environ.get("OPENAI_API_KEY")}
    json.dump(echo, open(os.environ["FAKE_PEER_RECEIVED"], "w"))
    print("Namespace(base_url=%r, model=%r)" % (cfg["base_url"], cfg["model"]), flush=True)
    print(json.dumps(echo), file=sys.stderr, flush=True)
    json.dump([{"prompt": [1, 2], "timestamp": 0.0, "output_len": 2}], open(cfg["prompts_out"] + ".tmp", "w"))
    os.replace(cfg["prompts_out"] + ".tmp", cfg["prompts_out"])
    out = {}
    for k in range(cfg["rounds"]):
        end = time.monotonic() + 20
        while not os.path.exists(f"{cfg['handshake_dir']}/go-{k}") and time.monotonic() < end:
            time.sleep(0.02)
        print("round", k, cfg["base_url"], os.environ.get("OPENAI_API_KEY"), flush=True)
        json.dump(echo, open(os.path.join(cfg["result_dir"], f"vllm_bench_{k}.json"), "w"))
        out[str(k)] = {"echo": echo, "errors": ["request to %s" % cfg["base_url"]]}
        open(f"{cfg['handshake_dir']}/done-{k}", "w").close()
    json.dump(out, open(cfg["out"], "w"))
""")


class _Ctx:
    def __init__(self, raw_dir: Path):
        self.raw_dir = raw_dir

    def raw_path(self, name: str) -> Path:
        return self.raw_dir / name


@pytest.mark.parametrize("password", ["s3cret-PW9", "p%23ss%2Fw%3Fx-PW1", "p@ss:w0rd-PW2", "pässwörd-PW3"])
def test_the_peers_raw_files_hold_no_password_and_no_key(tmp_path, monkeypatch, password):
    """The issue's example: with HARNESS_LLM_URL=http://user:password@..., the peer case wrote
    the password into raw/vllm_bench.config.json and vllm_bench.stdout (vLLM's client prints
    its arguments). The client still gets the URL and the key; nothing kept holds them."""
    fake = tmp_path / "fake_peer.py"
    fake.write_text(FAKE_PEER)
    received = tmp_path / "received.json"
    monkeypatch.setattr(peer_case, "PEER_SCRIPT", fake)
    monkeypatch.setattr(peer_case.install, "venv_python", lambda *a: Path(sys.executable))
    monkeypatch.setenv("FAKE_PEER_RECEIVED", str(received))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-peer-key-31337")
    raw, hs = tmp_path / "raw", tmp_path / "hs"
    raw.mkdir()
    hs.mkdir(mode=0o700)
    ep = external.from_env({"HARNESS_LLM_URL": f"http://user:{password}@127.0.0.1:8000", "HARNESS_LLM_MODEL": "m"})
    url = ep["external"].base_url
    secret_store._SECRETS.clear()  # the case's own process: only what the endpoint itself remembers
    ep = LlmEndpoint.from_json(ep["external"].to_json())
    cfg = {
        "mode": "bench",
        "base_url": ep.base_url,
        "model": ep.model,
        "tokenizer": "/t",
        "dataset": str(raw / "s"),
        "multiplier": 0.001,
        "num_prompts": 1,
        "chunk_tokens": 16,
        "seed": 0,
        "result_dir": str(raw),
        "rounds": 2,
        "handshake_dir": str(hs),
        "prompts_out": str(raw / "prompts.json"),
        "out": str(raw / "vllm_result.json"),
    }
    peer = peer_case.Peer(_Ctx(raw), cfg, {"timeout_s": 30})
    try:
        assert peer.prompts()[0]["prompt"] == [1, 2]
        for k in range(2):
            peer.round(k)
        results = peer.results()
    finally:
        peer.close()
    got = json.loads(received.read_text())
    assert got["config"]["base_url"] == url and got["OPENAI_API_KEY"] == "sk-peer-key-31337"  # it has them
    assert len(results) == 2
    kept = {f.name: f.read_text(errors="replace") for f in raw.iterdir()}
    assert {"vllm_bench.config.json", "vllm_bench.stdout", "vllm_bench.stderr", "vllm_bench_1.json"} <= set(kept)
    assert "Namespace(base_url='http://user:***@127.0.0.1:8000'" in kept["vllm_bench.stdout"]  # the echo was kept
    for name, text in kept.items():
        for secret in (password, unquote(password), "sk-peer-key-31337"):
            assert secret not in text, (name, secret)
    json.loads(kept["vllm_result.json"])  # still the JSON it was


# ---- red team, round 2: what decides what is hidden ----------------------------------------------
@SETTINGS
@given(
    text=st.one_of(
        st.text(max_size=60),
        PASSWORD.map(lambda pw: f"http://x:{pw}@evil.example/"),
        st.sampled_from(["http://x:e@evil.example/", "HTTP/1.1 xyz http://u:5@z/", "https://T0K@h/"]),
    )
)
def test_showing_a_url_remembers_nothing(text):
    """A server's Location (`http://x:e@evil.example/`) or error text went through display(),
    which remembered its password as a secret: redact() then turned every 'e' into ***
    ("pr***fix cach*** hit rat***"). Showing a URL now hides its credentials and remembers nothing."""
    from harness.infra import http_get

    for show in (url_for_display, http_get.display, redact):
        show(text)
    assert secret_store.known_secrets() == []
    assert redact("prefix cache hit rate: 87.5") == "prefix cache hit rate: 87.5"


def _round_trip(run_dir: Path) -> str:
    """The schema-1 fixture loaded, written back as a run writes it, and loaded again (the
    folder must still be the harness's own): results.json as written."""
    import shutil

    from harness.model.stored_run import load_run, write_manifest, write_results

    shutil.copytree(TESTS / "fixtures" / "results-v1" / "run", run_dir)
    data = load_run(run_dir)
    write_manifest(run_dir, dict(data.manifest.to_json()))
    write_results(run_dir, data.records, data.suites, data.claims)
    again = load_run(run_dir)
    assert [r.to_json() for r in again.records] == [r.to_json() for r in load_run(run_dir).records]
    return (run_dir / "results.json").read_text()


@pytest.mark.parametrize("password", ["e", "ok", "1", "run"])
def test_a_short_password_is_hidden_where_it_is_a_password_and_nowhere_else(tmp_path, password):
    """HARNESS_LLM_URL=http://user:e@host: every 'e' of results.json became *** (its keys too:
    "sch***ma_v***rsion"), and the harness could not read its own results folder (exit 2).
    A secret shorter than MIN_BARE_SECRET is hidden only where it stands as a password."""
    assert len(password) < secret_store.MIN_BARE_SECRET
    without = _round_trip(tmp_path / "without")
    LlmEndpoint(f"http://user:{password}@127.0.0.1:9", "m")
    assert _round_trip(tmp_path / "with") == without  # not one letter changed
    for text, hidden in (
        (f"GET http://user:{password}@127.0.0.1:9/v1/models", "http://user:***@127.0.0.1:9/v1"),
        (f"vllm bench --api-key {password} --model m", "--api-key *** --model m"),
        (f"--password={password}", "--password=***"),
        (f"api_key='{password}'", "api_key='***'"),
        (f"Authorization: Basic {password}", "Authorization: Basic ***"),
    ):
        assert hidden in redact(text), text
    assert redact_command(["x", "--api-key", password]) == ["x", "--api-key", REDACTED]


def test_a_secret_never_rewrites_the_keys_of_the_results(tmp_path):
    """A long secret that is also a word of the schema ("version", "repetition") is hidden
    in values, never in the keys the harness reads back."""
    without = json.loads(_round_trip(tmp_path / "without"))
    for word in ("repetition", "_version", "failed", "skipped", "records"):
        secret_store.add_secret(word)
    written = json.loads(_round_trip(tmp_path / "with"))
    assert written.keys() == without.keys() and written["records"][0].keys() == without["records"][0].keys()


PROM_LEAKS = [
    "admin:Pr0mSecret@127.0.0.1:9",
    "//admin:Pr0mSecret@127.0.0.1:9090",
    "http:/admin:Pr0mSecret@127.0.0.1:9090",
    "http:admin:Pr0mSecret@127.0.0.1:9090",
    "http://Pr0mSecret/X10@prom",
    'http://admin:Pr0m"Secret@127.0.0.1:9',
    "http://admin:Pr0mSecret@127.0.0.1:9/?api_key=Pr0mSecret",
    "ftp://admin:Pr0mSecret@127.0.0.1:9",
]


@pytest.mark.parametrize("url", PROM_LEAKS)
def test_the_prometheus_url_is_checked_before_anything_shows_it(url, monkeypatch):
    """HARNESS_PROMETHEUS_URL='admin:Pr0mSecret@127.0.0.1:9' was shown whole ("monitoring:
    using Prometheus at admin:Pr0mSecret@...") and kept in results.json and report.html.
    Now it is refused as HARNESS_LLM_URL is: exit 2, no part of the credentials."""
    from harness.infra import http_get
    from harness.infra.monitoring import query

    monkeypatch.setenv("HARNESS_PROMETHEUS_URL", url)
    with pytest.raises(BadInput) as e:
        query.configured_url("local")
    assert e.value.exit_code == 2 and "HARNESS_PROMETHEUS_URL" in str(e.value)
    assert "admin" not in str(e.value)  # a refusal shows no part of the userinfo
    for said in (str(e.value), http_get.display(url), url_for_display(url)):
        assert "Pr0m" not in said and "Secret" not in said, said
    with pytest.raises(http_get.HttpGetError) as e:  # asked anyway: not shown
        http_get.get(url, timeout=2)
    assert "Pr0m" not in str(e.value) and "Secret" not in str(e.value)
    if http_get.display(url) == url_redaction.UNPARSED_URL:  # no request made, not even a DNS lookup of `Pr0mSecret`
        assert "percent-encode" in str(e.value)


def test_a_good_prometheus_url_is_taken_and_its_password_remembered(monkeypatch):
    from harness.infra.monitoring import query

    monkeypatch.setenv("HARNESS_PROMETHEUS_URL", "http://admin:Pr0m%2FSecret@127.0.0.1:9090/")
    assert query.configured_url("local") == "http://admin:Pr0m%2FSecret@127.0.0.1:9090"
    assert redact("echo Pr0m/Secret Pr0m%2FSecret") == f"echo {REDACTED} {REDACTED}"


def test_an_inventory_monitoring_host_with_credentials_is_refused_without_them(tmp_path):
    from harness.infra.inventory import prometheus_url

    inv = tmp_path / "hosts.yml"
    inv.write_text(
        "all:\n  children:\n    monitoring:\n      hosts:\n        m1:\n"
        "          ansible_host: 'admin:Pr0mSecret@10.0.0.5'\n"
    )
    with pytest.raises(BadInput) as e:
        prometheus_url(inv)
    assert "Pr0mSecret" not in str(e.value) and "admin" not in str(e.value)


@pytest.mark.parametrize(
    "password", ["p\"w'qSECRETX1", "Bk\\SECRETX2", "pw@evil.com\\", "a`SECRETX3", "a<SECRETX4>", "p\u0085SECRETX5"]
)
def test_a_password_no_reader_takes_the_same_way_is_refused_with_the_fix(password):
    """`http://user:p"w'q...@host`: a child printing its args as repr or JSON escapes the
    quotes, so the secret was no longer found; a backslash passed the check and aiohttp
    refused the URL at the first request, blaming the server (exit 3). Now exit 2, naming
    the fix, showing no part of the credentials."""
    url = f"http://alice9:{password}@127.0.0.1:8000"
    with pytest.raises(BadInput, match="percent-encode") as e:
        external.from_env({"HARNESS_LLM_URL": url, "HARNESS_LLM_MODEL": "m"})
    assert e.value.exit_code == 2 and "SECRETX" not in str(e.value) and "alice9" not in str(e.value)
    assert "Bk" not in str(e.value) and "evil" not in str(e.value)


def test_a_secret_is_hidden_as_repr_and_json_escape_it():
    secret_store.add_secret("pw\u00e9\\SECRET\tX")
    for echoed in (
        repr({"pw": "pw\u00e9\\SECRET\tX"}),
        json.dumps({"pw": "pw\u00e9\\SECRET\tX"}),
        json.dumps({"pw": "pw\u00e9\\SECRET\tX"}, ensure_ascii=False),
    ):
        assert "SECRET" not in redact(echoed), echoed


# ---- issue 53, class 1: a credential in another encoding ------------------------------------------
def _lower_hex(text: str) -> str:
    import re

    return re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), text)


def _forms(user: str, password: str) -> dict[str, str]:
    """Every encoding the credentials travel in (what an HTTP client sends, what a server echoes)."""
    import base64

    out = {
        "plain": password,
        "pct": quote(password, safe=""),
        "pct-lower": _lower_hex(quote(password, safe="")),
        "pct-slash": quote(password),
        "plus": __import__("urllib.parse").parse.quote_plus(password),
    }
    for what, data in (("pair", f"{user}:{password}".encode()), ("alone", password.encode())):
        for alphabet, encode in (("std", base64.b64encode), ("url", base64.urlsafe_b64encode)):
            text = encode(data).decode()
            out[f"b64-{what}-{alphabet}"] = text
            out[f"b64-{what}-{alphabet}-unpadded"] = text.rstrip("=")
    return out


@pytest.mark.parametrize("password", ["pw-s3cr#t/91", "PW123456?x&y=z", "pässwörd-PW3~+", "a b>c<PW77"])
def test_every_encoding_of_a_noted_password_is_hidden(password):
    """Only the decoded form was hidden: base64 of `user:password` (an echoed Authorization
    header), base64 of the password, its percent-encoded forms went through whole."""
    url_redaction.note_url_secrets(f"http://alice:{quote(password, safe='')}@127.0.0.1:8000")
    for what, form in _forms("alice", password).items():
        for text in (f"server said {form}", f'{{"got": "{form}"}}', f"x{form}y"):
            assert form not in redact(text), (what, text, redact(text))
    import base64

    for pad in ("", "x", "xy"):  # inside a longer base64 text, at each of the three alignments
        blob = base64.b64encode(f"{pad}alice:{password} and more".encode()).decode()
        assert base64.b64encode(password.encode()).decode()[2:-4] not in redact(blob), (pad, redact(blob))
        assert REDACTED in redact(blob)


def test_basic_credentials_are_hidden_without_their_header_and_a_word_after_basic_is_not():
    import base64

    value = base64.b64encode(b"bob:an0ther-secret").decode()
    for text in (f"got Basic {value}", f"'basic {value}'", f"BASIC {value.rstrip('=')}"):
        assert value.rstrip("=") not in redact(text) and REDACTED in redact(text), redact(text)
    for text in ("basic statistics of the run", "Basic Authentication failed", "basic dGVzdA== (no colon)"):
        assert redact(text) == text


def _echo_server():
    """A server that answers every completion with 401 and echoes the credentials it was
    sent: the Authorization header, its base64 alone, the password percent-encoded in lower
    case and its own base64 (URL-safe, no padding), as a hostile or careless server does."""
    import base64

    from tests.system.test_hostile_http import MODELS, Server, reply

    def respond(server, path, conn):
        auth = server.requests[-1][1].get("authorization", "")
        if path.startswith("/v1/completions"):
            user, _, pw = base64.b64decode(auth.split(" ")[-1]).decode().partition(":")
            echo = {
                "got": auth,
                "raw": auth.split(" ")[-1],
                "pct": _lower_hex(quote(pw, safe="")),
                "b64": base64.urlsafe_b64encode(pw.encode()).decode().rstrip("="),
            }
            reply(conn, 401, json.dumps(echo, separators=(",", ":")).encode())
        elif path.startswith("/metrics"):
            reply(conn, 200, b'vllm:cache_config_info{block_size="16",num_gpu_blocks="1000"} 1\n')
        else:
            reply(conn, 200, MODELS)

    return Server(respond)


def _publish_in_a_fresh_process(run_dir: Path, *args) -> str:
    """`harness report RUN_DIR` (and more commands) in a process that knows no secret: what
    it writes comes from the folder alone. Returns everything the commands printed."""
    import subprocess

    from tests import REPO

    env = {k: v for k, v in os.environ.items() if k not in secret_store.SECRET_ENV + secret_store.KEY_ENV}
    out = []
    for cmd in (["report", str(run_dir)], *args):
        p = subprocess.run(
            [sys.executable, "-m", "harness", *cmd], capture_output=True, text=True, cwd=REPO, env=env, timeout=120
        )
        assert "Traceback" not in p.stderr, p.stderr[-2000:]
        out.append(p.stdout + p.stderr)
    return "\n".join(out)


def _kept(run_dir: Path) -> dict[str, str]:
    return {f.name: f.read_text(errors="replace") for f in run_dir.rglob("*") if f.is_file()}


def test_an_echoed_authorization_header_reaches_no_file_of_the_run(tmp_path):
    """The issue's example: a server that echoes the Authorization header put base64 of
    `user:password` into the record's reason, and from there into results.json, report.html,
    junit.xml and verdicts.json."""
    pytest.importorskip("aiohttp")
    from harness.infra.target import Target
    from harness.model.driver_contract import CaseContext, get
    from harness.model.stored_run import write_manifest, write_results
    from harness.run import runner
    from tests.stored_runs import suite_run

    password = "pw-s3cr#t/91"
    run_dir = tmp_path / "20260101-000000-echo01"
    (run_dir / "raw").mkdir(parents=True)
    with _echo_server() as srv:
        url = srv.url(f"alice:{quote(password, safe='')}@")
        ep = LlmEndpoint(url, "smollm2", managed=False)
        d = get("serving-prefix-cache")
        ctx = CaseContext(
            "serving",
            "prefix-cache",
            1,
            "local",
            d.resolve_params("prefix-cache", {}),
            run_dir / "raw",
            Target("local", engines={"external": ep}),
            log=lambda m: None,
        )
        outcome, _ = runner._outcome(d, ctx, run_dir)
    assert outcome.status == "failed" and "HTTP 401" in outcome.reason, outcome.reason
    write_manifest(
        run_dir,
        {
            "run_id": run_dir.name,
            "profile": "local",
            "target": "local",
            "suites": ["kv"],
            "started": 1_767_225_600.0,
            "ended": 1_767_225_660.0,
            "engines": {"external": {"base_url": url, "model": "smollm2"}},
        },
    )
    write_results(run_dir, [outcome.stored(suite="kv", case="bench", repetition=1)], {"kv": suite_run()}, [])
    said = _publish_in_a_fresh_process(run_dir)
    kept = _kept(run_dir)
    assert {"results.json", "report.html", "junit.xml", "verdicts.json"} <= set(kept)
    assert "HTTP 401" in kept["results.json"] and "HTTP 401" in kept["junit.xml"]  # the reason is kept
    for what, form in _forms("alice", password).items():
        for name, text in {**kept, "output": said}.items():
            assert form not in text, (what, form, name)


def _hand_edited_folder(root: Path, password: str, i: int = 1) -> Path:
    """A results folder of an older version, or edited by hand: the password in clear in the
    manifest (target, engines) and alone, and as base64, in a record's reason and its verdicts.json."""
    import base64

    from harness.model.stored_run import Metric, Record, write_manifest, write_results
    from tests.stored_runs import suite_run

    d = root / f"2026010{i}-000000-edited{i}"
    (d / "raw").mkdir(parents=True)
    write_manifest(
        d,
        {
            "run_id": d.name,
            "profile": "local",
            "target": "local",
            "suites": ["kv"],
            "started": 1_767_225_600.0 + 86400 * i,
            "ended": 1_767_225_660.0 + 86400 * i,
        },
    )
    recs = [
        Record(suite="kv", case="bench", repetition=r, metrics={"get.rps": Metric(100000.0 + r, "req/s", "higher")})
        for r in (1, 2)
    ]
    recs.append(Record("failed", "x", suite="kv", case="other", repetition=1))
    write_results(d, recs, {"kv": suite_run(("bench", "other"))}, [])
    url = f"http://alice:{quote(password, safe='')}@127.0.0.1:8000"
    pair = base64.b64encode(f"alice:{password}".encode()).decode()
    man = json.loads((d / "manifest.json").read_text())
    man.update({"target": url, "engines": {"external": {"base_url": url, "model": "m", "note": f"pw {password}"}}})
    (d / "manifest.json").write_text(json.dumps(man))
    res = json.loads((d / "results.json").read_text())
    res["records"][-1]["reason"] = f"login as alice with {password} failed; server echoed {pair}"
    (d / "results.json").write_text(json.dumps(res))
    return d


def test_a_password_in_an_older_or_edited_folder_is_not_copied_out(tmp_path):
    """A folder whose manifest holds `http://alice:PASSWORD@host` (engines, target) and whose
    records hold the password and its base64: report.html, verdicts.json, junit.xml, the
    history page, `harness measurements` and `harness compare` show none of them."""
    password = "hunter2-PW9"
    older = _hand_edited_folder(tmp_path / "runs", password, 1)
    newer = _hand_edited_folder(tmp_path / "runs", password, 2)
    said = _publish_in_a_fresh_process(
        newer,
        ["report", str(older)],
        ["measurements", str(newer)],
        ["history", str(tmp_path / "runs"), "--out", str(tmp_path / "hist")],
    )
    vj = json.loads((older / "verdicts.json").read_text())  # an edited verdicts.json of the older run
    vj["exit_reason"] = f"edited: {password}"
    (older / "verdicts.json").write_text(json.dumps(vj))
    said += _publish_in_a_fresh_process(
        newer, ["report", str(newer), "--baseline", str(older)], ["compare", str(older), str(newer), "--format", "json"]
    )
    written = {
        f"{d.name}/{n}": t
        for d in (older, newer)
        for n, t in _kept(d).items()
        if n not in ("manifest.json", "results.json", "verdicts.json") or d == newer and n == "verdicts.json"
    }
    written.update({f"hist/{n}": t for n, t in _kept(tmp_path / "hist").items()})
    assert any(n.endswith("report.html") for n in written) and any(n.startswith("hist/") for n in written)
    assert "alice:***@" in written[f"{newer.name}/report.html"]
    for what, form in _forms("alice", password).items():
        for name, text in {**written, "output": said}.items():
            assert form not in text, (what, form, name)
