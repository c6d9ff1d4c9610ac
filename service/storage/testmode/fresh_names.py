"""Where the names the server makes up come from: upload stream ids and media name prefixes.

Random by default. With a test seed (WIS_TEST_SEED, test mode only) each name is a pure function of the seed and of
how many names were made before it since the state was emptied (a counter every worker, and on the shared backend
every node, shares through the repository), so two runs of the same requests get the same names (CONTRACT 12). The
names keep their shape: `nbytes` bytes written as lower-case hex.
"""
import hashlib
import secrets

random_hex = secrets.token_hex


class SeededHex:
    """`new_hex(nbytes)` made reproducible: the n-th name since the counter was reset is hash(seed, n)."""

    def __init__(self, seed, counter):
        self.seed = seed
        self.counter = counter

    def __call__(self, nbytes):
        number = self.counter.next()
        return hashlib.blake2b(f"{self.seed}:{number}".encode(), digest_size=nbytes, person=b"wis-names").hexdigest()


def name_source(seed, counter):
    """The `new_hex(nbytes)` of a repository: seeded when a test seed is set, else random."""
    return random_hex if seed is None else SeededHex(seed, counter)
