#!/bin/sh
# Builds the C examples against an installed ptsnap (pkg-config ptsnap):
# top (the C ABI) and requests (ptsnap/mark.h, header-only).
set -e
cd "$(dirname "$0")"
# shellcheck disable=SC2046
${CC:-cc} -std=c99 -Wall -O1 -o top top.c $(pkg-config --cflags --libs ptsnap)
# shellcheck disable=SC2046
${CC:-cc} -std=c99 -Wall -O1 -o requests requests.c $(pkg-config --cflags ptsnap)
