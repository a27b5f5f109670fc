"""Asking the collective library's own health service (RAS) about a hung job: `ddplab launch --ras`.

Off unless asked for: querying the service has crashed jobs on releases torch ships (``RasService.caution``).
The service's facts are the vendor's data (platform/vendors.py); here are the decision whether and where to ask
(``plan``: pure, before the job starts) and the exchange (``RasPlan.ask``), every step bounded by a timeout, the
answer kept as the service wrote it. Each machine's launcher asks the service on its own machine.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from typing import Mapping

from ..errors import UsageError
from ..platform.collective_lib import version_tuple
from ..platform.vendors import RasService
from ..records.launch import RasAnswer
from ..basics.validators import split_endpoint

MAX_ANSWER_BYTES = 1 << 20  # a job of thousands of processes answers in tens of kB; a report stays small


@dataclass(frozen=True)
class RasPlan:
    """Whether, where and how the service will be asked when a hang is declared."""

    service: RasService | None
    library_version: str | None
    host: str | None = None
    port: int | None = None
    why_not: str | None = None  # set: nothing will connect, and this says why

    @property
    def address(self) -> str | None:
        return None if self.host is None else f"{self.host}:{self.port}"

    @property
    def budget_s(self) -> float:
        """The longest ``ask`` can take."""
        s = self.service
        return 0.0 if self.why_not is not None else max(s.answer_within_s, 3 * s.handshake_timeout_s)

    @property
    def speaks_json(self) -> bool:
        """The release asks for JSON only where the service understands the request."""
        s = self.service
        version = version_tuple(self.library_version)
        return bool(s and s.json_format and s.json_since and version and version >= s.json_since)

    def lines(self) -> list[str]:
        """What the client says, in order (the hello first)."""
        s = self.service
        return [s.hello, *([s.json_format] if self.speaks_json else []), s.status]

    def ask(self) -> RasAnswer:
        if self.why_not is not None:
            return self._answer("not asked", self.why_not, [], "", None)
        return exchange(self)

    def _answer(self, status: str, why: str | None, sent: list[str], answer: str, started: float | None,
                answer_format: str | None = None) -> RasAnswer:
        seconds = None if started is None else round(time.monotonic() - started, 3)
        return RasAnswer(service=self.service.name if self.service else None, status=status, why=why,
                         address=self.address, library_version=self.library_version, sent=sent,
                         format=answer_format if answer else None, answer=answer, seconds=seconds)


def plan(asked: bool, service: RasService | None, library: str | None, library_version: str | None,
         environ: Mapping[str, str]) -> RasPlan | None:
    """None without --ras; else where the service listens, or why it will not be asked (a bad address: UsageError)."""
    if not asked:
        return None
    if service is None:
        return RasPlan(None, library_version, why_not=f"{library or 'this collective library'} has no RAS service")
    version = version_tuple(library_version)
    if version is not None and version < service.since:
        return RasPlan(service, library_version, why_not=f"{library} {library_version} is older than "
                       + ".".join(str(v) for v in service.since) + f", the first with {service.name}")
    if environ.get(service.enable_env, "").strip() in service.disabled_values:
        return RasPlan(service, library_version,
                       why_not=f"switched off for this job: {service.enable_env}={environ[service.enable_env]}")
    text = environ.get(service.address_env) or service.default_address
    found = split_endpoint(text.strip())  # host:port, an IPv6 host in brackets ([::1]:28028)
    if found is None:
        raise UsageError("invalid-ras-address", f"{service.address_env}={text!r}: --ras needs host:port there "
                                                f"(port 1-65535), e.g. {service.default_address}",
                         hint=f"fix {service.address_env}, or leave it unset for {service.default_address}")
    return RasPlan(service, library_version, *found)


def exchange(p: RasPlan) -> RasAnswer:
    """The conversation: the connection and each short reply within the handshake timeout, the whole answer
    within ``answer_within_s`` of connecting."""
    s = p.service
    started = time.monotonic()
    sent: list[str] = []
    try:
        sock = socket.create_connection((p.host, p.port), timeout=s.handshake_timeout_s)
    except OSError as exc:
        return p._answer("unreachable", f"connecting: {exc.strerror or exc}", sent, "", started)
    with sock:
        reader = _Reader(sock)
        hello, *settings, query = p.lines()
        try:
            _say(sock, hello, sent)
            greeting = reader.line(time.monotonic() + s.handshake_timeout_s)
            if not greeting.startswith(s.hello_answer):
                return p._answer("unexpected answer", f"the service's first line does not start with "
                                                      f"{s.hello_answer!r}", sent, greeting, started, "text")
            answer_format = "text"
            for setting in settings:  # each answered on one line: ``ok``, or why not (then the answer is text)
                _say(sock, setting, sent)
                taken = reader.line(time.monotonic() + s.handshake_timeout_s).strip() == s.ok
                answer_format = "json" if taken and setting == s.json_format else answer_format
            _say(sock, query, sent)
            answer, complete = reader.rest(started + s.answer_within_s, MAX_ANSWER_BYTES)
        except TimeoutError:
            return p._answer("no answer", f"nothing within {s.handshake_timeout_s} s after {sent[-1]!r}", sent,
                             reader.text(), started, "text")
        except OSError as exc:  # reset or closed under us
            return p._answer("cut off", f"connection lost after {sent[-1]!r}: {exc.strerror or exc}", sent,
                             reader.text(), started, "text")
    if not complete:
        return p._answer("cut off", f"the answer did not end within {s.answer_within_s} s or "
                                    f"{MAX_ANSWER_BYTES} bytes; kept what came", sent, answer, started,
                         answer_format)
    return p._answer("answered", None, sent, answer, started, answer_format)


class _Reader:
    """Bytes from the service, read against a deadline."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buffer = b""

    def line(self, deadline: float) -> str:
        """One line (the service's short replies), or TimeoutError at the deadline."""
        while b"\n" not in self.buffer and self._more(deadline):
            pass
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode("utf-8", "replace")

    def rest(self, deadline: float, limit: int) -> tuple[str, bool]:
        """Everything until the service closes the connection: (text, whether it ended by itself)."""
        try:
            while len(self.buffer) < limit:
                if not self._more(deadline):
                    return self.text(), True
        except TimeoutError:
            pass
        return self.text(), False

    def text(self) -> str:
        return self.buffer.decode("utf-8", "replace")

    def _more(self, deadline: float) -> bool:
        """Read what has arrived; False at the end of the stream."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        self.sock.settimeout(left)
        chunk = self.sock.recv(65536)  # socket.timeout is TimeoutError
        self.buffer += chunk
        return bool(chunk)


def _say(sock: socket.socket, line: str, sent: list[str]) -> None:
    sent.append(line)
    sock.sendall(f"{line}\n".encode())

