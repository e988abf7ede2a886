"""A real PostgreSQL server for the cold-start experiment, started and stopped by the harness
like redis-server: `initdb` into a folder under the harness state, `postgres` on a port of
the caller's on 127.0.0.1 (its unix socket in that folder), stopped afterwards. As root the
server runs as the `postgres` user (PostgreSQL refuses to run as root). Authentication is
`trust` on loopback only, so no password exists anywhere.
"""

from __future__ import annotations

import glob
import json
import os
import pwd
import shutil
import signal
import subprocess
import time
from pathlib import Path

from harness.base.errors import EnvironmentProblem
from harness.base.paths import STATE_DIR
from harness.infra import ownership
from harness.infra.redis_server import check_ports_free, pid_alive

INSTALL_HINT = "install it with: apt-get install -y postgresql"


def pg_bin(name: str) -> str:
    """A PostgreSQL server program: on PATH, else Debian's /usr/lib/postgresql/<major>/bin."""
    found = shutil.which(name)
    if found:
        return found
    cands = sorted(
        glob.glob(f"/usr/lib/postgresql/*/bin/{name}"),
        key=lambda p: int(Path(p).parts[4]) if Path(p).parts[4].isdigit() else 0,
    )
    if not cands:
        raise EnvironmentProblem(f"PostgreSQL's {name} not found (PATH, /usr/lib/postgresql/*/bin); {INSTALL_HINT}")
    return cands[-1]


_RUNNING: dict = {}  # folder -> the PostgresServer of this process that started a server there


def _proc(path: Path, doc: dict, key: str, fix: str) -> "ownership.Proc | None":
    """The process entry `key` of owner.json (none when absent: an older harness's)."""
    entry = doc.get(key)
    if entry is None:
        return None
    procs = ownership.Fields(path, {key: [entry]}, fix).procs(key)
    return procs[0]


OWNER_FILE = "owner.json"


class PostgresServer:
    """One postgres process with its own data folder and log."""

    def __init__(self, port: int, folder: Path | None = None, max_connections: int = 100, host: str = "127.0.0.1"):
        self.host, self.port, self.max_connections = host, port, max_connections
        self.folder = Path(folder or STATE_DIR / f"postgres-{port}").resolve()
        self.proc: subprocess.Popen | None = None

    @property
    def data_dir(self) -> Path:
        return self.folder / "data"

    @property
    def logfile(self) -> Path:
        return self.folder / "postgres.log"

    @property
    def dsn(self) -> str:
        return f"host={self.host} port={self.port} user=postgres dbname=postgres connect_timeout=5"

    def _run_as(self) -> dict:
        """subprocess arguments that drop root to the postgres user."""
        if os.geteuid() != 0:
            return {}
        try:
            pw = pwd.getpwnam("postgres")
        except KeyError:
            raise EnvironmentProblem(
                f"running as root, and there is no 'postgres' user to run PostgreSQL as; "
                f"{INSTALL_HINT} (it creates the user)"
            ) from None
        return {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}

    def _own(self, path: Path) -> None:
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            os.chown(path, pw.pw_uid, pw.pw_gid)

    def start(self, timeout: float = 30.0) -> "PostgresServer":
        initdb, postgres = pg_bin("initdb"), pg_bin("postgres")
        run_as = self._run_as()
        self.stop_leftover()
        check_ports_free(self.host, [self.port], f"PostgreSQL {self.host}:{self.port}", flag="the case's pg_port")
        self.folder.mkdir(parents=True, exist_ok=True)
        self._own(self.folder)
        if not (self.data_dir / "PG_VERSION").exists():  # the data folder is kept between starts
            shutil.rmtree(self.data_dir, ignore_errors=True)
            out = subprocess.run(
                [
                    initdb,
                    "-D",
                    str(self.data_dir),
                    "-U",
                    "postgres",
                    "--auth=trust",
                    "--no-sync",
                    "--encoding=UTF8",
                    "--locale=C",
                ],
                capture_output=True,
                text=True,
                timeout=120,
                **run_as,
            )
            if out.returncode != 0:
                tail = " | ".join((out.stdout + out.stderr).strip().splitlines()[-3:])
                raise EnvironmentProblem(f"initdb failed (exit {out.returncode}): {tail}")
        (self.folder / OWNER_FILE).unlink(missing_ok=True)
        log = open(self.logfile, "ab")
        try:
            self._own(self.logfile)
            self.proc = subprocess.Popen(
                [
                    postgres,
                    "-D",
                    str(self.data_dir),
                    "-p",
                    str(self.port),
                    "-c",
                    f"listen_addresses={self.host}",
                    "-c",
                    f"unix_socket_directories={self.folder}",
                    "-c",
                    f"max_connections={self.max_connections}",
                    "-c",
                    "fsync=off",
                    "-c",
                    "synchronous_commit=off",
                    "-c",
                    "full_page_writes=off",
                    "-c",
                    "shared_buffers=32MB",
                    "-c",
                    "logging_collector=off",
                ],
                stdout=log,
                stderr=log,
                start_new_session=True,
                **run_as,
            )
            # who started it, and the server itself, by pid and start time (harness.infra.ownership):
            # a later run stops a leftover only when it is provably this one
            ownership.write_private(
                self.folder / OWNER_FILE,
                json.dumps(
                    {
                        "boot": ownership.boot_id(),
                        "owner": ownership.spawned(os.getpid()).as_json(),
                        "server": ownership.spawned(self.proc.pid).as_json(),
                    }
                ),
            )
        finally:
            log.close()
        _RUNNING[self.folder] = self
        try:
            self.wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop_leftover(self, timeout: float = 10.0) -> bool:
        """Stop a server that a killed run left on this data folder: only the process recorded
        in owner.json when it was started, provably the same one (its start time, and running
        in this data folder: postgres works in its data folder), never a pid that
        postmaster.pid or a file merely names. A stale pid file is removed. True when one was
        stopped."""
        pidfile = self.data_dir / "postmaster.pid"
        try:
            pid = int(pidfile.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return False
        fix = f"stop it yourself if it is yours (kill {pid}), then remove {self.folder / OWNER_FILE}"
        doc = ownership.read_state_file(self.folder / OWNER_FILE, fix) or {}
        owner, server = (_proc(self.folder / OWNER_FILE, doc, key, fix) for key in ("owner", "server"))
        if owner is not None and owner.pid != os.getpid() and ownership.owner_alive(owner.pid, owner.start):
            return False  # the harness process that started it still runs: the server is in use
        mine = _RUNNING.get(self.folder)
        if mine is not None and mine.proc is not None:
            return False  # this process runs it and has not let go of it
        ours = server is not None and server.pid == pid and ownership.same_boot(doc)
        if not (ours and server is not None and ownership.send(server, self.data_dir, signal.SIGINT)):
            if pid_alive(pid) and ownership.cwd_of(pid) == os.path.realpath(self.data_dir):
                raise EnvironmentProblem(
                    f"{pidfile} names pid {pid}, a process in this data folder that is not "
                    f"provably a postgres this harness started, so nothing was signalled; {fix}"
                )
            pidfile.unlink(missing_ok=True)  # stale: its pid is gone, or is another process elsewhere
            return False
        deadline = time.monotonic() + timeout
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if pid_alive(pid):
            raise EnvironmentProblem(
                f"a postgres left by an earlier run (pid {pid}, {self.data_dir}) did not stop; stop it with: kill {pid}"
            )
        return True

    def wait_ready(self, timeout: float) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise EnvironmentProblem(
                    f"postgres on {self.host}:{self.port} exited with code {self.proc.returncode}: {self.log_tail()}"
                )
            try:
                with psycopg.connect(self.dsn, autocommit=True) as con:
                    con.execute("SELECT 1")
                return
            except psycopg.Error as e:
                last = e
            time.sleep(0.1)
        raise EnvironmentProblem(
            f"postgres on {self.host}:{self.port} did not accept connections within "
            f"{timeout:.0f} s ({last}); log: {self.log_tail()}"
        )

    def log_tail(self, lines: int = 3) -> str:
        try:
            return " | ".join(self.logfile.read_text(errors="replace").strip().splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, timeout: float = 10.0) -> None:
        """Fast shutdown (SIGINT: roll back, disconnect, exit), SIGKILL if it does not end."""
        if self.proc is None:
            return
        pid = self.proc.pid
        if self.proc.poll() is None:
            os.kill(pid, signal.SIGINT)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(pid, signal.SIGKILL)
                self.proc.wait(timeout=5)
        self.proc = None
        if _RUNNING.get(self.folder) is self:
            del _RUNNING[self.folder]
        if pid_alive(pid):  # not reached in practice: the wait above reaped it
            raise EnvironmentProblem(f"postgres (pid {pid}) did not stop")

    def __enter__(self) -> "PostgresServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
