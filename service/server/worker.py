"""`ReadAheadWorker`: gunicorn's gthread worker, with its event loop receiving each request until a thread can serve
it without waiting for the client.

gthread accepts a connection in its event loop and hands it to a thread at once; the thread then waits for the
request with blocking reads and no deadline, so a client that sends a head and one byte of its body, then nothing,
holds a thread for ever, and `threads` such clients (32 by default) stop the worker. Here the loop (gthread's own
selector) also receives each request, new or on a kept-alive connection, without blocking: a thread takes it only
when its head is whole and either its whole body has arrived or `arrival.HANDOFF_BYTES` of it have (a large upload
then streams on in the thread, as before). The bytes received are given back to gunicorn's parser in the thread
(`Unreader.unread`), so gunicorn parses and answers the request exactly as gthread would.

What a client costs while the loop receives its request: a file descriptor and at most `HANDOFF_BYTES` of buffer.
Bounds:
- `request_start_timeout` (WIS_REQUEST_START_TIMEOUT): from its accept (or, on a kept-alive connection, from the
  first byte of its next request), a request has this long to reach the hand-off; then the connection is closed
  (with a 408 when part of a request had arrived).
- `request_body_timeout` and `request_body_min_rate` (WIS_REQUEST_BODY_TIMEOUT, WIS_REQUEST_BODY_MIN_RATE): once a
  thread serves the request, each wait for more of it lasts at most the timeout, and all its waits together the
  timeout plus a second per `min_rate` bytes received (`PacedSocket`), so a client that trickles a byte now and then
  cannot keep a thread either; then the request ends as if the client had gone: an upload keeps what arrived, and
  the connection is closed after the answer.
- `worker_connections` (WIS_WORKER_CONNECTIONS) bounds the connections a worker holds, waiting or served; the worker
  raises its open-file limit to fit them (up to the hard limit) and holds fewer when it cannot.

Every request also gets, in its environ (service.interface.WORKER_ENVIRON), the worker's WorkerLifetime
(service.server.lifetime): its threads, and its stop as soon as the loop sees it, so that event streams end at once.

Plain HTTP/1.x only: TLS, HTTP/2 and the uwsgi protocol are refused at start-up (the loop cannot read a TLS or HTTP/2
request before gunicorn has set the connection up in a thread); use `gthread` for them, behind a proxy that buffers.
"""
import errno
import http
import json
import resource
import selectors
import socket
import struct
import time
from collections import OrderedDict
from functools import partial

from gunicorn.workers.gthread import STOP_KEEPALIVE_LINGER, TConn, ThreadWorker

from service.config import load_server_config
from service.errors import RequestTimeout, http_status
from service.interface import WORKER_ENVIRON
from service.server.arrival import HANDOFF_BYTES, RequestArrival
from service.server.lifetime import WorkerLifetime

# Open files kept out of `worker_connections`' share for what the threads open: documents and lock files, upload
# streams, database and object store connections, logs, metric files.
FILES_BESIDE_CONNECTIONS = 256
# accept() errors that say the process or system has no file (or memory) for another connection now.
OUT_OF_FILES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
ACCEPT_PAUSE = 1.0


class ReadAheadWorker(ThreadWorker):
    """gthread with requests received in the event loop: a thread only serves a request that has arrived."""

    @classmethod
    def check_config(cls, cfg, log):
        super().check_config(cfg, log)
        if cfg.is_ssl or cfg.protocol != "http" or "h2" in cfg.http_protocols or cfg.http2_cleartext != "off":
            # gunicorn stops with this message (a RuntimeError from check_config).
            raise RuntimeError(f"{cls.__module__}.{cls.__name__} serves plain HTTP/1.x only: for TLS, HTTP/2 or "
                               "uwsgi set WIS_WORKER_CLASS=gthread (slow clients then hold threads: put a buffering "
                               "proxy in front)")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        settings = load_server_config()
        self.start_timeout = settings["request_start_timeout"]
        self.body_timeout = settings["request_body_timeout"]
        self.body_min_rate = settings["request_body_min_rate"]
        # Connections whose request the loop is receiving, oldest deadline first (every deadline is a fixed time
        # after its start, so insertion order is deadline order; an OrderedDict removes any of them in O(1)).
        self.arriving = OrderedDict()
        self.accept_paused_until = 0.0
        self.lifetime = WorkerLifetime(self.cfg.threads)

    def load_wsgi(self):
        """The application, handed this worker's WorkerLifetime in every request's environ (event streams end when
        the worker stops, and size their cap by its threads)."""
        super().load_wsgi()
        application, lifetime = self.wsgi, self.lifetime

        def with_lifetime(environ, start_response):
            environ[WORKER_ENVIRON] = lifetime
            return application(environ, start_response)

        self.wsgi = with_lifetime

    def init_process(self):
        self.worker_connections = self._fit_open_file_limit(self.worker_connections)
        super().init_process()

    def _fit_open_file_limit(self, connections):
        """Raise the soft limit of open files (up to the hard one) to hold `connections`; the connections it fits."""
        needed = connections + FILES_BESIDE_CONNECTIONS
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY and soft < needed:
            soft = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        if soft != resource.RLIM_INFINITY and soft < needed:
            fitted = max(soft - FILES_BESIDE_CONNECTIONS, self.cfg.threads)
            self.log.warning("worker_connections %d does not fit the open-file limit %d (ulimit -n): this worker "
                             "holds %d connections", connections, soft, fitted)
            return fitted
        return connections

    # -- the event loop: receiving requests ------------------------------------------------------------------------

    def accept(self, listener):
        """A new connection waits in the loop for its first request."""
        try:
            client_sock, client_addr = listener.accept()
        except (BlockingIOError, ConnectionAbortedError):
            return  # another worker took it, or the client gave up in the backlog
        except OSError as error:
            if error.errno not in OUT_OF_FILES:
                raise
            # gthread would die here, dropping every connection it holds; the connection stays in the backlog.
            self.log.warning("cannot accept a connection (%s): not accepting for %g s", error.strerror, ACCEPT_PAUSE)
            self.accept_paused_until = time.monotonic() + ACCEPT_PAUSE
            self.set_accept_enabled(False)
            return
        self.nr_conns += 1
        sock = PacedSocket(client_sock, self.body_timeout, self.body_min_rate)
        conn = Connection(self.cfg, sock, client_addr, listener.getsockname())
        self._receive(conn)

    def set_accept_enabled(self, enabled):
        # gthread's loop turns accepting back on whenever it holds fewer than worker_connections: not while paused.
        super().set_accept_enabled(enabled and time.monotonic() >= self.accept_paused_until)

    def on_client_socket_readable(self, conn, client):
        """A kept-alive connection's next request starts: received in the loop like the first."""
        self.poller.unregister(client)
        self.keepalived_conns.remove(conn)
        self._receive(conn)

    def _receive(self, conn, held=b""):
        """Receive the next request of `conn` in the loop, starting with the bytes `held` already."""
        number = conn.parser.req_count + 1 if conn.parser is not None else 1
        conn.arrival = RequestArrival(self.cfg, conn.client, number)
        conn.deadline = time.monotonic() + self.start_timeout
        self.arriving[conn] = None
        if held:
            self._arrived(conn, held)
        else:
            self._on_readable(conn)  # a kept-alive connection is readable already, and a new one often is

    def _on_readable(self, conn, _sock=None):
        try:
            data = conn.sock.recv(conn.arrival.room)
        except BlockingIOError:
            data = None  # nothing yet
        except OSError:
            data = b""  # reset
        if data == b"":
            self._forget(conn)  # the client closed the connection
        else:
            self._arrived(conn, data)

    def _arrived(self, conn, data):
        """Take the bytes that arrived (None: none yet), then hand the request to a thread or wait for more."""
        if data is not None and conn.arrival.add(data):
            self._unwatch(conn)
            del self.arriving[conn]
            conn.hand_over()
            self.enqueue_req(conn)
            return
        if not conn.watched:
            self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._on_readable, conn))
            conn.watched = True
        if conn.arrival.expects_continue and not conn.continue_sent:
            # The client holds its body back until told to send it; gunicorn would say so only in the thread.
            conn.continue_sent = True
            try:
                conn.sock.send(b"HTTP/1.1 100 Continue\r\n\r\n")
            except OSError:
                pass  # a client that cannot take 25 bytes sends no body either: the deadline closes it

    def _unwatch(self, conn):
        if conn.watched:
            self.poller.unregister(conn.sock)
            conn.watched = False

    def _forget(self, conn, answer=None):
        """Stop receiving `conn`'s request and close it, with `answer` (bytes) sent first when it can be at once."""
        del self.arriving[conn]
        self._unwatch(conn)
        if answer is not None:
            try:
                conn.sock.send(answer)
            except OSError:
                pass
        self.nr_conns -= 1
        conn.close()

    def murder_pending(self):
        # gthread calls this on every turn of its loop, stopping or not: the deadlines of arriving requests too.
        super().murder_pending()
        now = time.monotonic()
        if not self.alive:
            # Stopping (SIGTERM, a max-requests restart, the master gone): answers that would last as long as their
            # client wants (event streams) end now, not after graceful_timeout.
            self.lifetime.stop()
            # A request under way gets what a kept-alive connection gets (gthread's linger), not more.
            for conn in self.arriving:
                conn.deadline = min(conn.deadline, now + STOP_KEEPALIVE_LINGER)
        while self.arriving:
            conn = next(iter(self.arriving))
            if conn.deadline > now:
                break
            self.log.debug("closing a connection whose request did not arrive within %g s", self.start_timeout)
            self._forget(conn, self._late_answer() if conn.arrival.received else None)

    def _late_answer(self):
        error = RequestTimeout(f"the request did not arrive within {self.start_timeout:g} s (its head, and its body "
                               f"or the first {HANDOFF_BYTES // 1024} KB of it): send it again without pausing")
        status = http_status(error)
        body = json.dumps({"error": error.message}).encode()
        head = (f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n")
        return head.encode("latin-1") + body

    # -- threads: serving requests -----------------------------------------------------------------------------------

    def handle(self, conn):
        keep = super().handle(conn)
        if keep is not True:
            # gthread would linger for the client's FIN in the event loop (up to 2 s a connection, all of the
            # worker's clients waiting meanwhile): here it holds this thread only.
            conn.close_gracefully()
        return keep

    def handle_request(self, req, conn):
        if conn.continue_sent:
            req._expected_100_continue = False  # sent by the loop already (a second one would be harmless)
            conn.continue_sent = False
        return super().handle_request(req, conn)

    def _keepalive_after(self, conn, keepalive):
        # A body that stopped arriving leaves the connection mid-request: it cannot carry another one.
        return not conn.sock.ran_out and super()._keepalive_after(conn, keepalive)

    def finish_request(self, conn, fs):
        """Back in the loop after a thread served `conn`: a request already arriving behind the answered one is
        received in the loop; a closed connection was closed by its thread (see `handle`)."""
        if not fs.cancelled() and fs.exception() is None and fs.result() is True:
            held = conn.parser.unreader.take_buffered()
            if held:
                conn.sock.setblocking(False)
                self._receive(conn, held)
            else:
                super().finish_request(conn, fs)  # gthread keeps it alive in the loop
            return
        self.nr_conns -= 1
        conn.close()


class Connection(TConn):
    """gthread's connection, with the request the loop is receiving on it."""

    def __init__(self, cfg, sock, client, server):
        super().__init__(cfg, sock, client, server)
        self.arrival = None
        self.deadline = None
        self.watched = False  # registered with the loop's selector for the request's next bytes
        self.replay = b""
        self.continue_sent = False
        # gthread's handle() would otherwise wait in the thread for the first bytes of a new connection.
        self.data_ready = True

    def hand_over(self):
        """The loop is done with the request: its bytes go to gunicorn's parser in the thread."""
        self.replay = bytes(self.arrival.received)
        self.arrival = None

    def init(self):
        # In the thread, before gunicorn parses the request (and on every request of a kept-alive connection).
        super().init()
        self.sock.start_request()
        if self.replay:
            self.parser.unreader.unread(self.replay)
            self.replay = b""

    def close_gracefully(self):
        if self.sock.fileno() == -1:
            return  # closed by gunicorn already
        try:
            self.close(graceful=True)
        except OSError:
            self.close()


class PacedSocket:
    """A connection's socket for gunicorn, with the waits for the client's bytes bounded while a thread serves its
    request (blocking reads): each wait lasts at most `timeout` seconds, and all of a request's waits together at
    most `timeout` plus one second per `min_rate` bytes received (time the application spends between reads does
    not count). Then the request ends as if the client had gone (b"", 0): gunicorn, werkzeug and the upload code
    already handle that (a body cut short: an upload keeps what arrived, a form or query is refused). Every other
    use (the event loop's non-blocking reads, gunicorn's own timed reads, writing answers) is the socket's own.

    Bytes already there are taken without waiting (MSG_DONTWAIT): only a read that would block is timed, so a fast
    upload pays one flag per read, not a clock and a setsockopt."""

    def __init__(self, sock, timeout, min_rate):
        self._sock, self._timeout, self._min_rate = sock, timeout, min_rate
        self._receive_timeout = None  # SO_RCVTIMEO as last set
        self.start_request()

    def start_request(self):
        self._waited = 0.0
        self._received = 0
        self.ran_out = False

    def recv(self, size, flags=0):
        if self._sock.gettimeout() is not None or flags & socket.MSG_DONTWAIT:
            # Non-blocking, a timeout gunicorn set for draining or closing, or a caller that asked not to wait (an
            # event stream peeking whether its client hung up): the socket's own answer, at once.
            return self._sock.recv(size, flags)
        if self.ran_out:
            return b""
        try:
            data = self._sock.recv(size, flags | socket.MSG_DONTWAIT)
        except BlockingIOError:
            data = self._wait(self._sock.recv, b"", size, flags)
        self._received += len(data)
        return data

    def recv_into(self, buffer, nbytes=0, flags=0):
        if self._sock.gettimeout() is not None:
            return self._sock.recv_into(buffer, nbytes, flags)
        if self.ran_out:
            return 0
        try:
            count = self._sock.recv_into(buffer, nbytes, flags | socket.MSG_DONTWAIT)
        except BlockingIOError:
            count = self._wait(self._sock.recv_into, 0, buffer, nbytes, flags)
        self._received += count
        return count

    def _wait(self, receive, nothing, *args):
        """`receive(*args)`, waiting as long as the request may still wait; `nothing` once it may not."""
        allowed = min(self._timeout, self._timeout + self._received / self._min_rate - self._waited)
        if allowed <= 0:
            self.ran_out = True
            return nothing
        if allowed != self._receive_timeout:
            # SO_RCVTIMEO: a socket timeout of Python's would also bound writing the answer, as a whole.
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _timeval(allowed))
            self._receive_timeout = allowed
        started = time.monotonic()
        try:
            return receive(*args)
        except BlockingIOError:  # the receive timeout ran out
            self.ran_out = True
            return nothing
        finally:
            self._waited += time.monotonic() - started

    def __getattr__(self, name):
        return getattr(self._sock, name)


def _timeval(seconds):
    """A struct timeval (SO_RCVTIMEO's value) of `seconds`, at least a millisecond (zero would mean no timeout)."""
    seconds = max(seconds, 0.001)
    whole = int(seconds)
    return struct.pack("@ll", whole, int((seconds - whole) * 1_000_000))
