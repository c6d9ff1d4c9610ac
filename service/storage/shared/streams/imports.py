"""Moving in (`wis migrate`): an open stream of the file backend copied into the shared backend under its own id,
piece by piece through the same steps as the requests that would have sent it."""
from service.interface import SNIFF_BYTES
from service.storage.common.incoming import BUFFER_SIZE


def import_stream(store, org, stream_id, record, pieces, received):
    """Copy an open stream of the file backend into `store` (a SharedStreamStore), keeping its id: `pieces` yields
    (chunk index, or None for a tus upload's bytes, open binary file, size) in the order they are to be received;
    `received` is what the source holds ({chunk index: size}, or the tus offset). A stream already copied with the
    same received data is "unchanged"; one copied only in part (an interrupted run) is copied again."""
    current = store.peek(org, stream_id)
    if current is not None:
        if current.record.is_tus:
            held = current.length
        else:
            held = store.status(org, stream_id).chunks
        if held == received:
            return "unchanged"
        store.delete(org, stream_id)
    store.insert(org, stream_id, record)
    for index, file, size in pieces:
        if record.is_tus:
            appending = store.tus_append(org, stream_id)
            try:
                _copy(file, size, appending)
                with store.open(org, stream_id) as stream:
                    stream.append_body(appending)
            finally:
                appending.close()
            continue
        incoming = store.new_incoming(org, stream_id, SNIFF_BYTES, index)
        try:
            _copy(file, size, incoming)
            store.stage(org, stream_id, index, incoming)
            with store.open(org, stream_id) as stream:
                stream.put_part(index, incoming)
                stream.merge_available()
        finally:
            incoming.discard()
    return "copied"


def _copy(source, size, target):
    while size > 0 and (block := source.read(min(BUFFER_SIZE, size))):
        target.write(block)
        size -= len(block)
