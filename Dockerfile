# sandbox-mcp as a container image: an MCP server on stdio whose sandboxes are sibling
# containers on the engine whose socket is bound in (doc/backends.md, "The server in a container"):
#
#   docker run -i --rm -v /var/run/docker.sock:/var/run/docker.sock sandbox-mcp
#
# `make image` builds it (the default target, `runtime`: compiled in the `build` stage, then
# only the runtime libraries in a Debian slim image). The `prebuilt` target takes build/sandbox-mcp
# from the build context instead of compiling, for a machine that has the binary but cannot
# fetch the -dev packages (tests/image.bats when no registry answers; the binary must be built
# against the same Debian release as BASE). The `local` target adds python3 for the local
# backend inside the container (see that stage).
ARG BASE=debian:bookworm-slim

# What the server needs at run time: libjansson, libseccomp, libbsd, and libcurl, which it
# loads when it first speaks HTTP. Installed only when BASE lacks them (an offline stand-in
# for the base may carry them already).
FROM ${BASE} AS runtime-base
RUN dpkg-query -W libjansson4 libseccomp2 libbsd0 libcurl4 ca-certificates >/dev/null 2>&1 || \
	{ apt-get update && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
		libjansson4 libseccomp2 libbsd0 libcurl4 ca-certificates && \
	  rm -rf /var/lib/apt/lists/*; }
# Sandboxes are containers of the engine: the server runs as root in its own container only to
# use the engine's socket; its sandboxes run as --sandbox-uid (65534), never as root.
ENV TMPDIR=/tmp
ENTRYPOINT ["/usr/local/bin/sandbox-mcp"]

# The engine's classic builder (no BuildKit) builds every stage before the one asked for: this
# one must not fail where the context has no build/sandbox-mcp (the Dockerfile is there only so
# that the COPY has a source then), and the stages after it are built only when asked for.
FROM runtime-base AS prebuilt
COPY Dockerfile build* /tmp/prebuilt/
RUN if [ -f /tmp/prebuilt/sandbox-mcp ]; then install -m 0755 /tmp/prebuilt/sandbox-mcp /usr/local/bin/sandbox-mcp; fi && \
	rm -rf /tmp/prebuilt

# The compiler and the libraries' headers, installed only when BASE lacks them (an offline
# stand-in for the base may carry them: tests/image-build.bats).
FROM ${BASE} AS build
RUN dpkg-query -W gcc libc6-dev make pkg-config libjansson-dev libseccomp-dev libcurl4-openssl-dev libbsd-dev \
		>/dev/null 2>&1 || \
	{ apt-get update && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
		gcc libc6-dev make pkg-config libjansson-dev libseccomp-dev libcurl4-openssl-dev libbsd-dev && \
	  rm -rf /var/lib/apt/lists/*; }
WORKDIR /src
COPY . .
RUN rm -rf build && make -j"$(nproc)" build/sandbox-mcp && install -D -m 0755 build/sandbox-mcp /out/usr/local/bin/sandbox-mcp

# `--target local`: the runtime image with python3, for the local backend inside the container
# (its sandboxes see the container's /usr). That backend needs user namespaces and a /proc of
# its own, which the engine's defaults refuse: doc/backends.md, "The local backend in a
# container", says with what to start it.
FROM runtime-base AS local
RUN dpkg-query -W python3 >/dev/null 2>&1 || \
	{ apt-get update && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 && \
	  rm -rf /var/lib/apt/lists/*; }
COPY --from=build /out/ /
ENTRYPOINT ["/usr/local/bin/sandbox-mcp", "--backend", "local"]

FROM runtime-base AS runtime
COPY --from=build /out/ /
