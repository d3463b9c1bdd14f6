# startd, an HTCondor execution point (condor_startd emulator), in a container.
#
#   docker build -t startd .
#   docker volume create startd-state
#   docker run -d --name startd --hostname exec-01 -v startd-state:/var/lib/startd \
#       --stop-timeout 105 -e _CONDOR_MachineMaxVacateTime=30 \
#       -e _CONDOR_NUM_CPUS=4 -e _CONDOR_STARTD_MQTT_PREFIX=htcondor \
#       startd --broker mqtt://broker.example.org:1883
#   docker exec startd startd status
#
# Build arguments:
#   BASE_IMAGE  the Python base (default the official python:3.11-slim). Where it cannot be pulled, build a
#               stand-in from Debian's packages with deploy/base-image.sh and pass its tag.
#   SITE_CA     a site's CA certificates (PEM text, added to the base's own bundle) for pip behind an
#               intercepting proxy, used only while the wheels are built:
#                   --build-arg SITE_CA="$(cat /usr/local/share/ca-certificates/*.crt)"
#               It stays in the build stage; the final image holds no trace of it.
#
# Configuration comes from the environment, as HTCondor's containers do it: CONDOR_CONFIG=ONLY_ENV reads no
# file and every knob can be set as _CONDOR_<KNOB> (or mount a file and set CONDOR_CONFIG to it). Without
# --broker the daemon starts its embedded broker on 127.0.0.1 inside the container.
#
# State: LOG, SPOOL and EXECUTE live under the one volume /var/lib/startd (log/, spool/, execute/), made at
# start by whichever user the container runs as: the image's startd user (uid 999), any uid with --user
# UID:0 (the directory is group 0 and group-writable), or the owner of a bind-mounted directory with
# --user UID. A volume the user cannot write is refused in one line, exit 2.
#
# Stopping: SIGTERM (docker stop) is HTCondor's graceful shutdown: each job is vacated with its
# MachineMaxVacateTime (default 10 minutes), then killed after KILLING_TIMEOUT (30 s). docker stop waits 10 s
# before SIGKILL unless told otherwise, so give it the time the configuration needs:
#   docker run --rm --entrypoint startd -e _CONDOR_MachineMaxVacateTime=30 startd stop-timeout    # 105
#   docker run -d --stop-timeout 105 -e _CONDOR_MachineMaxVacateTime=30 ... startd
# `startd stop-timeout` prints the seconds the configuration's graceful shutdown may take (compose:
# stop_grace_period). SIGQUIT (docker kill -s QUIT) is the fast shutdown.
#
# The daemon is PID 1: it reaps every orphaned process that ends in the container (a job's grandchildren).

ARG BASE_IMAGE=python:3.11-slim

# --- build: the wheels, and a virtual environment made from them ------------------------------------
FROM ${BASE_IMAGE} AS build
ARG SITE_CA=""
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY startd ./startd
RUN set -eu; \
    if [ -n "$SITE_CA" ]; then \
        { cat /etc/ssl/certs/ca-certificates.crt 2>/dev/null || true; printf '%s\n' "$SITE_CA"; } > /tmp/site-ca.pem; \
        export PIP_CERT=/tmp/site-ca.pem; \
    fi; \
    python3 -m venv /tmp/builder; \
    /tmp/builder/bin/pip wheel --quiet --wheel-dir /wheels .; \
    python3 -m venv /opt/startd; \
    /opt/startd/bin/pip install --quiet --no-index --find-links /wheels startd; \
    /opt/startd/bin/pip uninstall --quiet --yes pip setuptools wheel 2>/dev/null || true; \
    find /opt/startd -name '__pycache__' -prune -exec rm -rf {} +; \
    /opt/startd/bin/python -c 'import startd, startd.cli'

# --- the image: the environment and the policy files, nothing of the source tree ---------------------
FROM ${BASE_IMAGE}
ENV PATH=/opt/startd/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    STARTD_POLICY_DIR=/usr/share/startd/policies \
    CONDOR_CONFIG=ONLY_ENV \
    _CONDOR_LOCAL_DIR=/var/lib/startd \
    _CONDOR_LOG=/var/lib/startd/log \
    _CONDOR_SPOOL=/var/lib/startd/spool \
    _CONDOR_EXECUTE=/var/lib/startd/execute \
    _CONDOR_SEC_PASSWORD_DIRECTORY=/var/lib/startd/spool/passwords.d \
    _CONDOR_SEC_TOKEN_SYSTEM_DIRECTORY=/var/lib/startd/spool/tokens.d \
    _CONDOR_RUNBENCHMARKS=False \
    _CONDOR_STARTD_DIRECTORY_FALLBACK=False
COPY --from=build /opt/startd /opt/startd
COPY policies /usr/share/startd/policies
COPY configs /usr/share/startd/configs

# The daemon runs as an unprivileged user: every job then runs as that user too (a root daemon would run
# each job as its Owner, who must exist in the container). /var/lib/startd is group 0 and group-writable,
# so an arbitrary uid with group 0 (--user UID:0) can use it as well.
RUN set -eu; \
    if command -v useradd >/dev/null; then \
        useradd --system --uid 999 --gid 0 --home-dir /var/lib/startd --no-create-home --shell /usr/sbin/nologin startd; \
    else \
        echo 'startd:x:999:0:startd:/var/lib/startd:/usr/sbin/nologin' >> /etc/passwd; \
    fi; \
    mkdir -p /var/lib/startd; \
    chown 999:0 /var/lib/startd; \
    chmod 2775 /var/lib/startd
USER 999:0
WORKDIR /var/lib/startd
VOLUME ["/var/lib/startd"]

# Healthy while the daemon answers a query and its engine loop and broker are within their bounds
# (STARTD_HEALTH_STALL_LIMIT, STARTD_HEALTH_BROKER_LIMIT): see `startd health --help`.
HEALTHCHECK --interval=30s --timeout=15s --start-period=30s --retries=3 \
    CMD startd health || exit 1

STOPSIGNAL SIGTERM
ENTRYPOINT ["startd", "run"]
CMD []
