"""A TCP proxy on 127.0.0.1 in front of a test's server, for the client's tests of bad links: it can cut a connection
after so many bytes of the server's answers (a proxy or a network that gives up mid-body) and hold the client's bytes
to a rate (a slow uplink). It records the heads of the requests it carries. Its threads are daemons, every wait is
bounded, and stop() ends them all."""
import re
import socket
import threading
import time
from urllib.parse import urlsplit

# Client bytes kept per connection for requests_seen(): heads are small, upload bodies are not kept whole.
RECORDED = 64 * 1024
BLOCK = 16 * 1024
# A connection idle this long is closed (a test never waits so long on one).
IDLE_SECONDS = 60
HEAD = re.compile(rb"(GET|HEAD|POST|PATCH|PUT|DELETE) (\S+) HTTP/1\.1\r\n((?:[^\r\n]+\r\n)*)\r\n")


class Proxy:
    """`Proxy(server.url, cut_after=100_000, cuts=1)`: its `url` leads to the server. A connection whose answers pass
    `cut_after` bytes is cut there, for the first `cuts` such connections (None: every one); `upload_rate` holds the
    bytes each connection sends to the server to that many a second (it may be changed meanwhile)."""

    def __init__(self, target_url, cut_after=None, cuts=None, upload_rate=None):
        target = urlsplit(target_url)
        self.target = (target.hostname, target.port)
        self.cut_after, self.cuts_left, self.upload_rate = cut_after, cuts, upload_rate
        self.cut = 0  # connections cut so far
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._sockets, self._threads, self._recorded = [], [], []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._start(self._accept)

    def requests_seen(self):
        """[(method, path, {lower-case header: value})] of the requests carried so far, by connection."""
        with self._lock:
            recorded = [bytes(data) for data in self._recorded]
        seen = []
        for data in recorded:
            for method, path, headers in HEAD.findall(data):
                fields = dict(line.split(b":", 1) for line in headers.split(b"\r\n") if b":" in line)
                seen.append((method.decode(), path.decode(),
                             {name.decode().lower(): value.decode().strip() for name, value in fields.items()}))
        return seen

    def drop(self):
        """Cut every connection open now (what a client that went away left behind), mid-request or not."""
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            _close(sock)

    def stop(self):
        self._stopped.set()
        self.drop()
        self._listener.close()
        for thread in self._threads:
            thread.join(timeout=5)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.stop()

    def _start(self, target, *args):
        thread = threading.Thread(target=target, args=args, daemon=True, name="test proxy")
        self._threads.append(thread)
        thread.start()

    def _accept(self):
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return  # stopped
            self._start(self._serve, client)

    def _serve(self, client):
        try:
            upstream = socket.create_connection(self.target, timeout=10)
        except OSError:
            _close(client)
            return
        recorded = bytearray()
        with self._lock:
            self._sockets += [client, upstream]
            self._recorded.append(recorded)
        for sock in (client, upstream):
            sock.settimeout(IDLE_SECONDS)
        self._start(self._pump_up, client, upstream, recorded)
        self._pump_down(upstream, client)

    def _pump_up(self, client, upstream, recorded):
        """The client's bytes to the server, at most `upload_rate` a second."""
        started, sent = time.monotonic(), 0
        try:
            while data := client.recv(BLOCK):
                with self._lock:
                    recorded += data[:max(0, RECORDED - len(recorded))]
                upstream.sendall(data)
                sent += len(data)
                if self.upload_rate and self._stopped.wait(max(0.0, started + sent / self.upload_rate
                                                              - time.monotonic())):
                    break
        except OSError:
            pass
        _close(client)
        _close(upstream)

    def _pump_down(self, upstream, client):
        """The server's bytes to the client, cut after `cut_after` when this connection is one to cut."""
        passed = 0
        try:
            while data := upstream.recv(BLOCK):
                if self.cut_after is not None and passed + len(data) > self.cut_after and self._take_cut():
                    client.sendall(data[:self.cut_after - passed])
                    break
                client.sendall(data)
                passed += len(data)
        except OSError:
            pass
        _close(client)
        _close(upstream)

    def _take_cut(self):
        with self._lock:
            if self.cuts_left is not None:
                if self.cuts_left == 0:
                    return False
                self.cuts_left -= 1
            self.cut += 1
            return True


def _close(sock):
    # shutdown first: it wakes a thread blocked in recv on the socket, which close alone does not.
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
