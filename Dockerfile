# The gateway image for those who build images with Docker (or podman,
# buildah): the chaperone, varnishd 7.7 from Debian 13 (trixie) and the
# ghost VMOD, with the same packages, files and paths as `make image`,
# which builds it without a container engine and reproducibly
# (design/image.md). Both read the lists in image/, and a test
# (internal/build/imagebuild, TestDockerfile) checks that they agree. Only the
# SBOM (/usr/share/varnishgw/sbom.cdx.json) is make image's alone.
#
#   docker build -t registry.example.com/varnishgw/gateway:dev .
#
# Then point the class at it: varnishgw_gateway_class { image = "..." }.
# The project's CI has no container engine: it builds and tests the image
# with make image; this file is not built there.

FROM golang:1.26-trixie AS chaperone
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/chaperone ./chaperone

# ghost declares $ABI strict: it is built against the libvarnishapi-dev of
# the very varnish the image installs (both from Debian 13).
FROM debian:trixie AS ghost
COPY image/ghost-build-packages.txt /tmp/ghost-build-packages.txt
RUN apt-get update \
    && sed 's/#.*//' /tmp/ghost-build-packages.txt | xargs apt-get install -y --no-install-recommends \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY ghost/ ./ghost/
RUN make -C ghost all

FROM debian:trixie-slim
COPY image/dpkg-excludes.cfg /etc/dpkg/dpkg.cfg.d/varnishgw
COPY image/gateway-packages.txt /tmp/gateway-packages.txt
RUN apt-get update \
    && sed 's/#.*//' /tmp/gateway-packages.txt | xargs apt-get install -y --no-install-recommends \
    && rm -rf /var/lib/apt/lists/* /tmp/gateway-packages.txt \
    && mkdir -p /usr/share/varnishgw \
    && COLUMNS=200 dpkg -l > /usr/share/varnishgw/packages.txt
COPY image/varnishgw.sysusers.conf /usr/lib/sysusers.d/varnishgw.conf
RUN systemd-sysusers /usr/lib/sysusers.d/varnishgw.conf \
    && install -d -o 65532 -g 65532 -m 0755 /var/lib/varnishgw
COPY --from=ghost /src/ghost/libvmod_ghost.so /usr/lib/x86_64-linux-gnu/varnish/vmods/libvmod_ghost.so
COPY --from=chaperone /out/chaperone /usr/local/bin/chaperone
USER 65532:65532
WORKDIR /var/lib/varnishgw
ENTRYPOINT ["/usr/local/bin/chaperone"]
