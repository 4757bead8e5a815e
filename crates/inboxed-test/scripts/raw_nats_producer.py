#!/usr/bin/env python3
"""A producer that writes the NATS protocol byte by byte, as a client in any language can.

The tests use it to publish into JetStream what no Rust NATS client would send: header blocks
whose names or values are not UTF-8, hold NUL, repeat a name, or are malformed. It reads one
JSON document on standard input:

    {"host": "127.0.0.1", "port": 4222,
     "messages": [{"subject": "orders.new", "headers": "<hex of the header block>",
                   "body": "<hex>", "body_repeat": 1}]}

With "tls": {"cafile": "ca.pem", "server_name": "localhost"} the connection is upgraded to TLS
after the server's INFO, as NATS clients do, trusting that CA only.

The header block is sent as given (it starts with `NATS/1.0\\r\\n` and ends with an empty
line); without "headers" the message goes as a plain PUB. Each message asks JetStream for its
publish ack; the script fails (exit 1, the server's answer on standard error) if one is refused
or none comes within 10 s. It prints how many it published.
"""

import json
import socket
import ssl
import sys


class Conn:
    def __init__(self, host, port):
        self.sock = socket.create_connection((host, port), timeout=10)
        self.buf = b""

    def line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("the server closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("the server closed the connection")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def message(self):
        """The next MSG's payload, answering PINGs on the way."""
        while True:
            line = self.line()
            if line == b"PING":
                self.sock.sendall(b"PONG\r\n")
                continue
            if line.startswith(b"-ERR"):
                sys.exit(f"the server refused: {line!r}")
            if line.startswith(b"MSG ") or line.startswith(b"HMSG "):
                parts = line.split()
                total = int(parts[-1])
                payload = self.read(total + 2)[:total]
                if line.startswith(b"HMSG "):
                    header_len = int(parts[-2])
                    return payload[header_len:], payload[:header_len]
                return payload, b""


def main():
    spec = json.load(sys.stdin)
    conn = Conn(spec.get("host", "127.0.0.1"), spec.get("port", 4222))
    if not conn.line().startswith(b"INFO "):
        sys.exit("no INFO from the server")
    if "tls" in spec:
        context = ssl.create_default_context(cafile=spec["tls"]["cafile"])
        conn.sock = context.wrap_socket(conn.sock, server_hostname=spec["tls"]["server_name"])
    connect = {"verbose": False, "pedantic": False, "headers": True, "no_responders": True,
               "lang": "python-raw", "version": "0"}
    conn.sock.sendall(b"CONNECT " + json.dumps(connect).encode() + b"\r\nSUB _RAW_ACK.* 1\r\nPING\r\n")
    while conn.line() != b"PONG":
        pass
    for i, message in enumerate(spec["messages"]):
        subject = message["subject"].encode()
        body = bytes.fromhex(message.get("body", "")) * message.get("body_repeat", 1)
        reply = b"_RAW_ACK.%d" % i
        if "headers" in message:
            headers = bytes.fromhex(message["headers"])
            total = len(headers) + len(body)
            conn.sock.sendall(b"HPUB %s %s %d %d\r\n" % (subject, reply, len(headers), total)
                              + headers + body + b"\r\n")
        else:
            conn.sock.sendall(b"PUB %s %s %d\r\n" % (subject, reply, len(body)) + body + b"\r\n")
        ack, status = conn.message()
        answer = json.loads(ack) if ack else {}
        if status.startswith(b"NATS/1.0 503") or "error" in answer:
            sys.exit(f"JetStream refused message {i}: {status!r} {ack!r}")
    print(len(spec["messages"]))


if __name__ == "__main__":
    main()
