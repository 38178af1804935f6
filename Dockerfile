# Fairway's container image: the static fairway binary on distroless (no
# shell, no package manager), as a non-root user. Every command is one
# image: docker run fairway coordinator | executor | web | migrate | ...
#
#   docker build -t fairway .
#
# Configuration comes from FAIRWAY_* environment variables (README
# "Configuration"); deploy/compose and deploy/kubernetes use it.

FROM golang:1.26 AS build
# The commit 'fairway version' shows: .git stays out of the build context
# (.dockerignore), so pass it:
#   docker build --build-arg COMMIT=$(git rev-parse HEAD) --build-arg COMMIT_TIME=$(git log -1 --format=%cI) -t fairway .
ARG COMMIT=""
ARG COMMIT_TIME=""
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# /healthcheck is compose's health check: the final image has no curl.
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X github.com/fairwayhq/fairway/internal/cli.commit=${COMMIT} -X github.com/fairwayhq/fairway/internal/cli.commitTime=${COMMIT_TIME}" -o /out/fairway ./cmd/fairway \
 && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/healthcheck ./deploy/healthcheck

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/fairway /out/healthcheck /
# nonroot (65532) by number, so that Kubernetes' runAsNonRoot can check it.
USER 65532:65532
# 7878: executor (executor.http-addr), 7879: coordinator (--metrics-addr),
# 8090: fairway web (web.addr).
EXPOSE 7878 7879 8090
ENTRYPOINT ["/fairway"]
