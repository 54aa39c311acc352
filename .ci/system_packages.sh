#!/usr/bin/env bash
# Debian packages the test suite runs that a fresh machine may lack: wrk (the
# benchmarks' smoke runs), valgrind (instruction counts), prometheus (a real
# server scraping perfkit's endpoint). Installs only what
# is missing; needs root and Debian's package index.
set -euo pipefail
missing=()
command -v wrk >/dev/null || missing+=(wrk)
command -v valgrind >/dev/null || missing+=(valgrind)
command -v prometheus >/dev/null || missing+=(prometheus)
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "the tests need: ${missing[*]}; install them (as root: apt-get install ${missing[*]})" >&2
        exit 1
    fi
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null
fi
