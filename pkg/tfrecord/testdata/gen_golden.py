#!/usr/bin/python3
"""Writes golden.json: TFRecord framings computed independently of the Go code.

Run with Debian's /usr/bin/python3 (standard library only): `/usr/bin/python3 gen_golden.py`.
The CRC-32C is computed bit by bit from its definition (reflected Castagnoli polynomial
0x82F63B78, init and final xor 0xFFFFFFFF), the mask and the framing from the TFRecord format
(tensorflow/core/lib/io/record_writer.cc, tensorflow/core/lib/hash/crc32c.h).
"""
import json
import struct


def crc32c(data: bytes) -> int:
  crc = 0xFFFFFFFF
  for byte in data:
    crc ^= byte
    for _ in range(8):
      crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
  return crc ^ 0xFFFFFFFF


def masked(data: bytes) -> int:
  crc = crc32c(data)
  return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def frame(data: bytes) -> bytes:
  length = struct.pack("<Q", len(data))
  return length + struct.pack("<I", masked(length)) + data + struct.pack("<I", masked(data))


# Published CRC-32C check values, to show crc32c above is the right function: the CRC catalogue's
# check input and the iSCSI vectors of RFC 3720 section B.4.
assert crc32c(b"123456789") == 0xE3069283
assert crc32c(bytes(32)) == 0x8A9136AA
assert crc32c(b"\xff" * 32) == 0x62A8AB43
assert crc32c(bytes(range(32))) == 0x46DD794E
assert crc32c(bytes(range(31, -1, -1))) == 0x113FDB5C

CASES = [
    ("empty", b""),
    ("one_byte", b"a"),
    ("digits", b"1234"),
    ("text", b"hello tfrecord"),
    ("all_bytes", bytes(range(256))),
    ("zeros_1000", bytes(1000)),
    ("repeated_2000", b"0123456789abcdef" * 125),
]

records = []
stream = b""
for name, data in CASES:
  framed = frame(data)
  stream += framed
  records.append({
      "name": name,
      "data": data.hex(),
      "crc32c": "%08x" % crc32c(data),
      "masked_crc32c": "%08x" % masked(data),
      "framed": framed.hex(),
  })

with open("golden.json", "w") as f:
  json.dump({"records": records, "stream": stream.hex()}, f, indent=1)
  f.write("\n")
