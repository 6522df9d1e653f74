#!/usr/bin/env python3
"""The fields of transformers' TrainingArguments and Seq2SeqTrainingArguments, per pinned release.

Tenax answers every one of them (sdk/src/hf_field_table.h): honoured under its own key, read
under an old spelling, accepted when its value asks for what Tenax does, or refused with a
reason. tests/sdk/hf_field_table_test.cpp reads the lists this script writes and fails on a field
that is none of these, so a field added by a new transformers cannot go unanswered.

The fields are read from transformers' source with `ast`, without importing it (no torch needed):
the dataclass fields that __init__ takes (`field(init=False)` ones, such as `_n_gpu`, are left
out). Two releases are pinned: the one the model goldens use (tools/goldens/requirements-model.txt)
and today's PyPI release (bench/requirements-hf-pypi.txt).

    python3 tools/goldens/training_argument_fields.py --wheel transformers-4.44.2-py3-none-any.whl
    python3 tools/goldens/training_argument_fields.py --wheel transformers-5.23.0-py3-none-any.whl

(`pip download transformers==X --no-deps -d DIR` fetches a wheel; `--source DIR` reads an
installed package's directory instead.) Each run writes
tests/sdk/goldens/hf_training_argument_fields-<version>.json.
"""
import argparse
import ast
import json
import pathlib
import re
import zipfile

REPO = pathlib.Path(__file__).resolve().parents[2]
GOLDENS = REPO / "tests" / "sdk" / "goldens"


def init_fields(source: str, class_name: str) -> list:
    """The names of `class_name`'s dataclass fields that __init__ takes, in declaration order."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            names = []
            for statement in node.body:
                if not isinstance(statement, ast.AnnAssign) or not isinstance(statement.target, ast.Name):
                    continue
                value = statement.value
                takes_init = not (
                    isinstance(value, ast.Call)
                    and any(k.arg == "init" and isinstance(k.value, ast.Constant) and k.value.value is False
                            for k in value.keywords))
                if takes_init:
                    names.append(statement.target.id)
            return names
    raise SystemExit(f"no class {class_name} in the source")


def read_sources(args) -> tuple:
    """(version, training_args.py, training_args_seq2seq.py) from a wheel or a package directory."""
    if args.wheel:
        with zipfile.ZipFile(args.wheel) as wheel:
            read = lambda name: wheel.read(f"transformers/{name}").decode()  # noqa: E731
            version_file = read("__init__.py")
            return (re.search(r'__version__ = "([^"]+)"', version_file).group(1), read("training_args.py"),
                    read("training_args_seq2seq.py"))
    package = pathlib.Path(args.source)
    version = re.search(r'__version__ = "([^"]+)"', (package / "__init__.py").read_text()).group(1)
    return version, (package / "training_args.py").read_text(), (package / "training_args_seq2seq.py").read_text()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--wheel", help="a transformers wheel (pip download transformers==X --no-deps)")
    where.add_argument("--source", help="an installed transformers package directory")
    args = parser.parse_args()
    version, training_args, seq2seq = read_sources(args)
    fields = init_fields(training_args, "TrainingArguments")
    seq2seq_only = [f for f in init_fields(seq2seq, "Seq2SeqTrainingArguments") if f not in fields]
    out = GOLDENS / f"hf_training_argument_fields-{version}.json"
    out.write_text(json.dumps({
        "transformers": version,
        "made_by": "tools/goldens/training_argument_fields.py",
        "TrainingArguments": fields,
        "Seq2SeqTrainingArguments": seq2seq_only,
    }, indent=1) + "\n")
    print(f"{out}: {len(fields)} + {len(seq2seq_only)} fields of transformers {version}")


if __name__ == "__main__":
    main()
