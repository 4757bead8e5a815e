#!/usr/bin/env python3
"""A Kafka producer outside Rust (kafka-python, pure Python) that sends header names as raw
bytes, which a Rust client will not: names that are not UTF-8, names given twice.

kafka-python encodes a header name with `name.encode("utf-8")`; a `str` whose `encode` gives
back chosen bytes puts exactly those bytes on the wire. It reads one JSON document on standard
input:

    {"bootstrap": "127.0.0.1:19092", "topic": "t",
     "messages": [{"headers": [["<name hex>", "<value hex>"]], "value": "<hex>",
                   "value_repeat": 1}]}

Every message is acknowledged by the broker (acks=all) before it exits; it fails otherwise. It
prints how many it published.
"""

import json
import sys

from kafka import KafkaProducer


class RawName(str):
    """A header name that encodes to the bytes it was made from."""

    def __new__(cls, raw):
        obj = super().__new__(cls, raw.decode("latin-1"))
        obj.raw = raw
        return obj

    def encode(self, *args, **kwargs):
        return self.raw


def main():
    spec = json.load(sys.stdin)
    producer = KafkaProducer(bootstrap_servers=spec["bootstrap"], acks="all", retries=5,
                             max_request_size=16 * 1024 * 1024, linger_ms=5)
    futures = []
    for message in spec["messages"]:
        headers = [(RawName(bytes.fromhex(n)), bytes.fromhex(v)) for n, v in message.get("headers", [])]
        value = bytes.fromhex(message.get("value", "")) * message.get("value_repeat", 1)
        futures.append(producer.send(spec["topic"], value=value, headers=headers))
    for future in futures:
        future.get(timeout=30)
    producer.flush()
    producer.close()
    print(len(futures))


if __name__ == "__main__":
    main()
