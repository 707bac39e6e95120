#!/bin/sh
# Builds the agent against an installed ptsnap (pkg-config ptsnap).
# `./build.sh --static` links libptsnap.a instead of libptsnap.so.
set -e
cd "$(dirname "$0")"
static=
[ "$1" = "--static" ] && static=--static
# With --static, name the archive: the linker would pick the .so beside it.
libs=$(pkg-config $static --libs ptsnap)
[ -n "$static" ] && libs=$(echo "$libs" | sed "s/-lptsnap\b/-l:libptsnap.a/")
# shellcheck disable=SC2046,SC2086
${CXX:-c++} -std=c++20 -O1 -o agent agent.cpp $(pkg-config --cflags ptsnap) $libs
