# The gateway image: the chaperone, varnishd 7.1 and the ghost VMOD, as the
# varnishgw_gateway resource's Deployment runs them. Debian 12 (bookworm)
# ships Varnish 7.1, the version ghost is built and tested against.
#
#   docker build -t registry.example.com/varnishgw/gateway:dev .
#
# Then point the class at it: varnishgw_gateway_class { image = "..." }.
# Note: the project's CI has no container runtime; this file is not built
# by `make test`.

FROM golang:1.26-bookworm AS chaperone
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/chaperone ./chaperone

FROM debian:bookworm AS ghost
RUN apt-get update && apt-get install -y --no-install-recommends \
      varnish libvarnishapi-dev libjansson-dev libpcre2-dev pkg-config make gcc python3 \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY ghost/ ./ghost/
RUN make -C ghost all

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends varnish libjansson4 ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /var/lib/varnishgw && chmod 0755 /var/lib/varnishgw
COPY --from=ghost /src/ghost/libvmod_ghost.so /usr/lib/x86_64-linux-gnu/varnish/vmods/libvmod_ghost.so
COPY --from=chaperone /out/chaperone /usr/local/bin/chaperone
# The chaperone starts varnishd, which drops to user vcache for the cache
# child and for compiling VCL.
ENTRYPOINT ["/usr/local/bin/chaperone"]
