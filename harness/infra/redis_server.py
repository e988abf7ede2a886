"""Start and stop real redis-server processes on loopback (no systemd here)."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from string import Template
from typing import IO, cast

from harness.base.errors import BadInput, EnvironmentProblem
from harness.base.paths import INFRA_DIR
from harness.base.signals import deferred_interrupts
from harness.infra.ownership import Proc, own_dir, spawned, write_private

INSTALL_HINT = "install it with: apt-get install -y redis-server redis-tools"


def require_tool(name: str, hint: str = INSTALL_HINT) -> str:
    path = shutil.which(name)
    if not path:
        raise EnvironmentProblem(f"{name} not found on PATH; {hint}")
    return path


def check_port_number(port, flag: str = "--base-port") -> None:
    """A TCP port is 1-65535: anything else is the user's input (exit 2), not a busy port."""
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise BadInput(f"{flag}: {port!r} is not a TCP port (1-65535); give a port number in that range")


def port_is_free(host: str, port: int) -> bool:
    """Whether `port` on `host` can be bound. A host that does not resolve, or is not an
    address of this machine, is an error of its own (never reported as a busy port)."""
    check_port_number(port, "port")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except socket.gaierror as e:
            raise BadInput(
                f"host {host!r} does not resolve ({e.strerror or e}); give an IP address or a "
                f"host name of this machine, e.g. --host 127.0.0.1"
            ) from None
        except OSError as e:
            if e.errno == errno.EADDRNOTAVAIL:
                raise BadInput(
                    f"host {host!r} is not an address of this machine; a local server can only "
                    f"listen on one of its own addresses, e.g. --host 127.0.0.1"
                ) from None
            if e.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise EnvironmentProblem(f"cannot bind {host}:{port} ({e.strerror or e})") from None
    return True


def check_ports_free(host: str, ports: list[int], what: str, flag: str = "--base-port") -> None:
    busy = [p for p in ports if not port_is_free(host, p)]
    if busy:
        raise EnvironmentProblem(
            f"port {busy[0]} on {host} is busy (needed by {what}); stop what listens there "
            f"(ss -ltnp 'sport = :{busy[0]}') or choose other ports with {flag}"
        )


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is not alive
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return True


def runs_program(pid: int, program: str) -> bool:
    """True when `pid` runs (not a zombie) and its command line names `program` (a name or a
    path; its file name is matched), so that a stop never signals another process. A child of
    this process whose command line is still empty counts too: right after Popen returns, the
    kernel may not yet have set up the new program's arguments (4 in 10 spawns on a loaded
    2-core machine), and a stop that came then passed over it and left it running."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[-1].split()
    except OSError:
        return False
    if not fields or fields[0] == "Z":
        return False
    if not cmdline:
        return len(fields) > 1 and fields[1] == str(os.getpid())
    return os.path.basename(program).encode() in cmdline


def is_redis_pid(pid: int) -> bool:
    return runs_program(pid, "redis-server")


class RedisProcess:
    """One redis-server process with its own folder, config file and log. It is started in
    its folder (its cwd), which is what proves it the harness's (harness.infra.ownership)."""

    def __init__(self, host: str, port: int, folder: Path, *, cluster: bool = False, config: dict | None = None):
        # absolute: redis-server resolves logfile and pidfile after it changes into `dir`;
        # not resolved: a link at the folder is refused when it starts, never followed
        self.host, self.port, self.folder = host, port, Path(os.path.abspath(folder))
        self.cluster = cluster
        self.config = config or {}
        self.proc: subprocess.Popen | None = None
        self.pid: int | None = None
        self.start_ticks: int | None = None  # its start time, read right after the spawn

    def entry(self) -> Proc:
        """How a state file records it: pid, start time and port."""
        # asked only of a started process (cluster.py skips those without a pid)
        return Proc(cast(int, self.pid), self.start_ticks, self.port)

    @property
    def logfile(self) -> Path:
        return self.folder / "redis.log"

    def render_config(self) -> str:
        tmpl = Template((INFRA_DIR / "redis" / "node.conf").read_text())
        cluster = (INFRA_DIR / "redis" / "cluster.conf").read_text() if self.cluster else ""
        text = tmpl.substitute(port=self.port, host=self.host, dir=self.folder, logfile=self.logfile, cluster=cluster)
        for k, v in self.config.items():
            text += f"{k} {v}\n"
        return text

    def start(self, timeout: float = 10.0, on_spawn=None) -> "RedisProcess":
        """Start and wait for PING. `on_spawn(self)` is called as soon as the process exists
        (before the wait), so that its pid is recorded before anything can interrupt."""
        exe = require_tool("redis-server")
        check_ports_free(
            self.host,
            [self.port] + ([self.port + 10000] if self.cluster else []),
            f"redis-server {self.host}:{self.port}",
        )
        own_dir(self.folder)
        for stale in ("nodes.conf", "dump.rdb", "redis.log"):  # a link there goes, what it points to stays
            (self.folder / stale).unlink(missing_ok=True)
        conf = write_private(self.folder / "redis.conf", self.render_config())
        self.spawn(exe, conf, on_spawn)
        self.wait_ready(timeout)
        return self

    def spawn(self, exe: str, conf: Path, on_spawn=None) -> None:
        """Launch redis-server in its folder; its pid and start time are known (and, through
        `on_spawn`, recorded) before a Ctrl-C can land."""
        with deferred_interrupts():
            self.proc = subprocess.Popen(
                [exe, str(conf)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                start_new_session=True,
                cwd=self.folder,
            )
            self.pid = self.proc.pid
            self.start_ticks = spawned(self.pid).start
            if on_spawn is not None:
                on_spawn(self)

    def wait_ready(self, timeout: float) -> None:
        import redis

        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                err = (cast(IO[bytes], self.proc.stderr).read() or b"").decode(errors="replace").strip()  # stderr=PIPE
                raise EnvironmentProblem(
                    f"redis-server on {self.host}:{self.port} exited with code {self.proc.returncode}: "
                    f"{err or self.log_tail()}"
                )
            try:
                if redis.Redis(host=self.host, port=self.port, socket_timeout=1).ping():
                    return
            except redis.AuthenticationError:  # NOAUTH: it answers (requirepass is set)
                return
            except redis.RedisError as e:
                last = e
            time.sleep(0.05)
        self.stop()
        raise EnvironmentProblem(
            f"redis-server on {self.host}:{self.port} did not answer PING "
            f"within {timeout:.0f} s ({last}); log: {self.log_tail()}"
        )

    def log_tail(self, lines: int = 3) -> str:
        try:
            return " | ".join(self.logfile.read_text(errors="replace").strip().splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def client(self, **kwargs):
        import redis

        return redis.Redis(host=self.host, port=self.port, **kwargs)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the server this object started (its own child: never another process)."""
        if self.pid is None:
            return
        if self.proc is not None:
            stop_child(self.proc, timeout)
            if self.proc.stderr:
                self.proc.stderr.close()
        self.pid = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def stop_pids(pids: list[int], timeout: float = 5.0) -> int:
    """Stop several redis-server processes at once (SIGTERM to all, then wait; SIGKILL after
    `timeout`); returns how many were running. Only for pids the caller knows are its own
    (its children): a pid from a state file is checked with harness.infra.ownership instead."""
    mine = [p for p in pids if pid_alive(p) and is_redis_pid(p)]
    for pid in mine:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    for pid in mine:
        stop_pid(pid, timeout)
    return len(mine)


def stop_child(proc: subprocess.Popen, timeout: float = 5.0) -> None:
    """SIGTERM a child of this process, SIGKILL after `timeout`. Its pid stays its own until
    it is reaped (Popen knows when), so no other process is ever signalled."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5)


def stop_pid(pid: int, timeout: float = 5.0) -> None:
    """SIGTERM, then SIGKILL after `timeout` seconds; only redis-server processes."""
    if not pid_alive(pid) or not is_redis_pid(pid):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:  # reap it if it is our child
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        if not pid_alive(pid):
            return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
