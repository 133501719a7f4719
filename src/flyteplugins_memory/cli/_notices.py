"""What the CLI says on stderr about storage beyond its one ``error:`` line: each retry of a storage call
while it happens (the storage layer logs them, `storage._fsspec.logger`, at INFO), and after a failure
whose cause is credentials, which settings to check."""

from __future__ import annotations

import logging
import sys

#: the storage layer's logger of retried calls (named, not imported: --help must not load storage)
RETRY_LOGGER = "flyteplugins_memory.storage._fsspec"
#: what, in a failure's chain of causes, says the credentials are missing, wrong or expired
_CREDENTIAL_SIGNS = (
    "NoCredentialsError",
    "PartialCredentialsError",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "ExpiredToken",
    "InvalidToken",
    "DefaultCredentialsError",
    "RefreshError",
    "Unable to locate credentials",
    "AccessDenied",
    "Access Denied",
)
CREDENTIALS_HINT = (
    "check the storage credentials: for S3 AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY "
    "(and AWS_ENDPOINT_URL for a non-AWS endpoint), for GCS GOOGLE_APPLICATION_CREDENTIALS, or the storage "
    "section of the Flyte config"
)


class _Stderr(logging.Handler):
    """Writes each record as ``retrying: ...`` to the stderr of the moment (a test runner swaps it)."""

    def emit(self, record: logging.LogRecord) -> None:
        sys.stderr.write(f"retrying: {record.getMessage()}\n")


def show_retries() -> None:
    """Say each retried storage call on stderr (once per process, however often the group runs)."""
    logger = logging.getLogger(RETRY_LOGGER)
    if not any(isinstance(handler, _Stderr) for handler in logger.handlers):
        logger.addHandler(_Stderr(logging.INFO))
    logger.setLevel(logging.INFO)


def credentials_hint(exc: BaseException) -> str:
    """`CREDENTIALS_HINT` if anything in `exc`'s chain of causes (the backend's errors a storage failure
    wraps; not `exc` itself, which may be our own `AccessDenied` of a read-only path) says credentials
    failed, else ""."""
    seen: set[int] = set()
    current: BaseException | None = exc.__cause__ or exc.__context__
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        text = f"{type(current).__name__} {current}"
        if any(sign in text for sign in _CREDENTIAL_SIGNS):
            return CREDENTIALS_HINT
        current = current.__cause__ or current.__context__
    return ""
