#!/usr/bin/env python3
"""A Fairway worker in Python, on the package in clients/python.

    go run ./cmd/fairway dev                                        # first terminal
    pip install --no-build-isolation ./clients/python               # or PYTHONPATH=clients/python/src
    python3 examples/python/worker.py                               # registers app-id py-example, task py-hello
    python3 examples/python/submit.py --task py-hello --args '{"name":"ada"}'

It runs py-hello until SIGINT or SIGTERM: then it asks for no more jobs,
lets the running ones finish, waits until its last reports are stored and
deregisters. A second signal cancels the running jobs; they go back to
waiting, their attempt given back, and run again elsewhere.
"""

import argparse
import asyncio
import logging
import os

import fairway


@fairway.task("py-hello")
async def hello(job: fairway.Job):
    """Greets args.name; with args.steps and args.step_ms it works that many
    steps of that many milliseconds, reporting progress: a long job, to
    watch or to cancel (the cancel arrives as asyncio.CancelledError)."""
    name = job.args.get("name", "world")
    if not isinstance(name, str):
        raise fairway.Permanent("args.name must be a string")  # not retried
    job.log("info", f"hello from python, {name} (attempt {job.attempt})")
    steps = job.args.get("steps", 4)
    for i in range(1, steps + 1):
        await asyncio.sleep(job.args.get("step_ms", 0) / 1000)
        job.progress(i * 100 // steps)
    return {"greeting": f"hello, {name}", "chars": len(name), "from": "python"}


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nats-url", default=os.environ.get("FAIRWAY_NATS_URL", "nats://127.0.0.1:4222"))
    p.add_argument("--creds", default=os.environ.get("FAIRWAY_NATS_CREDS"), help="a .creds file (with tenants)")
    p.add_argument("--app-id", default="py-example")
    p.add_argument("--slots", type=int, default=2)
    args = p.parse_args()
    async with await fairway.connect(args.nats_url, creds=args.creds) as client:
        worker = fairway.Worker(client, app_id=args.app_id, slots=args.slots)
        await worker.run()  # SIGINT/SIGTERM: a graceful stop; a second one: a forced one


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    asyncio.run(main())
