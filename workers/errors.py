"""Errors of the runnable layer; each becomes one clear message at the CLI, never a traceback."""


class ErasureCliError(Exception):
    """A problem the CLI reports as one line and a non-zero exit."""


class ConfigError(ErasureCliError):
    """The configuration (environment variables, state directory) is invalid."""


class StackError(ErasureCliError):
    """A part of the local stack could not be started, stopped or reached."""
