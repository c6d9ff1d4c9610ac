"""The history page of an object and the search by name of the list pages, over HTTP (the Flask test client, both
backends). The browser test (test_pages_browser.py) opens the history page in Chromium."""
import html
import re
from pathlib import Path

import orjson
import pytest

from service.storage import get_repository
from service.storage.common.encoding import NAME_HEAD_SIZE
from support.tokens import OTHER_TOKEN, TOKEN_NAME, WRITE_HEADERS, WRITE_TOKEN_NAME
from test_pages_http import create_stations, listed, log_in, next_link, seed_example, text_of

PROCESS = "gearbox_assembly"


def gql(client, auth, query, **variables):
    answer = client.post("/graph/v2", headers=auth, json={"query": query, "variables": variables}).get_json()
    assert "errors" not in answer, answer
    return answer["data"]


def stored_input(client, auth, identifier=PROCESS):
    return gql(client, auth, "query($id: String!) { process(id: $id) { input } }", id=identifier)["process"]["input"]


def save_process(client, auth, process):
    return gql(client, auth, "mutation($p: ProcessInput!) { processCreate(input: {process: $p}) }",
               p=process)["processCreate"]


def with_max_torque(process, newton_metres):
    """The example process with the measurement of `fit_bolts` (step 1) changed."""
    process["steps"][0]["actions"][1]["measurement"]["max"] = newton_metres
    return process


def revisions_listed(response):
    """[(revision, change)] of the page's table of revisions, in the page's order."""
    rows = re.findall(r'<tr>\s*<td class="num">(\d+)</td>\s*<td>(\w+)</td>', response.get_data(as_text=True))
    return [(int(number), change) for number, change in rows]


def changes_listed(response):
    """The page's changes in words, each id shown as code written back in backticks as the words name it."""
    found = re.search(r'<ul class="changes">(.*?)</ul>', response.get_data(as_text=True), re.S)
    items = re.findall(r"<li>(.*?)</li>", found.group(1)) if found else []
    return [html.unescape(re.sub(r"</?code>", "`", item)) for item in items]


def selected(response, name):
    """(the options, the selected option) of the select named `name`."""
    found = re.search(r'<select id="%s" name="%s">(.*?)</select>' % (name, name), response.get_data(as_text=True))
    options = re.findall(r'<option value="(\d+)"( selected)?>', found.group(1))
    return [int(value) for value, _ in options], [int(value) for value, chosen in options if chosen]


@pytest.fixture
def changed(client, auth):
    """The docs' example, then its assembly process with the torque limit raised (revision 2)."""
    seed_example(client, auth)
    assert save_process(client, auth, with_max_torque(stored_input(client, auth), 24)) == "UPDATED"
    log_in(client)


WORDS = "step 1 `step_housing`: action `fit_bolts`: measurement max 22 -> 24 Nm"


def test_the_process_page_links_to_its_history_which_says_what_changed_last(client, auth, changed):
    page = client.get(f"/view/processes/{PROCESS}").get_data(as_text=True)
    assert f'<a href="/view/processes/{PROCESS}/history">History</a>' in page
    response = client.get(f"/view/processes/{PROCESS}/history")
    assert response.status_code == 200
    assert revisions_listed(response) == [(2, "updated"), (1, "created")]
    assert selected(response, "from") == ([2, 1], [1]) and selected(response, "to") == ([2, 1], [2])
    assert changes_listed(response) == [WORDS]
    assert "<code>step_housing</code>: action <code>fit_bolts</code>" in response.get_data(as_text=True)
    assert "From revision 1 to revision 2:" in text_of(response)


def test_any_two_revisions_are_compared_either_way(client, auth, changed):
    save_process(client, auth, with_max_torque(stored_input(client, auth), 26))
    assert changes_listed(client.get(f"/view/processes/{PROCESS}/history?from=1&to=3")) == [
        WORDS.replace("-> 24", "-> 26")]
    assert changes_listed(client.get(f"/view/processes/{PROCESS}/history?from=3&to=2")) == [
        WORDS.replace("22 -> 24", "26 -> 24")]
    same = client.get(f"/view/processes/{PROCESS}/history?from=2&to=2")
    assert changes_listed(same) == [] and "Nothing changed between these revisions." in text_of(same)
    # Each revision links to what changed since the one before it.
    links = re.findall(r'href="([^"]*history\?[^"]*)">since revision (\d+)',
                       client.get(f"/view/processes/{PROCESS}/history").get_data(as_text=True))
    assert [(html.unescape(link), int(number)) for link, number in links] == [
        (f"/view/processes/{PROCESS}/history?from=2&to=3", 2), (f"/view/processes/{PROCESS}/history?from=1&to=2", 1)]


def test_a_deleted_process_keeps_its_history_page(client, auth, changed):
    gql(client, auth, 'mutation { productDelete(id: "gb_200") }')
    gql(client, auth, f'mutation {{ processDelete(id: "{PROCESS}") }}')
    gone = client.get(f"/view/processes/{PROCESS}")
    assert gone.status_code == 404
    assert f"The process \u201c{PROCESS}\u201d was deleted." in text_of(gone)
    assert f'<a href="/view/processes/{PROCESS}/history">Its history</a>' in gone.get_data(as_text=True)
    response = client.get(f"/view/processes/{PROCESS}/history")
    assert response.status_code == 200
    assert revisions_listed(response) == [(3, "deleted"), (2, "updated"), (1, "created")]
    assert "deleted at revision 3" in text_of(response)
    # A deletion has no content: the last two revisions that have one are compared, and only they are choices.
    assert selected(response, "to") == ([2, 1], [2]) and changes_listed(response) == [WORDS]
    gql(client, auth, f'mutation {{ processRestore(id: "{PROCESS}", revision: 1) }}')
    restored = client.get(f"/view/processes/{PROCESS}/history")
    assert revisions_listed(restored)[0] == (4, "restored")
    assert changes_listed(restored) == [WORDS.replace("22 -> 24", "24 -> 22")]


def test_products_and_stations_have_history_pages_too(client, auth, changed):
    product = gql(client, auth, '{ product(id: "gb_200") { input } }')["product"]["input"]
    product["name"] = "GB-200 gearbox, second edition"
    gql(client, auth, "mutation($p: ProductInput!) { productCreate(input: {product: $p}) }", p=product)
    assert '/view/products/gb_200/history">History</a>' in client.get("/view/products/gb_200").get_data(as_text=True)
    assert changes_listed(client.get("/view/products/gb_200/history")) == [
        "name \u201cGB-200 gearbox\u201d -> \u201cGB-200 gearbox, second edition\u201d"]
    gql(client, auth, 'mutation { stationCreate(input: {station: {id: "st_1", name: "Press 2"}}) }')
    assert 'href="/view/stations/st_1/history"' in client.get("/view/stations").get_data(as_text=True)
    assert changes_listed(client.get("/view/stations/st_1/history")) == ["name \u201cPress 1\u201d -> \u201cPress 2\u201d"]


def test_one_revision_has_nothing_to_compare(client, auth):
    seed_example(client, auth)
    log_in(client)
    response = client.get("/view/stations/st_1/history")
    assert response.status_code == 200 and revisions_listed(response) == [(1, "created")]
    assert "nothing to compare yet" in text_of(response) and "<select" not in response.get_data(as_text=True)


def test_the_history_is_paged_by_100_newest_first(make_app, auth):
    client = make_app(HISTORY_REVISIONS=0).test_client()
    for number in range(150):
        gql(client, auth, "mutation($s: StationInput!) { stationCreate(input: {station: $s}) }",
            s={"id": "st_1", "name": f"Press {number}"})
    log_in(client)
    first = client.get("/view/stations/st_1/history")
    assert [number for number, _ in revisions_listed(first)] == list(range(150, 50, -1))
    assert next_link(first) == "/view/stations/st_1/history?after=51"
    second = client.get(next_link(first))
    assert [number for number, _ in revisions_listed(second)] == list(range(50, 0, -1)) and next_link(second) is None
    # The page of older revisions still compares the newest two by default, and offers its own revisions.
    assert selected(second, "to")[1] == [150] and selected(second, "from")[1] == [149]
    assert "Newest revisions" in text_of(second)


@pytest.mark.parametrize("query, said", [
    ("from=abc&to=2", "\u201cfrom\u201d must be a revision number, such as 3; got \u201cabc\u201d."),
    ("from=1&to=-2", "\u201cto\u201d must be a revision number, such as 3; got \u201c-2\u201d."),
    ("from=1&to=1.5", "got \u201c1.5\u201d"),
    ("from=%EF%BC%91&to=2", "got \u201c\uff11\u201d"),  # a full-width digit, which int() would take
    ("from=1&to=" + "9" * 5000, "got \u201c" + "9" * 39 + "\u2026\u201d"),
    ("after=x", "\u201cafter\u201d must be a revision number"),
    ("from=1&to=7", "Revision 7 of this process is not in its history"),
    ("from=0&to=2", "Revision 0 of this process is not in its history"),
    ("from=999999999999999&to=2", "Revision 999999999999999 of this process is not in its history"),
])
def test_bad_revisions_are_a_page_saying_so(client, auth, changed, query, said):
    response = client.get(f"/view/processes/{PROCESS}/history?{query}")
    assert response.status_code == 400
    assert said in text_of(response) and response.headers["Content-Type"].startswith("text/html")
    assert revisions_listed(response) == [(2, "updated"), (1, "created")] and changes_listed(response) == []


def test_a_deletion_and_a_pruned_revision_cannot_be_compared(make_app, auth):
    client = make_app(HISTORY_REVISIONS=2).test_client()
    for name in ("A", "B", "C"):
        gql(client, auth, "mutation($s: StationInput!) { stationCreate(input: {station: $s}) }",
            s={"id": "st_1", "name": name})
    gql(client, auth, 'mutation { stationDelete(id: "st_1") }')
    log_in(client)
    for query in ("from=1&to=3", "from=4&to=3"):
        response = client.get(f"/view/stations/st_1/history?{query}")
        assert response.status_code == 400 and "is not in its history" in text_of(response)
    assert revisions_listed(client.get("/view/stations/st_1/history")) == [(4, "deleted"), (3, "updated")]


@pytest.mark.parametrize("deleted", [False, True])
@pytest.mark.parametrize("query, number", [("to=999", 999), ("from=999", 999), ("to=2", 2), ("from=2&to=1", 2)])
def test_a_lone_revision_is_compared_with_no_revision_the_history_does_not_hold(client, auth, deleted, query, number):
    """With one revision with content there is no default `from`: a `to` alone is checked all the same."""
    gql(client, auth, 'mutation { stationCreate(input: {station: {id: "lone_st", name: "Lone"}}) }')
    if deleted:
        gql(client, auth, 'mutation { stationDelete(id: "lone_st") }')  # revision 2, a deletion
    log_in(client)
    response = client.get(f"/view/stations/lone_st/history?{query}")
    assert response.status_code == 400, query
    assert f"Revision {number} of this station is not in its history" in text_of(response)
    assert "nothing to compare yet" not in text_of(response) and "<select" not in response.get_data(as_text=True)
    assert changes_listed(response) == []


def test_an_unknown_id_or_another_orgs_object_has_no_history_page(client, auth, changed):
    for path in ("/view/processes/nothing_here/history", "/view/processes/bad%20id!/history",
                 "/view/products/gearbox_assembly/history", "/view/parts/gb_200/history"):
        response = client.get(path)
        assert response.status_code == 404 and "Not found" in text_of(response)
    assert "Your org has no process with the id \u201cnothing_here\u201d" in text_of(
        client.get("/view/processes/nothing_here/history"))
    never = client.get("/view/processes/nothing_here")
    assert never.status_code == 404 and "Its history" not in text_of(never)
    client.post("/view/logout")
    log_in(client, token=OTHER_TOKEN)
    assert client.get(f"/view/processes/{PROCESS}/history").status_code == 404


def test_the_history_page_needs_a_session(client, auth, changed):
    client.post("/view/logout")
    response = client.get(f"/view/processes/{PROCESS}/history")
    assert response.status_code == 302 and response.headers["Location"].startswith("/view/login?next=")


# -- search by name ---------------------------------------------------------------------------------------------------

def test_the_search_matches_names_as_well_as_ids(client, auth):
    create_stations(client, auth, 250)
    log_in(client)
    found = client.get("/view/stations?q=station 12")  # names "Station 12" and "Station 120" to "Station 129"
    assert listed(found) == ["st_012"] + [f"st_{i}" for i in range(120, 130)]
    assert listed(client.get("/view/stations?q=ST_01")) == [f"st_{i:03}" for i in range(10, 20)]  # ids only
    gql(client, auth, 'mutation { stationCreate(input: {station: {id: "st_120", name: "Renamed"}}) }')
    assert listed(client.get("/view/stations?q=station 12")) == ["st_012"] + [f"st_{i}" for i in range(121, 130)]
    assert "No stations with an id or name containing" in text_of(client.get("/view/stations?q=zzz"))


def test_the_search_ignores_case_as_casefold_does(client, auth):
    gql(client, auth, 'mutation { stationCreate(input: {station: {id: "st_street", name: "Straße 5 PRESS"}}) }')
    log_in(client)
    for search in ("STRASSE", "strasse 5 press", "ße"):
        assert listed_ids(client.get("/view/stations", query_string={"q": search})) == ["st_street"]


def listed_ids(response):
    return listed(response)


@pytest.mark.parametrize("name", [
    "\x00\x01\x1f" * 331 + "needle!",             # the longest name, each character but the last 7 written as 6 bytes
    'a "quoted" \\ back\\slash needle',
    "\u00e9\u4e2d\U0001F600 needle",
])
def test_the_search_finds_any_name_however_it_is_written(client, auth, name):
    gql(client, auth, "mutation($s: StationInput!) { stationCreate(input: {station: $s}) }",
        s={"id": "st_odd", "name": name})
    log_in(client)
    assert listed_ids(client.get("/view/stations?q=NEEDLE")) == ["st_odd"]


def test_the_search_finds_names_of_documents_whose_fields_are_in_another_order(app, client, auth):
    # A document of an earlier version, or one written by a path that keeps another order: read whole.
    documents = get_repository(app).documents
    documents.save("default", "stations", "st_old", {"name": "Old needle", "id": "st_old"})
    gql(client, auth, 'mutation { stationCreate(input: {station: {id: "st_new", name: "New needle"}}) }')
    log_in(client)
    assert listed_ids(client.get("/view/stations?q=needle")) == ["st_new", "st_old"]
    assert documents.names("default", "stations") == [("st_new", "New needle"), ("st_old", "Old needle")]


def test_the_search_pages_and_filters_products_and_processes_by_name(client, auth):
    seed_example(client, auth)
    log_in(client)
    assert re.findall(r'<a href="/view/processes/(\w+)">', client.get("/view/processes?q=TEST").get_data(
        as_text=True)) == ["gearbox_test"]
    assert "gb_200" in client.get("/view/products?q=gearbox").get_data(as_text=True)


@pytest.mark.file_backend_only(reason="reads the start of the document files")
def test_the_search_reads_only_the_start_of_each_document(app, client, auth):
    seed_example(client, auth)
    # Whatever order a client sends the fields in, the stored document starts with the id and the name.
    gql(client, auth, "mutation($s: StationInput!) { stationCreate(input: {station: $s}) }",
        s={"name": "Sent name first", "id": "st_2"})
    documents = get_repository(app).documents
    data = Path(app.config["DATA_DIR"]) / "orgs" / "default"
    for path in (data / "processes" / "gearbox_test.json", data / "stations" / "st_2.json"):
        with open(path, "r+b") as handle:  # past the start that holds the name, the document is not read
            handle.seek(NAME_HEAD_SIZE)
            handle.write(b"not JSON" * 1000)
    with pytest.raises(orjson.JSONDecodeError):
        documents.get("default", "processes", "gearbox_test")
    assert documents.names("default", "processes") == [
        ("gearbox_assembly", "Gearbox assembly"), ("gearbox_test", "Gearbox end-of-line test")]
    assert documents.names("default", "stations") == [("st_1", "Press 1"), ("st_2", "Sent name first")]


# -- the same words through the API ------------------------------------------------------------------------------------

def api_changes(client, auth, kind, identifier, old, new):
    answer = client.post("/graph/v2", headers=auth, json={
        "query": f"query($id: String!, $f: Int!, $t: Int!) {{ {kind}Changes(id: $id, from: $f, to: $t) }}",
        "variables": {"id": identifier, "f": old, "t": new}}).get_json()
    return answer


def test_an_appended_sentence_is_what_the_page_shows_changed(client, auth, changed):
    process = stored_input(client, auth)
    text = process["steps"][0]["instructionText"]["text"] + " Make sure the flange sits flat on all four pads."
    process["steps"][0]["instructionText"]["text"] = text
    save_process(client, auth, process)
    [line] = changes_listed(client.get(f"/view/processes/{PROCESS}/history"))
    assert line == ("step 1 `step_housing`: instruction text \u201c\u2026fixture, flange up.\u201d -> "
                    "\u201c\u2026fixture, flange up. Make sure the flange sits flat on all four pads.\u201d")


def test_the_api_says_the_changes_in_the_words_of_the_page(client, auth, changed):
    gql(client, auth, 'mutation { stationCreate(input: {station: {id: "st_1", name: "Press 2"}}) }')
    product = gql(client, auth, '{ product(id: "gb_200") { input } }')["product"]["input"]
    product["dependencies"][0]["quantity"] = 3
    gql(client, auth, "mutation($p: ProductInput!) { productCreate(input: {product: $p}) }", p=product)
    for kind, kinds, identifier in (("process", "processes", PROCESS), ("product", "products", "gb_200"),
                                    ("station", "stations", "st_1")):
        for old, new in ((1, 2), (2, 1)):
            page = changes_listed(client.get(f"/view/{kinds}/{identifier}/history?from={old}&to={new}"))
            assert page, (kind, old, new)
            assert api_changes(client, auth, kind, identifier, old, new) == {"data": {f"{kind}Changes": page}}
    assert api_changes(client, auth, "process", PROCESS, 2, 2) == {"data": {"processChanges": []}}


def test_the_api_refuses_revisions_without_content_naming_them(client, auth, changed):
    gql(client, auth, 'mutation { stationDelete(id: "st_1") }')
    for identifier, old, new, missing in ((PROCESS, 1, 9, 9), (PROCESS, 0, 2, 0), ("st_1", 2, 1, 2),
                                          ("nobody", 1, 2, 1), ("not an id", 1, 1, 1)):
        answer = api_changes(client, auth, "station" if identifier == "st_1" else "process", identifier, old, new)
        [error] = answer["errors"]
        assert answer["data"] is None
        assert error["extensions"]["code"] == "NOT_FOUND"
        assert f"has no revision {missing} to compare" in error["message"]


def test_the_history_shows_who_made_each_revision_and_why_in_the_list_and_the_comparison(client, auth):
    """CONTRACT 16: each row names its author (the token's name) and its comment; the comparison says the same of the
    two revisions it compares. Comments are text: markup in one is shown, never run."""
    station = "mutation($s: StationInput!, $c: String) { stationCreate(input: {station: $s}, comment: $c) }"
    gql(client, auth, station, s={"id": "st_who", "name": "A"})
    gql(client, WRITE_HEADERS, station, s={"id": "st_who", "name": "B"}, c="<b>renamed</b> after the audit")
    log_in(client)
    response = client.get("/view/stations/st_who/history")
    rows = re.findall(r'<tr>\s*<td class="num">(\d+)</td>.*?<td>(?:<code>(.*?)</code>|<span class="empty">(.*?)</span>)'
                      r'</td>\s*<td class="comment">(.*?)</td>', response.get_data(as_text=True), re.S)
    assert rows == [("2", WRITE_TOKEN_NAME, "", "&lt;b&gt;renamed&lt;/b&gt; after the audit"),
                    ("1", TOKEN_NAME, "", "")]
    assert "From revision 1 to revision 2: Revision 1 by env-1 Revision 2 by env-4 : \u201c<b>renamed</b> after the " \
           "audit\u201d name" in text_of(response)
