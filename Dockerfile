# baton: multi-stage build, slim non-root runtime with a health check.
# The same build command runs in scripts/run.sh; the same check in scripts/test.sh.

FROM rust:1-slim-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
RUN cargo build --release --locked --bin baton

FROM debian:bookworm-slim
# Unpinned on purpose: bookworm's security updates should land on rebuild.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin baton
COPY --from=build /src/target/release/baton /usr/local/bin/baton
USER 10001
# In a container, listen on every interface; point BATON_REDIS_URL at your Redis.
ENV BATON_LISTEN=0.0.0.0:8080 \
    BATON_REDIS_URL=redis://redis:6379 \
    RUST_LOG=info
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["curl", "-fsS", "http://127.0.0.1:8080/healthz"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/baton"]
