#!/usr/bin/python3
"""Writes golden.json: TensorBoard event files computed independently of the Go code.

Run with Debian's /usr/bin/python3 and protoc (packages python3-protobuf, protobuf-compiler):

    /usr/bin/python3 gen_golden.py

The Event and Summary messages come from UPSTREAM_PROTO below, a transcription of TensorFlow's
tensorflow/core/util/event.proto and tensorflow/core/framework/summary.proto (the fields an event
file of scalar summaries uses, with upstream's package, names and numbers), compiled by protoc
--python_out into a temporary directory outside the repository: the repository's own proto/ files
are not used, so a wrong field number there would show as a mismatch. Messages are serialized by
protobuf's Python runtime. The TFRecord framing and its masked CRC-32C are computed here from their
definitions (tensorflow/core/lib/io/record_writer.cc, tensorflow/core/lib/hash/crc32c.h).

Each scenario is what a FileWriter (EventsWriter underneath) writes: the file name
events.out.tfevents.<%010d seconds>.<hostname><suffix>, a first event {wall_time: those seconds,
file_version: "brain.Event:2"}, then one event per add_summary with wall_time = time.time() and
step. base_runner.write_summary's summaries are Summary(value=[Summary.Value(tag, simple_value)]).
Metadata is kept only on the first value of each tag, as SummaryToEventTransformer.add_summary does.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

UPSTREAM_PROTO = r'''
syntax = "proto3";
package tensorflow;

message SummaryMetadata {
  message PluginData {
    string plugin_name = 1;
    bytes content = 2;
  }
  PluginData plugin_data = 1;
  string display_name = 2;
  string summary_description = 3;
  DataClass data_class = 4;
}

enum DataClass {
  DATA_CLASS_UNKNOWN = 0;
  DATA_CLASS_SCALAR = 1;
  DATA_CLASS_TENSOR = 2;
  DATA_CLASS_BLOB_SEQUENCE = 3;
}

message Summary {
  message Value {
    string node_name = 7;
    string tag = 1;
    SummaryMetadata metadata = 9;
    oneof value {
      float simple_value = 2;
      bytes obsolete_old_style_histogram = 3;
    }
  }
  repeated Value value = 1;
}

message Event {
  double wall_time = 1;
  int64 step = 2;
  oneof what {
    string file_version = 3;
    bytes graph_def = 4;
    Summary summary = 5;
    bytes meta_graph_def = 9;
  }
}
'''


def compile_protos():
  tmp = tempfile.mkdtemp(prefix="tbevent_golden_")
  with open(os.path.join(tmp, "upstream_event.proto"), "w") as f:
    f.write(UPSTREAM_PROTO)
  subprocess.run(["protoc", "--proto_path=" + tmp, "--python_out=" + tmp, "upstream_event.proto"],
                 check=True)
  sys.path.insert(0, tmp)
  import upstream_event_pb2  # pylint: disable=import-outside-toplevel
  return upstream_event_pb2


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


assert crc32c(b"123456789") == 0xE3069283  # the CRC catalogue's check value for CRC-32C


def time_time(ns: int) -> float:
  """time.time() for a clock at ns nanoseconds (CPython's _PyTime_AsSecondsDouble)."""
  if ns % 10**9 == 0:
    return float(ns // 10**9)
  return float(ns) / 1e9


# A scenario: the clock (nanoseconds since the epoch) when the writer opens its file, then the
# summaries added, each at its own clock. A value is [tag, float as a string] or
# [tag, float as a string, metadata]; floats are strings so that nan and inf survive JSON.
META = {"plugin_name": "scalars", "content": "0801", "display_name": "Loss",
        "summary_description": "the *training* loss", "data_class": 1}
SCENARIOS = [
    {
        "name": "write_summary",
        "hostname": "golden-host",
        "suffix": "",
        "open_ns": 1700000000750000000,
        "summaries": [
            {"ns": 1700000001500000000, "step": 0, "values": [["loss", "0.1"], ["auc", "0.75"]]},
            {"ns": 1700000002250000001, "step": 100,
             "values": [["loss", "3.4028235e38"], ["global_step", "100"]]},
            {"ns": 1700000003000000000, "step": 1 << 40,
             "values": [["nan", "nan"], ["inf_pos", "1e39"], ["inf_neg", "-1e39"],
                        ["underflow", "1e-46"], ["neg_zero", "-0.0"]]},
            {"ns": 1700000004123456789, "step": -5,
             "values": [["\u635f\u5931/\u4e2d\u6587", "123456789"], ["", "-2.5"]]},
            {"ns": 1700000005000000000, "step": 7, "values": []},
        ],
    },
    {
        "name": "metadata_kept_once",
        "hostname": "host.example.com",
        "suffix": ".v2",
        "open_ns": 999999999999999,
        "summaries": [
            {"ns": 1000000000000000, "step": 1,
             "values": [["loss", "1.5", META], ["acc", "0.5"]]},
            {"ns": 1000001000000000, "step": 2,
             "values": [["loss", "1.25", META], ["acc", "0.625", META]]},
            {"ns": 1000002000000000, "step": 3,
             "values": [["loss", "1", META], ["acc", "0.75", META]]},
        ],
    },
]


def main():
  pb = compile_protos()
  out = []
  for sc in SCENARIOS:
    seconds = sc["open_ns"] // 1000 // 1000000  # EventsWriter: NowMicros() / 1000000
    name = "events.out.tfevents.%010d.%s%s" % (seconds, sc["hostname"], sc["suffix"])
    first = pb.Event(wall_time=seconds, file_version="brain.Event:2")
    records = [first.SerializeToString()]
    seen_tags = set()
    for add in sc["summaries"]:
      summary = pb.Summary()
      for v in add["values"]:
        value = summary.value.add(tag=v[0], simple_value=float(v[1]))
        if len(v) > 2:
          m = v[2]
          value.metadata.plugin_data.plugin_name = m["plugin_name"]
          value.metadata.plugin_data.content = bytes.fromhex(m["content"])
          value.metadata.display_name = m["display_name"]
          value.metadata.summary_description = m["summary_description"]
          value.metadata.data_class = m["data_class"]
      # SummaryToEventTransformer.add_summary, as in TensorFlow's writer.py.
      for value in summary.value:
        if not value.metadata.ByteSize():
          continue
        if value.tag in seen_tags:
          value.ClearField("metadata")
          continue
        seen_tags.add(value.tag)
      event = pb.Event(summary=summary, wall_time=time_time(add["ns"]), step=int(add["step"]))
      records.append(event.SerializeToString())
    out.append({
        "name": sc["name"],
        "scenario": sc,
        "file_name": name,
        "records": [r.hex() for r in records],
        "file": b"".join(frame(r) for r in records).hex(),
    })
  here = os.path.dirname(os.path.abspath(__file__))
  with open(os.path.join(here, "golden.json"), "w") as f:
    json.dump({"scenarios": out}, f, indent=1, ensure_ascii=True)
    f.write("\n")


if __name__ == "__main__":
  main()
