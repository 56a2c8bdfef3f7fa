#!/usr/bin/env bash
# send-brief.sh — post the estate digest when a run fails. Wire it as a command hook:
#
#   [[hook.on_pipeline_error]]
#   command = "/srv/analytics/send-brief.sh"
#   on_failure = "warn"
#
# The hook receives the event context as JSON on stdin (read here for the pipeline and run id). The
# hook runs next to rocky.toml, with the run's environment, so SLACK_WEBHOOK_URL comes from there.
set -uo pipefail
cd "${ROCKY_PROJECT_DIR:-/srv/analytics}"

context="$(cat)"
pipeline="$(printf '%s' "$context" | jq -r '.pipeline')"
run_id="$(printf '%s' "$context" | jq -r '.run_id')"

# Pass --output md explicitly: when stdout is not a terminal (a hook, a pipe, a cron job), rocky defaults
# to JSON, so you must ask for markdown for the digest.
digest="$(rocky brief --since 24h --output md)"

curl -fsS -X POST "$SLACK_WEBHOOK_URL" \
  -H 'Content-Type: application/json' \
  --data "$(jq -n --arg text "Pipeline \`$pipeline\` failed (\`$run_id\`)"$'\n\n'"$digest" '{text: $text}')"
