#!/usr/bin/env bash
# rocky-run.sh — run a pipeline and route notifications by exit code.
#
#   0    success                       stay quiet
#   2    partial success               #data-partial (a ticket: some models or a check failed, the rest landed)
#   130  interrupted (deploy, reboot)  informational, stay quiet
#   *    hard failure                  #data-oncall (a page)
#
# Routing exit 1 and exit 2 to the same place trains people to ignore the alert; keep them apart.
# --output json appends the full per-model result to the log, so the on-call sees which models failed
# without re-running anything.
#
# Settings (environment; the defaults are the layout the docs use):
#   ROCKY_PROJECT_DIR  the project (rocky.toml)               default /srv/analytics
#   ROCKY_RUN_LOG      where results and logs are appended    default /var/log/rocky/analytics.log
#   ROCKY_BIN          the rocky executable                    default rocky (on PATH)
#   ROCKY_ENV_FILE     KEY=VALUE file sourced first: cron and systemd start with a nearly empty
#                      environment, and an unset ${VAR} referenced by rocky.toml fails the run (exit 1)
#   ROCKY_NOTIFY_CMD   a program run as `$ROCKY_NOTIFY_CMD <channel> <message>` instead of notify() below
# Arguments are passed on to `rocky run` (e.g. rocky-run.sh --pipeline orders).
set -uo pipefail

ROCKY_PROJECT_DIR="${ROCKY_PROJECT_DIR:-/srv/analytics}"
ROCKY_RUN_LOG="${ROCKY_RUN_LOG:-/var/log/rocky/analytics.log}"
ROCKY_BIN="${ROCKY_BIN:-rocky}"

# Replace notify with your curl to Slack, your mail command, or whatever you already use.
notify() {
  local channel="$1" message="$2"
  if [ -n "${ROCKY_NOTIFY_CMD:-}" ]; then
    "$ROCKY_NOTIFY_CMD" "$channel" "$message"
  elif [ -n "${SLACK_WEBHOOK_URL:-}" ] && command -v jq >/dev/null; then
    curl -fsS -X POST "$SLACK_WEBHOOK_URL" -H 'Content-Type: application/json' \
      --data "$(jq -n --arg channel "$channel" --arg text "$message ($(hostname))" \
                 '{channel: $channel, text: $text}')" >/dev/null
  else
    # No notifier configured: stderr, which cron mails and journald keeps.
    echo "rocky-run.sh [$channel] $message" >&2
  fi
}

if [ -n "${ROCKY_ENV_FILE:-}" ]; then
  set -a
  # shellcheck source=/dev/null
  . "$ROCKY_ENV_FILE"
  set +a
fi

cd "$ROCKY_PROJECT_DIR" || { notify "#data-oncall" "Rocky run FAILED: cannot cd to $ROCKY_PROJECT_DIR"; exit 1; }
mkdir -p "$(dirname "$ROCKY_RUN_LOG")"

"$ROCKY_BIN" run --output json "$@" >> "$ROCKY_RUN_LOG" 2>&1
code=$?

case "$code" in
  0)   ;;                                                   # success, stay quiet
  2)   notify "#data-partial" "Rocky partial success (exit 2): a model or a check failed, run continued" ;;
  130) ;;                                                   # interrupted, informational
  *)   notify "#data-oncall" "Rocky run FAILED (exit $code)" ;;
esac

exit "$code"
