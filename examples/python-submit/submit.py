#!/usr/bin/env python3
"""Submit a Fairway job from Python with nothing but the standard library.

It speaks the NATS text protocol over a TCP socket: CONNECT, SUB to a
reply inbox, HPUB of the submission to fairway.submit.<group>.<task> with a
Nats-Msg-Id header and that inbox as the reply subject, then reads
JetStream's acknowledgement, {"stream":"FAIRWAY_SUBMIT","seq":N}. Once
JetStream has acknowledged it, the job survives a coordinator that is down.

    go run ./cmd/fairway dev                                   # first terminal
    python3 examples/python-submit/submit.py --group acme --task echo --args '{"hello":"world"}'

It prints the job id and the acknowledgement, and exits 0 once JetStream
acknowledged the submission (1 on an error). Any NATS client library does
the same in a few lines; this one shows that nothing more is needed.
"""

import argparse
import json
import os
import socket
import sys
import urllib.parse
import uuid


class NATSError(Exception):
    pass


class Conn:
    """A minimal NATS connection: enough to publish and read one reply."""

    def __init__(self, url, timeout):
        u = urllib.parse.urlparse(url)
        if u.scheme not in ("nats", ""):
            raise NATSError(f"only nats:// URLs without TLS are supported here, not {url!r}")
        self.sock = socket.create_connection((u.hostname or "127.0.0.1", u.port or 4222), timeout=timeout)
        self.buf = b""
        op, info = self._line().split(b" ", 1)
        if op != b"INFO":
            raise NATSError(f"expected INFO from the server, got {op!r}")
        self.info = json.loads(info)
        if not self.info.get("headers"):
            raise NATSError("the server does not support headers (NATS 2.2 or later needed)")
        connect = {"verbose": False, "pedantic": False, "headers": True, "no_responders": True,
                   "protocol": 1, "lang": "python", "version": "0", "name": "fairway-python-submit"}
        if u.username and u.password:
            connect.update(user=urllib.parse.unquote(u.username), **{"pass": urllib.parse.unquote(u.password)})
        elif u.username:
            connect["auth_token"] = urllib.parse.unquote(u.username)
        self._send(b"CONNECT " + json.dumps(connect).encode() + b"\r\nPING\r\n")
        # The server answers PONG once it has processed CONNECT, or -ERR.
        while True:
            line = self._line()
            if line == b"PONG":
                return
            self._control(line)

    def _send(self, data):
        self.sock.sendall(data)

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise NATSError("the server closed the connection")
        self.buf += chunk

    def _line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n + 2:]  # the payload, then its CRLF
        return data

    def _control(self, line):
        """Handles a protocol line that is not a message."""
        if line == b"PING":
            self._send(b"PONG\r\n")
        elif line.startswith(b"-ERR"):
            raise NATSError(line.decode(errors="replace"))
        elif line in (b"PONG", b"+OK") or line.startswith(b"INFO "):
            pass
        else:
            raise NATSError(f"unexpected protocol line {line[:80]!r}")

    def sub(self, subject, sid):
        self._send(f"SUB {subject} {sid}\r\n".encode())

    def hpub(self, subject, reply, headers, payload):
        hdr = "NATS/1.0\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        hdr = hdr.encode()
        self._send(f"HPUB {subject} {reply} {len(hdr)} {len(hdr) + len(payload)}\r\n".encode()
                   + hdr + payload + b"\r\n")

    def next_msg(self):
        """Returns (subject, headers text, payload) of the next message."""
        while True:
            line = self._line()
            parts = line.split(b" ")
            if parts[0] == b"MSG":  # MSG <subject> <sid> [reply] <#bytes>
                return parts[1].decode(), "", self._exact(int(parts[-1]))
            if parts[0] == b"HMSG":  # HMSG <subject> <sid> [reply] <#header bytes> <#total bytes>
                hlen, total = int(parts[-2]), int(parts[-1])
                data = self._exact(total)
                return parts[1].decode(), data[:hlen].decode(errors="replace"), data[hlen:]
            self._control(line)

    def close(self):
        self.sock.close()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nats-url", default=os.environ.get("FAIRWAY_NATS_URL", "nats://127.0.0.1:4222"),
                   help="NATS server URL (env FAIRWAY_NATS_URL; default nats://127.0.0.1:4222)")
    p.add_argument("--prefix", default="fairway", help="subject prefix (nats.prefix)")
    p.add_argument("--group", default="examples", help="the job's group (tenant)")
    p.add_argument("--task", default="echo", help="the task to run")
    p.add_argument("--args", default='{"hello":"python"}', help="the job's arguments, a JSON object")
    p.add_argument("--id", default="", help="the job id (default: a new UUID); the same id again is the same job")
    p.add_argument("--priority", choices=("high", "low"), default="low")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the acknowledgement")
    a = p.parse_args()

    job_id = a.id or str(uuid.uuid4())
    # The id goes in the body: that makes a publish sent again the same job,
    # within the group. Nats-Msg-Id is JetStream's own de-duplication, over
    # every group for 100 ms, so it gets a value of its own that no other
    # message carries.
    body = json.dumps({"id": job_id, "args": json.loads(a.args), "priority": a.priority}).encode()
    subject = f"{a.prefix}.submit.{a.group}.{a.task}"
    inbox = "_INBOX." + uuid.uuid4().hex

    try:
        nc = Conn(a.nats_url, a.timeout)
        try:
            nc.sub(inbox, 1)
            nc.hpub(subject, inbox, {"Nats-Msg-Id": str(uuid.uuid4())}, body)
            _, headers, payload = nc.next_msg()
        finally:
            nc.close()
    except (OSError, NATSError) as e:
        print(f"submit.py: publishing to {subject}: {e}", file=sys.stderr)
        return 1

    if headers.startswith("NATS/1.0 503"):
        print(f"submit.py: no JetStream stream takes {subject}: is a coordinator running? (it creates the stream)",
              file=sys.stderr)
        return 1
    try:
        ack = json.loads(payload)
    except ValueError:
        print(f"submit.py: not a JetStream acknowledgement: {payload[:200]!r}", file=sys.stderr)
        return 1
    if "error" in ack:
        print(f"submit.py: JetStream refused the submission: {ack['error']}", file=sys.stderr)
        return 1
    print(f"job {job_id} (group {a.group}, task {a.task})")
    print("ack " + json.dumps(ack, separators=(",", ":")))
    if ack.get("duplicate"):
        print("submit.py: JetStream took it for a duplicate of a message with the same Nats-Msg-Id; publish again",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
