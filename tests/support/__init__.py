"""What the tests share besides fixtures, one module per topic; tests import from the topic module they need:

- tokens: the tokens and headers every app and server of the tests accepts
- media: media bytes and files (format signatures, blobs, SHA-256, a PNG a browser decodes)
- client: helpers around service.client (downloads, interrupting an upload, adapters)
- documents: processes over the Flask test client, and the benchmark's realistic process
- example: the docs' complete example (docs/api.md) with real media a browser shows
- pages: a server seeded for the pages' browser tests, and signing in as a person does
- products: products of the shapes that cost a drawing most (a chain whose every process feeds the final one, wide)
- uploads: upload requests over the Flask test client
- http: requests to a real server over HTTP (chunks, tus, processes)
- datadir: what a server or app holds (files of the data directory, or the shared backend's index)
- metrics: reading /metrics
- ports: free 127.0.0.1 ports, a range of its own per xdist worker
- servers: real gunicorn, `wis`, static pages for the browser, Chromium and Node
- backends: the file and shared backends the behaviour tests run against
- engines: real PostgreSQL and SeaweedFS for the shared backend
- disk: a filesystem double that fails chosen operations
- tiers: the test tiers (markers from the fixtures a test uses) and the check that a fast test starts nothing

Fixtures are in conftest.py; test modules import these modules (pytest puts tests/ on sys.path), never conftest or
each other.
"""
