#!/usr/bin/env bash
# The C and C++ sources in .clang-format's layout (Debian 12's clang-format 14; another version
# lays some constructs out differently, so the version is pinned).
#   bash tools/check_format.sh          # fails naming each file and line that differs
#   bash tools/check_format.sh --fix    # rewrites them (`make format`)
set -euo pipefail
cd "$(dirname "$0")/.."
fmt=${CLANG_FORMAT:-clang-format-14}
if ! command -v "$fmt" >/dev/null; then
  echo "check_format: $fmt not found; install it with: bash tools/bootstrap.sh (package clang-format-14)" >&2
  exit 1
fi
if [ -d .git ] || [ -f .git ]; then
  mapfile -d '' files < <(git ls-files -z -- '*.cpp' '*.h' '*.c')
else
  mapfile -d '' files < <(find . -path ./build -prune -o \( -name '*.cpp' -o -name '*.h' -o -name '*.c' \) -print0)
fi
if [ "${1:-}" = "--fix" ]; then
  "$fmt" -i "${files[@]}"
else
  "$fmt" --dry-run -Werror "${files[@]}"
fi
