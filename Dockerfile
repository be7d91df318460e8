# proofbot: the Slack bot in a container, built without a registry: the base is a local image made
# from a Debian bookworm rootfs, pinned by its image ID, and the wheels are downloaded outside the
# build with their sha256 checked. Build: scripts/image (see docs/docker.md).
# Run (Socket Mode):
#   docker run -e SLACK_BOT_TOKEN -e SLACK_APP_TOKEN \
#     -v proofbot-audit:/var/lib/proofbot \
#     -v $PWD/inventory.yml:/etc/proofbot/inventory.yml:ro \
#     -v $PWD/keys/id_ed25519:/home/proofbot/.ssh/id_ed25519:ro \
#     -v $PWD/keys/known_hosts:/home/proofbot/.ssh/known_hosts:ro \
#     proofbot
# The bot runs as UID/GID 10001: the mounted key must be readable by it (owner 10001, mode 0400).

# The base: no default, so a build never pulls an image it was not given (scripts/image passes the
# ID of the image it imported from the rootfs: BASE=sha256:...).
ARG BASE

# Build stage: a venv with exactly the hash-pinned runtime dependencies, then proofbot's own wheel.
# pip runs from its own hash-checked wheel (bookworm's python3 has no pip); it is in the lock because
# sqlite-utils requires it. Byte-compiled here: UID 10001 cannot write __pycache__ under /opt.
FROM ${BASE} AS build
COPY requirements.lock /tmp/
COPY build/docker/deps /wheels
RUN python3 -m venv --without-pip /opt/proofbot \
 && /opt/proofbot/bin/python "$(echo /wheels/pip-*.whl)/pip" install --no-index --find-links /wheels \
      --disable-pip-version-check --require-hashes -r /tmp/requirements.lock
COPY build/docker/app /app
RUN /opt/proofbot/bin/python "$(echo /wheels/pip-*.whl)/pip" install --no-index --no-deps \
      --disable-pip-version-check /app/proofbot-*.whl

# Runtime stage: the base plus the venv; no wheels, no compiler.
FROM ${BASE}
ARG BASE
# The pin, recorded in the image: the ID of the base it was built on (tests check it against the layers).
LABEL org.proofbot.base="${BASE}"
RUN groupadd --system --gid 10001 proofbot \
 && useradd --system --uid 10001 --gid proofbot --create-home --home-dir /home/proofbot proofbot \
 && mkdir -p /var/lib/proofbot /etc/proofbot /home/proofbot/.ssh \
 && chown proofbot:proofbot /var/lib/proofbot /home/proofbot/.ssh \
 && chmod 700 /home/proofbot/.ssh
COPY --from=build /opt/proofbot /opt/proofbot

ENV PATH=/opt/proofbot/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PROOFBOT_INVENTORY=/etc/proofbot/inventory.yml \
    PROOFBOT_DB=/var/lib/proofbot/proofbot.db \
    PYTHONUNBUFFERED=1
VOLUME ["/var/lib/proofbot"]
EXPOSE 3000
USER proofbot
WORKDIR /home/proofbot
# Healthy while a serve holds the audit database (its lock is taken by the kernel, freed at exit).
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s CMD ["proofbot", "serve", "--check"]
ENTRYPOINT ["proofbot", "serve"]
