"""A request body received straight from gunicorn's socket (service.web.uploads.request_body.RequestBody.in_place):
every byte once, in the order sent, in blocks the multipart decoder can search where they were received."""
import os
import socket
import threading

from gunicorn.http.body import Body, LengthReader
from gunicorn.http.unreader import SocketUnreader

from service.web.uploads.request_body import READ_SIZE, RequestBody

# What gunicorn's event loop holds of a body before a thread takes the request.
HELD = 64 * 1024


def received_blocks(body, send=None, how=RequestBody.in_place):
    """(each block `how` gave (in_place, or iterating: bytes), as (its type, its length, a copy of its bytes)),
    cut_off) for `body` sent through a socketpair with HELD bytes already read by gunicorn's reader; `send(socket)`
    sends something else instead."""
    sender, receiver = socket.socketpair()
    thread = threading.Thread(target=send or (lambda sock: sock.sendall(body)), args=(sender,))
    thread.start()
    try:
        unreader = SocketUnreader(receiver)
        held = b""
        while len(held) < HELD:
            held += receiver.recv(HELD - len(held))
        unreader.unread(held)
        request_body = RequestBody({"wsgi.input": Body(LengthReader(unreader, len(body))),
                                    "gunicorn.socket": receiver}, len(body))
        blocks = [(type(block), len(block), bytes(block)) for block in how(request_body)]
        return blocks, request_body.cut_off
    finally:
        thread.join()
        sender.close()
        receiver.close()


def test_the_last_block_shorter_than_the_buffer_is_a_bytearray_of_its_own_length():
    body = os.urandom(HELD + 2 * READ_SIZE + 300_001)
    blocks, cut_off = received_blocks(body)
    assert not cut_off
    assert b"".join(data for _, _, data in blocks) == body
    assert [(kind, length) for kind, length, _ in blocks] == [
        (bytes, HELD), (bytearray, READ_SIZE), (bytearray, READ_SIZE), (bytearray, 300_001)]


def test_iterated_a_body_comes_as_bytes_the_caller_may_keep():
    body = os.urandom(HELD + 2 * READ_SIZE + 300_001)
    blocks, cut_off = received_blocks(body, how=iter)
    assert not cut_off
    assert b"".join(data for _, _, data in blocks) == body
    assert {kind for kind, _, _ in blocks} == {bytes}


def test_a_body_of_whole_blocks_ends_with_a_whole_block():
    body = os.urandom(HELD + 2 * READ_SIZE)
    blocks, cut_off = received_blocks(body)
    assert not cut_off
    assert b"".join(data for _, _, data in blocks) == body
    assert [length for _, length, _ in blocks] == [HELD, READ_SIZE, READ_SIZE]


def test_a_body_cut_off_keeps_what_arrived_and_says_so():
    body = os.urandom(HELD + 2 * READ_SIZE)
    sent = HELD + READ_SIZE + 12_345

    def send_part_then_hang_up(sock):
        sock.sendall(body[:sent])
        sock.shutdown(socket.SHUT_WR)

    blocks, cut_off = received_blocks(body, send_part_then_hang_up)
    assert cut_off
    assert b"".join(data for _, _, data in blocks) == body[:sent]
