"""Where a webhook may be sent (CONTRACT 15): every known trick is refused, by the URL's form or by the addresses its
host resolves to (unwrapped from IPv4-mapped, IPv4-compatible, 6to4 and NAT64 forms), unless the operator's networks
allow it. The resolver is injected: nothing here connects anywhere."""
import ipaddress

import pytest

from service.domain.webhook_addresses import AddressPolicy, AddressRefused, check_target

BRACKETS = "must write an IPv6 host as one address in brackets, followed by nothing but a :port"
STRICT = AddressPolicy(allow_http=True)
LOOPBACK_ALLOWED = AddressPolicy(allow_http=True, allow_nets=(ipaddress.ip_network("127.0.0.1/32"),))


def resolving(*addresses):
    calls = []

    def resolve(host, port):
        calls.append((host, port))
        return list(addresses)
    resolve.calls = calls
    return resolve


@pytest.mark.parametrize("url, words", [
    ("http://127.0.0.1:8080/hook", "127.0.0.1 is a loopback address"),
    ("http://0.0.0.0/", "0.0.0.0 is an unspecified address"),
    ("http://[::1]/", "::1 is a loopback address"),
    ("http://[::]/", "is an unspecified address"),
    ("http://[::ffff:127.0.0.1]/", "(it carries 127.0.0.1)"),
    ("http://[::127.0.0.1]/", "(it carries 127.0.0.1)"),  # IPv4-compatible
    ("http://[2002:7f00:1::]/", "(it carries 127.0.0.1)"),  # 6to4
    ("http://[64:ff9b::a9fe:a9fe]/", "(it carries 169.254.169.254)"),  # NAT64
    ("http://[::ffff:a9fe:a9fe]/", "link-local"),
    ("http://2130706433/", "write an IPv4 address as four decimal numbers"),  # decimal 127.0.0.1
    ("http://0177.0.0.1/", "write an IPv4 address as four decimal numbers"),  # octal
    ("http://0x7f.1/", "write an IPv4 address as four decimal numbers"),  # hex
    ("http://127.1/", "write an IPv4 address as four decimal numbers"),
    ("http://169.254.169.254/latest/meta-data", "169.254.169.254 is a link-local address"),
    ("http://10.1.2.3/", "is a private address"),
    ("http://192.168.1.1/", "is a private address"),
    ("http://100.64.0.1/", "not a globally routable address"),  # shared (carrier-grade NAT)
    ("http://224.0.0.1/", "multicast"),
    ("http://240.0.0.1/", "reserved"),
    ("ftp://hooks.example.com/", "must be an https URL"),
    ("file:///etc/passwd", "must be an https URL"),
    ("gopher://hooks.example.com/", "must be an https URL"),
    ("javascript:alert(1)", "must be an https URL"),
    ("https://user:pass@hooks.example.com/", "must not carry a user or password"),
    ("https://hooks.example.com/#x", "must not have a #fragment"),
    ("https://hooks.example.com:99999/", "has a port that is not a number from 1 to 65535"),
    ("https://hooks.example.com:0/", "has a port that is not a number from 1 to 65535"),  # was sent to 443
    ("http://hooks.example.com:00/", "has a port that is not a number from 1 to 65535"),  # was sent to 80
    ("https://hooks.exa mple.com/", "without spaces"),
    ("https://hööks.example.com/", "non-ASCII"),
    ("https:///nohost", "must name a host"),
    # Malformed brackets: urlsplit itself raised ValueError for the first five, a 500 for the subscribe.
    ("https://[::1/", BRACKETS),
    ("http://[]/", BRACKETS),
    ("http://]/", BRACKETS),
    ("http://a]b/", BRACKETS),
    ("https://[::1/hook]", BRACKETS),
    ("https://[2606:4700::1]x/", BRACKETS),  # was sent to 2606:4700::1
    ("https://[2606:4700::1]]/", BRACKETS),
    ("https://a[2606:4700::1]/", BRACKETS),
])
def test_refused(url, words):
    with pytest.raises(AddressRefused) as refused:
        check_target(url, STRICT, resolving("93.184.216.34"))
    assert words in str(refused.value)


def test_http_only_when_the_operator_allows_it():
    with pytest.raises(AddressRefused, match="http is refused unless the operator sets WIS_WEBHOOK_ALLOW_HTTP=1"):
        check_target("http://hooks.example.com/", AddressPolicy(), resolving("93.184.216.34"))
    assert check_target("https://hooks.example.com/", AddressPolicy(), resolving("93.184.216.34")).port == 443


def test_a_name_is_refused_when_any_of_its_addresses_is():
    with pytest.raises(AddressRefused, match=r"169\.254\.169\.254 \(the address of hooks\.example\.com\) is a link"):
        check_target("https://hooks.example.com/", STRICT, resolving("93.184.216.34", "169.254.169.254"))
    with pytest.raises(AddressRefused, match="does not resolve"):
        check_target("https://nowhere.example.com/", STRICT, _failing_resolver)


def test_the_target_is_the_checked_address_with_the_urls_host_and_one_resolution():
    resolve = resolving("93.184.216.34")
    target = check_target("https://Hooks.Example.com:8443/in?x=1", STRICT, resolve)
    assert resolve.calls == [("hooks.example.com", 8443)]
    assert (target.address, target.host, target.host_header, target.request_target) == (
        "93.184.216.34", "hooks.example.com", "hooks.example.com:8443", "/in?x=1")
    assert not target.in_allowed_net


def test_the_operators_networks_allow_loopback_and_lan_receivers():
    target = check_target("http://receiver.local:9000/", LOOPBACK_ALLOWED, resolving("127.0.0.1"))
    assert target.address == "127.0.0.1" and target.in_allowed_net
    mapped = check_target("http://[::ffff:127.0.0.1]:9000/", LOOPBACK_ALLOWED, resolving())
    assert mapped.address == "127.0.0.1"  # connected as IPv4
    with pytest.raises(AddressRefused):
        check_target("http://127.0.0.2/", LOOPBACK_ALLOWED, resolving())


def _failing_resolver(host, port):
    raise OSError("Name or service not known")
