"""Upload streams on the shared backend: state in the `streams` and `stream_chunks` tables, bytes in the bucket.

A stream's file is built as an S3 multipart upload at the key of the media it becomes, from its in-order prefix, as
on the file backend: S3 parts must be 5 MiB or more (but the last) and cannot be read back, while chunks may be 1 byte
to 10 MB and arrive in any order. So
- the chunk (or tus PATCH body) that continues the prefix is received to this node's spool, hashed into the stream's
  running SHA-256 as it arrives (its state, 104 bytes, is in the row), and becomes a part at once when it is big
  enough; smaller ones wait as staged objects in the row's `tail` until the tail makes a part;
- any other chunk is staged as an object of its own before the stream's lock is taken, and is read back (to hash it)
  and copied into a part inside the store when the gap before it fills;
- the whole file's SHA-256 comes from the running state at completion: nothing is read again when chunks came in
  order.

Every change happens under the row's lock (`SELECT ... FOR UPDATE`), in one transaction per request: exactly one
request completes a stream, whichever node it reaches, and the media index row that makes its path visible is
written in the transaction that marks it complete, after the multipart upload is joined. A transaction that fails
leaves the row as it was: a part uploaded meanwhile is overwritten by the next attempt (same part number) or left
out of the completion, and a staged object nobody recorded is removed at once, or by the expiry sweep.

The modules, each importing only those below it: `store` (SharedStreamStore: create, find, lock, delete, sweep),
`imports` (a stream copied from the file backend), `stream` (SharedLockedStream: chunk bookkeeping, the prefix, tus
commits, completion), `assembly` (the multipart upload: parts and tail), `spool` (request bodies on this node's disk)
and `rows` (the SQL).
"""
from service.storage.shared.streams.store import SharedStreamStore

__all__ = ["SharedStreamStore"]
