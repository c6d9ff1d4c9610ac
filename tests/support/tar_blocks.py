"""Raw tar blocks of hostile headers, and tar streams with something after their end, which tarfile's writer would not
make, for the archive readers' tests."""
import gzip
import io
import tarfile

MB = 1024 * 1024


def pax_chain(count):
    """The tar blocks of `count` pax headers in a row (what tarfile read recursively, one stack frame each)."""
    record = b"20 comment=aaaaaaaa\n"
    info = tarfile.TarInfo("././@PaxHeader")
    info.type, info.size = tarfile.XHDTYPE, len(record)
    return (info.tobuf(tarfile.USTAR_FORMAT) + record.ljust(512, b"\0")) * count


def long_name(size):
    """The tar blocks of a GNU long name of `size` bytes (tarfile read it whole)."""
    info = tarfile.TarInfo("././@LongLink")
    info.type, info.size = tarfile.GNUTYPE_LONGNAME, size
    return info.tobuf(tarfile.USTAR_FORMAT) + b"a" * size + b"\0" * (-size % 512)


def tar_end():
    """An empty manifest.json entry and the end of the archive."""
    return tarfile.TarInfo("manifest.json").tobuf(tarfile.USTAR_FORMAT) + b"\0" * 1024


def header(name, kind):
    """The tar block of one header of type `kind`, announcing no data."""
    info = tarfile.TarInfo(name)
    info.type = kind
    return info.tobuf(tarfile.GNU_FORMAT)


def end_of_tar(raw):
    """The offset of the block that ends the tar `raw` (tarfile's archive: after its last entry's data)."""
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        last = tar.getmembers()[-1]
    return last.offset_data + -(-last.size // 512) * 512


def with_tail(archive, change=lambda raw: raw, zeros=0):
    """The .tar.gz `archive` gzipped again (level 9) as change(its tar) makes it, followed by `zeros` zero bytes: a gzip
    bomb when they are many (written a MB at a time, so that a test holds none of it; 64 MB of zeros are 65 KB)."""
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=9) as zipped:
        zipped.write(change(gzip.decompress(archive)))
        for start in range(0, zeros, MB):
            zipped.write(bytes(min(MB, zeros - start)))
    return buffer.getvalue()
