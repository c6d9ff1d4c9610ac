"""Media bytes and files: format signatures, blobs of a given size, and their SHA-256."""
import hashlib
import os
import random

from service.interface import MB

PNG = b"\x89PNG\r\n\x1a\n"
JPEG = b"\xff\xd8\xff\xe0"
GIF = b"GIF89a"
MP4 = b"\x00\x00\x00\x18ftypmp42"
SMALL_PNG = PNG + b"\0" * 64


def blob(magic, size, seed=0):
    """`size` bytes starting with `magic`, the rest a cheap non-constant pattern (repeating every 256 bytes)."""
    body = (bytes(range(seed % 256, 256)) + bytes(range(256))) * (size // 256 + 2)
    return magic + body[: size - len(magic)]


def random_blob(magic, size, seed):
    """`size` bytes starting with `magic`, the rest pseudo-random from `seed` (files of different seeds differ
    throughout)."""
    return magic + random.Random(seed).randbytes(size - len(magic))


def png(size, seed):
    return random_blob(PNG, size, seed)


def mp4(size, seed):
    return random_blob(MP4, size, seed)


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def write_media(path, size, header):
    """Write `size` bytes starting with `header` (a format signature), in blocks, and return the path."""
    with open(path, "wb") as handle:
        handle.write(header)
        remaining = size - len(header)
        while remaining > 0:
            block = os.urandom(min(MB, remaining))
            handle.write(block)
            remaining -= len(block)
    return path


def write_png(path, size=4096):
    return write_media(path, size, PNG)


def write_mp4(path, size):
    return write_media(path, size, MP4)


def sha256_of(path):
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def real_png(width, height, rgb):
    """A PNG a browser decodes: `width` x `height` pixels of one colour (`rgb`, three 0-255 values), with a darker
    frame so that the image shows where it ends."""
    import struct
    import zlib

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    dark = bytes(value // 2 for value in rgb)
    rows = []
    for y in range(height):
        edge = y < 4 or y >= height - 4
        rows.append(b"\0" + b"".join(dark if edge or x < 4 or x >= width - 4 else bytes(rgb) for x in range(width)))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    return PNG + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"".join(rows))) + chunk(b"IEND", b"")
