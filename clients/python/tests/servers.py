"""Real nats-server processes and the environment of the integration tests.

Every variable the tests need is read here; a missing one fails the test
with a message saying how to set it (the tests never skip).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import unittest
from typing import Optional


def require_env(test: unittest.TestCase, name: str, how: str) -> str:
    value = os.environ.get(name, "")
    if not value:
        test.fail(f"environment variable {name} is not set: {how}")
    return value


NATS_HOW = (
    "set NATS_SERVER_BIN to a nats-server binary (v2.10 or later), e.g. "
    "NATS_SERVER_BIN=/tmp/fwbin/nats-server, or build one with 'go build -o /tmp/nats-server github.com/nats-io/nats-server/v2'"
)
DEV_HOW = (
    "start a development cluster ('fairway dev --dev-dir /tmp/py-dev1 --nats-addr 127.0.0.1:15222 --pg-port 15432 "
    "--http-addr \"\" --web-addr \"\"') and set FAIRWAY_TEST_NATS_URL=nats://127.0.0.1:15222"
)
TENANTS_HOW = (
    "start a development cluster with tenants ('fairway dev --dev-dir /tmp/py-dev2 --nats-addr 127.0.0.1:15223 "
    "--pg-port 15433 --http-addr \"\" --web-addr \"\" --tenants acme,globex', then "
    "'fairway creds add executor py --tasks py-echo --groups acme --dev-dir /tmp/py-dev2') and set "
    "FAIRWAY_TEST_TENANTS_NATS_URL=nats://127.0.0.1:15223 FAIRWAY_TEST_CREDS_DIR=/tmp/py-dev2/creds"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class NatsServer:
    """A nats-server on a free port with a config file of its own, in a temporary directory."""

    def __init__(self, binary: str, config: str = "", *, jetstream: bool = False, port: Optional[int] = None) -> None:
        self.binary = binary
        self.port = port or free_port()
        self.dir = tempfile.mkdtemp(prefix="fairway-py-nats-")
        lines = [f"listen: 127.0.0.1:{self.port}", "max_payload: 8MB"]
        if jetstream:
            lines.append(f'jetstream {{ store_dir: "{self.dir}/js" }}')
        lines.append(config)
        self.conf = os.path.join(self.dir, "nats.conf")
        with open(self.conf, "w") as f:
            f.write("\n".join(lines) + "\n")
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.log = os.path.join(self.dir, "nats.log")

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self) -> "NatsServer":
        logf = open(self.log, "ab")
        self.proc = subprocess.Popen([self.binary, "-c", self.conf], stdout=logf, stderr=logf)
        logf.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nats-server exited: {open(self.log).read()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.02)
        raise RuntimeError(f"nats-server did not listen on {self.port}: {open(self.log).read()[-2000:]}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def make_certs(directory: str) -> dict[str, str]:
    """A throwaway CA, a server certificate for 127.0.0.1/localhost and a client certificate (openssl CLI)."""
    openssl = shutil.which("openssl")
    if not openssl:
        raise RuntimeError("the TLS tests need the openssl command (apt-get install openssl)")
    p = {k: os.path.join(directory, k) for k in ("ca.key", "ca.pem", "server.key", "server.csr", "server.pem", "client.key", "client.csr", "client.pem", "ext")}
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], check=True, capture_output=True)

    run("req", "-x509", *ec, "-keyout", p["ca.key"], "-out", p["ca.pem"], "-days", "2", "-subj", "/CN=fairway-test-ca")
    with open(p["ext"], "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for who in ("server", "client"):
        run("req", *ec, "-keyout", p[f"{who}.key"], "-out", p[f"{who}.csr"], "-subj", f"/CN={who}")
        run("x509", "-req", "-in", p[f"{who}.csr"], "-CA", p["ca.pem"], "-CAkey", p["ca.key"], "-CAcreateserial",
            "-out", p[f"{who}.pem"], "-days", "2", "-extfile", p["ext"])
    return p
