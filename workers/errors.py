"""Errors of the runnable layer; each becomes one clear message at the CLI, never a traceback, and the exit
code of its kind (``ExitCode``: one table, documented in docs/operations.md, "Exit codes")."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """What ``erasure`` exits with: scripts branch on these, so each means one thing."""

    OK = 0
    NOT_DONE = 1  # it ran, and the answer is no: a request that did not complete, a hold already in place
    USAGE = 2  # bad arguments, a bad identifier or date, invalid configuration: fix the command
    NOT_FOUND = 3  # no such request, receipt, forget request, app or schedule
    VERIFICATION_FAILED = 4  # a receipt, attestation or the audit log's chain does not verify
    REFUSED = 5  # not allowed now: a legal hold, production mode, a permission the stores refused
    UNREACHABLE = 6  # Temporal, Postgres, S3, KMS or a part of the local stack could not be reached
    INTERNAL = 70  # a bug (sysexits' EX_SOFTWARE): the one line names the error's type
    INTERRUPTED = 130  # Ctrl-C


class ErasureCliError(Exception):
    """A problem the CLI reports as one line and a non-zero exit (``exit_code``; usage unless a kind says)."""

    exit_code: ExitCode = ExitCode.USAGE


class ConfigError(ErasureCliError):
    """The configuration (environment variables, state directory) is invalid."""


class NotFoundError(ErasureCliError):
    """What was named does not exist (a request, receipt, app, schedule)."""

    exit_code = ExitCode.NOT_FOUND


class RefusedError(ErasureCliError):
    """Not allowed now (a legal hold, production mode, a permission)."""

    exit_code = ExitCode.REFUSED


class StackError(ErasureCliError):
    """A part of the local stack could not be started, stopped or reached."""

    exit_code = ExitCode.UNREACHABLE
