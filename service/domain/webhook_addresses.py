"""Where a webhook may be sent (CONTRACT 15): an https URL (http only when allowed) whose host's every address is
globally routable, or inside a network the operator allows (WIS_WEBHOOK_ALLOW_NETS), once IPv4-mapped,
IPv4-compatible, 6to4 and NAT64 forms are unwrapped to the IPv4 address they carry.

The host is resolved once per check, and the caller connects to the address the check passed (`Target.address`),
never to the name again: a name whose answer changes between the check and the connection (DNS rebinding) cannot
send the request elsewhere. A host must be a DNS name, a dotted-quad IPv4 address or a bracketed IPv6 address: the
other spellings of IPv4 that resolvers and browsers accept (`2130706433`, `0177.0.0.1`, `0x7f.1`) are refused by
name, so that what a URL says is what is checked.
"""
import ipaddress
import re
import socket
from typing import NamedTuple
from urllib.parse import urlsplit

MAX_URL_LENGTH = 2048
SCHEMES = {"https": 443, "http": 80}
LABEL = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?", re.IGNORECASE)
# A last label that is a number (decimal, octal or hex): resolvers read the host as an IPv4 address.
NUMERIC_LABEL = re.compile(r"(0x[0-9a-f]*|[0-9]+)", re.IGNORECASE)
DOTTED_QUAD = re.compile(r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(\.(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}")
# What a host with brackets must be: one bracketed address (checked as IPv6 afterwards), then at most a :port.
BRACKETED = re.compile(r"\[[^\[\]]*\](:[0-9]*)?")
BRACKETS_RULE = ("must write an IPv6 host as one address in brackets, followed by nothing but a :port "
                 "(https://[2001:db8::7]:8443/hook)")
NAT64 = ipaddress.ip_network("64:ff9b::/96")
ALLOW_NETS = "WIS_WEBHOOK_ALLOW_NETS"


class AddressRefused(Exception):
    """The URL may not be sent to; the message says why, for the person who gave it."""


class AddressPolicy(NamedTuple):
    allow_http: bool = False
    allow_nets: tuple = ()  # ipaddress networks


class Target(NamedTuple):
    """A checked destination: connect to `address`, send `Host: host_header`, TLS checks `host` (https)."""
    scheme: str
    host: str
    port: int
    host_header: str
    request_target: str  # the path and query
    address: str
    in_allowed_net: bool  # the address passed by WIS_WEBHOOK_ALLOW_NETS, not as globally routable


def resolve(host, port):
    """The host's addresses (strings), as the system resolver answers; OSError when it cannot."""
    return sorted({info[4][0] for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)})


def parse_url(url, policy):
    """(scheme, host, port, host header, request target) of a URL the rules accept, else AddressRefused."""
    if not isinstance(url, str) or not url or len(url) > MAX_URL_LENGTH:
        raise AddressRefused(f"must be a URL of at most {MAX_URL_LENGTH} characters")
    if any(ord(character) <= 0x20 or ord(character) >= 0x7f for character in url):
        raise AddressRefused("must be a URL without spaces, control or non-ASCII characters (write a host in its "
                             "ASCII form, and percent-encode the rest)")
    try:
        parts = urlsplit(url)
    except ValueError:  # urlsplit checks brackets itself: unmatched ones, or no IP address inside them
        raise AddressRefused(BRACKETS_RULE) from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise AddressRefused(f"must be an https URL (http with WIS_WEBHOOK_ALLOW_HTTP=1); got scheme {parts.scheme!r}")
    if scheme == "http" and not policy.allow_http:
        raise AddressRefused("must be an https URL: http is refused unless the operator sets WIS_WEBHOOK_ALLOW_HTTP=1")
    if parts.username is not None or parts.password is not None:
        raise AddressRefused("must not carry a user or password: send credentials in webhookHeaders")
    if parts.fragment or url.endswith("#"):
        raise AddressRefused("must not have a #fragment (it is never sent)")
    try:
        given = parts.port  # None when the URL names none (`host` or `host:`)
    except ValueError:  # not a number, or over 65535
        given = 0
    if given == 0:  # urlsplit takes :0, and `given or default` would send it to the scheme's port
        raise AddressRefused("has a port that is not a number from 1 to 65535")
    port = given or SCHEMES[scheme]
    host = _host(parts)
    netloc_host = f"[{host}]" if ":" in host else host
    host_header = netloc_host if parts.port is None else f"{netloc_host}:{port}"
    request_target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return scheme, host, port, host_header, request_target


def _host(parts):
    host = parts.hostname
    if not host:
        raise AddressRefused("must name a host")
    host_and_port = parts.netloc.split("@")[-1]
    if ("[" in host_and_port or "]" in host_and_port) and not BRACKETED.fullmatch(host_and_port):
        # urlsplit reads `[::1]x` and `a[::1]` as the host ::1: what the URL says would not be what is checked.
        raise AddressRefused(BRACKETS_RULE)
    if host_and_port.startswith("["):
        try:
            return str(ipaddress.IPv6Address(host.split("%")[0]))
        except ValueError:
            raise AddressRefused(f"has a bracketed host that is not an IPv6 address: {host!r}") from None
    if DOTTED_QUAD.fullmatch(host):
        return host
    labels = host.rstrip(".").split(".")
    if NUMERIC_LABEL.fullmatch(labels[-1]):
        raise AddressRefused(f"names the host {host!r}, which resolvers read as an IPv4 address: write an IPv4 "
                             "address as four decimal numbers (203.0.113.7)")
    if len(host) > 253 or not all(LABEL.fullmatch(label) for label in labels):
        raise AddressRefused(f"names the host {host!r}, which is not a DNS name")
    return host


def unwrapped(address):
    """The IPv4 address an IPv6 address carries (IPv4-mapped, IPv4-compatible, 6to4, NAT64), else the address."""
    if address.version == 6:
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address.sixtofour is not None:
            return address.sixtofour
        if address in NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFF_FFFF)
        if int(address) >> 32 == 0 and int(address) > 1:  # IPv4-compatible (::a.b.c.d), not :: nor ::1
            return ipaddress.IPv4Address(int(address))
    return address


def why_refused(address, policy):
    """None when the address may be sent to, else what it is (for the message); with the networks that allowed it."""
    plain = unwrapped(ipaddress.ip_address(address.split("%")[0]))
    if any(plain in network for network in policy.allow_nets):
        return None
    carried = f" (it carries {plain})" if str(plain) != address else ""
    for kind in ("unspecified", "loopback", "link_local", "multicast", "reserved", "private", "site_local"):
        if getattr(plain, f"is_{kind}", False):
            article = "an" if kind == "unspecified" else "a"
            return f"{article} {kind.replace('_', '-')} address{carried}"
    if not plain.is_global:
        return f"not a globally routable address{carried}"
    return None


def check_target(url, policy, resolver=resolve):
    """The Target to connect to for `url`, its host resolved once with `resolver`; AddressRefused naming the reason
    (a URL the rules refuse, a name that does not resolve, an address that is not allowed)."""
    scheme, host, port, host_header, request_target = parse_url(url, policy)
    if DOTTED_QUAD.fullmatch(host) or ":" in host:
        addresses = [host]
    else:
        try:
            addresses = list(resolver(host, port))
        except OSError as error:
            raise AddressRefused(f"names the host {host!r}, which does not resolve ({error})") from None
        if not addresses:
            raise AddressRefused(f"names the host {host!r}, which resolves to no address")
    for address in addresses:
        reason = why_refused(address, policy)
        if reason is not None:
            shown = address if address == host else f"{address} (the address of {host})"
            raise AddressRefused(f"may not be sent to: {shown} is {reason}; the service sends only to globally "
                                 f"routable addresses and to the networks of {ALLOW_NETS}")
    allowed = any(_in_allowed(address, policy) for address in addresses)
    return Target(scheme, host, port, host_header, request_target, _connectable(addresses[0]), allowed)


def _connectable(address):
    """Where to connect for a checked address: an IPv4-mapped IPv6 address is its IPv4 address (no IPv6 needed)."""
    parsed = ipaddress.ip_address(address.split("%")[0])
    return str(parsed.ipv4_mapped) if parsed.version == 6 and parsed.ipv4_mapped is not None else address


def _in_allowed(address, policy):
    plain = unwrapped(ipaddress.ip_address(address.split("%")[0]))
    return any(plain in network for network in policy.allow_nets)
