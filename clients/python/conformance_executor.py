#!/usr/bin/env python3
"""The Python executor of the conformance suite (clients/conformance/README.md).

    PYTHONPATH=src python3 conformance_executor.py --nats-url nats://127.0.0.1:4222 --app-id py-conf

It registers the suite's conf-* tasks on a fairway.Worker, prints
``conformance: registered <app-id> <instance>`` once registered (or
``conformance: refused: <code>: <message>`` and exits 2), and on
SIGTERM/SIGINT or an operator's drain prints ``conformance: stopping`` and
stops gracefully (a second signal releases the running jobs), printing
``conformance: stopped``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys

import fairway

registry = fairway.Registry()


@registry.task("conf-echo")
async def conf_echo(job: fairway.Job) -> object:
    job.log("info", f"echo attempt {job.attempt}")
    job.progress(50)
    job.progress(100)
    return job.args


async def _sleep(job: fairway.Job) -> object:
    ms = int(job.args.get("ms") or 0)
    await asyncio.sleep(ms / 1000)  # a cancel, the job's timeout or a forced stop cancels it
    return {"slept": ms}


registry.task("conf-sleep", _sleep)
registry.task("conf-one", _sleep, concurrency=1)


@registry.task("conf-fail")
async def conf_fail(job: fairway.Job) -> object:
    message = str(job.args.get("message") or "")
    if job.args.get("permanent"):
        raise fairway.Permanent(message)
    raise RuntimeError(message)


@registry.task("conf-snooze")
async def conf_snooze(job: fairway.Job) -> object:
    raise fairway.Snooze(float(job.args.get("seconds") or 0))


@registry.task("conf-big")
async def conf_big(job: fairway.Job) -> object:
    return {"data": "x" * int(job.args.get("bytes") or 0)}


@registry.task("conf-trace")
async def conf_trace(job: fairway.Job) -> object:
    return {"traceparent": job.traceparent}


def say(line: str) -> None:
    """Prints a line in one write (print() writes the text and its newline apart: a reader could see half a line)."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def main() -> int:
    p = argparse.ArgumentParser(description="the Python executor of the Fairway conformance suite")
    p.add_argument("--nats-url", required=True, help="the NATS server")
    p.add_argument("--creds", default="", help="a .creds file to log in with")
    p.add_argument("--app-id", required=True, help="the executor's app-id")
    p.add_argument("--slots", type=int, default=4, help="slots (default 4)")
    p.add_argument("--tasks", default="", help="register only these tasks, comma-separated (default: all)")
    a = p.parse_args()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    try:
        client = await fairway.connect(a.nats_url, creds=a.creds, name=f"fairway conformance python {a.app_id}")
    except Exception as e:
        print(f"conformance_executor.py: connecting to {a.nats_url}: {e}", file=sys.stderr)
        return 1
    only = [t for t in a.tasks.split(",") if t] or None
    worker = fairway.Worker(client, a.app_id, slots=a.slots, registry=registry, tasks=only)
    loop = asyncio.get_running_loop()
    signals = 0
    said = False

    def say_stopping() -> None:
        nonlocal said
        if not said:
            said = True
            say("conformance: stopping")

    def on_signal() -> None:
        nonlocal signals
        signals += 1
        if signals == 1:
            say_stopping()  # the suite waits for this line before a second signal
        worker.stop(force=signals > 1, reason="signal")

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    try:
        try:
            await worker.start()
        except fairway.FairwayError as e:
            say(f"conformance: refused: {e.code}: {e.message}")
            return 2
        say(f"conformance: registered {a.app_id} {worker.instance}")
        await worker.wait_stopping()  # a signal (one while registering too) or an operator's drain
        say_stopping()
        await worker.wait_stopped()
        say("conformance: stopped")
        return 0
    finally:
        await client.close()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
