"""The event stream behind a real nginx configured as docs/events.md says ("Behind a proxy"; the `location` block is
read from the page): events pass through as they commit, not when a buffer fills, and a stream outlives nginx's
default read timeout of a quiet upstream because the keepalives pass too."""
import re
import shutil
import signal
import subprocess
import time

import pytest
import requests

from support.events import commit, follower, latest_seq
from support.paths import REPOSITORY
from support.ports import free_port
from support.servers import SHIPPED_WORKER_CLASS
from support.tokens import HEADERS

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
DELIVERY_SECONDS = 1.0


def documented_location():
    """The nginx `location /events` block of docs/events.md."""
    page = (REPOSITORY / "docs" / "events.md").read_text()
    return re.search(r"^location /events \{\n.*?^\}$", page, re.M | re.S)[0]


@pytest.fixture
def proxy(tmp_path, start_gunicorn):
    """nginx on a free port in front of a gunicorn server, with the documented location; (proxy URL, server URL)."""
    if not shutil.which(NGINX):
        pytest.fail("nginx is needed for this test: apt-get install -y nginx")
    server = start_gunicorn(tmp_path / "data", workers=1,
                            extra_args=("--worker-class", SHIPPED_WORKER_CLASS, "--threads", "4"))
    port, prefix = free_port(), tmp_path / "nginx"
    prefix.mkdir()
    # A proxy that buffers a quiet stream for long: the documented lines must undo it.
    (prefix / "nginx.conf").write_text(f"""
        daemon off;
        pid {prefix}/nginx.pid;
        error_log {prefix}/error.log;
        events {{}}
        http {{
            access_log off;
            client_body_temp_path {prefix}/body;
            proxy_temp_path {prefix}/proxy;
            fastcgi_temp_path {prefix}/fastcgi;
            uwsgi_temp_path {prefix}/uwsgi;
            scgi_temp_path {prefix}/scgi;
            proxy_read_timeout 8s;
            upstream wis {{ server 127.0.0.1:{server.url.rsplit(':', 1)[1]}; }}
            server {{
                listen 127.0.0.1:{port};
                {documented_location()}
                location / {{ proxy_pass http://wis; }}
            }}
        }}
    """)
    process = subprocess.Popen([NGINX, "-p", str(prefix), "-c", str(prefix / "nginx.conf")],
                               stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 10
    while True:
        try:
            requests.get(url + "/healthz", timeout=1)
            break
        except requests.ConnectionError:
            assert time.monotonic() < deadline and process.poll() is None, process.stderr.read()
            time.sleep(0.05)
    yield url, server.url
    process.send_signal(signal.SIGQUIT)
    process.wait(10)
    process.stderr.close()


def test_events_pass_through_nginx_as_they_commit_and_the_stream_outlives_its_read_timeout(proxy):
    url, direct = proxy
    start = latest_seq(direct)
    with follower(url, headers={**HEADERS, "Last-Event-ID": str(start)}, read_timeout=30) as stream:
        committed = commit(direct, "px_press", "Press 1")
        [(arrived, message)] = stream.events(1)
        assert message["id"] == str(start + 1) and arrived - committed < DELIVERY_SECONDS
        # Quiet for longer than the proxy's 8 s read timeout (the location sets 120 s, and keepalives come every
        # 12 s): the stream is still there for the next event.
        time.sleep(13)
        committed = commit(direct, "px_press", "Press 2")
        [(arrived, message)] = stream.events(1)
        assert message["id"] == str(start + 2) and arrived - committed < DELIVERY_SECONDS
