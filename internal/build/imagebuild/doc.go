// Package imagebuild builds the project's container images without a
// container engine, reproducibly: `make image` and `make image-check`.
//
//   - gateway: Debian 13 (trixie) with the packages of
//     image/gateway-packages.txt (varnish 7.7 and what it needs at run time,
//     its C compiler included), installed by mmdebstrap with the dpkg
//     excludes of image/dpkg-excludes.cfg; the user varnishgw (65532:65532,
//     image/varnishgw.sysusers.conf); the ghost VMOD compiled in a second
//     trixie root against the same varnish's libvarnishapi-dev (ghost is
//     $ABI strict); and the chaperone (static Go) as the entrypoint.
//   - echo: the static echo-backend server alone, a backend pod for tests.
//
// Each image is an OCI archive (package ociimage) in the output directory
// (bin/images), with NAME.json (Info: reference, digest, sizes),
// NAME.packages.txt (dpkg -l of the image) and NAME.cdx.json (a CycloneDX
// SBOM). Every timestamp is SOURCE_DATE_EPOCH, the commit time, so the same
// commit and the same Debian package versions give the same digest.
//
// The Debian roots are cached under the tool cache, keyed by the package
// versions the archive resolves the lists to (and everything else that
// shapes them); Check builds everything again without that cache and
// compares digests, then runs the image's varnishd, ghost and chaperone in
// a chroot as uid 65532.
//
// Debian packages come through a private apt configuration (its own sources,
// lists, cache and status); the machine's apt setup and state are never read
// or changed. mmdebstrap needs root (its root mode, in a private mount
// namespace).
package imagebuild
