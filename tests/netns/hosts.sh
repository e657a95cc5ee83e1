#!/usr/bin/env bash
# Simulated hosts for the scale-out tests: network namespaces on one bridge, with a private RabbitMQ in one of
# them. Needs root (ip netns).
#
#   MB_NETNS_STATE=<dir> hosts.sh up [N]        hosts broker, orch, w1..wN (N ≤ 4), the broker started; prints
#                                                the broker URL
#   MB_NETNS_STATE=<dir> hosts.sh info          key=value lines: prefix, namespaces, addresses, broker URL, node
#   MB_NETNS_STATE=<dir> hosts.sh exec <host> <cmd…>
#   MB_NETNS_STATE=<dir> hosts.sh cut <host>     / restore <host>
#   MB_NETNS_STATE=<dir> hosts.sh broker-restart
#   MB_NETNS_STATE=<dir> hosts.sh down           safe to call twice
#   MB_NETNS_STATE=<dir> hosts.sh guard <pid>    waits for <pid> to exit, then runs down and removes the
#                                                state dir (for a caller with a private state dir that may
#                                                be killed before it can clean up)
#
# Every run has its own prefix (MB_NETNS_PREFIX, else "mb<pid>"), so two runs never collide: namespaces are
# <prefix>-br (the bridge), <prefix>-broker, <prefix>-orch, <prefix>-w1…; each host has eth0 = 10.77.0.x/24, its
# peer v<host> is enslaved to the bridge in <prefix>-br. Nothing is added to the root namespace; the addresses
# can be the same in every run because each run has its own bridge.
#
# The broker is a private node (RABBITMQ_NODENAME mbtest-<prefix>@localhost) with its data, logs and cookie in
# a temp dir, no plugins, `loopback_users = none` (guest comes from other namespaces) and a listener on the
# broker's address only; epmd runs per namespace, so it never meets the system's broker.
#
# `cut` takes the bridge's end of the host's veth down: the host's own eth0 stays up with its routes, so its
# packets are dropped silently, as with a pulled cable, and only timeouts (AMQP heartbeats) notice.
set -euo pipefail

readonly SUBNET=10.77.0
readonly RABBIT_BIN=/usr/lib/rabbitmq/bin

die() {
    echo "hosts.sh: $*" >&2
    exit 1
}

state_dir() {
    [[ -n "${MB_NETNS_STATE:-}" ]] || die "set MB_NETNS_STATE to a folder that keeps this run's state"
    printf '%s' "$MB_NETNS_STATE"
}

# A value saved by `up`, or nothing when the run is gone.
saved() {
    local file
    file="$(state_dir)/$1"
    [[ -f "$file" ]] && cat "$file"
    return 0
}

need_run() {
    [[ -n "$(saved prefix)" ]] || die "no hosts are up for MB_NETNS_STATE=$(state_dir)"
}

addr_of() {
    case "$1" in
        broker) echo "$SUBNET.2" ;;
        orch) echo "$SUBNET.3" ;;
        w[1-4]) echo "$SUBNET.$((10 + ${1#w}))" ;;
        *) die "unknown host '$1' (broker, orch, w1…w4)" ;;
    esac
}

ns_of() {
    addr_of "$1" >/dev/null
    echo "$(saved prefix)-$1"
}

# The environment of the private broker, for rabbitmq-server and rabbitmqctl alike (same cookie, same node).
broker_env() {
    local tmp
    tmp="$(saved tmp)"
    echo HOME="$tmp" \
        RABBITMQ_NODENAME="$(saved node)" \
        RABBITMQ_CONF_ENV_FILE="$tmp/rabbitmq-env.conf" \
        RABBITMQ_CONFIG_FILE="$tmp/rabbitmq.conf" \
        RABBITMQ_ADVANCED_CONFIG_FILE="$tmp/advanced.config" \
        RABBITMQ_ENABLED_PLUGINS_FILE="$tmp/enabled_plugins" \
        RABBITMQ_MNESIA_BASE="$tmp/mnesia" \
        RABBITMQ_LOG_BASE="$tmp/log" \
        RABBITMQ_PID_FILE="$tmp/rabbit.pid" \
        RABBITMQ_LOGS="$tmp/log/broker.log"
}

# rabbitmqctl against the private node, run inside the broker's namespace (epmd is per namespace), bounded.
rabbitmqctl_in_broker() {
    local seconds=$1
    shift
    # shellcheck disable=SC2046 # the words of broker_env are meant to split
    timeout "$seconds" ip netns exec "$(ns_of broker)" env $(broker_env) "$RABBIT_BIN/rabbitmqctl" -q \
        -n "$(saved node)" "$@"
}

start_broker() {
    local tmp ns pid
    tmp="$(saved tmp)"
    ns="$(ns_of broker)"
    # setsid: the node must outlive the shell that started it and not get its signals.
    # shellcheck disable=SC2046
    ip netns exec "$ns" setsid env $(broker_env) "$RABBIT_BIN/rabbitmq-server" \
        >>"$tmp/log/server.out" 2>&1 </dev/null &
    pid=$!
    echo "$pid" >"$(state_dir)/broker.pid"
    # await_startup fails at once while the node is not registered with epmd yet, so it is retried.
    local deadline=$((SECONDS + 120))
    until rabbitmqctl_in_broker 60 await_startup >/dev/null 2>&1; do
        if ! alive "$pid" || ((SECONDS > deadline)); then
            tail -n 30 "$tmp/log/server.out" >&2 || true
            die "the private broker did not start (logs in $tmp/log)"
        fi
        sleep 0.2
    done
}

# Running, not a zombie: the broker's parent (the `up` that started it) is gone, and who reaps it varies.
alive() {
    [[ -r "/proc/$1/status" ]] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}

# SIGKILL to every process in a namespace.
kill_ns() {
    local pids=()
    mapfile -t pids < <(ip netns pids "$1" 2>/dev/null || true)
    ((${#pids[@]} == 0)) || kill -9 "${pids[@]}" 2>/dev/null || true
}

stop_broker() {
    local pid
    pid="$(saved broker.pid)"
    [[ -n "$pid" ]] || return 0
    # A clean stop keeps the quorum queue's log consistent; a node that does not answer is killed with all
    # its helpers (epmd starts again with the node).
    rabbitmqctl_in_broker 60 shutdown >/dev/null 2>&1 || kill_ns "$(ns_of broker)"
    local deadline=$((SECONDS + 30))
    while alive "$pid"; do
        ((SECONDS < deadline)) || kill_ns "$(ns_of broker)"
        sleep 0.1
    done
    rm -f "$(state_dir)/broker.pid"
}

add_host() {
    local prefix=$1 host=$2 ns
    ns="$prefix-$host"
    ip netns add "$ns"
    echo "$ns" >>"$(state_dir)/namespaces"
    ip -n "$ns" link set lo up
    ip -n "$prefix-br" link add "v$host" type veth peer name eth0 netns "$ns"
    ip -n "$prefix-br" link set "v$host" master br0 up
    ip -n "$ns" addr add "$(addr_of "$host")/24" dev eth0
    ip -n "$ns" link set eth0 up
}

cmd_up() {
    local workers=${1:-2} state prefix tmp
    [[ "$workers" =~ ^[1-4]$ ]] || die "up takes 1 to 4 worker hosts, not '$workers'"
    state="$(state_dir)"
    mkdir -p "$state"
    [[ -z "$(saved prefix)" ]] || die "hosts are already up for MB_NETNS_STATE=$state (run down first)"
    prefix="${MB_NETNS_PREFIX:-mb$$}"
    [[ "$prefix" =~ ^[a-zA-Z0-9]{1,12}$ ]] || die "MB_NETNS_PREFIX must be 1-12 letters or digits"
    if ip netns list | grep -q "^$prefix-"; then
        die "namespaces named $prefix-* exist already; pick another MB_NETNS_PREFIX"
    fi
    tmp="$(mktemp -d "${TMPDIR:-/tmp}/mb-netns-$prefix.XXXXXX")"
    echo "$tmp" >"$state/tmp"
    echo "$prefix" >"$state/prefix"
    echo "mbtest-$prefix@localhost" >"$state/node"
    : >"$state/namespaces"
    # A failed start leaves nothing behind.
    trap 'cmd_down >/dev/null 2>&1 || true' EXIT
    if ! ip netns add "$prefix-br" 2>"$tmp/netns.err"; then
        cat "$tmp/netns.err" >&2
        die "cannot create network namespaces (ip netns add needs root or CAP_SYS_ADMIN)"
    fi
    echo "$prefix-br" >>"$state/namespaces"
    ip -n "$prefix-br" link set lo up
    ip -n "$prefix-br" link add br0 type bridge
    ip -n "$prefix-br" link set br0 up
    local hosts=(broker orch) k
    for ((k = 1; k <= workers; k++)); do hosts+=("w$k"); done
    for host in "${hosts[@]}"; do add_host "$prefix" "$host"; done
    echo "${hosts[*]}" >"$state/hosts"

    mkdir -p "$tmp/log" "$tmp/mnesia"
    : >"$tmp/rabbitmq-env.conf"
    echo "[]." >"$tmp/enabled_plugins"
    echo "[]." >"$tmp/advanced.config"
    cat >"$tmp/rabbitmq.conf" <<EOF
loopback_users = none
listeners.tcp.1 = $(addr_of broker):5672
log.console = false
log.file.level = warning
EOF
    echo "amqp://guest:guest@$(addr_of broker):5672/%2f" >"$state/broker_url"
    start_broker
    trap - EXIT
    saved broker_url
}

cmd_info() {
    need_run
    echo "prefix=$(saved prefix)"
    echo "hosts=$(saved hosts)"
    echo "broker_url=$(saved broker_url)"
    echo "node=$(saved node)"
    echo "tmp=$(saved tmp)"
    local host
    for host in $(saved hosts); do
        echo "ns.$host=$(ns_of "$host")"
        echo "addr.$host=$(addr_of "$host")"
    done
}

cmd_exec() {
    need_run
    [[ $# -ge 2 ]] || die "exec <host> <command…>"
    local ns
    ns="$(ns_of "$1")"
    shift
    exec ip netns exec "$ns" "$@"
}

link_of() {
    need_run
    [[ $# -eq 1 ]] || die "expects one host"
    [[ " $(saved hosts) " == *" $1 "* ]] || die "no host '$1' in this run ($(saved hosts))"
    echo "v$1"
}

cmd_cut() {
    local link
    link="$(link_of "$@")"
    ip -n "$(saved prefix)-br" link set "$link" down
}

cmd_restore() {
    local link
    link="$(link_of "$@")"
    ip -n "$(saved prefix)-br" link set "$link" up
}

cmd_broker_restart() {
    need_run
    stop_broker
    start_broker
}

cmd_down() {
    local state prefix tmp ns
    state="$(state_dir)"
    prefix="$(saved prefix)"
    tmp="$(saved tmp)"
    [[ -f "$state/namespaces" ]] || return 0
    # Everything started inside a namespace (broker, epmd, workers, stray shells) goes with it.
    while read -r ns; do
        [[ -n "$ns" ]] || continue
        kill_ns "$ns"
    done <"$state/namespaces"
    local pid
    pid="$(saved broker.pid)"
    [[ -z "$pid" ]] || kill -9 "$pid" 2>/dev/null || true
    # Deleting a host's namespace deletes its veth pair, and the bridge's namespace the bridge.
    while read -r ns; do
        [[ -n "$ns" ]] || continue
        for _ in 1 2 3 4 5; do
            ip netns delete "$ns" 2>/dev/null || true
            [[ -e "/var/run/netns/$ns" ]] || break
            sleep 0.2
        done
    done <"$state/namespaces"
    [[ -z "$tmp" || ! -d "$tmp" ]] || rm -rf "$tmp"
    rm -f "$state/prefix" "$state/tmp" "$state/node" "$state/hosts" "$state/broker_url" "$state/broker.pid" \
        "$state/namespaces"
    [[ -z "$prefix" ]] || echo "hosts $prefix-* are down"
}

cmd_guard() {
    [[ $# -eq 1 && "$1" =~ ^[0-9]+$ ]] || die "guard <pid>"
    while kill -0 "$1" 2>/dev/null; do sleep 0.5; done
    cmd_down
    # The caller died with its own clean-up undone: its private state dir (configs, logs) goes too.
    rm -rf "$(state_dir)"
}

main() {
    [[ $# -ge 1 ]] || die "usage: hosts.sh up [N] | info | exec <host> <cmd…> | cut <host> | restore <host> | broker-restart | down | guard <pid>"
    local command=$1
    shift
    case "$command" in
        up) cmd_up "$@" ;;
        info) cmd_info ;;
        exec) cmd_exec "$@" ;;
        cut) cmd_cut "$@" ;;
        restore) cmd_restore "$@" ;;
        broker-restart) cmd_broker_restart ;;
        down) cmd_down ;;
        guard) cmd_guard "$@" ;;
        *) die "unknown command '$command'" ;;
    esac
}

main "$@"
