# syntax=docker/dockerfile:1
# Multi-stage build of the prodigy-action container action.
#   docker build -t prodigy-action .
#   docker build --build-arg INSTALL_CLAUDE=true -t prodigy-action:claude .
# GitHub runs container actions as root with the workspace mounted at
# /github/workspace: no USER and no WORKDIR here on purpose.

FROM golang:1.26-alpine AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOTOOLCHAIN=local
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN go build -trimpath -ldflags="-s -w" -o /out/prodigy-action ./cmd/action

FROM alpine:3.22
ARG INSTALL_CLAUDE=false
ARG CLAUDE_CODE_VERSION=latest
# git >= 2.38 is needed for `git merge-tree --write-tree`; alpine 3.22 ships 2.49.
RUN apk add --no-cache git ca-certificates bash \
    && if [ "$INSTALL_CLAUDE" = "true" ]; then \
         apk add --no-cache nodejs npm \
         && npm install -g "@anthropic-ai/claude-code@${CLAUDE_CODE_VERSION}" \
         && npm cache clean --force; \
       fi
COPY --from=build /out/prodigy-action /usr/local/bin/prodigy-action
ENTRYPOINT ["/usr/local/bin/prodigy-action"]
