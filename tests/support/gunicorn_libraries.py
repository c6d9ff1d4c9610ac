"""A gunicorn config file (`-c tests/support/gunicorn_libraries.py`) for the test servers started without the shipped
one: the master imports the third-party libraries every worker imports, as the shipped config's master does (it
loads the schema and the storage), so that forked workers do not each import them again. About 0.4 CPU s less per
two-worker start; the suite starts well over a hundred. It sets no gunicorn setting and imports nothing of the
service (whose modules read the environment and prometheus_client's multiprocess directory when imported).
"""
import os

import ariadne  # noqa: F401
import flask  # noqa: F401
import graphql  # noqa: F401
import jinja2  # noqa: F401
import marshmallow  # noqa: F401
import orjson  # noqa: F401

if os.environ.get("WIS_DATABASE_URL") or os.environ.get("DATABASE_URL"):
    import boto3  # noqa: F401
    import psycopg  # noqa: F401
    import psycopg_pool  # noqa: F401
