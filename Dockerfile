# Multi-stage build: a static ctxpress binary on a distroless base.
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) -t ctxpress .
# docs/docker.md has the commands; dockerbuild_test.go runs this file's build
# stage, dockerfile_test.go checks the rest.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# -buildvcs=false: .git is not in the context (.dockerignore); the version
# is VERSION alone.
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "-s -w -X main.version=${VERSION}" -o /out/ctxpress .
# The data directory is made here because distroless has no shell to make
# it; COPY --chown below gives it to nonroot under BuildKit and the legacy
# builder alike (WORKDIR would create it root-owned under the legacy one).
RUN mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ctxpress /usr/local/bin/ctxpress
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
WORKDIR /data
# Inside the container ctxpress must listen on all interfaces; publish the
# port on the host's loopback only (see docker-compose.yml).
ENV CTXPRESS_LISTEN=0.0.0.0:8484 CTXPRESS_DB=/data/ctxpress.db
EXPOSE 8484
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 CMD ["/usr/local/bin/ctxpress", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/ctxpress"]
CMD ["serve"]
