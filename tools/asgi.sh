#!/usr/bin/env bash
# FastAPI under uvicorn from PyPI, for the event-loop verdict on a real ASGI service
# (tests/integration/test_why_fastapi.py), in $PYUNWIND_CACHE/fastapi/<abi>/site-packages
# (tools/pip-target.sh; pydantic-core is compiled). Every package is pinned, dependencies
# included.
#
# usage: tools/asgi.sh PIP   (a pip that can download for other Pythons: the test venv's)
set -euo pipefail

PIP="${1:?usage: tools/asgi.sh PIP}"
exec bash "$(dirname "$0")/pip-target.sh" fastapi "$PIP" "fastapi==0.165.0 uvicorn==0.54.0 \
starlette==1.10.0 pydantic==2.14.4 pydantic-core==2.50.5 anyio==4.16.0 h11==0.16.0 click==8.5.1 \
idna==3.20 typing-extensions==4.16.0 typing-inspection==0.4.5 annotated-types==0.8.0 \
annotated-doc==0.0.7 opentelemetry-api==1.45.2"
