# The deltamem REST server. Build: docker build -t deltamem-server .
# Run on SQLite (a volume):  docker run -p 8080:8080 -v deltamem:/data deltamem-server
# Run on PostgreSQL:          compose.yaml (docker compose up), see docs/deployment.md.
# Keys:                       docker run --rm -v deltamem:/data deltamem-server keys create --space agent-1
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip wheel --no-cache-dir --wheel-dir /wheels ".[server,postgres]"

FROM python:3.11-slim
RUN useradd --uid 10001 --create-home deltamem && mkdir /data && chown deltamem /data
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links /wheels "deltamem[server,postgres]" \
    && rm -rf /wheels
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
