# Generated from the server kinds internal/cluster registers (Kind.Setup,
# Kind.Compose) by `go test ./internal/cluster -run TestKindsMakefile -update`:
# do not edit; declare a kind's packages and profile in its registration.

# KIND_PKGS_MISSING adds to $$missing the Debian packages of the kinds that
# are not installed.
KIND_PKGS_MISSING = \
	{ command -v nats-server || [ -x /usr/sbin/nats-server ]; } >/dev/null 2>&1 || missing="$$missing nats-server"; \
	{ command -v pgbouncer || [ -x /usr/sbin/pgbouncer ]; } >/dev/null 2>&1 || missing="$$missing pgbouncer"; \
	{ ls /usr/lib/postgresql/*/bin/postgres; } >/dev/null 2>&1 || missing="$$missing postgresql"; \
	{ command -v redis-server; } >/dev/null 2>&1 || missing="$$missing redis-server"; \
	{ command -v redis-sentinel; } >/dev/null 2>&1 || missing="$$missing redis-sentinel"; \
	{ [ -f /usr/share/java/zookeeper.jar ]; } >/dev/null 2>&1 || missing="$$missing zookeeper";

# KIND_BUILDS are the servers scripts/build-servers.sh builds for the kinds.
KIND_BUILDS := consul etcd

# COMPOSE_PROFILES are the compose topology's profiles, one a kind.
COMPOSE_PROFILES := --profile consul --profile etcd --profile postgres --profile redis --profile zookeeper
