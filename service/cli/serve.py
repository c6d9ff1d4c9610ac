"""`wis serve`: gunicorn with the shipped configuration."""
import os
import sys

from service.cli.common import int_at_least


def add_commands(commands):
    serve = commands.add_parser("serve", help="run the service with gunicorn")
    serve.add_argument("--bind", help="host:port to listen on (default: $WIS_BIND, else 0.0.0.0:$PORT when PORT "
                                      "is set, else 127.0.0.1:8000)")
    serve.add_argument("--workers", type=int_at_least(1), help="worker processes (default: $WIS_WORKERS or CPUs + 1)")
    serve.add_argument("--data-dir", help="data directory (default: $WIS_DATA_DIR or ./data)")
    serve.add_argument("--dev", action="store_true", help="one worker that reloads when the code changes")
    serve.set_defaults(run=serve_command)


def serve_command(args):
    argv = [sys.executable, "-m", "gunicorn", "-c", "python:service.gunicorn_config"]
    if args.bind:
        argv += ["--bind", args.bind]
    if args.dev:
        argv += ["--reload", "--workers", "1"]
    elif args.workers:
        argv += ["--workers", str(args.workers)]
    argv.append("service:create_app()")
    if args.data_dir:
        os.environ["WIS_DATA_DIR"] = args.data_dir
    sys.stdout.flush()
    sys.stderr.flush()
    # Replace this process, so signals (TERM from a supervisor, Ctrl-C) reach gunicorn itself.
    os.execv(sys.executable, argv)
