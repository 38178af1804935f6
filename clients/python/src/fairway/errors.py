"""Errors raised by the Fairway client, the worker and the NATS transport."""

from __future__ import annotations

from typing import Any, Mapping

__all__ = [
    "FairwayError",
    "InvalidError",
    "NotFoundError",
    "DuplicateError",
    "ConflictError",
    "UnavailableError",
    "QuotaError",
    "InternalError",
    "NotRegisteredError",
    "TransportError",
    "ConnectionClosedError",
    "NoRespondersError",
    "RequestTimeoutError",
    "MaxPayloadError",
    "AuthorizationError",
    "JetStreamError",
    "Permanent",
    "Snooze",
    "WaitTimeoutError",
]


class FairwayError(Exception):
    """A refusal by Fairway: the ``error`` of a Reply, or a rejected submission.

    ``code`` is one of ``invalid``, ``not_found``, ``duplicate``, ``conflict``,
    ``unavailable``, ``quota``, ``internal`` (and ``not_registered`` for
    executors); ``field`` names the field an ``invalid`` refusal is about.
    """

    code: str
    field: str
    message: str
    job_id: str
    request_id: str

    def __init__(self, code: str, message: str = "", field: str = "", *, job_id: str = "", request_id: str = "") -> None:
        self.code = code
        self.field = field
        self.message = message
        self.job_id = job_id
        self.request_id = request_id
        text = f"{code}: {field}: {message}" if field else f"{code}: {message}"
        super().__init__(text)

    @staticmethod
    def from_reply(err: Mapping[str, Any]) -> "FairwayError":
        """Builds the error of a Reply's ``error`` object, of the subclass its code names."""
        code = str(err.get("code") or "internal")
        cls = _BY_CODE.get(code, FairwayError)
        return cls(
            code,
            str(err.get("message") or ""),
            str(err.get("field") or ""),
            job_id=str(err.get("job_id") or ""),
            request_id=str(err.get("request_id") or ""),
        )


class InvalidError(FairwayError):
    """``invalid``: a field of the request is wrong (see ``field``)."""


class NotFoundError(FairwayError):
    """``not_found``: no such job (or executor, limit…)."""


class DuplicateError(FairwayError):
    """``duplicate``: the tracker or uniqueness key is held by ``job_id``."""


class ConflictError(FairwayError):
    """``conflict``: the job is not in a state the verb applies to."""


class UnavailableError(FairwayError):
    """``unavailable``: PostgreSQL is down or the coordinator is busy; retry."""


class QuotaError(FairwayError):
    """``quota``: a per-group limit is reached; the message says when to retry."""


class InternalError(FairwayError):
    """``internal``: the coordinator logged the detail under ``request_id``."""


class NotRegisteredError(FairwayError):
    """``not_registered``: the executor instance is not the registered one."""


_BY_CODE: dict[str, type[FairwayError]] = {
    "invalid": InvalidError,
    "not_found": NotFoundError,
    "duplicate": DuplicateError,
    "conflict": ConflictError,
    "unavailable": UnavailableError,
    "quota": QuotaError,
    "internal": InternalError,
    "not_registered": NotRegisteredError,
}


class TransportError(Exception):
    """A failure of the messaging layer (NATS), not a refusal by Fairway."""


class ConnectionClosedError(TransportError):
    """The connection is closed for good."""


class NoRespondersError(TransportError):
    """Nobody listens on the request's subject (NATS status 503)."""

    def __init__(self, subject: str) -> None:
        self.subject = subject
        super().__init__(f"no responders on {subject}")


class RequestTimeoutError(TransportError, TimeoutError):
    """No reply came in time."""

    def __init__(self, subject: str, timeout: float) -> None:
        self.subject = subject
        self.timeout = timeout
        super().__init__(f"no reply on {subject} within {timeout:g}s")


class MaxPayloadError(TransportError):
    """A message is larger than the server's ``max_payload``."""

    def __init__(self, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        super().__init__(f"message of {size} bytes exceeds the server's max_payload of {limit} bytes")


class AuthorizationError(TransportError):
    """The server refused the credentials or a permission."""


class JetStreamError(TransportError):
    """JetStream answered with an API error (``{"error":{"code","err_code","description"}}``)."""

    def __init__(self, code: int, err_code: int, description: str) -> None:
        self.code = code
        self.err_code = err_code
        self.description = description
        super().__init__(f"jetstream: {description} (status {code}, err_code {err_code})")


class Permanent(Exception):
    """Raise from a task handler to fail the job without retries (outcome ``permanent``)."""


class Snooze(Exception):
    """Raise from a task handler to put the job back to waiting, due after ``seconds``.

    No failure is counted (outcome ``snoozed``).
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = float(seconds)
        super().__init__(f"snoozed for {self.seconds:g}s")


class WaitTimeoutError(TimeoutError):
    """A wait ran out before the job ended; ``job`` is the job as last seen (or None)."""

    def __init__(self, group: str, job_id: str, timeout: float, job: Any = None) -> None:
        self.group = group
        self.job_id = job_id
        self.timeout = timeout
        self.job = job
        super().__init__(f"job {job_id} of group {group} did not end within {timeout:g}s")
