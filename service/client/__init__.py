"""Python client of the work-instruction service.

    from service.client import Client, ClientError

- api.py: Client, the facade: GraphQL upserts and reads, uploads, downloads, push.
- transport.py: HTTP with the token, timeouts, and the retry policy (what is sent again, and why).
- uploader.py: single and chunked, parallel, resumable uploads (one requests.Session per thread).
- download.py: media into a file, a body cut off asked for again from where it stopped (Range), whole or nothing.
- push.py: objects from JSON/YAML files, their local media uploaded first, applied in order (or checked: dry run).
- transfer.py: export of an org into an archive (service.interface.archive) and import of one, through the API.
- dry_run.py: objects checked with dryRun before what they refer to exists (push and import dry runs).
- errors.py: ClientError (the service said no) and ServerUnreachable (no answer).
"""
from service.client.api import Client
from service.client.errors import ClientError, ServerUnreachable, describe
from service.client.push import PushResult
from service.client.transport import OutcomeUnknown, Repeat, Transport
from service.client.uploader import DEFAULT_CHUNK_SIZE, DEFAULT_PARALLEL, MB, default_state_dir, destination_of

__all__ = ["Client", "ClientError", "ServerUnreachable", "OutcomeUnknown", "PushResult", "Repeat", "Transport",
           "MB", "DEFAULT_CHUNK_SIZE", "DEFAULT_PARALLEL", "default_state_dir", "destination_of", "describe"]
