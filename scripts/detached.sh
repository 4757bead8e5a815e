# Sourced by the scripts that start services: `detached COMMAND...` runs COMMAND with standard
# input, output and error on /dev/null and every other descriptor of the caller closed. A
# service started in the background (and the daemon it forks) otherwise keeps whatever the
# caller had open: a CI harness's lock file stayed held for hours by an SQS emulator that a test
# run had started and left running.
detached() {
  (
    for fd in /proc/$BASHPID/fd/*; do
      fd=${fd##*/}
      [ "$fd" -gt 2 ] 2>/dev/null && eval "exec $fd>&-"
    done
    exec "$@"
  ) </dev/null >/dev/null 2>&1
}
