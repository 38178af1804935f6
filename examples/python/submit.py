#!/usr/bin/env python3
"""Submit Fairway jobs from Python and wait for each to end, on the package
in clients/python.

    python3 examples/python/submit.py --group acme --task echo --args '{"hello":"python"}' --count 3

It prints "submitted job <id>" for each job, then "job <id> final state:
<state> <result or error>"; it exits 0 when every job succeeded, 1 when one
did not (or a submission was refused: the refusal names the field).
"""

import argparse
import asyncio
import json
import os
import sys

import fairway


async def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nats-url", default=os.environ.get("FAIRWAY_NATS_URL", "nats://127.0.0.1:4222"))
    p.add_argument("--creds", default=os.environ.get("FAIRWAY_NATS_CREDS"), help="a tenant's .creds file")
    p.add_argument("--group", default="examples")
    p.add_argument("--task", default="echo")
    p.add_argument("--args", default='{"hello":"python"}', help="the jobs' args, a JSON object")
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--timeout", type=float, default=60, help="seconds to wait for every job")
    a = p.parse_args()
    try:
        job_args = json.loads(a.args)
    except json.JSONDecodeError as e:
        p.error(f"--args: not JSON: {e}")
    async with await fairway.connect(a.nats_url, creds=a.creds, group=a.group) as client:
        try:
            # One message for all of them (JetStream acknowledges it once
            # stored), then a wait for each.
            ids = await client.submit_many([{"task": a.task, "args": job_args} for _ in range(a.count)])
        except fairway.FairwayError as e:
            print(f"refused: {e.code}: {e}", file=sys.stderr)
            return 1
        for job_id in ids:
            print(f"submitted job {job_id}")
        jobs = await client.wait_many(a.group, ids, timeout=a.timeout)
        ok = True
        for job in jobs:
            print(f"job {job.id} final state: {job.state} {json.dumps(job.result) if job.state == 'success' else job.error}")
            ok = ok and job.state == "success"
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
