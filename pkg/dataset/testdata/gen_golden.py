#!/usr/bin/python3
"""Writes patterns_golden.json: file patterns computed by the reference's own code.

Run from this directory with Debian's python3 (standard library only):

    python3 gen_golden.py /path/to/monolith/native_training/data/datasets.py

The reference module imports TensorFlow, so it is not imported: the two functions are cut out of
its source with ast and executed as they are, with TensorFlow's gfile.glob replaced by glob.glob
and absl's flags and logging by stubs:
  - PBDataset.gen_patterns (the flag fallbacks return their defaults);
  - the --dataset_input_patterns expansion of DatasetMetaclass.__call__ (the body of its
    `if FLAGS.dataset_input_patterns:`), run in a temporary tree of the files listed in TREE;
    output paths are written relative to that tree.
"""
import ast
import glob
import json
import os
import re
import sys
import tempfile
import textwrap
import types
from datetime import datetime, timedelta
from typing import List

TREE = [
    "data_20201120/hour_0/part_0",
    "data_20201120/hour_1/part_0",
    "data_20201120/hour_1/part_2",
    "data_20201121/hour_0/part_1",
    "data_20201122/hour_5/part_3",
    "h/2020112023/x",
    "h/2020112100/x",
    "n/7",
    "n/10",
]

GEN_PATTERNS = [
    dict(input_path="/data", start_date=20201120, end_date=20201123),
    dict(input_path="/data/", start_date=20201130, end_date=20201202, wildcard="part-*"),
    dict(input_path="/data", start_date=20201120, start_hour=5, end_date=20201122),
    dict(input_path="/data", start_date=20201120, start_hour=22, end_date=20201121, end_hour=2, is_hourly=True),
    dict(input_path="rel", start_date=20200228, start_hour=23, end_date=20200301, end_hour=1, is_hourly=True, wildcard="/*.gz"),
    dict(input_path="/data", start_date=20201120, end_date=20201120),
    dict(input_path="/data", start_date=20201122, end_date=20201120),
    dict(input_path="", start_date=20201120, end_date=20201122),
    dict(input_path="/data", start_date=None, end_date=20201122),
    dict(input_path="/data", start_date=20201120, end_date=20201121, wildcard="/abs"),
]

TEMPLATES = [
    "data_{DATE(20201120, 20201122)}/hour_{INT(0, 5)}/part_{INT(0, 3)}",
    "data_{DATE(20201120,20201121)}/hour_{INT(0,1)}/*",
    "h/{DATE(2020112022,2020112101)}/x",
    "n/{INT(5,12)}",
    "n/{INT(12,5)}",
    "data_{DATE(20201123,20201125)}/*/*",
    "n/{INT(7,7)}{INT(0,0)}",
]


def load(source):
  return ast.parse(source), source


def gen_patterns_fn(tree, source):
  for node in ast.walk(tree):
    if isinstance(node, ast.ClassDef) and node.name == "PBDataset":
      for item in node.body:
        if isinstance(item, ast.FunctionDef) and item.name == "gen_patterns":
          code = textwrap.dedent(ast.get_source_segment(source, item, padded=True))
          ns = dict(List=List, datetime=datetime, timedelta=timedelta, os=os,
                    _get_params=lambda name, default=None: default)
          exec(code, ns)
          return ns["gen_patterns"]
  raise SystemExit("PBDataset.gen_patterns not found")


def template_fn(tree, source):
  for node in ast.walk(tree):
    if isinstance(node, ast.If) and ast.get_source_segment(source, node.test) == "FLAGS.dataset_input_patterns":
      body = "\n".join(textwrap.dedent(ast.get_source_segment(source, s, padded=True)) for s in node.body)
      code = "def expand(FLAGS, kwargs):\n" + textwrap.indent(body, "  ") + "\n  return kwargs['patterns']\n"
      log = types.SimpleNamespace(info=lambda *a, **k: None, warning=lambda *a, **k: None)
      tf = types.SimpleNamespace(io=types.SimpleNamespace(gfile=types.SimpleNamespace(glob=glob.glob)))
      ns = dict(re=re, datetime=datetime, timedelta=timedelta, logging=log, tf=tf)
      exec(code, ns)
      return ns["expand"]
  raise SystemExit("the dataset_input_patterns block was not found")


def main():
  tree, source = load(open(sys.argv[1]).read())
  gen = gen_patterns_fn(tree, source)
  expand = template_fn(tree, source)
  out = {"tree": TREE, "gen_patterns": [], "templates": []}
  for args in GEN_PATTERNS:
    out["gen_patterns"].append({"args": args, "patterns": gen(None, **args)})
  with tempfile.TemporaryDirectory() as root:
    for f in TREE:
      os.makedirs(os.path.join(root, os.path.dirname(f)), exist_ok=True)
      open(os.path.join(root, f), "w").close()
    cwd = os.getcwd()
    os.chdir(root)
    try:
      for t in TEMPLATES:
        case = {"template": t}
        try:
          case["patterns"] = expand(types.SimpleNamespace(dataset_input_patterns=t), {})
        except AssertionError as e:
          case["error"] = "AssertionError: " + str(e)
        out["templates"].append(case)
    finally:
      os.chdir(cwd)
  with open("patterns_golden.json", "w") as f:
    json.dump(out, f, indent=2, sort_keys=True)
    f.write("\n")


if __name__ == "__main__":
  main()
