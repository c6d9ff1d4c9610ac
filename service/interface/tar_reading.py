"""Reading an untrusted tar stream with bounded memory and stack, for both archive readers (service.interface.archive for `wis
import`, service.domain.snapshots for POST /_test/restore): its headers, and its entries' bytes and JSON.

tarfile reads the extended headers that come before a member whole, before the member is yielded: a GNU long name or a
pax header of any size (a name of 200 MB took 840 MB of a worker for a 200 KB body, and came back in the error), a
chain of them read recursively (3,000 pax headers: a RecursionError, a 500), and GNU sparse maps of any length.
BoundedTarInfo refuses these before tarfile reads them: an extended header larger than MAX_EXTENDED_HEADER, more than
MAX_EXTENDED_CHAIN of them before one member, global pax headers and sparse files. The writers of archives (Python's
tarfile, GNU tar, bsdtar) make none of these for the names an archive holds. A JSON entry is read whole up to a limit
and refused past MAX_JSON_DEPTH levels (json.loads raised RecursionError, a 500, at about 1,000).
"""
import hashlib
import json
import tarfile

# The longest name of an archive is a few hundred bytes; a pax header also carries times, owners and attributes.
MAX_EXTENDED_HEADER = 64 * 1024
# A pax header, or GNU tar's long name and long link.
MAX_EXTENDED_CHAIN = 2
# Nothing an API takes nests this deep; orjson, which stores it, stops at 255 levels, and json.loads at the stack's end.
MAX_JSON_DEPTH = 100
# What an entry's bytes are read in.
BLOCK = 1024 * 1024
_EXTENDED = (tarfile.XHDTYPE, tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK)
_REFUSED = {tarfile.XGLTYPE: "a global pax header", tarfile.SOLARIS_XHDTYPE: "a Solaris extended header",
            tarfile.GNUTYPE_SPARSE: "a sparse file"}


class RefusedHeader(ValueError):
    """A tar header the readers do not read; the message says what it is."""


class BoundedTarInfo(tarfile.TarInfo):
    """The TarInfo class of an archive reader's TarFile (`tarfile.open(..., tarinfo=BoundedTarInfo)`)."""

    def _proc_member(self, tarfile):
        # The hook tarfile documents for subclasses: called with each header, before anything it announces is read.
        if self.type in _REFUSED:
            raise RefusedHeader(f"{_REFUSED[self.type]} ({self.name[:100]!r}); an archive holds plain files only")
        chain = getattr(tarfile, "_extended_chain", 0) + 1 if self.type in _EXTENDED else 0
        if chain and (self.size > MAX_EXTENDED_HEADER or chain > MAX_EXTENDED_CHAIN):
            raise RefusedHeader(f"an extended header (a long name, or pax records) of {self.size} bytes, {chain} in a "
                                f"row before one entry; at most {MAX_EXTENDED_CHAIN} of {MAX_EXTENDED_HEADER} bytes "
                                "each are read")
        tarfile._extended_chain = chain
        return super()._proc_member(tarfile)

    # A pax header may announce a sparse file too; the 1.0 format's map is then read from the data, however long.
    def _proc_gnusparse_00(self, *arguments):
        raise RefusedHeader("a sparse file (GNU.sparse pax records); an archive holds plain files only")

    _proc_gnusparse_01 = _proc_gnusparse_10 = _proc_gnusparse_00


class EntryFile:
    """An entry's file object whose read errors are the archive's: `reading()` (a context manager) turns them into the
    reader's own error, and leaves the errors of whatever the bytes are copied to as they are."""

    def __init__(self, file, reading):
        self._file, self._reading = file, reading

    def read(self, size=-1):
        with self._reading():
            return self._file.read(size)


def bounded_json(read, entry, limit):
    """(the JSON value of an entry, None), or (None, why it cannot be read): larger than `limit` bytes, not JSON, or
    nested deeper than MAX_JSON_DEPTH."""
    if entry.size > limit:
        return None, f"{entry.size} bytes, more than the {limit} an entry of JSON may have"
    try:
        # Its size, not the limit: a buffered read allocates what it is asked for (64 MB for each manifest) first.
        value = json.loads(read().read(entry.size))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        return None, f"not JSON ({error})"
    except RecursionError:
        return None, f"nested deeper than {MAX_JSON_DEPTH} levels"
    if _deeper_than(value, MAX_JSON_DEPTH):
        return None, f"nested deeper than {MAX_JSON_DEPTH} levels"
    return value, None


def _deeper_than(value, depth):
    """Whether a parsed JSON value nests lists and objects more than `depth` levels deep (without recursing)."""
    level = [value]
    for _ in range(depth):
        level = [inner for outer in level if isinstance(outer, (dict, list))
                 for inner in (outer.values() if isinstance(outer, dict) else outer)]
    return any(isinstance(inner, (dict, list)) for inner in level)


def size_and_sha256(file, copy=None):
    """(size, hex SHA-256) of an entry's bytes, copied to `copy` as they are read when given."""
    digest, size = hashlib.sha256(), 0
    while block := file.read(BLOCK):
        digest.update(block)
        size += len(block)
        if copy is not None:
            copy.write(block)
    return size, digest.hexdigest()
