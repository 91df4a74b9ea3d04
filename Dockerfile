# Multi-stage build. cgo stays on: go-nvml loads libnvidia-ml.so at run time
# (the NVIDIA container runtime mounts it), so the binary links glibc and the
# runtime image must carry it: distroless/base, not static.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# .git stays out of the build context (.dockerignore), so the revision and
# branch come in as arguments:
#   docker build --build-arg VERSION=$(git describe --tags --always) \
#     --build-arg REVISION=$(git rev-parse HEAD) --build-arg BRANCH=$(git branch --show-current) .
ARG VERSION=dev
ARG REVISION=unknown
ARG BRANCH=unknown
RUN CGO_ENABLED=1 CGO_CFLAGS="-O2 -Wno-deprecated-declarations" \
    go build -trimpath -ldflags "-s -w \
      -X github.com/prometheus/common/version.Version=${VERSION} \
      -X github.com/prometheus/common/version.Revision=${REVISION} \
      -X github.com/prometheus/common/version.Branch=${BRANCH}" \
    -o /out/headroom ./cmd/headroom

FROM gcr.io/distroless/base-debian12:nonroot
COPY --from=build /out/headroom /usr/bin/headroom
USER nonroot:nonroot
EXPOSE 9835
ENTRYPOINT ["/usr/bin/headroom"]
CMD ["serve", "--config.file=/etc/headroom/headroom.yml"]
