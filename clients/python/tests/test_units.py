"""Pieces without a server: nkeys, durations, ids, submissions, models."""

from __future__ import annotations

import _path  # noqa: F401  (src on sys.path)

import base64
import os
import unittest
from datetime import datetime, timedelta, timezone

import fairway
from fairway import nkeys
from fairway._util import format_duration, parse_duration, uuid7
from fairway.client import Client
from fairway.natsconn import _parse_headers


def make_seed(raw: bytes, kind_prefix: int = 20 << 3) -> str:
    b1 = (18 << 3) | (kind_prefix >> 5)
    b2 = (kind_prefix & 31) << 3
    body = bytes([b1, b2]) + raw
    body += nkeys._crc16(body).to_bytes(2, "little")
    return base64.b32encode(body).rstrip(b"=").decode()


class NkeysTest(unittest.TestCase):
    def test_seed_round_trip_and_signature(self) -> None:
        raw = os.urandom(32)
        seed = make_seed(raw)
        self.assertTrue(seed.startswith("SU"))
        kind, key = nkeys.decode_seed(seed)
        self.assertEqual((kind, key), ("user", raw))
        from nacl.signing import SigningKey, VerifyKey

        sig = nkeys.sign_nonce(seed, "nonce-123")
        VerifyKey(bytes(SigningKey(raw).verify_key)).verify(b"nonce-123", base64.urlsafe_b64decode(sig + "=="))
        pub = nkeys.public_key(seed)
        self.assertTrue(pub.startswith("U"))
        self.assertEqual(len(pub), 56)

    def test_bad_seeds(self) -> None:
        seed = make_seed(os.urandom(32))
        broken = seed[:-3] + ("A" if seed[-3] != "A" else "B") + seed[-2:]
        with self.assertRaises(nkeys.CredsError):
            nkeys.decode_seed(broken)
        with self.assertRaises(nkeys.CredsError):
            nkeys.decode_seed("not base32 !!")

    def test_read_creds(self) -> None:
        seed = make_seed(os.urandom(32))
        path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"fairway-test-{os.getpid()}.creds")
        with open(path, "w") as f:
            f.write(
                "-----BEGIN NATS USER JWT-----\neyJhbGc.eyJzdWIi.c2ln\n------END NATS USER JWT------\n\n"
                "************************* IMPORTANT *************************\nNKEY Seed printed below\n\n"
                f"-----BEGIN USER NKEY SEED-----\n{seed}\n------END USER NKEY SEED------\n\n*****\n"
            )
        try:
            jwt, s = nkeys.read_creds(path)
            self.assertEqual((jwt, s.decode()), ("eyJhbGc.eyJzdWIi.c2ln", seed))
        finally:
            os.unlink(path)
        with self.assertRaises(nkeys.CredsError):
            nkeys.read_creds("/nonexistent/x.creds")


class DurationTest(unittest.TestCase):
    def test_parse(self) -> None:
        for text, secs in (("1s", 1), ("1h30m", 5400), ("250ms", 0.25), ("1.5s", 1.5), ("2h45m30.5s", 9930.5), ("0", 0), ("10us", 1e-5)):
            self.assertAlmostEqual(parse_duration(text), secs, msg=text)
        for bad in ("", "1", "1d", "s", "1s2"):
            with self.assertRaises(ValueError, msg=bad):
                parse_duration(bad)

    def test_format(self) -> None:
        for secs, text in ((1, "1s"), (90, "1m30s"), (0.25, "250ms"), (3600, "1h0m0s"), (1.5, "1.5s"), (0, "0s"), (86400 * 2, "48h0m0s")):
            self.assertEqual(format_duration(secs), text)
            self.assertAlmostEqual(parse_duration(text), secs)


class UUIDTest(unittest.TestCase):
    def test_uuid7(self) -> None:
        ids = [uuid7() for _ in range(200)]
        self.assertEqual(len(set(ids)), 200)
        for i in ids:
            self.assertEqual(i[14], "7")
            self.assertIn(i[19], "89ab")
        self.assertLessEqual(ids[0][:13], ids[-1][:13])  # time-ordered by the millisecond


class SubmissionTest(unittest.TestCase):
    def test_options(self) -> None:
        c = Client(transport=None, group="acme")  # type: ignore[arg-type]
        run_at = datetime(2030, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
        s = c.submission(
            "ocr", {"f": 1}, priority="high", run_at=run_at, timeout=timedelta(minutes=5), unique_for=3600,
            unique_by=("task", "args"), max_retries=2, expires_at="2030-01-01T00:00:00Z", subject="s", submitter="me",
            depends_on=["a"],
        )
        self.assertEqual(s["group"], "acme")
        self.assertEqual(s["run_at"], "2030-01-02T03:04:05Z")
        self.assertEqual((s["timeout"], s["unique_for"]), ("5m0s", "1h0m0s"))
        self.assertEqual(s["unique_by"], ["task", "args"])
        self.assertEqual(s["depends_on"], ["a"])
        self.assertEqual(len(s["id"]), 36)
        with self.assertRaises(TypeError):
            c.submission("ocr", {}, colour="red")
        with self.assertRaises(fairway.InvalidError) as cm:
            c.submission("bad task", {})
        self.assertEqual(cm.exception.field, "task")
        with self.assertRaises(fairway.InvalidError):
            Client(transport=None).submission("ocr", {})  # type: ignore[arg-type]
        with self.assertRaises(ValueError):
            c.submission("ocr", {}, timeout="soon")

    def test_errors_and_headers(self) -> None:
        e = fairway.FairwayError.from_reply({"code": "invalid", "field": "priority", "message": "unknown priority"})
        self.assertIsInstance(e, fairway.InvalidError)
        self.assertEqual((e.code, e.field, e.message), ("invalid", "priority", "unknown priority"))
        self.assertEqual(str(e), "invalid: priority: unknown priority")
        self.assertIsInstance(fairway.FairwayError.from_reply({"code": "not_found"}), fairway.NotFoundError)
        self.assertEqual(type(fairway.FairwayError.from_reply({"code": "brand_new"})), fairway.FairwayError)
        h, status, desc = _parse_headers(b"NATS/1.0 503 No Responders\r\n\r\n")
        self.assertEqual((h, status, desc), ({}, "503", "No Responders"))
        h, status, _ = _parse_headers(b"NATS/1.0\r\nA: 1\r\nB:  two words \r\n\r\n")
        self.assertEqual((h, status), ({"A": "1", "B": "two words"}, ""))
