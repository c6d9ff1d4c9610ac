"""The Client: GraphQL upserts and reads, uploads, downloads and push, over one Transport."""
import re

from service.client import download as download_module
from service.client import events as events_module
from service.client import push as push_module
from service.client.errors import ClientError
from service.client.transport import Repeat, Transport, error_message
from service.client.uploader import DEFAULT_CHUNK_SIZE, DEFAULT_PARALLEL, Uploader
from service.client.webhooks import WebhookCalls

# A GraphQL document whose (first) operation is a mutation; comments and whitespace may come first.
MUTATION = re.compile(r"\A(?:\s|,|#[^\n]*)*mutation\b")

PROCESS_FIELDS = """
  id name description partNumber startBehavior endBehavior autoSignoutMinutes
  image { path }
  createdAt updatedAt revision input
  steps {
    id name
    instructionText { ...TextFields }
    primaryImage { path }
    video { path title autoplay loop }
    actions {
      id kind torque
      description { ...TextFields }
      inputParts { part { ...PartFields } quantity }
      outputPart { ...PartFields }
      scanPart { ...PartFields }
      toolUsed { id name description }
      measurement { measured units min max }
      confirmation { confirmed }
    }
    alerts { severity title text }
    notes { title text }
    torqueGroups { tool { id name description } actions { id } }
  }
  billOfMaterials { part { ...PartFields } quantity }
"""
PROCESS_FRAGMENTS = """
fragment PartFields on Part { id description serial { id name pattern } }
fragment TextFields on StyledText { text bold italic underline color }
"""
PRODUCT_FIELDS = ("id name finalProcessId dependencies { processId upstreamProcessId quantity } "
                  "createdAt updatedAt revision input")
STATION_FIELDS = "id name createdAt updatedAt revision input"
READS = {
    # kind: (one, page, fields, fragments)
    "process": ("process", "processes", PROCESS_FIELDS, PROCESS_FRAGMENTS),
    "product": ("product", "products", PRODUCT_FIELDS, ""),
    "station": ("station", "stations", STATION_FIELDS, ""),
}


class Client(WebhookCalls):
    """A session with one service: `Client("http://127.0.0.1:8000", token)`.

    `timeout` is per request (connect, then each wait for the answer); failed requests are retried up to
    `retries` times with waits of `backoff` * 1, 2, 4... seconds, as service.client.transport says
    (mutations only when they never reached the service). `session_factory` makes each
    requests.Session (one for the calling thread, one per upload thread). Use a Client from one
    thread; give other threads their own Client.
    """

    def __init__(self, base_url, token, timeout=60.0, retries=4, backoff=0.5, session_factory=None, state_dir=None):
        self.transport = Transport(base_url, token, timeout=timeout, retries=retries, backoff=backoff,
                                   session_factory=session_factory)
        self.uploader = Uploader(self.transport, state_dir=state_dir)

    @property
    def base_url(self):
        return self.transport.base_url

    @property
    def session(self):
        """The requests.Session of the calling thread (upload threads have their own)."""
        return self.transport.session

    def copy(self):
        """A new Client of the same service with the same settings, for another thread."""
        transport = self.transport
        return Client(transport.base_url, transport.token, timeout=transport.timeout, retries=transport.retries,
                      backoff=transport.backoff, session_factory=transport.session_factory,
                      state_dir=self.uploader.state_dir)

    def close(self):
        """Close the connections of the calling thread's session (upload threads close theirs when done)."""
        self.transport.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    # -- GraphQL --------------------------------------------------------------------------------

    def graphql(self, query, variables=None):
        """Run a GraphQL document; return `data`, or raise ClientError with every error message.

        A mutation is sent again only if it never reached the service (see service.client.transport).
        """
        repeat = Repeat.UNSAFE if MUTATION.match(query) else Repeat.SAFE
        response = self.transport.request("POST", "/graph/v2", repeat, json={"query": query,
                                                                            "variables": variables or {}})
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise ClientError(response.status_code, error_message(response))
        errors = body.get("errors")
        if errors:
            raise ClientError.of_graphql(response.status_code, errors)
        if response.status_code >= 400 or "data" not in body:
            raise ClientError(response.status_code, error_message(response))
        return body["data"]

    def _mutate(self, mutation, arguments, comment):
        """Run `mutation` with `arguments` ({name: (GraphQL type, value)}) and, when given, `comment` (left out
        otherwise, so a server that takes none answers as before); its answer."""
        if comment is not None:
            arguments = {**arguments, "comment": ("String", comment)}
        declared = ", ".join(f"${name}: {type_}" for name, (type_, _) in arguments.items())
        passed = ", ".join(f"{name}: ${name}" for name in arguments)
        return self.graphql(f"mutation({declared}) {{ {mutation}({passed}) }}",
                            {name: value for name, (_, value) in arguments.items()})[mutation]

    def _upsert(self, kind, obj, if_revision, dry_run, comment):
        input_type = f"{kind[0].upper()}{kind[1:]}CreateInput!"
        return self._mutate(f"{kind}Create", {"input": (input_type, {kind: obj}), "ifRevision": ("Int", if_revision),
                                              "dryRun": ("Boolean", dry_run)}, comment)

    def create_process(self, process, if_revision=None, dry_run=False, comment=None):
        """Create or update a process; return "CREATED" or "UPDATED" (UPDATED also when the input equals the stored
        one: then nothing is stored). `if_revision`: only if the stored revision is this one (0: only if it does not
        exist), else ClientError with code CONFLICT and `extensions["revision"]` the stored one. `dry_run`: check and
        answer as the write would, store nothing. `comment`: why, at most 500 characters, kept in the history with
        the name of the token as its author."""
        return self._upsert("process", process, if_revision, dry_run, comment)

    def create_product(self, product, if_revision=None, dry_run=False, comment=None):
        """Create or update a product; return "CREATED" or "UPDATED"; the options as create_process."""
        return self._upsert("product", product, if_revision, dry_run, comment)

    def create_station(self, station, if_revision=None, dry_run=False, comment=None):
        """Create or update a station; return "CREATED" or "UPDATED"; the options as create_process."""
        return self._upsert("station", station, if_revision, dry_run, comment)

    def _delete(self, kind, object_id, if_revision, dry_run, comment):
        return self._mutate(f"{kind}Delete", {"id": ("String!", object_id), "ifRevision": ("Int", if_revision),
                                              "dryRun": ("Boolean", dry_run)}, comment)

    def delete_process(self, process_id, if_revision=None, dry_run=False, comment=None):
        """Delete a process (its history stays); return "DELETED". ClientError with code NOT_FOUND when there is
        none, CONFLICT with `extensions["products"]` while products name it; the options as create_process."""
        return self._delete("process", process_id, if_revision, dry_run, comment)

    def delete_product(self, product_id, if_revision=None, dry_run=False, comment=None):
        """Delete a product; as delete_process."""
        return self._delete("product", product_id, if_revision, dry_run, comment)

    def delete_station(self, station_id, if_revision=None, dry_run=False, comment=None):
        """Delete a station; as delete_process."""
        return self._delete("station", station_id, if_revision, dry_run, comment)

    def _restore(self, kind, object_id, revision, if_revision, dry_run, comment):
        return self._mutate(f"{kind}Restore", {"id": ("String!", object_id), "revision": ("Int!", revision),
                                               "ifRevision": ("Int", if_revision), "dryRun": ("Boolean", dry_run)},
                            comment)

    def restore_process(self, process_id, revision, if_revision=None, dry_run=False, comment=None):
        """Store the input of a past revision as a new revision; return "CREATED" (it was deleted) or "UPDATED".
        ClientError with code NOT_FOUND when the history does not hold that revision, BAD_USER_INPUT when it no
        longer passes the checks of a create (its media removed); the options as create_process."""
        return self._restore("process", process_id, revision, if_revision, dry_run, comment)

    def restore_product(self, product_id, revision, if_revision=None, dry_run=False, comment=None):
        """Restore a past revision of a product; as restore_process."""
        return self._restore("product", product_id, revision, if_revision, dry_run, comment)

    def restore_station(self, station_id, revision, if_revision=None, dry_run=False, comment=None):
        """Restore a past revision of a station; as restore_process."""
        return self._restore("station", station_id, revision, if_revision, dry_run, comment)

    def _history(self, kind, object_id, first, after):
        field = f"{kind}History"
        query = (f"query($id: String!, $first: Int, $after: Int) "
                 f"{{ {field}(id: $id, first: $first, after: $after) {{ revision savedAt change author comment }} }}")
        return self.graphql(query, {"id": object_id, "first": first, "after": after})[field]

    def process_history(self, process_id, first=100, after=None):
        """Up to `first` revisions of a process, newest first, each {"revision", "savedAt", "change", "author",
        "comment"}; `after` is the last revision number of the previous page. [] for an unknown id."""
        return self._history("process", process_id, first, after)

    def product_history(self, product_id, first=100, after=None):
        """The revisions of a product; as process_history."""
        return self._history("product", product_id, first, after)

    def station_history(self, station_id, first=100, after=None):
        """The revisions of a station; as process_history."""
        return self._history("station", station_id, first, after)

    def _changes(self, kind, object_id, from_revision, to_revision):
        field = f"{kind}Changes"
        query = f"query($id: String!, $from: Int!, $to: Int!) {{ {field}(id: $id, from: $from, to: $to) }}"
        return self.graphql(query, {"id": object_id, "from": from_revision, "to": to_revision})[field]

    def process_changes(self, process_id, from_revision, to_revision):
        """What changed from one revision of a process to another, one line a change in the words of its history
        page. ClientError with code NOT_FOUND when one of them holds no content (never made, pruned, a deletion)."""
        return self._changes("process", process_id, from_revision, to_revision)

    def product_changes(self, product_id, from_revision, to_revision):
        """What changed between two revisions of a product; as process_changes."""
        return self._changes("product", product_id, from_revision, to_revision)

    def station_changes(self, station_id, from_revision, to_revision):
        """What changed between two revisions of a station; as process_changes."""
        return self._changes("station", station_id, from_revision, to_revision)

    # -- change events (CONTRACT 14) --------------------------------------------------------------

    def events(self, after=None, first=100, types=None):
        """Up to `first` (1 to 1000) of the org's events after the seq `after` (None or 0: from the oldest kept),
        oldest first, each {"seq", "type", "timestamp", "kind", "id", "revision", "change", "name", "author",
        "comment"}; `types` keeps those of these types (`"process.updated"`, `"product.*"`). ClientError with code EVENTS_EXPIRED (and
        `extensions["oldest"]`) when events after `after` were pruned."""
        return events_module.events_page(self, after, first, types)

    def latest_event_seq(self):
        """The org's last event seq (0 before any)."""
        return self.graphql("{ latestEventSeq }")["latestEventSeq"]

    def follow(self, after=None, types=None):
        """A generator of the org's events as they commit, each as its envelope ({"type", "timestamp", "data"}),
        from the one after `after` (None: from now on); it reconnects by itself with Last-Event-ID, so nothing is
        missed or repeated. See service.client.events.follow."""
        return events_module.follow(self.transport, after, types)

    # By kind ("process", "product", "station"), for callers that handle every kind alike (wis import, wis delete):

    def create(self, kind, obj, if_revision=None, dry_run=False, comment=None):
        """create_process, create_product or create_station by `kind`."""
        return self._upsert(_kind(kind), obj, if_revision, dry_run, comment)

    def delete(self, kind, object_id, if_revision=None, dry_run=False, comment=None):
        """delete_process, delete_product or delete_station by `kind`."""
        return self._delete(_kind(kind), object_id, if_revision, dry_run, comment)

    def restore(self, kind, object_id, revision, if_revision=None, dry_run=False, comment=None):
        """restore_process, restore_product or restore_station by `kind`."""
        return self._restore(_kind(kind), object_id, revision, if_revision, dry_run, comment)

    def history(self, kind, object_id, first=100, after=None):
        """process_history, product_history or station_history by `kind`."""
        return self._history(_kind(kind), object_id, first, after)

    def changes(self, kind, object_id, from_revision, to_revision):
        """process_changes, product_changes or station_changes by `kind`."""
        return self._changes(_kind(kind), object_id, from_revision, to_revision)

    def list_inputs(self, kind, first=100, after=None):
        """One page of objects of `kind` ordered by id, each as {"id", "revision", "input"} only: what an export
        reads (`input` is the stored input exactly as the create mutation takes it)."""
        page = READS[_kind(kind)][1]
        query = f"query($first: Int, $after: String) {{ {page}(first: $first, after: $after) {{ id revision input }} }}"
        return self.graphql(query, {"first": first, "after": after})[page]

    def _get(self, kind, object_id, revision):
        one, _, fields, fragments = READS[kind]
        query = f"query($id: String!, $revision: Int) {{ {one}(id: $id, revision: $revision) {{ {fields} }} }} {fragments}"
        return self.graphql(query, {"id": object_id, "revision": revision})[one]

    def _list(self, kind, first, after):
        _, page, fields, fragments = READS[kind]
        query = (f"query($first: Int, $after: String) {{ {page}(first: $first, after: $after) {{ {fields} }} }} "
                 f"{fragments}")
        return self.graphql(query, {"first": first, "after": after})[page]

    def get_process(self, process_id, revision=None):
        """The stored process with its derived data and its `input` (what create_process takes back unchanged), or
        None when the org has no such process; with `revision`, as that revision stored it (None when pruned or
        never made)."""
        return self._get("process", process_id, revision)

    def get_product(self, product_id, revision=None):
        """The stored product, or None when the org has no such product; `revision` as get_process."""
        return self._get("product", product_id, revision)

    def get_station(self, station_id, revision=None):
        """The stored station, or None when the org has no such station; `revision` as get_process."""
        return self._get("station", station_id, revision)

    def list_processes(self, first=100, after=None):
        """One page of processes ordered by id: `first` (0 to 1000) after the id `after`."""
        return self._list("process", first, after)

    def list_products(self, first=100, after=None):
        """One page of products ordered by id, paged like list_processes."""
        return self._list("product", first, after)

    def list_stations(self, first=100, after=None):
        """One page of stations ordered by id, paged like list_processes."""
        return self._list("station", first, after)

    # -- uploads --------------------------------------------------------------------------------

    def stream_status(self, stream_id):
        """State of a chunked upload stream (`receivedChunks`, `state`, `path` when complete, ...)."""
        return self.uploader.stream_status(stream_id)

    def download(self, media_path, destination):
        """Stream the media at `media_path` into `destination` (a file name or a binary file); return its size.

        A body cut off is asked for again from where it stopped, as service.client.download says; a file name gets
        the whole file or, on any failure, is left as it was."""
        return download_module.download(self.transport, media_path, destination)

    def upload(self, path, destination=None, chunk_size=DEFAULT_CHUNK_SIZE, parallel=DEFAULT_PARALLEL,
               progress=None, resumed=None, state_dir=None):
        """Upload a file to a destination and return its media path.

        With no `destination`, the file's content decides: PNG or JPEG -> stepImage, MP4 -> stepVideo,
        GIF -> stepVideoGif (ValueError for anything else). Files up to 10 MB go in one request;
        larger ones through a chunked stream sending `parallel` chunks at a time, each thread with its
        own session, resumable: running the same upload again sends only what the server lacks.
        `progress(n)` is called in the calling thread with file bytes as they are read into requests
        (negative when a failed attempt takes them back); on a resume the bytes the server already
        holds go to `resumed(n)` if given, else to `progress`, before anything is sent. `state_dir`
        keeps the resume records (default ~/.cache/wis/uploads). ValueError for an unknown destination,
        a chunk size outside 1 byte..10 MB or `parallel` < 1; OSError for a file that cannot be read.
        """
        return self.uploader.upload(path, destination, chunk_size=chunk_size, parallel=parallel,
                                    progress=progress, resumed=resumed, state_dir=state_dir)

    def push(self, paths, on_result=None, progress_for=None, dry_run=False, comment=None, **upload_options):
        """Create or update the stations, processes and products in JSON/YAML files; see service.client.push.

        Returns a PushResult per entry, also passed to `on_result` as each is known. `upload_options`
        (chunk_size, parallel, state_dir) go to the upload of each local media file; `progress_for(file)`
        may return a context manager giving that upload's `progress`/`resumed` callbacks. `dry_run`: write
        nothing (local media checked, not uploaded; objects sent with dryRun). `comment`: kept with each change.
        """
        return push_module.push(self, paths, on_result=on_result, upload_options=upload_options,
                                progress_for=progress_for, dry=dry_run, comment=comment)


def _kind(kind):
    if kind not in READS:
        raise ValueError(f"not a kind of object: {kind!r} (process, product or station)")
    return kind

