"""The resumable SHA-256 of streams (service/storage/common/sha256_state.py): OpenSSL's, saving and resuming exactly as
rehashes' PySha256 does, so tus records, boundary records and shared-backend rows written before stay readable, and
every digest equals hashlib's."""
import hashlib
import os
import random

import pytest
from rehashes import PySha256

from service.storage.common.sha256_state import OpenSslSha256, Sha256State

DATA = os.urandom(300_000)


def test_openssl_does_the_hashing_where_python_is_linked_with_openssl_3():
    # What the upload throughput figures rely on (the GIL is free while it hashes); CPython 3.11+ on Debian is.
    assert Sha256State is OpenSslSha256


@pytest.mark.parametrize("seed", range(8))
def test_any_split_resumed_through_saved_states_gives_hashlibs_digest(seed):
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(DATA)), 6))
    state = Sha256State().serialize()
    for start, end in zip([0, *cuts], [*cuts, len(DATA)]):
        hasher = Sha256State.deserialize(state)
        hasher.update(DATA[start:end])
        state = hasher.serialize()
    assert Sha256State.deserialize(state).finalize() == hashlib.sha256(DATA).hexdigest()


@pytest.mark.parametrize("length", [0, 1, 55, 56, 63, 64, 65, 127, 128, 4097, 100_003])
def test_saved_states_are_pysha256s_both_ways(length):
    ours, theirs = Sha256State(), PySha256()
    ours.update(DATA[:length])
    theirs.update(DATA[:length])
    assert ours.serialize() == theirs.serialize()
    # A state saved by the code before (PySha256) goes on here, and the reverse.
    resumed_here, resumed_there = Sha256State.deserialize(theirs.serialize()), PySha256.deserialize(ours.serialize())
    resumed_here.update(DATA[length:])
    resumed_there.update(DATA[length:])
    assert resumed_here.finalize() == resumed_there.finalize() == hashlib.sha256(DATA).hexdigest()


def test_bytes_bytearrays_and_memoryviews_hash_alike():
    expected = hashlib.sha256(DATA[:1000] * 4).hexdigest()
    hasher = Sha256State()
    hasher.update(DATA[:1000])
    hasher.update(bytearray(DATA[:1000]))
    hasher.update(memoryview(bytearray(DATA[:1000])))
    hasher.update(memoryview(DATA[:1000]))  # read-only
    assert hasher.finalize() == expected


def test_finalize_does_not_end_the_hashing():
    hasher = Sha256State()
    hasher.update(DATA[:10])
    assert hasher.finalize() == hashlib.sha256(DATA[:10]).hexdigest()
    hasher.update(DATA[10:20])
    assert hasher.finalize() == hashlib.sha256(DATA[:20]).hexdigest()


@pytest.mark.parametrize("state", [b"", bytes(103), bytes(105), bytes(40) + b"\x40" + bytes(63)])
def test_a_state_that_is_not_one_is_refused(state):
    with pytest.raises(ValueError):
        Sha256State.deserialize(state)
