# Multi-stage build: a static ctxpress binary on a distroless base.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/ctxpress .

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ctxpress /usr/local/bin/ctxpress
WORKDIR /data
# Inside the container ctxpress must listen on all interfaces; publish the
# port on the host's loopback only (see docker-compose.yml).
ENV CTXPRESS_LISTEN=0.0.0.0:8484
EXPOSE 8484
ENTRYPOINT ["/usr/local/bin/ctxpress"]
CMD ["serve"]
