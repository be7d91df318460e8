# proofbot: the Slack bot in a container. Build: docker build -t proofbot .
# Run (Socket Mode):
#   docker run -e SLACK_BOT_TOKEN -e SLACK_APP_TOKEN \
#     -v proofbot-audit:/var/lib/proofbot \
#     -v $PWD/inventory.yml:/etc/proofbot/inventory.yml:ro \
#     -v $HOME/.ssh/proofbot_ed25519:/home/proofbot/.ssh/id_ed25519:ro \
#     -v $HOME/.ssh/known_hosts:/home/proofbot/.ssh/known_hosts:ro \
#     proofbot
FROM python:3.11-slim

RUN groupadd --system proofbot \
 && useradd --system --gid proofbot --create-home --home-dir /home/proofbot proofbot \
 && mkdir -p /var/lib/proofbot /etc/proofbot /home/proofbot/.ssh \
 && chown proofbot:proofbot /var/lib/proofbot /home/proofbot/.ssh \
 && chmod 700 /home/proofbot/.ssh

WORKDIR /app
COPY pyproject.toml README.md ./
COPY commands ./commands
COPY bot ./bot
RUN pip install --no-cache-dir . && rm -rf /root/.cache

ENV PROOFBOT_INVENTORY=/etc/proofbot/inventory.yml \
    PROOFBOT_DB=/var/lib/proofbot/proofbot.db \
    PYTHONUNBUFFERED=1
VOLUME ["/var/lib/proofbot"]
USER proofbot
ENTRYPOINT ["proofbot", "serve"]
