# The prodigy-action container image: a Debian base with git, the
# prodigy-action binary and Claude Code (its native binary, at a pinned
# version), so `claude:` steps run with only ANTHROPIC_API_KEY set.
#
# The binary and Claude Code are prepared on the host and copied in, so the
# build needs no compiler, no npm and no network besides the base image
# (and apt, if the base lacks git):
#
#   .ci/image-context build/image          # go build + Claude Code from npm
#   docker build -f Dockerfile -t prodigy-action build/image
#
# The context holds linux/<arch>/prodigy-action and claude/<arch>/, the
# layout of GoReleaser's dockers_v2, which builds this file for linux/amd64
# and linux/arm64 in releases (.goreleaser.yaml); CI builds it with a base
# image made by debootstrap (BASE_IMAGE=...) and the classic builder, which
# needs --build-arg TARGETPLATFORM=linux/amd64 --build-arg TARGETARCH=amd64. No `# syntax=` line on purpose: the classic
# builder and BuildKit both read it without pulling a frontend image.
#
# GitHub runs container actions as root with the workspace mounted at
# /github/workspace: no USER and no WORKDIR here on purpose.

# debian:bookworm-slim (multi-arch index). Refresh with
#   docker buildx imagetools inspect debian:bookworm-slim
ARG BASE_IMAGE=debian:bookworm-slim@sha256:3783cc01769c7b2b1b83a5c5ad96c815348e28ed7da68e2e3687004faa906251
FROM ${BASE_IMAGE}

# Set by BuildKit/buildx; the classic builder needs them as --build-arg.
ARG TARGETPLATFORM
ARG TARGETARCH
# git >= 2.38 is needed for `git merge-tree --write-tree`; bookworm has 2.39.
RUN set -eu; \
    if ! command -v git >/dev/null || ! command -v bash >/dev/null || [ ! -e /etc/ssl/certs/ca-certificates.crt ]; then \
      apt-get update; \
      DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends git ca-certificates bash; \
      rm -rf /var/lib/apt/lists/*; \
    fi; \
    git --version

COPY ${TARGETPLATFORM}/prodigy-action /usr/local/bin/prodigy-action
# claude/<arch>/claude is the native executable of the npm package
# @anthropic-ai/claude-code-linux-<x64|arm64> at the version recorded next to it.
COPY claude/${TARGETARCH}/ /usr/local/lib/claude-code/
RUN ln -s /usr/local/lib/claude-code/claude /usr/local/bin/claude && claude --version
ENV DISABLE_AUTOUPDATER=1
ENTRYPOINT ["/usr/local/bin/prodigy-action"]
