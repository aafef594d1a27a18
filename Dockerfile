# baton: a small, non-root image with a stripped binary and a health check
# that needs no curl. Dependencies are built in their own layer (cargo-chef),
# so a change to baton's source rebuilds only baton.
# The build command is scripts/run.sh's; tests/docker/run.sh checks this file.

FROM rust:1-slim-bookworm AS chef
RUN cargo install cargo-chef --locked --version 0.1.78
WORKDIR /src

# The recipe: Cargo.toml, Cargo.lock and the crate layout, nothing else. The
# workspace's other member, tests/support (the tests' shared crate), is only
# read, for the workspace: the builds below build baton alone.
FROM chef AS planner
COPY . .
RUN cargo chef prepare --recipe-path recipe.json

FROM chef AS build
COPY --from=planner /src/recipe.json recipe.json
# Cached until the dependencies change.
RUN cargo chef cook --release --locked --recipe-path recipe.json
COPY . .
# The context has no .git: `baton --version` and baton_build_info name the
# revision given here (docker build --build-arg BATON_GIT_REVISION=$(git rev-parse --short HEAD) .).
ARG BATON_GIT_REVISION=unknown
RUN cargo build --release --locked --bin baton

# glibc, libgcc and CA certificates (for rediss://), no shell, no package manager.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/baton /usr/local/bin/baton
# In a container, listen on every interface; point BATON_REDIS_URL at your Redis.
ENV BATON_LISTEN=0.0.0.0:8080 \
    BATON_REDIS_URL=redis://redis:6379 \
    RUST_LOG=info
EXPOSE 8080
USER 65532:65532
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["/usr/local/bin/baton", "healthcheck"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/baton"]
