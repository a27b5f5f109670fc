"""A stand-in for a collective library's RAS service on a free loopback port: it speaks the text protocol
ddplab's client speaks (job/ras.py; docs/flight-recorder.md), or misbehaves as told, and remembers every
connection and every line it was sent.

    answers   hello -> "SERVER PROTOCOL 2", a setting -> "OK", a status query -> ANSWER, then closes
    silent    accepts, reads, never says anything
    endless   answers the hello and the setting, then streams status text for ever
    stranger  answers the hello with something that is not the protocol
    textonly  as ``answers``, but refuses settings (a release without JSON)
"""

from __future__ import annotations

import socket
import threading
import time

ANSWER = ('{"nccl_version": "2.29.7", "communicators": [{"status": "RUNNING", "errors": "MISMATCH", '
          '"detail": "Rank 0 has launched up to operation 4 <b>&amp;</b>; Rank 1 has launched up to operation 3"}]}\n')


class FakeRas:
    def __init__(self, behaviour: str = "answers", answer: str = ANSWER):
        self.behaviour = behaviour
        self.answer = answer
        self.connections = 0
        self.lines: list[str] = []
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.2)
        self.port = self._server.getsockname()[1]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._accepter = threading.Thread(target=self._accept, name="fake-ras", daemon=True)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> "FakeRas":
        self._accepter.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._accepter.join(5)
        for t in self._threads:
            t.join(5)
        self._server.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._server.accept()
            except TimeoutError:
                continue
            self.connections += 1
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(t)
            t.start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(0.2)
        buffer = b""
        with conn:
            while not self._stop.is_set():
                try:
                    chunk = conn.recv(4096)
                except TimeoutError:
                    continue
                except OSError:
                    return
                if not chunk:
                    return
                buffer += chunk
                while b"\n" in buffer:
                    line, _, buffer = buffer.partition(b"\n")
                    self.lines.append(line.decode())
                    if not self._reply(conn, line.decode()):
                        return

    def _reply(self, conn: socket.socket, line: str) -> bool:
        """Answer one line; False once the conversation is over."""
        if self.behaviour == "silent":
            return True
        if line.upper().startswith("CLIENT PROTOCOL"):
            conn.sendall(b"SERVER PROTOCOL 2\n" if self.behaviour != "stranger" else b"HTTP/1.1 400 Bad Request\n")
            return True
        if line.upper().startswith("SET "):
            conn.sendall(b"OK\n" if self.behaviour != "textonly" else b"ERROR unknown command\n")
            return True
        if line.upper().endswith("STATUS"):
            if self.behaviour == "endless":
                while not self._stop.is_set():
                    try:
                        conn.sendall(b"Rank 0 -- still collecting\n")
                    except OSError:
                        return False
                    time.sleep(0.01)
                return False
            conn.sendall(self.answer.encode())
            return False  # the service closes the connection after the status
        conn.sendall(b"ERROR unknown command\n")
        return True
