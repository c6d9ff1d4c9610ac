"""Reading an untrusted tar stream with bounded memory and stack, for both archive readers (service.interface.archive for `wis
import`, service.domain.snapshots for POST /_test/restore): its headers, and its entries' bytes and JSON.

tarfile reads the extended headers that come before a member whole, before the member is yielded: a GNU long name or a
pax header of any size (a name of 200 MB took 840 MB of a worker for a 200 KB body, and came back in the error), a
chain of them read recursively (3,000 pax headers: a RecursionError, a 500), and GNU sparse maps of any length.
BoundedTarInfo refuses these before tarfile reads them: an extended header larger than MAX_EXTENDED_HEADER, more than
MAX_EXTENDED_CHAIN of them before one member, global pax headers and sparse files. The writers of archives (Python's
tarfile, GNU tar, bsdtar) make none of these for the names an archive holds. A JSON entry is read whole up to a limit
and refused past MAX_JSON_DEPTH levels (json.loads raised RecursionError, a 500, at about 1,000).

tarfile stops at the first block that is not a header (the end of an archive is a zero block) and reads no further;
the readers then read the stream to its end, for gzip to check its trailer. Unpacked and uncounted, that tail was a
gzip bomb's place: 4 GiB of zeros after a snapshot's last entry came in a 4 MB body and took 8.7 s of a worker.
TarSource.check_end reads it bounded: only zeros, at most MAX_END_PADDING of them, may follow the last entry.
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
# What may follow an archive's last entry: zeros, the two blocks that end a tar and the padding of its last record
# (records of 10 KB by default from tarfile, GNU tar and bsdtar; `tar -b 2048`, for tapes, makes 1 MB: the most read).
MAX_END_PADDING = 1024 * 1024
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


class TrailingData(ValueError):
    """Something other than zero padding after an archive's last entry; the message says where."""


class TarSource:
    """The unpacked stream as a reader's tarfile reads it (`tarfile.open(fileobj=TarSource(unzipped), mode="r|")`),
    keeping what tarfile read last: tarfile reads ahead of the block where it finds the archive's end, and check_end
    must see every byte after the last entry."""

    def __init__(self, file):
        self._file = file
        self._position = 0  # bytes read from `file`
        self._before = self._last = b""

    def read(self, size=-1):
        data = self._file.read(size)
        self._position += len(data)
        # tarfile (stream mode) holds back fewer bytes than one read of its buffer, from its last read or, for a block
        # that straddles two reads, the one before; an empty read (the end) is not a read to keep.
        if data:
            self._before, self._last = self._last, data
        return data

    def check_end(self, tar):
        """Read the rest of the stream once `tar` (a TarFile over this source, iterated to its end) has found its end:
        how many bytes follow its last entry, each a zero and at most MAX_END_PADDING; TrailingData otherwise. Read to
        its end, a gzip stream checks its trailer (CRC, length): a body cut in its last bytes is refused."""
        unread = self._position - tar.offset  # the block tarfile ended at, and what it read beyond it
        tail = (self._before + self._last)[-unread:] if unread > 0 else b""
        count = 0
        while True:
            if tail.count(0) != len(tail):
                where = tar.offset + count + len(tail) - len(tail.lstrip(b"\0"))
                raise TrailingData(f"data after the archive's last entry (byte {where:,} of the unpacked tar is not "
                                   "zero): an archive ends with zero blocks, and nothing follows them")
            count += len(tail)
            if count > MAX_END_PADDING:
                raise TrailingData(f"more than {MAX_END_PADDING:,} bytes after the archive's last entry (from byte "
                                   f"{tar.offset:,} of the unpacked tar): an archive ends with zero blocks, at most "
                                   "that many, and nothing follows them")
            tail = self._file.read(min(BLOCK, MAX_END_PADDING + 1 - count))
            if not tail:
                return count


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
