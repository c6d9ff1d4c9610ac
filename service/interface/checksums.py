"""SHA-256 of files, read in fixed-size blocks: shared by the server's stream store and the client."""
import hashlib
import os

BLOCK_SIZE = 1024 * 1024


def file_sha256(path, offset=0, length=None):
    """Hex SHA-256 of a file, or of `length` bytes of it from `offset`, never holding more than one block."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        handle.seek(offset)
        remaining = os.fstat(handle.fileno()).st_size - offset if length is None else length
        while remaining > 0 and (block := handle.read(min(BLOCK_SIZE, remaining))):
            digest.update(block)
            remaining -= len(block)
    return digest.hexdigest()
