"""Raw tar blocks of hostile headers, which tarfile's writer would not make, for the archive readers' tests."""
import tarfile


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
