"""The S3 backend (boto3, imported only when a project uses it): AWS S3 or any S3-compatible store.

Generations are ETags. Conditional writes use ``If-None-Match: *`` (create) and ``If-Match`` (replace);
S3 evaluates them atomically, so of two writers naming the same generation exactly one wins.

Retries with backoff are botocore's ``standard`` mode (connection errors, 5xx, throttling). A retried
conditional PUT whose first attempt did land answers 412 to itself; a 412 is therefore checked against
the object's ETag (the MD5 of the body for a single-part PUT) before it is reported as a lost race.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from rocky_engine.state.remote.backend import (
    ANY,
    DEFAULT_ATTEMPTS,
    Blob,
    Condition,
    PreconditionFailed,
    RemoteStateError,
    _Unconditional,
    missing_client,
    redact_url,
)

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

T = TypeVar("T")
_CONFLICT_CODES = frozenset({"PreconditionFailed", "ConditionalRequestConflict"})
_MISSING_CODES = frozenset({"NoSuchKey", "NotFound", "404"})


class S3Backend:
    """Blobs under ``s3://<bucket>/<prefix>``."""

    kind = "s3"
    supports_cas = True

    def __init__(
        self,
        bucket: str,
        prefix: str,
        *,
        endpoint_url: str | None = None,
        timeout_seconds: float = 300,
        max_attempts: int = DEFAULT_ATTEMPTS,
    ) -> None:
        try:
            import boto3
            from botocore.config import Config
        except ImportError as exc:  # pragma: no cover - boto3 ships with the [remote] extra
            raise missing_client("s3", "boto3") from exc
        self.bucket = bucket
        self.prefix = _normalise_prefix(prefix)
        self._endpoint = f" (endpoint {redact_url(endpoint_url)})" if endpoint_url else ""
        self.location = f"s3://{bucket}/{self.prefix}{self._endpoint}"
        config = Config(
            connect_timeout=min(timeout_seconds, 10),
            read_timeout=timeout_seconds,
            retries={"mode": "standard", "max_attempts": max_attempts},
            # S3-compatible stores (SeaweedFS, MinIO, Ceph) answer on one host, not per-bucket hostnames.
            s3={"addressing_style": "path"} if endpoint_url else None,
        )
        session = boto3.session.Session()
        region = session.region_name or "us-east-1"
        self._client: S3Client = session.client(
            "s3", endpoint_url=endpoint_url or None, region_name=region, config=config
        )

    def _key(self, name: str) -> str:
        return self.prefix + name

    def describe(self, name: str) -> str:
        return f"s3://{self.bucket}/{self._key(name)}{self._endpoint}"

    def get(self, name: str) -> Blob | None:
        def fetch() -> Blob:
            resp = self._client.get_object(Bucket=self.bucket, Key=self._key(name))
            return Blob(data=resp["Body"].read(), generation=str(resp["ETag"]))

        return self._read(name, fetch)

    def head(self, name: str) -> str | None:
        """The current generation of ``name`` without its body (``None`` when it does not exist)."""
        return self._read(
            name, lambda: str(self._client.head_object(Bucket=self.bucket, Key=self._key(name))["ETag"])
        )

    def put(
        self, name: str, data: bytes, *, expect: Condition = ANY, ttl_seconds: float | None = None
    ) -> str:
        from botocore.exceptions import BotoCoreError, ClientError

        kwargs: dict[str, Any] = {}
        if expect is None:
            kwargs["IfNoneMatch"] = "*"
        elif isinstance(expect, str):
            kwargs["IfMatch"] = expect
        try:
            resp = self._client.put_object(Bucket=self.bucket, Key=self._key(name), Body=data, **kwargs)
        except ClientError as exc:
            if _code(exc) in _CONFLICT_CODES:
                current = self.head(name)
                if current is not None and current.strip('"') == hashlib.md5(data).hexdigest():
                    # Our own earlier attempt landed and its answer was lost; the write is ours.
                    return current
                raise PreconditionFailed(name, current) from exc
            raise self._error(exc, "write", name) from exc
        except BotoCoreError as exc:
            raise self._error(exc, "write", name) from exc
        return str(resp["ETag"])

    def delete(self, name: str, *, expect: str | _Unconditional = ANY) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        kwargs: dict[str, Any] = {}
        if isinstance(expect, str):
            kwargs["IfMatch"] = expect
        try:
            self._client.delete_object(Bucket=self.bucket, Key=self._key(name), **kwargs)
        except ClientError as exc:
            code = _code(exc)
            if code in _MISSING_CODES:
                return
            if code in _CONFLICT_CODES:
                raise PreconditionFailed(name) from exc
            raise self._error(exc, "delete", name) from exc
        except BotoCoreError as exc:
            raise self._error(exc, "delete", name) from exc

    def close(self) -> None:
        self._client.close()

    def _read(self, name: str, fn: Callable[[], T]) -> T | None:
        """Run one read request: ``None`` when the object does not exist, else a located error."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return fn()
        except ClientError as exc:
            if _code(exc) in _MISSING_CODES:
                return None
            raise self._error(exc, "read", name) from exc
        except BotoCoreError as exc:
            raise self._error(exc, "read", name) from exc

    def _error(self, exc: Exception, action: str, name: str) -> RemoteStateError:
        from botocore.exceptions import ClientError, NoCredentialsError

        where = self.describe(name)
        if isinstance(exc, NoCredentialsError):
            return RemoteStateError(
                f"could not {action} {where}: no AWS credentials found",
                hint="set AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or an instance role",
            )
        if isinstance(exc, ClientError):
            code = _code(exc)
            if code == "NoSuchBucket":
                return RemoteStateError(
                    f"could not {action} {where}: bucket '{self.bucket}' does not exist",
                    hint="create the bucket, or fix [state] s3_bucket",
                )
            if code in ("AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
                return RemoteStateError(
                    f"could not {action} {where}: access denied ({code})",
                    hint="check the credentials and that they may read and write this bucket and prefix",
                )
            message = exc.response.get("Error", {}).get("Message") or code
            return RemoteStateError(f"could not {action} {where}: {code}: {message}")
        return RemoteStateError(f"could not {action} {where}: {exc}")


def _code(exc: Any) -> str:
    error = exc.response.get("Error", {}) if hasattr(exc, "response") else {}
    return str(error.get("Code") or exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))


def _normalise_prefix(prefix: str) -> str:
    prefix = prefix.lstrip("/")
    return prefix if not prefix or prefix.endswith("/") else prefix + "/"
