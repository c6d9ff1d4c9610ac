"""The `wis` process as a shell sees it: its exit status, what it writes on stderr, and how it meets Ctrl-C, a closed
output pipe and arguments it cannot use. Each test runs the installed command as a process of its own."""
import os
import subprocess
import sys

import pytest

from support.ports import free_port
from support.servers import WIS

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


def environment(**values):
    """This environment without the WIS_ settings of the machine, with `values`."""
    return {**{name: value for name, value in os.environ.items() if not name.startswith("WIS_")}, **values}


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
