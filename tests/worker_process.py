"""Run ``erasure worker`` as a real subprocess (for crash drills and for capturing its log output)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from workers.settings import Settings


@dataclass
class WorkerProcess:
    settings: Settings
    temporal_target: str
    log_path: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> WorkerProcess:
        env = {
            **os.environ,
            **self.settings.env(),
            "ERASURE_TEMPORAL_ADDRESS": self.temporal_target,
            "ERASURE_LOG_FORMAT": "json",
            **self.extra_env,
        }
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "workers.cli", "worker"], env=env, stdout=log, stderr=subprocess.STDOUT
        )
        log.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if '"worker_started"' in self.log_path.read_text(errors="replace"):
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker exited: {self.log_path.read_text(errors='replace')[-2000:]}")
            time.sleep(0.1)
        raise RuntimeError("worker did not start within 30s")

    def kill(self) -> None:
        """SIGKILL: no graceful shutdown, no final heartbeat."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> int:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                return self.proc.wait(5)
        return self.proc.returncode if self.proc else 0
