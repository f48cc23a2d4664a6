#!/usr/bin/env bash
# asyncpg and aiohttp from PyPI, for the task verdicts on real asyncio clients and servers
# (tests/integration/test_why_peers.py), in $PYUNWIND_CACHE/aioservices/<abi>/site-packages
# (tools/pip-target.sh; both are compiled). Every package is pinned, dependencies included. The
# PostgreSQL server asyncpg talks to is Debian's (tools/test-env.sh installs it).
#
# usage: tools/aioservices.sh PIP   (a pip that can download for other Pythons: the test venv's)
set -euo pipefail

PIP="${1:?usage: tools/aioservices.sh PIP}"
exec bash "$(dirname "$0")/pip-target.sh" aioservices "$PIP" "asyncpg==0.32.0 aiohttp==3.14.5 \
aiohappyeyeballs==2.7.1 aiosignal==1.4.0 attrs==26.1.0 frozenlist==1.8.0 multidict==7.2.1 \
propcache==0.5.4 typing-extensions==4.16.0 yarl==1.25.1 idna==3.20"
