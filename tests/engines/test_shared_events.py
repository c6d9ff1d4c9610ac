"""The shared backend's change events on real PostgreSQL (service.storage.shared.events): seqs 1..N without a gap
under writers in several processes, each event matching its history entry; pruning by the database's clock that keeps
a run of seqs and the latest seq; the schema upgrade of an existing database; and the watcher: asleep on its own
LISTEN connection until any node commits, listening again after its connection is cut, polling the counters while it
cannot listen (a full server), and waking streams again after a database outage."""
import multiprocessing
import time
from collections import Counter

import psycopg
import pytest

from service.domain.events import list_events
from service.domain.stations import upsert_station
from service.errors import DatabaseUnavailable, EventsExpired
from service.storage.contract import AttemptOutcome, DeliveryState, DispatchRules, SubscriptionSettings
from service.storage.shared import SharedRepository
from service.storage.shared.database import Database
from service.storage.shared.documents import SharedDocumentStore
from service.storage.shared.events import CHANNEL, POLL_SECONDS, RELISTEN_SECONDS, ListeningWatcher, SharedEventStore
from service.storage.shared.schema import MIGRATIONS
from support.engines import PostgresServer
from support.old_schema import database_with_an_old_station

ORG = "default"
OLD = "2000-01-01T00:00:00.000Z"
# The schema version before the migration that made the events tables.
BEFORE_EVENTS = next(number for number, migration in enumerate(MIGRATIONS) if "CREATE TABLE events" in migration)


@pytest.fixture
def settings(shared_backend):
    return shared_backend.settings()


@pytest.fixture
def make_repo(tmp_path, settings):
    """`make_repo(**options)`: a SharedRepository on the test's stores (another node each time), closed after it."""
    made = []

    def make(url=None, **options):
        made.append(SharedRepository(tmp_path / f"node{len(made)}", url or settings["DATABASE_URL"],
                                     settings["S3_BUCKET"], settings["S3_PREFIX"], **options))
        return made[-1]

    yield make
    for repository in made:
        repository.close()


@pytest.fixture
def repo(make_repo):
    return make_repo()


def station(identifier, name):
    return {"id": identifier, "name": name}


def backdate(repo, seqs):
    """Make these events of the org old, as if written long before the retention."""
    with repo.database.transaction() as connection:
        connection.execute("UPDATE events SET timestamp = %s WHERE org = %s AND seq = ANY(%s)", (OLD, ORG, list(seqs)))


# -- writers in several processes -------------------------------------------------------------------------------------

def _write_many(url, worker, times, acknowledged):
    """Alternately update an object every worker writes and one of this worker's own, deleting its own every fifth
    time; report (id, revision, change) of each acknowledged change."""
    database = Database(url)
    store = SharedDocumentStore(database, SharedEventStore(database))
    own = f"own_{worker}"
    for number in range(times):
        if number % 5 == 4:
            acknowledged.put((own, store.delete(ORG, "stations", own), "DELETED"))
            continue
        identifier = "hot" if number % 2 else own
        saved = store.save(ORG, "stations", identifier, station(identifier, f"{worker}-{number}"))
        acknowledged.put((identifier, saved.document["revision"], "CREATED" if saved.created else "UPDATED"))
    database.close()


def test_writers_in_several_processes_get_seqs_1_to_n_each_matching_its_history_entry(repo, settings):
    processes, times = 4, 30
    context = multiprocessing.get_context("spawn")
    acknowledged = context.Queue()
    workers = [context.Process(target=_write_many, args=(settings["DATABASE_URL"], worker, times, acknowledged))
               for worker in range(processes)]
    for worker in workers:
        worker.start()
    changes = []
    while len(changes) < processes * times:
        # Meanwhile a reader sees seqs 1..n without a hole (a later seq never commits first), and each event's change.
        seen = repo.events.read(ORG, 0, 1000)
        assert [event.seq for event in seen] == list(range(1, len(seen) + 1))
        if seen:
            last = seen[-1]
            assert repo.documents.history(ORG, "stations", last.id, 1, last.revision + 1)[0].revision == last.revision
        changes.append(acknowledged.get(timeout=120))
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0

    events = repo.events.read(ORG, 0, 1000)
    assert [event.seq for event in events] == list(range(1, processes * times + 1))
    assert sorted((event.id, event.revision, event.change) for event in events) == sorted(changes)
    for event in events:
        [entry] = [entry for entry in repo.documents.history(ORG, "stations", event.id, 1, event.revision + 1)]
        assert (entry.revision, entry.saved_at, entry.change) == (event.revision, event.timestamp, event.change)
        document = repo.documents.revision(ORG, "stations", event.id, event.revision)
        assert event.name == (document["name"] if document else None)
    for identifier in {event.id for event in events}:  # an object's events are its revisions, in commit order
        revisions = [event.revision for event in events if event.id == identifier]
        assert revisions == list(range(1, len(revisions) + 1))
    assert repo.events.bounds(ORG) == (1, processes * times)


# -- pruning ----------------------------------------------------------------------------------------------------------

def test_pruning_goes_by_the_database_clock_and_keeps_a_run_of_seqs_and_the_latest(make_repo):
    repo = make_repo(events_retention_seconds=3600)
    for number in range(25):
        upsert_station(repo, ORG, station("st_1", f"Press {number}"))
    upsert_station(repo, "other", station("st_1", "Elsewhere"))
    assert repo.events.prune() == 0  # nothing is an hour old
    # Seq 20 began after seq 21 (its timestamp is newer) but committed first: it goes with 21, leaving no hole.
    backdate(repo, [*range(1, 20), 21])
    repo.sweep()  # which prunes
    assert repo.events.bounds(ORG) == (22, 25) and repo.events.bounds("other") == (1, 1)
    with pytest.raises(EventsExpired) as expired:
        list_events(repo, ORG, after=5)
    assert expired.value.extensions == {"oldest": 22}
    assert [event.seq for event in list_events(repo, ORG, after=21)] == [22, 23, 24, 25]

    backdate(repo, range(22, 26))
    assert repo.events.prune() == 4
    assert repo.events.bounds(ORG) == (26, 25)  # none kept; the latest is still known
    assert list_events(repo, ORG, after=25) == []
    upsert_station(repo, ORG, station("st_1", "Press again"))
    assert [event.seq for event in repo.events.read(ORG, 0, 10)] == [26]


def test_pruning_keeps_what_a_webhook_subscription_may_still_send_and_its_log_goes_with_the_events(make_repo):
    repo = make_repo(events_retention_seconds=3600)
    upsert_station(repo, ORG, station("st_1", "Press 0"))
    repo.webhooks.subscribe(ORG, SubscriptionSettings("mes", "https://93.184.216.34/", {}, None, None, None),
                            "whsec_" + "A" * 43 + "=", 86400, 100)
    for number in range(1, 6):
        upsert_station(repo, ORG, station("st_1", f"Press {number}"))
    backdate(repo, range(1, 7))
    repo.sweep()
    assert repo.events.bounds(ORG) == (2, 6)  # seq 1 came before the subscription; 2-6 are owed to it
    rules = DispatchRules(lambda types: None, 60)
    claim = repo.webhooks.claim(1, rules)[0]
    for _ in range(3):  # 2, 3, 4 delivered; 5 retrying
        claim = repo.webhooks.finish(claim, AttemptOutcome(DeliveryState.SUCCEEDED, 204, None), rules)
    repo.webhooks.finish(claim, AttemptOutcome(DeliveryState.PENDING, 500, "HTTP 500", retry_in=60), rules,
                         claim_next=False)
    repo.sweep()
    assert repo.events.bounds(ORG) == (5, 6)  # the retrying delivery's event and what follows it
    assert [delivery.seq for delivery in repo.webhooks.deliveries(ORG, "mes", 10, None)] == [6, 5]


def test_with_every_event_kept_nothing_is_pruned(make_repo):
    repo = make_repo(events_retention_seconds=0)
    upsert_station(repo, ORG, station("st_1", "Press"))
    backdate(repo, [1])
    assert repo.events.prune() == 0 and repo.events.bounds(ORG) == (1, 1)


# -- the schema -----------------------------------------------------------------------------------------------------

def test_a_database_of_the_version_before_events_upgrades_and_numbers_changes_from_1(postgres, make_repo):
    url = postgres.new_database()
    database_with_an_old_station(url, BEFORE_EVENTS)
    assert Database(url).upgrade() == (BEFORE_EVENTS, len(MIGRATIONS))
    repo = make_repo(url)
    assert repo.events.bounds(ORG) == (1, 0)
    upsert_station(repo, ORG, station("st_1", "B"))
    assert [(event.seq, event.revision, event.change) for event in repo.events.read(ORG, 0, 10)] == [(1, 4, "UPDATED")]


# -- the watcher ------------------------------------------------------------------------------------------------------

class CountingDatabase:
    """A Database whose use by a watcher is counted: connections of its own ("connect"), waits for notifications
    ("notifies") and pooled transactions ("poll"). With `refuse`, its own connections are refused as by a full
    server."""

    def __init__(self, database):
        self.database = database
        self.counts = Counter()
        self.refuse = False

    def listening_connection(self):
        self.counts["connect"] += 1
        if self.refuse:
            raise psycopg.OperationalError("sorry, too many clients already")
        return CountingConnection(self.database.listening_connection(), self.counts)

    def transaction(self):
        self.counts["poll"] += 1
        return self.database.transaction()


class CountingConnection:
    def __init__(self, connection, counts):
        self.connection, self.counts = connection, counts

    def execute(self, *args, **kwargs):
        return self.connection.execute(*args, **kwargs)

    def notifies(self, **kwargs):
        self.counts["notifies"] += 1
        return self.connection.notifies(**kwargs)

    def close(self):
        self.connection.close()


@pytest.fixture
def counting(repo):
    return CountingDatabase(repo.database)


def test_a_watcher_sleeps_on_its_own_connection_until_any_node_commits(counting, make_repo):
    watcher = ListeningWatcher(counting)
    try:
        assert watcher.wait(1.0) is False
        # Asleep: one wait for a notification on one connection of its own, no poll.
        assert counting.counts == {"connect": 1, "notifies": 1}
        upsert_station(make_repo(), ORG, station("st_1", "From another node"))
        assert watcher.wait(5) is True
        assert counting.counts["connect"] == 1 and counting.counts["poll"] == 0
    finally:
        watcher.close()


def test_a_watcher_whose_connection_is_cut_listens_again_and_says_commits_may_have_been_missed(repo, counting):
    watcher = ListeningWatcher(counting)
    try:
        with repo.database.transaction() as connection:
            channel = connection.execute(f"SELECT {CHANNEL}").fetchone()[0]
            cut = connection.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = %s",
                                     (f'LISTEN "{channel}"',)).fetchall()
        assert cut == [(True,)]
        assert watcher.wait(5) is True
        upsert_station(repo, ORG, station("st_1", "Press"))
        assert watcher.wait(5) is True
        assert counting.counts["connect"] == 2 and counting.counts["poll"] == 0
    finally:
        watcher.close()


def test_a_watcher_that_cannot_listen_polls_the_counters_then_listens_when_it_can(repo, counting):
    counting.refuse = True
    watcher = ListeningWatcher(counting)
    try:
        assert watcher.wait(0.2) is False
        upsert_station(repo, ORG, station("st_1", "Press"))
        assert watcher.wait(5) is True
        counting.counts.clear()
        assert watcher.wait(2.0) is False
        # Bounded work meanwhile: a connection tried every RELISTEN_SECONDS, the counters read every POLL_SECONDS.
        assert counting.counts["connect"] <= 2.0 / RELISTEN_SECONDS + 1
        assert counting.counts["poll"] <= 2.0 / POLL_SECONDS + 1

        counting.refuse = False
        assert watcher.wait(5) is True  # listening again
        counting.counts.clear()
        assert watcher.wait(0.5) is False
        assert counting.counts == {"notifies": 1}
        upsert_station(repo, ORG, station("st_1", "Press 2"))
        assert watcher.wait(5) is True
    finally:
        watcher.close()


def test_deployments_in_two_schemas_of_one_database_do_not_wake_each_other(repo, make_repo, shared_backend):
    stranger = make_repo(shared_backend.settings()["DATABASE_URL"])
    watcher = repo.events.watcher()
    try:
        upsert_station(stranger, ORG, station("st_1", "Elsewhere"))
        assert watcher.wait(0.5) is False
        upsert_station(repo, ORG, station("st_1", "Here"))
        assert watcher.wait(5) is True
    finally:
        watcher.close()


@pytest.fixture
def own_postgres(postgres):
    """A PostgreSQL for this test alone, which it stops (after the session's `postgres`, which marks the tier)."""
    server = PostgresServer(max_connections=20)
    yield server
    server.remove()


def write_when_back(repo, attempts=50):
    """A change, once this process finds the database back (its circuit looks every second)."""
    for _ in range(attempts):
        try:
            return upsert_station(repo, ORG, station("st_1", "After the outage"))
        except DatabaseUnavailable:
            time.sleep(0.2)
    raise AssertionError("the database did not come back for this process")


def test_a_watcher_wakes_again_after_a_database_outage(own_postgres, make_repo):
    url = own_postgres.new_database()
    Database(url).upgrade()
    repo = make_repo(url)
    counting = CountingDatabase(repo.database)
    watcher = ListeningWatcher(counting)
    try:
        own_postgres.stop()
        counting.counts.clear()
        assert watcher.wait(3.0) is False
        assert counting.counts["connect"] <= 3.0 / RELISTEN_SECONDS + 2  # no busy retrying while it is down
        own_postgres.start()
        assert watcher.wait(10) is True  # listening again: what committed meanwhile may have been missed
        write_when_back(repo)
        assert watcher.wait(5) is True
    finally:
        watcher.close()
