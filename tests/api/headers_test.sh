#!/bin/bash
# Every installed header compiles alone: the C ones as -std=c99 and -std=c11,
# all of them as -std=c++17 and -std=c++20, each with -Wall -Wextra -Werror
# -pedantic. A header added to include/ptsnap/ must be named below as C (usable
# from C and C++) or C++ only, so that none goes unchecked.
#   headers_test.sh SRC_INCLUDE_DIR BUILD_INCLUDE_DIR   (env CC, CXX: compiler commands)
# TAP output, one line per header and standard, the plan at the end.
set -uo pipefail

src_inc=${1:?source include dir}
build_inc=${2:?build include dir (generated version.h)}
: "${CC:?}" "${CXX:?}"

c_headers=" export.h mark.h ptsnap.h stop_indicator.h version.h "
cxx_headers=" decoder.h probe.h recording.h result.h "

headers=()
for h in "$src_inc"/ptsnap/*.h "$build_inc"/ptsnap/*.h; do headers+=("$(basename "$h")"); done

n=0
check() {  # lang std header
  local lang=$1 std=$2 h=$3 compiler out
  n=$((n + 1))
  if [ "$lang" = c ]; then compiler=$CC; else compiler=$CXX; fi
  # The typedef keeps a header of only macros from being an empty
  # translation unit, which -pedantic rejects in C.
  # shellcheck disable=SC2086
  if out=$(printf '#include <ptsnap/%s>\ntypedef int ptsnap_header_check_;\n' "$h" |
    $compiler -std="$std" -Wall -Wextra -Werror -pedantic -fsyntax-only -I"$src_inc" \
      -I"$build_inc" -x "$lang" - 2>&1); then
    echo "ok $n - ptsnap/$h alone as $std"
  else
    echo "not ok $n - ptsnap/$h alone as $std"
    printf '%s\n' "$out" | sed 's/^/# /'
  fi
}

for h in "${headers[@]}"; do
  case $c_headers in
    *" $h "*)
      check c c99 "$h"
      check c c11 "$h"
      ;;
    *)
      case $cxx_headers in
        *" $h "*) ;;
        *)
          n=$((n + 1))
          echo "not ok $n - ptsnap/$h is named in neither list: add it to $0 as C or C++ only"
          ;;
      esac
      ;;
  esac
  check c++ c++17 "$h"
  check c++ c++20 "$h"
done
echo "1..$n"
