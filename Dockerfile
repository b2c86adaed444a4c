# The deltamem REST server. Build: docker build -t deltamem-server .
# Run on SQLite (a volume):  docker run -p 127.0.0.1:8080:8080 -v deltamem:/data deltamem-server
# Run on PostgreSQL:          compose.yaml (docker compose up), see docs/deployment.md.
# Keys:                       docker run --rm -v deltamem:/data deltamem-server keys create --space agent-1
#
# Base image: a tag by default; pin it by digest for a reproducible build, e.g.
#   docker build --build-arg PYTHON_IMAGE=python:3.11-slim@sha256:<digest> .
# (docs/deployment.md: how to read the digest; none is written here because none was verified).
ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
# Only deltamem's own wheel: its build backend comes through pip's build isolation; no
# dependency is fetched here.
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM ${PYTHON_IMAGE}
# PIP_NO_INDEX=1: install the dependencies only from ./wheelhouse (an offline build; fill it
# with `pip download -d wheelhouse "deltamem[server,postgres]"` on a connected machine).
ARG PIP_NO_INDEX=0
RUN useradd --uid 10001 --create-home deltamem && mkdir /data && chown deltamem /data
# The wheel and the wheelhouse are mounted for this one step, never copied into a layer
# (RUN --mount: BuildKit, the default builder since Docker 23).
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    --mount=type=bind,source=wheelhouse,target=/wheelhouse \
    pip install --no-cache-dir --find-links /wheelhouse \
    "$(ls /wheels/deltamem-*.whl)[server,postgres]"
USER deltamem
# A SQLite file in the volume unless DELTAMEM_DB names a postgresql:// URL.
ENV DELTAMEM_DB=/data/deltamem.db \
    OPENBLAS_NUM_THREADS=1 \
    PYTHONUNBUFFERED=1
VOLUME /data
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=5s --retries=6 \
    CMD ["python", "-c", "import httpx; httpx.get('http://127.0.0.1:8080/readyz', timeout=4).raise_for_status()"]
ENTRYPOINT ["deltamem"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8080"]
