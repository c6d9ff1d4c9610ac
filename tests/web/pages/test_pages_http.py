"""The preview pages over HTTP (the Flask test client, both backends): sessions and their cookie, what each page
shows, errors as pages, the media paths' cookie, and what the cookie does not open. The browser tests
(test_pages_browser.py) show the same pages in Chromium."""
import base64
import html
import json
import os
import re
import stat
import time
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from itsdangerous import TimestampSigner, URLSafeTimedSerializer

from service.config import load_config
from service.errors import ConfigurationError
from service.interface import FORM_FIELD_LIMIT
from service.web.sessions import COOKIE_NAME, SALT
from service.storage import open_repository
from service.storage.common.data_dir_secrets import SECRET_KEY_FILE
from support.documents import upsert_process
from support.example import CLIP, IMAGE, example_bodies, example_processes
from support.tokens import OTHER_TOKEN, TOKEN, TOKENS
from support.uploads import uploaded_path

CSP = ("default-src 'none'; style-src 'self'; img-src 'self'; media-src 'self'; connect-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
PAGES = ["/", "/view/login", "/view/processes", "/view/processes/gearbox_assembly", "/view/processes/gearbox_test",
         "/view/products", "/view/products/gb_200", "/view/stations",
         "/view/processes/gearbox_assembly/history", "/view/products/gb_200/history", "/view/stations/st_1/history"]


def log_in(client, token=TOKEN, **form):
    return client.post("/view/login", data={"token": token, **form})


def session_cookie(client):
    cookie = client.get_cookie(COOKIE_NAME)
    return cookie.value if cookie else None


def text_of(response):
    """The page's text as one line: tags replaced by spaces, entities decoded, runs of white space made one space
    (none inside brackets)."""
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", response.get_data(as_text=True))).split())
    return text.replace("( ", "(").replace(" )", ")")


def seed_example(client, auth):
    """The docs' complete example with real media; returns (image path, video path)."""
    image = uploaded_path(client, auth, IMAGE, name="gearbox housing.png")
    video = uploaded_path(client, auth, CLIP.read_bytes(), destination="stepVideo", name="clip.mp4")
    for body in example_bodies(image, video):
        response = client.post("/graph/v2", headers=auth, json=body)
        assert "errors" not in response.get_json(), response.get_json()
    return image, video


@pytest.fixture
def example(client, auth):
    return seed_example(client, auth)


# -- signing in and out ------------------------------------------------------------------------------------------------

def test_a_page_without_a_session_sends_to_the_login_and_back(client, example):
    response = client.get("/view/processes/gearbox_assembly?x=1")
    assert response.status_code == 302
    assert response.headers["Location"] == "/view/login?next=/view/processes/gearbox_assembly?x%3D1"
    login_page = client.get(response.headers["Location"])
    assert 'name="token"' in login_page.get_data(as_text=True)
    assert 'value="/view/processes/gearbox_assembly?x=1"' in login_page.get_data(as_text=True)

    signed_in = log_in(client, next="/view/processes/gearbox_assembly?x=1")
    assert signed_in.status_code == 303 and signed_in.headers["Location"] == "/view/processes/gearbox_assembly?x=1"
    assert client.get("/view/processes/gearbox_assembly").status_code == 200


def test_the_session_cookie_is_httponly_samesite_strict_and_lasts_a_shift(client):
    response = log_in(client)
    [set_cookie] = response.headers.getlist("Set-Cookie")
    attributes = {part.strip().split("=")[0].lower() for part in set_cookie.split(";")[1:]}
    assert set_cookie.startswith(f"{COOKIE_NAME}=")
    assert {"httponly", "path", "max-age", "expires", "samesite"} <= attributes and "secure" not in attributes
    assert "SameSite=Strict" in set_cookie and "Path=/;" in set_cookie + ";" and "Max-Age=43200" in set_cookie


@pytest.mark.parametrize("overrides, base_url", [({}, "https://localhost"), ({"SECURE_COOKIES": True}, "http://localhost")])
def test_the_cookie_is_secure_over_https_or_when_the_setting_says_so(make_app, overrides, base_url):
    client = make_app(**overrides).test_client()
    response = client.post("/view/login", data={"token": TOKEN}, base_url=base_url)
    assert "; Secure" in response.headers["Set-Cookie"]


def test_the_session_lifetime_is_a_setting(make_app):
    client = make_app(SESSION_HOURS=1.5).test_client()
    assert "Max-Age=5400" in log_in(client).headers["Set-Cookie"]


def test_the_cookie_holds_the_org_and_a_fingerprint_never_the_token(client):
    log_in(client)
    value = session_cookie(client)
    data = cookie_payload(value)
    assert TOKEN not in value and TOKEN.encode() not in data and b'"org":"default"' in data and b'"fp":' in data


def test_a_wrong_token_shows_the_login_again_and_starts_nothing(client, example):
    response = log_in(client, token="not-a-token-of-anyone")
    assert response.status_code == 200
    assert "Set-Cookie" not in response.headers
    assert "That token is not valid" in text_of(response)
    assert "not-a-token-of-anyone" not in response.get_data(as_text=True)
    assert client.get("/view/processes").status_code == 302
    for token in ("", " ", "x" * 5000):
        refused = log_in(client, token=token)
        assert refused.status_code == 200 and "Set-Cookie" not in refused.headers


def test_logout_ends_the_session_and_leads_to_the_login(client, example):
    log_in(client)
    assert client.get("/view/processes").status_code == 200
    response = client.post("/view/logout")
    assert response.status_code == 303 and response.headers["Location"] == "/view/login"
    assert session_cookie(client) is None
    assert client.get("/view/processes").status_code == 302


@pytest.mark.parametrize("headers", [{"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"},
                                     {"Origin": "http://attacker.example"}, {"Origin": "null"}])
def test_a_login_posted_by_another_site_is_refused(client, headers):
    response = client.post("/view/login", data={"token": TOKEN}, headers=headers)
    assert response.status_code == 403 and "Set-Cookie" not in response.headers
    assert "own login page" in text_of(response)


@pytest.mark.parametrize("headers", [{"Sec-Fetch-Site": "same-origin", "Origin": "http://localhost"},
                                     {"Sec-Fetch-Site": "none"}, {"Origin": "http://localhost"}, {}])
def test_a_login_from_the_service_itself_or_from_a_script_starts_a_session(client, headers):
    assert client.post("/view/login", data={"token": TOKEN}, headers=headers).status_code == 303


@pytest.mark.parametrize("next_page", ["//attacker.example/x", "https://attacker.example/", "/\\attacker.example",
                                       "/graph/v2", "javascript:alert(1)", "/view/x\nSet-Cookie: a=b",
                                       # Dot segments a browser resolves out of /view/, plain or percent-encoded.
                                       "/view/../graph/v2", "/view/%2e%2e/api/v1/images/x", "/view/.%2E/graph/v2",
                                       "/view/./../graph/v2", "/view/processes/../../graph/v2", "/view/..",
                                       "/view/%2e%2e%2fgraph/v2", "/view/.", "/view/%5c..%5cgraph", "/view/%0a"])
def test_a_login_returns_only_to_a_page_of_the_service(client, next_page):
    assert log_in(client, next=next_page).headers["Location"] == "/view/processes"


@pytest.mark.parametrize("next_page", ["/", "/view", "/view/products?q=..%2F&after=a.b", "/view/processes/a..b",
                                       "/view/stations/st_1/history?from=1&to=2"])
def test_a_login_returns_to_any_plain_page_path(client, next_page):
    assert log_in(client, next=next_page).headers["Location"] == next_page


def test_a_login_form_over_its_limit_is_refused_and_starts_nothing(client):
    response = log_in(client, token="x" * FORM_FIELD_LIMIT)
    assert response.status_code == 413 and "Set-Cookie" not in response.headers


def multipart_form(fields):
    """(body, content type) of a multipart/form-data form of these (name, value) fields."""
    parts = [f'--b\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n' for name, value in fields]
    return ("".join(parts) + "--b--\r\n").encode(), "multipart/form-data; boundary=b"


def test_a_small_login_form_of_too_many_parts_is_refused_saying_so(client):
    """Werkzeug's limit of a multipart form's parts (Flask's MAX_FORM_PARTS, 1,000) is not the body's size: its answer
    says which limit it is. (Werkzeug counts no parts of a urlencoded form.)"""
    fields = [("token", TOKEN)] + [(f"f{number}", "x") for number in range(1000)]
    body, content_type = multipart_form(fields)
    assert len(body) < FORM_FIELD_LIMIT
    response = client.post("/view/login", data=body, content_type=content_type)
    assert response.status_code == 400 and "Set-Cookie" not in response.headers
    assert response.get_json() == {"error": "the form has more than 1000 parts (fields and files); at most 1000 are "
                                            "accepted"}
    # A form within the limit of parts signs in.
    body, content_type = multipart_form(fields[:1000])
    assert client.post("/view/login", data=body, content_type=content_type).status_code == 303


# -- sessions that no longer count ---------------------------------------------------------------------------------------

def signing_key(app):
    return app.extensions["sessions"].key()


def cookie_signed(app, payload, seconds_ago=0, key=None):
    """A cookie made as the service makes them, with `payload`, signed `seconds_ago` (or with another key)."""
    class Backdated(TimestampSigner):
        def get_timestamp(self):
            return int(time.time()) - seconds_ago

    return URLSafeTimedSerializer(key or signing_key(app), salt=SALT, signer=Backdated).dumps(payload)


def cookie_payload(value):
    """The bytes of a session cookie's payload (itsdangerous: base64 of JSON, zlib-compressed when it starts with .)."""
    compressed, payload = value.startswith("."), value.lstrip(".").split(".")[0]
    data = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    return zlib.decompress(data) if compressed else data


def valid_payload(client):
    return json.loads(cookie_payload(session_cookie(client)))


@pytest.mark.parametrize("cookie", ["garbage", "a.b.c", ".eJw.x.y", "", "\u00e9" * 10, "x" * 4000])
def test_a_tampered_cookie_is_the_login_page_never_an_error(client, example, cookie):
    client.set_cookie(COOKIE_NAME, cookie)
    response = client.get("/view/processes")
    assert response.status_code == 302 and response.headers["Location"].startswith("/view/login?next=/view/processes")


def test_a_cookie_with_a_changed_payload_or_key_is_refused(app, client, example):
    log_in(client)
    payload = valid_payload(client)
    forged = {
        "another org": {**payload, "org": "other"},
        "no fingerprint": {"org": "default"},
        "not an object": ["default"],
        "a fingerprint of nothing": {**payload, "fp": "0" * 64},
    }
    for name, changed in forged.items():
        client.set_cookie(COOKIE_NAME, cookie_signed(app, changed))
        assert client.get("/view/processes").status_code == 302, name
    client.set_cookie(COOKIE_NAME, cookie_signed(app, payload, key="another key of at least thirty-two chars"))
    assert client.get("/view/processes").status_code == 302
    client.set_cookie(COOKIE_NAME, cookie_signed(app, payload))
    assert client.get("/view/processes").status_code == 200


def test_an_expired_session_is_the_login_page_saying_so(app, client, example):
    log_in(client)
    payload = valid_payload(client)
    client.set_cookie(COOKIE_NAME, cookie_signed(app, payload, seconds_ago=12 * 3600 + 5))
    response = client.get("/view/processes")
    assert response.status_code == 302 and "ended=1" in response.headers["Location"]
    assert f"{COOKIE_NAME}=;" in response.headers["Set-Cookie"]  # the dead cookie is removed
    assert "Your session has ended" in text_of(client.get(response.headers["Location"]))
    client.set_cookie(COOKIE_NAME, cookie_signed(app, payload, seconds_ago=12 * 3600 - 60))
    assert client.get("/view/processes").status_code == 200


def test_removing_a_token_ends_the_sessions_it_started(make_app, app, client, example):
    log_in(client)
    stores = {key: app.config[key] for key in ("DATA_DIR", "DATABASE_URL", "S3_BUCKET", "S3_PREFIX")}
    same_tokens = make_app(**stores).test_client()
    fewer_tokens = make_app(**stores, API_TOKENS=f"other:{OTHER_TOKEN},default:another-token-of-default").test_client()
    for other in (same_tokens, fewer_tokens):
        other.set_cookie(COOKIE_NAME, session_cookie(client))
    assert same_tokens.get("/view/processes").status_code == 200
    assert fewer_tokens.get("/view/processes").status_code == 302


def test_a_session_key_from_the_environment_is_shared_by_apps_on_other_stores(make_app):
    key = "k" * 40
    first, second = make_app(SECRET_KEY=key).test_client(), make_app(SECRET_KEY=key).test_client()
    log_in(first)
    second.set_cookie(COOKIE_NAME, session_cookie(first))
    assert second.get("/view/stations").status_code == 200
    third = make_app().test_client()  # a key of its own
    third.set_cookie(COOKIE_NAME, session_cookie(first))
    assert third.get("/view/stations").status_code == 302


@pytest.mark.file_backend_only(reason="the key file of the data directory")
def test_the_key_is_made_once_in_the_data_directory_readable_by_its_owner_only(app, client):
    log_in(client)
    key_file = os.path.join(app.config["DATA_DIR"], SECRET_KEY_FILE)
    assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
    assert Path(key_file).read_text().strip() == signing_key(app)


def test_the_key_is_made_once_when_workers_race_for_it(app):
    """Each racer opens the stores as a worker of its own does (its own connections on the shared backend)."""
    racers = 8
    barrier = threading.Barrier(racers)
    repositories = [open_repository(app.config) for _ in range(racers)]

    def race(repository):
        barrier.wait(timeout=30)
        return repository.secret_key()

    try:
        with ThreadPoolExecutor(racers) as pool:
            keys = set(pool.map(race, repositories))
    finally:
        for repository in repositories:
            repository.close()
    assert len(keys) == 1 and len(keys.pop()) >= 32


def test_a_short_secret_key_stops_start_up_without_showing_it(tmp_path):
    with pytest.raises(ConfigurationError) as raised:
        load_config({"DATA_DIR": str(tmp_path), "API_TOKENS": TOKENS}, environ={"WIS_SECRET_KEY": "short-key-x"})
    message = str(raised.value)
    assert "WIS_SECRET_KEY" in message and "at least 32 characters" in message and "short-key-x" not in message


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon"])
def test_a_session_lifetime_that_is_no_positive_number_stops_start_up(tmp_path, value):
    with pytest.raises(ConfigurationError, match="WIS_SESSION_HOURS"):
        load_config({"DATA_DIR": str(tmp_path), "API_TOKENS": TOKENS}, environ={"WIS_SESSION_HOURS": value})


# -- what the pages show -----------------------------------------------------------------------------------------------

def test_every_page_of_the_example_answers_with_its_security_headers(client, example):
    log_in(client)
    for path in PAGES:
        response = client.get(path)
        assert response.status_code == 200, path
        assert response.mimetype == "text/html", path
        csp = response.headers["Content-Security-Policy"]
        # The process page may add the nonce of its one <style> element (the colours of styled texts).
        assert re.sub(r" 'nonce-[\w-]+'", "", csp) == CSP, path
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["Referrer-Policy"] == "same-origin"
        assert response.headers["X-Frame-Options"] == "DENY"
        assert response.headers["Cache-Control"] == "no-store"
        assert "<script" not in response.get_data(as_text=True), path


def test_the_pages_load_only_the_services_own_stylesheet(client, example):
    log_in(client)
    page = client.get("/view/processes/gearbox_assembly").get_data(as_text=True)
    links = re.findall(r'<link [^>]*href="([^"]+)"', page)
    assert sorted(links) == ["/static/favicon.svg", "/static/pages.css"]
    for link in links:
        response = client.get(link)
        assert response.status_code == 200 and len(response.data) > 200
    assert client.get("/static/pages.css").mimetype == "text/css"


def test_the_start_page_describes_the_service_and_links_to_everything(client):
    response = client.get("/")
    assert response.status_code == 200
    links = set(re.findall(r'href="([^"]+)"', response.get_data(as_text=True)))
    assert {"/view/processes", "/view/products", "/view/stations", "/view/login", "/graph/v2",
            "/openapi.json"} <= links


def test_the_process_page_shows_every_step_action_and_field(client, example):
    image, video = example
    log_in(client)
    page = client.get("/view/processes/gearbox_assembly")
    text = text_of(page)
    body = page.get_data(as_text=True)
    [(_, name, steps), _] = example_processes()
    assert [html.unescape(found) for found in re.findall(r'class="step-name">([^<]*)<', body)] == steps
    for shown in ["Gearbox assembly", "Assemble and seal the GB-200 gearbox", "GB-200", "after 30 minutes",
                  "the operator confirms the start", "shows a summary",
                  "Put the housing on the fixture, flange up.",
                  "Scan Housing serial of part housing (Gearbox housing)", "serial: Housing serial (housing_sn)",
                  "pattern ^HS-[0-9]{6}$", "4 × bolt_m8 (M8x20 bolt)", "Torque wrench 20 Nm (wrench_20nm)",
                  "Final torque: 18 to 22 Nm (torque in Nm)", "0.5 × sealant (Sealant, ml)",
                  "Flange gap: 0.1 to 0.3 mm (length in mm)", "Confirm The gap is within tolerance",
                  "Produces gearbox (Assembled gearbox)", "Caution The fixture clamps close automatically.",
                  "Tip Wipe the flange before applying sealant.", "No tool named: close_cover", "Sealing"]:
        assert shown in text, shown
    assert body.count('class="badge badge-scan"') == 2 and body.count("badge badge-torque") == 2
    assert 'class="instruction text-bold"' in body
    assert f'<img src="{image}"' in body and f'<a href="{image}"' in body and f'<video src="{video}"' in body
    assert 'alt="Mount the housing: Put the housing on the fixture, flange up."' in body
    # The bill of materials, in its order, with quantities as engineers write them.
    bom = re.findall(r"<tr><td><code>(\w+)</code></td><td>[^<]*</td><td class=\"num\">([\d.]+)</td></tr>", body)
    assert bom == [("housing", "1"), ("bolt_m8", "10"), ("sealant", "0.5"), ("cover", "1")]


@pytest.mark.parametrize("minutes, shown", [(None, None), (0, "after 0 minutes without activity"),
                                             (45, "after 45 minutes without activity")])
def test_the_automatic_sign_out_is_shown_only_when_set(client, auth, minutes, shown):
    process = {"id": "other_p", "name": "Other"}
    if minutes is not None:
        process["autoSignoutMinutes"] = minutes
    upsert_process(client, auth, process)
    log_in(client)
    text = text_of(client.get("/view/processes/other_p"))
    if shown is None:
        assert "Automatic sign-out" not in text and "minutes without activity" not in text
    else:
        assert f"Automatic sign-out {shown}" in text


def test_coloured_text_gets_a_style_allowed_by_a_nonce_of_its_own(client, auth):
    upsert_process(client, auth, {"id": "coloured", "name": "C", "steps": [
        {"id": "s_1", "instructionText": {"text": "Hot surface", "color": "#B3261E", "italic": True}}]})
    log_in(client)
    first, second = client.get("/view/processes/coloured"), client.get("/view/processes/coloured")
    nonce = re.search(r"'nonce-([\w-]+)'", first.headers["Content-Security-Policy"]).group(1)
    body = first.get_data(as_text=True)
    assert f'<style nonce="{nonce}">' in body and ".color-b3261e { color: #b3261e; }" in body
    assert 'class="instruction text-italic color-b3261e">Hot surface' in body
    assert nonce not in second.headers["Content-Security-Policy"]


def test_the_product_page_draws_one_node_per_process_and_one_edge_per_dependency(client, example):
    log_in(client)
    body = client.get("/view/products/gb_200").get_data(as_text=True)
    nodes = re.findall(r'<a href="/view/processes/(\w+)" class="node( node-final)?"', body)
    assert sorted(nodes) == [("gearbox_assembly", ""), ("gearbox_test", " node-final")]
    assert re.findall(r'<g class="edge" data-upstream="(\w+)" data-downstream="(\w+)"', body) == [
        ("gearbox_assembly", "gearbox_test")]
    assert "×1" in text_of(client.get("/view/products/gb_200"))


def test_the_lists_show_the_orgs_objects_with_links(client, example):
    log_in(client)
    processes = client.get("/view/processes").get_data(as_text=True)
    assert re.findall(r'<a href="/view/processes/(\w+)">', processes) == ["gearbox_assembly", "gearbox_test"]
    products = client.get("/view/products").get_data(as_text=True)
    assert '<a href="/view/products/gb_200">GB-200 gearbox</a>' in products
    assert "Press 1" in client.get("/view/stations").get_data(as_text=True)


def create_stations(client, auth, count):
    """Stations st_000, st_001, ... named "Station <n>", ten mutations a request (the most one may hold)."""
    for start in range(0, count, 10):
        query = "mutation { " + " ".join(
            f'm{i}: stationCreate(input: {{station: {{id: "st_{i:03}", name: "Station {i}"}}}})'
            for i in range(start, min(start + 10, count))) + " }"
        assert "errors" not in client.post("/graph/v2", headers=auth, json={"query": query}).get_json()


def listed(response):
    """The ids a list page shows, in order (each may wrap after its underscores: `st_<wbr>000`)."""
    found = re.findall(r'<td><code class="id">([^<]*(?:<wbr>[^<]*)*)</code></td>', response.get_data(as_text=True))
    return [identifier.replace("<wbr>", "") for identifier in found]


def next_link(response):
    found = re.search(r'<a rel="next" href="([^"]+)"', response.get_data(as_text=True))
    return html.unescape(found.group(1)) if found else None


def test_a_list_is_paged_by_100(client, auth):
    create_stations(client, auth, 250)
    log_in(client)
    first = client.get("/view/stations")
    assert listed(first) == [f"st_{i:03}" for i in range(100)]
    assert next_link(first) == "/view/stations?after=st_099"
    second = client.get(next_link(first))
    third = client.get(next_link(second))
    assert listed(second) == [f"st_{i:03}" for i in range(100, 200)]
    assert listed(third) == [f"st_{i:03}" for i in range(200, 250)] and next_link(third) is None


def test_the_search_filters_ignoring_case_and_keeps_paging(client, auth):
    create_stations(client, auth, 250)
    log_in(client)
    found = client.get("/view/stations?q=ST_1")
    assert listed(found) == [f"st_{i:03}" for i in range(100, 200)] and next_link(found) is None
    wider = client.get("/view/stations?q=1")
    expected = [f"st_{i:03}" for i in range(250) if "1" in f"{i:03}"]
    assert len(expected) == 133 and listed(wider) == expected[:100]
    assert next_link(wider) == f"/view/stations?q=1&after={expected[99]}"
    assert listed(client.get(next_link(wider))) == expected[100:]
    assert "No stations with an id or name containing" in text_of(client.get("/view/stations?q=zzz"))


@pytest.mark.parametrize("search", ["<script>alert(1)</script>", "\"'><img src=x onerror=alert(1)>", "\x00\x01",
                                    "%", "_", "\u202e\U0001F600", "a" * 5000, "{{ 7*7 }}"])
def test_any_search_string_is_answered_and_escaped(client, auth, search):
    create_stations(client, auth, 3)
    log_in(client)
    response = client.get("/view/stations", query_string={"q": search, "after": search})
    assert response.status_code == 200
    body = response.get_data(as_text=True)
    assert "<script>alert" not in body and "<img src=x" not in body
    # A template expression stays text (the times of the stations listed may hold "49": left out of this check).
    assert "49" not in re.sub(r"<time [^>]*>[^<]*</time>", "", body)


def test_markup_in_names_and_texts_is_shown_as_text(client, auth):
    hostile = "<script>alert('x')</script><img src=/x onerror=alert(1)>"
    upsert_process(client, auth, {"id": "hostile_1", "name": hostile, "description": hostile, "steps": [
        {"id": "s_1", "name": hostile, "instructionText": {"text": hostile}, "alerts": [{"text": hostile}],
         "notes": [{"title": hostile, "text": hostile}],
         "actions": [{"id": "a_1", "description": {"text": hostile}, "toolUsed": {"id": "tool_1", "name": hostile},
                      "inputParts": [{"part": {"id": "part_1", "description": hostile,
                                               "serial": {"id": "sn_1", "name": hostile, "pattern": hostile}}}],
                      "measurement": {"measured": hostile}, "confirmation": {"confirmed": hostile}}]}]})
    log_in(client)
    for path in ("/view/processes", "/view/processes/hostile_1", "/view/processes?q=<script>"):
        body = client.get(path).get_data(as_text=True)
        assert "<script>" not in body and "<img src=/x" not in body, path
    assert html.escape(hostile, quote=True).replace("&#x27;", "&#39;") in client.get(
        "/view/processes/hostile_1").get_data(as_text=True)


# -- errors are pages ------------------------------------------------------------------------------------------------------

def test_an_unknown_id_or_another_orgs_object_is_a_404_page(client, other_auth, example):
    log_in(client, token=OTHER_TOKEN)
    for path in ("/view/processes/gearbox_assembly", "/view/products/gb_200", "/view/processes/no_such_thing",
                 "/view/processes/%3Cscript%3E", "/view/products/a", "/view/nothing/here", "/view/"):
        response = client.get(path)
        assert response.status_code == 404, path
        assert response.mimetype == "text/html" and "Not found" in text_of(response), path
        assert "<script>" not in response.get_data(as_text=True)
        assert response.headers["Content-Security-Policy"] == CSP
    assert "no process with the id “gearbox_assembly”" in text_of(client.get("/view/processes/gearbox_assembly"))


def test_api_paths_keep_their_json_errors(client, auth):
    assert client.get("/nothing").get_json() == {"error": client.get("/nothing").get_json()["error"]}
    assert client.get("/nothing").status_code == 404
    assert client.put("/graph/v2", headers=auth).get_json()["error"]


@pytest.mark.parametrize("method, path", [("post", "/view/processes"), ("put", "/view/login"), ("delete", "/"),
                                          ("get", "/view/logout"), ("options", "/view/stations")])
def test_pages_answer_only_get_and_the_login_and_logout_posts(client, method, path):
    response = getattr(client, method)(path)
    assert response.status_code == 405 and response.mimetype == "text/html"
    assert set(response.headers["Allow"].split(", ")) <= {"GET", "HEAD", "POST"}


# -- the cookie and the media paths, and what else it does not open -----------------------------------------------------

def test_media_accept_the_session_cookie_for_reading(client, example):
    image, video = example
    log_in(client)
    whole = client.get(image)
    assert whole.status_code == 200 and whole.data == IMAGE and whole.headers["X-Content-Type-Options"] == "nosniff"
    assert "Cookie" in whole.headers["Vary"]
    ranged = client.get(video, headers={"Range": "bytes=100-199"})
    assert ranged.status_code == 206 and ranged.data == CLIP.read_bytes()[100:200]
    assert client.get(video, headers={"If-None-Match": ranged.headers["ETag"]}).status_code == 304
    head = client.head(video)
    assert head.status_code == 200 and int(head.headers["Content-Length"]) == len(CLIP.read_bytes())


def test_the_cookie_reads_no_media_of_another_org_and_a_bad_one_reads_none(client, example):
    image, _ = example
    log_in(client, token=OTHER_TOKEN)
    assert client.get(image).status_code == 404
    client.set_cookie(COOKIE_NAME, "tampered")
    assert client.get(image).status_code == 401


def test_the_cookie_alone_authenticates_nothing_but_reading_media(make_app, auth):
    app = make_app(TEST_MODE=True)
    client = app.test_client()
    _, video = seed_example(client, auth)
    stream = client.post("/uploads", headers=auth, json={"destinationId": "stepImage", "fileName": "a.png",
                                                         "fileSize": 10, "sha": "0" * 64}).get_json()["streamId"]
    log_in(client)
    refused = {
        "GraphQL POST": client.post("/graph/v2", json={"query": "{ processes { id } }"}),
        "GraphQL GET": client.get("/graph/v2?query={processes{id}}", headers={"Accept": "application/json"}),
        "GraphQL subscription": client.post("/graph/v2", json={"query": "subscription { events { seq } }"},
                                            headers={"Accept": "text/event-stream"}),
        "upload": client.post("/uploads", data={"destinationId": "stepImage"}),
        "stream state": client.get(f"/uploads/{stream}"),
        "stream delete": client.delete(f"/uploads/{stream}"),
        "test journal": client.get("/_test/requests"),
        "test reset": client.post("/_test/reset"),
        "media delete": client.delete(video),
    }
    assert {name: response.status_code for name, response in refused.items()} == {
        **{name: 401 for name in refused}, "media delete": 405}
    assert client.get(video).status_code == 200
