"""Which network interface a rank's gloo connections use when its job spans several machines.

gloo advertises to its peers the address this machine's host name resolves to. Where that is a
loopback address (Debian's /etc/hosts maps the host name to 127.0.1.1; containers often map it to
127.0.0.1), the ranks on the other machines are told to connect to *their own* loopback, and the
job fails after a while with ``Gloo connectFullMesh failed ... Connection refused,
remote=[127.0.0.1]``. There trainkit picks, for gloo, the interface that routes to rank 0's
node (``GLOO_SOCKET_IFNAME``), unless the user set one.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import socket
import struct
from collections.abc import Mapping, MutableMapping

GLOO_INTERFACE_ENV = "GLOO_SOCKET_IFNAME"
_SIOCGIFADDR = 0x8915  # Linux ioctl: an interface's IPv4 address


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) resolves only to loopback addresses."""
    try:
        found = {info[4][0] for info in socket.getaddrinfo(host, None, socket.AF_INET)}
    except (OSError, UnicodeError):
        return False
    return bool(found) and all(ipaddress.ip_address(addr).is_loopback for addr in found)


def address_towards(host: str) -> str:
    """This machine's IPv4 address on the route to ``host`` ("" when there is none). Sends
    nothing: connecting a UDP socket only picks the route."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect((host, 9))
        except (OSError, UnicodeError):
            return ""
        return sock.getsockname()[0]


def interface_of(address: str) -> str:
    """The name of the interface holding the IPv4 ``address`` ("" when none does)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _, name in socket.if_nameindex():
            request = struct.pack("256s", name.encode()[:15])
            with contextlib.suppress(OSError):  # an interface without an IPv4 address
                answer = fcntl.ioctl(sock.fileno(), _SIOCGIFADDR, request)
                if socket.inet_ntoa(answer[20:24]) == address:
                    return name
    return ""


def gloo_interface(main_address: str, env: Mapping[str, str]) -> str:
    """The interface gloo should use to reach the ranks of a job on several machines whose
    rank 0 is at ``main_address``; "" where gloo's own choice works (the user set
    GLOO_SOCKET_IFNAME, rank 0 is this machine's loopback, or the host name resolves to a
    routable address)."""
    if env.get(GLOO_INTERFACE_ENV, "").strip() or is_loopback(main_address):
        return ""
    if not is_loopback(socket.gethostname()):
        return ""
    return interface_of(address_towards(main_address))


def use_routable_interface(main_address: str, env: MutableMapping[str, str]) -> str:
    """Set GLOO_SOCKET_IFNAME in ``env`` where gloo's own choice would be a loopback address
    that the other machines cannot reach; returns the interface set ("" when none)."""
    interface = gloo_interface(main_address, env)
    if interface:
        env[GLOO_INTERFACE_ENV] = interface
    return interface
