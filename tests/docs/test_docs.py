"""Every example of the README and docs/ runs as written against a real server started as the README says (`wis
serve` with the embedded default token, in a fresh directory), and answers what the page shows.

Runnable blocks (docs/development.md): ```console sessions (`$ ` commands, the lines after each its output, `...`
for any lines), ```python (run with Python, or with pytest when it defines tests), and ```json pairs marked
`<!-- example request: NAME -->` / `<!-- example answer: NAME -->` (posted to /graph/v2). A run of 16 or 32 hex
digits in shown output stands for what the server made (a media name's prefix, a stream id): the first time it is
met it is learned, and later commands and answers of the page use the real one.
"""
import json
import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from support.ports import free_port
from support.projects import WITHOUT_FOREIGN_PLUGINS
from support.paths import REPOSITORY

ROOT = REPOSITORY
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent
SHOWN_URL = "http://127.0.0.1:8000"
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```$", re.M | re.S)
MARK = re.compile(r"<!-- example (request|answer): ([\w-]+) -->\s*$")
RUNNABLE = {"console", "python", "json"}
NOT_RUN = {"sh", "js", "ini", "text", ""}
HEX = re.compile(r"(?<![0-9a-f])(?:[0-9a-f]{32}|[0-9a-f]{16})(?![0-9a-f])")


def blocks(page):
    """[(kind, text, marker)] of a page's fenced blocks in order; marker is (request|answer, name) or None."""
    text = page.read_text()
    found = []
    for match in FENCE.finditer(text):
        before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = MARK.search(before)
        found.append((match.group(1).strip(), match.group(2).rstrip("\n"), marker.groups() if marker else None))
    return found


def runnable_pages():
    return [page for page in PAGES if any(kind in RUNNABLE for kind, _, _ in blocks(page))]


def console_steps(text):
    """[(command, shown output lines)] of a console block; a command goes on over indented lines (and after a
    trailing backslash), and through a here-document."""
    lines, steps, index = text.split("\n"), [], 0
    while index < len(lines):
        assert lines[index].startswith("$ "), f"output before any command: {lines[index]!r}"
        command = [lines[index][2:]]
        heredoc = re.search(r"<<-?\s*['\"]?(\w+)", command[0])
        index += 1
        while index < len(lines) and (heredoc or command[-1].endswith("\\") or lines[index][:1].isspace()):
            command.append(lines[index])
            if heredoc and lines[index] == heredoc.group(1):
                heredoc = None
            elif not heredoc:
                heredoc = re.search(r"<<-?\s*['\"]?(\w+)", lines[index])
            index += 1
        shown = []
        while index < len(lines) and not lines[index].startswith("$ "):
            shown.append(lines[index])
            index += 1
        steps.append(("\n".join(command), shown))
    return steps


class Learned(dict):
    """Hex placeholders of the page -> what the server made instead."""

    def apply(self, text):
        for shown, real in self.items():
            text = text.replace(shown, real)
        return text

    def pattern(self, line):
        """A regex for one shown line: placeholders not learned yet become groups, learned ones their value."""
        parts, placeholders, last = [], [], 0
        for match in HEX.finditer(line):
            parts.append(re.escape(line[last:match.start()]))
            if match.group() in self:
                parts.append(re.escape(self[match.group()]))
            else:
                parts.append(f"([0-9a-f]{{{len(match.group())}}})")
                placeholders.append(match.group())
            last = match.end()
        parts.append(re.escape(line[last:]))
        return "".join(parts), placeholders

    def match(self, shown, output):
        """Check output lines against shown lines (`...` for any lines); learn the placeholders."""
        patterns, placeholders = [], []
        for line in shown:
            if line.strip() == "...":
                patterns.append(r"(?:[^\n]*\n)*?")
            else:
                pattern, names = self.pattern(line.rstrip())
                patterns.append(pattern + r"\n")
                placeholders += names
        text = "".join(line.rstrip() + "\n" for line in output)
        found = re.fullmatch("".join(patterns), text)
        assert found, "shown:\n" + "\n".join(shown) + "\n\ngot:\n" + text
        for name, value in zip(placeholders, found.groups()):
            assert self.setdefault(name, value) == value, (name, value)


class Shell:
    """One bash for a page: variables (TOKEN, ...) live on from command to command."""

    def __init__(self, cwd, env):
        self.process = subprocess.Popen(["bash", "--noprofile", "--norc"], cwd=cwd, env=env,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.marker = f"--- done {os.getpid()} ---".encode()

    def run(self, command, timeout=180):
        """Run one command; return (exit status, output lines)."""
        # The marker's own line starts with a newline, for output that does not end with one (curl -s).
        self.process.stdin.write(f"{command}\nprintf '\\n%s %s\\n' '{self.marker.decode()}' $?\n".encode())
        self.process.stdin.flush()
        received, deadline = b"", time.monotonic() + timeout
        while (end := re.search(b"\n" + re.escape(self.marker) + rb" (\d+)\n", received)) is None:
            ready, _, _ = select.select([self.process.stdout], [], [], max(0, deadline - time.monotonic()))
            assert ready, f"{command!r} did not finish within {timeout} s; so far: {received[-2000:]!r}"
            block = os.read(self.process.stdout.fileno(), 65536)
            assert block, f"bash ended during {command!r}: {received[-2000:]!r}"
            received += block
        return int(end.group(1)), received[:end.start()].decode(errors="replace").splitlines()

    def close(self):
        self.process.stdin.close()
        self.process.wait(timeout=30)
        self.process.stdout.close()


class ServedPage:
    """`wis serve` as the README starts it, in a directory of the page's own; the page's examples run there."""

    def __init__(self, server_process, directory):
        self.directory = directory
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {name: value for name, value in os.environ.items() if not name.startswith("WIS_")}
        # WIS_BIND: the README's command, on a port of the test's; WIS_URL: where `wis` then finds it.
        self.env.update(WIS_BIND=f"127.0.0.1:{self.port}", WIS_URL=self.url)
        with open(directory / "serve.stderr", "wb") as stderr:
            self.process = server_process([str(BIN / "wis"), "serve"], cwd=directory, env=self.env,
                                          stdout=subprocess.DEVNULL, stderr=stderr)
        deadline = time.monotonic() + 60
        while True:
            assert self.process.poll() is None, (directory / "serve.stderr").read_text()
            assert time.monotonic() < deadline, "wis serve did not start"
            try:
                if requests.get(self.url + "/healthz", timeout=(1, 30)).status_code == 200:
                    break
            except (requests.ConnectionError, requests.Timeout):
                time.sleep(0.1)
        self.token = (directory / "data" / "default-token").read_text().strip()
        self.env["TOKEN"] = self.token

    def localize(self, text, learned):
        """An example as it runs here: this server's URL, this checkout's virtual environment, the learned values."""
        return learned.apply(text.replace(SHOWN_URL, self.url).replace(".venv/bin/", f"{BIN}/"))

    def run_python(self, code, number):
        defines_tests = re.search(r"^def test_", code, re.M) is not None
        script = self.directory / (f"test_example_{number}.py" if defines_tests else f"example_{number}.py")
        script.write_text(code)
        pytest_run = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *WITHOUT_FOREIGN_PLUGINS]
        command = [*pytest_run, script.name] if defines_tests else [sys.executable, script.name]
        done = subprocess.run(command, cwd=self.directory, env=self.env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{code}\n{done.stdout}\n{done.stderr}"

    def post_graphql(self, body):
        answer = requests.post(f"{self.url}/graph/v2", json=body, headers={"x-service-api-org": self.token},
                               timeout=60)
        assert answer.status_code == 200, answer.text
        return answer.json()


@pytest.mark.parametrize("page", runnable_pages(), ids=lambda page: str(page.relative_to(ROOT)))
def test_the_examples_of_a_page_run_as_shown(page, tmp_path, server_process):
    served = ServedPage(server_process, tmp_path)
    shell, learned, requests_shown, ran = Shell(tmp_path, served.env), Learned(), {}, 0
    try:
        for number, (kind, text, marker) in enumerate(blocks(page)):
            if kind == "console":
                for command, shown in console_steps(text):
                    status, output = shell.run(served.localize(command, learned))
                    assert status == 0, f"{command}\n" + "\n".join(output)
                    learned.match(shown, output)
                    ran += 1
            elif kind == "python":
                served.run_python(served.localize(text, learned), number)
                ran += 1
            elif kind == "json" and marker and marker[0] == "request":
                requests_shown[marker[1]] = text
            elif kind == "json" and marker and marker[0] == "answer":
                body = json.loads(served.localize(requests_shown.pop(marker[1]), learned))
                assert served.post_graphql(body) == json.loads(served.localize(text, learned)), marker[1]
                ran += 1
    finally:
        shell.close()
    assert ran and not requests_shown, f"examples without their answer: {list(requests_shown)}"


def test_every_block_is_of_a_kind_the_docs_test_knows():
    """A block the test would skip by mistake (a typo in its info string, an unmarked JSON example) fails here."""
    for page in PAGES:
        for kind, text, marker in blocks(page):
            assert kind in RUNNABLE | NOT_RUN, f"{page.name}: a ```{kind} block"
            if kind == "json":
                assert marker, f"{page.name}: a json block without <!-- example request/answer: NAME -->"



def slug(heading):
    """The anchor GitHub gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_between_the_pages_leads_somewhere():
    for page in PAGES:
        text = FENCE.sub("", page.read_text())
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"\w+:", target):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            assert linked.is_file(), f"{page.name}: {target}"
            if anchor:
                headings = re.findall(r"^#+ (.+)$", FENCE.sub("", linked.read_text()), re.M)
                assert anchor in {slug(heading) for heading in headings}, f"{page.name}: {target}"


def test_the_files_the_readmes_commands_make_in_a_checkout_are_ignored_by_git():
    """A newcomer runs the README's commands in the checkout: the sample files they write (`> photo.png`) do not show
    up as changes to commit."""
    written = set()
    for kind, text, _ in blocks(ROOT / "README.md"):
        if kind == "console":
            for command, _ in console_steps(text):
                written.update(re.findall(r"(?<![0-9&])>\s*([\w./-]+)", command))
    written.discard("/dev/null")
    assert {"photo.png", "weld.mp4"} <= written
    for name in sorted(written):
        ignored = subprocess.run(["git", "check-ignore", "-q", "--no-index", name], cwd=ROOT)
        assert ignored.returncode == 0, f"{name}, which the README's commands write, is not ignored by git"
