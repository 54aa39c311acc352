#!/usr/bin/env bash
# Debian packages the test suite runs that a fresh machine may lack: wrk (the
# benchmarks' smoke runs), valgrind (instruction counts), gdb (a
# crashed proxy's C frames), prometheus (a real
# server scraping perfkit's endpoint), PostgreSQL, Redis and Node.js (the
# proxy's deployment with a database: tests/bench/test_deploy*.py).
# Installs only what is missing; needs root and Debian's package index.
set -euo pipefail
missing=()
command -v wrk >/dev/null || missing+=(wrk)
command -v bc >/dev/null || missing+=(bc)  # benchmarks/sigterm_from_shell.sh's arithmetic
command -v valgrind >/dev/null || missing+=(valgrind)
command -v gdb >/dev/null || missing+=(gdb)  # a crashed proxy's C frames, in its test's failure (tests/support/proxy.py)
command -v prometheus >/dev/null || missing+=(prometheus)
# Debian keeps PostgreSQL's server programs off PATH, under /usr/lib/postgresql/N/bin.
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null || missing+=(postgresql)
command -v redis-server >/dev/null || missing+=(redis-server)
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "the tests need: ${missing[*]}; install them (as root: apt-get install ${missing[*]})" >&2
        exit 1
    fi
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null
fi
