"""NATS ``.creds`` files and nkey seeds: the user JWT and the signature of the server's nonce.

The seed is decoded here (base32, a two-byte prefix, the 32-byte ed25519
seed, a CRC-16/XMODEM checksum); the signature needs PyNaCl (the
``fairway-client[creds]`` extra).
"""

from __future__ import annotations

import base64
import re

__all__ = ["read_creds", "decode_seed", "sign_nonce", "public_key", "CredsError"]


class CredsError(ValueError):
    """A ``.creds`` file or an nkey seed that cannot be used."""


_PREFIX_SEED = 18 << 3  # 'S'
_PREFIX_USER = 20 << 3  # 'U'
_PREFIXES = {
    14 << 3: "operator",  # 'O'
    0: "account",  # 'A'
    _PREFIX_USER: "user",
    2 << 3: "cluster",  # 'C'
    13 << 3: "server",  # 'N'
}

_BLOCK = re.compile(rb"\s*(?:(?:-{3,}[^\n]*-{3,}\r?\n)([\w\-.=]+)(?:\r?\n-{3,}[^\n]*-{3,}\r?\n?))")


def read_creds(path: str) -> tuple[str, bytes]:
    """Returns the user JWT and the nkey seed (as its text) of a ``.creds`` file."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise CredsError(f"reading the credentials {path}: {e}") from e
    blocks = _BLOCK.findall(data)
    if len(blocks) < 2:
        raise CredsError(f"{path} is not a NATS .creds file (it needs a user JWT block and a seed block)")
    return blocks[0].decode(), blocks[1]


def _crc16(data: bytes) -> int:
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
            crc &= 0xFFFF
    return crc


def _b32decode(text: bytes) -> bytes:
    text = text.strip()
    pad = (-len(text)) % 8
    try:
        return base64.b32decode(text + b"=" * pad)
    except Exception as e:  # binascii.Error
        raise CredsError(f"the nkey seed is not base32: {e}") from e


def decode_seed(seed: bytes | str) -> tuple[str, bytes]:
    """Returns the key type (``user``, ``account``…) and the 32-byte ed25519 seed of an nkey seed."""
    if isinstance(seed, str):
        seed = seed.encode()
    raw = _b32decode(seed)
    if len(raw) < 4:
        raise CredsError("the nkey seed is too short")
    body, crc = raw[:-2], int.from_bytes(raw[-2:], "little")
    if _crc16(body) != crc:
        raise CredsError("the nkey seed's checksum does not match")
    b1 = body[0] & 0xF8
    if b1 != _PREFIX_SEED:
        raise CredsError("not an nkey seed (it does not start with S)")
    b2 = ((body[0] & 0x07) << 5) | ((body[1] & 0xF8) >> 3)
    kind = _PREFIXES.get(b2)
    if kind is None:
        raise CredsError("the nkey seed has an unknown key type")
    key = body[2:]
    if len(key) != 32:
        raise CredsError("the nkey seed does not hold 32 bytes")
    return kind, key


def _signing_key(seed: bytes | str):  # type: ignore[no-untyped-def]
    try:
        from nacl.signing import SigningKey
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise CredsError(
            "logging in with a .creds file or an nkey needs PyNaCl: pip install 'fairway-client[creds]'"
        ) from e
    _, key = decode_seed(seed)
    return SigningKey(key)


def sign_nonce(seed: bytes | str, nonce: str) -> str:
    """Signs the server's nonce with the seed: base64url without padding, as CONNECT's ``sig``."""
    sig = _signing_key(seed).sign(nonce.encode()).signature
    return base64.urlsafe_b64encode(sig).rstrip(b"=").decode()


def public_key(seed: bytes | str) -> str:
    """The public nkey (``U…`` for a user seed) of a seed."""
    kind, _ = decode_seed(seed)
    prefix = {v: k for k, v in _PREFIXES.items()}[kind]
    pub = bytes(_signing_key(seed).verify_key)
    body = bytes([prefix]) + pub
    body += _crc16(body).to_bytes(2, "little")
    return base64.b32encode(body).rstrip(b"=").decode()
