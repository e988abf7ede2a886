#!/usr/bin/env python3
"""Starts, waits for and stops one vLLM server on this host (installed by the llm_engine
role as /etc/llm-engine/llm-engine-ctl; standard library only, runs with the host's python3).

  llm-engine-ctl start  CONF      start it as a plain process (no systemd) unless it runs
  llm-engine-ctl wait   CONF      until GET /v1/models answers; else (it exited, or the start
                                  timeout passed: then it is stopped) the log's tail, exit 1
  llm-engine-ctl stop   CONF      the API server, EngineCore and the worker: TERM, then KILL
  llm-engine-ctl status CONF      the pids of the engine's processes (JSON)

CONF is the JSON the role writes: argv, env, host, port, pidfile, log, unit, timeouts.
Every command prints one JSON line; `changed` says whether it changed anything.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request


def _read(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, session id) of a live process; None when it is gone or a zombie."""
    text = _read(f"/proc/{pid}/stat")
    if not text:
        return None
    fields = text[text.rfind(")") + 2 :].split()
    if fields[0] == "Z":
        return None
    return int(fields[1]), int(fields[3])


def _is_engine(pid: int) -> bool:
    cmd = _read(f"/proc/{pid}/cmdline").replace("\0", " ")
    return "vllm" in cmd.lower() or "VLLM" in _read(f"/proc/{pid}/comm")


def _main_pid(conf: dict) -> int | None:
    """The API server's pid: systemd's MainPID, or the pid file (only if it is vLLM)."""
    if conf.get("unit"):
        out = subprocess.run(
            ["systemctl", "show", "-p", "MainPID", "--value", conf["unit"]], capture_output=True, text=True
        ).stdout.strip()
        return int(out) if out.isdigit() and int(out) > 0 else None
    text = _read(conf["pidfile"]).strip()
    if text.isdigit() and _stat(int(text)) and _is_engine(int(text)):
        return int(text)
    return None


def engine_pids(conf: dict) -> list[int]:
    """The engine's live processes: the API server, its descendants, and whatever is left of
    its session (EngineCore and the worker outlive a killed API server)."""
    main = _main_pid(conf)
    leader = main
    if main is None and not conf.get("unit"):
        text = _read(conf["pidfile"]).strip()
        leader = int(text) if text.isdigit() else None
    if leader is None:
        return []
    procs = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (st := _stat(int(name))):
            procs[int(name)] = st
    found = {p for p, (_, sid) in procs.items() if sid == leader and _is_engine(p)}
    if main is not None:
        found.add(main)
        frontier = [main]
        while frontier:
            parent = frontier.pop()
            kids = [p for p, (ppid, _) in procs.items() if ppid == parent and p not in found]
            found.update(kids)
            frontier.extend(kids)
    return sorted(found)


def _port_holder(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex((host, port)) == 0


def start(conf: dict) -> dict:
    if engine_pids(conf):
        return {"changed": False, "pids": engine_pids(conf)}
    if _port_holder(conf["host"], int(conf["port"])):
        fail(
            f"port {conf['port']} on {conf['host']} is already in use by another process (not this role's "
            f"engine); stop it or choose another llm_port"
        )
    os.makedirs(os.path.dirname(conf["pidfile"]), exist_ok=True)
    os.makedirs(os.path.dirname(conf["log"]), exist_ok=True)
    if os.path.exists(conf["log"]):
        os.replace(conf["log"], conf["log"] + ".1")
    env = {**os.environ, **{k: str(v) for k, v in conf["env"].items()}}
    with open(conf["log"], "ab") as log, open(os.devnull, "rb") as null:
        proc = subprocess.Popen(
            conf["argv"],
            stdin=null,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            cwd=conf.get("workdir") or "/",
        )
    with open(conf["pidfile"], "w") as f:
        f.write(f"{proc.pid}\n")
    return {"changed": True, "pids": [proc.pid]}


def _tail(conf: dict, lines: int = 40) -> str:
    if conf.get("unit"):
        out = subprocess.run(
            ["journalctl", "-u", conf["unit"], "-n", str(lines), "--no-pager"], capture_output=True, text=True
        )
        return out.stdout
    return "\n".join(_read(conf["log"]).splitlines()[-lines:])


def _models(url: str) -> list[str] | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return [m.get("id") for m in json.loads(r.read().decode()).get("data", [])]
    except (OSError, ValueError, urllib.error.URLError):
        return None


def wait(conf: dict) -> dict:
    url = f"http://{conf['host']}:{conf['port']}/v1/models"
    timeout = float(conf["start_timeout_s"])
    t0 = time.monotonic()
    while True:
        models = _models(url)
        if models is not None:
            if conf["served_name"] not in models:
                fail(
                    f"{url} serves {models}, not {conf['served_name']!r}: another server holds the port; "
                    f"stop it or choose another llm_port"
                )
            return {"changed": False, "url": url, "models": models, "waited_s": round(time.monotonic() - t0, 1)}
        if not engine_pids(conf):
            fail(
                f"the engine for {url} is not running (it exited after {time.monotonic() - t0:.0f} s of waiting); "
                f"last lines of its log ({conf.get('unit') or conf['log']}):\n{_tail(conf)}"
            )
        if time.monotonic() - t0 > timeout:
            tail = _tail(conf)
            stopped = stop(conf)["stopped"]  # a half-started engine is not left running
            fail(
                f"{url} did not answer within {timeout:.0f} s (llm_engine_start_timeout_s; the engine was "
                f"stopped: pids {stopped}); last lines of its log ({conf.get('unit') or conf['log']}):\n{tail}"
            )
        time.sleep(2)


def _signal(pids: list[int], sig: int) -> None:
    for p in pids:
        try:
            os.kill(p, sig)
        except ProcessLookupError:
            pass


def _wait_gone(pids: list[int], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    left = [p for p in pids if _stat(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = [p for p in left if _stat(p)]
    return left


def stop(conf: dict) -> dict:
    """TERM to the API server (it takes EngineCore and the worker down), then TERM and KILL
    to whatever of them is left; the pid file goes."""
    pids = engine_pids(conf)
    if pids:
        main = _main_pid(conf)
        _signal([main] if main else pids, signal.SIGTERM)
        left = _wait_gone(pids, float(conf["stop_timeout_s"]))
        _signal(left, signal.SIGTERM)
        left = _wait_gone(left, 5)
        _signal(left, signal.SIGKILL)
        left = _wait_gone(left, 5)
        if left:
            fail(f"engine processes {left} are still running after SIGKILL")
    if not conf.get("unit") and os.path.exists(conf["pidfile"]):
        os.unlink(conf["pidfile"])
    return {"changed": bool(pids), "stopped": pids}


def fail(msg: str) -> None:
    print(json.dumps({"failed": True, "msg": msg}))
    sys.exit(1)


def main(argv: list[str]) -> int:
    actions = {
        "start": start,
        "wait": wait,
        "stop": stop,
        "status": lambda c: {"changed": False, "pids": engine_pids(c)},
    }
    if len(argv) != 3 or argv[1] not in actions:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[2]) as f:
        conf = json.load(f)
    print(json.dumps(actions[argv[1]](conf)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
