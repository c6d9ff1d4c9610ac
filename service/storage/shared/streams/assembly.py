"""A stream's file built as an S3 multipart upload at the key of the media it becomes, from the stream's in-order
prefix. S3 parts must be 5 MiB or more (but the last) and cannot be read back, while chunks may be 1 byte to 10 MB:
bytes that make a part on their own become one at once; smaller ones wait as staged objects in the row's `tail` until
the tail and the bytes after it make a part (or the file ends)."""
import io
import tempfile

from service.storage.common.incoming import BUFFER_SIZE
from service.storage.shared.objects import MIN_PART_SIZE, NoSuchObject


class Assembly:
    """The multipart upload of one stream, recorded in its row (`upload_id`, `parts`, `tail`, `length`), while the
    row is locked. Keys of objects it makes redundant go to `redundant` (removed once the transaction commits), and
    of objects it puts in the bucket for the row to `created` (removed if the transaction fails)."""

    def __init__(self, store, org, stream_id, row, file_size, redundant, created):
        self._objects, self._spool = store.objects, store.spool
        self._key = store.file_key(org, stream_id)
        self._new_staged_key = lambda what: store.staged_key(org, stream_id, what)
        self._row, self._file_size = row, file_size
        self._redundant, self._created = redundant, created
        self._assembled = False

    def add(self, file, size, index, staged_key=None):
        """Add `size` bytes of `file` (chunk `index`, or a tus body when index is None; already staged at `staged_key`,
        or not) at the end of the file: as a part of their own, joined with the tail into a part, or onto the tail.
        Return True when the tail now refers to `staged_key`."""
        row = self._row
        if not row.tail and (size >= MIN_PART_SIZE or self._is_last(size)):
            if staged_key is not None:
                self._add_part_copy(staged_key, size)
            else:
                self._add_part(file, size)
            return False
        if self.joins_tail_into_part(size):
            self._add_part_from_tail(file, size)
            if staged_key is not None:
                self._redundant.append(staged_key)
            return False
        claimed = staged_key is not None
        if staged_key is None:
            staged_key = self._new_staged_key("tail")
            self._created.append(staged_key)
            self._objects.put_file(staged_key, file, size)
        row.tail.append([staged_key, size, index])
        return claimed

    def _is_last(self, size):
        return self._row.length + size == self._file_size

    def joins_tail_into_part(self, size):
        """True when `size` more bytes and the tail before them make a part (5 MiB, or the end of the file)."""
        tail = self._row.tail
        return bool(tail) and (sum(length for _, length, _ in tail) + size >= MIN_PART_SIZE or self._is_last(size))

    def _upload_id(self):
        if self._row.upload_id is None:
            self._row.upload_id = self._objects.start_multipart(self._key)
        return self._row.upload_id

    def _add_part(self, file, size):
        number = len(self._row.parts) + 1
        try:
            etag = self._objects.upload_part(self._key, self._upload_id(), number, file, size)
        except NoSuchObject:
            if not self._already_assembled():
                raise
            return
        self._row.parts.append([number, etag, size])

    def _add_part_copy(self, staged_key, size):
        number = len(self._row.parts) + 1
        etag = self._objects.copy_part(self._key, self._upload_id(), number, staged_key)
        self._row.parts.append([number, etag, size])
        self._redundant.append(staged_key)

    def _add_part_from_tail(self, file, size):
        """Join the tail's staged objects and `size` bytes of `file` into one part, through a spool file."""
        with tempfile.TemporaryFile(dir=self._spool) as joined:
            total = 0
            for key, length, _ in self._row.tail:
                blocks = self._objects.read(key)
                try:
                    for block in blocks:
                        joined.write(block)
                finally:
                    blocks.close()
                total += length
            while block := file.read(BUFFER_SIZE):
                joined.write(block)
            total += size
            joined.seek(0)
            self._redundant.extend(key for key, _, _ in self._row.tail)
            self._row.tail = []
            self._add_part(joined, total)

    def _already_assembled(self):
        """True when an earlier attempt joined the multipart upload (its transaction then failed): the object is
        there, whole, at the media key."""
        try:
            size, _ = self._objects.head(self._key)
        except NoSuchObject:
            return False
        self._assembled = size == self._file_size
        return self._assembled

    def complete(self):
        """Join the parts, and the tail as the last one, into the object at the key (unless an earlier attempt did)."""
        if self._assembled:
            return
        if self._row.tail:
            self._add_part_from_tail(io.BytesIO(), 0)
        try:
            self._objects.complete_multipart(self._key, self._upload_id(),
                                             [(number, etag) for number, etag, _ in self._row.parts])
        except NoSuchObject:
            if not self._already_assembled():
                raise
