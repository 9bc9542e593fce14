"""Typed search attribute keys of the project; registered by the stack launcher and test fixtures."""

from __future__ import annotations

from temporalio.common import SearchAttributeKey

ERASURE_STATUS = SearchAttributeKey.for_keyword("ErasureStatus")
ERASURE_STAGE = SearchAttributeKey.for_keyword("ErasureStage")
ERASURE_DUE_DATE = SearchAttributeKey.for_datetime("ErasureDueDate")
SWEEP_FINDINGS = SearchAttributeKey.for_int("SweepFindings")

ALL = (ERASURE_STATUS, ERASURE_STAGE, ERASURE_DUE_DATE, SWEEP_FINDINGS)

_CLI_TYPES = {"KEYWORD": "Keyword", "DATETIME": "Datetime", "INT": "Int", "TEXT": "Text", "BOOL": "Bool"}


def cli_flags() -> list[str]:
    """``--search-attribute Name=Type`` flags for ``temporal server start-dev``."""
    flags: list[str] = []
    for key in ALL:
        flags += ["--search-attribute", f"{key.name}={_CLI_TYPES[key.indexed_value_type.name]}"]
    return flags
