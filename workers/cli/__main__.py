"""``python -m workers.cli``: the ``erasure`` command."""

from workers.cli import run

run()
