"""Chunked upload streams on disk: `<data>/orgs/<org>/streams/<streamId>/`.

A stream directory holds
- `meta.json`   the stream's record (contract.StreamRecord): what the client declared, and what the server decided
                (totalChunks, format, path);
- `part-<i>`    each acknowledged chunk not yet merged, fsynced and renamed into place;
- `prefix`      chunks 0..next-1 joined in order, appended as soon as they are contiguous (their parts are
                then removed, so a stream holds each byte once);
- `ledger`      how many chunks the prefix holds, and one fixed-size record per chunk boundary: prefix length and
                SHA-256 state there (`ledger.Ledger`: two CRC-checked commit slots, then the records).

The chunk that continues the prefix in order is received straight onto its end (`PrefixAppend`), so it is
written and hashed once; any other chunk is received into a part and appended when the gap before it fills.
Appending writes the prefix and fdatasyncs it, then commits the ledger (its records and a slot, one fdatasync):
two fdatasyncs per acknowledged chunk, no rename, no directory fsync. A crash in between leaves the ledger at the
old boundary, and the next append truncates the prefix back to the recorded length. Replacing an already-merged
chunk first puts the merged chunks from it on back into parts (cut from the prefix at the recorded boundaries), then
rewinds the ledger to it.

Bookkeeping happens under the stream's cross-process lock `streams/<streamId>.lock`. Writing to the prefix
needs a second one, `streams/<streamId>.append.lock`, which a chunk being received onto the prefix holds
for as long as its bytes arrive (a slow client must not hold up the other chunks' bookkeeping). It is taken only
under the stream's lock and released before it (`append.PrefixAppend.start`), so that a request finding it taken
can leave the merge of its part to the holder. The lock files sit beside the directory so a stream can be removed
while its locks are held.

A tus upload (`meta.json` has `"protocol": "tus"`) uses the same directory, prefix and append lock, but no parts
and no ledger: its bytes only ever grow at the end of the prefix, so its commit point is the `tus` file
(`tus.TusRecord`: two CRC-checked slots holding offset and SHA-256 state, written alternately). A PATCH holds the
append lock while its body arrives (`tus.TusAppend`), fdatasyncs the prefix, then the next slot.

Streams written before the ledger (a `merged` pointer file and a `boundaries` file) get a ledger the first time their
lock is taken (`ledger.upgrade`).

The modules, each importing only those below it: `store` (FileStreamStore: create, find, open, delete, sweep),
`stream` (LockedStream: acknowledge, merge, rewind, publish), `append` (PrefixAppend), `tus` (TusRecord,
TusAppend), `ledger` (Ledger, the `ledger` file) and `layout` (file names, JSON helpers, the append lock, removal).
"""
from service.storage.files.streams.store import FileStreamStore

__all__ = ["FileStreamStore"]
