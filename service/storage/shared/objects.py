"""The S3-compatible object store of the shared backend: one bucket, every key under an optional prefix.

boto3 finds the endpoint, region and credentials by its standard configuration (AWS_ENDPOINT_URL_S3,
AWS_DEFAULT_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, or an instance role). Addressing is path-style when an
endpoint URL is set (MinIO, SeaweedFS, Ceph and R2 expect it). A store that cannot be reached, or fails, raises
ObjectStoreUnavailable (503); a refusal that means the configuration is wrong (no such bucket, access denied) is a
ConfigurationError at start-up.
"""
import contextlib
import io
import logging
import os
import threading

import boto3
import botocore.exceptions
from botocore.config import Config

from service.errors import ConfigurationError, ObjectStoreUnavailable

log = logging.getLogger(__name__)

# Smallest part of a multipart upload but the last (S3's rule, 5 MiB).
MIN_PART_SIZE = 5 * 1024 * 1024
READ_BLOCK = 1024 * 1024
# Error codes that say the request itself is wrong for this bucket, not that the store is down.
_CONFIGURATION_CODES = {"NoSuchBucket", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch",
                        "AllAccessDisabled", "InvalidBucketName", "PermanentRedirect"}


def _client_config():
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    return Config(
        s3={"addressing_style": "path" if endpoint else "auto"},
        connect_timeout=5, read_timeout=60, retries={"max_attempts": 2, "mode": "standard"},
        # Parts are verified by our own SHA-256 of the whole file; a CRC of every request body is CPU for nothing.
        request_checksum_calculation="when_required", response_checksum_validation="when_required",
        max_pool_connections=64, tcp_keepalive=True)


class NoSuchObject(Exception):
    """A key or multipart upload that is not (or no longer) in the store."""


@contextlib.contextmanager
def store_errors():
    """Turn what botocore raises into ObjectStoreUnavailable, NoSuchObject or ConfigurationError."""
    try:
        yield
    except botocore.exceptions.ClientError as error:
        code = error.response.get("Error", {}).get("Code", "")
        if code in {"NoSuchKey", "NoSuchUpload", "404", "NotFound"}:
            raise NoSuchObject(code) from error
        if code in _CONFIGURATION_CODES:
            raise ConfigurationError(f"the object store refused access to the bucket: {code} "
                                     f"({error.response.get('Error', {}).get('Message', '')})") from error
        raise _unavailable(error, "failed") from error
    except (botocore.exceptions.BotoCoreError, OSError) as error:
        if isinstance(error, (botocore.exceptions.NoCredentialsError, botocore.exceptions.PartialCredentialsError)):
            raise ConfigurationError(f"no credentials for the object store: {error}") from error
        raise _unavailable(error, "unreachable") from error


def _unavailable(error, kind):
    """ObjectStoreUnavailable for what botocore raised, its cause logged once (botocore's own retries are inside)."""
    log.warning("an object store call failed: %s", " ".join(str(error).split()))
    unavailable = ObjectStoreUnavailable()
    unavailable.kind = kind
    return unavailable


class ObjectStore:
    """Objects under `prefix` in `bucket`. The boto3 client is made lazily in each process (never across a fork)."""

    def __init__(self, bucket, prefix=""):
        self.bucket = bucket
        self.prefix = prefix
        self._client = None
        self._client_pid = None
        self._making = threading.Lock()

    @property
    def client(self):
        if self._client is None or self._client_pid != os.getpid():
            with self._making:
                if self._client is None or self._client_pid != os.getpid():
                    self._client = boto3.session.Session().client("s3", config=_client_config())
                    self._client_pid = os.getpid()
        return self._client

    def key(self, name):
        return self.prefix + name

    def check(self):
        """Raise ObjectStoreUnavailable or ConfigurationError unless the bucket answers."""
        with store_errors():
            try:
                self.client.head_bucket(Bucket=self.bucket)
            except botocore.exceptions.ClientError as error:
                # head_bucket carries no error body: its 404 and 403 are spelled out here.
                status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
                if status == 404:
                    raise ConfigurationError(f"the object store has no bucket {self.bucket!r} (WIS_S3_BUCKET)") from error
                if status == 403:
                    raise ConfigurationError(f"the object store refused access to bucket {self.bucket!r}: check the "
                                             "credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)") from error
                raise

    # -- whole objects ---------------------------------------------------------------------------------------------

    def put_file(self, key, file, size):
        """Store `size` bytes read from the open binary `file` (from its current position) at `key`."""
        with store_errors():
            return self.client.put_object(Bucket=self.bucket, Key=key, Body=_Limited(file, size),
                                          ContentLength=size)["ETag"]

    def put_file_if_absent(self, key, file, size):
        """Like put_file, but only while no object is at `key` (`If-None-Match: *`): False, storing nothing, when
        one is, or when a concurrent put of the same key wins."""
        with store_errors():
            try:
                self.client.put_object(Bucket=self.bucket, Key=key, Body=_Limited(file, size), ContentLength=size,
                                       IfNoneMatch="*")
            except botocore.exceptions.ClientError as error:
                if error.response.get("Error", {}).get("Code") in {"PreconditionFailed", "ConditionalRequestConflict"}:
                    return False
                raise
        return True

    def head(self, key):
        """(size, ETag) of an object; NoSuchObject when there is none."""
        with store_errors():
            answer = self.client.head_object(Bucket=self.bucket, Key=key)
        return answer["ContentLength"], answer["ETag"]

    def read(self, key, start=0, end=None):
        """A stream of the object's bytes from `start` up to `end` (exclusive; None: to the end): an iterator of
        blocks with `close()`."""
        byte_range = f"bytes={start}-" + ("" if end is None else str(end - 1))
        with store_errors():
            body = self.client.get_object(Bucket=self.bucket, Key=key, Range=byte_range)["Body"]
        return _Blocks(body)

    def delete(self, key):
        """Remove an object; removing one that is not there is no error."""
        with store_errors():
            self.client.delete_object(Bucket=self.bucket, Key=key)

    def keys(self, under=""):
        """Every key under `prefix + under`."""
        with store_errors():
            for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket,
                                                                             Prefix=self.prefix + under):
                for entry in page.get("Contents", ()):
                    yield entry["Key"]

    # -- multipart uploads -----------------------------------------------------------------------------------------

    def start_multipart(self, key, content_type=None):
        extra = {"ContentType": content_type} if content_type else {}
        with store_errors():
            return self.client.create_multipart_upload(Bucket=self.bucket, Key=key, **extra)["UploadId"]

    def upload_part(self, key, upload_id, number, body, size):
        """Upload part `number` from `body` (an open binary file, or bytes); return its ETag."""
        if not isinstance(body, (bytes, bytearray)):
            body = _Limited(body, size)
        with store_errors():
            return self.client.upload_part(Bucket=self.bucket, Key=key, UploadId=upload_id, PartNumber=number,
                                           Body=body, ContentLength=size)["ETag"]

    def copy_part(self, key, upload_id, number, source_key):
        """Make the whole object `source_key` part `number`, inside the store (no bytes pass through here)."""
        with store_errors():
            answer = self.client.upload_part_copy(Bucket=self.bucket, Key=key, UploadId=upload_id, PartNumber=number,
                                                  CopySource={"Bucket": self.bucket, "Key": source_key})
        return answer["CopyPartResult"]["ETag"]

    def complete_multipart(self, key, upload_id, parts):
        """Join `parts` ([(number, ETag)], ascending) into the object `key`."""
        with store_errors():
            self.client.complete_multipart_upload(
                Bucket=self.bucket, Key=key, UploadId=upload_id,
                MultipartUpload={"Parts": [{"PartNumber": number, "ETag": etag} for number, etag in parts]})

    def abort_multipart(self, key, upload_id):
        """Abort a multipart upload and drop its parts; one already gone is no error."""
        with contextlib.suppress(NoSuchObject), store_errors():
            self.client.abort_multipart_upload(Bucket=self.bucket, Key=key, UploadId=upload_id)


class ObjectReader(io.RawIOBase):
    """One object of `size` bytes as a read-only, seekable binary file that never holds more than one read in memory.

    Reads come from one ranged GET that starts at the current position and runs to the end of the object, read as the
    caller asks; a seek elsewhere closes it (closing an unfinished GET closes its connection: nothing is left open
    in the pool). `seek` opens the GET at once, so that a caller can learn of a store failure, or of an object that is
    gone (`missing` is raised), before it has sent anything; `close` ends the GET.
    """

    def __init__(self, store, key, size, missing=NoSuchObject):
        super().__init__()
        self._store = store
        self._key = key
        self.size = size
        self._missing = missing
        self._position = 0
        self._body = None  # the GET under way, positioned at self._position

    def readable(self):
        return True

    def seekable(self):
        return True

    def tell(self):
        return self._position

    def seek(self, offset, whence=io.SEEK_SET):
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self.size}[whence]
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset}")
        if base + offset != self._position:
            self._end_get()
            self._position = base + offset
        self._start_get()
        return self._position

    def read(self, size=-1):
        if self.closed:
            raise ValueError("read of a closed ObjectReader")
        left = max(0, self.size - self._position)
        size = left if size is None or size < 0 else min(size, left)
        if size == 0:
            return b""
        self._start_get()
        with store_errors():
            data = self._body.read(size)
        if not data:
            # The store said the object has `size` bytes, then ended the body early.
            raise ObjectStoreUnavailable()
        self._position += len(data)
        return data

    def close(self):
        self._end_get()
        super().close()

    def _start_get(self):
        if self._body is not None or self._position >= self.size:
            return
        try:
            with store_errors():
                self._body = self._store.client.get_object(Bucket=self._store.bucket, Key=self._key,
                                                           Range=f"bytes={self._position}-")["Body"]
        except NoSuchObject:
            raise self._missing() from None

    def _end_get(self):
        if self._body is not None:
            with contextlib.suppress(Exception):
                self._body.close()
            self._body = None


class _Limited:
    """At most `size` bytes of an open binary file, as a read-only file for botocore (which may rewind it to retry)."""

    def __init__(self, file, size):
        self._file = file
        self._start = file.tell()
        self._size = size
        self._position = 0

    def read(self, amount=-1):
        left = self._size - self._position
        if amount is None or amount < 0 or amount > left:
            amount = left
        data = self._file.read(amount)
        self._position += len(data)
        return data

    def seek(self, offset, whence=0):
        if whence == 0:
            position = offset
        elif whence == 1:
            position = self._position + offset
        else:
            position = self._size + offset
        self._position = max(0, min(position, self._size))
        self._file.seek(self._start + self._position)
        return self._position

    def tell(self):
        return self._position

    def __len__(self):
        return self._size


class _Blocks:
    """An object's body as blocks of READ_BLOCK bytes; a store failure mid-way is ObjectStoreUnavailable."""

    def __init__(self, body):
        self._body = body

    def __iter__(self):
        while True:
            with store_errors():
                block = self._body.read(READ_BLOCK)
            if not block:
                return
            yield block

    def close(self):
        with contextlib.suppress(Exception):
            self._body.close()
