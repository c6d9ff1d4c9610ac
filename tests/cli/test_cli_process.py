"""The `wis` process as a shell sees it: its exit status, what it writes on stderr, and how it meets Ctrl-C, a closed
output pipe and arguments it cannot use. Each test runs the installed command as a process of its own."""
import json
import os
import subprocess
import sys

import pytest

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
