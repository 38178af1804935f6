"""``python -m fairway worker MODULE[:REGISTRY] --app-id ID``: run the tasks a module registers.

The module is imported (its ``@fairway.task`` handlers register in the
default registry, or name a :class:`fairway.Registry` after a colon), then
a :class:`fairway.Worker` runs them until SIGINT/SIGTERM.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from typing import Optional

from . import Registry, run


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m fairway", description="Fairway for Python")
    sub = p.add_subparsers(dest="command", required=True)
    w = sub.add_parser("worker", help="run the tasks a module registers")
    w.add_argument("target", help="MODULE or MODULE:REGISTRY")
    w.add_argument("--nats-url", default=os.environ.get("FAIRWAY_NATS_URL", "nats://127.0.0.1:4222"), help="env FAIRWAY_NATS_URL")
    w.add_argument("--creds", default=os.environ.get("FAIRWAY_NATS_CREDS", ""), help="a .creds file (env FAIRWAY_NATS_CREDS)")
    w.add_argument("--app-id", required=True, help="the executor's app-id")
    w.add_argument("--slots", type=int, default=4)
    w.add_argument("--prefix", default="fairway")
    w.add_argument("--log-level", default="info")
    a = p.parse_args(argv)
    logging.basicConfig(level=a.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    module_name, _, attr = a.target.partition(":")
    sys.path.insert(0, os.getcwd())
    module = importlib.import_module(module_name)
    registry = None
    if attr:
        registry = getattr(module, attr)
        if not isinstance(registry, Registry):
            p.error(f"{a.target} is not a fairway.Registry")
    run(a.nats_url, app_id=a.app_id, slots=a.slots, registry=registry, prefix=a.prefix, creds=a.creds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
