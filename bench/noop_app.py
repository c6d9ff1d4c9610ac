"""The do-nothing baseline of bench/graphql_bench.py: Ariadne's own WSGI app over the service's schema.graphql,
every mutation answering CREATED without storing anything.

    gunicorn -c python:service.gunicorn_config --chdir bench 'noop_app:create_app()'
"""
from importlib import resources

from ariadne import MutationType, make_executable_schema
from ariadne.wsgi import GraphQL


def create_app():
    """Ariadne's WSGI GraphQL app; the three mutations do nothing."""
    mutation = MutationType()
    for name in ("processCreate", "productCreate", "stationCreate"):
        mutation.set_field(name, lambda *_args, **_kwargs: "CREATED")
    schema = make_executable_schema((resources.files("service") / "schema.graphql").read_text(encoding="utf-8"),
                                    mutation)
    return GraphQL(schema)
