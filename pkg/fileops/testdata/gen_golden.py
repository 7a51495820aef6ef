#!/usr/bin/python3
"""Writes golden.json: the bytes file_ops' writer must produce, computed independently of the Go code.

Run with Debian's /usr/bin/python3 (standard library only): `/usr/bin/python3 gen_golden.py`.
It mirrors the reference op (monolith/native_training/runtime/ops/file_ops.cc): append writes the
bytes as they are; append_entry_dump writes, per item, one TFRecord whose data is the serialized
monolith.hash_table.EntryDump {id: item_id[i], num: [bias[i], embedding row i...]}. EntryDump is
proto2 (`optional sfixed64 id = 1; repeated float num = 2;`), so C++ serializes id as tag 0x09 and
8 little-endian bytes, and each num unpacked as tag 0x15 and 4 little-endian bytes. The CRC-32C is
computed bit by bit (reflected Castagnoli polynomial 0x82F63B78).
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


assert crc32c(b"123456789") == 0xE3069283  # the CRC catalogue's check value


def masked(data: bytes) -> int:
  crc = crc32c(data)
  return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def frame(data: bytes) -> bytes:
  length = struct.pack("<Q", len(data))
  return length + struct.pack("<I", masked(length)) + data + struct.pack("<I", masked(data))


def entry_dumps(item_id, bias, embedding) -> bytes:
  dim = len(embedding) // len(item_id)
  out = b""
  for i, id_ in enumerate(item_id):
    msg = b"\x09" + struct.pack("<q", id_)
    for v in [bias[i]] + embedding[i * dim:(i + 1) * dim]:
      msg += b"\x15" + struct.pack("<f", v)
    out += frame(msg)
  return out


# Every value is exact in float32, so no rounding question arises between the two languages.
CASES = {
    "entry_dump": entry_dumps([1, -2, 1 << 40], [0.5, -1.0, 0.0],
                              [1.0, 2.0, 0.25, -0.75, 3.5, -0.0]),
    "mixed": (b"header\n" + entry_dumps([7], [1.5], [2.0, 4.0, 8.0]) + b"tail" +
              entry_dumps([-1, 0], [0.0, 0.125], [])),
}

with open("golden.json", "w") as f:
  json.dump({name: data.hex() for name, data in CASES.items()}, f, indent=1)
  f.write("\n")
