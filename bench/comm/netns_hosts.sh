# netns_hosts.sh: two namespace "hosts" joined by a link, sourced by
# bench/comm/multihost_bench.sh and tools/commsim/veth_link.sh (and set up
# the same way as tests/multihost/multihost.sh's).
#
# hosts_up TAG NET RATE: two network namespaces (h0 at NET.1, h1 at NET.2)
# joined by a veth pair, named after TAG and this shell's pid; the link
# shaped to RATE each way with tbf (a bucket of NETNS_BURST, default 64kb:
# bursts of about one GSO packet, not of whole messages; RATE none: unshaped)
# plus netem's 20 us where the kernel has sch_netem. A GSO packet with its
# headers exceeds 64 KiB, so tbf splits it into MSS-sized ones in software,
# CPU time a NIC's segmentation offload would not cost the host; 256kb avoids
# that (bench/comm/results_hosts_tcp.md, "The tbf bucket"). Sets $work (a scratch directory, kept when KEEP
# is set), $model (the link model in words), and removes it all on exit.
# inhost N CMD...: CMD as host hN (its network namespace, a hostname, its own
# /dev/shm, IPC and pid namespaces, /etc/hosts naming h0 and h1); $uns is
# the unshare part, for scripts that enter a host another way (an rsh agent).

uns="unshare --uts --mount --ipc --pid --mount-proc --fork --kill-child --propagation private"

hosts_cleanup() {
  set +e
  for ns in "$ns0" "$ns1"; do
    ip netns pids "$ns" 2> /dev/null | xargs -r kill -9 2> /dev/null
  done
  ip netns del "$ns0" 2> /dev/null
  ip netns del "$ns1" 2> /dev/null
  ip link del "$v0" 2> /dev/null
  if [ -n "${KEEP:-}" ]; then echo "outputs kept in $work" >&2; else rm -rf "$work"; fi
}

hosts_up() {
  id=$$
  ns0=${1}h0_$id ns1=${1}h1_$id v0=${1}v0_$id v1=${1}v1_$id
  work=$(mktemp -d)
  trap hosts_cleanup EXIT
  trap 'exit 130' INT TERM
  ip netns add "$ns0"
  ip netns add "$ns1"
  ip link add "$v0" type veth peer name "$v1"
  ip link set "$v0" netns "$ns0"
  ip link set "$v1" netns "$ns1"
  ip -n "$ns0" addr add "$2.1/24" dev "$v0"
  ip -n "$ns1" addr add "$2.2/24" dev "$v1"
  model="tbf $3 (bucket ${NETNS_BURST:-64kb})"
  [ "$3" = none ] && model="veth unshaped"
  for n in 0 1; do
    eval "h_ns=\$ns$n h_v=\$v$n"
    ip -n "$h_ns" link set lo up
    ip -n "$h_ns" link set "$h_v" up
    [ "$3" = none ] && continue
    ip netns exec "$h_ns" tc qdisc add dev "$h_v" root handle 1: tbf rate "$3" burst "${NETNS_BURST:-64kb}" latency 10ms
    if ip netns exec "$h_ns" tc qdisc add dev "$h_v" parent 1:1 handle 10: \
      netem delay 20us 2> /dev/null; then
      model="tbf $3 (bucket ${NETNS_BURST:-64kb}) + netem 20us"
    fi
  done
  case "$model" in *netem*) ;; tbf*) model="$model (no sch_netem in this kernel: no added latency)" ;; esac
  printf '%s.1 h0\n%s.2 h1\n127.0.0.1 localhost\n' "$2" "$2" > "$work/hosts"
}

inhost() {
  i_n=$1
  shift
  eval "i_ns=\$ns$i_n"
  timeout -k 5 600 ip netns exec "$i_ns" $uns sh -c \
    'hostname "$0" && mount -t tmpfs dtshm /dev/shm && mount --bind "$1" /etc/hosts &&
     shift && exec "$@"' "h$i_n" "$work/hosts" "$@"
}
