"""The `wis` process as a shell sees it: its exit status, what it writes on stderr, and how it meets Ctrl-C, a closed
output pipe and arguments it cannot use. Each test runs the installed command as a process of its own."""
import json
import os
import queue
import select
import signal
import socket
import subprocess
import sys
import threading

import pytest
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

from service.client import Client
from support.ports import free_port
from support.servers import WIS
from support.tokens import TOKEN

# Sends this process Ctrl-C (SIGINT) as it starts importing `requests`: inside the tenth of a second in which `wis`
# imports its commands, before any command runs. A site hook, so that the console script itself is what is tested.
INTERRUPT_WHILE_IMPORTING = '''
import os
import signal
import sys


class InterruptAt:
    def find_spec(self, name, path=None, target=None):
        if name == "requests":
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None


sys.meta_path.insert(0, InterruptAt())
'''


@pytest.fixture(scope="module")
def server(tmp_path_factory, start_module_gunicorn):
    """Real gunicorn (the file backend: what is tested is the command) for the tests that need a server's answers."""
    return start_module_gunicorn(tmp_path_factory.mktemp("process") / "data", workers=1)


def environment(**values):
    """This environment without the WIS_ settings of the machine, with `values`."""
    return {**{name: value for name, value in os.environ.items() if not name.startswith("WIS_")}, **values}


def wis(*args, env=None, **options):
    """Run the installed `wis` with `env` added to environment(); the finished process, its output as text."""
    options = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **options}
    return subprocess.run([str(WIS), *args], env=environment(**(env or {})), text=True, timeout=120, **options)


def test_ctrl_c_while_the_commands_are_imported_exits_130_without_a_traceback(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(INTERRUPT_WHILE_IMPORTING)
    done = subprocess.run([str(WIS), "history", "station", "x", "--url", f"http://127.0.0.1:{free_port()}",
                           "--token", "a-token-of-no-server"], env=environment(PYTHONPATH=str(tmp_path)),
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (130, "", "interrupted\n")


def test_the_console_script_imports_no_command_before_its_handling_of_ctrl_c():
    """What the console script imports before main() runs is the package and service.cli: nothing of the client."""
    probe = ("import sys; from service.cli import main; "
             "print(sorted(name for name in sys.modules if name.startswith(('service', 'requests'))))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "['service', 'service.cli']"


@pytest.mark.parametrize("timeout", ["inf", "1e30", "nan", "0", "-5", "86401", "soon"])
def test_a_timeout_that_is_not_a_sane_number_of_seconds_is_refused_by_the_parser(timeout):
    """`--timeout inf` (or any huge value) was an OverflowError traceback from the socket's clock."""
    done = subprocess.run([str(WIS), "history", "station", "x", "--timeout", timeout, "--url",
                           f"http://127.0.0.1:{free_port()}", "--token", "a-token-of-no-server"], env=environment(),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    reason = f"not a number of seconds: {timeout!r}" if timeout == "soon" else \
        f"must be a number of seconds above 0 and at most 86400, not {timeout!r}"
    assert done.stderr.splitlines()[-1] == f"wis history: error: argument --timeout: {reason}"


def test_a_token_copied_with_spaces_around_it_is_sent_without_them(server):
    """A token never has whitespace around it: it was sent as it was, and requests' refusal printed the token."""
    for token in (f" {TOKEN} ", f"{TOKEN}\n"):
        done = wis("events", "--url", server.url, env={"WIS_TOKEN": token})
        assert (done.returncode, done.stderr) == (0, ""), done.stderr
        done = wis("events", "--url", server.url, f"--token={token}")
        assert (done.returncode, done.stderr) == (0, ""), done.stderr


@pytest.mark.parametrize("where", ["WIS_TOKEN", "--token", "the token file"])
@pytest.mark.parametrize("token, character", [("tok\u20acn-secret", 4), ("tok\x01en-secret", 4),
                                              ("token-se\u200bcret", 9)])
def test_a_token_a_header_cannot_carry_is_refused_naming_where_it_came_from_and_never_shown(tmp_path, where, token,
                                                                                           character):
    """'tok€n' was `error: 'latin-1' codec can't encode character...`, which named neither the token nor its source."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "default-token").write_text(token + "\n")
    options = {"WIS_TOKEN": (["history", "station", "x"], {"WIS_TOKEN": token}),
               "--token": (["history", "station", "x", f"--token={token}"], {}),
               "the token file": (["history", "station", "x", "--data-dir", str(tmp_path / "data")], {})}
    argv, env = options[where]
    done = wis(*argv, "--url", f"http://127.0.0.1:{free_port()}", env=env)
    source = tmp_path / "data" / "default-token" if where == "the token file" else where
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.splitlines() == [
        f"error: the API token from {source} holds a character an HTTP header cannot carry (character {character} of "
        f"{len(token)}: a control character, or one beyond Latin-1); it is not shown here"]


def test_the_client_refuses_such_a_token_before_sending_anything():
    for token in (" wis-a-token", "wis-a-token\n", "wis-tok\u20acn"):
        with pytest.raises(ValueError, match=r"^the API token (starts or ends with whitespace|holds a character)"):
            Client(f"http://127.0.0.1:{free_port()}", token)


def run_into_a_closed_pipe(*args, env=None):
    """Run `wis` with its stdout a pipe whose reader has already gone: `wis ... | head -1` once head has exited, every
    time (with a real `head`, whether the command writes before head exits is a race)."""
    reader, writer = os.pipe()
    os.close(reader)
    try:
        return wis(*args, env=env, stdout=writer)
    finally:
        os.close(writer)


@pytest.mark.parametrize("command", [["history", "station", "pipe_1"], ["events"], ["events", "--json"]])
def test_a_reading_command_whose_reader_went_away_exits_141_quietly(server, command):
    """It was `error: Broken pipe: None` and exit status 1."""
    with Client(server.url, TOKEN) as client:
        for name in ("Press 1", "Press one", "Press 1"):
            client.create_station({"id": "pipe_1", "name": name})
    done = run_into_a_closed_pipe(*command, "--url", server.url, "--token", TOKEN)
    assert (done.returncode, done.stderr) == (141, "")


def test_a_push_whose_reader_went_away_pushes_everything_and_exits_with_its_own_status(server, tmp_path):
    """`wis push many/ | head -1` stopped after the object whose line found the pipe closed: the lines are lost, the
    work is not."""
    folder = tmp_path / "many"
    folder.mkdir()
    for number in range(8):
        (folder / f"s{number}.json").write_text(json.dumps({"station": {"id": f"many_{number}", "name": "Many"}}))
    done = run_into_a_closed_pipe("push", str(folder), "--url", server.url, "--token", TOKEN, "--no-progress")
    assert (done.returncode, done.stderr) == (0, "")
    with Client(server.url, TOKEN) as client:
        assert [client.get_station(f"many_{number}")["name"] for number in range(8)] == ["Many"] * 8


def test_an_os_error_without_a_file_is_one_line_without_none(server):
    """A full disk (or a closed pipe) names no file: the message was `error: No space left on device: None`."""
    done = wis("export", "/dev/full", "--url", server.url, "--token", TOKEN, "--no-progress")
    assert (done.returncode, done.stderr) == (1, "error: No space left on device\n")


def lines_of(pipe):
    """A queue that receives each line of `pipe` (without its end) as it comes, then None at its end."""
    lines = queue.Queue()

    def read():
        for line in pipe:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    return lines


ENVELOPE = {"type": "station.created", "timestamp": "2026-11-29T12:00:00.000Z",
            "data": {"seq": 7, "kind": "station", "id": "press_1", "revision": 1, "change": "CREATED",
                     "name": "Press 1", "author": "env-1", "comment": None}}


def event_stream(stop):
    """A WSGI app whose GET /events is a stream holding ENVELOPE (for a first connection), then keepalives until
    `stop` is set."""
    @Request.application
    def app(request):
        def stream():
            yield "retry: 200\n\n"
            if "Last-Event-ID" not in request.headers:
                yield f"id: 7\nevent: station.created\ndata: {json.dumps(ENVELOPE)}\n\n"
            while not stop.wait(0.2):
                yield ": keepalive\n\n"

        return Response(stream(), mimetype="text/event-stream")

    return app


def test_following_an_unreachable_server_says_so_once_and_says_when_it_is_back(tmp_path):
    """`wis events --follow` printed nothing, for as long as the server was out of reach; its Ctrl-C spoke of an
    upload to resume."""
    port = free_port()
    following = subprocess.Popen([str(WIS), "events", "--follow", "--json", "--url", f"http://127.0.0.1:{port}",
                                  "--token", TOKEN], env=environment(), stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
    out, err = lines_of(following.stdout), lines_of(following.stderr)
    stop = threading.Event()
    server = None
    try:
        assert err.get(timeout=30) == (f"wis events: cannot reach http://127.0.0.1:{port} (Connection refused); "
                                       "trying again until interrupted")
        server = make_server("127.0.0.1", port, event_stream(stop), threaded=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        assert json.loads(out.get(timeout=30)) == ENVELOPE
        assert err.get(timeout=30) == "wis events: following again"
        following.send_signal(signal.SIGINT)
        assert following.wait(30) == 130
        assert [err.get(timeout=10), err.get(timeout=10)] == ["interrupted", None]
    finally:
        stop.set()
        if following.poll() is None:
            following.kill()
            following.wait()
        following.stdout.close()
        following.stderr.close()
        if server is not None:
            server.shutdown()
            server.server_close()


@pytest.mark.parametrize("command, said", [
    (["export", "{archive}"], "interrupted; the archive was not written (a file that was there is as it was)"),
    (["history", "station", "press_1"], "interrupted"),
])
def test_ctrl_c_says_what_it_leaves_of_the_command_it_stopped(tmp_path, command, said):
    """Ctrl-C of every command used to say "run the same command again to resume an upload"."""
    archive = tmp_path / "org.tar.gz"
    archive.write_bytes(b"an archive of an earlier export")
    with socket.socket() as silent:  # accepts connections (the kernel's backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        argv = [part.format(archive=archive) for part in command]
        waiting = subprocess.Popen([str(WIS), *argv, "--url", f"http://127.0.0.1:{silent.getsockname()[1]}",
                                    "--token", TOKEN, "--no-progress"], env=environment(), stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        try:
            # Connected: the command is waiting for its first answer.
            assert select.select([silent], [], [], 30)[0], "wis did not connect"
            waiting.send_signal(signal.SIGINT)
            out, err = waiting.communicate(timeout=30)
        finally:
            if waiting.poll() is None:
                waiting.kill()
                waiting.communicate()
    assert (waiting.returncode, out, err) == (130, "", said + "\n")
    assert archive.read_bytes() == b"an archive of an earlier export"
