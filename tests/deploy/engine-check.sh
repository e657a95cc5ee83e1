#!/bin/bash
# The manual engine check of deploy/seccomp-minibot.json (docs/deploy.md, "The sandbox in containers"): the real
# minibot-sandbox in a Podman container, under Docker's default seccomp profile and under this one, with and
# without Docker's covered /proc. Run as root from the repository root on a Debian machine:
#
#   apt-get install -y --no-install-recommends podman runc
#   cargo build -p minibot-sandbox
#   bash tests/deploy/engine-check.sh [path/to/minibot-sandbox]
#
# Expected: the default profile refuses the unshare, the profile with the covered /proc refuses the new /proc, and
# the profile with systempaths=unconfined gives "namespaces_refused":null and runs a command, which can chmod in
# its writable folder but not a file of its own outside it (read-only file system). No image is pulled: the
# container is the host's /usr on an empty root. runc, not crun: Debian's crun 1.8 refuses hosts with cgroup v1 and
# v2 mixed. The limits are the host's own, which a root without CAP_SYS_RESOURCE cannot raise (Podman itself lowers
# its process limit to 32768).
set -eu
helper=${1:-${CARGO_TARGET_DIR:-target}/debug/minibot-sandbox}
[ -x "$helper" ] || { echo "no $helper: cargo build -p minibot-sandbox" >&2; exit 1; }
profile=$(pwd)/deploy/seccomp-minibot.json
docker_default=$(pwd)/tests/deploy/moby-seccomp-default.json
root=$(mktemp -d)
chmod 755 "$root"
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/etc" "$root/tmp/work" "$root/proc" "$root/dev" "$root/sys" "$root/usr" "$root/app"
chmod 1777 "$root/tmp"
chown 10001:10001 "$root/tmp/work"
touch "$root/tmp/outside"
chown 10001:10001 "$root/tmp/outside"
for l in bin lib lib64 sbin; do ln -s "usr/$l" "$root/$l"; done
printf 'root:x:0:0::/root:/bin/sh\nminibot:x:10001:10001::/tmp:/usr/sbin/nologin\n' >"$root/etc/passwd"
printf 'root:x:0:\nminibot:x:10001:\n' >"$root/etc/group"
cp "$helper" "$root/app/minibot-sandbox"
nofile=$(ulimit -Hn)
nproc=$(ulimit -Hu)
[ "$nproc" = unlimited ] || [ "$nproc" -gt 32768 ] && nproc=32768

run() {
  podman --runtime runc run --rm -i --network none --user 10001:10001 -v /usr:/usr:ro \
    --ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc" "$@"
}
probe() {
  echo "== $*"
  run "$@" --rootfs "$root" /app/minibot-sandbox --probe
}
probe --security-opt "seccomp=$docker_default"
probe --security-opt "seccomp=$profile"
probe --security-opt "seccomp=$profile" --security-opt systempaths=unconfined

echo "== a command, seccomp=$profile systempaths=unconfined"
python3 - <<'EOF' >"$root/request"
import json, struct, sys
work = "/tmp/work"
request = {
    "policy": {"read_write": [work], "hidden": ["/etc/group"], "network": False, "namespaces": True,
               "limits": None, "temp": {"path": work, "bytes": 1048576}},
    "argv": ["/bin/sh", "-c", "echo pids: $(ls /proc | grep -c '^[0-9]'); df -h /tmp/work | tail -1; "
             "cat /etc/group 2>/dev/null || echo hidden file refused; "
             "touch kept && chmod 600 kept && echo chmod in the writable folder: ok; chmod 600 /tmp/outside 2>&1"],
    "env": [["PATH", "/usr/bin:/bin"]],
    "cwd": work,
}
data = json.dumps(request).encode()
sys.stdout.buffer.write(struct.pack("<I", len(data)) + data)
EOF
run --security-opt "seccomp=$profile" --security-opt systempaths=unconfined --rootfs "$root" \
  /app/minibot-sandbox --run <"$root/request"
