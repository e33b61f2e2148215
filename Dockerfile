# mcpvisor as a container: `mcpvisor serve --http` (docs/deploy.md).
#
#   docker build -t mcpvisor .
#   docker run -p 8080:8080 -e MCPVISOR_SERVE_TOKEN=... \
#     -v $PWD/servers.toml:/etc/mcpvisor/servers.toml:ro mcpvisor
#
# The servers mcpvisor supervises run inside this container: add the
# runtimes they need (node, python) in an image built FROM this one, or
# configure remote (http) servers only.

FROM rust:1.89-slim-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin mcpvisor \
 && cp target/release/mcpvisor /usr/local/bin/mcpvisor

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates tini \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /var/lib/mcpvisor --create-home mcpvisor
COPY --from=build /usr/local/bin/mcpvisor /usr/local/bin/mcpvisor
USER 10001
EXPOSE 8080
# tini reaps any process a server leaves behind and passes SIGTERM on, so
# the gateway drains its calls before it stops.
ENTRYPOINT ["/usr/bin/tini", "--", "mcpvisor"]
CMD ["--config", "/etc/mcpvisor/servers.toml", "serve", "--http", "0.0.0.0:8080"]
