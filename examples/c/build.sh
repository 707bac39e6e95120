#!/bin/sh
# Builds the C example against an installed ptsnap (pkg-config ptsnap).
set -e
cd "$(dirname "$0")"
# shellcheck disable=SC2046
${CC:-cc} -std=c99 -Wall -O1 -o top top.c $(pkg-config --cflags --libs ptsnap)
