"""A background process the launcher started: its pid file, log file and lifecycle.

The pid file records the pid and the process start time, so ``down`` stops exactly the process ``up``
started and never an unrelated process that reused the pid.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from workers.errors import StackError


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def port_answers(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


@dataclass
class ManagedProcess:
    name: str
    argv: Sequence[str]
    run_dir: Path
    ports: Sequence[int]
    env: dict[str, str] = field(default_factory=dict)
    user: str | None = None
    stop_signal: int = signal.SIGTERM

    @property
    def pid_file(self) -> Path:
        return self.run_dir / f"{self.name}.pid"

    @property
    def log_file(self) -> Path:
        return self.run_dir / f"{self.name}.log"

    def recorded(self) -> psutil.Process | None:
        """The recorded process if it is still the one we started, else ``None``."""
        if not self.pid_file.exists():
            return None
        try:
            owner = self.pid_file.stat()
            if owner.st_uid != os.geteuid() or owner.st_mode & 0o022:
                return None  # a pid file someone else wrote or could write is never trusted
            info = json.loads(self.pid_file.read_text())
            proc = psutil.Process(int(info["pid"]))
            if abs(proc.create_time() - float(info["create_time"])) > 1.0:
                # psutil derives a start time from the boot time, which moves when the wall clock is
                # stepped: then the recorded command line (this stack's own binary, state paths and ports)
                # must match exactly, or the pid is someone else's now
                argv = [str(a) for a in info.get("argv") or []]
                if not argv or proc.cmdline() != argv:
                    return None
            if proc.status() == psutil.STATUS_ZOMBIE:
                return None
            return proc
        except (ValueError, KeyError, OSError, psutil.Error):
            return None

    def is_running(self) -> bool:
        return self.recorded() is not None

    def start(self) -> None:
        taken = [p for p in self.ports if not port_is_free(p)]
        if taken:
            raise StackError(
                f"{self.name}: port {', '.join(map(str, taken))} is already in use by another program; "
                "free it or choose other ports (see ERASURE_*_PORT in docs/configuration.md)"
            )
        self.run_dir.mkdir(parents=True, exist_ok=True)
        binary = self.argv[0]
        if not Path(binary).exists():
            raise StackError(f"{self.name}: binary {binary} not found; run 'make install' (pip install -e .[dev])")
        log = self.log_file.open("ab")
        try:
            proc = subprocess.Popen(
                list(self.argv),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **self.env},
                start_new_session=True,
                user=self.user,
                cwd=self.run_dir,
            )
        finally:
            log.close()
        create_time = psutil.Process(proc.pid).create_time()
        self.pid_file.write_text(json.dumps({"pid": proc.pid, "create_time": create_time, "argv": list(self.argv)}))

    def wait_healthy(self, check: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.is_running():
                raise StackError(f"{self.name} exited during start-up; see its log: {self.log_file}")
            try:
                if check():
                    return
            except Exception:  # noqa: S110 - any failure of a health probe means "not yet"
                pass
            time.sleep(0.3)
        raise StackError(f"{self.name} did not become healthy within {timeout:.0f}s; see its log: {self.log_file}")

    def stop(self, timeout: float = 20.0) -> bool:
        """Stop the recorded process and its children; returns whether one was running."""
        proc = self.recorded()
        if proc is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        children = proc.children(recursive=True)
        try:
            proc.send_signal(self.stop_signal)
            proc.wait(timeout)
        except psutil.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        except psutil.NoSuchProcess:
            pass
        for child in children:
            with contextlib.suppress(psutil.NoSuchProcess):
                child.kill()
        self.pid_file.unlink(missing_ok=True)
        return True
