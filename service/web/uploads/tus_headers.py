"""The headers of tus 1.0 (CONTRACT 7): which requests are tus requests, their headers parsed and checked, the
headers of the answers."""
import base64
import binascii
import re
from email.utils import formatdate

from service.errors import InvalidRequest, TusVersionUnsupported, UnsupportedChecksum
from service.interface import (
    TUS_CHECKSUM_ALGORITHMS, TUS_CONTENT_TYPE, TUS_EXTENSIONS, TUS_MAX_SIZE, TUS_VERSION,
)

DIGITS = re.compile(r"[0-9]{1,19}")
# An Upload-Length of more digits than DIGITS: a size past 2**63, so past every destination's limit.
LONG_DIGITS = re.compile(r"[0-9]{20,}")
METADATA_KEY = re.compile(r"[^\s,]+")
# Headers whose presence makes a request a tus request (a chunk API request sends none of them).
TUS_HEADERS = ("Tus-Resumable", "Upload-Length", "Upload-Offset", "Upload-Metadata", "Upload-Defer-Length",
               "Upload-Concat", "Upload-Checksum")

OPTIONS_HEADERS = {
    "Tus-Resumable": TUS_VERSION,
    "Tus-Version": TUS_VERSION,
    "Tus-Extension": ",".join(TUS_EXTENSIONS),
    "Tus-Max-Size": str(TUS_MAX_SIZE),
    "Tus-Checksum-Algorithm": ",".join(TUS_CHECKSUM_ALGORITHMS),
}


def is_tus_request(headers, mimetype):
    """A request that speaks tus: any tus header, or a body of type application/offset+octet-stream."""
    return mimetype == TUS_CONTENT_TYPE or any(name in headers for name in TUS_HEADERS)


def require_version(headers):
    """412 unless `Tus-Resumable: 1.0.0`."""
    if headers.get("Tus-Resumable") != TUS_VERSION:
        sent = headers.get("Tus-Resumable")
        raise TusVersionUnsupported("Tus-Resumable: this server speaks tus 1.0.0 only; send Tus-Resumable: 1.0.0"
                                    + (f" (not {sent!r})" if sent is not None else ""))


def integer_header(headers, name):
    """A non-negative integer header, or 400 naming it."""
    value = headers.get(name)
    if value is None:
        raise InvalidRequest(f"{name}: is required")
    if not DIGITS.fullmatch(value.strip()):
        raise InvalidRequest(f"{name}: must be a non-negative integer, not {value!r}")
    return int(value)


def creation_length(headers):
    """Upload-Length of a creation request (None: too many digits to read); deferred length and concatenation are
    refused. A length of any number of digits is a size, which the creation holds to its destination's limit (413)."""
    if "Upload-Defer-Length" in headers:
        raise InvalidRequest("Upload-Defer-Length: not supported; send Upload-Length (the creation-defer-length "
                             "extension is not offered)")
    if "Upload-Concat" in headers:
        raise InvalidRequest("Upload-Concat: not supported (the concatenation extension is not offered)")
    if LONG_DIGITS.fullmatch(headers.get("Upload-Length", "").strip()):
        return _read_integer(headers["Upload-Length"])
    return integer_header(headers, "Upload-Length")


def _read_integer(digits):
    """The number of a digit string, or None when it has more digits than Python reads as a number
    (sys.get_int_max_str_digits(), 4300 by default): a size that breaks every limit (domain.uploads.check_size)."""
    try:
        return int(digits)
    except ValueError:
        return None


def parse_metadata(raw):
    """Decode Upload-Metadata (`key base64value` pairs, comma-separated; a key may come alone) into {key: text}."""
    metadata = {}
    for pair in (raw or "").split(","):
        pair = pair.strip()
        if not pair:
            continue
        key, _, value = pair.partition(" ")
        value = value.strip()
        if not METADATA_KEY.fullmatch(key) or " " in value:
            raise InvalidRequest(f"Upload-Metadata: {pair!r} is not 'key base64value'")
        if key in metadata:
            raise InvalidRequest(f"Upload-Metadata: key {key!r} is sent twice")
        try:
            metadata[key] = base64.b64decode(value, validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            raise InvalidRequest(f"Upload-Metadata: the value of {key!r} is not valid base64 of UTF-8 text") from None
    return metadata


def parse_checksum(raw):
    """(algorithm, digest bytes) of an Upload-Checksum header, or None when absent."""
    if raw is None:
        return None
    algorithm, _, encoded = raw.strip().partition(" ")
    if algorithm not in TUS_CHECKSUM_ALGORITHMS:
        raise UnsupportedChecksum(f"Upload-Checksum: algorithm {algorithm!r} is not supported; use one of "
                                  f"{', '.join(TUS_CHECKSUM_ALGORITHMS)}")
    try:
        return algorithm, base64.b64decode(encoded.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRequest("Upload-Checksum: the checksum is not valid base64") from None


def require_body_type(mimetype):
    if mimetype != TUS_CONTENT_TYPE:
        raise InvalidRequest(f"Content-Type: a tus PATCH body is {TUS_CONTENT_TYPE}")


def http_date(timestamp):
    """An HTTP date (RFC 9110), as Upload-Expires carries it."""
    return formatdate(timestamp, usegmt=True)


def upload_headers(offset=None, expires=None, media_path=None):
    """The headers of a tus answer about one upload."""
    headers = {"Tus-Resumable": TUS_VERSION}
    if offset is not None:
        headers["Upload-Offset"] = str(offset)
    if expires is not None:
        headers["Upload-Expires"] = http_date(expires)
    if media_path is not None:
        headers["Media-Path"] = media_path
    return headers
