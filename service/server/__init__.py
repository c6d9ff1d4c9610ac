"""The HTTP server side of the service: the gunicorn worker that `service/gunicorn_config.py` names, so that a client
that sends its request slowly, or stops half-way, costs a file descriptor and a small buffer instead of a thread."""
