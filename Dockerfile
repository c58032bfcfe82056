# eosctl in a small image: built with the Go toolchain go.mod names, run
# from a static distroless base (no shell, no package manager, non-root).
#   docker build -t eosctl .
#   docker run --rm eosctl --help
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/eosctl ./cmd/eosctl

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/eosctl /usr/local/bin/eosctl
USER nonroot:nonroot
# 9464: eosctl run --metrics-addr; 9465: eosctl monitor --metrics-addr.
EXPOSE 9464 9465
ENTRYPOINT ["/usr/local/bin/eosctl"]
CMD ["--help"]
