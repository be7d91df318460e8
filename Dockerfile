# proofbot: the Slack bot in a container. Build: docker build -t proofbot .
# Run (Socket Mode):
#   docker run -e SLACK_BOT_TOKEN -e SLACK_APP_TOKEN \
#     -v proofbot-audit:/var/lib/proofbot \
#     -v $PWD/inventory.yml:/etc/proofbot/inventory.yml:ro \
#     -v $HOME/.ssh/proofbot_ed25519:/home/proofbot/.ssh/id_ed25519:ro \
#     -v $HOME/.ssh/known_hosts:/home/proofbot/.ssh/known_hosts:ro \
#     proofbot
# HTTP mode: add -e SLACK_SIGNING_SECRET -p 3000:3000 and the arguments `--http 3000`.
# The bot runs as UID/GID 10001: the mounted key must be readable by it (chmod 0400, owner 10001).

# Build stage: wheels for exactly the pinned runtime dependencies (requirements.lock) and proofbot.
FROM python:3.11-slim AS build
WORKDIR /src
COPY requirements.lock pyproject.toml README.md ./
COPY commands ./commands
COPY bot ./bot
RUN pip wheel --no-cache-dir --wheel-dir /wheels -r requirements.lock \
 && pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

# Runtime stage: no compiler, no build cache, no supervisor (only `proofbot demo` uses one).
FROM python:3.11-slim
RUN groupadd --system --gid 10001 proofbot \
 && useradd --system --uid 10001 --gid proofbot --create-home --home-dir /home/proofbot proofbot \
 && mkdir -p /var/lib/proofbot /etc/proofbot /home/proofbot/.ssh \
 && chown proofbot:proofbot /var/lib/proofbot /home/proofbot/.ssh \
 && chmod 700 /home/proofbot/.ssh
COPY --from=build /wheels /wheels
COPY requirements.lock /tmp/requirements.lock
RUN pip install --no-cache-dir --no-index --find-links /wheels -r /tmp/requirements.lock proofbot \
 && rm -rf /wheels /tmp/requirements.lock

ENV PROOFBOT_INVENTORY=/etc/proofbot/inventory.yml \
    PROOFBOT_DB=/var/lib/proofbot/proofbot.db \
    PYTHONUNBUFFERED=1
VOLUME ["/var/lib/proofbot"]
EXPOSE 3000
USER proofbot
# Healthy while a serve holds the audit database (its lock is taken by the kernel, freed at exit).
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s CMD ["proofbot", "serve", "--check"]
ENTRYPOINT ["proofbot", "serve"]
