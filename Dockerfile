# memsys as a container, for docker compose (see docker-compose.yml). It connects to the database named
# by MEMSYS_DATABASE_URL and applies the migrations at start-up.
FROM python:3.11-slim

# A CPU build of PyTorch keeps the image small; point PIP_EXTRA_INDEX_URL at a CPU wheel index if your
# registry only serves the CUDA build.
ARG TORCH_SPEC="torch==2.13.0"
ARG PIP_EXTRA_INDEX_URL=""
ENV PIP_NO_CACHE_DIR=1 PIP_EXTRA_INDEX_URL=${PIP_EXTRA_INDEX_URL} \
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1

WORKDIR /srv/memsys
COPY pyproject.toml README.md ./
COPY app ./app
COPY migrations ./migrations
COPY sql ./sql
RUN pip install "${TORCH_SPEC}" && pip install -e .
# The bundled embedding model's ONNX export (MEMSYS_EMBEDDING_RUNTIME=onnx), made once here rather than at
# every container start.
RUN python -c "from app.providers.embeddings import BUNDLED_MODEL, LocalEmbedder; LocalEmbedder(BUNDLED_MODEL, 384, 64).load()"

ENV MEMSYS_HOST=0.0.0.0 MEMSYS_PORT=1995
EXPOSE 1995
CMD ["memsys", "serve"]
