#!/usr/bin/env python3
"""A producer that writes AMQP 0-9-1 frames byte by byte, as a client in any language can.

The tests use it to put on a real RabbitMQ what no Rust AMQP client would let them send:
short strings that are not UTF-8 in any property, header names that are not UTF-8 at any
depth, header names given twice, header types a client may not know, routing keys that are
not UTF-8. It reads one JSON document on standard input:

    {"host": "127.0.0.1", "port": 5672, "user": "guest", "password": "guest", "vhost": "/",
     "messages": [{"exchange": "", "routing_key": "<hex>", "props": {"message_id": "<hex>"},
                   "headers": [["<name hex>", "S", "<value hex, as on the wire after the tag>"]],
                   "body": "<hex>", "body_repeat": 1}]}

"raw_props" (hex) instead of "props" and "headers" sends the property flags and list as given.
Each property given is a short string (hex of its bytes), except delivery_mode and priority
(numbers) and timestamp (a number). Each message is published with publisher confirms and
`mandatory`; the script fails (exit 1, the broker's reply on standard error) if the broker
refuses or returns one. It prints how many it published.
"""

import json
import socket
import struct
import sys

FRAME_METHOD, FRAME_HEADER, FRAME_BODY, FRAME_HEARTBEAT = 1, 2, 3, 8
PROPERTIES = [
    ("content_type", "s"), ("content_encoding", "s"), ("headers", "F"),
    ("delivery_mode", "B"), ("priority", "B"), ("correlation_id", "s"),
    ("reply_to", "s"), ("expiration", "s"), ("message_id", "s"), ("timestamp", "T"),
    ("type", "s"), ("user_id", "s"), ("app_id", "s"), ("cluster_id", "s"),
]


def short(b):
    if len(b) > 255:
        raise ValueError("a short string holds at most 255 bytes")
    return struct.pack(">B", len(b)) + b


def long(b):
    return struct.pack(">I", len(b)) + b


def frame(kind, channel, payload):
    return struct.pack(">BHI", kind, channel, len(payload)) + payload + b"\xce"


def method(cls, meth, args=b""):
    return struct.pack(">HH", cls, meth) + args


class Conn:
    def __init__(self, host, port):
        self.sock = socket.create_connection((host, port), timeout=60)
        self.buf = b""

    def send(self, data):
        self.sock.sendall(data)

    def read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def frame(self):
        kind, channel, size = struct.unpack(">BHI", self.read(7))
        payload = self.read(size)
        if self.read(1) != b"\xce":
            raise ValueError("bad frame end")
        return kind, channel, payload

    def expect(self, cls, meth):
        """The next method frame, which must be cls.meth; a close is reported and fails."""
        while True:
            kind, _, payload = self.frame()
            if kind == FRAME_HEARTBEAT:
                continue
            if kind != FRAME_METHOD:
                continue
            got = struct.unpack(">HH", payload[:4])
            if got == (cls, meth):
                return payload[4:]
            if got in ((10, 50), (20, 40)):
                code = struct.unpack(">H", payload[4:6])[0]
                text = payload[7:7 + payload[6]]
                sys.exit(f"the broker closed: {code} {text!r}")
            if got == (60, 50):
                sys.exit(f"the broker returned a message: {payload[4:]!r}")
            raise ValueError(f"expected {cls}.{meth}, got {got}")


def properties(message):
    props = message.get("props", {})
    headers = message.get("headers")
    flags, out = 0, b""
    for i, (name, kind) in enumerate(PROPERTIES):
        if name == "headers":
            if headers is None:
                continue
            table = b"".join(
                short(bytes.fromhex(k)) + tag.encode() + bytes.fromhex(v) for k, tag, v in headers
            )
            value = long(table)
        elif name in props:
            v = props[name]
            if kind == "s":
                value = short(bytes.fromhex(v))
            elif kind == "B":
                value = struct.pack(">B", v)
            else:
                value = struct.pack(">Q", v)
        else:
            continue
        flags |= 1 << (15 - i)
        out += value
    return struct.pack(">H", flags) + out


def main():
    spec = json.load(sys.stdin)
    conn = Conn(spec.get("host", "127.0.0.1"), spec.get("port", 5672))
    conn.send(b"AMQP\x00\x00\x09\x01")
    conn.expect(10, 10)
    user, password = spec.get("user", "guest").encode(), spec.get("password", "guest").encode()
    conn.send(frame(FRAME_METHOD, 0, method(10, 11, long(b"") + short(b"PLAIN")
                                            + long(b"\x00" + user + b"\x00" + password)
                                            + short(b"en_US"))))
    tune = conn.expect(10, 30)
    channel_max, frame_max, _ = struct.unpack(">HIH", tune[:8])
    conn.send(frame(FRAME_METHOD, 0, method(10, 31, struct.pack(">HIH", channel_max, frame_max, 0))))
    conn.send(frame(FRAME_METHOD, 0, method(10, 40, short(spec.get("vhost", "/").encode())
                                            + short(b"") + b"\x00")))
    conn.expect(10, 41)
    conn.send(frame(FRAME_METHOD, 1, method(20, 10, short(b""))))
    conn.expect(20, 11)
    conn.send(frame(FRAME_METHOD, 1, method(85, 10, b"\x00")))
    conn.expect(85, 11)
    chunk = frame_max - 8
    for message in spec["messages"]:
        body = bytes.fromhex(message.get("body", "")) * message.get("body_repeat", 1)
        exchange = message.get("exchange", "").encode()
        routing_key = bytes.fromhex(message["routing_key"])
        publish = method(60, 40, struct.pack(">H", 0) + short(exchange) + short(routing_key) + b"\x01")
        props = bytes.fromhex(message["raw_props"]) if "raw_props" in message else properties(message)
        header = struct.pack(">HHQ", 60, 0, len(body)) + props
        frames = [frame(FRAME_METHOD, 1, publish), frame(FRAME_HEADER, 1, header)]
        frames += [frame(FRAME_BODY, 1, body[i:i + chunk]) for i in range(0, len(body), chunk)]
        conn.send(b"".join(frames))
        conn.expect(60, 80)
    conn.send(frame(FRAME_METHOD, 0, method(10, 50, struct.pack(">H", 200) + short(b"bye")
                                            + struct.pack(">HH", 0, 0))))
    conn.expect(10, 51)
    print(len(spec["messages"]))


if __name__ == "__main__":
    main()
