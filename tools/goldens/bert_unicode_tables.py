#!/usr/bin/env python3
"""Writes sdk/src/text/bert_unicode_tables.cpp: the Unicode data that Hugging Face's `tokenizers`
(the pinned release in requirements-text.txt) uses for BERT, read out of that library itself.

Run from the repository root, in the goldens venv (see tokenizer_goldens.py):
    .venv-goldens/bin/python tools/goldens/bert_unicode_tables.py

Why not utf8proc's tables (Unicode 15 in Debian's utf8proc 2.8): `tokenizers` takes each property
from a different Unicode version, and BertTokenizerFast's output follows those versions. For
tokenizers 0.23.3 (bindings/python/Cargo.lock of its sdist; the wheel's tokenizers.abi3.so):
  - category checks, normalizers/bert.rs and pre_tokenizers/bert.rs: control = is_other()
    = Cc|Cf|Co (not Cn), punctuation = is_ascii_punctuation() || is_punctuation() (P*),
    strip accents = !is_mark_nonspacing() (Mn): the `unicode_categories` 0.1.1 crate, tables
    generated from UnicodeData.txt 8.0 (its newest P* and Mn characters are 8.0's);
  - NFD: `unicode-normalization-alignments` 0.1.12, Unicode 9.0 data (decompositions and
    canonical combining classes; its newest class-bearing characters are 9.0's);
  - whitespace and lower-casing: Rust's std char::is_whitespace and char::to_lowercase of the
    rustc that built the wheel, 1.99.0 (b940084d7 2026-09-28) per its .comment section:
    Unicode 17.0 case data (White_Space has not changed since 6.3);
  - Chinese characters: fixed ranges in normalizers/bert.rs.
The header of the generated file reports the newest character each table holds (by
`unicode_age`), which is how the versions above were read off. Asking the library code point by
code point, rather than parsing a UnicodeData.txt of each version (not fetchable here), makes the
tables exactly the data the wheel runs. Takes about 30 s.
"""
import os
import sys
import unicodedata

import tokenizers
import unicode_age
from tokenizers import normalizers, pre_tokenizers

OUT = os.path.join("sdk", "src", "text", "bert_unicode_tables.cpp")
SURROGATES = range(0xD800, 0xE000)

CLEAN = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=False,
                                   strip_accents=False, lowercase=False)
CJK = normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=True,
                                 strip_accents=False, lowercase=False)
STRIP = normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=False,
                                   strip_accents=True, lowercase=False)
NFD = normalizers.NFD()
LOWER = normalizers.Lowercase()
PRETOKENIZE = pre_tokenizers.BertPreTokenizer()


def code_points():
    return (c for c in range(0x110000) if c not in SURROGATES)


def swaps(first, second):
    """Whether NFD puts `second` before `first`: ccc(first) > ccc(second) > 0."""
    pair = chr(first) + chr(second)
    return first != second and NFD.normalize_str(pair) == pair[::-1]


def combining_class_references():
    """One character per canonical combining class, from Python's unicodedata: the lowest that
    the library's data knows (is not a starter to it; a character's class never changes once
    assigned). A class the library has and Python lacks fails the run loudly below."""
    refs = {}
    for c in code_points():
        ccc = unicodedata.combining(chr(c))
        if (ccc and ccc not in refs and unicodedata.decomposition(chr(c)) == "" and
                (swaps(c, 0x334) or swaps(0x345, c))):
            refs[ccc] = c
    return dict(sorted(refs.items()))


def combining_class(c, refs):
    # ccc(c) > 1 swaps with U+0334 (class 1) behind it; 0 < ccc(c) < 240 swaps with U+0345
    # (class 240) before it; a starter (class 0) never swaps.
    if not (swaps(c, 0x334) or swaps(0x345, c)):
        return 0
    equal = [v for v, r in refs.items() if not swaps(c, r) and not swaps(r, c)]
    if len(equal) != 1:
        sys.exit(f"U+{c:04X}: canonical combining class not among {list(refs)}: {equal}")
    return equal[0]


FNV_OFFSET, FNV_PRIME = 0xCBF29CE484222325, 0x100000001B3


def fnv1a(h, value):
    """64-bit FNV-1a over the four little-endian bytes of `value`."""
    for byte in value.to_bytes(4, "little"):
        h = ((h ^ byte) * FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h


def ranges(cps):
    out = []
    for c in sorted(cps):
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return out


def valued_ranges(values):
    out = []
    for c in sorted(values):
        v = values[c]
        if out and out[-1][1] == c - 1 and out[-1][2] == v:
            out[-1][1] = c
        else:
            out.append([c, c, v])
    return out


def case_runs(mapping):
    """(first, last, stride, delta): every stride-th code point from first to last maps to
    itself + delta. Greedy over the sorted code points, so runs never overlap."""
    out = []
    for c in sorted(mapping):
        d = mapping[c] - c
        if out:
            first, last, stride, delta = out[-1]
            step = c - last
            if delta == d and step in (1, 2) and (first == last or step == stride):
                out[-1] = [first, c, step, delta]
                continue
        out.append([c, c, 1, d])
    return out


def newest(cps):
    ages = [unicode_age.version(c) for c in cps if _assigned(c)]
    return "%d.%d" % max(ages) if ages else "-"


def _assigned(c):
    try:
        return unicode_age.version(c) is not None
    except ValueError:
        return False


def main():
    refs = combining_class_references()
    whitespace, control, punctuation, mark, cjk, decomposable = [], [], [], [], [], []
    ccc, lower, lower_multi = {}, {}, {}
    checksum = FNV_OFFSET
    for c in code_points():
        ch = chr(c)
        pieces = [p for p, _ in PRETOKENIZE.pre_tokenize_str("a" + ch + "a")]
        if pieces == ["a", "a"]:
            whitespace.append(c)
        elif pieces == ["a", ch, "a"]:
            punctuation.append(c)
        elif pieces != ["a" + ch + "a"]:
            sys.exit(f"U+{c:04X}: unexpected pre-tokenization {pieces}")
        if c not in (0, 0xFFFD) and CLEAN.normalize_str(ch) == "":
            control.append(c)
        if CJK.normalize_str(ch) == " " + ch + " ":
            cjk.append(c)
        decomposed = NFD.normalize_str(ch)
        if decomposed != ch:
            decomposable.append(c)
            for x in [c] + [ord(d) for d in decomposed] + [0]:
                checksum = fnv1a(checksum, x)
        else:
            if STRIP.normalize_str(ch) == "":
                mark.append(c)
            v = combining_class(c, refs)
            if v:
                ccc[c] = v
        low = LOWER.normalize_str(ch)
        if len(low) == 1 and low != ch:
            lower[c] = ord(low)
        elif len(low) > 1:
            lower_multi[c] = [ord(x) for x in low]
    if any(len(v) > 3 for v in lower_multi.values()):
        sys.exit("a lower-case mapping longer than 3 characters: widen LowercaseMulti")

    def range_rows(rs):
        return [f"{{0x{a:04X}, 0x{b:04X}}}," for a, b in rs]

    tables = [
        ("Range", "kWhitespace", "Rust char::is_whitespace (pre-tokenizer and text cleaning)",
         whitespace, range_rows(ranges(whitespace))),
        ("Range", "kControl", "unicode_categories is_other(): Cc, Cf, Co (dropped by cleaning)",
         control, range_rows(ranges(control))),
        ("Range", "kPunctuation", "ASCII punctuation and unicode_categories is_punctuation(): P*",
         punctuation, range_rows(ranges(punctuation))),
        ("Range", "kNonspacingMark", "unicode_categories is_mark_nonspacing(): Mn (strip accents)",
         mark, range_rows(ranges(mark))),
        ("Range", "kCjk", "the Chinese-character ranges of BertNormalizer", cjk,
         range_rows(ranges(cjk))),
        ("Range", "kCanonicalDecomposable", "unicode-normalization-alignments: NFD(c) != c",
         decomposable, range_rows(ranges(decomposable))),
        ("ValueRange", "kCombiningClass", "unicode-normalization-alignments: nonzero ccc",
         list(ccc), [f"{{0x{a:04X}, 0x{b:04X}, {v}}}," for a, b, v in valued_ranges(ccc)]),
        ("CaseRun", "kLowercase", "Rust char::to_lowercase, one-character mappings", list(lower),
         [f"{{0x{a:04X}, 0x{b:04X}, {s}, {d}}}," for a, b, s, d in case_runs(lower)]),
        ("LowercaseMulti", "kLowercaseMulti", "Rust char::to_lowercase, longer mappings",
         list(lower_multi),
         ["{0x%04X, {%s}}," % (c, ", ".join("0x%04X" % x for x in m + [0] * (3 - len(m))))
          for c, m in sorted(lower_multi.items())]),
    ]

    lines = [
        "// Generated by tools/goldens/bert_unicode_tables.py from Hugging Face tokenizers "
        f"{tokenizers.__version__}; do not edit.",
        "// Regenerate (in the goldens venv, see tools/goldens/requirements-text.txt) with:",
        "//   .venv-goldens/bin/python tools/goldens/bert_unicode_tables.py",
        "// Newest character in each table (Unicode version, by unicode_age "
        f"{'.'.join(map(str, unicode_age.unicode_age_db.UCD_VERSION))}):",
    ]
    for _, name, what, cps, _ in tables:
        age = "-" if name == "kCjk" else newest(cps)  # fixed ranges, unassigned code points too
        lines.append(f"//   {name:<24} {age:>5}  {what}")
    lines += ["// clang-format off", '#include "text/bert_unicode_tables.h"', "",
              "namespace tenax::sdk::bert_unicode_tables {", ""]
    for kind, name, what, _, rows in tables:
        lines.append(f"// {what}")
        lines.append(f"const {kind} {name}[] = {{")
        lines += ["    " + r for r in rows]
        lines.append("};")
        lines.append(f"const std::size_t {name}Size = sizeof {name} / sizeof {name}[0];")
        lines.append("")
    lines.append("// FNV-1a (64-bit, over little-endian 32-bit values) of every decomposable code point, its")
    lines.append("// full canonical decomposition and a 0, in order: what NFD must produce for each.")
    lines.append(f"const std::uint64_t kDecompositionChecksum = 0x{checksum:016X}ULL;")
    lines.append("")
    lines.append("}  // namespace tenax::sdk::bert_unicode_tables")
    with open(OUT, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{OUT}: " + ", ".join(f"{name} {len(rows)}" for _, name, _, _, rows in tables))


if __name__ == "__main__":
    main()
