"""Cycle-collector settings of a worker process, set once after start-up (service.gunicorn_config).

A request builds a large tree of dicts and lists (the input, its derivations, the stored document) that
holds no cycles and lives until the response. With the default threshold (a young collection every 700
allocations) the collector ran about 200 times during one 1000-step processCreate, rescanning that tree:
about a third of the request's time in bench/profile_graphql.py (180-215 ms of 490-640 ms). A threshold of
50,000 allocations brings that to 2 collections and 90-110 ms, for every thread of the worker alike, without
turning the collector off for anyone (pausing it inside GraphQL requests, as was done before, paused it for
the worker's other threads too, uploads included). Freezing what start-up built (modules, the schema, the
app) keeps the collections that still run from scanning it again and again.

Only worker processes the service owns are tuned: create_app() leaves the collector of a process that
embeds it (an integrator's test run) as it is.
"""
import gc

YOUNG_THRESHOLD = 50_000


def tune():
    """Freeze what start-up built, and collect young objects every YOUNG_THRESHOLD allocations, not every 700."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *gc.get_threshold()[1:])
