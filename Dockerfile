# The gateway as a container: slim Python, non-root, config mounted at /app/config.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app

COPY pyproject.toml README.md ./
COPY gateway ./gateway
RUN pip install --no-cache-dir ".[otel,cloud,mcp]" \
    && useradd --create-home --uid 10001 gateway \
    && mkdir -p /app/config /app/state && chown gateway /app/state

COPY config/gateway.example.toml ./config/gateway.example.toml

USER gateway
EXPOSE 8080
# State (SQLite) lives in a volume; replicas use Redis instead (see docker-compose.yml).
ENV GATEWAY_STORE__URL=sqlite:////app/state/gateway-state.db
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=2).status == 200 else 1)"

# Inside a container the port must be reachable from outside it: bind 0.0.0.0. Without GATEWAY_KEYS
# the gateway refuses a non-loopback bind unless server.allow_open is set (compose sets the key).
CMD ["python", "-m", "gateway", "serve", "--host", "0.0.0.0", "--port", "8080"]
