"""Chunked upload streams on disk: `<data>/orgs/<org>/streams/<streamId>/`.

A stream directory holds
- `meta.json`   what the client declared, and what the server decided (totalChunks, format, path);
- `part-<i>`    each acknowledged chunk not yet merged, fsynced and renamed into place;
- `prefix`      chunks 0..next-1 joined in order, appended as soon as they are contiguous (their parts are
                then removed, so a stream holds each byte once);
- `boundaries`  one fixed-size record per chunk boundary: prefix length and SHA-256 state there;
- `merged`      `{"next": n}`: how many chunks the prefix holds (records 0..n are valid).

The chunk that continues the prefix in order is received straight onto its end (`PrefixAppend`), so it is
written and hashed once; any other chunk is received into a part and appended when the gap before it fills.
Appending writes the prefix and the next boundary record, fsyncs both, then replaces `merged` atomically:
a crash in between leaves `merged` at the old boundary, and the next append truncates the prefix back to
the recorded length. Replacing an already-merged chunk first puts the merged chunks from it on back into
parts (cut from the prefix at the recorded boundaries), then rewinds `merged` to it.

Bookkeeping happens under the stream's cross-process lock `streams/<streamId>.lock`. Writing to the prefix
needs a second one, `streams/<streamId>.append.lock`, which a chunk being received onto the prefix holds
for as long as its bytes arrive (a slow client must not hold up the other chunks' bookkeeping). The lock
files sit beside the directory so a stream can be removed while its locks are held.

A tus upload (`meta.json` has `"protocol": "tus"`) uses the same directory, prefix and append lock, but no parts
and no boundary records: its bytes only ever grow at the end of the prefix, so one commit point is enough, the
`tus` file (`tus.TusRecord`: two CRC-checked slots holding offset and SHA-256 state, written alternately). A PATCH
holds the append lock while its body arrives (`tus.TusAppend`), fdatasyncs the prefix, then the next slot.

The modules, each importing only those below it: `store` (FileStreamStore: create, find, open, delete, sweep),
`stream` (LockedStream: acknowledge, merge, rewind, publish), `append` (PrefixAppend), `tus` (TusRecord,
TusAppend), `boundaries` (BoundaryRecords, the `boundaries` file) and `layout` (file names, JSON helpers, the
append lock, removal).
"""
from service.storage.files.streams.store import FileStreamStore

__all__ = ["FileStreamStore"]
