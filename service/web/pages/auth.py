"""Signing in and out of the pages, and `login_required` (the shape of pallets/flask's tutorial, flaskr/auth.py, with
an API token where it has a password).

A login is a POST of a form with one field, `token`: a valid token starts a session for its org (service.web.sessions);
a wrong one renders the login again with a message and starts nothing. Login CSRF (another site signing a browser in
to an org of its choosing, to show an operator its instructions) is refused by where the POST comes from: a browser
says so in Sec-Fetch-Site, and in Origin (older browsers); a POST that says another site is refused, one that says
nothing (curl, a script) is let through, as it carries a token of its own. The session cookie is SameSite=Strict, so
no other site's request carries it, and it authorises only reads: a token of any scope signs in (CONTRACT 16).
"""
import functools
from urllib.parse import unquote, urlsplit

from flask import g, redirect, render_template, request, url_for

from service.web.auth import PUBLIC, SIGNED_IN, credential_of, requires
from service.web.pages.blueprint import error_page, is_page_path, page_route
from service.web.sessions import carries_cookie, end_session, session_credential, session_org, start_session

# Where a login leads when it names no page to go back to.
FIRST_PAGE = "pages.processes"
# Sec-Fetch-Site values of a request a person started on this service's own pages (or by typing the address).
OWN_SITE = {"same-origin", "none"}
# The path segments a browser resolves away (RFC 3986, 5.2.4).
DOT_SEGMENTS = {".", ".."}


def login_required(view):
    """The view for a signed-in browser, with `g.org` and `g.credential` (at the read scope) set; anyone else is sent
    to the login, then back."""
    @functools.wraps(view)
    def wrapped(**kwargs):
        credential = session_credential()
        if credential is None:
            ended = carries_cookie()  # a cookie that no longer counts: expired, tampered, or its token revoked
            response = redirect(url_for("pages.login", next=request.full_path.rstrip("?"), ended=int(ended) or None))
            if ended:
                end_session(response)
            return response
        g.org, g.credential = credential.org, credential
        return view(**kwargs)

    return requires(SIGNED_IN)(wrapped)


def _came_from_another_site():
    """True when the browser says the request was started by a page of another site."""
    fetch_site = request.headers.get("Sec-Fetch-Site")
    if fetch_site is not None:
        return fetch_site not in OWN_SITE
    origin = request.headers.get("Origin")
    return origin is not None and urlsplit(origin).netloc != request.host


def _page_to_return_to(value):
    """`value` when it is the path of a page of this service, else the first page (never another site's URL)."""
    return value if _is_plain_page_path(value) else url_for(FIRST_PAGE)


def _is_plain_page_path(value):
    """True for `/`, `/view` or a path under `/view/` (with any query) that a browser follows as it is written: no
    other host, and no dot segment, backslash or control character, whether written plainly or percent-encoded.
    A browser resolves `/view/../graph/v2` (and `/view/%2e%2e/...`, which it decodes first) to a path out of the
    pages before it asks for it, so checking the prefix alone would lead a login to an API path."""
    if not isinstance(value, str) or not value.startswith("/") or value.startswith("//"):
        return False
    path = urlsplit(value).path
    if "\\" in value or not value.isprintable() or not is_page_path(path):
        return False
    decoded = unquote(path)
    return "\\" not in decoded and decoded.isprintable() and \
        not any(segment in DOT_SEGMENTS for segment in decoded.split("/"))


def _refused_from_another_site():
    return error_page(403, "Not from here", "Sign in and out on this service's own login page.")


@page_route("/view/login")
@requires(PUBLIC)
def login():
    ended = request.args.get("ended") == "1"
    return render_template("pages/login.html", next=_page_to_return_to(request.args.get("next")), ended=ended,
                           org=session_org())


@page_route("/view/login", methods=["POST"])
@requires(PUBLIC)
def login_submit():
    """A token of any scope signs in: the session it starts reads, whatever the token may do besides."""
    if _came_from_another_site():
        return _refused_from_another_site()
    next_page = _page_to_return_to(request.form.get("next"))
    credential = credential_of(request.form.get("token", "").strip())
    if credential is None:
        # 200, as a form shown again is: a 401 must name an HTTP authentication scheme (RFC 9110), and a login form
        # is none.
        return render_template("pages/login.html", next=next_page, refused=True, org=None)
    response = redirect(next_page, 303)
    start_session(response, credential)
    return response


@page_route("/view/logout", methods=["POST"])
@requires(PUBLIC)
def logout():
    if _came_from_another_site():
        return _refused_from_another_site()
    response = redirect(url_for("pages.login"), 303)
    end_session(response)
    return response
