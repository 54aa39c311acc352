#!/usr/bin/env bash
# SIGTERM to `perfkit bench` at one moment, sent as a user's shell script
# sends it (`perfkit bench ... &`, then `kill -TERM`), then watched until no
# process the bench started is left, zombies included.
#
#   benchmarks/sigterm_from_shell.sh CACHE_DIR ANCHOR OFFSET_S [bench flags...]
#
# CACHE_DIR: the bench's PERFKIT_CACHE_DIR (a fresh one makes it build the
# LiteLLM venv: ANCHOR "installing litellm[proxy]" stops it during pip).
# ANCHOR: a line of the bench's stderr to wait for ("-": its start);
# OFFSET_S: seconds after that line. Prints PASS when the bench exited 143
# and every process it started was gone within 10 s, else FAIL with what
# was left (then killed, by pid). Every process the bench starts inherits
# SIGTERM_MARK in its environment, so an orphan is found too; a zombie's
# environment cannot be read, so every pid seen is checked again with ps.
# Uses the `perfkit` on PATH, ps and bc.
set -u
cache=$1 anchor=$2 offset=$3; shift 3
work=$(mktemp -d /tmp/perfkit-sh-sigterm.XXXXXX)
mark="SIGTERM_MARK=$(cat /proc/sys/kernel/random/uuid)"
seen="$work/seen"; : > "$seen"
marked() {  # pids carrying the mark, plus the bench's direct children
  grep -lsa -- "$mark" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3
  [ -n "${bench:-}" ] && ps -o pid= --ppid "$bench" 2>/dev/null | tr -d ' '
}
remember() { marked | grep -vx "${bench:-x}" >> "$seen"; sort -un -o "$seen" "$seen"; }
left() {  # "pid stat command" of what was seen and is still there
  [ -s "$seen" ] || return 0
  ps -o pid=,stat=,args= -p "$(paste -sd, "$seen")" 2>/dev/null | cut -c1-150
}

cd "$work"
env "$mark" PERFKIT_CACHE_DIR="$cache" perfkit bench --progress off --out "$work/bench.json" "$@" \
  2> "$work/bench.log" > /dev/null &
bench=$!
start=$(date +%s.%N)
if [ "$anchor" != "-" ]; then
  until grep -qF -- "$anchor" "$work/bench.log"; do
    remember
    if ! kill -0 "$bench" 2>/dev/null; then echo "NOT REACHED: the bench ended before '$anchor'"; tail -5 "$work/bench.log"; exit 2; fi
    sleep 0.1
  done
fi
end=$(echo "$(date +%s.%N) + $offset" | bc)
while (( $(echo "$(date +%s.%N) < $end" | bc) )); do remember; sleep 0.1; done
remember
echo "moment: '${anchor}' +${offset}s ($(echo "$(date +%s.%N) - $start" | bc | cut -c1-6) s into the bench); $(wc -l < "$seen") processes started so far"
kill -TERM "$bench"
signalled=$(date +%s.%N)
code=; exit_s=; clean_s=
while :; do
  now=$(date +%s.%N); t=$(echo "$now - $signalled" | bc)
  if [ -z "$code" ] && ! kill -0 "$bench" 2>/dev/null; then wait "$bench"; code=$?; exit_s=$t; fi
  [ -z "$code" ] && remember
  if [ -n "$code" ] && [ -z "$(left)" ]; then clean_s=$t; break; fi
  (( $(echo "$t > 30" | bc) )) && break
  sleep 0.1
done
if [ -n "$clean_s" ] && (( $(echo "$clean_s <= 10" | bc) )) && [ "$code" = 143 ]; then verdict=PASS; else verdict=FAIL; fi
printf '%s exit %s after %.1f s, clean after %s s, %s processes seen\n' "$verdict" "${code:-none}" "${exit_s:-30}" \
  "$(printf '%.1f' "${clean_s:-99}")" "$(wc -l < "$seen")"
if [ "$verdict" = FAIL ]; then
  echo "left:"; left | sed 's/^/  /'
  echo "log:"; tail -8 "$work/bench.log" | sed 's/^/  /'
  # kill what was left, by pid (our own processes only)
  for pid in $(left | awk '{print $1}'); do kill -KILL "$pid" 2>/dev/null; done
  kill -KILL "$bench" 2>/dev/null
fi
echo "log tail:"; tail -3 "$work/bench.log" | sed 's/^/  /'
rm -rf "$work"
