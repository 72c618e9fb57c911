# hamaster — the two commands a new user needs are `make demo` and `make check`.
CARGO ?= cargo
BIN := target/debug/hamaster
VIP_BIN := target/debug/hamaster-vip
# The tests that need root, namespaces, etcd and Pacemaker (Cargo.toml's root-tests).
ROOT := --features root-tests
# Tests, benchmarks and the demo never see this host's own watchdog (see the script).
LAB := scripts/without-host-watchdog

.PHONY: all build deps ocf docs golden check lint test check-etcd-fixed check-generations check-systemd check-guard check-watchdog check-sbd check-cluster demo bench bench-guard bench-phases bench-failover bench-watchdog bench-observe bench-outage bench-switchover bench-clients rpm check-rpm clean

all: build

deps:
	scripts/install-deps

build:
	$(CARGO) build

# The OCF provider directory for tests and bind mounts, laid out as the RPM's: vip is the
# agent's own program (src/bin/hamaster-vip.rs), master a link to hamaster.
ocf: build
	mkdir -p target/ocf/resource.d/hamaster
	ln -sfn $(abspath $(VIP_BIN)) target/ocf/resource.d/hamaster/vip
	ln -sfn $(abspath $(BIN)) target/ocf/resource.d/hamaster/master

# Regenerates docs/reference.md from the parameter tables (a test fails when it is stale).
docs: build
	$(BIN) docs reference > docs/reference.md

# Regenerates the golden meta-data copies that tests compare against.
golden: build
	$(BIN) ocf vip meta-data > ocf/vip.xml
	$(BIN) ocf master meta-data > ocf/master.xml

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets $(ROOT) -- -D warnings

# The guard's deadline at the default lease (10 s) and the systemd tests wait far more than
# they compute, each in namespaces, etcd and systemd of its own: they run this many at a time on
# two cores. Tests at lease_ttl 3 (the guard's phases, the master agent's) run two at a time, as
# cargo test runs them: with four, clean-clone runs saw a key taken too late to raise and a
# promote miss its bound. Cluster and VM scenarios, which compute (Pacemaker, qemu's
# emulation) and time failovers, run one at a time.
WAITING := 4

test:
	rm -f target/action-durations.tsv
	$(LAB) $(CARGO) test --workspace $(ROOT)

check: deps lint test check-etcd-fixed check-rpm check-generations check-systemd check-guard check-watchdog check-sbd check-cluster
	@echo; echo "Worst agent action durations against their timeouts (all tests above):"
	@scripts/action-durations

# The guard's tests against an etcd with the fix for etcd issue 15247 (Debian trixie's
# etcd-server 3.5.16, unpacked under /var/tmp by scripts/fetch-etcd-fixed) as well as
# Debian bookworm's 3.4.23, which `make test` runs: the guard's phases, and those of the master
# agent's tests whose outcome etcd decides (its leases, members, leader, TLS, outages); the
# rest (health checks, the VIP, systemd, scores, bad input) do not depend on etcd's release.
# Then docs/runbook.md's etcd restore, which needs 3.5's etcdutl, and docs/getting-started.md
# walked whole on a lab cluster (its etcd floor is 3.5.13).
ETCD_TESTS := etcd leader lease two_nodes promote_monitor holder_crash frozen deep_monitor mutual_tls
check-etcd-fixed: deps
	HAMASTER_TEST_ETCD=$$(scripts/fetch-etcd-fixed) $(LAB) $(CARGO) test $(ROOT) --test guard_phases -- --test-threads=2
	HAMASTER_TEST_ETCD=$$(scripts/fetch-etcd-fixed) $(LAB) $(CARGO) test $(ROOT) --test master_agent -- --test-threads=2 $(ETCD_TESTS)
	HAMASTER_TEST_ETCD=$$(scripts/fetch-etcd-fixed) $(LAB) $(CARGO) test $(ROOT) --test etcd_restore -- --ignored --nocapture
	HAMASTER_TEST_ETCD=$$(scripts/fetch-etcd-fixed) $(LAB) $(CARGO) test $(ROOT) --test takeover -- --test-threads=2 etcd_with_authentication an_idle_clients
	HAMASTER_TEST_ETCD=$$(scripts/fetch-etcd-fixed) $(LAB) $(CARGO) test $(ROOT) --test getting_started -- --ignored --nocapture

# Each cluster generation with the RPM's glibc-2.17 binary: Debian roots (scripts/make-root:
# bullseye = RHEL 8.4's Pacemaker 2.0.5 / pcs 0.10.8, trixie = RHEL 10's 3.0.0 / 0.12.0; cached
# under /var/tmp) checked against their own pcs and schema, then a live 3-node cluster in
# each (the root's daemons under chroot in the node namespaces) and one on the host.
check-generations: deps
	$(LAB) $(CARGO) test $(ROOT) --test generations -- --ignored --test-threads=1 --nocapture

# service= mode against a real systemd: Debian trixie's systemd 257 as PID 1 of its own
# namespaces in a lab node's network namespace (scripts/make-systemd-root, cached under
# /var/tmp; scripts/systemd-ns): a slow ExecStop, daemon-reexec during a stop, failing units,
# the packaged takeover unit (Type=notify, static).
check-systemd: deps
	$(LAB) $(CARGO) test $(ROOT) --test systemd -- --ignored --test-threads=$(WAITING) --nocapture

# The watchdog on a real (emulated) i6300esb in a qemu VM (software emulation), etcd outside it:
# a frozen guard's node is reset before etcd drops the key; a step-down disarms it.
check-watchdog: deps
	$(LAB) $(CARGO) test $(ROOT) --test watchdog_vm -- --ignored --test-threads=1 --nocapture

# sbd (watchdog-only, Debian's, fetched not installed) and hamaster on one node, a qemu VM in a
# lab cluster with fencing on: the node cut off is reset by sbd while hamaster's lease ends.
check-sbd: deps
	$(LAB) $(CARGO) test $(ROOT) --test sbd_vm -- --ignored --test-threads=1 --nocapture

# Builds the RPM and tests it (its file list; the unpacked agents with ocf-tester, pcs, crm).
check-rpm: deps
	$(LAB) $(CARGO) test $(ROOT) --test rpm -- --ignored --test-threads=1

# The guard's promise at the DEFAULT lease settings (and at lease_ttl 3), timed from etcd's side:
# master link silent, guard SIGKILLed or SIGSTOPped, compaction, a revoked lease (about 2 min, four at a time).
check-guard: deps
	$(LAB) $(CARGO) test $(ROOT) --test guard_deadline -- --ignored --test-threads=$(WAITING) --nocapture

# Real Pacemaker clusters in namespaces, one scenario at a time (the lab's fence agent, and
# fence_ipmilan through simulated BMCs); the timings table at the end.
check-cluster: deps
	rm -f target/cluster-timings.md
	$(LAB) $(CARGO) test $(ROOT) --test cluster -- --ignored --test-threads=1
	$(LAB) $(CARGO) test $(ROOT) --test ipmi -- --ignored --test-threads=1
	$(LAB) $(CARGO) test $(ROOT) --test etcd_outage -- --ignored --test-threads=1
	$(LAB) $(CARGO) test $(ROOT) --test upgrade -- --ignored --test-threads=1
	@echo; echo "Cluster scenario timings:"; cat target/cluster-timings.md

# The main job: a 3-node Pacemaker cluster in namespaces, the master created with pcs, its node
# crashed, the failover measured. scripts/demo-vip shows the vip agent alone.
demo: deps build
	HAMASTER_BIN=$(abspath $(BIN)) $(LAB) $(CARGO) run --example demo

bench: deps
	$(CARGO) build --release --example exec_floor
	$(LAB) $(CARGO) bench --bench vip_vs_ipaddr2
	$(LAB) $(CARGO) bench --bench master
	$(LAB) $(CARGO) bench --bench guard
	$(LAB) $(CARGO) bench --bench phases
	$(LAB) $(CARGO) bench --bench watchdog
	$(LAB) $(CARGO) bench --bench observe

# The watchdog's figures alone (about 2 minutes): a frozen guard's node reset by the emulated
# i6300esb in a qemu VM, and the reset's lead over etcd's deletion of the key.
bench-watchdog: deps build
	$(LAB) $(CARGO) bench --bench watchdog

# Issue 19's figures alone (about 5 minutes): the guard's CPU and memory with /metrics scraped
# every second, a VIP conflict's detection, and the VIP deleted → failure recorded by Pacemaker.
bench-observe: deps
	$(LAB) $(CARGO) bench --bench observe

# The guard machine's figures alone (about 4 minutes): key deleted during a raise, lease
# revoked while leading, at the default lease settings.
bench-phases: deps
	$(LAB) $(CARGO) bench --bench phases

# The guard's deadline figures alone (about 10 minutes): lead over etcd's key deletion at the
# defaults, SIGKILLed guard, deadline -> VIP gone with both cores busy.
bench-guard: deps
	$(LAB) $(CARGO) bench --bench guard

# Failover of hamaster vs the IPaddr2 baseline on lab clusters, fencing on (about 75 minutes):
# service killed on the master (BENCH_ONLY=kill, ~12 min), then crash/partition/split
# (BENCH_ONLY=crash), then the peers side by side: keepalived and vip-manager on the same lab
# and faults (BENCH_ONLY=peers, ~30 min). BENCH_ONLY=tuning measures crash failover per
# corosync/lease profile for docs/tuning.md.
bench-failover: deps
	$(LAB) $(CARGO) bench --bench failover

# An etcd outage on fenced clusters: hamaster (auto, fence) and the IPaddr2 group side by side.
bench-outage: deps
	$(LAB) $(CARGO) bench --bench outage

# Planned switchover (about 15 minutes): pcs node standby, pcs resource move and hamaster
# switchover, hamaster (cold) and the IPaddr2 group side by side, the service listening at once
# and after 3 s.
bench-switchover: deps
	$(LAB) $(CARGO) bench --bench switchover

# The clients' side of a failover (issue 53, about 15 minutes): idle connections and a host
# that ignores gratuitous ARP, through a crash, a partition and a planned move of hamaster, the
# IPaddr2 group and keepalived at its defaults.
bench-clients: deps
	$(LAB) $(CARGO) bench --bench clients

# Binary and source RPM into target/rpm/ (vendored crates, offline build).
rpm: deps
	scripts/build-rpm

clean:
	$(CARGO) clean
