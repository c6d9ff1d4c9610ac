"""tus 1.0 uploads (CONTRACT 7): a tus upload is a stream in the same store as chunked streams, whose bytes only ever
grow at the end of its prefix. Views hand these functions parsed header values; the body arrives as an iterable of
blocks (its `cut_off` tells, once iterated, whether the client went away before the end)."""
import hashlib
import re

from service.domain.uploads import check_format, check_size, destination_for, new_media_prefix, stream_media_path
from service.errors import (
    BeyondUploadLength, BodyChecksumMismatch, BodyCutOff, ChecksumMismatch, InvalidRequest, OffsetMismatch,
    StreamNotFound, WrongProtocol,
)
from service.interface import SNIFF_BYTES, TUS_COMMIT_PART_BYTES, TUS_PROTOCOL
from service.storage.contract import Outcome, StreamRecord, StreamWrite

SHA256_HEX = re.compile(r"[0-9a-fA-F]{64}")
DEFAULT_FILE_NAME = "upload"
# How long a PATCH waits for the one before it on the same upload (one whose client went away commits what it got
# as soon as its read ends); past that it is 423 and the client retries after a HEAD.
APPEND_LOCK_TIMEOUT = 10


def require_tus(record):
    """409 naming the chunk API when a tus request comes to a chunked stream."""
    if not record.is_tus:
        raise WrongProtocol("this stream is a chunked stream, not a tus upload: send its chunks as multipart/form-data "
                            "PATCH requests (chunkIndex, totalChunks, file), without Tus-Resumable")


def create_tus_upload(repo, org, length, metadata, raw_metadata):
    """Open a tus upload of `length` bytes (None: too many digits to read, over every limit) from its decoded
    Upload-Metadata; refuse at once a file over the destination limit. Return the stream id."""
    if "destinationId" not in metadata:
        raise InvalidRequest("Upload-Metadata: destinationId is required (tus metadata: 'destinationId <base64>')")
    destination_id = metadata["destinationId"]
    destination = destination_for(destination_id)
    if length is not None and length < 1:
        raise InvalidRequest("Upload-Length: must be at least 1 byte")
    check_size(length, destination.limit)
    sha = metadata.get("sha256")
    if sha is not None and not SHA256_HEX.fullmatch(sha):
        raise InvalidRequest("Upload-Metadata: sha256 must be the file's SHA-256 as 64 hex digits")
    file_name = metadata.get("filename") or metadata.get("name") or DEFAULT_FILE_NAME
    return repo.streams.create(org, StreamRecord(
        protocol=TUS_PROTOCOL, destination_id=destination_id, file_name=file_name, file_size=length,
        sha=sha.lower() if sha else None, upload_metadata=raw_metadata, media_prefix=new_media_prefix(repo)))


def tus_upload_state(repo, org, stream_id):
    """The StreamStatus of a live tus upload (its record, committed offset, expiry)."""
    status = repo.streams.status(org, stream_id)
    require_tus(status.record)
    return status


def upload_expires(repo):
    """When an upload active now expires if left idle (a timestamp)."""
    return repo.streams.expiry_from_now()


def _open_upload(repo, org, stream_id):
    record = repo.streams.read(org, stream_id)
    if record is None:
        raise StreamNotFound()
    require_tus(record)
    return record


def append_tus(repo, org, stream_id, offset, body, body_length=None, checksum=None):
    """Append a PATCH body at `offset`; return the StreamWrite (its outcome, the committed offset, the media path once
    complete).

    `body` is an iterable of blocks with a `cut_off` attribute; `body_length` its Content-Length when sent;
    `checksum` (algorithm, expected digest bytes) of the body. Bytes count only once fsynced and committed; a body cut
    off mid-way commits what arrived (unless a checksum was to be verified) so that the client resumes from HEAD.
    """
    record = _open_upload(repo, org, stream_id)
    if record.is_complete:
        if offset == record.file_size and not body_length:
            return StreamWrite(Outcome.ALREADY_COMPLETE, record.path, offset)
        raise OffsetMismatch(f"Upload-Offset: the upload is complete at offset {record.file_size}, not {offset}")

    def receive(appending):
        """Receive the body past the committed offset: the store calls this holding the upload for this request, and
        keeps nothing of the body if it raises."""
        if offset != appending.offset:
            raise OffsetMismatch(f"Upload-Offset: the upload is at offset {appending.offset}, not {offset}; "
                                 "nothing was appended (HEAD gives the offset to continue from)")
        room = record.file_size - offset
        if body_length is not None and body_length > room:
            raise BeyondUploadLength(f"the body of {body_length} bytes at offset {offset} goes past the Upload-Length "
                                     f"of {record.file_size}; nothing was appended")
        _receive(appending, body, room, record, offset, checksum, body_length)
        if body.cut_off and checksum is not None:
            # What arrived cannot be checked against a checksum of the whole body: none of it is kept.
            raise InvalidRequest("the body ended before its Content-Length; with an Upload-Checksum nothing is kept")
        _check_body_format(appending, record)

    written = repo.streams.append_tus(org, stream_id, receive, TUS_RULES, APPEND_LOCK_TIMEOUT)
    if body.cut_off:
        raise BodyCutOff(f"the body ended before its Content-Length; the {written.offset - offset} bytes that arrived "
                         f"are kept (Upload-Offset {written.offset})", written.offset)
    return written


def _receive(appending, body, room, record, offset, checksum, body_length):
    digest = hashlib.new(checksum[0]) if checksum else None
    # A long body is committed in parts as it arrives (CONTRACT 13), so that a crash of this node keeps them: only
    # when nothing can refuse it at its end (a checksum of the whole body, a length not known at the start).
    in_parts = checksum is None and body_length is not None
    received = pending = 0  # bytes of the body, and of them those not committed yet
    for block in body:
        if received + len(block) > room:
            raise BeyondUploadLength(f"the body goes past the Upload-Length of {record.file_size} from offset "
                                     f"{offset}; nothing was appended")
        received += len(block)
        if digest is not None:
            digest.update(block)
        while in_parts and pending + len(block) >= TUS_COMMIT_PART_BYTES and received < body_length:
            # Exactly TUS_COMMIT_PART_BYTES per part: the block is split where a part ends.
            cut = TUS_COMMIT_PART_BYTES - pending
            appending.write(block[:cut])
            block = block[cut:]
            _check_body_format(appending, record)
            appending.commit()
            pending = 0
        if block:
            appending.write(block)
            pending += len(block)
    if digest is not None and not body.cut_off and digest.digest() != checksum[1]:
        raise BodyChecksumMismatch(f"Upload-Checksum: the {checksum[0]} of the body is not the one sent; "
                                   "nothing was appended")


def _check_body_format(appending, record):
    """The format is decided by the bytes that reach SNIFF_BYTES (or the end of a shorter file): the PATCH that
    carries them is refused with nothing appended when its destination does not accept that format."""
    end = appending.offset + appending.size
    if appending.offset < SNIFF_BYTES and (end >= SNIFF_BYTES or end == record.file_size):
        check_format(record.destination_id, appending.upload_head(SNIFF_BYTES))


class TusRules:
    """What completes a tus upload (contract.CompletionRules): the SHA-256 sent in its metadata, if any, checked
    against the running one (nothing is read again), and its media name from the format its first bytes show."""

    def verify(self, record, size, sha256, head):
        if record.sha is not None and sha256 != record.sha:
            raise ChecksumMismatch(f"Upload-Metadata: the SHA-256 of the file is {sha256}, not the sha256 sent "
                                   f"({record.sha}); the upload is discarded")
        return stream_media_path(record, check_format(record.destination_id, head))


TUS_RULES = TusRules()
