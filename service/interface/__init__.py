"""Facts of the service's interface that several layers (and the client) need: one home for each.

The token and request-id headers, the GraphQL paths (each with the vendor's other spelling), the upload destinations
with their formats and limits, the request limits, and the shape of a media path. Nothing here imports Flask or the rest of the service, so views, the domain, storage, the
client and the command line all import it.
"""
import re
from collections import namedtuple

MB = 1024 * 1024

# The header every request but a few public ones carries (SPEC 5): the name the service prints and documents.
TOKEN_HEADER = "x-service-api-org"
# The vendor's public documentation spells it this way too; accepted everywhere TOKEN_HEADER is (CONTRACT 12).
TOKEN_HEADER_ALIAS = "x-pico-api-org"
# The GraphQL endpoint (CONTRACT 3), and the path the vendor's public documentation gives it (CONTRACT 12).
GRAPHQL_PATH = "/graph/v2"
GRAPHQL_PATH_ALIAS = "/graphql"
GRAPHQL_PATHS = (GRAPHQL_PATH, GRAPHQL_PATH_ALIAS)
# The WSGI environ key under which the service's gunicorn worker (service.server.worker) hands every request what a
# long answer (an event stream) needs from it: its number of threads and a way to learn that it is stopping.
WORKER_ENVIRON = "wis.worker"
# An org's name, as WIS_API_TOKENS gives it.
ORG_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")
# A client's request id, kept (when well-formed) and returned on every response.
REQUEST_ID_HEADER = "X-Request-Id"

# One request (a single upload or one chunk) carries at most this much file data (SPEC 8, a proxy buffer).
REQUEST_FILE_LIMIT = 10 * MB
# Every form field of the upload forms is a short value (an index, an id, a SHA-256).
FORM_FIELD_LIMIT = 64 * 1024
# Largest request body of any route: one file of REQUEST_FILE_LIMIT and its form fields. Which route's body it bounds,
# and how, is service.web.body_limits's.
MAX_REQUEST_BODY = REQUEST_FILE_LIMIT + FORM_FIELD_LIMIT
# How many entries an archive may have, an org's (`wis import`) or a snapshot of every org (POST /_test/restore): each
# is remembered while it is read.
MAX_ARCHIVE_ENTRIES = 100_000
# Test mode's snapshots (CONTRACT 12): the largest archive POST /_test/restore takes, and what its entries may hold in
# all once unpacked (a gzip bomb stops there).
MAX_SNAPSHOT_BYTES = 512 * MB
MAX_SNAPSHOT_UNPACKED = 1024 * MB
# The objects' JSON of a snapshot is held in memory while it is restored.
MAX_SNAPSHOT_DOCUMENTS = 256 * MB
# Chunk bookkeeping scans a stream's parts on every chunk, so a stream has a bounded number of them.
MAX_TOTAL_CHUNKS = 10_000

# The longest text one field of a GraphQL input may hold (descriptions, instruction texts, alert and note texts,
# confirmations, serial patterns), and the longest display name (names, titles, part numbers, units, what is
# measured): a work instruction is read on the floor in seconds, and each field's length bounds what a read repeats.
MAX_TEXT_LENGTH = 20_000
MAX_NAME_LENGTH = 1_000
# The longest comment a create, delete or restore mutation may give its change (CONTRACT 16), in code points.
MAX_COMMENT_LENGTH = 500
# What one mutation's input may hold in all: a character per value plus the characters of its strings, counted with
# every variable expanded where it is used. Any input sent once, in `variables` or in the query text, fits, since its
# JSON is longer than that count; a variable repeated thousands of times in the query text does not.
MAX_INPUT_SIZE = MAX_REQUEST_BODY
# How many objects (each `{...}`: a step, an action, a part, a text...) one mutation's input may hold. Each reads back
# as a few hundred characters of field names, twice for a torque action, so that every process can be read back whole
# within one answer's budget (service.web.graphql.limits.RESPONSE_BUDGET). A large process has a few thousand actions.
MAX_INPUT_OBJECTS = 50_000

Format = namedtuple("Format", "label extension content_type")
FORMATS = {
    "jpeg": Format("JPEG", ".jpg", "image/jpeg"),
    "png": Format("PNG", ".png", "image/png"),
    "gif": Format("GIF", ".gif", "image/gif"),
    "mp4": Format("MP4", ".mp4", "video/mp4"),
}
# Enough leading bytes to tell every accepted format apart.
SNIFF_BYTES = 12
# A tus PATCH body is committed in parts of this many bytes as it arrives (CONTRACT 13), so a node's crash keeps them.
TUS_COMMIT_PART_BYTES = 16 * 1024 * 1024

Destination = namedtuple("Destination", "limit formats kind")
DESTINATIONS = {
    "stepImage": Destination(8 * MB, ("jpeg", "png"), "image"),
    "stepVideo": Destination(500 * MB, ("mp4",), "video"),
    "stepVideoGif": Destination(150 * MB, ("gif",), "video"),
}

# tus 1.0 on /uploads (CONTRACT 7): what OPTIONS announces.
TUS_VERSION = "1.0.0"
TUS_EXTENSIONS = ("creation", "creation-with-upload", "termination", "expiration", "checksum")
TUS_CHECKSUM_ALGORITHMS = ("sha1", "sha256")
TUS_MAX_SIZE = max(destination.limit for destination in DESTINATIONS.values())
TUS_CONTENT_TYPE = "application/offset+octet-stream"
# The two protocols a stream may speak, as GET /uploads/<id> names them.
CHUNKS_PROTOCOL, TUS_PROTOCOL = "chunks", "tus"

# Media paths as clients see them: /api/v1/images/<name> and /api/v1/videos/<name>.
MEDIA_PATH_ROOT = "/api/v1/"
SEGMENT_BY_KIND = {"image": "images", "video": "videos"}
KIND_BY_SEGMENT = {segment: kind for kind, segment in SEGMENT_BY_KIND.items()}
MEDIA_NAME = re.compile(r"[A-Za-z0-9._-]{1,255}")
_MEDIA_PATH = re.compile(re.escape(MEDIA_PATH_ROOT) + r"(images|videos)/(.*)", re.S)
# The names the service gives media (service.domain.uploads.media_name): a unique prefix of 16 hex digits, '-', the
# original name's stem cleaned to letters, digits, '.', '_' and '-' (at most MEDIA_STEM_LIMIT, no '..', none of '._-'
# at its ends), then the extension of the format sniffed, one its kind takes. Only such names were ever served.
MEDIA_STEM_LIMIT = 100
_MADE_MEDIA_NAME = re.compile(r"[0-9a-f]{16}-(?P<stem>[A-Za-z0-9._-]{1,%d})(?P<extension>\.[a-z0-9]+)"
                              % MEDIA_STEM_LIMIT)
MEDIA_EXTENSIONS = {kind: sorted({FORMATS[fmt].extension for destination in DESTINATIONS.values()
                                  if destination.kind == kind for fmt in destination.formats})
                    for kind in SEGMENT_BY_KIND}


# What a string holding half of a UTF-16 surrogate pair is told: JSON's "\\ud800" alone decodes to no character, which
# no file, database or answer of the service could hold.
LONE_SURROGATE = "holds half of a UTF-16 surrogate pair (a lone \\ud800-\\udfff escape), which is no character"


def is_unicode(text):
    """Whether `text` holds only characters (no lone surrogate): what UTF-8 can encode."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def sniff_format(head):
    """The format whose magic number starts `head`, or None: JPEG, PNG, GIF, or MP4 (`ftyp` at bytes 4..8)."""
    if head.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "gif"
    if head[4:8] == b"ftyp":
        return "mp4"
    return None


def media_path(kind, name):
    """The path of a media file of `kind` ('image' or 'video') named `name`."""
    return f"{MEDIA_PATH_ROOT}{SEGMENT_BY_KIND[kind]}/{name}"


def parse_media_path(path):
    """(kind, name) of a well-formed media path, where kind is 'image' or 'video', else None."""
    match = _MEDIA_PATH.fullmatch(path) if isinstance(path, str) else None
    if not match or not MEDIA_NAME.fullmatch(match.group(2)) or match.group(2) in {".", ".."}:
        return None
    return KIND_BY_SEGMENT[match.group(1)], match.group(2)


def made_media_name_problem(kind, name):
    """Why `name` is not a name the service gives media of `kind` ('image' or 'video'), or None."""
    match = _MADE_MEDIA_NAME.fullmatch(name)
    stem = match["stem"] if match else ""
    if not match or ".." in stem or stem[0] in "._-" or stem[-1] in "._-":
        return (f"not a name the service gives media (16 hex digits, '-', at most {MEDIA_STEM_LIMIT} letters, digits, "
                "'.', '_' or '-' with no '..' and none at either end, then the extension of its format)")
    if match["extension"] not in MEDIA_EXTENSIONS[kind]:
        return f"{kind}s are named with {' or '.join(MEDIA_EXTENSIONS[kind])}, not {match['extension']}"
    return None
