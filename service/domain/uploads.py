"""Upload rules: destinations and their limits, format sniffing, media names, and the upload operations.

Views hand these functions the repository, the org and already-validated fields; the bytes arrive as an
`IncomingFile` (service.storage.common.incoming) that was hashed and sniffed while it was written to disk.
"""
import os
import re
import unicodedata
from datetime import datetime, timezone

from service.errors import (
    ChecksumMismatch, FileTooLarge, InvalidChunk, InvalidRequest, MediaNotFound, SizeMismatch, StreamNotFound,
    UnknownDestination, WrongFormat, WrongProtocol,
)
from service.interface import (
    DESTINATIONS, FORMATS, MAX_TOTAL_CHUNKS, MB, MEDIA_STEM_LIMIT, REQUEST_FILE_LIMIT, SNIFF_BYTES, media_path,
    parse_media_path, sniff_format,
)
from service.storage.contract import Chunk, StreamRecord

# A chunkIndex as clients send it; anything else is left to the form's validation.
CHUNK_INDEX = re.compile(r"[0-9]{1,5}")
CONTENT_TYPES = {fmt.extension: fmt.content_type for fmt in FORMATS.values()}
MEDIA_PREFIX_BYTES = 8


def size_in_mb(size):
    """`size` bytes in MB rounded up to one decimal, without a trailing `.0` (8 MB + 1 byte -> '8.1')."""
    # Integer arithmetic: a client declares sizes up to 2**63 and more, which a float does not hold to the byte.
    tenths = -(-size * 10 // MB)
    whole, tenth = divmod(tenths, 10)
    return f"{whole}.{tenth}" if tenth else str(whole)


def too_large_message(size, limit):
    """The 413 message of CONTRACT 5: 'file of size 8.1MB is larger than 8MB'."""
    if size is None:
        return f"file is larger than {limit // MB}MB"
    return f"file of size {size_in_mb(size)}MB is larger than {limit // MB}MB"


def check_size(size, *limits):
    """Raise the 413 of CONTRACT 5 when `size` breaks any limit; it names the smallest limit broken. `size` None is a
    declared size of more digits than Python reads as a number: it breaks every limit, and is not named."""
    broken = [limit for limit in limits if size is None or size > limit]
    if broken:
        raise FileTooLarge(too_large_message(size, min(broken)))


def destination_for(destination_id):
    """The destination of an id, or 400 naming the field and the accepted ids."""
    try:
        return DESTINATIONS[destination_id]
    except KeyError:
        raise UnknownDestination(f"destinationId: unknown destination {destination_id!r}; "
                         f"use one of {', '.join(DESTINATIONS)}") from None


def destination_limits(destination_id):
    """The size limit of a destination as a tuple, empty for an unknown one (the per-request limit still holds)."""
    destination = DESTINATIONS.get(destination_id)
    return (destination.limit,) if destination else ()


def check_format(destination_id, head):
    """Return the sniffed format of `head` if the destination accepts it, else raise 400 naming the accepted ones."""
    destination = DESTINATIONS[destination_id]
    found = sniff_format(head)
    if found not in destination.formats:
        accepted = " or ".join(FORMATS[name].label for name in destination.formats)
        what = f"{_article(FORMATS[found].label)} {FORMATS[found].label} file" if found else "not a recognised image or video file"
        raise WrongFormat(f"file: {destination_id} accepts {accepted} only; this is {what}")
    return found


def _article(label):
    # Formats are read letter by letter: "an MP4", "a PNG", "a JPEG", "a GIF".
    return "an" if label[0] in "AEFHILMNORSX" else "a"


def clean_stem(file_name):
    """The original name without its extension, reduced to letters, digits, '.', '_' and '-'."""
    base = re.split(r"[/\\]", file_name or "")[-1]
    stem = base.rsplit(".", 1)[0] if "." in base.lstrip(".") else base
    stem = unicodedata.normalize("NFKD", stem).encode("ascii", "ignore").decode("ascii")
    stem = re.sub(r"\s+", "_", stem)
    stem = re.sub(r"[^A-Za-z0-9._-]", "", stem)
    # Runs of dots collapse so no '..' survives; edge dots and dashes go so names stay tidy.
    stem = re.sub(r"\.{2,}", ".", stem).strip("._-")
    return stem[:MEDIA_STEM_LIMIT].rstrip("._-") or "upload"


def media_name(file_name, fmt, prefix):
    """A media name: the unique prefix, '-', the cleaned original name, the extension of the sniffed format."""
    return f"{prefix}-{clean_stem(file_name)}{FORMATS[fmt].extension}"


def new_media_prefix(repo):
    """A fresh prefix of 16 hex digits from the repository's source of names (random, or seeded in test mode)."""
    return repo.new_hex(MEDIA_PREFIX_BYTES)


def check_sha(expected, incoming, what):
    """400 unless the received file's SHA-256 is the one the client sent, if it sent one (a chunk received onto its
    stream computes its own SHA-256 only when asked)."""
    if expected is not None and expected.lower() != (actual := incoming.sha256):
        raise ChecksumMismatch(f"sha: the SHA-256 of the {what} is {actual}, not {expected.lower()}")


# -- single-request upload ------------------------------------------------------------------------

def upload_single(repo, org, destination_id, file_name, incoming, sha=None):
    """Verify a whole uploaded file and publish it; return its media path (an existing one for the same media)."""
    destination = destination_for(destination_id)
    check_size(incoming.size, destination.limit, REQUEST_FILE_LIMIT)
    fmt = check_format(destination_id, incoming.head)
    check_sha(sha, incoming, "file")
    incoming.finish()
    while True:
        path = media_path(DESTINATIONS[destination_id].kind, media_name(file_name, fmt, new_media_prefix(repo)))
        # The org's media of the same bytes and cleaned name, when it has them (CONTRACT 10), else this new path.
        published = repo.media.publish(org, path, incoming.path, incoming.sha256)
        if published:
            return published


# -- chunked streams ------------------------------------------------------------------------------

def create_stream(repo, org, destination_id, file_name, file_size, sha):
    """Open a chunked upload stream; refuse at once a file over the destination limit (`file_size` None: too many
    digits to read, over every limit)."""
    destination = destination_for(destination_id)
    if file_size is not None and file_size < 1:
        raise InvalidRequest("fileSize: must be at least 1 byte")
    check_size(file_size, destination.limit)
    return repo.streams.create(org, StreamRecord(
        destination_id=destination_id, file_name=file_name, file_size=file_size, sha=sha.lower(),
        media_prefix=new_media_prefix(repo)))


def require_stream(repo, org, stream_id):
    """The record of the org's stream; 404 unless it exists and has not expired."""
    record = repo.streams.read(org, stream_id)
    if record is None:
        raise StreamNotFound()
    return record


def require_chunked(record):
    """409 naming tus when a multipart chunk comes to a tus upload."""
    if record.is_tus:
        raise WrongProtocol("this stream is a tus upload: continue it with tus (HEAD for its Upload-Offset, then PATCH "
                            "with Tus-Resumable: 1.0.0 and Content-Type: application/offset+octet-stream)")


def new_chunk_file(repo, org, stream_id, chunk_index=None):
    """Where the bytes of an incoming chunk are written while they arrive. `chunk_index` is the chunkIndex field as
    sent, when it came before the file: the next chunk in order then goes straight onto the stream's file."""
    index = int(chunk_index) if chunk_index is not None and CHUNK_INDEX.fullmatch(chunk_index) else None
    return repo.streams.new_incoming(org, stream_id, SNIFF_BYTES, index)


def new_upload_file(repo, org):
    """Where the bytes of a single-request upload are written while they arrive."""
    return repo.media.new_incoming(org, SNIFF_BYTES)


def receive_chunk(repo, org, stream_id, index, total, incoming, sha=None):
    """Store one chunk; return the StreamWrite: STORED, COMPLETED (this chunk completed the stream, with its media
    path) or ALREADY_COMPLETE (a retry after completion, with the path)."""
    check_size(incoming.size, REQUEST_FILE_LIMIT)
    check_sha(sha, incoming, f"chunk {index}")
    return repo.streams.add_chunk(org, stream_id, Chunk(index, total, incoming), CHUNK_RULES)


class ChunkApiRules:
    """The chunk API's rules (CONTRACT 5), which both stores apply under the stream's lock (contract.ChunkRules)."""

    def admit(self, record, chunk, held):
        """The record with the chunk count, and at chunk 0 the format its first bytes show; 400 for a chunk that does
        not fit the stream. Its protocol is not checked again here: a stream's protocol is fixed when it is created,
        and the view refused a tus upload's chunk (require_chunked) before reading its body."""
        _check_chunk(record, chunk, held)
        if record.total_chunks is None or chunk.index == 0:
            record = record.replace(total_chunks=chunk.total)
        if chunk.index == 0:
            # A chunk 0 shorter than a signature (totalChunks may be up to fileSize) cannot tell the format: the whole
            # file does, on completion (verify). A format an earlier chunk 0 showed goes with it.
            tells = chunk.file.size >= SNIFF_BYTES or chunk.file.size >= record.file_size
            record = record.replace(format=check_format(record.destination_id, chunk.file.head) if tells else None)
        return record

    def verify(self, record, size, sha256, head):
        """The media path of a joined file of the declared size, SHA-256 and (unless chunk 0 told it) format, from
        its first bytes `head` (400 otherwise: the store discards the stream, which cannot be repaired)."""
        if size != record.file_size:
            raise SizeMismatch(f"fileSize: the chunks add up to {size} bytes, not {record.file_size}; "
                               "the stream is discarded")
        if sha256 != record.sha:
            raise ChecksumMismatch(f"sha: the SHA-256 of the file is {sha256}, not {record.sha}; "
                                   "the stream is discarded")
        fmt = record.format
        if fmt is None:
            try:
                fmt = check_format(record.destination_id, head)
            except WrongFormat as error:
                raise WrongFormat(f"{error.message}; the stream is discarded") from None
        return stream_media_path(record, fmt)


CHUNK_RULES = ChunkApiRules()


def _check_chunk(record, chunk, held):
    index, total = chunk.index, chunk.total
    file_size = record.file_size
    if record.total_chunks is not None and total != record.total_chunks:
        raise InvalidChunk(f"totalChunks: this stream has {record.total_chunks} chunks, not {total}")
    fewest = -(-file_size // REQUEST_FILE_LIMIT)
    most = min(file_size, MAX_TOTAL_CHUNKS)
    if not fewest <= total <= most:
        raise InvalidChunk(f"totalChunks: a file of {file_size} bytes is sent in {fewest} to {most} chunks, not {total}")
    if not 0 <= index < total:
        raise InvalidChunk(f"chunkIndex: must be between 0 and {total - 1}, not {index}")
    received = sum(size for i, size in held.items() if i != index) + chunk.file.size
    if received > file_size:
        raise InvalidChunk(f"file: the chunks received add up to {received} bytes, more than fileSize {file_size}")


def stream_media_path(record, fmt):
    """The media path of a stream's file: its media name is fixed by its record, so a retry finds the same path."""
    name = media_name(record.file_name, fmt, record.media_prefix)
    return media_path(DESTINATIONS[record.destination_id].kind, name)


def stream_status(repo, org, stream_id):
    """What the server holds of a stream, so a client knows what to resend."""
    record, sizes, offset, expires_at = repo.streams.status(org, stream_id)
    complete = record.is_complete
    if not complete and sizes and len(sizes) == record.total_chunks:
        # Every chunk is held, yet no request completed the stream (it failed, or the server died, while completing):
        # the last chunk is reported missing so that a resuming client resends it, and that request completes it.
        del sizes[record.total_chunks - 1]
    received = list(range(record.total_chunks)) if complete and record.total_chunks else sorted(sizes)
    status = {
        "streamId": stream_id, "destinationId": record.destination_id, "fileName": record.file_name,
        "fileSize": record.file_size, "totalChunks": record.total_chunks, "receivedChunks": received,
        "receivedBytes": record.file_size if complete else sum(sizes.values()), "state": record.state.value,
        "protocol": record.protocol,
    }
    if record.is_tus:
        status["receivedChunks"], status["receivedBytes"] = [], offset
    if complete:
        status["path"] = record.path
    expires = datetime.fromtimestamp(expires_at, timezone.utc)
    status["expiresAt"] = expires.isoformat(timespec="seconds").replace("+00:00", "Z")
    return status


def delete_stream(repo, org, stream_id):
    """Abort a stream and remove its parts (a published media file stays)."""
    if not repo.streams.delete(org, stream_id):
        raise StreamNotFound()


# -- serving --------------------------------------------------------------------------------------

def media_file(repo, org, path):
    """(OpenMedia, content type) of an org's published media, or 404 as if it did not exist. The caller closes its
    file (the response does, once sent)."""
    parsed = parse_media_path(path)
    content_type = CONTENT_TYPES.get(os.path.splitext(parsed[1])[1]) if parsed else None
    opened = repo.media.open(org, path) if content_type else None
    if opened is None:
        raise MediaNotFound()
    return opened, content_type
