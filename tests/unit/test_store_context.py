"""What adapter factories are given: the ``StoreContext`` (options, shared clients), the old shape for plug-ins."""

from __future__ import annotations

from typing import Any

import pytest

from stores.adapters.context import Buckets, StoreContext
from stores.adapters.interface import AdapterNotConfigured
from workers.wiring import store_options


def context(**options: str | None) -> StoreContext:
    fake: Any = object()
    return StoreContext(fake, fake, fake, b"s" * 32, fake, fake, fake, Buckets("a", "l", "r"), options=options)


def test_a_store_setting_absent_or_none_means_the_store_is_not_configured() -> None:
    with pytest.raises(AdapterNotConfigured, match=r"no Qdrant memory store is configured \(ERASURE_QDRANT_PATH\)"):
        context().required("qdrant_path", "Qdrant memory store")
    with pytest.raises(AdapterNotConfigured):
        context(qdrant_path="none").required("qdrant_path", "Qdrant memory store")
    assert context(qdrant_path="/data/q").required("qdrant_path", "Qdrant memory store") == "/data/q"
    assert context(qdrant_path="").option("qdrant_path") is None


def test_a_shared_client_is_built_once_and_closed_with_the_context() -> None:
    ctx, built, closed = context(), [], []

    def build() -> str:
        built.append(1)
        return "client"

    assert ctx.shared("c", build, closed.append) == ctx.shared("c", build, closed.append) == "client"
    assert built == [1]
    ctx.close()
    ctx.close()
    assert closed == ["client"]


def test_store_options_are_the_erasure_variables_the_settings_do_not_define() -> None:
    env = {"ERASURE_QDRANT_PATH": "/q", "ERASURE_CHROMA_PATH": "/c", "ERASURE_POOL_SIZE": "3", "HOME": "/root"}
    assert store_options(env) == {"qdrant_path": "/q"}
