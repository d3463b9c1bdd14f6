# startd, an HTCondor execution point (condor_startd emulator), in a container.
#
#   docker build -t startd .
#   docker run -d --name startd --hostname exec-01 \
#       -e _CONDOR_NUM_CPUS=4 -e _CONDOR_STARTD_MQTT_PREFIX=htcondor \
#       startd --broker mqtt://broker.example.org:1883
#
# Configuration comes from the environment, as HTCondor's containers do it: CONDOR_CONFIG=ONLY_ENV reads
# no file, and every knob can be set as _CONDOR_<KNOB> (or mount a file and set CONDOR_CONFIG to it).
# Without --broker the daemon starts its embedded broker on 127.0.0.1 inside the container, reachable
# only from there (docker exec startd startd status).

FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    STARTD_POLICY_DIR=/opt/startd/policies \
    CONDOR_CONFIG=ONLY_ENV \
    _CONDOR_LOCAL_DIR=/var/lib/startd \
    _CONDOR_LOG=/var/lib/startd/log \
    _CONDOR_SPOOL=/var/lib/startd/spool \
    _CONDOR_EXECUTE=/var/lib/startd/execute \
    _CONDOR_RUNBENCHMARKS=False

WORKDIR /opt/startd

COPY pyproject.toml README.md ./
COPY startd ./startd
COPY policies ./policies
COPY configs ./configs
RUN pip install . && rm -rf build *.egg-info

# The daemon runs as an unprivileged user: every job then runs as that user too (a root daemon would
# run each job as its Owner, who must exist in the container).
RUN useradd --system --home-dir /var/lib/startd --create-home --shell /usr/sbin/nologin startd \
    && mkdir -p /var/lib/startd/log /var/lib/startd/spool /var/lib/startd/execute \
    && chown -R startd: /var/lib/startd
USER startd
VOLUME ["/var/lib/startd"]

# Healthy while this machine's startd says "online" on the broker in its address file.
HEALTHCHECK --interval=30s --timeout=10s --start-period=20s --retries=3 \
    CMD ["python", "-m", "startd.daemon", "--healthcheck"]

# SIGTERM (docker stop) vacates the jobs with their MachineMaxVacateTime: give docker stop enough
# time (docker stop -t 620, or lower MachineMaxVacateTime), or send SIGQUIT for a fast shutdown.
STOPSIGNAL SIGTERM
ENTRYPOINT ["startd", "run"]
CMD []
